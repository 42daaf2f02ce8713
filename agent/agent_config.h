// `gpuflame agent` configuration from a YAML file, environment variables and
// flags (flags win over the environment, which wins over the file), checked
// with one clear message per mistake.
#ifndef GPUFLAME_AGENT_AGENT_CONFIG_H_
#define GPUFLAME_AGENT_AGENT_CONFIG_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "exporters/pyroscope/pyroscope_client.h"
#include "agent/kubelet_pods.h"
#include "agent/labels.h"
#include "logging/log.h"
#include "profiler/collectives/nccl_tracker.h"
#include "profiler/pipeline/profiling_options.h"

namespace gpuflame::profiler {

struct Selectors {
  std::vector<std::string> namespaces;
  std::vector<std::string> pods;
  std::vector<std::string> processes;  // process names (comm)
  std::vector<int> pids;
  bool Empty() const { return namespaces.empty() && pods.empty() && processes.empty() && pids.empty(); }
};

// The flight recorder: each process's last seconds of timeline events in
// memory, written as a trace on request (GET /timeline, `gpuflame timeline`)
// and on its own when an out-of-memory or an NCCL hang is found.
struct FlightRecorderOptions {
  double seconds = 5;                                     // the window; 0: off (no timeline is collected at all)
  uint64_t max_bytes = uint64_t{64} << 20;                // all processes' events
  uint64_t process_max_bytes = uint64_t{16} << 20;        // one process's
  std::string incident_dir = "/var/lib/gpuflame/traces";  // empty: no trace written on an incident
  int incident_max_files = 20;                            // the oldest go first
  uint64_t incident_max_bytes = uint64_t{256} << 20;
};

struct AgentConfig {
  exporters::PyroscopeEndpoint pyroscope;
  std::string protocol = "connect";  // connect (HTTP/1.1) | grpc (HTTP/2)
  double window_seconds = 15;
  // An NCCL call outstanding this long is a hang: logged, counted in /metrics.
  double nccl_hang_seconds = kDefaultNcclHangSeconds;
  FlightRecorderOptions flight;
  // How long a library's symbol and unwind tables stay parsed once no
  // running process maps it (Session::Options::symbol_keep_ns).
  double symbol_cache_keep_seconds = 120;
  int metrics_port = 9400;      // 0: no metrics endpoint
  std::string metrics_address = "0.0.0.0";
  std::string node;             // default: $NODE_NAME, else the host name
  std::string service_name;     // overrides the derived service_name when set
  SeriesLabelOptions labels;    // service_name_from, series_labels
  Selectors select;
  KubeletOptions kubelet;  // optional: pod labels from the kubelet
  size_t queue_requests = 256;
  std::string spool_dir = "/var/lib/gpuflame/spool";  // empty: memory only
  uint64_t spool_max_bytes = 256ull << 20;
  // Shared with record; kernel_time: expect libgpuflame_cupti.so and say
  // once per process where it is missing.
  ProfilingOptions profiling;
  bool check_only = false;      // --check-config
  // A DaemonSet's log is read by machines (Loki, Grafana): LoadAgentConfig
  // makes logfmt the default.
  logging::Options log;
};

// The agent's flags that set one config key each (the help is made from
// this table, so that it lists every one); the selectors (--namespace,
// --pod, --process, --pid), --config and --check-config are apart.
struct AgentFlag {
  const char* flag;
  const char* metavar;
  const char* key;
  const char* help;
};
const std::vector<AgentFlag>& AgentFlags();

// |args| follow `agent`; |env| is the environment (name -> value).
absl::StatusOr<AgentConfig> LoadAgentConfig(const std::vector<std::string>& args,
                                            const std::map<std::string, std::string>& env);
std::string DescribeConfig(const AgentConfig& c);
std::string AgentUsageText();

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_AGENT_CONFIG_H_
