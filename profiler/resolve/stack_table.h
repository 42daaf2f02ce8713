// Interning for the hot path. A raw stack (the bytes BPF sent: pid, leaf API
// and frame words) is looked up without allocating; only a stack never seen
// before is resolved to frames, once. Frames themselves are interned in a
// FrameTable so identical frames across stacks and processes share an id.
// Not thread-safe: event loop only.
#ifndef GPUFLAME_PROFILER_RESOLVE_STACK_TABLE_H_
#define GPUFLAME_PROFILER_RESOLVE_STACK_TABLE_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "symbolizer/frame.h"

namespace gpuflame::profiler {

using FrameId = uint32_t;
using StackId = uint32_t;

class FrameTable {
 public:
  FrameId Intern(const symbolizer::Frame& f);
  const symbolizer::Frame& Get(FrameId id) const { return frames_[id]; }
  size_t size() const { return frames_.size(); }
  // Native frames kept as raw addresses with a build ID: resolvable later.
  const std::vector<FrameId>& unresolved() const { return unresolved_; }
  // Names a raw frame in place: every stack holding it reads the new name.
  void Resolve(FrameId id, std::string name, std::string system_name);

 private:
  std::vector<symbolizer::Frame> frames_;
  std::vector<FrameId> unresolved_;
  absl::flat_hash_map<symbolizer::Frame, FrameId> index_;
};

struct StackInfo {
  pid_t pid = 0;
  uint8_t domain = 0;
  std::vector<FrameId> frames;  // root first, leaf (the API) last
};

class StackTable {
 public:
  // The id of |raw| if known, else kNone.
  static constexpr StackId kNone = UINT32_MAX;
  StackId Find(std::string_view raw) const {
    auto it = index_.find(absl::string_view(raw.data(), raw.size()));
    return it == index_.end() ? kNone : it->second;
  }
  StackId Insert(std::string_view raw, StackInfo info);
  // Stacks of a process that has gone and been reported for the last time:
  // their raw keys and frame lists are freed and their ids handed to later
  // stacks (a long-running agent on a node with churning processes would
  // otherwise grow by every stack it ever saw). Until reused, an id reads as
  // an empty stack of pid 0. Whoever keeps state per id (the tracker's
  // counters, time totals, a window's last values) forgets |ids| at the same
  // time, before the next event: a reused id must start from zero.
  void Retire(const std::vector<StackId>& ids);
  const StackInfo& Get(StackId id) const { return stacks_[id]; }
  // One past the largest id handed out (ids below it may be free).
  size_t size() const { return stacks_.size(); }
  size_t free_ids() const { return free_.size(); }
  size_t MemoryUsage() const;

 private:
  std::vector<StackInfo> stacks_;
  std::vector<bool> is_free_;   // per id: retired and not reused yet
  std::vector<StackId> free_;   // those ids, the next to reuse last
  absl::flat_hash_map<std::string, StackId> index_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_RESOLVE_STACK_TABLE_H_
