#include "exporters/pyroscope/push_queue.h"

#include <chrono>
#include <random>

namespace gpuflame::exporters {

absl::StatusOr<std::unique_ptr<PushQueue>> PushQueue::Create(Sender sender, PushQueueOptions options) {
  std::unique_ptr<PushQueue> q(new PushQueue(std::move(sender), std::move(options)));
  if (!q->options_.spool_dir.empty()) {
    auto spool = Spool::Open(q->options_.spool_dir, q->options_.spool_max_bytes);
    if (!spool.ok()) return spool.status();
    q->spool_.emplace(std::move(*spool));
    q->RefreshLocked();
  }
  q->thread_ = std::thread([raw = q.get()] { raw->Run(); });
  return q;
}

PushQueue::~PushQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (spool_) SpillLocked();  // kept for the next run
}

void PushQueue::RefreshLocked() {
  stats_.queued = queue_.size();
  if (spool_) {
    stats_.spooled = spool_->count();
    stats_.spool_bytes = spool_->bytes();
    stats_.dropped_spool_full = spool_->dropped_full();
    stats_.spool_corrupt = spool_->corrupt();
  }
}

void PushQueue::SpillLocked() {
  while (!queue_.empty()) {
    Entry& e = queue_.front();
    if (!spool_->Put(e.body, e.series).ok()) stats_.last_error = "spool write failed";
    queue_.pop_front();
  }
  RefreshLocked();
}

void PushQueue::Enqueue(const std::vector<Series>& request) {
  std::string body = EncodePushRequest(request);
  auto series = static_cast<uint32_t>(request.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (spool_ && !spool_->empty()) {
      // Pyroscope is away and older requests wait on disk: keep the order.
      if (!spool_->Put(body, series).ok()) stats_.last_error = "spool write failed";
    } else {
      if (queue_.size() >= options_.max_requests) {
        // The oldest window matters least, unless it is being sent right
        // now: then the next oldest goes, so nothing is counted both as
        // pushed and as dropped.
        bool front_in_flight = in_flight_ != 0 && queue_.front().id == in_flight_;
        if (front_in_flight && queue_.size() > 1) {
          queue_.erase(queue_.begin() + 1);
          stats_.dropped_queue_full++;
        } else if (!front_in_flight) {
          queue_.pop_front();
          stats_.dropped_queue_full++;
        }
      }
      queue_.push_back(Entry{next_id_++, series, std::move(body)});
    }
    RefreshLocked();
  }
  cv_.notify_all();
}

PushStats PushQueue::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

bool PushQueue::Flush(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return IdleLocked(); });
}

void PushQueue::Run() {
  std::mt19937 rng(std::random_device{}());
  int backoff = options_.initial_backoff_ms;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty() || (spool_ && !spool_->empty()); });
    if (stopping_) return;
    // The spool holds the oldest requests: they go first.
    std::optional<SpooledRequest> spooled;
    if (spool_ && !spool_->empty()) {
      spooled = spool_->Oldest();
      RefreshLocked();
      if (!spooled) continue;  // only corrupt files were left
    }
    const uint64_t id = spooled ? 0 : queue_.front().id;
    const uint32_t series = spooled ? spooled->series : queue_.front().series;
    std::string body = spooled ? std::move(spooled->body) : queue_.front().body;
    busy_ = true;
    in_flight_ = id;
    lock.unlock();
    absl::Status s = sender_(body);
    lock.lock();
    busy_ = false;
    in_flight_ = 0;
    auto remove = [&] {
      if (spooled) {
        spool_->Remove(spooled->sequence);
      } else if (!queue_.empty() && queue_.front().id == id) {
        queue_.pop_front();  // unless dropped from the front while we sent
      }
    };
    if (s.ok()) {
      remove();
      stats_.pushed++;
      stats_.series_pushed += series;
      backoff = options_.initial_backoff_ms;
    } else if (absl::IsUnavailable(s) || absl::IsResourceExhausted(s) || absl::IsDeadlineExceeded(s)) {
      stats_.failed_attempts++;
      stats_.last_error = std::string(s.message());
      if (spool_) SpillLocked();  // an outage: make what waits survive a restart
      // Full jitter: spread reconnecting agents across the backoff window.
      int wait = std::uniform_int_distribution<int>(backoff / 2, backoff)(rng);
      backoff = std::min(backoff * 2, options_.max_backoff_ms);
      RefreshLocked();
      cv_.notify_all();
      cv_.wait_for(lock, std::chrono::milliseconds(wait), [this] { return stopping_; });
      continue;
    } else {
      remove();
      stats_.dropped_rejected++;
      stats_.last_error = std::string(s.message());
    }
    RefreshLocked();
    cv_.notify_all();
  }
}

}  // namespace gpuflame::exporters
