// CUPTI activity buffers to gf_kernel_record batches: the versioned CUPTI
// structs are read here, in the process, and the agent only ever sees the
// plain records of bpf/gpuflame_abi.h. Kernel names are interned: each is
// announced (by ID) before the first batch that uses it, and again at its
// next use after a new agent attaches (SayNamesAgain).
#ifndef GPUFLAME_CUPTI_ACTIVITY_CONVERTER_H_
#define GPUFLAME_CUPTI_ACTIVITY_CONVERTER_H_

#include <cupti_activity.h>

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
};

struct ConvertStats {
  uint64_t kernels = 0;
  uint64_t memcpys = 0;
  uint64_t memsets = 0;
  uint64_t syncs = 0;  // CPU waits in synchronise calls (GF_GPU_SYNC)
  uint64_t other = 0;  // kinds we do not chart
  uint64_t batches = 0;
  uint64_t overhead_ns = 0;  // CUPTI's own cost, from its OVERHEAD records
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
  // An agent has just attached: it has heard none of the names, so each is
  // said again before the next batch that uses it (not all at once: most
  // names of a long run are of kernels that no longer run).
  void SayNamesAgain();

  static constexpr size_t kMaxNames = 1 << 16;  // beyond: "[kernel names overflow]"

 private:
  uint32_t NameId(const char* name, ActivitySink& sink);

  struct Name {
    uint32_t id;
    uint32_t said_in;  // the listener generation it was last said in
  };
  mutable std::mutex mu_;
  std::unordered_map<std::string, Name> ids_;
  uint32_t generation_ = 0;
};

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_ACTIVITY_CONVERTER_H_
