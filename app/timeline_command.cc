#include "app/timeline_command.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <httplib.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/human_units.h"
#include "base/scoped_fd.h"
#include "logging/log.h"

namespace gpuflame::profiler {
namespace {

// The agent's trace is at most 64 MiB of JSON before gzip: far less after.
constexpr size_t kMaxBody = size_t{256} << 20;

int Fail(const std::string& msg) {
  logging::Error(msg);
  logging::Flush();
  return 1;
}

std::string Escape(const std::string& v) {
  // Names and numbers only reach here (the parser checked them); what a
  // URL would still misread is escaped all the same.
  std::string out;
  for (unsigned char c : v) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_') out += static_cast<char>(c);
    else absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
  }
  return out;
}

}  // namespace

std::string TimelineRequestPath(const TimelineFetchOptions& o) {
  std::string q;
  auto add = [&q](const std::string& k, const std::string& v) {
    absl::StrAppend(&q, q.empty() ? "?" : "&", k, "=", v);
  };
  for (pid_t pid : o.pids) add("pid", std::to_string(pid));
  if (!o.namespace_name.empty()) add("namespace", Escape(o.namespace_name));
  if (!o.pod.empty()) add("pod", Escape(o.pod));
  if (o.seconds > 0) add("seconds", absl::StrCat(o.seconds));
  return "/timeline" + q;
}

int RunTimelineFetch(const TimelineFetchOptions& o) {
  const size_t colon = o.agent.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(o.agent.substr(colon + 1), &port) || port <= 0 || port > 65535)
    return Fail(absl::StrCat("--agent wants HOST:PORT (the agent's metrics port), not '", o.agent, "'"));
  httplib::Client client(o.agent.substr(0, colon), port);
  client.set_connection_timeout(5);
  client.set_read_timeout(60);  // the agent waits up to 30 s for its event loop
  std::string body;
  bool too_big = false;
  const std::string path = TimelineRequestPath(o);
  httplib::Result res = client.Get(
      path, [](const httplib::Response&) { return true; },
      [&](const char* data, size_t n) {
        if (body.size() + n > kMaxBody) {
          too_big = true;
          return false;
        }
        body.append(data, n);
        return true;
      });
  if (too_big) return Fail(absl::StrCat("the agent at ", o.agent, " sent more than ", kMaxBody >> 20, " MiB"));
  if (!res) return Fail(absl::StrCat("cannot reach the agent at ", o.agent, ": ", httplib::to_string(res.error())));
  if (res->status != 200) {
    while (!body.empty() && body.back() == '\n') body.pop_back();
    return Fail(absl::StrCat("the agent at ", o.agent, " answered ", res->status, ": ", body.substr(0, 512)));
  }
  base::ScopedFd fd(open(o.output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return Fail(absl::StrCat("cannot create ", o.output, ": ", std::strerror(errno)));
  for (size_t done = 0; done < body.size();) {
    const ssize_t n = write(fd.get(), body.data() + done, body.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Fail(absl::StrCat("cannot write ", o.output, ": ", std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  std::fprintf(stderr,
               "gpuflame: %s of the agent's flight recorder in %s (open it in ui.perfetto.dev or chrome://tracing)\n",
               base::HumanBytes(static_cast<int64_t>(body.size())).c_str(), o.output.c_str());
  return 0;
}

}  // namespace gpuflame::profiler
