// record's "why is the GPU idle": the utilization collector hooked into the
// event loop for the recording, then its figures as summary.json's
// "utilization", the terminal's lines and the gpu_idle profile
// (profiler/utilization). The GPU lanes are on wherever kernel time is:
// CUPTI's activity is exact in record, which busy and idle gaps need. The
// driver's figures (NVML, read by a sampler thread of their own) are on
// wherever NVML loads, with or without kernel time: a process without the
// injection library still gets them.
#ifndef GPUFLAME_APP_RECORD_UTILIZATION_H_
#define GPUFLAME_APP_RECORD_UTILIZATION_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "app/record_command.h"
#include "profiler/aggregate/profile.h"
#include "profiler/pipeline/event_processor.h"
#include "profiler/utilization/gpu_sampler.h"
#include "profiler/utilization/report.h"
#include "profiler/utilization/utilization.h"

namespace gpuflame::profiler {

class RecordUtilization {
 public:
  // No lanes unless |lanes|: the pipeline stays as it was.
  RecordUtilization(bool lanes, const UtilizationRequest& request, EventProcessor& events);
  ~RecordUtilization();
  RecordUtilization(const RecordUtilization&) = delete;
  RecordUtilization& operator=(const RecordUtilization&) = delete;

  // After the last record and symbol refresh: settles every lane, judges it
  // and joins its idle gaps with the CPU samples.
  void Finish();
  // gpu_idle, when some GPU idled (after Finish).
  std::optional<Profile> IdleProfile(const absl::flat_hash_map<pid_t, std::string>& comm, int64_t time_nanos,
                                     int64_t duration_nanos) const;
  // summary.json's "utilization" value: null when neither lanes nor NVML.
  std::string SummaryJson(const absl::flat_hash_map<pid_t, std::string>& comm) const;
  // The terminal's lines: per GPU its verdict and figures, then why.
  std::vector<std::string> Lines(const absl::flat_hash_map<pid_t, std::string>& comm) const;

 private:
  // The innermost Python frame's name of each idle charge's stack, with its
  // share of |pid|'s steady idle time on |device|: the top |n|.
  std::vector<std::pair<std::string, double>> TopIdle(pid_t pid, uint32_t device, size_t n) const;
  // The |n| stacks |pid| waited longest under in synchronise calls (the
  // probes'), each as its Python frames from the outermost, ';'-joined,
  // with its share of the process's waits.
  std::vector<std::pair<std::string, double>> TopSyncStacks(pid_t pid, size_t n) const;

  // What NVML said of a lane's GPU over its steady state.
  struct LaneGpu {
    std::optional<uint32_t> index;  // NVML's; none: not known (why)
    std::string uuid;               // the device's, as the process's library said; empty: not said
    std::string why;
    utilization::DeviceStats steady;
  };
  std::vector<std::string> NvmlLines(const absl::flat_hash_map<pid_t, std::string>& comm) const;

  EventProcessor& events_;
  std::unique_ptr<utilization::Utilization> utilization_;
  std::unique_ptr<utilization::GpuSampler> sampler_;
  std::string no_nvml_;  // why NVML is not read, when it is not
  // CUPTI's synchronisation records were asked for (--sync-waits, or the
  // user's own GPUFLAME_CUPTI_KINDS): they come besides the probes' waits.
  bool sync_asked_ = false;
  std::vector<utilization::LaneReport> reports_;
  std::vector<LaneGpu> lane_gpus_;  // parallel to reports_
  utilization::IdleJoin join_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_APP_RECORD_UTILIZATION_H_
