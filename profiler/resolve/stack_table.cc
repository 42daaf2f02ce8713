#include "profiler/resolve/stack_table.h"

namespace gpuflame::profiler {

FrameId FrameTable::Intern(const symbolizer::Frame& f) {
  auto it = index_.find(f);
  if (it != index_.end()) return it->second;
  auto id = static_cast<FrameId>(frames_.size());
  frames_.push_back(f);
  index_.emplace(f, id);
  if (f.kind == symbolizer::FrameKind::kNative && f.system_name.empty() && !f.build_id.empty())
    unresolved_.push_back(id);
  return id;
}

void FrameTable::Resolve(FrameId id, std::string name, std::string system_name) {
  symbolizer::Frame& f = frames_[id];
  index_.erase(f);
  f.name = std::move(name);
  f.system_name = std::move(system_name);
  // Another id may already hold this content; interning new stacks finds
  // either, and both print alike.
  index_.try_emplace(f, id);
  std::erase(unresolved_, id);
}

StackId StackTable::Insert(std::string_view raw, StackInfo info) {
  StackId id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
    is_free_[id] = false;
    stacks_[id] = std::move(info);
  } else {
    id = static_cast<StackId>(stacks_.size());
    stacks_.push_back(std::move(info));
    is_free_.push_back(false);
  }
  index_.emplace(std::string(raw), id);
  return id;
}

void StackTable::Retire(const std::vector<StackId>& ids) {
  if (ids.empty()) return;
  std::vector<bool> retired(stacks_.size());
  for (StackId id : ids) {
    if (id >= stacks_.size() || is_free_[id]) continue;  // twice is once
    retired[id] = true;
    is_free_[id] = true;
    stacks_[id] = StackInfo{};  // frees the frame list, not just its size
    free_.push_back(id);
  }
  absl::erase_if(index_, [&](const auto& kv) { return retired[kv.second]; });
}

size_t StackTable::MemoryUsage() const {
  size_t total = stacks_.capacity() * sizeof(StackInfo) + is_free_.capacity() / 8 + free_.capacity() * sizeof(StackId);
  for (const StackInfo& s : stacks_) total += s.frames.capacity() * sizeof(FrameId);
  for (const auto& [k, v] : index_) total += k.capacity() + sizeof(std::string) + sizeof(StackId) + 1;
  return total;
}

}  // namespace gpuflame::profiler
