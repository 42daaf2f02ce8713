// The guardian: a small process that outlives gpuflame to resume the
// processes gpuflame may hold stopped, should gpuflame die without doing so
// itself. The crash handler covers a crash; nothing in a process survives
// SIGKILL or the OOM killer, and a workload left in SIGSTOP by a profiler is
// a frozen training job. So gpuflame forks, before it starts any thread, a
// child that holds the read end of a pipe and nothing else. When gpuflame
// ends cleanly it says so on the pipe and the guardian exits; when the pipe
// closes without that word (gpuflame is gone, however), the guardian sends
// SIGCONT to every stopped process that gpuflame remembered as a target
// (RememberTarget, in memory shared with it) or that descends from one (a
// child the BPF gate stopped before user space heard of it). It repeats
// that for a short while: the kernel detaches gpuflame's probes as it
// closes the dead process's descriptors, and a gate may fire meanwhile.
#ifndef GPUFLAME_PROFILER_PROCESS_GUARDIAN_H_
#define GPUFLAME_PROFILER_PROCESS_GUARDIAN_H_

#include <sys/types.h>

#include <vector>

#include "base/scoped_fd.h"

namespace gpuflame::profiler {

class Guardian {
 public:
  // Forks the guardian. Call before any thread starts (the child runs
  // ordinary code after fork). Without one (fork failed), the crash handler
  // still covers crashes.
  static Guardian Start();
  Guardian() = default;
  Guardian(Guardian&&) = default;
  Guardian& operator=(Guardian&&) = default;
  // gpuflame is ending (returning, not dying): it has resumed what it held,
  // and the guardian leaves without acting.
  ~Guardian() { Release(); }

  void Release();
  pid_t pid() const { return pid_; }

 private:
  base::ScopedFd to_guardian_;
  pid_t pid_ = -1;
};

// What the guardian does when gpuflame is gone, once: resumes every stopped
// process among |targets| and their descendants (found through /proc, at
// most kMaxScan processes, kMaxDepth generations up). Returns how many.
int ResumeHeldProcesses(const std::vector<pid_t>& targets);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROCESS_GUARDIAN_H_
