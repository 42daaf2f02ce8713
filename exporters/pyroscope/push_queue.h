// Delivery that loses nothing silently: a bounded in-memory queue of push
// requests, a sender thread, retries with exponential backoff and jitter for
// errors a retry can fix, and, when a spool directory is configured, every
// request that could not be delivered moved to disk (on a failed push and at
// shutdown) and replayed oldest first, after a restart too. Every drop is
// counted with its reason.
// Thread-safe: Enqueue from the event loop, sending on its own thread.
#ifndef GPUFLAME_EXPORTERS_PYROSCOPE_PUSH_QUEUE_H_
#define GPUFLAME_EXPORTERS_PYROSCOPE_PUSH_QUEUE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "exporters/pyroscope/pyroscope_client.h"
#include "exporters/pyroscope/spool.h"

namespace gpuflame::exporters {

struct PushQueueOptions {
  size_t max_requests = 256;   // in memory; oldest dropped beyond this (counted)
  int initial_backoff_ms = 250;
  int max_backoff_ms = 30000;
  std::string spool_dir;       // empty: no spool
  uint64_t spool_max_bytes = 256ull << 20;
};

struct PushStats {
  uint64_t pushed = 0;            // requests accepted by Pyroscope
  uint64_t series_pushed = 0;
  uint64_t failed_attempts = 0;   // retryable failures (each retried)
  uint64_t dropped_queue_full = 0;
  uint64_t dropped_rejected = 0;  // Pyroscope said no for good
  uint64_t dropped_spool_full = 0;
  uint64_t spool_corrupt = 0;
  uint64_t queued = 0;            // in memory
  uint64_t spooled = 0;           // on disk
  uint64_t spool_bytes = 0;
  std::string last_error;
};

class PushQueue {
 public:
  // Sends one serialized push.v1.PushRequest.
  using Sender = std::function<absl::Status(const std::string& body)>;
  static absl::StatusOr<std::unique_ptr<PushQueue>> Create(Sender sender, PushQueueOptions options);
  ~PushQueue();  // what is still undelivered goes to the spool, if any

  void Enqueue(const std::vector<Series>& request);
  PushStats Stats() const;
  // Blocks until nothing is waiting (memory and spool) or |timeout_ms|
  // passes; true if everything was delivered.
  bool Flush(int timeout_ms);

 private:
  PushQueue(Sender sender, PushQueueOptions options) : sender_(std::move(sender)), options_(std::move(options)) {}
  void Run();
  void SpillLocked();  // memory -> spool, in order
  bool IdleLocked() const { return queue_.empty() && (!spool_ || spool_->empty()) && !busy_; }
  void RefreshLocked();

  struct Entry {
    uint64_t id;
    uint32_t series;
    std::string body;
  };
  Sender sender_;
  PushQueueOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> queue_;
  std::optional<Spool> spool_;
  uint64_t next_id_ = 1;  // 0 means "no entry" (in_flight_)
  PushStats stats_;
  bool stopping_ = false;
  bool busy_ = false;
  uint64_t in_flight_ = 0;  // id of the queue entry being sent (ids start at 1); 0: none
  std::thread thread_;
};

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_PYROSCOPE_PUSH_QUEUE_H_
