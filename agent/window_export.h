// The export thread: takes each closed window's per-process profiles from
// the event loop and does the rest off it: fold into Pyroscope's limits
// (EnforceLimits), drop the per-sample pid/process labels (the series
// labels say whose it is), serialise and gzip (EncodePprofGz), label the series (kubelet
// lookups included) and hand one push per process to the PushQueue.
//
// Bounded: at most |max_windows| closed windows wait. A window close never
// waits for the export (the event loop must keep draining the ring buffer);
// when the export is that far behind, the oldest waiting window is dropped,
// each of its processes counted in ExportStats::dropped, as PushQueue drops
// its oldest request.
//
// Threads: Submit, Finish and the destructor from the event loop (one
// thread); stats() from any thread; the rest runs on the thread this object
// owns (started by the constructor, joined by Finish or the destructor).
#ifndef GPUFLAME_AGENT_WINDOW_EXPORT_H_
#define GPUFLAME_AGENT_WINDOW_EXPORT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "agent/labels.h"
#include "agent/window_snapshot.h"
#include "exporters/pyroscope/push_queue.h"

namespace gpuflame::profiler {

struct ExportStats {
  uint64_t enqueued = 0;          // push requests (a window's processes, batched) handed to the PushQueue
  uint64_t folded_samples = 0;    // samples folded into [other] by EnforceLimits
  uint64_t truncated_stacks = 0;  // stacks cut to Pyroscope's depth limit
  uint64_t dropped = 0;           // per-process windows dropped: the export fell behind
  uint64_t encode_failures = 0;   // profiles that could not be serialised
  double last_window_seconds = 0; // time the export thread took for the last window
};

class WindowExporter {
 public:
  WindowExporter(SeriesLabeler labeler, exporters::PushQueue& queue, size_t max_windows = 4);
  ~WindowExporter();  // Finish()
  WindowExporter(const WindowExporter&) = delete;
  WindowExporter& operator=(const WindowExporter&) = delete;
  // One push request's most compressed profile bytes and profiles.
  static constexpr size_t kMaxRequestBytes = 512u << 10;
  static constexpr size_t kMaxRequestSeries = 200;

  // Event loop: hands over one closed window. Never waits for the export.
  void Submit(std::vector<ProcessWindow> window);
  // Event loop: exports every window submitted so far, then stops the thread.
  // Idempotent; Submit must not be called afterwards.
  void Finish();

  ExportStats stats() const;

 private:
  void Run();
  void Export(std::vector<ProcessWindow>& window);

  SeriesLabeler labeler_;  // export thread only
  exporters::PushQueue& queue_;
  const size_t max_windows_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<ProcessWindow>> pending_;  // guarded by mu_
  bool finishing_ = false;                          // guarded by mu_

  std::atomic<uint64_t> enqueued_{0};
  std::atomic<uint64_t> folded_samples_{0};
  std::atomic<uint64_t> truncated_stacks_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> encode_failures_{0};
  std::atomic<double> last_window_seconds_{0};
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_WINDOW_EXPORT_H_
