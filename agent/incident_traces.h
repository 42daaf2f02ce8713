// The flight recorder's traces written on their own, when the agent finds
// an out-of-memory or an NCCL call stuck: the seconds before the incident,
// kept in a directory (incident_trace_dir) so that they outlive the
// process and the ring. Each file is announced in the log with its path.
//
// Bounded: at most incident_max_files files and incident_max_bytes bytes of
// ours in the directory (gpuflame-timeline-*.json.gz; nothing else there is
// touched), the oldest removed first; a trace that cannot fit is not
// written. Gzip and disk I/O run on a thread of their own, behind a queue of
// kMaxQueued traces (the event loop does no blocking I/O); a trace that
// finds the queue full is dropped. Every such loss is counted (/metrics)
// and logged.
// Thread-safe: Submit from the event loop; stats() from any thread.
#ifndef GPUFLAME_AGENT_INCIDENT_TRACES_H_
#define GPUFLAME_AGENT_INCIDENT_TRACES_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/agent_config.h"

namespace gpuflame::profiler {

inline constexpr char kIncidentTracePrefix[] = "gpuflame-timeline-";

struct IncidentTraceStats {
  uint64_t written = 0;
  uint64_t failed = 0;   // could not be written (the log says why)
  uint64_t dropped = 0;  // the queue was full
  uint64_t removed = 0;  // older traces removed to keep to the bounds
};

class IncidentTraces {
 public:
  static constexpr size_t kMaxQueued = 4;

  // Off (Submit drops nothing and writes nothing) when |options|'s
  // directory is empty.
  explicit IncidentTraces(const FlightRecorderOptions& options);
  // Writes what is queued, then stops.
  ~IncidentTraces();
  IncidentTraces(const IncidentTraces&) = delete;
  IncidentTraces& operator=(const IncidentTraces&) = delete;

  bool on() const { return thread_.joinable(); }
  // |name| (a file name's middle: "oom-pid1234") and the trace's JSON;
  // |fields| go on its log line. False when dropped (queue full).
  bool Submit(std::string name, std::string json, std::vector<std::pair<std::string, std::string>> fields);
  IncidentTraceStats stats() const;

  // The file's path once written (the caller logs it), for the tests.
  static absl::StatusOr<std::string> WriteOne(const FlightRecorderOptions& options, const std::string& name,
                                              const std::string& json, uint64_t* removed);

 private:
  struct Job {
    std::string name;
    std::string json;
    std::vector<std::pair<std::string, std::string>> fields;
  };
  void Run();

  FlightRecorderOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stop_ = false;
  IncidentTraceStats stats_;
  std::thread thread_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_INCIDENT_TRACES_H_
