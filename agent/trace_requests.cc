#include "agent/trace_requests.h"

#include <cctype>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/json_string.h"
#include "exporters/pprof/gzip.h"

namespace gpuflame::profiler {
namespace {

constexpr size_t kMaxPids = 64;
// A Kubernetes name is at most 253 characters (a DNS subdomain).
constexpr size_t kMaxName = 253;
// PID_MAX_LIMIT: 2^22.
constexpr int64_t kMaxPid = 1 << 22;

absl::Status Bad(const std::string& what) { return absl::InvalidArgumentError(what); }

HttpReply Text(int status, std::string line) {
  HttpReply r;
  r.status = status;
  r.body = std::move(line);
  return r;
}

bool PlainName(const std::string& v) {
  if (v.empty() || v.size() > kMaxName) return false;
  for (char c : v)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_')) return false;
  return true;
}

}  // namespace

absl::StatusOr<TraceQuery> ParseTraceQuery(const std::multimap<std::string, std::string>& params) {
  TraceQuery q;
  for (const auto& [key, value] : params) {
    if (key == "pid") {
      int64_t pid = 0;
      if (!absl::SimpleAtoi(value, &pid) || pid <= 0 || pid > kMaxPid)
        return Bad(absl::StrCat("pid wants a process id, not ", base::JsonString(value.substr(0, 32))));
      if (q.pids.size() >= kMaxPids) return Bad(absl::StrCat("at most ", kMaxPids, " pids in one trace"));
      q.pids.push_back(static_cast<pid_t>(pid));
    } else if (key == "namespace" || key == "pod") {
      if (!PlainName(value))
        return Bad(absl::StrCat(key, " wants a Kubernetes name (letters, digits, '-', '.', '_'; at most ", kMaxName,
                                " characters)"));
      (key == "pod" ? q.pod : q.namespace_name) = value;
    } else if (key == "seconds") {
      double s = 0;
      if (!absl::SimpleAtod(value, &s) || !std::isfinite(s) || s <= 0 || s > 3600)
        return Bad(absl::StrCat("seconds wants a number above 0, not ", base::JsonString(value.substr(0, 32))));
      q.seconds = s;
    } else {
      return Bad(
          absl::StrCat("unknown parameter ", base::JsonString(key.substr(0, 32)), " (pid, namespace, pod, seconds)"));
    }
  }
  return q;
}

MetricsServer::Route TimelineRoute(TraceRequests& requests) {
  return [&requests](const std::multimap<std::string, std::string>& params) -> HttpReply {
    absl::StatusOr<TraceQuery> query = ParseTraceQuery(params);
    if (!query.ok()) return Text(400, absl::StrCat(query.status().message(), "\n"));
    // Several seconds of a busy node: the loop writes it in well under a
    // second; 30 s covers a loop held up by a slow window close.
    TraceReply r = requests.Ask(*query, std::chrono::seconds(30));
    if (r.status != 200) return Text(r.status, std::move(r.body));
    absl::StatusOr<std::string> gz = exporters::Gzip(r.body);
    if (!gz.ok()) return Text(500, absl::StrCat("gzip: ", gz.status().message(), "\n"));
    return {200,
            std::move(*gz),
            "application/gzip",
            {{"Content-Disposition", absl::StrCat("attachment; filename=\"", r.filename, "\"")}}};
  };
}

TraceReply TraceRequests::Ask(const TraceQuery& query, std::chrono::milliseconds timeout) {
  auto p = std::make_shared<Pending>();
  p->query = query;
  std::future<TraceReply> reply = p->reply.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return {503, "the agent is stopping\n", ""};
    if (pending_.size() >= kMaxPending)
      return {503, absl::StrCat(kMaxPending, " traces are being written already: ask again shortly\n"), ""};
    pending_.push_back(p);
  }
  if (reply.wait_for(timeout) != std::future_status::ready)
    return {504, "the agent's event loop did not answer in time\n", ""};  // it may still; nobody listens
  return reply.get();
}

void TraceRequests::Serve(const std::function<TraceReply(const TraceQuery&)>& answer) {
  std::deque<std::shared_ptr<Pending>> todo;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.empty()) return;
    todo.swap(pending_);
  }
  for (const std::shared_ptr<Pending>& p : todo) p->reply.set_value(answer(p->query));
}

void TraceRequests::Close() {
  std::deque<std::shared_ptr<Pending>> todo;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    todo.swap(pending_);
  }
  for (const std::shared_ptr<Pending>& p : todo) p->reply.set_value({503, "the agent is stopping\n", ""});
}

}  // namespace gpuflame::profiler
