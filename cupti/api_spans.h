// CUDA API calls, entry to return, for the timeline (gf_api_record in
// bpf/gpuflame_abi.h): every launch, copy, memset and device memory call
// the callbacks see, kept here by the calling thread and handed to the agent by
// the flusher at gpuflame:api_batch, GF_API_BATCH_MAX records a probe hit.
//
// Why not a stack per call: a launch's stack costs a uprobe trap and a
// Python walk, several microseconds, and a launch-bound training step makes
// tens of thousands of launches a second (the H200's GPT step: x1.53 with
// every launch's stack, x1.27 without). A record here costs two clock reads
// and a 32-byte copy under an uncontended lock; the stack comes from the
// sampled launches (gpuflame:launch, same correlation ID) and the thread's
// CPU samples.
//
// Bounded: at most kCapacity records between two flushes (a 100 ms tick:
// 650,000 calls a second); more are dropped and counted, and the count goes
// with every batch, so the agent says it. The buffers are allocated by the
// flusher when an agent first asks (Enable), never on a launch.
//
// Thread-safe: Add on any thread, Enable and Drain on the flusher only.
#ifndef GPUFLAME_CUPTI_API_SPANS_H_
#define GPUFLAME_CUPTI_API_SPANS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "bpf/gpuflame_abi.h"
#include "inprocess/spin_lock.h"

namespace gpuflame::cupti {

class ApiSpans {
 public:
  static constexpr size_t kCapacity = 1 << 16;

  // Flusher: makes room (once). Records added before are dropped, counted.
  void Enable() {
    if (enabled_.load(std::memory_order_acquire)) return;
    filling_ = std::make_unique<gf_api_record[]>(kCapacity);
    draining_ = std::make_unique<gf_api_record[]>(kCapacity);
    enabled_.store(true, std::memory_order_release);
  }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  // Any thread.
  void Add(const gf_api_record& r) {
    if (!enabled_.load(std::memory_order_acquire)) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    std::lock_guard<inprocess::SpinLock> hold(lock_);
    if (used_ == kCapacity) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    filling_[used_++] = r;
  }

  // Flusher: everything added so far, to |send|(records, count, dropped) in
  // runs of at most GF_API_BATCH_MAX. The lock is held only to swap buffers.
  template <class Send>
  void Drain(Send&& send) {
    if (!enabled_.load(std::memory_order_acquire)) return;
    size_t n;
    {
      std::lock_guard<inprocess::SpinLock> hold(lock_);
      filling_.swap(draining_);
      n = used_;
      used_ = 0;
    }
    const uint64_t dropped = dropped_.load(std::memory_order_relaxed);
    for (size_t i = 0; i < n; i += GF_API_BATCH_MAX) {
      const size_t run = n - i < GF_API_BATCH_MAX ? n - i : GF_API_BATCH_MAX;
      send(&draining_[i], run, dropped);
    }
  }

  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  // A forked child: the parent's lock holder is not there.
  void ResetLock() { lock_.reset(); }

 private:
  std::atomic<bool> enabled_{false};
  inprocess::SpinLock lock_;
  std::unique_ptr<gf_api_record[]> filling_, draining_;  // filling_ and used_: under lock_
  size_t used_ = 0;
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_API_SPANS_H_
