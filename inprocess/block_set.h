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
//
// A free's lookup first asks a filter of kFilterBits bits, on the line that
// Home() reads anyway (beside the mask): a clear bit means not there, and
// the slot's line is not touched, one evicted line less for most frees of a
// sampled run. A bit is set while any entry hashes to it: a count per bit,
// kept apart, is touched only when an entry comes or goes (a sent block's
// allocation or free, rare in a sampled run), so the filter errs only
// towards "maybe", about as often as its share of bits set (30 entries:
// 6.5%). Where the set holds hundreds (record's exact mode; the blocks of a
// process's start-up, taken whole, kept while they live) most bits are set
// and it rules little out, at no cost: its line is the mask's.
#ifndef GPUFLAME_INPROCESS_BLOCK_SET_H_
#define GPUFLAME_INPROCESS_BLOCK_SET_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gpuflame::inprocess {

template <size_t kSlots, size_t kFirstSlots = (kSlots < 1024 ? kSlots : 1024)>
class BlockSet {
 public:
  static constexpr size_t kFilterBits = 448;  // seven words: with the mask, one line

  static_assert((kSlots & (kSlots - 1)) == 0 && (kFirstSlots & (kFirstSlots - 1)) == 0, "powers of two");
  static_assert(kFirstSlots <= kSlots && kFirstSlots >= 4 && kSlots >= 8);
  static_assert(kSlots <= (size_t{1} << 31), "the mask and size are 32-bit");

  // False when full (or for address 0, which marks an empty slot).
  bool Insert(uint64_t addr) {
    if (addr == 0) return false;
    size_t i = Home(addr);
    for (size_t probes = 0; probes < capacity_; probes++, i = (i + 1) & head_.mask) {
      if (slots_[i] == addr) return true;
      if (slots_[i] == 0) {
        if (head_.size >= capacity_ / 4 * 3) {
          if (capacity_ == kSlots) return false;
          Grow();
          return Insert(addr);  // once: the doubled table is under half full
        }
        slots_[i] = addr;
        head_.size++;
        const size_t bit = FilterBit(addr);
        if (counts_[bit]++ == 0) head_.filter[bit / 64] |= uint64_t{1} << (bit % 64);
        return true;
      }
    }
    return false;
  }

  // Whether |addr| was there; it is not any more. Touches the filter's line
  // and, unless the filter rules |addr| out, |addr|'s run of slots.
  bool Erase(uint64_t addr) {
    if (addr == 0 || !MayContain(addr)) return false;
    size_t i = Home(addr);
    size_t probes = 0;
    for (; slots_[i] != addr; i = (i + 1) & head_.mask)
      if (slots_[i] == 0 || ++probes > head_.mask) return false;
    // Backward shift: each later entry of the run moves into the hole unless
    // its home lies cyclically after the hole (it would become unreachable).
    size_t hole = i;
    for (size_t j = (i + 1) & head_.mask; slots_[j] != 0; j = (j + 1) & head_.mask) {
      const size_t home = Home(slots_[j]);
      const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (stays) continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole] = 0;
    head_.size--;
    const size_t bit = FilterBit(addr);
    if (--counts_[bit] == 0) head_.filter[bit / 64] &= ~(uint64_t{1} << (bit % 64));
    return true;
  }

  // Empty, and back to the first capacity.
  void Clear() {
    if (head_.size == 0 && capacity_ == kFirstSlots) return;
    std::memset(head_.filter, 0, sizeof(head_.filter));
    std::memset(counts_, 0, sizeof(counts_));
    std::memset(slots_, 0, capacity_ * sizeof(slots_[0]));
    head_.size = 0;
    capacity_ = kFirstSlots;
    head_.mask = kFirstSlots - 1;
  }

  // False only where |addr| is not in the set.
  bool MayContain(uint64_t addr) const {
    const size_t bit = FilterBit(addr);
    return (head_.filter[bit / 64] >> (bit % 64)) & 1;
  }

  // The filter's bits set: how much of it rules nothing out.
  size_t FilterBitsSet() const {
    size_t n = 0;
    for (uint64_t word : head_.filter) n += static_cast<size_t>(__builtin_popcountll(word));
    return n;
  }

  size_t size() const { return head_.size; }
  size_t capacity() const { return capacity_; }

 private:
  // Fibonacci hashing: block addresses share their low bits.
  size_t Home(uint64_t addr) const { return static_cast<size_t>((addr * 0x9E3779B97F4A7C15ull) >> 32) & head_.mask; }

  // Another multiplier than Home's, its top 32 bits scaled to the filter.
  static size_t FilterBit(uint64_t addr) {
    return static_cast<size_t>((((addr * 0xD6E8FEB86659FD93ull) >> 32) * kFilterBits) >> 32);
  }

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
    head_.mask = static_cast<uint32_t>(capacity_ - 1);
    for (size_t k = 0; k < n; k++) {
      size_t i = Home(moving_[k]);
      while (slots_[i] != 0) i = (i + 1) & head_.mask;
      slots_[i] = moving_[k];
    }
  }

  // What every lookup reads, on one line: a free ruled out or found touches
  // no other line of ours but its slots'.
  struct alignas(64) Head {
    uint64_t filter[kFilterBits / 64] = {};
    uint32_t mask = kFirstSlots - 1;
    uint32_t size = 0;
  } head_;
  static_assert(sizeof(Head) == 64, "one line");
  // The entries hashing to each filter bit (at most three quarters of kSlots).
  uint32_t counts_[kFilterBits] = {};
  size_t capacity_ = kFirstSlots;
  uint64_t slots_[kSlots] = {};
  // Grow's scratch: at most three quarters of the half table it doubles.
  uint64_t moving_[kSlots / 8 * 3];
};

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_BLOCK_SET_H_
