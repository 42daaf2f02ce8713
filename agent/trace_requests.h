// Flight-recorder traces asked for over HTTP (GET /timeline on the metrics
// port), handed from the metrics server's threads to the event loop and
// back: the trace is written from the pipeline's tables, which only the
// event loop may read (ARCHITECTURE.md, threads). The loop answers at its
// next turn (every 20 ms at most); the asking thread waits for it, bounded.
// At most kMaxPending requests wait at once; more are answered 503 at once,
// so that a client cannot queue work for the loop without end.
// Thread-safe: Ask from any thread, Serve from the event loop.
#ifndef GPUFLAME_AGENT_TRACE_REQUESTS_H_
#define GPUFLAME_AGENT_TRACE_REQUESTS_H_

#include <chrono>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "agent/flight_recorder.h"
#include "agent/metrics_server.h"

namespace gpuflame::profiler {

// The query string of GET /timeline: pid (repeatable, at most 64),
// namespace, pod, seconds. Hostile input: every value is bounded and
// checked; the error says which and why.
absl::StatusOr<TraceQuery> ParseTraceQuery(const std::multimap<std::string, std::string>& params);

struct TraceReply {
  int status = 200;      // 200, or the HTTP status of the error
  std::string body;      // the trace's JSON, or one line saying what went wrong
  std::string filename;  // for Content-Disposition: gpuflame-timeline-pid123.json.gz
};

class TraceRequests;

// GET /timeline on the metrics server: the query parsed on the server's
// thread, the trace written by the event loop (|requests|), gzipped back on
// the server's thread, answered as application/gzip.
MetricsServer::Route TimelineRoute(TraceRequests& requests);

class TraceRequests {
 public:
  static constexpr size_t kMaxPending = 4;

  // From a server thread: the loop's answer, or 503/504 when it is busy or
  // does not answer within |timeout|.
  TraceReply Ask(const TraceQuery& query, std::chrono::milliseconds timeout);
  // From the event loop: answers every waiting request with |answer|.
  void Serve(const std::function<TraceReply(const TraceQuery&)>& answer);
  // The agent stops: waiting requests and later ones are answered 503.
  void Close();

 private:
  struct Pending {
    TraceQuery query;
    std::promise<TraceReply> reply;
  };
  std::mutex mu_;
  std::deque<std::shared_ptr<Pending>> pending_;
  bool closed_ = false;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_TRACE_REQUESTS_H_
