// The launch route's uprobes (bpf/gpuflame_abi.h, "Launch stacks without
// CUPTI's callbacks"): libcuda's exported launch entry points, attached for
// one process alone while its library's launch window is open, and released
// when the window closes. In, they cost each of the process's launches a
// trap and a stack walk, which is why they are not left in: a window is a
// tick (100 ms) in about a hundred, plus the process's start-up. The library
// says an open window again each tick; should its word stop (a library that
// died mid-window, a lost record), the window is closed here kMaxWindowNs
// after the last. Attaching and detaching write-lock the memory map of each
// process that maps that libcuda (the kernel's uprobe registration), briefly:
// twice a window. Detaches run on the link reaper's thread.
//
// Each process's libcuda is registered as its maps show it (Add). Each
// libcuda file is pinned open once, its entry points' offsets read once,
// for every process that maps it: one descriptor per file, not per
// process (every gpuflame registers every CUDA process it follows, a
// machine's worth for the agent). Bounded: kMaxProcesses.
// Not thread-safe: the worker (event loop) only, as the registry.
#ifndef GPUFLAME_PROFILER_PROCESS_LAUNCH_ROUTE_SITES_H_
#define GPUFLAME_PROFILER_PROCESS_LAUNCH_ROUTE_SITES_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "inspect/proc_maps.h"
#include "profiler/probes/bpf_probes.h"
#include "symbolizer/elf_file.h"

namespace gpuflame::profiler {

struct LaunchRouteSiteStats {
  uint64_t windows = 0;           // opened, uprobes in
  uint64_t windows_unserved = 0;  // opened, uprobes not in (no libcuda known, or the attach failed)
  uint64_t windows_expired = 0;   // closed here, past kMaxWindowNs without the library's word
  uint64_t windows_partial = 0;   // served, but some entry points' uprobes did not go on
  uint64_t attach_ns = 0;         // time spent attaching and releasing, in all
  uint64_t attach_max_ns = 0;     // the longest one attach took
};

class LaunchRouteSites {
 public:
  explicit LaunchRouteSites(BpfProbes& probes) : probes_(probes) {}
  ~LaunchRouteSites();
  LaunchRouteSites(const LaunchRouteSites&) = delete;
  LaunchRouteSites& operator=(const LaunchRouteSites&) = delete;

  // |pid| maps libcuda as |m|, whose ELF is |elf|: its entry points are
  // kept for its windows. Once per process (later calls change nothing).
  // With |open_now_ns|, a window opens at once: the start-up's, which its
  // library opens at cuInit, right before the process's first launches,
  // sooner than the word of it could reach us. Returns a message for the
  // user when it cannot be served.
  std::string Add(pid_t pid, const inspect::Mapping& m, const symbolizer::ElfFile& elf, uint64_t open_now_ns = 0);
  // Its library opened (|open|) or closed a launch window at |now_ns|
  // (CLOCK_MONOTONIC). Returns a message for the user when the uprobes
  // could not go in (said by the caller, once per process).
  std::string OnWindow(pid_t pid, bool open, uint64_t now_ns);
  // Windows open since before |now_ns| - kMaxWindowNs close.
  void Expire(uint64_t now_ns);
  void Forget(pid_t pid);

  bool open(pid_t pid) const;
  const LaunchRouteSiteStats& stats() const { return stats_; }

  static constexpr uint64_t kMaxWindowNs = 10'000'000'000;  // the start-up's 5 s, and room
  static constexpr size_t kMaxProcesses = 4096;

 private:
  // One libcuda file, shared by the processes that map it.
  struct Library {
    inspect::FileKey key;                     // its entry in libraries_
    std::optional<inspect::PinnedFile> file;  // none where it has no launch function
    std::vector<BpfProbes::UprobeSite> sites;
    size_t users = 0;
  };
  struct Process {
    const Library* library = nullptr;  // owned by libraries_, while users > 0
    std::vector<ProbeLink> held;       // while a window is open
    uint64_t opened_ns = 0;
  };
  // |m|'s library, pinned and read now if no process had it; null if the
  // file could not be opened (the process has gone).
  Library* LibraryOf(pid_t pid, const inspect::Mapping& m, const symbolizer::ElfFile& elf);
  void Release(Process& p);

  BpfProbes& probes_;
  absl::flat_hash_map<inspect::FileKey, std::unique_ptr<Library>> libraries_;
  absl::flat_hash_map<pid_t, Process> processes_;
  LaunchRouteSiteStats stats_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROCESS_LAUNCH_ROUTE_SITES_H_
