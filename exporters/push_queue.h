// Delivery that loses nothing silently: a bounded queue of push requests, a
// sender thread, retries with exponential backoff and jitter for errors a
// retry can fix, and a count of everything dropped and why.
// Thread-safe: Enqueue from the event loop, sending on its own thread.
#ifndef GPUFLAME_EXPORTERS_PUSH_QUEUE_H_
#define GPUFLAME_EXPORTERS_PUSH_QUEUE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "exporters/pyroscope_client.h"

namespace gpuflame::exporters {

struct PushQueueOptions {
  size_t max_requests = 256;   // oldest dropped beyond this (counted)
  int initial_backoff_ms = 250;
  int max_backoff_ms = 30000;
};

struct PushStats {
  uint64_t pushed = 0;            // requests accepted by Pyroscope
  uint64_t series_pushed = 0;
  uint64_t failed_attempts = 0;   // retryable failures (each retried)
  uint64_t dropped_queue_full = 0;
  uint64_t dropped_rejected = 0;  // Pyroscope said no for good (counted, logged)
  uint64_t queued = 0;
  std::string last_error;
};

class PushQueue {
 public:
  using Sender = std::function<absl::Status(const std::vector<Series>&)>;
  PushQueue(Sender sender, PushQueueOptions options);
  ~PushQueue();  // stops after trying what is queued once more

  void Enqueue(std::vector<Series> request);
  PushStats Stats() const;
  // Blocks until the queue is empty or |timeout_ms| passes; true if empty.
  bool Flush(int timeout_ms);

 private:
  void Run();

  Sender sender_;
  PushQueueOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Entry {
    uint64_t id;
    std::vector<Series> request;
  };
  std::deque<Entry> queue_;
  uint64_t next_id_ = 0;
  PushStats stats_;
  bool stopping_ = false;
  bool busy_ = false;
  std::thread thread_;
};

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_PUSH_QUEUE_H_
