#include "exporters/push_queue.h"

#include <chrono>
#include <random>

namespace gpuflame::exporters {

PushQueue::PushQueue(Sender sender, PushQueueOptions options)
    : sender_(std::move(sender)), options_(options), thread_([this] { Run(); }) {}

PushQueue::~PushQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void PushQueue::Enqueue(std::vector<Series> request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= options_.max_requests) {
      queue_.pop_front();  // the oldest window matters least
      stats_.dropped_queue_full++;
    }
    queue_.push_back(Entry{next_id_++, std::move(request)});
    stats_.queued = queue_.size();
  }
  cv_.notify_all();
}

PushStats PushQueue::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

bool PushQueue::Flush(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [this] { return queue_.empty() && !busy_; });
}

void PushQueue::Run() {
  std::mt19937 rng(std::random_device{}());
  int backoff = options_.initial_backoff_ms;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping
    const uint64_t id = queue_.front().id;
    std::vector<Series> request = queue_.front().request;
    busy_ = true;
    lock.unlock();
    absl::Status s = sender_(request);
    lock.lock();
    busy_ = false;
    if (s.ok()) {
      // It may have been dropped from the front while we sent: pop only ours.
      if (!queue_.empty() && queue_.front().id == id) queue_.pop_front();
      stats_.pushed++;
      stats_.series_pushed += request.size();
      backoff = options_.initial_backoff_ms;
    } else if (absl::IsUnavailable(s) || absl::IsResourceExhausted(s) || absl::IsDeadlineExceeded(s)) {
      stats_.failed_attempts++;
      stats_.last_error = std::string(s.message());
      if (stopping_) {
        stats_.dropped_queue_full += queue_.size();  // shutting down with Pyroscope away
        queue_.clear();
        stats_.queued = 0;
        cv_.notify_all();
        return;
      }
      // Full jitter: spread reconnecting agents across the backoff window.
      int wait = std::uniform_int_distribution<int>(backoff / 2, backoff)(rng);
      backoff = std::min(backoff * 2, options_.max_backoff_ms);
      cv_.wait_for(lock, std::chrono::milliseconds(wait), [this] { return stopping_; });
    } else {
      if (!queue_.empty() && queue_.front().id == id) queue_.pop_front();
      stats_.dropped_rejected++;
      stats_.last_error = std::string(s.message());
    }
    stats_.queued = queue_.size();
    cv_.notify_all();
  }
}

}  // namespace gpuflame::exporters
