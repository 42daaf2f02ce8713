// Finds the CPython interpreter in a process (shared libpython or a
// statically linked executable), its version and layout, and the values the
// BPF walker needs. Reads ELF files only: it works at the moment the
// interpreter is mapped, before it has run a single instruction.
#ifndef GPUFLAME_PROFILER_PROCESS_PYTHON_DISCOVERY_H_
#define GPUFLAME_PROFILER_PROCESS_PYTHON_DISCOVERY_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bpf/gpuflame_abi.h"
#include "symbolizer/elf_cache.h"
#include "inspect/proc_maps.h"
#include "inspect/python_layout.h"

namespace gpuflame::profiler {

struct PythonProcess {
  inspect::PythonLayout layout;
  gf_py_proc bpf{};                // for the py_procs map
  const inspect::Mapping* mapping = nullptr;  // the interpreter's first mapping
  std::string elf_path;            // openable path of the interpreter file
  std::optional<uint64_t> finalize_offset;  // Py_FinalizeEx file offset
};

// nullopt: no Python in this process. An error: Python found but unusable
// (unsupported version, no _PyRuntime symbol); the message says which.
absl::StatusOr<std::optional<PythonProcess>> DiscoverPython(
    pid_t pid, const std::vector<inspect::Mapping>& maps, symbolizer::ElfCache& elves);

// "3.12" from "libpython3.12.so.1.0" or "python3.12"; nullopt otherwise.
std::optional<inspect::PythonVersion> VersionFromName(std::string_view basename);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROCESS_PYTHON_DISCOVERY_H_
