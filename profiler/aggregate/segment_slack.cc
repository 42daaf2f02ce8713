#include "profiler/aggregate/segment_slack.h"

#include <algorithm>

#include "base/saturating.h"

namespace gpuflame::profiler {
namespace {

// Sizes come from the profiled process: bounded as the tracker bounds its
// counters, so that sums of them never overflow.
constexpr uint64_t kMaxBytes = uint64_t{1} << 62;

int64_t Unused(uint64_t base, uint64_t end, uint64_t used) {
  const uint64_t size = end - base;
  return static_cast<int64_t>(size - std::min(used, size));
}

}  // namespace

SegmentSlack::Process* SegmentSlack::Find(uint32_t pid) {
  if (cached_ && cached_pid_ == pid) return cached_;
  auto it = processes_.find(pid);
  if (it == processes_.end()) return nullptr;
  cached_pid_ = pid;
  cached_ = it->second.get();
  return cached_;
}

SegmentSlack::Process& SegmentSlack::Get(uint32_t pid) {
  if (cached_ && cached_pid_ == pid) return *cached_;
  auto& slot = processes_[pid];
  if (!slot) slot = std::make_unique<Process>();
  cached_pid_ = pid;
  cached_ = slot.get();
  return *slot;
}

absl::btree_map<uint64_t, SegmentSlack::Segment>::iterator SegmentSlack::Holding(Process& p, uint64_t addr) {
  auto it = p.segments.upper_bound(addr);
  if (it == p.segments.begin()) return p.segments.end();
  --it;
  return addr < it->second.end ? it : p.segments.end();
}

SlackChange SegmentSlack::SetUsed(Process& p, uint64_t base, Segment& seg, uint64_t used) {
  const uint64_t size = seg.end - base;
  const int64_t before = Unused(base, seg.end, seg.used);
  const int64_t after = Unused(base, seg.end, used);
  p.tensor += static_cast<int64_t>(std::min(used, size)) - static_cast<int64_t>(std::min(seg.used, size));
  seg.used = used;
  return {seg.stack, int64_t{after > 0} - int64_t{before > 0}, after - before};
}

uint32_t SegmentSlack::AddSegment(uint32_t pid, uint64_t base, uint64_t size, StackId stack, SlackChange& change,
                                  std::vector<SlackChange>& dropped) {
  change = {};
  if (size == 0 || size > kMaxBytes || base > UINT64_MAX - size) {
    stats_.invalid_segments++;
    return 0;
  }
  return Insert(Get(pid), base, size, stack, false, change, dropped);
}

void SegmentSlack::AddMapped(uint32_t pid, uint64_t base, uint64_t size, StackId stack,
                             std::vector<SlackChange>& changes) {
  if (size == 0 || size > kMaxBytes || base > UINT64_MAX - size) {
    stats_.invalid_segments++;
    return;
  }
  SlackChange change;
  Insert(Get(pid), base, size, stack, true, change, changes);
  changes.push_back(change);
}

void SegmentSlack::RemoveMapped(uint32_t pid, uint64_t base, uint64_t size, std::vector<SlackChange>& changes) {
  Process* p = Find(pid);
  if (!p || size > kMaxBytes || base > UINT64_MAX - size) return;
  // Every mapped chunk inside the range: PyTorch unmaps free pages only.
  for (auto it = p->segments.lower_bound(base); it != p->segments.end() && it->first < base + size;) {
    if (!it->second.mapped || it->second.end > base + size) {
      ++it;
      continue;
    }
    const Segment& seg = it->second;
    const int64_t unused = Unused(it->first, seg.end, seg.used);
    changes.push_back({seg.stack, -int64_t{unused > 0}, -unused});
    p->reserved -= static_cast<int64_t>(seg.end - it->first);
    p->tensor -= static_cast<int64_t>(std::min(seg.used, seg.end - it->first));
    p->count--;
    it = p->segments.erase(it);
  }
}

uint32_t SegmentSlack::Insert(Process& p, uint64_t base, uint64_t size, StackId stack, bool mapped,
                              SlackChange& change, std::vector<SlackChange>& dropped) {
  const uint64_t end = base + size;
  // Segments never overlap on a real device: one that does means a free
  // was missed, and the older one is gone. At most every segment once.
  auto it = p.segments.lower_bound(base);
  if (it != p.segments.begin() && std::prev(it)->second.end > base) --it;
  while (it != p.segments.end() && it->first < end) {
    stats_.overlapping_segments++;
    const Segment& old = it->second;
    const int64_t unused = Unused(it->first, old.end, old.used);
    dropped.push_back({old.stack, -int64_t{unused > 0}, -unused});
    p.reserved -= static_cast<int64_t>(old.end - it->first);
    p.tensor -= static_cast<int64_t>(std::min(old.used, old.end - it->first));
    p.count--;
    it = p.segments.erase(it);
  }
  const uint32_t id = next_id_++;
  if (next_id_ == 0) next_id_ = 1;  // 0 stays "none"
  p.segments.emplace(base, Segment{end, 0, stack, id, mapped});
  base::SaturatingAdd(p.reserved, static_cast<int64_t>(size));
  p.count++;
  change = {stack, 1, static_cast<int64_t>(size)};
  return id;
}

SlackChange SegmentSlack::RemoveSegment(uint32_t pid, uint64_t base, uint32_t id) {
  Process* p = id ? Find(pid) : nullptr;
  if (!p) return {};
  auto it = p->segments.find(base);
  if (it == p->segments.end() || it->second.id != id) return {};
  const Segment& seg = it->second;
  const int64_t unused = Unused(base, seg.end, seg.used);
  p->reserved -= static_cast<int64_t>(seg.end - base);
  p->tensor -= static_cast<int64_t>(std::min(seg.used, seg.end - base));
  const SlackChange change{seg.stack, -int64_t{unused > 0}, -unused};
  p->segments.erase(it);
  p->count--;
  return change;
}

void SegmentSlack::Charge(Process& p, absl::btree_map<uint64_t, Segment>::iterator it, uint64_t addr, uint64_t bytes,
                          int sign, std::vector<SlackChange>& changes) {
  for (int chunks = 0;; chunks++) {
    Segment& seg = it->second;
    const uint64_t charged = std::min(bytes, seg.end - addr);
    uint64_t used;
    if (sign > 0)  // saturates only where blocks overlap beyond belief; Unused clamps
      used = seg.used > UINT64_MAX - charged ? UINT64_MAX : seg.used + charged;
    else
      used = seg.used > charged ? seg.used - charged : 0;
    changes.push_back(SetUsed(p, it->first, seg, used));
    bytes -= charged;
    if (bytes == 0) return;
    auto next = std::next(it);
    if (!seg.mapped || next == p.segments.end() || !next->second.mapped || next->first != seg.end) {
      if (sign > 0) stats_.blocks_past_end++;
      return;
    }
    if (chunks + 1 >= kMaxChunksPerBlock) {
      if (sign > 0) stats_.blocks_over_chunk_bound++;
      return;
    }
    addr = seg.end;
    it = next;
  }
}

uint32_t SegmentSlack::AddBlock(uint32_t pid, uint64_t addr, uint64_t bytes, std::vector<SlackChange>& changes) {
  Process& p = Get(pid);
  bytes = std::min(bytes, kMaxBytes);
  auto it = Holding(p, addr);
  if (it == p.segments.end()) {
    p.unknown_blocks++;
    base::SaturatingAdd(p.unknown_bytes, static_cast<int64_t>(bytes));  // the workload's sizes: absurd ones saturate
    return 0;
  }
  const uint32_t id = it->second.id;
  if (bytes > 0) Charge(p, it, addr, bytes, +1, changes);
  return id;
}

void SegmentSlack::RemoveBlock(uint32_t pid, uint64_t addr, uint64_t bytes, uint32_t id,
                               std::vector<SlackChange>& changes) {
  Process* p = Find(pid);
  if (!p) return;
  bytes = std::min(bytes, kMaxBytes);
  if (id == 0) {
    p->unknown_blocks = std::max<int64_t>(0, p->unknown_blocks - 1);
    p->unknown_bytes = std::max<int64_t>(0, p->unknown_bytes - static_cast<int64_t>(bytes));
    return;
  }
  auto it = Holding(*p, addr);
  if (it == p->segments.end() || it->second.id != id) {
    stats_.blocks_outlived_segment++;
    return;
  }
  if (bytes > 0) Charge(*p, it, addr, bytes, -1, changes);
}

void SegmentSlack::ForgetProcess(uint32_t pid) {
  if (Process* p = Find(pid)) p->segments.clear();
}

SlackTotals SegmentSlack::Totals(uint32_t pid) const {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return {};
  const Process& p = *it->second;
  return {p.count, p.reserved, p.tensor, p.reserved - p.tensor, p.unknown_blocks,
          p.unknown_bytes};
}

size_t SegmentSlack::MemoryUsage() const {
  // A B-tree's leaves hold the pairs, at most about half empty.
  constexpr size_t kNode = 2 * sizeof(std::pair<const uint64_t, Segment>);
  size_t bytes = processes_.capacity() * (sizeof(std::pair<uint32_t, std::unique_ptr<Process>>) + 1);
  for (const auto& [pid, p] : processes_) bytes += sizeof(Process) + p->segments.size() * kNode;
  return bytes;
}

}  // namespace gpuflame::profiler
