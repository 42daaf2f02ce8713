#include "app/record_timeline.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/human_units.h"
#include "exporters/pprof/gzip.h"
#include "profiler/process/run_control.h"

namespace gpuflame::profiler {

RecordTimeline::RecordTimeline(const TimelineRequest& request, EventProcessor& events) : events_(events) {
  if (!request.on) return;
  timeline::TimelineOptions o;
  o.max_events = request.max_events;
  o.sample_period_ns = static_cast<uint64_t>(events.cpu_period_ns());
  o.marks = request.marks;
  max_bytes_ = request.max_mb << 20;
  timeline_ = std::make_unique<timeline::Timeline>(events.stacks(), events.frames(), std::move(o));
  events.SetTimeline(timeline_.get());
}

RecordTimeline::~RecordTimeline() {
  if (timeline_) events_.SetTimeline(nullptr);
}

std::string IoSpansJson(bool attached, const IoSpanOptions& o, uint64_t sent, uint64_t small_reads, uint64_t over_cap) {
  return absl::StrCat("{\"attached\": ", attached ? "true" : "false", ", \"min_read_bytes\": ", o.min_bytes,
                      ", \"min_read_us\": ", o.min_us, ", \"max_per_process\": ", o.max_per_process,
                      ", \"sent\": ", sent, ", \"small_reads_not_sent\": ", small_reads,
                      ", \"over_per_process_cap\": ", over_cap, "}");
}

absl::Status RecordTimeline::Finish(const absl::flat_hash_map<pid_t, std::string>& comm, const std::string& title,
                                    const std::string& io_json) {
  if (!timeline_) return absl::OkStatus();
  io_json_ = io_json;
  // Calls still in flight end now (the probes' clock: CLOCK_MONOTONIC).
  timeline_->Finish(static_cast<uint64_t>(NowNs(CLOCK_MONOTONIC)));
  exporters::ChromeTraceOptions o;
  o.max_bytes = max_bytes_;
  o.title = title;
  for (const auto& [pid, name] : comm) o.process_names[static_cast<uint32_t>(pid)] = name;
  o.metadata = absl::StrCat("\"io\":", io_json_);
  const std::string json = exporters::ChromeTraceJson(*timeline_, o, &stats_);
  auto gz = exporters::Gzip(json);
  if (!gz.ok()) return absl::Status(gz.status().code(), absl::StrCat("timeline: ", gz.status().message()));
  gz_ = std::move(*gz);
  return absl::OkStatus();
}

std::vector<std::pair<std::string, std::string>> RecordTimeline::Files() const {
  if (!timeline_) return {};
  return {{kTimelineFile, gz_}};
}

uint64_t RecordTimeline::Dropped() const {
  const timeline::TimelineStats t = timeline_->stats();
  uint64_t n = stats_.dropped_for_bytes_total() + stats_.gpu_uncalibrated + t.api_calls_dropped_in_process;
  for (uint64_t d : t.dropped) n += d;
  return n;
}

std::string RecordTimeline::SummaryJson() const {
  if (!timeline_) return "null";
  const timeline::TimelineStats t = timeline_->stats();
  return absl::StrCat("{\"file\": \"", kTimelineFile, "\", \"trace_events\": ", stats_.events,
                      ", \"json_bytes\": ", stats_.json_bytes, ", \"gzip_bytes\": ", gz_.size(),
                      ", \"kept\": ", timeline::EventCountsJson(t.kept),
                      ", \"dropped_over_max_events\": ", timeline::EventCountsJson(t.dropped),
                      ", \"dropped_over_max_bytes\": ", timeline::EventCountsJson(stats_.dropped_for_bytes),
                      ", \"gpu_records_without_clock\": ", stats_.gpu_uncalibrated, ", \"flows\": ", stats_.flows,
                      ", \"gpu_records_without_launch\": ", stats_.gpu_without_launch,
                      ", \"memory_calls_joined\": ", stats_.memory_calls_joined,
                      ", \"api_calls_dropped_in_process\": ", t.api_calls_dropped_in_process,
                      ", \"max_events\": ", timeline_->options().max_events, ", \"max_bytes\": ", max_bytes_,
                      ", \"io\": ", io_json_, "}");
}

std::optional<std::string> RecordTimeline::Warning() const {
  if (!timeline_) return std::nullopt;
  const uint64_t dropped = Dropped();
  if (!dropped) return std::nullopt;
  return absl::StrCat(
      "the timeline left out ", dropped, " events (", timeline_->options().max_events, " events and ",
      base::HumanBytes(static_cast<int64_t>(max_bytes_)),
      " at most: --timeline-max-events, --timeline-max-mb; GPU records of processes that sent no clock: ",
      stats_.gpu_uncalibrated,
      "; CUDA calls the profiled processes had no room for: ", timeline_->stats().api_calls_dropped_in_process,
      "); the trace's metadata and summary.json count them by type");
}

std::string RecordTimeline::Line(const std::string& dir) const {
  return absl::StrCat("timeline: ", stats_.events, " events in ", dir, "/", kTimelineFile,
                      " (open it in ui.perfetto.dev or chrome://tracing)");
}

}  // namespace gpuflame::profiler
