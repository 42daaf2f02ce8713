// Brendan Gregg's folded-stack text (`root;child;leaf value`), one line per
// distinct stack, for flamegraph.pl, speedscope and quick diffs.
#ifndef GPUFLAME_EXPORTERS_FILES_FOLDED_WRITER_H_
#define GPUFLAME_EXPORTERS_FILES_FOLDED_WRITER_H_

#include <string>

#include "profiler/aggregate/profile.h"

namespace gpuflame::exporters {

// Lines for one sample type, sorted by stack; zero-valued stacks omitted.
std::string FoldedStacks(const profiler::Profile& profile, int sample_type_index);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_FILES_FOLDED_WRITER_H_
