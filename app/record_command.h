// `gpuflame record`: profile a command, some PIDs, or every CUDA process on
// the machine, then write the profiles as files plus an HTML flame graph.
#ifndef GPUFLAME_APP_RECORD_COMMAND_H_
#define GPUFLAME_APP_RECORD_COMMAND_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "app/record_nccl.h"
#include "logging/log.h"
#include "profiler/pipeline/profiling_options.h"

namespace gpuflame::profiler {

// record --timeline: a trace of what happened when (profiler/timeline,
// exporters/trace), next to the profiles.
struct TimelineRequest {
  bool on = false;
  uint64_t max_events = 1'000'000;
  uint64_t max_mb = 256;           // the JSON, before gzip
  std::vector<std::string> marks;  // frame names whose spans are phases
  // Model-loading I/O spans (bpf/io_calls.bpf.h): on with the timeline
  // unless --no-timeline-io; the filters of IoSpanOptions.
  bool io = true;
  uint64_t io_min_bytes = 64 << 10;
  uint64_t io_min_us = 1000;
  uint32_t io_max_per_process = 20000;
  // Every launch's stack (--timeline-every-launch-stack): exact stacks on
  // every launch span and exact kernel time per stack, for a Python walk
  // per launch (x1.53 step time against x1.27 sampled, H200 GPT step).
  // Otherwise launch stacks are sampled as without a timeline, and every
  // launch, copy and memset call is still an exact span with its arrow.
  bool every_launch_stack = false;
};

// Why the GPU idles (profiler/utilization): on wherever kernel time is.
struct UtilizationRequest {
  uint64_t interval_ms = 100;  // windows of the busy/idle strip and the per-window figures
  uint64_t idle_gap_ms = 5;    // a gap this long or longer is idle time
  // CUPTI's SYNCHRONIZATION records for record's own command (--sync-waits).
  // Off by default: on the H200 they added more to a launch-bound step than
  // the kernels' own records (README, "Measured"). The waits are recorded
  // anyway by the probes on the synchronise calls (bpf/cuda_sync.bpf.h),
  // which are preferred where both report (utilization.h, SyncStats).
  bool sync_waits = false;
};

struct RecordOptions {
  std::string output_dir;
  std::optional<double> duration_s;
  std::vector<pid_t> pids;
  std::vector<std::string> command;  // after `--`
  ProfilingOptions profiling;        // shared with the agent; kernel_time: inject the CUPTI library
  bool progress = true;              // only drawn on a terminal
  bool quiet = false;                // also: only errors are logged
  logging::Options log;              // record's diagnostics (text by default)
  TimelineRequest timeline;
  UtilizationRequest utilization;
  double nccl_hang_s = kDefaultNcclHangSeconds;  // an NCCL call outstanding this long is a hang
  // Probes attached for each followed process alone, not for every process
  // mapping the library (Session::Options::per_process_probes). Opt-in:
  // closing them costs the kernel a grace period each (README).
  bool per_process_probes = false;
};

// Returns the process exit status: the command's own when one was run.
int RunRecord(const RecordOptions& options);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_APP_RECORD_COMMAND_H_
