// A duty cycle for something too costly to leave on (CUPTI activity, launch
// callbacks): time is cut into ticks (the flusher's 100 ms), ticks into
// periods of |one_in| x |on_ticks|, and in each period |on_ticks|
// consecutive ticks are on, starting at a tick drawn uniformly from the
// period and wrapping around its end. Every tick is then on with
// probability exactly 1/|one_in|, whatever the workload's own rhythm, so
// what is seen while on, weighted |one_in|, is an unbiased estimate of the
// whole; a fixed phase could alias with a periodic workload (a training
// step) and a window placed only where it fits would see the period's edges
// less often. Not thread-safe: the flusher thread only.
#ifndef GPUFLAME_CUPTI_DUTY_CYCLE_H_
#define GPUFLAME_CUPTI_DUTY_CYCLE_H_

#include <cstdint>

namespace gpuflame::cupti {

class DutyCycle {
 public:
  // |one_in| <= 1: always on.
  DutyCycle(uint32_t on_ticks, uint32_t one_in, uint64_t seed)
      : on_(on_ticks ? on_ticks : 1), one_in_(one_in ? one_in : 1), rng_(seed | 1) {
    start_ = Random() % Period();
    weight_ = one_in_;
  }

  // Whether the coming tick is on; weight() is then that tick's.
  bool Next() {
    weight_ = one_in_;
    if (one_in_ <= 1) {
      ApplyPending();
      return true;
    }
    const bool on = On(tick_);
    tick_ = (tick_ + 1) % Period();
    // The next period's phase, drawn as this one ends so that Peek() can
    // see across the boundary; a new share (SetOneIn) starts there too.
    if (tick_ == 0) {
      ApplyPending();
      start_ = Random() % Period();
    }
    return on;
  }

  // One tick in |one_in| from the next period on. Not at once: a period cut
  // short where its window happens to be would not give every tick the
  // same chance (a change made when the window is off lets one already
  // under way run whole at the old share, and the estimate leans high).
  // Between periods every tick keeps exactly its period's chance.
  void SetOneIn(uint32_t one_in) { pending_ = one_in ? one_in : 1; }

  // Whether the tick after the one Next() last answered for will be on,
  // without moving on (what gets ready a tick ahead uses it).
  bool Peek() const { return one_in_ <= 1 || On(tick_); }

  // What one record observed in the tick Next() last answered for stands for.
  uint32_t weight() const { return weight_; }
  uint32_t one_in() const { return pending_ ? pending_ : one_in_; }  // in force, or next

 private:
  // xorshift64*: a few cycles, no locks, and good enough to pick a phase.
  uint64_t Random() {
    rng_ ^= rng_ >> 12;
    rng_ ^= rng_ << 25;
    rng_ ^= rng_ >> 27;
    return rng_ * 0x2545F4914F6CDD1Dull;
  }

  uint64_t Period() const { return static_cast<uint64_t>(on_) * one_in_; }
  void ApplyPending() {
    if (!pending_) return;
    one_in_ = pending_;
    pending_ = 0;
    tick_ = 0;
    if (one_in_ > 1) start_ = Random() % Period();
  }
  // Tick |tick| of the current period is in its window.
  bool On(uint64_t tick) const {
    const uint64_t period = Period();
    return (tick + period - start_) % period < on_;  // ticks since the window opened
  }

  uint32_t on_;
  uint32_t one_in_;
  uint64_t rng_;
  uint64_t tick_ = 0;
  uint64_t start_ = 0;
  uint32_t pending_ = 0;  // SetOneIn's, for the next period; 0: none
  uint32_t weight_ = 1;   // the last answered tick's one_in_
};

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_DUTY_CYCLE_H_
