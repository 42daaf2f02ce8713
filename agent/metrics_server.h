// Prometheus text-format self-metrics (`GET /metrics`) and a liveness
// endpoint (`GET /healthz`) on their own thread. The event loop publishes a
// snapshot; scrapes never touch the pipeline. Other GET routes (the flight
// recorder's /timeline) are added by their owners, who hand work to the
// event loop themselves (trace_requests.h).
#ifndef GPUFLAME_AGENT_METRICS_SERVER_H_
#define GPUFLAME_AGENT_METRICS_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace httplib {
class Server;
}

namespace gpuflame::profiler {

struct Metric {
  using Labels = std::vector<std::pair<std::string, std::string>>;
  Metric(std::string name, std::string help, std::string type, double value, Labels labels = {})
      : name(std::move(name)), help(std::move(help)), type(std::move(type)), value(value), labels(std::move(labels)) {}

  std::string name;  // gpuflame_events_total
  std::string help;
  std::string type;  // counter | gauge
  double value = 0;
  Labels labels;  // {"program", "alloc_enter"}: one series of the family per label set
};

// Renders metrics in the Prometheus text exposition format. The series of
// one family (same name, different labels) must be adjacent in |metrics|:
// HELP and TYPE are written once, before the first of them.
std::string PrometheusText(const std::vector<Metric>& metrics);

// What a route answers.
struct HttpReply {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain";
  std::vector<std::pair<std::string, std::string>> headers;
};

class MetricsServer {
 public:
  // Called on one of the server's threads with the request's query.
  using Route = std::function<HttpReply(const std::multimap<std::string, std::string>& params)>;

  // Called on the server's thread at every GET /healthz: empty when healthy,
  // else why not (answered with 503, so a liveness probe restarts us).
  using HealthCheck = std::function<std::string()>;

  MetricsServer();
  ~MetricsServer();
  // Binds |address|:|port| (port 0 picks one, see port()).
  absl::Status Start(const std::string& address, int port, HealthCheck health = nullptr);
  void Publish(const std::vector<Metric>& metrics);
  // Before Start: GET |path| is answered by |route|.
  void AddRoute(std::string path, Route route) { routes_.emplace_back(std::move(path), std::move(route)); }
  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  HealthCheck health_;
  std::vector<std::pair<std::string, Route>> routes_;
  std::mutex mu_;
  std::string text_;
  int port_ = 0;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_METRICS_SERVER_H_
