// The thrift sites this gpuflame holds in each libgpuflame_cupti.so it
// probes (GF_THRIFT_SITES in bpf/gpuflame_abi.h): as many as the thrift
// level the overhead ladder asks for (profiler/pipeline/guardrails.h), in
// every library file, those probed later included. The library reads the
// count of sites held as its level (inprocess/thrift.h). A library from
// before thrift has no sites: it is skipped, and the ladder's thrift rungs
// cost it nothing and spare it nothing.
// Not thread-safe: the worker (event loop) only, as the registry.
#ifndef GPUFLAME_PROFILER_PROCESS_THRIFT_SITES_H_
#define GPUFLAME_PROFILER_PROCESS_THRIFT_SITES_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "inspect/proc_maps.h"
#include "profiler/probes/bpf_probes.h"
#include "symbolizer/elf_file.h"

namespace gpuflame::profiler {

class ThriftSites {
 public:
  explicit ThriftSites(BpfProbes& probes) : probes_(probes) {}
  ~ThriftSites();
  ThriftSites(const ThriftSites&) = delete;
  ThriftSites& operator=(const ThriftSites&) = delete;

  // A library file probed for |scope| (a pid, or BpfProbes::kEveryProcess),
  // kept open through |file| so that sites can be attached to it later, and
  // named |name| to the user; brought to the current level now. Returns a
  // message for the user when its sites could not be held (empty: held, or
  // a library without them).
  std::string Add(pid_t scope, inspect::PinnedFile file, const symbolizer::ElfFile& elf, std::string name);
  // Holds |level| sites (0 to GF_THRIFT_SITES) in every file from now on;
  // a file that fell short earlier is tried again. Returns a message per
  // file that could not be brought to it.
  std::vector<std::string> SetLevel(uint32_t level);
  // The files probed for |pid| alone go (it exited).
  void Forget(pid_t pid);

  uint32_t level() const { return level_; }
  // Files holding fewer sites than |level()|: an attach failed (said once
  // per check), and their processes are thinned less than asked.
  size_t files_short() const;
  size_t files() const { return files_.size(); }
  // Files (per-process probes: processes) past kMaxFiles, which thrift
  // cannot reach.
  uint64_t files_refused() const { return files_refused_; }

  // Each holds a descriptor. The agent probes each library file once for
  // every process (a node has a handful); `record` probes per process, and
  // a process's entry goes when it exits (ProcessRegistry::DetachProcess).
  static constexpr size_t kMaxFiles = 256;

 private:
  struct File {
    pid_t scope;
    inspect::PinnedFile file;
    std::string name;
    uint64_t sites_offset;      // file offset of the first site
    uint64_t semaphore_offset;  // file offset of the shared semaphore
    std::vector<ProbeLink> held;
  };
  // Attaches or releases |f|'s sites until it holds |level_|; a message if
  // an attach failed (the file then holds fewer).
  std::string Reach(File& f);

  BpfProbes& probes_;
  std::vector<File> files_;
  uint32_t level_ = 0;
  uint64_t files_refused_ = 0;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROCESS_THRIFT_SITES_H_
