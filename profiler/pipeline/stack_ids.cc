#include "profiler/pipeline/stack_ids.h"

#include "absl/container/flat_hash_map.h"

namespace gpuflame::profiler {

void KernelStackIds::Remember(uint32_t pid, const gf_stack_id& id, std::span<const uint8_t> frames) {
  auto [it, inserted] = frames_.try_emplace(Key{pid, id.lo, id.hi});
  if (!inserted) return;
  it->second.assign(reinterpret_cast<const char*>(frames.data()), frames.size());
  bytes_ += frames.size();
}

std::optional<std::span<const uint8_t>> KernelStackIds::Find(uint32_t pid, const gf_stack_id& id) const {
  auto it = frames_.find(Key{pid, id.lo, id.hi});
  if (it == frames_.end()) return std::nullopt;
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(it->second.data()), it->second.size());
}

void KernelStackIds::ForgetProcess(uint32_t pid) {
  absl::erase_if(frames_, [&](const auto& kv) {
    if (kv.first.pid != pid) return false;
    bytes_ -= kv.second.size();
    return true;
  });
}

}  // namespace gpuflame::profiler
