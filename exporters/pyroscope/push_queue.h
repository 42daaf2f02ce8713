// Delivery that loses nothing silently and sends nothing twice: a bounded
// in-memory queue of push requests, a sender thread, retries with
// exponential backoff and jitter for errors a retry can fix, and, when a
// spool directory is configured, every request that could not be delivered
// moved to disk (on a failed push and at shutdown) and replayed oldest
// first, after a restart too. Every drop is counted with its reason.
//
// Exactly once: what an attempt settled (the leading profiles of a legacy
// /ingest request) is cut from the request before it is tried again, in
// memory and on disk. One request cannot hold up the others: the attempt
// after a failure goes to the next request, and a request that keeps
// failing while others get through is given up after max_strikes such
// failures and counted; in an outage (nothing gets through) nothing is given
// up, and the oldest request stays first.
// Thread-safe: Enqueue from the event loop, sending on its own thread.
#ifndef GPUFLAME_EXPORTERS_PYROSCOPE_PUSH_QUEUE_H_
#define GPUFLAME_EXPORTERS_PYROSCOPE_PUSH_QUEUE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "exporters/pyroscope/push_outcome.h"
#include "exporters/pyroscope/pyroscope_client.h"
#include "exporters/pyroscope/spool.h"

namespace gpuflame::exporters {

struct PushQueueOptions {
  size_t max_requests = 256;  // in memory; oldest dropped beyond this (counted)
  int initial_backoff_ms = 250;
  int max_backoff_ms = 30000;
  // Failures of one request, each with another request delivered since its
  // previous one, before it is given up. At 20 % random failures a request
  // is given up once in 10^7; one that never gets through goes after about
  // ten deliveries of others.
  int max_strikes = 10;
  std::string spool_dir;  // empty: no spool
  uint64_t spool_max_bytes = 256ull << 20;
};

// Requests count whole requests; series count profiles (one sample of one
// series: what /ingest posts one at a time).
struct PushStats {
  uint64_t pushed = 0;            // requests all of whose profiles Pyroscope took
  uint64_t series_pushed = 0;     // profiles Pyroscope took
  uint64_t failed_attempts = 0;   // retryable failures (each retried)
  uint64_t partial_attempts = 0;  // of those, attempts that got part way (/ingest)
  uint64_t dropped_queue_full = 0;
  uint64_t dropped_rejected = 0;       // requests Pyroscope refused, in whole or in part, for good
  uint64_t series_rejected = 0;        // profiles refused for good
  uint64_t dropped_undeliverable = 0;  // requests given up after max_strikes
  uint64_t series_undeliverable = 0;   // the profiles they still held
  uint64_t dropped_spool_full = 0;
  uint64_t dropped_spool_write = 0;  // requests lost because the spool could not be written
  uint64_t spool_corrupt = 0;
  uint64_t queued = 0;   // in memory
  uint64_t spooled = 0;  // on disk
  uint64_t spool_bytes = 0;
  std::string last_error;
};

class PushQueue {
 public:
  // Sends one serialized push.v1.PushRequest. A plain absl::Status is an
  // outcome for the whole request.
  using Sender = std::function<PushOutcome(const std::string& body)>;
  static absl::StatusOr<std::unique_ptr<PushQueue>> Create(Sender sender, PushQueueOptions options);
  ~PushQueue();  // what is still undelivered goes to the spool, if any

  void Enqueue(const std::vector<Series>& request);
  PushStats Stats() const;
  // Blocks until nothing is waiting (memory and spool) or |timeout_ms|
  // passes; true if everything was delivered.
  bool Flush(int timeout_ms);

 private:
  // A request's failures, to tell one that cannot get through from an
  // outage.
  struct Retry {
    bool failed = false;
    uint64_t deliveries_seen = 0;  // deliveries_ at its last failure
    int strikes = 0;
  };
  struct Entry {
    uint64_t id;
    uint32_t series;
    std::string body;
    Retry retry;
  };
  // The request being sent: a queue entry (by id) or a spool file (by
  // sequence).
  struct Job {
    bool spooled = false;
    uint64_t key = 0;
    uint32_t series = 0;
    std::string body;
  };

  PushQueue(Sender sender, PushQueueOptions options) : sender_(std::move(sender)), options_(std::move(options)) {}
  void Run();
  std::optional<Job> NextLocked();
  // Applies |outcome| of |job|; returns the milliseconds to wait before the
  // next attempt.
  int SettleLocked(const Job& job, const PushOutcome& outcome, int& backoff, std::mt19937& rng);
  Retry& RetryOfLocked(const Job& job);
  void RemoveLocked(const Job& job);
  void SpillLocked();  // memory -> spool, in order
  bool IdleLocked() const { return queue_.empty() && (!spool_ || spool_->empty()) && !busy_; }
  void RefreshLocked();

  Sender sender_;
  PushQueueOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> queue_;
  std::optional<Spool> spool_;
  std::map<uint64_t, Retry> spool_retry_;                 // by sequence, for spooled requests that failed
  uint64_t next_id_ = 1;                                  // 0 means "no entry" (in_flight_)
  uint64_t deliveries_ = 0;                               // attempts that Pyroscope took something from
  std::optional<std::pair<bool, uint64_t>> last_failed_;  // (spooled, key) of the last failed attempt
  PushStats stats_;
  bool stopping_ = false;
  bool busy_ = false;
  uint64_t in_flight_ = 0;  // id of the queue entry being sent (ids start at 1); 0: none
  std::thread thread_;
};

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_PYROSCOPE_PUSH_QUEUE_H_
