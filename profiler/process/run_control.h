// What the long-running front ends (record, agent) share: a stop request
// set by SIGTERM/SIGINT, and clock readings in nanoseconds.
#ifndef GPUFLAME_PROFILER_PROCESS_RUN_CONTROL_H_
#define GPUFLAME_PROFILER_PROCESS_RUN_CONTROL_H_

#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <vector>

namespace gpuflame::profiler {

// SIGTERM always requests a stop; SIGINT too when |sigint| (otherwise it is
// ignored, so that Ctrl-C reaches a command we run and we finish after it).
void InstallStopHandlers(bool sigint);
bool StopRequested();
// record -- COMMAND: SIGTERM and SIGINT sent to gpuflame (kill, systemd,
// Kubernetes) are passed on to |child| and do not stop the recording: the
// command's own exit does, as a shell's would, so that the profiles cover
// its shutdown. A SIGINT the terminal sent went to the command already.
void ForwardStopSignalsTo(pid_t child);
// The last signal passed on since the previous call; 0: none.
int TakeForwardedSignal();

// Processes we may hold stopped (the BPF gates SIGSTOP them until user space
// resumes them). If gpuflame itself crashes, its crash handler resumes every
// one of them before dying: a profiler bug must never freeze a workload; if
// it is killed outright, its guardian does (profiler/process/guardian.h).
void RememberTarget(pid_t pid);
// Those remembered so far, in this process or (shared memory) its parent.
std::vector<pid_t> RememberedTargets();
// SIGSEGV/SIGBUS/SIGILL/SIGFPE/SIGABRT: backtrace to stderr, resume the
// remembered processes (unless the guardian will), then die with the signal.
void InstallCrashHandler();
// The guardian holds the gates' map of held processes: it resumes exactly
// those when gpuflame dies, a crash included, so the crash handler leaves
// it to it (it would SIGCONT every remembered process, stopped by us or not).
void LeaveResumingToGuardian();

inline int64_t NowNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROCESS_RUN_CONTROL_H_
