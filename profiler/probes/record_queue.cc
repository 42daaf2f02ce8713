#include "profiler/probes/record_queue.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>

namespace gpuflame::profiler {
namespace {

// The futex words are std::atomic<uint32_t>: the kernel needs a plain,
// 4-byte, naturally aligned int at that address (libstdc++'s own
// atomic::wait relies on the same layout). Ours are used rather than
// atomic::wait because the consumer needs a timeout.
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);

void FutexWait(std::atomic<uint32_t>& word, uint32_t expected, int timeout_ms) {
  timespec ts{};
  timespec* relative = nullptr;
  if (timeout_ms >= 0) {
    ts.tv_sec = timeout_ms / 1000;
    ts.tv_nsec = static_cast<long>(timeout_ms % 1000) * 1'000'000;
    relative = &ts;
  }
  // EAGAIN (the word moved on: a wake we must not sleep through), EINTR and
  // ETIMEDOUT all mean "look again"; callers loop.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, relative, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

constexpr uint64_t Padded(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

}  // namespace

RecordQueue::RecordQueue(size_t capacity_bytes)
    : capacity_(std::bit_ceil(std::clamp(capacity_bytes, kMinCapacity, kMaxCapacity))),
      mask_(capacity_ - 1),
      // for_overwrite: no zeroing, so untouched pages are never made resident.
      storage_(std::make_unique_for_overwrite<uint64_t[]>(capacity_ / sizeof(uint64_t))),
      bytes_(reinterpret_cast<uint8_t*>(storage_.get())) {}

RecordQueue::Header RecordQueue::ReadHeader(uint64_t pos) const {
  Header h;
  std::memcpy(&h, At(pos), sizeof(h));
  return h;
}

void RecordQueue::WriteHeader(uint64_t pos, Header h) { std::memcpy(At(pos), &h, sizeof(h)); }

bool RecordQueue::HasRoom(uint64_t head, uint64_t bytes) {
  if (capacity_ - (head - cached_tail_) >= bytes) return true;
  // Acquire: the consumer is done reading the bytes it released before we
  // overwrite them. seq_cst: ordered after producer_waiting_'s store in Push.
  cached_tail_ = tail_.load(std::memory_order_seq_cst);
  return capacity_ - (head - cached_tail_) >= bytes;
}

uint64_t RecordQueue::TryWrite(std::span<const uint8_t> record) {
  const uint64_t bytes = kHeaderBytes + Padded(record.size());
  uint64_t head = head_.load(std::memory_order_relaxed);  // ours alone
  const uint64_t to_end = capacity_ - (head & mask_);
  if (bytes > to_end) {
    // Not contiguous before the end: a pad record takes the rest (always at
    // least a header: positions are multiples of 8). Published on its own,
    // so that a record as large as the whole buffer can follow once the
    // consumer has caught up, whatever the offset was.
    if (!HasRoom(head, to_end)) return to_end;
    WriteHeader(head, {static_cast<uint32_t>(to_end - kHeaderBytes), kPad});
    head += to_end;
    head_.store(head, std::memory_order_release);
  }
  if (!HasRoom(head, bytes)) return bytes;
  WriteHeader(head, {static_cast<uint32_t>(record.size()), 0});
  std::memcpy(At(head + kHeaderBytes), record.data(), record.size());
  // Release: the bytes above are visible to a consumer that sees this head.
  // Whether the consumer sleeps is NotifyConsumer's business.
  head_.store(head + bytes, std::memory_order_release);
  return 0;
}

void RecordQueue::NotifyConsumer() {
  // Pairs with the fence in WaitForData: either the consumer's look at
  // head_ sees our pushes, or we see its flag here (and wake it).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (consumer_waiting_.load(std::memory_order_relaxed)) WakeConsumer();
}

bool RecordQueue::TryPush(std::span<const uint8_t> record) {
  if (record.size() > max_record() || closed()) return false;
  return TryWrite(record) == 0;
}

RecordQueue::PushResult RecordQueue::Push(std::span<const uint8_t> record) {
  if (record.size() > max_record()) return PushResult::kTooBig;
  bool counted = false;
  for (;;) {
    if (closed()) return PushResult::kClosed;
    const uint64_t need = TryWrite(record);
    if (need == 0) return PushResult::kPushed;
    if (!counted) {
      full_waits_.fetch_add(1, std::memory_order_relaxed);
      counted = true;
    }
    NotifyConsumer();  // what we pushed so far must not wait for our batch to end
    // Full: sleep until the consumer has freed |need| bytes. Say so first,
    // then look again, then sleep on the epoch taken before: a Release()
    // between our look and our sleep has moved the epoch, so the futex
    // returns at once. Saying how much (not just "waiting") spares a wake
    // per record the worker pops while a 20 KB record waits for room.
    const uint32_t epoch = space_epoch_.load(std::memory_order_seq_cst);
    producer_waiting_.store(static_cast<uint32_t>(need), std::memory_order_seq_cst);
    const uint64_t again = closed() ? need : TryWrite(record);
    // A different need (a pad went in meanwhile) is said again before sleeping.
    if (again == need && !closed()) FutexWait(space_epoch_, epoch, -1);
    producer_waiting_.store(0, std::memory_order_relaxed);
    if (again == 0) return PushResult::kPushed;
  }
}

std::optional<std::span<const uint8_t>> RecordQueue::Front() {
  for (;;) {
    if (tail_local_ == cached_head_) {
      cached_head_ = head_.load(std::memory_order_acquire);
      if (tail_local_ == cached_head_) return std::nullopt;
    }
    Header h = ReadHeader(tail_local_);
    if (h.flags & kPad) {
      Release(tail_local_ + kHeaderBytes + h.length);
      continue;
    }
    front_bytes_ = kHeaderBytes + Padded(h.length);
    return std::span<const uint8_t>(At(tail_local_ + kHeaderBytes), h.length);
  }
}

void RecordQueue::Pop() {
  Release(tail_local_ + front_bytes_);
  front_bytes_ = 0;
}

void RecordQueue::Release(uint64_t tail) {
  tail_local_ = tail;
  // Release: we are done with these bytes. seq_cst + the load below pair
  // with Push's store-then-load of producer_waiting_.
  tail_.store(tail, std::memory_order_seq_cst);
  const uint32_t need = producer_waiting_.load(std::memory_order_seq_cst);
  if (need != 0 && capacity_ - (head_.load(std::memory_order_acquire) - tail) >= need) {
    space_epoch_.fetch_add(1, std::memory_order_seq_cst);
    FutexWakeAll(space_epoch_);
  }
}

void RecordQueue::WaitForData(uint32_t epoch, int timeout_ms) {
  if (timeout_ms == 0) return;
  consumer_waiting_.store(1, std::memory_order_relaxed);
  // Pairs with NotifyConsumer's fence: a record the producer pushed before
  // it could see our flag is seen here instead.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (head_.load(std::memory_order_acquire) == tail_local_ && !closed()) FutexWait(data_epoch_, epoch, timeout_ms);
  consumer_waiting_.store(0, std::memory_order_relaxed);
}

void RecordQueue::WakeConsumer() {
  data_epoch_.fetch_add(1, std::memory_order_seq_cst);
  FutexWakeAll(data_epoch_);
}

void RecordQueue::Close() {
  closed_.store(true, std::memory_order_seq_cst);
  WakeConsumer();
  space_epoch_.fetch_add(1, std::memory_order_seq_cst);
  FutexWakeAll(space_epoch_);
}

}  // namespace gpuflame::profiler
