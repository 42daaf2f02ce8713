#include "profiler/stack_table.h"

namespace gpuflame::profiler {

FrameId FrameTable::Intern(const symbolizer::Frame& f) {
  auto it = index_.find(f);
  if (it != index_.end()) return it->second;
  auto id = static_cast<FrameId>(frames_.size());
  frames_.push_back(f);
  index_.emplace(f, id);
  return id;
}

StackId StackTable::Insert(std::string_view raw, StackInfo info) {
  auto id = static_cast<StackId>(stacks_.size());
  stacks_.push_back(std::move(info));
  index_.emplace(std::string(raw), id);
  return id;
}

size_t StackTable::MemoryUsage() const {
  size_t total = stacks_.capacity() * sizeof(StackInfo);
  for (const StackInfo& s : stacks_) total += s.frames.capacity() * sizeof(FrameId);
  for (const auto& [k, v] : index_) total += k.capacity() + sizeof(k) + sizeof(v) + 1;
  return total;
}

}  // namespace gpuflame::profiler
