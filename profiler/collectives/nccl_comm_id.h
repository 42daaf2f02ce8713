// A communicator as its ranks' calls name it: the hash of its ncclUniqueId,
// the same in every rank's process (NcclTracker reads it at init).
#ifndef GPUFLAME_PROFILER_COLLECTIVES_NCCL_COMM_ID_H_
#define GPUFLAME_PROFILER_COLLECTIVES_NCCL_COMM_ID_H_

#include <cstdint>
#include <utility>

namespace gpuflame::profiler {

struct NcclCommId {
  uint64_t lo = 0, hi = 0;
  bool operator==(const NcclCommId&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const NcclCommId& id) {
    return H::combine(std::move(h), id.lo, id.hi);
  }
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_COLLECTIVES_NCCL_COMM_ID_H_
