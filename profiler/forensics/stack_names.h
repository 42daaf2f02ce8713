// A stack's names as the forensics reports print them: the folded line the
// flame graphs' .folded files use, and a short form for one terminal line.
#ifndef GPUFLAME_PROFILER_FORENSICS_STACK_NAMES_H_
#define GPUFLAME_PROFILER_FORENSICS_STACK_NAMES_H_

#include <string>
#include <vector>

#include "profiler/resolve/stack_table.h"

namespace gpuflame::profiler {

// "a;b;c", root first, as folded_writer writes it (a ';' or line break inside
// a name becomes a space), so that a report's stack is found in the .folded files.
std::string FoldedStack(const std::vector<FrameId>& stack, const FrameTable& frames);

// "… › Trainer > step › grow": the innermost |max_frames| Python frames
// (else native ones), the API leaf left out; control characters replaced,
// since the workload names its own functions and nothing may steer a terminal.
std::string ShortStack(const std::vector<FrameId>& stack, const FrameTable& frames, size_t max_frames = 3);

// |s| with control characters replaced by '?'.
std::string Printable(std::string s);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_FORENSICS_STACK_NAMES_H_
