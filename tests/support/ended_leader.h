// A child process whose main thread has ended (as main()'s pthread_exit
// ends it) while another thread of it lives on: /proc/PID/stat then shows a
// zombie, whose memory is gone, for a process that runs.
#ifndef GPUFLAME_TESTS_SUPPORT_ENDED_LEADER_H_
#define GPUFLAME_TESTS_SUPPORT_ENDED_LEADER_H_

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "inspect/proc_stat.h"
#include "inspect/thread_group.h"

namespace gpuflame::testing {

inline void* WaitToBeKilled(void*) {
  for (;;) pause();
}

// A child whose leader has ended while another thread of it waits to be
// killed (at the latest by its own alarm, 30 s on), returned once /proc says
// the leader is a zombie; -1 if that did not come within 2 s (the child is
// then killed and reaped).
inline pid_t ForkWithEndedLeader() {
  const pid_t child = fork();
  if (child == 0) {
    alarm(30);  // a test that failed before killing it leaves nothing behind for long
    pthread_t t;
    if (pthread_create(&t, nullptr, WaitToBeKilled, nullptr) != 0) _exit(1);
    // The leader's thread alone, as pthread_exit ends it, without unwinding
    // into the test framework's frames.
    syscall(SYS_exit, 0);
  }
  const std::string stat_path = "/proc/" + std::to_string(child) + "/stat";
  for (int i = 0; child > 0 && i < 200; i++) {
    const auto stat = inspect::ReadStatFile(stat_path.c_str());
    const auto st = stat ? inspect::StateAndParentFromStat(*stat) : std::nullopt;
    if (st && st->state == 'Z') return child;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (child > 0) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
  return -1;
}

// Polls |pid|'s group state (inspect::GroupState) until it is stopped
// ('T'), or runs ('R' or 'S': not merely "not stopped", which a process
// gone would pass), at most 2 s; the last state read.
inline char GroupStateWithin(pid_t pid, bool stopped) {
  char state = 0;
  for (int i = 0; i < 200; i++) {
    state = inspect::GroupState(pid);
    if (stopped ? state == 'T' : (state == 'R' || state == 'S')) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return state;
}

// Kills and reaps the child when it goes out of scope: a stopped child
// would otherwise outlive a test that failed half way.
class ChildGuard {
 public:
  explicit ChildGuard(pid_t pid) : pid_(pid) {}
  ~ChildGuard() { Reap(); }
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;
  // Kills and reaps it now (a test looks at what is left of it after).
  void Reap() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_;
};

}  // namespace gpuflame::testing

#endif  // GPUFLAME_TESTS_SUPPORT_ENDED_LEADER_H_
