// Python stacks the BPF programs interned (gpuflame_abi.h, struct
// gf_stack_id): the frames that the first record of each stack carried
// (GF_EVF_STACK_NEW), by process and ID, for the later records that carry
// only the ID (GF_EVF_STACK_ID). BPF sends an ID alone only after the record
// with its frames is in the ring, so a miss here means that record was
// dropped (gpuflame over its memory budget) or the contract was broken;
// the caller charges such events to a marker and counts them.
//
// A process's stacks are kept until its exit or exec: BPF may name any of
// them at any time. The guardrails bound the whole (EventProcessor stops
// remembering stacks when over budget). Event-loop thread only.
#ifndef GPUFLAME_PROFILER_PIPELINE_STACK_IDS_H_
#define GPUFLAME_PROFILER_PIPELINE_STACK_IDS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "bpf/gpuflame_abi.h"

namespace gpuflame::profiler {

class KernelStackIds {
 public:
  // Keeps |frames| (whole gf_py_frames) under |id| for |pid|. The same ID
  // again (each CPU sends a stack's frames the first time it sees it, and
  // again once its cache let the ID go) keeps the first copy: the same frames.
  void Remember(uint32_t pid, const gf_stack_id& id, std::span<const uint8_t> frames);

  // The frames sent under |id| by |pid|; valid until the next Remember or Forget.
  std::optional<std::span<const uint8_t>> Find(uint32_t pid, const gf_stack_id& id) const;

  void ForgetProcess(uint32_t pid);

  size_t stacks() const { return frames_.size(); }
  size_t bytes() const { return bytes_; }

 private:
  struct Key {
    uint32_t pid;
    uint64_t lo, hi;
    bool operator==(const Key&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.pid, k.lo, k.hi);
    }
  };
  absl::flat_hash_map<Key, std::string> frames_;
  size_t bytes_ = 0;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PIPELINE_STACK_IDS_H_
