// The caching allocator's slack by address arithmetic: per process, the
// live device segments (device-level allocations at an address: cudaMalloc,
// cuMemAlloc) and the bytes of live tensor blocks (tensor level) inside
// each, so that what a segment holds that no tensor occupies is charged to
// the stack that created the segment ("reserved, no live tensor in it").
//
// Expandable segments (expandable_segments:True) are chunks of physical
// memory (cuMemCreate) mapped into one reserved range (cuMemMap): each
// mapped chunk is a segment here, charged to the stack that created its
// chunk, and a block may run across adjacent mapped chunks.
//
// A block is charged to the segment that holds its first byte, up to that
// segment's end, and on into the next only where both are mapped chunks
// that meet: a block claiming to run past a cudaMalloc segment (the
// profiled process is hostile input) cannot make another segment look
// used, nor any segment more than full. A block in no known segment
// (allocated before gpuflame attached, or by an allocator not seen at
// device level) is counted, not guessed. Each segment has an id that the
// tracker keeps with the block, so a block that outlives its segment
// (freed with blocks still live, a new one at the same address) changes
// nothing at its free. O(log segments) per tensor event.
// Not thread-safe: event loop only (the AllocationTracker calls it).
#ifndef GPUFLAME_PROFILER_AGGREGATE_SEGMENT_SLACK_H_
#define GPUFLAME_PROFILER_AGGREGATE_SEGMENT_SLACK_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "profiler/resolve/stack_table.h"

namespace gpuflame::profiler {

// A change of one segment-creating stack's unused bytes and of how many of
// its segments have some unused (unused_objects).
struct SlackChange {
  StackId stack = 0;
  int64_t objects = 0;
  int64_t bytes = 0;
  bool any() const { return objects != 0 || bytes != 0; }
};

// One process's totals, now (summary.json).
struct SlackTotals {
  int64_t segments = 0;
  int64_t reserved_bytes = 0;         // the live segments' sizes
  int64_t tensor_bytes = 0;           // live tensor bytes inside them
  int64_t unused_bytes = 0;           // reserved less that
  int64_t unknown_blocks = 0;         // live tensor blocks in no known segment
  int64_t unknown_bytes = 0;
};

struct SlackStats {
  uint64_t overlapping_segments = 0;  // a segment over another (a missed free): the old one dropped
  uint64_t invalid_segments = 0;      // empty or past the address space: not kept
  uint64_t blocks_past_end = 0;       // blocks running past their segment's end: charged up to it
  uint64_t blocks_outlived_segment = 0;  // frees of blocks whose segment was gone
  uint64_t blocks_over_chunk_bound = 0;  // blocks over more mapped chunks than kMaxChunksPerBlock
};

class SegmentSlack {
 public:
  // A segment [base, base + size) created under |stack|. Returns its id
  // (0: not kept) for the tracker to hand back at its free; |change| gets
  // the unused it adds and |dropped| what overlapping ones took away.
  uint32_t AddSegment(uint32_t pid, uint64_t base, uint64_t size, StackId stack, SlackChange& change,
                      std::vector<SlackChange>& dropped);
  // The segment |id| at |base| is freed (a later one there is left alone).
  SlackChange RemoveSegment(uint32_t pid, uint64_t base, uint32_t id);
  // A mapped chunk [base, base + size) of a handle created under |stack|
  // (cuMemMap), and the chunks in [base, base + size) unmapped (cuMemUnmap).
  void AddMapped(uint32_t pid, uint64_t base, uint64_t size, StackId stack, std::vector<SlackChange>& changes);
  void RemoveMapped(uint32_t pid, uint64_t base, uint64_t size, std::vector<SlackChange>& changes);
  // A live tensor block: returns the id of the segment that holds its
  // first byte (0: in no known segment); |changes| gets what it moved.
  uint32_t AddBlock(uint32_t pid, uint64_t addr, uint64_t bytes, std::vector<SlackChange>& changes);
  // Its free, with the id AddBlock gave.
  void RemoveBlock(uint32_t pid, uint64_t addr, uint64_t bytes, uint32_t id, std::vector<SlackChange>& changes);
  // An exited process: its segments go, its totals stay for its last
  // report (as its in use does) until Erase.
  void ForgetProcess(uint32_t pid);
  void Erase(uint32_t pid) {
    if (cached_pid_ == pid) cached_ = nullptr;
    processes_.erase(pid);
  }

  SlackTotals Totals(uint32_t pid) const;
  const SlackStats& stats() const { return stats_; }
  size_t MemoryUsage() const;

 private:
  struct Segment {
    uint64_t end;
    uint64_t used;  // tensor bytes charged to it (may exceed the size: hostile overlaps)
    StackId stack;
    uint32_t id;
    bool mapped;  // a cuMemMap chunk: blocks may go on into the next one that meets it
  };
  struct Process {
    // By base; a B-tree: a lookup among a thousand segments touches a few
    // cache lines, not ten scattered nodes.
    absl::btree_map<uint64_t, Segment> segments;
    int64_t count = 0;  // its size, kept past the process's exit
    int64_t reserved = 0;
    int64_t tensor = 0;  // sum over segments of min(used, size)
    int64_t unknown_blocks = 0;
    int64_t unknown_bytes = 0;
  };
  // A block spans at most this many mapped chunks (2 MiB each at least:
  // 8 GiB); past them it is charged no further.
  static constexpr int kMaxChunksPerBlock = 4096;
  Process* Find(uint32_t pid);
  Process& Get(uint32_t pid);  // made if absent
  uint32_t Insert(Process& p, uint64_t base, uint64_t size, StackId stack, bool mapped, SlackChange& change,
                  std::vector<SlackChange>& dropped);
  // Adds (+1) or takes away (-1) a block's bytes from the segments it lies in,
  // starting at |it|.
  void Charge(Process& p, absl::btree_map<uint64_t, Segment>::iterator it, uint64_t addr, uint64_t bytes, int sign,
              std::vector<SlackChange>& changes);
  // The segment holding |addr|, or end().
  static absl::btree_map<uint64_t, Segment>::iterator Holding(Process& p, uint64_t addr);
  // Applies |used|'s new value to |seg| and the totals: the change of its
  // stack's unused.
  static SlackChange SetUsed(Process& p, uint64_t base, Segment& seg, uint64_t used);

  // Boxed, so that the last one asked for stays at hand across rehashes
  // (events come in runs from one process).
  absl::flat_hash_map<uint32_t, std::unique_ptr<Process>> processes_;
  uint32_t cached_pid_ = 0;
  Process* cached_ = nullptr;
  uint32_t next_id_ = 1;
  SlackStats stats_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_AGGREGATE_SEGMENT_SLACK_H_
