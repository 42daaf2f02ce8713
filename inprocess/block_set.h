// The blocks whose allocation the agent was told of, so that only their
// frees are sent when allocations are sampled (inprocess/byte_sampler.h).
// A fixed table (we run under PyTorch's allocator lock: no allocation) with
// open addressing and linear probing; erasure shifts the following entries
// back instead of leaving tombstones, since a training loop reuses the same
// addresses forever. Past three quarters full, Insert refuses: the caller
// then sends every free, and the agent counts those it cannot match.
#ifndef GPUFLAME_INPROCESS_BLOCK_SET_H_
#define GPUFLAME_INPROCESS_BLOCK_SET_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gpuflame::inprocess {

template <size_t kSlots>
class BlockSet {
  static_assert((kSlots & (kSlots - 1)) == 0, "a power of two");

 public:
  // False when full (or for address 0, which marks an empty slot).
  bool Insert(uint64_t addr) {
    if (addr == 0) return false;
    size_t i = Home(addr);
    for (size_t probes = 0; probes < kSlots; probes++, i = (i + 1) & kMask) {
      if (slots_[i] == addr) return true;
      if (slots_[i] == 0) {
        if (size_ >= kSlots / 4 * 3) return false;
        slots_[i] = addr;
        size_++;
        return true;
      }
    }
    return false;
  }

  // Whether |addr| was there; it is not any more. Touches |addr|'s run of
  // slots only (not size_, a line of its own): most frees of a sampled run
  // are of blocks never inserted, and each line is a likely cache miss.
  bool Erase(uint64_t addr) {
    if (addr == 0) return false;
    size_t i = Home(addr);
    size_t probes = 0;
    for (; slots_[i] != addr; i = (i + 1) & kMask)
      if (slots_[i] == 0 || ++probes == kSlots) return false;
    // Backward shift: each later entry of the run moves into the hole unless
    // its home lies cyclically after the hole (it would become unreachable).
    size_t hole = i;
    for (size_t j = (i + 1) & kMask; slots_[j] != 0; j = (j + 1) & kMask) {
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

  void Clear() {
    if (size_ == 0) return;
    std::memset(slots_, 0, sizeof(slots_));
    size_ = 0;
  }
  size_t size() const { return size_; }

 private:
  static constexpr size_t kMask = kSlots - 1;
  // Fibonacci hashing: block addresses share their low bits.
  static size_t Home(uint64_t addr) { return static_cast<size_t>((addr * 0x9E3779B97F4A7C15ull) >> 32) & kMask; }

  uint64_t slots_[kSlots] = {};
  size_t size_ = 0;
};

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_BLOCK_SET_H_
