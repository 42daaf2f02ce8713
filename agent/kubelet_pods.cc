#include "agent/kubelet_pods.h"

#include <curl/curl.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "base/redact.h"
#include "exporters/pyroscope/bearer_token.h"

namespace gpuflame::profiler {
namespace {

size_t Collect(char* data, size_t size, size_t n, void* out) {
  auto* body = static_cast<std::string*>(out);
  if (body->size() + size * n > (64u << 20)) return 0;  // bound a hostile answer
  body->append(data, size * n);
  return size * n;
}

}  // namespace

absl::StatusOr<absl::flat_hash_map<std::string, std::map<std::string, std::string>>> ParsePodList(
    const std::string& json, const std::vector<std::string>& wanted) {
  nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("items") || !doc["items"].is_array())
    return absl::InvalidArgumentError("the kubelet's /pods answer is not a PodList");
  absl::flat_hash_map<std::string, std::map<std::string, std::string>> out;
  for (const auto& item : doc["items"]) {
    if (!item.is_object() || !item.contains("metadata") || !item["metadata"].is_object()) continue;
    const auto& meta = item["metadata"];
    if (!meta.contains("uid") || !meta["uid"].is_string()) continue;
    std::map<std::string, std::string> labels;
    if (meta.contains("labels") && meta["labels"].is_object())
      for (const std::string& key : wanted)
        if (meta["labels"].contains(key) && meta["labels"][key].is_string())
          labels[key] = meta["labels"][key].get<std::string>();
    out[meta["uid"].get<std::string>()] = std::move(labels);
  }
  return out;
}

absl::Status KubeletPods::Refresh() {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) return absl::InternalError("curl_easy_init failed");
  std::string url = options_.url;
  while (!url.empty() && url.back() == '/') url.pop_back();
  url += "/pods";
  curl_slist* headers = nullptr;
  if (!options_.token_file.empty()) {
    auto token = exporters::ReadBearerToken(options_.token_file);
    if (!token.ok()) return token.status();
    headers = curl_slist_append(headers, absl::StrCat("Authorization: Bearer ", *token).c_str());
  }
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> guard(headers, &curl_slist_free_all);
  std::string body;
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  if (!options_.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, options_.ca_file.c_str());
  if (options_.insecure_skip_verify) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) return absl::UnavailableError(absl::StrCat("kubelet ", base::RedactUrl(url), ": ", curl_easy_strerror(rc)));
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  if (code != 200) return absl::UnavailableError(absl::StrCat("kubelet ", base::RedactUrl(url), ": HTTP ", code));
  auto pods = ParsePodList(body, options_.labels);
  if (!pods.ok()) return pods.status();
  pods_ = std::move(*pods);
  return absl::OkStatus();
}

const std::map<std::string, std::string>& KubeletPods::LabelsOf(const std::string& uid) {
  static const std::map<std::string, std::string> kNone;
  if (!enabled() || uid.empty()) return kNone;
  auto it = pods_.find(uid);
  auto now = std::chrono::steady_clock::now();
  if (it == pods_.end() && (!refreshed_ || now - last_refresh_ > std::chrono::seconds(options_.refresh_s))) {
    refreshed_ = true;
    last_refresh_ = now;
    if (auto s = Refresh(); !s.ok()) last_error_ = std::string(s.message());
    it = pods_.find(uid);
  }
  return it == pods_.end() ? kNone : it->second;
}

}  // namespace gpuflame::profiler
