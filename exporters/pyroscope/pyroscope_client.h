// Pushes profiles to Grafana Pyroscope: push.v1.PusherService/Push over
// Connect (HTTP/1.1 POST, application/proto) with libcurl, or the legacy
// /ingest API. One call sends one PushRequest; the outcome says what was
// taken and whether a retry can help.
#ifndef GPUFLAME_EXPORTERS_PYROSCOPE_PYROSCOPE_CLIENT_H_
#define GPUFLAME_EXPORTERS_PYROSCOPE_PYROSCOPE_CLIENT_H_

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "exporters/pyroscope/push_outcome.h"

namespace gpuflame::exporters {

struct PyroscopeEndpoint {
  std::string url;         // http(s)://host:4040 (path appended)
  std::string basic_user;  // basic auth, when set
  std::string basic_password;
  std::string bearer_token_file;  // read at each push: rotated tokens work
  std::string tenant;             // X-Scope-OrgID
  std::string ca_file;            // TLS trust
  long timeout_ms = 10000;
};

struct Series {
  std::vector<std::pair<std::string, std::string>> labels;  // __name__, service_name, ...
  std::string pprof;                                        // gzip-compressed pprof
};

// The serialized push.v1.PushRequest for |series|.
std::string EncodePushRequest(const std::vector<Series>& series);

class PyroscopeClient {
 public:
  explicit PyroscopeClient(PyroscopeEndpoint endpoint);
  // OK; UnavailableError / ResourceExhaustedError (retry later);
  // InvalidArgument / PermissionDenied / Unauthenticated (retrying won't help,
  // also when /ingest refused only some of the profiles).
  absl::Status Push(const std::vector<Series>& series) const;
  // |body| is a serialized push.v1.PushRequest. Uses push.v1 over Connect;
  // once that answers 404 (a Pyroscope older than the push API), and always
  // when |legacy_ingest| is set, the legacy /ingest endpoint instead, one
  // profile per call, in order: the outcome then says how far it got.
  PushOutcome PushEncoded(const std::string& body) const;
  void set_legacy_ingest(bool on) { legacy_ = on; }
  bool legacy_ingest() const { return legacy_; }
  const PyroscopeEndpoint& endpoint() const { return endpoint_; }

 private:
  absl::Status Post(const std::string& url, const std::string& body, const char* content_type) const;
  PushOutcome Ingest(const std::string& push_request) const;

  struct CurlDeleter {
    void operator()(void* curl) const;
  };

  PyroscopeEndpoint endpoint_;
  mutable bool legacy_ = false;  // set by the sender thread only
  // One easy handle for every post, so its connection cache keeps the
  // connection to Pyroscope open between pushes (under process churn a new
  // connection per push made the sender the bottleneck). Under |mu_|.
  mutable std::mutex mu_;
  mutable std::unique_ptr<void, CurlDeleter> curl_;
};

// The legacy /ingest `name` parameter: `service{label=value,...}`, with the
// characters its parser splits on replaced.
std::string IngestName(const std::vector<std::pair<std::string, std::string>>& labels);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_PYROSCOPE_PYROSCOPE_CLIENT_H_
