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
// So a process's first kSamples launch stacks (taken while activity's
// kinds are on: the caller's part) are checked against the work records
// that come back. Once records have come from well past them (kPastBy IDs
// beyond the last, and kWaitNs after the samples were in), more than one
// in kMissOneIn missing says the stacks do not join. A good driver misses
// some too: a launch that failed, a record CUPTI dropped, a launch into a
// stream being captured into a CUDA graph (vLLM captures its graphs at
// start-up) never runs under its ID. So a first "does not join" is only
// believed once a second round of samples, taken |retry_ns| later, says
// it again; the caller then takes the stacks in the runtime's launch
// callbacks too (their IDs are the kernels'), at two more callbacks a
// launch for good. Wrongly believed, that costs those callbacks; missed,
// it costs the kernel time's stacks.
//
// Thread-safe: Fired on launching threads, Seen on CUPTI's buffer threads,
// Decide and Abandon on the flusher. Lock-free and bounded: once decided,
// Fired and Seen are a load each.
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
  static constexpr uint64_t kRetryNs = 30'000'000'000;

  enum class Verdict : uint8_t { kPending, kJoins, kDoesNotJoin };

  // Between a first "does not join" and the second round's first sample
  // (tests shorten it). Before the first launch.
  void set_retry_ns(uint64_t ns) { retry_ns_ = ns; }

  // A launch's stack is going out with |correlation| (before the driver
  // runs the launch: its record cannot come sooner).
  void Fired(uint32_t correlation) {
    if (correlation == 0 || !collecting_.load(std::memory_order_acquire)) return;
    rounds_[round_.load(std::memory_order_relaxed)].Fired(correlation);
  }

  // Records of GPU work came back.
  void Seen(const gf_kernel_record* records, size_t count) {
    if (!collecting_.load(std::memory_order_acquire)) return;
    rounds_[round_.load(std::memory_order_relaxed)].Seen(records, count);
  }

  // The verdict: kPending until a round's samples are in and records have
  // come from well past them (and, after a first "does not join", until a
  // second round says it too); the same answer after.
  Verdict Decide(uint64_t now_ns) {
    if (verdict_ != Verdict::kPending) return verdict_;
    const uint32_t r = round_.load(std::memory_order_relaxed);
    if (!collecting_.load(std::memory_order_relaxed)) {
      // Between the rounds, or abandoned.
      if (abandoned_ || r != 0 || now_ns < retry_at_ns_) return Verdict::kPending;
      round_.store(1, std::memory_order_relaxed);
      collecting_.store(true, std::memory_order_release);
      return Verdict::kPending;
    }
    const Verdict v = rounds_[r].Decide(now_ns);
    if (v == Verdict::kPending) return v;
    held_ = rounds_[r].held();
    missed_ = rounds_[r].missed();
    if (v == Verdict::kDoesNotJoin && r == 0) {
      // Believed only if a second round says it too.
      first_missed_ = missed_;
      collecting_.store(false, std::memory_order_relaxed);
      retry_at_ns_ = now_ns + retry_ns_;
      return Verdict::kPending;
    }
    collecting_.store(false, std::memory_order_relaxed);
    verdict_ = v;
    return verdict_;
  }

  // No verdict is wanted any more (the stacks are taken at the runtime's
  // calls for another reason): Fired and Seen stop looking.
  void Abandon() {
    abandoned_ = true;
    collecting_.store(false, std::memory_order_relaxed);
  }

  // Of the last round decided: the stacks held and how many found no
  // record; of a first round that said "does not join", how many missed
  // (0: none did).
  uint32_t held() const { return held_; }
  uint32_t missed() const { return missed_; }
  uint32_t first_round_missed() const { return first_missed_; }

 private:
  static constexpr uint32_t kSlots = 2 * kSamples;
  static_assert(kSlots == 256, "Home keeps a multiplicative hash's top 8 bits");
  static uint32_t Home(uint32_t id) { return (id * 0x9e3779b1u) >> 24; }

  // One round's samples and what came back of them.
  class Round {
   public:
    void Fired(uint32_t correlation) {
      if (taken_.load(std::memory_order_relaxed) >= kSamples) return;
      const uint32_t n = taken_.fetch_add(1, std::memory_order_relaxed);
      if (n >= kSamples) return;
      // Open addressing in twice the samples' slots: a free one is always there.
      for (uint32_t i = Home(correlation), probes = 0; probes < kSlots; i = (i + 1) & (kSlots - 1), probes++) {
        uint32_t empty = 0;
        if (slots_[i].compare_exchange_strong(empty, correlation, std::memory_order_relaxed)) break;
        if (empty == correlation) break;  // the same ID twice (a launch fired from two callbacks)
      }
      // The last fired ID so far. IDs count up, and may wrap: compared by
      // their difference.
      Raise(last_fired_, correlation, std::memory_order_relaxed);
      inserted_.fetch_add(1, std::memory_order_release);
    }

    void Seen(const gf_kernel_record* records, size_t count) {
      if (taken_.load(std::memory_order_relaxed) == 0) return;
      bool any = false;
      uint32_t highest = 0;
      for (size_t r = 0; r < count; r++) {
        if (!GF_GPU_IS_WORK(records[r].kind)) continue;
        const uint32_t id = records[r].correlation;
        if (id == 0) continue;
        if (!any || After(id, highest)) highest = id;
        any = true;
        for (uint32_t i = Home(id), probes = 0; probes < kSlots; i = (i + 1) & (kSlots - 1), probes++) {
          const uint32_t held = slots_[i].load(std::memory_order_relaxed);
          if (held == 0) break;
          if (held == id) {
            seen_[i].store(1, std::memory_order_relaxed);
            break;
          }
        }
      }
      // Published after the marks above: whoever reads the high-water mark
      // (acquire) reads them too.
      if (any) Raise(highest_seen_, highest, std::memory_order_release);
    }

    Verdict Decide(uint64_t now_ns) {
      if (inserted_.load(std::memory_order_acquire) < kSamples) return Verdict::kPending;
      // When the samples were first seen in (a tick late at most): no clock
      // on the launch path.
      if (!full_seen_) {
        full_seen_ = true;
        full_at_ns_ = now_ns;
      }
      const uint64_t highest = highest_seen_.load(std::memory_order_acquire);
      const uint64_t last = last_fired_.load(std::memory_order_relaxed);
      if (now_ns < full_at_ns_ + kWaitNs || !highest) return Verdict::kPending;
      if (static_cast<int32_t>(static_cast<uint32_t>(highest) - static_cast<uint32_t>(last)) <
          static_cast<int32_t>(kPastBy))
        return Verdict::kPending;
      uint32_t held = 0, seen = 0;
      for (uint32_t i = 0; i < kSlots; i++) {
        if (slots_[i].load(std::memory_order_relaxed) == 0) continue;
        held++;
        seen += seen_[i].load(std::memory_order_relaxed);
      }
      held_ = held;
      missed_ = held - seen;
      return missed_ * kMissOneIn > held ? Verdict::kDoesNotJoin : Verdict::kJoins;
    }

    uint32_t held() const { return held_; }
    uint32_t missed() const { return missed_; }

   private:
    // Whether ID |a| came after |b| (within half the ID space).
    static bool After(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) > 0; }
    // |mark| (kValid and an ID; 0: none yet) up to |id| if that came after it.
    static constexpr uint64_t kValid = uint64_t{1} << 32;
    static void Raise(std::atomic<uint64_t>& mark, uint32_t id, std::memory_order order) {
      uint64_t was = mark.load(std::memory_order_relaxed);
      while ((was == 0 || After(id, static_cast<uint32_t>(was))) &&
             !mark.compare_exchange_weak(was, kValid | id, order, std::memory_order_relaxed)) {
      }
    }

    std::atomic<uint32_t> slots_[kSlots] = {};
    std::atomic<uint8_t> seen_[kSlots] = {};
    std::atomic<uint32_t> taken_{0}, inserted_{0};
    std::atomic<uint64_t> last_fired_{0}, highest_seen_{0};
    // The flusher's alone:
    bool full_seen_ = false;
    uint64_t full_at_ns_ = 0;
    uint32_t held_ = 0, missed_ = 0;
  };

  Round rounds_[2];
  std::atomic<uint32_t> round_{0};
  std::atomic<bool> collecting_{true};
  // The flusher's alone:
  uint64_t retry_ns_ = kRetryNs;
  uint64_t retry_at_ns_ = 0;
  bool abandoned_ = false;
  Verdict verdict_ = Verdict::kPending;
  uint32_t held_ = 0, missed_ = 0, first_missed_ = 0;
};

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_CORRELATION_CHECK_H_
