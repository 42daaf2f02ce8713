// CUPTI activity buffers to gf_kernel_record batches: the versioned CUPTI
// structs are read here, in the process, and the agent only ever sees the
// plain records of bpf/gpuflame_abi.h. Kernel names are interned: each is
// announced (by ID) before the first batch that uses it, and again at its
// next use after a new agent attaches (SayNamesAgain).
#ifndef GPUFLAME_CUPTI_ACTIVITY_CONVERTER_H_
#define GPUFLAME_CUPTI_ACTIVITY_CONVERTER_H_

#include <cupti_activity.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "bpf/gpuflame_abi.h"
#include "cupti/activity_windows.h"

namespace gpuflame::cupti {

class ActivitySink {
 public:
  virtual ~ActivitySink() = default;
  virtual void Name(uint32_t id, const char* name) = 0;
  virtual void Batch(const gf_kernel_record* records, size_t count) = 0;
  // The driver's launch calls (the launch route, bpf/gpuflame_abi.h), their
  // times on CLOCK_MONOTONIC: a sink that takes none leaves this be.
  virtual void LaunchRecords(const gf_api_record* /*records*/, size_t /*count*/) {}
};

struct ConvertStats {
  uint64_t kernels = 0;
  uint64_t memcpys = 0;
  uint64_t memsets = 0;
  uint64_t syncs = 0;  // CPU waits in synchronise calls (GF_GPU_SYNC)
  uint64_t other = 0;  // kinds we do not chart
  uint64_t batches = 0;
  uint64_t overhead_ns = 0;  // CUPTI's own cost, from its OVERHEAD records
  uint64_t launch_records = 0;  // the driver's launch calls (LaunchRecords)
  // ... not converted: no clock pair yet (SetClock), or no thread ID.
  uint64_t launch_records_unconverted = 0;
  uint64_t nccl_kernels = 0;  // of |kernels|, NCCL's (bpf/nccl_kernel_name.h)
};

// cuptiActivityGetNextRecord, passed in: the real one in the library and in
// tests (it needs no GPU), so the walk is CUPTI's own.
using NextRecordFn = CUptiResult (*)(uint8_t*, size_t, CUpti_Activity**);

class ActivityConverter {
 public:
  // Converts every record of |buffer|[0, |valid|) and hands them to |sink|
  // in batches of at most GF_KERNEL_BATCH_MAX, each weighted by the
  // window its work started in (|windows|; none: weight 1). Thread-safe
  // (CUPTI may complete buffers on several threads).
  ConvertStats Convert(uint8_t* buffer, size_t valid, NextRecordFn next, ActivitySink& sink,
                       const ActivityWindows* windows = nullptr);
  size_t names() const;
  // CUPTI's clock read between two reads of CLOCK_MONOTONIC (|mono_ns|: their
  // mean), the latest: API records' times are put on CLOCK_MONOTONIC
  // through it. CUPTI's clock is CLOCK_REALTIME here (cupti_activity.h), which
  // NTP may step: the library sets a new pair at every flush, before the
  // records of the flush are converted.
  void SetClock(uint64_t cupti_ns, uint64_t mono_ns);
  // The launch route is in use (its first window opened): buffers are
  // walked once more for their driver records first. For good.
  void SetRoute() { route_.store(true, std::memory_order_relaxed); }
  // An agent has just attached: it has heard none of the names, so each is
  // said again before the next batch that uses it (not all at once: most
  // names of a long run are of kernels that no longer run).
  void SayNamesAgain();

  static constexpr size_t kMaxNames = 1 << 16;  // beyond: "[kernel names overflow]"

 private:
  struct Name {
    uint32_t id;
    uint32_t said_in;  // the listener generation it was last said in
    bool nccl;         // NCCL's kernel: tested once, when the name is first seen
  };
  const Name& NameOf(const char* name, ActivitySink& sink);

  mutable std::mutex mu_;
  std::unordered_map<std::string, Name> ids_;
  uint32_t generation_ = 0;
  // CUPTI's clock less CLOCK_MONOTONIC (SetClock); 0: no pair yet.
  std::atomic<int64_t> cupti_minus_mono_{0};
  std::atomic<bool> route_{false};
};

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_ACTIVITY_CONVERTER_H_
