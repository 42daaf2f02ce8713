// The blocks whose allocation the agent was told of, so that only their
// frees are sent when allocations are sampled (inprocess/byte_sampler.h).
// A fixed table (we run under PyTorch's allocator lock: no allocation) with
// open addressing and linear probing; erasure shifts the following entries
// back instead of leaving tombstones, since a training loop reuses the same
// addresses forever.
//
// Only the table's first |capacity()| slots are in use, doubled when three
// quarters full: most frees of a sampled run are of blocks never inserted,
// and each costs one slot's line, which PyTorch's own work between two
// allocator calls has evicted. In a table sized to what it holds those
// lines are few and stay cached; spread over the whole table each is a
// cache and TLB miss (tensor_hook_benchmark: the hook's cost per event of
// a sampled stream halves). Past three quarters of the whole table, Insert
// refuses: the caller then sends every free, and the agent counts those it
// cannot match.
#ifndef GPUFLAME_INPROCESS_BLOCK_SET_H_
#define GPUFLAME_INPROCESS_BLOCK_SET_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gpuflame::inprocess {

template <size_t kSlots, size_t kFirstSlots = (kSlots < 1024 ? kSlots : 1024)>
class BlockSet {
  static_assert((kSlots & (kSlots - 1)) == 0 && (kFirstSlots & (kFirstSlots - 1)) == 0, "powers of two");
  static_assert(kFirstSlots <= kSlots && kFirstSlots >= 4 && kSlots >= 8);

 public:
  // False when full (or for address 0, which marks an empty slot).
  bool Insert(uint64_t addr) {
    if (addr == 0) return false;
    size_t i = Home(addr);
    for (size_t probes = 0; probes < capacity_; probes++, i = (i + 1) & mask_) {
      if (slots_[i] == addr) return true;
      if (slots_[i] == 0) {
        if (size_ >= capacity_ / 4 * 3) {
          if (capacity_ == kSlots) return false;
          Grow();
          return Insert(addr);  // once: the doubled table is under half full
        }
        slots_[i] = addr;
        size_++;
        return true;
      }
    }
    return false;
  }

  // Whether |addr| was there; it is not any more. Touches |addr|'s run of
  // slots only, and the line of |mask_| (beside |slots_|' first).
  bool Erase(uint64_t addr) {
    if (addr == 0) return false;
    size_t i = Home(addr);
    size_t probes = 0;
    for (; slots_[i] != addr; i = (i + 1) & mask_)
      if (slots_[i] == 0 || ++probes == capacity_) return false;
    // Backward shift: each later entry of the run moves into the hole unless
    // its home lies cyclically after the hole (it would become unreachable).
    size_t hole = i;
    for (size_t j = (i + 1) & mask_; slots_[j] != 0; j = (j + 1) & mask_) {
      const size_t home = Home(slots_[j]);
      const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (stays) continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole] = 0;
    size_--;
    return true;
  }

  // Empty, and back to the first capacity.
  void Clear() {
    if (size_ == 0 && capacity_ == kFirstSlots) return;
    std::memset(slots_, 0, capacity_ * sizeof(slots_[0]));
    size_ = 0;
    capacity_ = kFirstSlots;
    mask_ = kFirstSlots - 1;
  }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }

 private:
  // Fibonacci hashing: block addresses share their low bits.
  size_t Home(uint64_t addr) const { return static_cast<size_t>((addr * 0x9E3779B97F4A7C15ull) >> 32) & mask_; }

  // Doubles the slots in use and puts every entry where the new mask homes
  // it: under the allocator's lock, once per doubling (a few times in a
  // process's life), each entry moved once.
  void Grow() {
    size_t n = 0;
    for (size_t i = 0; i < capacity_; i++) {
      if (slots_[i] == 0) continue;
      moving_[n++] = slots_[i];
      slots_[i] = 0;
    }
    capacity_ *= 2;
    mask_ = capacity_ - 1;
    for (size_t k = 0; k < n; k++) {
      size_t i = Home(moving_[k]);
      while (slots_[i] != 0) i = (i + 1) & mask_;
      slots_[i] = moving_[k];
    }
  }

  size_t mask_ = kFirstSlots - 1;
  size_t capacity_ = kFirstSlots;
  size_t size_ = 0;
  uint64_t slots_[kSlots] = {};
  // Grow's scratch: at most three quarters of the half table it doubles.
  uint64_t moving_[kSlots / 8 * 3];
};

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_BLOCK_SET_H_
