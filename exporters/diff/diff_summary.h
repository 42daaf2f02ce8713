// What `gpuflame diff` prints for one diffed profile: the totals of every
// sample type in BASE and NEW with the change, then the stacks that grew and
// shrank most in the default sample type, each named by its leaf-most frames
// and, where those are the same for other stacks (every tensor allocation
// ends in Tensor > __init__ › c10::cuda::CUDACachingAllocator::malloc), the
// frame that tells it apart:
//
//   == torch_memory
//      inuse_space      94.00 MiB -> 126.00 MiB     +32.00 MiB (+34.0%)
//      ...
//      grew most (inuse_space):
//          +32.00 MiB  … › KVCache > __init__ › empty › Tensor > __init__ › c10::cuda::CUDACachingAllocator::malloc
//      shrank most (inuse_space):
//          -12.00 MiB  … › legacy_buffers › empty › Tensor > __init__ › c10::cuda::CUDACachingAllocator::malloc
#ifndef GPUFLAME_EXPORTERS_DIFF_DIFF_SUMMARY_H_
#define GPUFLAME_EXPORTERS_DIFF_DIFF_SUMMARY_H_

#include <cstddef>
#include <string>
#include <vector>

#include "exporters/diff/diff_tree.h"

namespace gpuflame::exporters {

struct StackChange {
  int64_t delta = 0;               // NEW less BASE, in the stack's own (self) value
  std::vector<std::string> stack;  // root first
  // How many leaf-most frames tell this stack apart from every other stack
  // that changed (all of them when it is a leaf-ward part of another).
  size_t distinct = 0;
};

// The |top| stacks whose self value grew most (delta > 0, largest first)
// and shrank most (delta < 0, most negative first) in sample type |type|.
struct TopChanges {
  std::vector<StackChange> grew, shrank;
};
TopChanges TopStackChanges(const DiffTree& tree, size_t type, size_t top);

// |stack| in about |width| characters, frames joined by " › ": its
// |distinct| leaf-most frames with as many of their callers as fit (the whole
// stack where it fits), and where even those do not fit, the first of them
// (the one that tells the stack apart), "…", and as many leaf-most frames as
// fit, the leaf always. "…" stands where frames were left out;
// <interpreter trampoline> frames are (CPython's, they tell nothing) unless
// they are the leaf or the telling frame. "[no frames]" for the empty stack.
std::string LeafwardName(const std::vector<std::string>& stack, size_t distinct, size_t width);

std::string DiffSummary(const std::string& name, const DiffTree& tree, size_t top = 5);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_DIFF_DIFF_SUMMARY_H_
