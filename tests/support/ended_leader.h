// A child process whose main thread has ended (as main()'s pthread_exit
// ends it) while another thread of it lives on: /proc/PID/stat then shows a
// zombie, whose memory is gone, for a process that runs.
#ifndef GPUFLAME_TESTS_SUPPORT_ENDED_LEADER_H_
#define GPUFLAME_TESTS_SUPPORT_ENDED_LEADER_H_

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "base/scoped_fd.h"

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
  for (int i = 0; child > 0 && i < 200; i++) {
    base::ScopedFd fd(open(("/proc/" + std::to_string(child) + "/stat").c_str(), O_RDONLY | O_CLOEXEC));
    char buf[512] = {};
    if (fd && read(fd.get(), buf, sizeof(buf) - 1) > 0 && std::strstr(buf, ") Z ")) return child;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (child > 0) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
  return -1;
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
