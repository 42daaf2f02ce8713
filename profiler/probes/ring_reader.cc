#include "profiler/probes/ring_reader.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {
namespace {

constexpr uint32_t kRingReady = 0;
constexpr uint32_t kKicked = 1;

absl::Status Errno(int err, std::string_view what) {
  err = err < 0 ? -err : err;
  return absl::InternalError(absl::StrCat(std::string(what), ": ", std::strerror(err)));
}

}  // namespace

void RingReader::RingBufferDeleter::operator()(ring_buffer* ring) const { ring_buffer__free(ring); }

absl::StatusOr<std::unique_ptr<RingReader>> RingReader::Start(int ring_map_fd, const Options& options,
                                                               int lifecycle_map_fd) {
  std::unique_ptr<RingReader> r(new RingReader());
  r->idle_poll_ms_ = options.idle_poll_ms;
  r->map_fd_ = base::ScopedFd::Dup(ring_map_fd);
  if (!r->map_fd_) return Errno(errno, "duplicating the ring buffer's descriptor");
  bpf_map_info info{};
  uint32_t info_len = sizeof(info);
  if (bpf_obj_get_info_by_fd(r->map_fd_.get(), &info, &info_len) != 0)
    return Errno(errno, "reading the ring buffer's size");
  // At least as large as the kernel ring: any record the kernel can hold
  // then fits here too, so the reader never has to drop one for its size.
  r->queue_ = std::make_unique<RecordQueue>(std::max<size_t>(options.queue_bytes, info.max_entries));

  r->ring_.reset(ring_buffer__new(r->map_fd_.get(), &RingReader::OnRecord, r.get(), nullptr));
  if (!r->ring_) return Errno(errno, "opening the ring buffer");
  // Added second: ring_buffer__consume reads its rings in order, so within a
  // pass a process's exit comes after the records it made before it.
  if (lifecycle_map_fd >= 0) {
    r->lifecycle_fd_ = base::ScopedFd::Dup(lifecycle_map_fd);
    if (!r->lifecycle_fd_) return Errno(errno, "duplicating the lifecycle ring's descriptor");
    if (int err = ring_buffer__add(r->ring_.get(), r->lifecycle_fd_.get(), &RingReader::OnRecord, r.get()))
      return Errno(err, "opening the lifecycle ring buffer");
  }
  r->epoll_fd_ = base::ScopedFd(epoll_create1(EPOLL_CLOEXEC));
  if (!r->epoll_fd_) return Errno(errno, "creating the ring reader's epoll descriptor");
  r->kick_fd_ = base::ScopedFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!r->kick_fd_) return Errno(errno, "creating the ring reader's eventfd");
  // Our own epoll set rather than ring_buffer__poll's: it also holds the
  // eventfd, so that Drain and Stop reach a reader asleep in epoll_wait.
  epoll_event ring_ev{};
  ring_ev.events = EPOLLIN;
  ring_ev.data.u32 = kRingReady;
  epoll_event kick_ev{};
  kick_ev.events = EPOLLIN;
  kick_ev.data.u32 = kKicked;
  epoll_event lifecycle_ev = ring_ev;
  if (epoll_ctl(r->epoll_fd_.get(), EPOLL_CTL_ADD, r->map_fd_.get(), &ring_ev) != 0 ||
      epoll_ctl(r->epoll_fd_.get(), EPOLL_CTL_ADD, r->kick_fd_.get(), &kick_ev) != 0 ||
      (r->lifecycle_fd_ && epoll_ctl(r->epoll_fd_.get(), EPOLL_CTL_ADD, r->lifecycle_fd_.get(), &lifecycle_ev) != 0))
    return Errno(errno, "watching the ring buffer");

  r->thread_ = std::thread([raw = r.get()] { raw->Run(); });
  pthread_setname_np(r->thread_.native_handle(), "gpuflame-ring");  // as top -H shows it
  return r;
}

RingReader::~RingReader() { Stop(); }

void RingReader::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  queue_->Close();  // a Push waiting for room returns
  Kick();           // an epoll_wait returns
  thread_.join();
}

void RingReader::Kick() {
  const uint64_t one = 1;
  // Only fails when the counter is saturated, i.e. a kick is already pending.
  (void)!write(kick_fd_.get(), &one, sizeof(one));
}

