#include "e2e/pyroscope_receiver.h"

#include <httplib.h>

#include <regex>
#include <set>

#include <grpcpp/grpcpp.h>
#include "exporters/pprof/gzip.h"

#include <functional>

#include "push.grpc.pb.h"
#include "push.pb.h"

namespace gpuflame::e2e {
namespace {

// Accept's answer for a call failed on purpose: not a rejection.
const std::string kUnavailable = "unavailable (failed on purpose)";

bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; k++)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    i += n;
  }
  return true;
}

}  // namespace

std::string ValidateSeries(const std::map<std::string, std::string>& labels, const std::string& raw,
                           pprof::Profile* out) {
  static const std::regex kMetricName("[a-zA-Z_:][a-zA-Z0-9_:]*");
  static const std::regex kLabelName("[a-zA-Z_][a-zA-Z0-9_.]*");
  auto name = labels.find("__name__");
  if (name == labels.end()) return "missing __name__";
  if (!std::regex_match(name->second, kMetricName)) return "invalid __name__ " + name->second;
  if (name->second == "memory") return "__name__=memory is treated as cumulative";
  if (labels.size() > 30) return "more than 30 labels";
  for (const auto& [k, v] : labels) {
    if (!std::regex_match(k, kLabelName)) return "invalid label name " + k;
    if (k.size() > 1024 || v.size() > 2048) return "label too long: " + k;
    if (v.empty()) return "empty label value for " + k;
  }
  std::string bytes = raw;
  if (raw.size() >= 2 && static_cast<unsigned char>(raw[0]) == 0x1f && static_cast<unsigned char>(raw[1]) == 0x8b) {
    auto g = exporters::Gunzip(raw);
    if (!g.ok()) return "bad gzip";
    bytes = *g;
  }
  if (bytes.size() > (4u << 20)) return "profile_size_limit";
  pprof::Profile p;
  if (!p.ParseFromString(bytes)) return "not a pprof profile";
  if (p.sample_type_size() < 1) return "no sample types";
  if (p.string_table_size() == 0 || p.string_table(0) != "") return "string_table[0] must be empty";
  if (p.sample_size() > 16000) return "more than 16000 samples";
  const auto nstr = p.string_table_size();
  auto str_ok = [&](int64_t i) { return i >= 0 && i < nstr; };
  for (const auto& t : p.sample_type()) {
    if (!str_ok(t.type()) || !str_ok(t.unit())) return "sample type string out of range";
    if (p.string_table(t.type()).find('-') != std::string::npos) return "sample type with '-'";
  }
  std::set<uint64_t> locations, functions;
  for (const auto& f : p.function()) {
    if (f.id() == 0) return "function id 0";
    if (!str_ok(f.name()) || !str_ok(f.system_name()) || !str_ok(f.filename())) return "function string out of range";
    functions.insert(f.id());
  }
  for (const auto& l : p.location()) {
    if (l.id() == 0) return "location id 0";
    for (const auto& line : l.line())
      if (!functions.count(line.function_id())) return "line refers to a missing function";
    locations.insert(l.id());
  }
  for (const auto& s : p.sample()) {
    if (s.value_size() != p.sample_type_size()) return "sample value count != sample types";
    if (s.location_id_size() > 1000) return "stack deeper than 1000";
    if (s.label_size() > 100) return "more than 100 sample labels";
    for (uint64_t id : s.location_id())
      if (!locations.count(id)) return "sample refers to a missing location";
  }
  for (const std::string& s : p.string_table())
    if (!ValidUtf8(s)) return "string not UTF-8";
  if (out) *out = std::move(p);
  return "";
}

class GrpcPusher final : public push::v1::PusherService::Service {
 public:
  explicit GrpcPusher(std::function<std::string(const std::string&)> accept) : accept_(std::move(accept)) {}
  grpc::Status Push(grpc::ServerContext*, const push::v1::PushRequest* req, push::v1::PushResponse*) override {
    std::string why = accept_(req->SerializeAsString());
    if (why == kUnavailable) return grpc::Status(grpc::StatusCode::UNAVAILABLE, why);
    return why.empty() ? grpc::Status::OK : grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
  }

 private:
  std::function<std::string(const std::string&)> accept_;
};

PyroscopeReceiver::PyroscopeReceiver() = default;
PyroscopeReceiver::~PyroscopeReceiver() { Stop(); }

void PyroscopeReceiver::FailEvery(int n) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_every_ = n;
}

void PyroscopeReceiver::FailShare(double share, uint32_t seed) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_share_ = share;
  fail_random_.seed(seed);
}

