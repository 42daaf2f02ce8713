// record --timeline: the collector's life (attached to the pipeline before
// the first record, finished after the last), its trace file, its entry in
// summary.json and its lines on the terminal.
// Not thread-safe: record's loop only.
#ifndef GPUFLAME_APP_RECORD_TIMELINE_H_
#define GPUFLAME_APP_RECORD_TIMELINE_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "app/record_command.h"
#include "exporters/trace/chrome_trace.h"
#include "profiler/pipeline/event_processor.h"
#include "profiler/timeline/timeline.h"

namespace gpuflame::profiler {

inline constexpr char kTimelineFile[] = "timeline.json.gz";

// The I/O spans' figures (bpf/io_calls.bpf.h) as JSON: whether the probes
// were attached, their filters, and the BPF counts of what was sent, what the
// filters and the cap kept back (never silent).
std::string IoSpansJson(bool attached, const IoSpanOptions& o, uint64_t sent, uint64_t small_reads, uint64_t over_cap);

class RecordTimeline {
 public:
  // Nothing at all unless |request| is on: the pipeline stays as it was.
  RecordTimeline(const TimelineRequest& request, EventProcessor& events);
  ~RecordTimeline();
  RecordTimeline(const RecordTimeline&) = delete;
  RecordTimeline& operator=(const RecordTimeline&) = delete;

  // After the last record (and the last symbol refresh): ends the open
  // spans, writes the trace and gzips it.
  // |io_json|: the I/O spans' object ("{\"attached\": true, ...}": what the
  // probes sent and what their filters and cap kept back), in the trace's
  // metadata and summary.json (IoSpansJson).
  absl::Status Finish(const absl::flat_hash_map<pid_t, std::string>& comm, const std::string& title,
                      const std::string& io_json = "null");
  // The file to write (kTimelineFile, its bytes), if on.
  std::vector<std::pair<std::string, std::string>> Files() const;
  // summary.json's "timeline" value: null when off.
  std::string SummaryJson() const;
  // What the limits left out, said as a warning (none if nothing).
  std::optional<std::string> Warning() const;
  // "timeline: 12345 events in DIR/timeline.json.gz (open it in ...)".
  std::string Line(const std::string& dir) const;

 private:
  uint64_t Dropped() const;

  EventProcessor& events_;
  std::unique_ptr<timeline::Timeline> timeline_;
  uint64_t max_bytes_ = 0;
  std::string io_json_ = "null";
  exporters::ChromeTraceStats stats_;
  std::string gz_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_APP_RECORD_TIMELINE_H_