// Reader thread: the whole per-record cost of the reader is this copy.
int RingReader::OnRecord(void* ctx, void* data, size_t size) {
  auto* self = static_cast<RingReader*>(ctx);
  switch (self->queue_->Push(std::span<const uint8_t>(static_cast<const uint8_t*>(data), size))) {
    case RecordQueue::PushResult::kPushed:
      // Written by this thread only: a plain add, published for stats().
      self->records_.store(self->records_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      self->bytes_.store(self->bytes_.load(std::memory_order_relaxed) + size, std::memory_order_relaxed);
      if (++self->unnotified_ >= kNotifyEvery) {
        self->unnotified_ = 0;
        self->queue_->NotifyConsumer();
      }
      return 0;
    case RecordQueue::PushResult::kTooBig: self->dropped_.fetch_add(1, std::memory_order_relaxed); return 0;
    case RecordQueue::PushResult::kClosed: break;
  }
  return -ECANCELED;  // stopping: leave the rest in the kernel ring
}

void RingReader::Run() {
  epoll_event events[2];
  int error = 0;
  while (!stop_.load(std::memory_order_acquire)) {
    heartbeat_.Beat();
    const int n = epoll_wait(epoll_fd_.get(), events, 2, idle_poll_ms_);
    if (n < 0 && errno != EINTR) {
      error = -errno;
      break;
    }
    for (int i = 0; i < n; i++) {
      if (events[i].data.u32 != kKicked) continue;
      uint64_t kicks;
      (void)!read(kick_fd_.get(), &kicks, sizeof(kicks));  // re-arms the eventfd
    }
    if (stop_.load(std::memory_order_acquire)) break;
    // Taken before reading: whatever the ring held when Drain asked is read
    // by the consume below, which runs until the ring is empty.
    const uint64_t asked = drain_requested_.load(std::memory_order_acquire);
    // Consumed whether epoll said so or not: most records come without a
    // wakeup, so a timed-out wait can still find data.
    const int consumed = ring_buffer__consume(ring_.get());
    // One wake check per read, not per record (see RecordQueue).
    unnotified_ = 0;
    queue_->NotifyConsumer();
    if (consumed < 0) {
      if (!stop_.load(std::memory_order_acquire)) error = consumed;
      break;
    }
    if (asked != drained_.load(std::memory_order_relaxed)) {
      drained_.store(asked, std::memory_order_release);
      queue_->WakeConsumer();
    }
  }
  error_.store(error, std::memory_order_relaxed);
  done_.store(true, std::memory_order_release);
  queue_->WakeConsumer();
}

int RingReader::HandleQueued(RecordHandler handler) {
  int n = 0;
  // Counted by header + length (padding left out), so that a call covers at
  // least everything that was queued when it began: that is at most one
  // capacity of real bytes, and the count never runs ahead of them.
  size_t budget = queue_->capacity();
  while (budget > 0) {
    std::optional<std::span<const uint8_t>> record = queue_->Front();
    if (!record) break;
    const size_t bytes = RecordQueue::kHeaderBytes + record->size();
    handler(*record);  // in place: the bytes stay put until Pop
    queue_->Pop();
    n++;
    budget = bytes >= budget ? 0 : budget - bytes;
  }
  return n;
}

int RingReader::Poll(int timeout_ms, RecordHandler handler) {
  if (int n = HandleQueued(handler); n > 0) return n;
  // Epoch first, then the conditions, then sleep: see RecordQueue.
  const uint32_t epoch = queue_->ConsumerEpoch();
  if (done_.load(std::memory_order_acquire)) {
    if (int n = HandleQueued(handler); n > 0) return n;
    return error_.load(std::memory_order_relaxed);
  }
  queue_->WaitForData(epoch, timeout_ms);
  return HandleQueued(handler);
}

int RingReader::Drain(RecordHandler handler) {
  const uint64_t ask = drain_requested_.fetch_add(1, std::memory_order_acq_rel) + 1;
  Kick();
  int n = 0;
  for (;;) {
    // Read before handling: every record the reader queued before it
    // answered is then handled by the call below (one capacity at most).
    const bool answered = drained_.load(std::memory_order_acquire) >= ask || done_.load(std::memory_order_acquire);
    n += HandleQueued(handler);
    if (answered) return n;
    const uint32_t epoch = queue_->ConsumerEpoch();
    if (drained_.load(std::memory_order_acquire) >= ask || done_.load(std::memory_order_acquire)) continue;
    // Woken by the next record or by the answer; the timeout is a safety net.
    queue_->WaitForData(epoch, 1000);
  }
}

RingReaderStats RingReader::stats() const {
  RingReaderStats s;
  s.records = records_.load(std::memory_order_relaxed);
  s.bytes = bytes_.load(std::memory_order_relaxed);
  s.dropped = dropped_.load(std::memory_order_relaxed);
  if (queue_) {
    s.full_waits = queue_->full_waits();
    s.queued_bytes = queue_->used_bytes();
    s.queue_capacity = queue_->capacity();
  }
  return s;
}

}  // namespace gpuflame::profiler
