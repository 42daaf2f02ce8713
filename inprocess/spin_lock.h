// A spinlock for the injection library's hot paths (tensor events, CUDA API
// spans), not a mutex: it is held for the copy of one record (or one probe
// hit), never across a call that could block, and a forked child can reset
// it (a mutex held by a thread the fork left behind could not be).
#ifndef GPUFLAME_INPROCESS_SPIN_LOCK_H_
#define GPUFLAME_INPROCESS_SPIN_LOCK_H_

#include <atomic>

namespace gpuflame::inprocess {

class SpinLock {
 public:
  void lock() {
    while (flag_.test_and_set(std::memory_order_acquire)) __builtin_ia32_pause();
  }
  bool try_lock() { return !flag_.test_and_set(std::memory_order_acquire); }
  // For exit, which may run on a thread that holds the lock (a signal
  // handler that exits mid-record): tries |spins| times, never waits for ever.
  bool try_lock_for_spins(int spins) {
    for (int i = 0; i < spins; i++) {
      if (try_lock()) return true;
      __builtin_ia32_pause();
    }
    return false;
  }
  void unlock() { flag_.clear(std::memory_order_release); }
  void reset() { flag_.clear(std::memory_order_relaxed); }

 private:
  std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
};

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_SPIN_LOCK_H_
