// The backward() calls running in this process, each with the stack ID of
// the Python thread that made it: what autograd's engine threads, which
// run no Python of their own, are working for.
//
// A fixed table (no allocation, no lock on the read side): the Engine::execute
// hook adds its call on entry and removes it on exit (unwinding included);
// the tensor hook and the launch callback read it on every event of a thread
// that runs no Python. Readers see a consistent snapshot through a sequence
// counter (writers, once per backward() call, serialize on a spinlock), and
// say "several" rather than guess when more than one call runs: the engine
// threads serve every call in the process, and nothing here says whose node
// they run.
//
// Thread-safe: any thread, including inside the allocator's lock.
#ifndef GPUFLAME_INPROCESS_BACKWARD_ORIGINS_H_
#define GPUFLAME_INPROCESS_BACKWARD_ORIGINS_H_

#include <atomic>
#include <cstdint>

namespace gpuflame::inprocess {

struct BackwardOrigin {
  uint64_t stack_id = 0;  // the one running call's caller stack (0: none, several, or no frames)
  uint32_t active = 0;    // backward() calls running
};

class BackwardOrigins {
 public:
  static constexpr int kSlots = 8;

  // Publishes a call made from a thread whose stack is |stack_id| (0 if it
  // had no Python frames: it still counts, so that others are not
  // misattributed). Returns the handle for Remove; calls beyond kSlots are
  // counted (they make every event ambiguous) but hold no slot (-1).
  int Add(uint64_t stack_id, uint32_t tid) {
    Lock();
    Begin();
    int slot = -1;
    for (int i = 0; i < kSlots; i++)
      if (!used_[i].load(std::memory_order_relaxed)) {
        used_[i].store(true, std::memory_order_relaxed);
        stack_[i].store(stack_id, std::memory_order_relaxed);
        tid_[i].store(tid, std::memory_order_relaxed);
        slot = i;
        break;
      }
    active_.store(active_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    End();
    Unlock();
    return slot;
  }

  void Remove(int slot) {
    Lock();
    Begin();
    if (slot >= 0 && slot < kSlots) {
      used_[slot].store(false, std::memory_order_relaxed);
      stack_[slot].store(0, std::memory_order_relaxed);
      tid_[slot].store(0, std::memory_order_relaxed);
    }
    const uint32_t n = active_.load(std::memory_order_relaxed);
    active_.store(n ? n - 1 : 0, std::memory_order_relaxed);
    End();
    Unlock();
  }

  // The calls running now. Cheap when none runs (two loads); bounded
  // otherwise: a snapshot torn by a writer is retried a few times, then
  // reported as ambiguous (never as one call's).
  BackwardOrigin Current() const {
    for (int attempt = 0; attempt < 4; attempt++) {
      const uint32_t g1 = gen_.load(std::memory_order_acquire);
      if (g1 & 1) {
        __builtin_ia32_pause();
        continue;
      }
      BackwardOrigin out;
      out.active = active_.load(std::memory_order_relaxed);
      if (out.active == 0) return out;
      if (out.active == 1)
        for (int i = 0; i < kSlots; i++)
          if (used_[i].load(std::memory_order_relaxed)) out.stack_id = stack_[i].load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (gen_.load(std::memory_order_relaxed) == g1) return out;
    }
    BackwardOrigin torn;
    torn.active = active_.load(std::memory_order_relaxed);
    if (torn.active < 2) torn.active = 2;  // it changed under us: more than one call's worth
    return torn;
  }

  // Changes so far (two per call): lets a test or a reader see movement.
  uint32_t generation() const { return gen_.load(std::memory_order_relaxed) / 2; }

  // In a forked child the parent's calls do not run (only the forking thread
  // survives), and a writer's lock may have been held across fork().
  void ResetAfterFork() {
    for (int i = 0; i < kSlots; i++) {
      used_[i].store(false, std::memory_order_relaxed);
      stack_[i].store(0, std::memory_order_relaxed);
      tid_[i].store(0, std::memory_order_relaxed);
    }
    active_.store(0, std::memory_order_relaxed);
    gen_.store(0, std::memory_order_relaxed);
    lock_.clear(std::memory_order_relaxed);
  }

 private:
  void Lock() {
    while (lock_.test_and_set(std::memory_order_acquire)) __builtin_ia32_pause();
  }
  void Unlock() { lock_.clear(std::memory_order_release); }
  // The sequence counter is odd while the table changes.
  void Begin() {
    gen_.store(gen_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  void End() { gen_.store(gen_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

  std::atomic_flag lock_ = ATOMIC_FLAG_INIT;
  std::atomic<uint32_t> gen_{0};
  std::atomic<uint32_t> active_{0};
  std::atomic<bool> used_[kSlots] = {};
  std::atomic<uint64_t> stack_[kSlots] = {};
  std::atomic<uint32_t> tid_[kSlots] = {};  // the caller's thread, for debugging a stuck slot
};

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_BACKWARD_ORIGINS_H_
