// The guardian: a small process that outlives gpuflame to resume the
// processes gpuflame may hold stopped, should gpuflame die without doing so
// itself. Nothing in a process survives SIGKILL or the OOM killer, and a
// workload left in SIGSTOP by a profiler is a frozen training job. So
// gpuflame forks, before it starts any thread, a child that holds one end
// of a socket pair and nothing else. When gpuflame ends cleanly it says so
// on the socket and the guardian exits; when the socket closes without that
// word (gpuflame is gone, however: killed, or crashed), the guardian sends
// SIGCONT to every process the BPF gates stopped and nothing has resumed
// since, as the gates' own map lists them (`held`, struct gf_held). Every
// stop gpuflame makes is a gate's, and the machine-wide gate stops
// processes that are no target and descend from none, before user space
// has heard of them: the map is the one complete list. gpuflame hands the
// guardian a descriptor of it over the socket (SCM_RIGHTS: no privilege
// needed, unlike opening it by ID) before any gate is attached
// (ShareHeldMapWithGuardian), so the guardian's reference keeps the map
// alive after gpuflame's own descriptors are closed. It repeats that for a
// short while: the kernel detaches gpuflame's probes as it closes the dead
// process's descriptors, and a gate may fire meanwhile.
//
// A process someone else stopped is not resumed: its entry is made by the
// gate that stops it, deleted in the kernel by the first SIGCONT to reach it
// after that stop (whoever sends it) and by its exit; the guardian resumes
// an entry only if the process is stopped now, is the one the gate stopped
// (same start time, and signalled through a pidfd opened before that check)
// and was not resumed by the guardian from that same stop already. The one
// stop it cannot tell apart is another SIGSTOP sent while ours still holds
// (no SIGCONT between): the process is then held by both, and resumed.
//
// Without the map (gpuflame could not hand it over; the machine-wide gate
// is then off), the guardian falls back to the stopped processes among
// those gpuflame remembered (RememberTarget, in memory shared with it) and
// their descendants, which may include a process someone else stopped.
#ifndef GPUFLAME_PROFILER_PROCESS_GUARDIAN_H_
#define GPUFLAME_PROFILER_PROCESS_GUARDIAN_H_

#include <sys/types.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "base/scoped_fd.h"

namespace gpuflame::profiler {

class Guardian {
 public:
  // Forks the guardian. Call before any thread starts (the child runs
  // ordinary code after fork). Without one (fork failed), the crash handler
  // still covers crashes. One guardian per process.
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
  base::ScopedFd socket_;  // gpuflame's end
  pid_t pid_ = -1;
};

// Hands |held_map_fd| (the gates' `held` map) to this process's guardian,
// which keeps its own reference; returns once it has it, within 2 s. An
// error when no guardian runs or it did not answer. For
// BpfProbes::Options::share_held_map; the caller's thread only.
absl::Status ShareHeldMapWithGuardian(int held_map_fd);

// What the guardian does when gpuflame is gone, once: resumes every stopped
// process among |targets| and their descendants (found through /proc, at
// most kMaxScan processes, kMaxDepth generations up). Returns how many.
int ResumeHeldProcesses(const std::vector<pid_t>& targets);

// The stops the guardian resumed, by pid and the gate's stop time.
using ResumedStops = absl::flat_hash_set<std::pair<pid_t, uint64_t>>;
// The same for the gates' map behind |held_map_fd|: resumes each process it
// lists as stopped by a gate that is still that process, stopped now, and
// not in |done| (added to it). |boottime_offset_ns|: this time namespace's
// boot-time offset (/proc/PID/stat's starttime includes it). Returns how many.
int ResumeGateHeld(int held_map_fd, int64_t boottime_offset_ns, ResumedStops& done);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROCESS_GUARDIAN_H_
