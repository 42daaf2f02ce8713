// A bounded single-producer/single-consumer queue of variable-length byte
// records: the hand-off from the ring-buffer reader thread (producer) to the
// worker that decodes, unwinds and resolves them (consumer).
//
// Layout: a power-of-two byte ring, like the kernel's BPF ring buffer: each
// record is an 8-byte header (length, flags) and its bytes, padded to 8.
// A record that would straddle the end of the buffer is preceded by a pad
// record that covers the rest of it, so every record is contiguous and the
// consumer handles it in place (no second copy).
//
// Synchronisation: the producer owns `head_`, the consumer owns `tail_`;
// each publishes its position with a store the other side loads (release /
// acquire orders the record bytes). No lock on either path. A side that
// finds the queue empty (consumer) or full (producer) sleeps on a futex
// word; the other side pays a futex wake only when it sees the sleeper's
// flag (a Dekker-style store, fence, load on both sides, so a wake is never
// lost); a waiting producer says how much room it needs, so the consumer
// wakes it once, not per record popped. The producer looks for a sleeping
// consumer once per batch
// (NotifyConsumer), not per record: a consumer that keeps up sleeps after
// every record, and a futex wake per record costs more than the copy.
//
// Why written here rather than taken from a library: absl has no such queue;
// folly::ProducerConsumerQueue, boost::lockfree::spsc_queue and
// moodycamel::ReaderWriterQueue hold fixed-size elements, so records of 72 B
// to 20 KB would need a slot of the largest size or a heap allocation per
// record (what this path exists to avoid), and none sleeps with a timeout on
// both sides. ~150 lines, with the same model as the kernel ring it drains,
// cost less than a new dependency in the agent's image.
//
// Threads: Push/TryPush/NotifyConsumer from exactly one producer thread; Front/Pop/
// ConsumerEpoch/WaitForData from exactly one consumer thread; Close,
// WakeConsumer and the counters from any thread.
#ifndef GPUFLAME_PROFILER_PROBES_RECORD_QUEUE_H_
#define GPUFLAME_PROFILER_PROBES_RECORD_QUEUE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

namespace gpuflame::profiler {

class RecordQueue {
 public:
  static constexpr size_t kHeaderBytes = 8;
  static constexpr size_t kMinCapacity = 4096;
  static constexpr size_t kMaxCapacity = size_t{1} << 30;  // lengths are 32-bit

  // |capacity_bytes| is rounded up to a power of two, within the bounds above.
  // Memory is reserved, not touched: pages become resident as records pass.
  explicit RecordQueue(size_t capacity_bytes);
  RecordQueue(const RecordQueue&) = delete;
  RecordQueue& operator=(const RecordQueue&) = delete;

  size_t capacity() const { return capacity_; }
  // The largest record that can ever be queued (capacity less one header).
  size_t max_record() const { return capacity_ - kHeaderBytes; }

  // --- Producer thread ---
  enum class PushResult { kPushed, kClosed, kTooBig };
  // Copies |record| in; while the queue is full, sleeps until the consumer
  // makes room (or Close()). Never spins, never grows.
  PushResult Push(std::span<const uint8_t> record);
  // Copies |record| in if there is room now.
  bool TryPush(std::span<const uint8_t> record);
  // Records pushed are visible to the consumer at once, but a sleeping
  // consumer is only woken by this: call it after a batch of pushes (and
  // every so often within a long one). Costs a fence when nobody sleeps.
  void NotifyConsumer();

  // --- Consumer thread ---
  // The oldest record, in place; valid until Pop(). Nothing when empty.
  std::optional<std::span<const uint8_t>> Front();
  // Releases the record Front() returned (room for the producer).
  void Pop();
  // Sleeping without losing a wake: take the epoch, check every condition
  // you wait for (Front(), flags a producer sets before WakeConsumer()),
  // then WaitForData(epoch, ...). Returns when a record is pushed,
  // WakeConsumer()/Close() is called after the epoch was taken, or
  // |timeout_ms| passes (0: never sleeps; spurious early returns possible).
  uint32_t ConsumerEpoch() const { return data_epoch_.load(std::memory_order_seq_cst); }
  void WaitForData(uint32_t epoch, int timeout_ms);

  // --- Any thread ---
  // Wakes the consumer for news other than a record (a drain finished, the
  // producer stopped).
  void WakeConsumer();
  // Push returns kClosed from now on, and both sides are woken.
  void Close();
  bool closed() const { return closed_.load(std::memory_order_acquire); }
  // Bytes queued, headers and padding included (approximate while moving).
  size_t used_bytes() const {
    return static_cast<size_t>(head_.load(std::memory_order_relaxed) - tail_.load(std::memory_order_relaxed));
  }
  // Times Push found the queue full and slept.
  uint64_t full_waits() const { return full_waits_.load(std::memory_order_relaxed); }

 private:
  static constexpr uint32_t kPad = 1;
  struct Header {
    uint32_t length;  // record bytes, header and padding excluded
    uint32_t flags;   // kPad: skip length bytes
  };

  // 0 when written; else the free bytes it needs before it can go on.
  uint64_t TryWrite(std::span<const uint8_t> record);
  bool HasRoom(uint64_t head, uint64_t bytes);
  void Release(uint64_t tail);
  Header ReadHeader(uint64_t pos) const;
  void WriteHeader(uint64_t pos, Header h);
  uint8_t* At(uint64_t pos) const { return bytes_ + (pos & mask_); }

  size_t capacity_;
  uint64_t mask_;
  std::unique_ptr<uint64_t[]> storage_;  // 8-byte aligned
  uint8_t* bytes_;

  // Producer's line: its position, its view of the consumer's, its futex.
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t cached_tail_ = 0;
  std::atomic<uint32_t> producer_waiting_{0};  // bytes of room it waits for; 0: not waiting
  std::atomic<uint32_t> space_epoch_{0};  // futex word the producer sleeps on
  std::atomic<uint64_t> full_waits_{0};

  // Consumer's line.
  alignas(64) std::atomic<uint64_t> tail_{0};
  uint64_t tail_local_ = 0;
  uint64_t cached_head_ = 0;
  uint64_t front_bytes_ = 0;  // header + padded length of the record Front() returned
  std::atomic<uint32_t> consumer_waiting_{0};
  std::atomic<uint32_t> data_epoch_{0};  // futex word the consumer sleeps on

  alignas(64) std::atomic<bool> closed_{false};
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROBES_RECORD_QUEUE_H_
