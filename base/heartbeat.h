// When a thread last showed it was making progress, for a watchdog on
// another thread: the agent's /healthz fails when the event loop or the
// ring-buffer reader stops beating (a blocked read of a target's file once
// hung the agent node-wide while /healthz still said ok). Beat() is one
// relaxed store; any thread may read.
#ifndef GPUFLAME_BASE_HEARTBEAT_H_
#define GPUFLAME_BASE_HEARTBEAT_H_

#include <time.h>

#include <atomic>
#include <cstdint>

namespace gpuflame::base {

class Heartbeat {
 public:
  // The owning thread, at every turn of its loop (waits included: an idle
  // thread that wakes on its timer is alive).
  void Beat() { last_ns_.store(Now(), std::memory_order_relaxed); }
  // Nanoseconds since the last beat; 0 before the first one (a thread that
  // has not started its loop yet is not stuck).
  int64_t StalledNs() const {
    const int64_t last = last_ns_.load(std::memory_order_relaxed);
    return last == 0 ? 0 : Now() - last;
  }

 private:
  static int64_t Now() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1'000'000'000ll + ts.tv_nsec;
  }
  std::atomic<int64_t> last_ns_{0};
};

}  // namespace gpuflame::base

#endif  // GPUFLAME_BASE_HEARTBEAT_H_
