// RecordQueue: the hand-off between the ring-buffer reader thread and the
// worker. Wrap-around with padding, a full queue, every record size up to the
// largest, and two threads moving records of random sizes while checking
// order and every byte.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "profiler/probes/record_queue.h"

namespace gpuflame::profiler {
namespace {

// A record whose bytes say which record it is: |seq| and |size| can be
// checked from the bytes alone.
std::vector<uint8_t> Make(uint64_t seq, size_t size) {
  std::vector<uint8_t> r(size);
  for (size_t i = 0; i < size; i++) r[i] = static_cast<uint8_t>((seq * 131 + i * 7) & 0xff);
  return r;
}

bool Matches(std::span<const uint8_t> r, uint64_t seq, size_t size) {
  if (r.size() != size) return false;
  for (size_t i = 0; i < size; i++)
    if (r[i] != static_cast<uint8_t>((seq * 131 + i * 7) & 0xff)) return false;
  return true;
}

TEST(RecordQueueTest, CapacityIsAPowerOfTwoAndEmptyMeansNothing) {
  RecordQueue q(5000);
  EXPECT_EQ(q.capacity(), 8192u);
  EXPECT_EQ(q.max_record(), 8192u - RecordQueue::kHeaderBytes);
  EXPECT_FALSE(q.Front().has_value());
  EXPECT_EQ(RecordQueue(1).capacity(), RecordQueue::kMinCapacity);
}

TEST(RecordQueueTest, VariableSizesComeOutInOrderByteForByte) {
  RecordQueue q(4096);
  const size_t sizes[] = {0, 1, 7, 8, 9, 72, 100, 1000};
  for (size_t i = 0; i < std::size(sizes); i++) ASSERT_TRUE(q.TryPush(Make(i, sizes[i])));
  for (size_t i = 0; i < std::size(sizes); i++) {
    auto r = q.Front();
    ASSERT_TRUE(r.has_value());
    EXPECT_TRUE(Matches(*r, i, sizes[i])) << "record " << i;
    q.Pop();
  }
  EXPECT_FALSE(q.Front().has_value());
  EXPECT_EQ(q.used_bytes(), 0u);
}

TEST(RecordQueueTest, FullRefusesUntilTheConsumerMakesRoom) {
  RecordQueue q(4096);
  // 100 bytes -> 8 header + 104 padded = 112 per record; 36 fit in 4096.
  int pushed = 0;
  while (q.TryPush(Make(pushed, 100))) pushed++;
  EXPECT_EQ(pushed, 4096 / 112);
  ASSERT_TRUE(q.Front().has_value());
  q.Pop();
  EXPECT_TRUE(q.TryPush(Make(pushed, 100)));
}

TEST(RecordQueueTest, WrapsAroundWithAPadRecordAndKeepsEveryRecordWhole) {
  RecordQueue q(4096);
  // Records that do not divide the capacity: every lap ends in a pad.
  uint64_t next_in = 0, next_out = 0;
  const size_t size = 1000;  // 1008 + 8 = 1016 per record: 4 fit, 32 bytes left at the end
  for (int round = 0; round < 50; round++) {
    while (q.TryPush(Make(next_in, size))) next_in++;
    // Drain half, so that the next pushes straddle the end.
    for (int i = 0; i < 2; i++) {
      auto r = q.Front();
      ASSERT_TRUE(r.has_value());
      ASSERT_TRUE(Matches(*r, next_out, size)) << "record " << next_out;
      q.Pop();
      next_out++;
    }
  }
  while (auto r = q.Front()) {
    ASSERT_TRUE(Matches(*r, next_out, size));
    q.Pop();
    next_out++;
  }
  EXPECT_EQ(next_in, next_out);
  EXPECT_GT(next_in, 100u);
}

TEST(RecordQueueTest, TheLargestRecordFitsWhateverTheOffset) {
  RecordQueue q(4096);
  for (size_t offset_records = 0; offset_records < 5; offset_records++) {
    for (size_t i = 0; i < offset_records; i++) {
      ASSERT_TRUE(q.TryPush(Make(i, 24)));
      q.Front();
      q.Pop();
    }
    // The pad at the end and the record cannot both fit at once; the pad
    // goes first and the record follows once the consumer skips it.
    bool pushed = q.TryPush(Make(7, q.max_record()));
    if (!pushed) {
      EXPECT_FALSE(q.Front().has_value());  // only the pad was there
      pushed = q.TryPush(Make(7, q.max_record()));
    }
    ASSERT_TRUE(pushed) << "offset " << offset_records;
    auto r = q.Front();
    ASSERT_TRUE(r.has_value());
    EXPECT_TRUE(Matches(*r, 7, q.max_record()));
    q.Pop();
  }
  EXPECT_EQ(q.Push(Make(0, q.max_record() + 1)), RecordQueue::PushResult::kTooBig);
}

TEST(RecordQueueTest, CloseReleasesAProducerWaitingOnAFullQueue) {
  RecordQueue q(4096);
  while (q.TryPush(Make(0, 500))) {
  }
  std::atomic<bool> returned{false};
  RecordQueue::PushResult result = RecordQueue::PushResult::kPushed;
  std::thread producer([&] {
    result = q.Push(Make(1, 500));
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned.load());  // waiting, not spinning out or dropping
  EXPECT_EQ(q.full_waits(), 1u);
  q.Close();
  producer.join();
  EXPECT_EQ(result, RecordQueue::PushResult::kClosed);
}

TEST(RecordQueueTest, AWaitingConsumerWakesForNotifiedRecordsAndForWakeConsumer) {
  RecordQueue q(4096);
  auto start = std::chrono::steady_clock::now();
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    q.Push(Make(0, 10));
    q.NotifyConsumer();  // the end of the producer's batch
  });
  while (!q.Front()) q.WaitForData(q.ConsumerEpoch(), 5000);
  producer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  q.Pop();

