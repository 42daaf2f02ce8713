// Fuzz target for GET /timeline's query (agent/trace_requests.cc,
// ParseTraceQuery): what anyone who reaches the agent's metrics port sends.
// The input is the query string after '?', split here on '&' and the first
// '=' (httplib's own percent-decoding is not ours to fuzz); seeds are
// queries the README and the tests use, and broken ones.
//
// Checked: an error has a one-line message of bounded length (it is
// answered to the client); a query accepted holds at most 64 pids, each a
// possible process id, names of Kubernetes' characters and length, and
// seconds above 0.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "agent/trace_requests.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::multimap<std::string, std::string> params;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('&', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view pair = text.substr(start, end - start);
    const size_t eq = pair.find('=');
    params.emplace(std::string(pair.substr(0, eq)),
                   eq == std::string_view::npos ? "" : std::string(pair.substr(eq + 1)));
    start = end + 1;
  }
  auto q = gpuflame::profiler::ParseTraceQuery(params);
  if (!q.ok()) {
    const std::string m(q.status().message());
    FUZZ_CHECK(!m.empty() && m.size() < 512 && m.find('\n') == std::string::npos);
    return 0;
  }
  FUZZ_CHECK(q->pids.size() <= 64);
  for (pid_t pid : q->pids) FUZZ_CHECK(pid > 0 && pid <= (1 << 22));
  for (const std::string* name : {&q->pod, &q->namespace_name}) {
    FUZZ_CHECK(name->size() <= 253);
    for (char c : *name) FUZZ_CHECK(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_');
  }
  FUZZ_CHECK(q->seconds >= 0 && q->seconds <= 3600);
  return 0;
}
