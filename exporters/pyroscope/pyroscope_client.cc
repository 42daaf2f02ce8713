#include "exporters/pyroscope/pyroscope_client.h"

#include <curl/curl.h>

#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "base/redact.h"
#include "exporters/pyroscope/bearer_token.h"
#include "push.pb.h"  // generated from exporters/proto/push.proto

namespace gpuflame::exporters {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t Collect(char* data, size_t size, size_t n, void* out) {
  auto* body = static_cast<std::string*>(out);
  if (body->size() < (64u << 10)) body->append(data, size * n);  // errors are short; bound it
  return size * n;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::string EncodePushRequest(const std::vector<Series>& series) {
  push::v1::PushRequest req;
  for (const Series& s : series) {
    auto* out = req.add_series();
    for (const auto& [name, value] : s.labels) {
      auto* l = out->add_labels();
      l->set_name(name);
      l->set_value(value);
    }
    out->add_samples()->set_raw_profile(s.pprof);
  }
  return req.SerializeAsString();
}

PyroscopeClient::PyroscopeClient(PyroscopeEndpoint endpoint) : endpoint_(std::move(endpoint)) { GlobalInit(); }

std::string IngestName(const std::vector<std::pair<std::string, std::string>>& labels) {
  auto clean = [](std::string v) {
    for (char& c : v)
      if (c == ',' || c == '{' || c == '}' || c == '=') c = '_';
    return v;
  };
  std::string service = "unknown_service", rest;
  for (const auto& [k, v] : labels) {
    if (k == "service_name") {
      service = clean(v);
    } else {
      // __name__ is derived by the server from the sample types ("memory");
      // keep ours as a label so device and tensor profiles stay apart.
      std::string key = k == "__name__" ? "gpuflame_profile" : k;
      absl::StrAppend(&rest, rest.empty() ? "" : ",", key, "=", clean(v));
    }
  }
  return absl::StrCat(service, "{", rest, "}");
}

PushOutcome PyroscopeClient::Ingest(const std::string& push_request) const {
  push::v1::PushRequest req;
  if (!req.ParseFromString(push_request)) return absl::InvalidArgumentError("not a push request");
  std::string base = endpoint_.url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  uint32_t settled = 0, rejected = 0;
  std::string rejection;
  for (const auto& series : req.series()) {
    std::vector<std::pair<std::string, std::string>> labels;
    for (const auto& l : series.labels()) labels.emplace_back(l.name(), l.value());
    std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> esc(curl_easy_init(), &curl_easy_cleanup);
    std::string name = IngestName(labels);
    char* quoted = curl_easy_escape(esc.get(), name.data(), static_cast<int>(name.size()));
    std::string url = absl::StrCat(base, "/ingest?format=pprof&spyName=gpuflame&name=", quoted ? quoted : "");
    curl_free(quoted);
    for (const auto& sample : series.samples()) {
      absl::Status s = Post(url, sample.raw_profile(), "Content-Type: application/octet-stream");
      // Stop at the first error a retry can fix: the queue resumes from
      // here. One refused profile does not hold back the others.
      if (IsRetryable(s)) return PushOutcome::Partial(settled, rejected, s);
      settled++;
      if (!s.ok()) {
        rejected++;
        rejection = std::string(s.message());
      }
    }
  }
  PushOutcome done = PushOutcome::Partial(settled, rejected, absl::OkStatus());
  done.rejection = std::move(rejection);
  return done;
}

absl::Status PyroscopeClient::Push(const std::vector<Series>& series) const {
  PushOutcome o = PushEncoded(EncodePushRequest(series));
  if (!o.status.ok() || o.rejected == 0) return o.status;
  return absl::InvalidArgumentError(absl::StrCat(o.rejected, " of the profiles refused: ", o.rejection));
}

PushOutcome PyroscopeClient::PushEncoded(const std::string& body) const {
  if (legacy_) return Ingest(body);
  std::string url = endpoint_.url;
  while (!url.empty() && url.back() == '/') url.pop_back();
  absl::Status s = Post(url + "/push.v1.PusherService/Push", body, "Content-Type: application/proto");
  if (absl::IsNotFound(s)) {
    legacy_ = true;  // no push API here: stay on /ingest from now on
    return Ingest(body);
  }
  return s;
}

void PyroscopeClient::CurlDeleter::operator()(void* curl) const { curl_easy_cleanup(static_cast<CURL*>(curl)); }

absl::Status PyroscopeClient::Post(const std::string& url, const std::string& body, const char* content_type) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!curl_) curl_.reset(curl_easy_init());
  if (!curl_) return absl::InternalError("curl_easy_init failed");
  // Options back to their defaults; the connection cache stays.
  curl_easy_reset(static_cast<CURL*>(curl_.get()));
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, content_type);
  headers = curl_slist_append(headers, "Connect-Protocol-Version: 1");
  headers = curl_slist_append(headers, "User-Agent: gpuflame");
  if (!endpoint_.tenant.empty())
    headers = curl_slist_append(headers, absl::StrCat("X-Scope-OrgID: ", endpoint_.tenant).c_str());
  if (!endpoint_.bearer_token_file.empty()) {
    // Read at each push: a rotated token is picked up.
    auto token = ReadBearerToken(endpoint_.bearer_token_file);
    if (!token.ok()) {
      curl_slist_free_all(headers);
      return absl::PermissionDeniedError(token.status().message());
    }
    headers = curl_slist_append(headers, absl::StrCat("Authorization: Bearer ", *token).c_str());
  }
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_guard(headers, &curl_slist_free_all);

  std::string response;
  CURL* c = static_cast<CURL*>(curl_.get());
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, endpoint_.timeout_ms);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, std::min(endpoint_.timeout_ms, 5000L));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &response);
  if (!endpoint_.basic_user.empty()) {
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(c, CURLOPT_USERNAME, endpoint_.basic_user.c_str());
    curl_easy_setopt(c, CURLOPT_PASSWORD, endpoint_.basic_password.c_str());
  }
  if (!endpoint_.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, endpoint_.ca_file.c_str());

  CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK)
    return absl::UnavailableError(
        absl::StrCat("push to ", base::RedactUrl(endpoint_.url), ": ", curl_easy_strerror(rc)));
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  if (code == 200) return absl::OkStatus();
  std::string msg = absl::StrCat("push to ", base::RedactUrl(endpoint_.url), ": HTTP ", code, " ", Trim(response));
  if (code == 429) return absl::ResourceExhaustedError(msg);
  if (code >= 500 || code == 408) return absl::UnavailableError(msg);
  if (code == 401) return absl::UnauthenticatedError(msg);
  if (code == 403) return absl::PermissionDeniedError(msg);
  if (code == 404) return absl::NotFoundError(msg);
  return absl::InvalidArgumentError(msg);
}

}  // namespace gpuflame::exporters
