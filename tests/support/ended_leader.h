// A child process whose main thread has ended (as main()'s pthread_exit
// ends it) while another thread of it lives on: /proc/PID/stat then shows a
// zombie, whose memory is gone, for a process that runs.
#ifndef GPUFLAME_TESTS_SUPPORT_ENDED_LEADER_H_
#define GPUFLAME_TESTS_SUPPORT_ENDED_LEADER_H_

#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "base/scoped_fd.h"

namespace gpuflame::testing {

inline void* SleepThenExit(void*) {
  sleep(5);
  _exit(0);
}

// A child whose leader has ended while a thread of it sleeps 5 s on,
// returned once /proc says the leader is a zombie (at most 2 s).
inline pid_t ForkWithEndedLeader() {
  const pid_t child = fork();
  if (child == 0) {
    pthread_t t;
    if (pthread_create(&t, nullptr, SleepThenExit, nullptr) != 0) _exit(1);
    // The leader's thread alone, as pthread_exit ends it, without unwinding
    // into the test framework's frames.
    syscall(SYS_exit, 0);
  }
  for (int i = 0; child > 0 && i < 200; i++) {
    base::ScopedFd fd(open(("/proc/" + std::to_string(child) + "/stat").c_str(), O_RDONLY | O_CLOEXEC));
    char buf[512] = {};
    if (fd && read(fd.get(), buf, sizeof(buf) - 1) > 0 && std::strstr(buf, ") Z ")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return child;
}

}  // namespace gpuflame::testing

#endif  // GPUFLAME_TESTS_SUPPORT_ENDED_LEADER_H_
