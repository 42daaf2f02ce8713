// Whether the launch stacks the library takes in the driver's launch call
// join their GPU work here. The stack goes out with the callback's
// correlation ID, and the agent charges a kernel's time to the stack of the
// same ID. On the H100 host (CUDA 13, driver 580; tests/gpu/
// run_cupti_correlation.sh) the driver's callback inside cudaLaunchKernel
// carries the runtime call's ID, as the kernel's record does; nothing in
// CUPTI's documentation promises it, and an older or newer driver may give
// the nested call an ID of its own. Its launches' stacks would then join
// nothing: every runtime launch's kernel time would sit under
// [launch stack not sampled].
//
// So the first kSamples launch stacks of a process are checked against the
// work records that come back. Once records have come from well past them
// (kPastBy IDs beyond the last, and kWaitNs after it), more than one in
// kMissOneIn missing says the driver does not share the ID, and the caller
// takes the stacks in the runtime's launch callbacks too (their IDs are
// the kernels'), at two more callbacks a launch. A launch that failed, or
// a record CUPTI dropped, is missed with a good driver too: rare, and under
// the threshold.
//
// Thread-safe: Fired on launching threads, Seen on CUPTI's buffer threads,
// Decide on the flusher. Lock-free and bounded: once decided, Fired and
// Seen are a load each.
#ifndef GPUFLAME_CUPTI_CORRELATION_CHECK_H_
#define GPUFLAME_CUPTI_CORRELATION_CHECK_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "bpf/gpuflame_abi.h"

namespace gpuflame::cupti {

class CorrelationCheck {
 public:
  static constexpr uint32_t kSamples = 128;
  static constexpr uint32_t kMissOneIn = 16;
  static constexpr uint32_t kPastBy = 1000;
  static constexpr uint64_t kWaitNs = 2'000'000'000;

  enum class Verdict : uint8_t { kPending, kJoins, kDoesNotJoin };

  // A launch's stack is going out with |correlation| (before the driver
  // runs the launch: its record cannot come sooner).
  void Fired(uint32_t correlation) {
    if (correlation == 0 || decided_.load(std::memory_order_relaxed)) return;
    if (taken_.load(std::memory_order_relaxed) >= kSamples) return;
    const uint32_t n = taken_.fetch_add(1, std::memory_order_relaxed);
    if (n >= kSamples) return;
    // Open addressing in twice the samples' slots: a free one is always there.
    for (uint32_t i = Home(correlation), probes = 0; probes < kSlots; i = (i + 1) & (kSlots - 1), probes++) {
      uint32_t empty = 0;
      if (slots_[i].compare_exchange_strong(empty, correlation, std::memory_order_relaxed)) break;
      if (empty == correlation) break;  // the same ID twice (a launch fired from two callbacks)
    }
    // The last fired ID so far (IDs only grow).
    uint32_t last = last_fired_.load(std::memory_order_relaxed);
    while (correlation > last && !last_fired_.compare_exchange_weak(last, correlation, std::memory_order_relaxed)) {
    }
    inserted_.fetch_add(1, std::memory_order_release);
  }

  // Records of GPU work came back.
  void Seen(const gf_kernel_record* records, size_t count) {
    if (decided_.load(std::memory_order_relaxed) || taken_.load(std::memory_order_relaxed) == 0) return;
    uint32_t highest = 0;
    for (size_t r = 0; r < count; r++) {
      if (!GF_GPU_IS_WORK(records[r].kind)) continue;
      const uint32_t id = records[r].correlation;
      if (id > highest) highest = id;
      if (id == 0) continue;
      for (uint32_t i = Home(id), probes = 0; probes < kSlots; i = (i + 1) & (kSlots - 1), probes++) {
        const uint32_t held = slots_[i].load(std::memory_order_relaxed);
        if (held == 0) break;
        if (held == id) {
          seen_[i].store(1, std::memory_order_relaxed);
          break;
        }
      }
    }
    uint32_t was = highest_seen_.load(std::memory_order_relaxed);
    while (highest > was && !highest_seen_.compare_exchange_weak(was, highest, std::memory_order_relaxed)) {
    }
  }

  // The verdict, once: kPending until the samples are in and records have
  // come from well past them; the same answer after.
  Verdict Decide(uint64_t now_ns) {
    if (decided_.load(std::memory_order_relaxed)) return verdict_;
    if (inserted_.load(std::memory_order_acquire) < kSamples) return Verdict::kPending;
    // When the samples were first seen in (a tick late at most): no clock
    // on the launch path.
    if (!full_seen_) {
      full_seen_ = true;
      full_at_ns_ = now_ns;
    }
    if (now_ns < full_at_ns_ + kWaitNs) return Verdict::kPending;
    if (highest_seen_.load(std::memory_order_relaxed) < last_fired_.load(std::memory_order_relaxed) + kPastBy) {
      return Verdict::kPending;
    }
    uint32_t held = 0, seen = 0;
    for (uint32_t i = 0; i < kSlots; i++) {
      if (slots_[i].load(std::memory_order_relaxed) == 0) continue;
      held++;
      seen += seen_[i].load(std::memory_order_relaxed);
    }
    missed_ = held - seen;
    held_ = held;
    verdict_ = missed_ * kMissOneIn > held ? Verdict::kDoesNotJoin : Verdict::kJoins;
    decided_.store(true, std::memory_order_relaxed);
    return verdict_;
  }

  // Of the decided check: the stacks held and how many found no record.
  uint32_t held() const { return held_; }
  uint32_t missed() const { return missed_; }

 private:
  static constexpr uint32_t kSlots = 2 * kSamples;
  static_assert(kSlots == 256, "Home keeps a multiplicative hash's top 8 bits");
  static uint32_t Home(uint32_t id) { return (id * 0x9e3779b1u) >> 24; }

  std::atomic<uint32_t> slots_[kSlots] = {};
  std::atomic<uint8_t> seen_[kSlots] = {};
  std::atomic<uint32_t> taken_{0}, inserted_{0}, last_fired_{0}, highest_seen_{0};
  std::atomic<bool> decided_{false};
  // The flusher's alone:
  bool full_seen_ = false;
  uint64_t full_at_ns_ = 0;
  Verdict verdict_ = Verdict::kPending;
  uint32_t held_ = 0, missed_ = 0;
};

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_CORRELATION_CHECK_H_
