// Where a file's USDT probe provider:name sits, as BpfProbes::AttachUsdt
// takes it: each note's site and semaphore as file offsets, and its
// arguments' spec (profiler/probes/usdt_notes.h).
#ifndef GPUFLAME_PROFILER_PROCESS_USDT_SITES_H_
#define GPUFLAME_PROFILER_PROCESS_USDT_SITES_H_

#include <string>
#include <string_view>
#include <vector>

#include "profiler/probes/bpf_probes.h"
#include "symbolizer/elf_file.h"

namespace gpuflame::profiler {

// The sites of |provider|:|name| in |elf|. A note whose site is outside
// the file's code, whose semaphore is outside its data, or whose arguments
// are not understood is left out, and |why| (when given) says so.
std::vector<BpfProbes::UsdtSite> UsdtSites(const symbolizer::ElfFile& elf, std::string_view provider,
                                           std::string_view name, std::string* why = nullptr);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROCESS_USDT_SITES_H_
