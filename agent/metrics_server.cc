#include "agent/metrics_server.h"

#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpuflame::profiler {

namespace {

// A label value in the exposition format: backslash, double quote and line
// feed escaped.
std::string EscapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

}  // namespace

std::string PrometheusText(const std::vector<Metric>& metrics) {
  std::string out;
  const std::string* family = nullptr;
  for (const Metric& m : metrics) {
    if (family == nullptr || *family != m.name)
      absl::StrAppendFormat(&out, "# HELP %s %s\n# TYPE %s %s\n", m.name, m.help, m.name, m.type);
    family = &m.name;
    out += m.name;
    if (!m.labels.empty()) {
      out += '{';
      for (size_t i = 0; i < m.labels.size(); i++)
        absl::StrAppend(&out, i ? "," : "", m.labels[i].first, "=\"", EscapeLabelValue(m.labels[i].second), "\"");
      out += '}';
    }
    absl::StrAppendFormat(&out, " %.17g\n", m.value);
  }
  return out;
}

MetricsServer::MetricsServer() = default;

MetricsServer::~MetricsServer() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

absl::Status MetricsServer::Start(const std::string& address, int port, HealthCheck health) {
  health_ = std::move(health);
  server_ = std::make_unique<httplib::Server>();
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    res.set_content(text_, "text/plain; version=0.0.4");
  });
  server_->Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    std::string problem = health_ ? health_() : "";
    if (!problem.empty()) {
      res.status = 503;
      res.set_content(problem + "\n", "text/plain");
      return;
    }
    res.set_content("ok\n", "text/plain");
  });
  for (const auto& [path, route] : routes_) {
    server_->Get(path, [&route](const httplib::Request& req, httplib::Response& res) {
      HttpReply r = route(req.params);
      res.status = r.status;
      for (const auto& [k, v] : r.headers) res.set_header(k, v);
      res.set_content(r.body, r.content_type);
    });
  }
  if (port == 0) {
    port_ = server_->bind_to_any_port(address.c_str());
  } else {
    port_ = server_->bind_to_port(address.c_str(), port) ? port : -1;
  }
  if (port_ < 0) return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ":", port, " for metrics"));
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return absl::OkStatus();
}

void MetricsServer::Publish(const std::vector<Metric>& metrics) {
  std::string text = PrometheusText(metrics);
  std::lock_guard<std::mutex> lock(mu_);
  text_ = std::move(text);
}

}  // namespace gpuflame::profiler
