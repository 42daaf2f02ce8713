#include "exporters/pyroscope/push_queue.h"

#include <algorithm>
#include <chrono>

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
    std::erase_if(spool_retry_, [&](const auto& kv) { return !spool_->contains(kv.first); });
  }
}

void PushQueue::SpillLocked() {
  while (!queue_.empty()) {
    Entry& e = queue_.front();
    absl::StatusOr<uint64_t> seq = spool_->Put(e.body, e.series);
    if (seq.ok()) {
      if (e.retry.failed) spool_retry_[*seq] = e.retry;
      if (last_failed_ == std::pair{false, e.id}) last_failed_ = {true, *seq};
    } else if (!absl::IsResourceExhausted(seq.status())) {  // a full spool counts its own drops
      stats_.dropped_spool_write++;
      stats_.last_error = "spool write failed: " + std::string(seq.status().message());
    }
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
      absl::StatusOr<uint64_t> seq = spool_->Put(body, series);
      if (!seq.ok() && !absl::IsResourceExhausted(seq.status())) {
        stats_.dropped_spool_write++;
        stats_.last_error = "spool write failed: " + std::string(seq.status().message());
      }
    } else {
      if (queue_.size() >= options_.max_requests) {
        // The oldest window matters least, unless it is being sent right
        // now: then the next oldest goes, so nothing is counted both as
        // pushed and as dropped.
        auto oldest = std::find_if(queue_.begin(), queue_.end(), [&](const Entry& e) { return e.id != in_flight_; });
        if (oldest != queue_.end()) {
          queue_.erase(oldest);
          stats_.dropped_queue_full++;
        }
      }
      queue_.push_back(Entry{next_id_++, series, std::move(body), Retry{}});
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

std::optional<PushQueue::Job> PushQueue::NextLocked() {
  // The oldest request goes first (the spool holds the oldest), except right
  // after a failure: then the next one, so that one request that cannot get
  // through does not hold up the rest. In an outage the two oldest take turns
  // and the order is kept within one.
  std::optional<std::pair<bool, uint64_t>> avoid = std::exchange(last_failed_, std::nullopt);
  if (spool_ && !spool_->empty()) {
    std::optional<uint64_t> seq = spool_->OldestExcept(avoid && avoid->first ? avoid->second : UINT64_MAX);
    if (!seq) seq = spool_->OldestExcept(UINT64_MAX);
    std::optional<SpooledRequest> r = spool_->Read(*seq);
    if (!r) return std::nullopt;  // damaged: removed and counted
    return Job{true, *seq, r->series, std::move(r->body)};
  }
  if (queue_.empty()) return std::nullopt;
  const Entry* e = &queue_.front();
  if (avoid == std::pair{false, e->id} && queue_.size() > 1) e = &queue_[1];
  return Job{false, e->id, e->series, e->body};
}

PushQueue::Retry& PushQueue::RetryOfLocked(const Job& job) {
  if (job.spooled) return spool_retry_[job.key];
  auto it = std::find_if(queue_.begin(), queue_.end(), [&](const Entry& e) { return e.id == job.key; });
  // The entry being sent is never dropped (Enqueue skips it), so it is here.
  return it->retry;
}

void PushQueue::RemoveLocked(const Job& job) {
  if (job.spooled) {
    spool_->Remove(job.key);
    spool_retry_.erase(job.key);
    return;
  }
  std::erase_if(queue_, [&](const Entry& e) { return e.id == job.key; });
}

int PushQueue::SettleLocked(const Job& job, const PushOutcome& out, int& backoff, std::mt19937& rng) {
  const uint32_t total = job.series;
  uint32_t settled = 0, rejected = 0;
  std::string rejection = out.rejection;
  if (out.status.ok()) {
    settled = total;  // all of it went through
    rejected = out.partial ? std::min(out.rejected, total) : 0;
  } else if (IsRetryable(out.status)) {
    settled = out.partial ? std::min(out.settled, total) : 0;
    rejected = out.partial ? std::min(out.rejected, settled) : 0;
  } else {
    settled = rejected = total;  // refused whole
    rejection = std::string(out.status.message());
  }
  stats_.series_pushed += settled - rejected;
  stats_.series_rejected += rejected;
  if (settled > rejected) deliveries_++;
  if (rejected > 0) stats_.last_error = rejection;
  if (settled == total) {
    RemoveLocked(job);
    (rejected == 0 ? stats_.pushed : stats_.dropped_rejected)++;
    backoff = options_.initial_backoff_ms;
    return 0;
  }

  // Something is left and a retry can fix what stopped it.
  stats_.failed_attempts++;
  stats_.last_error = std::string(out.status.message());
  int wait = std::uniform_int_distribution<int>(backoff / 2, backoff)(rng);  // full jitter
  if (settled > 0) {
    // Part way (/ingest): what was taken is cut out before anything else,
    // here and on disk, so that it is never sent again.
    stats_.partial_attempts++;
    const uint32_t left = total - settled;
    absl::StatusOr<std::string> rest = DropLeadingProfiles(job.body, settled);
    if (!rest.ok()) {
      // Cannot happen for a request /ingest could read; resending all of it
      // would double what was taken, so the rest is given up, counted.
      RemoveLocked(job);
      stats_.dropped_undeliverable++;
      stats_.series_undeliverable += left;
      return 0;
    }
    if (job.spooled) {
      if (!spool_->Replace(job.key, *rest, left).ok()) {
        // The file still holds what was taken: it goes, the rest is kept
        // as a new file.
        spool_->Remove(job.key);
        spool_retry_.erase(job.key);
        absl::StatusOr<uint64_t> seq = spool_->Put(*rest, left);
        if (!seq.ok() && !absl::IsResourceExhausted(seq.status())) stats_.dropped_spool_write++;
      }
    } else {
      auto it = std::find_if(queue_.begin(), queue_.end(), [&](const Entry& e) { return e.id == job.key; });
      it->body = std::move(*rest);
      it->series = left;
      it->retry = Retry{};
    }
    if (job.spooled) spool_retry_.erase(job.key);
    // Pyroscope is taking requests: retry soon, without growing the backoff.
    backoff = options_.initial_backoff_ms;
    wait = std::uniform_int_distribution<int>(backoff / 2, backoff)(rng);
  } else {
    // Nothing taken. A strike only when something else got through since
    // this request last failed: Pyroscope is up, and this request does not
    // get through. In an outage nothing gets through, and nothing is given
    // up (the spool bounds what waits).
    Retry& r = RetryOfLocked(job);
    if (!r.failed) {
      r.failed = true;
    } else if (deliveries_ > r.deliveries_seen) {
      r.strikes++;
    }
    r.deliveries_seen = deliveries_;
    if (const int strikes = r.strikes; strikes >= options_.max_strikes) {
      RemoveLocked(job);  // |r| goes with it
      stats_.dropped_undeliverable++;
      stats_.series_undeliverable += total;
      stats_.last_error = "given up after " + std::to_string(strikes + 1) +
                          " failed attempts while others got through: " + stats_.last_error;
    } else {
      last_failed_ = {job.spooled, job.key};
    }
    backoff = std::min(backoff * 2, options_.max_backoff_ms);
  }
  if (spool_) SpillLocked();  // an outage: make what waits survive a restart
  return wait;
}

void PushQueue::Run() {
  std::mt19937 rng(std::random_device{}());
  int backoff = options_.initial_backoff_ms;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty() || (spool_ && !spool_->empty()); });
    if (stopping_) return;
    std::optional<Job> job = NextLocked();
    if (!job) {  // only damaged files were left
      RefreshLocked();
      cv_.notify_all();
      continue;
    }
    busy_ = true;
    in_flight_ = job->spooled ? 0 : job->key;
    if (job->spooled) spool_->set_pinned(job->key);
    lock.unlock();
    PushOutcome out = sender_(job->body);
    lock.lock();
    busy_ = false;
    in_flight_ = 0;
    if (spool_) spool_->set_pinned(UINT64_MAX);
    int wait = SettleLocked(*job, out, backoff, rng);
    RefreshLocked();
    cv_.notify_all();
    if (wait > 0) cv_.wait_for(lock, std::chrono::milliseconds(wait), [this] { return stopping_; });
  }
}

}  // namespace gpuflame::exporters
