// The ring-buffer reader: one thread whose only job is to move records from
// the BPF ring buffer into a RecordQueue, so that the kernel ring keeps
// draining while the worker unwinds stacks, reads /proc, attaches probes or
// closes a window. The worker takes the records from the queue, in order.
//
// Full queue: the reader waits (back-pressure), it does not drop. Waiting
// leaves the records in the kernel ring, which keeps taking new ones until
// it is full too, and only then do records get lost: in BPF, counted by
// GF_STAT_RINGBUF_FULL, the counter every front end already shows. Dropping
// here instead would throw away records the kernel ring still had room to
// keep, and would need a policy per record kind: a lost exec/mapping record
// leaves a gated process stopped, a lost free leaves an allocation live
// forever. So the only user-space drop is a record larger than the whole
// queue, which cannot happen since the queue is made at least as large as
// the kernel ring (Start does); it is counted anyway (`dropped`).
// How often the reader had to wait is counted too (`full_waits`).
//
// Threads:
//   reader (private, started by Start, joined by Stop/~RingReader): owns the
//     ring_buffer* and the queue's producer side; touches nothing else.
//   worker (the owner: one thread): Poll, Drain, Stop, the destructor.
//   any thread: stats().
#ifndef GPUFLAME_PROFILER_PROBES_RING_READER_H_
#define GPUFLAME_PROFILER_PROBES_RING_READER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <thread>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "base/heartbeat.h"
#include "base/scoped_fd.h"
#include "profiler/probes/record_queue.h"

struct ring_buffer;

namespace gpuflame::profiler {

using RecordHandler = absl::FunctionRef<void(std::span<const uint8_t>)>;

struct RingReaderStats {
  uint64_t records = 0;  // moved into the queue
  uint64_t bytes = 0;
  uint64_t full_waits = 0;    // times the queue was full and the reader waited
  uint64_t dropped = 0;       // records larger than the queue (see above)
  uint64_t queued_bytes = 0;  // waiting for the worker now
  uint64_t queue_capacity = 0;
};

class RingReader {
 public:
  struct Options {
    size_t queue_bytes = 16u << 20;
    // How often the reader looks at the ring when nothing woke it: most
    // records are submitted without a wakeup (BPF's wakeup_bytes), so this
    // bounds how late an ordinary record reaches the worker.
    int idle_poll_ms = 20;
  };
  // Within one long read of the ring, the worker is told about new records
  // at least this often (and always when the read ends).
  static constexpr uint32_t kNotifyEvery = 64;

  // Reads the BPF ring buffer map |ring_map_fd| (duplicated: the reader
  // does not depend on the caller's descriptor staying open) and starts the
  // reader thread.
  // |lifecycle_map_fd| (optional, -1: none) is a second ring read after the
  // first in each pass, into the same queue.
  static absl::StatusOr<std::unique_ptr<RingReader>> Start(int ring_map_fd, const Options& options,
                                                           int lifecycle_map_fd = -1);
  ~RingReader();
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;

  // Worker: hands queued records to |handler| in order, waiting up to
  // |timeout_ms| for the first one. Returns how many; negative (-errno) once
  // the reader has failed and everything it queued has been handled.
  int Poll(int timeout_ms, RecordHandler handler);
  // Worker: returns once every record the kernel ring held when it was
  // called has been handed to |handler| (the reader is asked to read the
  // ring now, so this does not wait for its idle timer).
  int Drain(RecordHandler handler);
  // Worker: stops and joins the reader thread; records still queued are
  // dropped (call Drain first to keep them). Idempotent.
  void Stop();

  RingReaderStats stats() const;
  // Any thread: when the reader last went round its loop (it wakes at
  // least every idle_poll_ms; a full hand-off queue holds it).
  const base::Heartbeat& heartbeat() const { return heartbeat_; }

 private:
  RingReader() = default;
  static int OnRecord(void* ctx, void* data, size_t size);
  void Run();
  void Kick();
  // Hands over queued records until the queue is empty or about one
  // queue's worth has been handled (so that a Poll call stays bounded).
  int HandleQueued(RecordHandler handler);

  struct RingBufferDeleter {
    void operator()(ring_buffer* ring) const;
  };

  // Owned descriptors and the libbpf ring: the reader thread's alone once it
  // runs (the worker only writes kick_fd_). Destroyed after the thread is
  // joined (~RingReader calls Stop first).
  base::ScopedFd map_fd_;
  base::ScopedFd lifecycle_fd_;
  base::ScopedFd epoll_fd_;  // waits on the ring and on kick_fd_
  base::ScopedFd kick_fd_;   // eventfd: Drain and Stop wake the reader with it
  std::unique_ptr<ring_buffer, RingBufferDeleter> ring_;
  std::unique_ptr<RecordQueue> queue_;
  int idle_poll_ms_ = 20;

  std::atomic<bool> stop_{false};
  base::Heartbeat heartbeat_;
  std::atomic<uint64_t> drain_requested_{0};  // worker: generation asked for
  std::atomic<uint64_t> drained_{0};          // reader: generation read through
  std::atomic<bool> done_{false};             // the reader thread has returned
  std::atomic<int> error_{0};                 // why it returned early (-errno)
  std::atomic<uint64_t> records_{0};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> dropped_{0};
  uint32_t unnotified_ = 0;  // reader thread: records pushed since the last NotifyConsumer
  std::thread thread_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROBES_RING_READER_H_