bool PyroscopeReceiver::FailThisCallLocked() {
  const bool every = fail_every_ > 0 && requests_ % fail_every_ == 0;
  const bool random = fail_share_ > 0 && std::uniform_real_distribution<double>(0, 1)(fail_random_) < fail_share_;
  if (every || random) failed_++;
  return every || random;
}

std::string PyroscopeReceiver::Accept(const std::string& body) {
  std::lock_guard<std::mutex> lock(mu_);
  requests_++;
  if (FailThisCallLocked()) return kUnavailable;
  push::v1::PushRequest push;
  if (!push.ParseFromString(body)) {
    rejections_.push_back("not a PushRequest");
    return rejections_.back();
  }
  std::vector<ReceivedSeries> batch;
  for (const auto& series : push.series()) {
    std::map<std::string, std::string> labels;
    for (const auto& l : series.labels()) labels[l.name()] = l.value();
    for (const auto& sample : series.samples()) {
      ReceivedSeries r;
      r.labels = labels;
      std::string why = ValidateSeries(labels, sample.raw_profile(), &r.profile);
      if (!why.empty()) {
        rejections_.push_back(why);
        return why;
      }
      batch.push_back(std::move(r));
    }
  }
  for (auto& r : batch) accepted_.push_back(std::move(r));
  return "";
}

bool PyroscopeReceiver::StartGrpc(int port) {
  grpc_service_ = std::make_unique<GrpcPusher>([this](const std::string& b) { return Accept(b); });
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(), &bound);
  builder.RegisterService(grpc_service_.get());
  grpc_server_ = builder.BuildAndStart();
  port_ = bound;
  return grpc_server_ && bound > 0;
}

bool PyroscopeReceiver::Start(int port, bool legacy_only) {
  server_ = std::make_unique<httplib::Server>();
  // Legacy /ingest: name=app{k=v,...}, body a (gzipped) pprof; __name__ is
  // guessed from the sample types as Pyroscope does (memory here).
  server_->Post("/ingest", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    requests_++;
    if (FailThisCallLocked()) {
      res.status = 503;
      return;
    }
    std::string name = req.get_param_value("name");
    auto open = name.find('{');
    if (req.get_param_value("format") != "pprof" || open == std::string::npos || name.back() != '}') {
      rejections_.push_back("bad ingest parameters: " + name);
      res.status = 400;
      return;
    }
    std::map<std::string, std::string> labels{{"__name__", "ingested_memory"}, {"service_name", name.substr(0, open)}};
    std::string inner = name.substr(open + 1, name.size() - open - 2);
    for (size_t pos = 0; pos < inner.size();) {
      size_t comma = inner.find(',', pos);
      std::string kv = inner.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      auto eq = kv.find('=');
      if (eq != std::string::npos) labels[kv.substr(0, eq)] = kv.substr(eq + 1);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    ReceivedSeries r;
    std::string why = ValidateSeries(labels, req.body, &r.profile);
    if (!why.empty()) {
      rejections_.push_back(why);
      res.status = 400;
      return;
    }
    r.labels = std::move(labels);
    accepted_.push_back(std::move(r));
    res.status = 200;
  });
  if (!legacy_only)
    server_->Post("/push.v1.PusherService/Push", [this](const httplib::Request& req, httplib::Response& res) {
      std::string why =
          req.get_header_value("Content-Type") == "application/proto" ? Accept(req.body) : std::string("content type");
      if (why.empty()) {
        res.status = 200;
        res.set_content("", "application/proto");
        return;
      }
      if (why == kUnavailable) {
        res.status = 503;
        res.set_content("{\"code\":\"unavailable\",\"message\":\"" + why + "\"}", "application/json");
        return;
      }
      res.status = 400;
      res.set_content("{\"code\":\"invalid_argument\",\"message\":\"" + why + "\"}", "application/json");
    });
  port_ = port == 0 ? server_->bind_to_any_port("127.0.0.1") : (server_->bind_to_port("127.0.0.1", port) ? port : -1);
  if (port_ < 0) return false;
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return true;
}

void PyroscopeReceiver::Stop() {
  if (grpc_server_) grpc_server_->Shutdown();
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::vector<ReceivedSeries> PyroscopeReceiver::Accepted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return accepted_;
}
std::vector<std::string> PyroscopeReceiver::Rejections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rejections_;
}
int PyroscopeReceiver::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}
int PyroscopeReceiver::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

}  // namespace gpuflame::e2e
