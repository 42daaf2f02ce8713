#include "profiler/timeline/flight_ring.h"

#include <algorithm>

namespace gpuflame::profiler::timeline {
namespace {

// A new process's first buffer: a second of a quiet process, and a cheap
// first step for a busy one.
constexpr size_t kFirstCapacity = 256;

}  // namespace

FlightRing::FlightRing(FlightRingOptions options) : options_(options) {
  options_.max_process_events = std::max<uint64_t>(options_.max_process_events, 1);
  options_.max_total_events = std::max<uint64_t>(options_.max_total_events, 1);
  options_.max_process_events = std::min(options_.max_process_events, options_.max_total_events);
}

FlightRing::Ring& FlightRing::RingOf(uint32_t pid) {
  if (last_ring_ && last_pid_ == pid) return *last_ring_;
  std::unique_ptr<Ring>& r = rings_[pid];
  if (!r) r = std::make_unique<Ring>();
  last_pid_ = pid;
  last_ring_ = r.get();
  return *r;
}

void FlightRing::PopFront(Ring& r) {
  r.head = r.head + 1 == r.slots.size() ? 0 : r.head + 1;
  r.size--;
  r.first_seq++;
  events_--;
}

void FlightRing::Resize(Ring& r, size_t capacity) {
  while (r.size > capacity) {  // the oldest go: the bounds cut them
    CountEviction(r, r.slots[r.head].age_ns);
    PopFront(r);
  }
  std::vector<Slot> slots(capacity);
  for (size_t i = 0; i < r.size; i++) slots[i] = r.slots[(r.head + i) % r.slots.size()];
  capacity_ = capacity_ - r.slots.size() + capacity;
  r.slots = std::move(slots);
  r.head = 0;
}

FlightRing::Ring* FlightRing::Largest() {
  Ring* largest = nullptr;
  for (auto& [pid, r] : rings_)
    if (!largest || r->slots.size() > largest->slots.size()) largest = r.get();
  return largest;
}

void FlightRing::MakeRoom(Ring& r) {
  if (r.size < r.slots.size()) return;
  if (r.slots.size() < options_.max_process_events) {
    const uint64_t want =
        std::min<uint64_t>(options_.max_process_events, std::max<size_t>(kFirstCapacity, r.slots.size() * 2));
    uint64_t room = options_.max_total_events - capacity_;
    if (room < want - r.slots.size()) {
      // Over the total: a buffer below half the largest takes from it. Rare
      // (only when a buffer would grow), so the scan over processes is fine.
      Ring* largest = Largest();
      if (largest && largest != &r && r.slots.size() < largest->slots.size() / 2) {
        Resize(*largest, largest->slots.size() / 2);
        room = options_.max_total_events - capacity_;
      }
    }
    const uint64_t grow = std::min<uint64_t>(room, want - r.slots.size());
    if (grow > 0) {
      Resize(r, r.slots.size() + grow);
      return;
    }
  }
  if (r.size == 0) return;  // no room at all: the caller drops the event
  CountEviction(r, r.slots[r.head].age_ns);
  PopFront(r);
}

void FlightRing::CountEviction(Ring& r, uint64_t age_ns) {
  r.evicted++;
  totals_.evicted++;
  const uint64_t second = age_ns / 1'000'000'000;
  const size_t i = second % kEvictionSeconds;
  if (r.evicted_second[i] != second) {
    r.evicted_second[i] = second;
    r.evicted_count[i] = 0;
  }
  r.evicted_count[i]++;
}

uint64_t FlightRing::EvictedSince(uint32_t pid, uint64_t since_ns) const {
  auto it = rings_.find(pid);
  if (it == rings_.end()) return 0;
  const Ring& r = *it->second;
  uint64_t n = 0;
  for (size_t i = 0; i < kEvictionSeconds; i++)
    if (r.evicted_count[i] && r.evicted_second[i] >= since_ns / 1'000'000'000) n += r.evicted_count[i];
  return n;
}

uint64_t FlightRing::Push(const Event& e, uint64_t age_ns) {
  Ring& r = RingOf(e.pid);
  totals_.pushed++;
  r.newest_ns = std::max(r.newest_ns, age_ns);
  const uint64_t oldest_kept = r.newest_ns > options_.window_ns ? r.newest_ns - options_.window_ns : 0;
  while (r.size > 0 && r.slots[r.head].age_ns < oldest_kept) {
    PopFront(r);
    r.aged_out++;
    totals_.aged_out++;
  }
  MakeRoom(r);
  if (r.size == r.slots.size()) {
    // Not one slot to be had (every slot is another process's and none is
    // twice this one's): the event itself is lost, counted as evicted.
    CountEviction(r, age_ns);
    return kNone;
  }
  r.slots[(r.head + r.size) % r.slots.size()] = {e, age_ns};
  r.size++;
  events_++;
  return r.first_seq + r.size - 1;
}

Event* FlightRing::At(uint32_t pid, uint64_t seq) {
  auto it = rings_.find(pid);
  if (it == rings_.end()) return nullptr;
  Ring& r = *it->second;
  if (seq < r.first_seq || seq - r.first_seq >= r.size) return nullptr;
  return &r.slots[(r.head + (seq - r.first_seq)) % r.slots.size()].event;
}

void FlightRing::CopySince(uint32_t pid, uint64_t since_ns, std::deque<Event>& out) const {
  auto it = rings_.find(pid);
  if (it == rings_.end()) return;
  const Ring& r = *it->second;
  for (size_t i = 0; i < r.size; i++) {
    const Slot& s = r.slots[(r.head + i) % r.slots.size()];
    if (s.age_ns >= since_ns) out.push_back(s.event);
  }
}

void FlightRing::Forget(uint32_t pid) {
  auto it = rings_.find(pid);
  if (it == rings_.end()) return;
  events_ -= it->second->size;
  capacity_ -= it->second->slots.size();
  if (last_ring_ == it->second.get()) last_ring_ = nullptr;
  rings_.erase(it);
}

FlightProcessStats FlightRing::ProcessStats(uint32_t pid) const {
  auto it = rings_.find(pid);
  if (it == rings_.end()) return {};
  const Ring& r = *it->second;
  FlightProcessStats s{.events = r.size, .aged_out = r.aged_out, .evicted = r.evicted};
  if (r.size) {
    s.oldest_ns = UINT64_MAX;  // the front is the first in, not always the oldest
    for (size_t i = 0; i < r.size; i++)
      s.oldest_ns = std::min(s.oldest_ns, r.slots[(r.head + i) % r.slots.size()].age_ns);
  }
  return s;
}

FlightRingStats FlightRing::stats() const {
  FlightRingStats s = totals_;
  s.events = events_;
  s.capacity = capacity_;
  s.processes = rings_.size();
  return s;
}

}  // namespace gpuflame::profiler::timeline