  // Not a record: the epoch taken before the wake makes the wait return.
  uint32_t epoch = q.ConsumerEpoch();
  q.WakeConsumer();
  start = std::chrono::steady_clock::now();
  q.WaitForData(epoch, 5000);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

// Two threads, a small queue, random sizes: the consumer must see every
// record, in order, byte for byte, with the producer often waiting for room
// and the consumer often waiting for records (a lost wake would show as a
// one-second stall per occurrence: the test would time out).
TEST(RecordQueueTest, TwoThreadStressKeepsOrderAndBytes) {
  RecordQueue q(1 << 14);
  constexpr uint64_t kRecords = 200'000;
  std::thread producer([&] {
    std::mt19937_64 rng(42);
    for (uint64_t seq = 0; seq < kRecords; seq++) {
      // Mostly small (the common event), sometimes up to a quarter of the queue.
      size_t size = rng() % 16 == 0 ? rng() % (q.capacity() / 4) : 72 + rng() % 200;
      ASSERT_EQ(q.Push(Make(seq, size)), RecordQueue::PushResult::kPushed);
      if (seq % 7 == 0) q.NotifyConsumer();  // batches of 7, as the reader's reads of the ring
    }
    q.NotifyConsumer();
  });
  std::mt19937_64 rng(42);
  uint64_t seq = 0;
  while (seq < kRecords) {
    uint32_t epoch = q.ConsumerEpoch();
    auto r = q.Front();
    if (!r) {
      q.WaitForData(epoch, 1000);
      continue;
    }
    size_t size = rng() % 16 == 0 ? rng() % (q.capacity() / 4) : 72 + rng() % 200;
    ASSERT_TRUE(Matches(*r, seq, size)) << "record " << seq << " of size " << size << " came as " << r->size();
    q.Pop();
    seq++;
  }
  producer.join();
  EXPECT_FALSE(q.Front().has_value());
  EXPECT_GT(q.full_waits(), 0u);  // the producer did have to wait
}

}  // namespace
}  // namespace gpuflame::profiler
