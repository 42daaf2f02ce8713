#include "agent/agent_config.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/redact.h"
#include "exporters/pyroscope/bearer_token.h"

namespace gpuflame::profiler {
namespace {

absl::Status Bad(const std::string& msg) { return absl::InvalidArgumentError(msg); }

absl::StatusOr<double> ParseDouble(const std::string& what, const std::string& v) {
  double d = 0;
  auto r = std::from_chars(v.data(), v.data() + v.size(), d);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size())
    return Bad(absl::StrCat(what, " wants a number, not '", v, "'"));
  return d;
}

absl::StatusOr<int> ParseInt(const std::string& what, const std::string& v) {
  int i = 0;
  auto r = std::from_chars(v.data(), v.data() + v.size(), i);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size())
    return Bad(absl::StrCat(what, " wants a whole number, not '", v, "'"));
  return i;
}

absl::StatusOr<int> ParsePid(const std::string& what, const std::string& v) {
  auto pid = ParseInt(what, v);
  if (pid.ok() && *pid <= 0) return Bad(absl::StrCat(what, " wants a process id (1 or more), not '", v, "'"));
  return pid;
}

std::vector<std::string> SplitList(const std::string& v) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipWhitespace())) out.emplace_back(part);
  return out;
}

// One setting by its config-file key, from any source.
absl::Status Apply(AgentConfig& c, const std::string& key, const std::string& value, const std::string& where) {
  auto num = [&](auto parsed, auto& field) -> absl::Status {
    if (!parsed.ok()) return Bad(absl::StrCat(where, ": ", parsed.status().message()));
    field = *parsed;
    return absl::OkStatus();
  };
  if (key == "pyroscope_url") c.pyroscope.url = value;
  else if (key == "tenant") c.pyroscope.tenant = value;
  else if (key == "protocol") c.protocol = value;
  else if (key == "basic_auth_user") c.pyroscope.basic_user = value;
  else if (key == "basic_auth_password") c.pyroscope.basic_password = value;
  else if (key == "bearer_token_file") c.pyroscope.bearer_token_file = value;
  else if (key == "ca_file") c.pyroscope.ca_file = value;
  else if (key == "window") return num(ParseDouble(key, value), c.window_seconds);
  else if (key == "nccl_hang_seconds") return num(ParseDouble(key, value), c.nccl_hang_seconds);
  else if (key == "flight_recorder_seconds") return num(ParseDouble(key, value), c.flight.seconds);
  else if (key == "symbol_cache_keep_seconds") return num(ParseDouble(key, value), c.symbol_cache_keep_seconds);
  else if (key == "incident_trace_dir") c.flight.incident_dir = value;
  else if (key == "incident_trace_max_files") return num(ParseInt(key, value), c.flight.incident_max_files);
  else if (key == "flight_recorder_max_mb" || key == "flight_recorder_process_max_mb" ||
           key == "incident_trace_max_mb") {
    int mb = 0;
    if (auto s = num(ParseInt(key, value), mb); !s.ok()) return s;
    if (mb < 1 || mb > 65536) return Bad(absl::StrCat(where, ": ", key, " wants 1 to 65536 MiB, not ", mb));
    (key == "flight_recorder_max_mb"           ? c.flight.max_bytes
     : key == "flight_recorder_process_max_mb" ? c.flight.process_max_bytes
                                               : c.flight.incident_max_bytes) = static_cast<uint64_t>(mb) << 20;
  } else if (key == "metrics_port") return num(ParseInt(key, value), c.metrics_port);
  else if (key == "metrics_address") c.metrics_address = value;
  else if (key == "node") c.node = value;
  else if (key == "service_name") c.service_name = value;
  else if (key == "service_name_from") {
    auto sources = ParseServiceSources(SplitList(value));
    if (!sources.ok()) return Bad(absl::StrCat(where, ": ", sources.status().message()));
    c.labels.service_from = *sources;
  } else if (key == "series_labels") {
    // Opt-in series labels: each multiplies the series (see agent/labels.h).
    c.labels.pid = false;
    for (const std::string& label : SplitList(value)) {
      if (label == "pid") c.labels.pid = true;
      else if (label == "thread_name") c.profiling.thread_names = true;
      else return Bad(absl::StrCat(where, ": series_labels wants pid or thread_name, not '", label, "'"));
    }
  } else if (key == "namespaces") c.select.namespaces = SplitList(value);
  else if (key == "pods") c.select.pods = SplitList(value);
  else if (key == "processes") c.select.processes = SplitList(value);
  else if (key == "pids") {
    c.select.pids.clear();
    for (const std::string& p : SplitList(value)) {
      auto pid = ParsePid("pids", p);
      if (!pid.ok()) return Bad(absl::StrCat(where, ": ", pid.status().message()));
      c.select.pids.push_back(*pid);
    }
  } else if (key == "queue_requests") {
    int n = 0;
    if (auto s = num(ParseInt(key, value), n); !s.ok()) return s;
    c.queue_requests = static_cast<size_t>(std::max(n, 0));
  } else if (key == "spool_dir") {
    c.spool_dir = value;
  } else if (key == "spool_max_mb") {
    int mb = 0;
    if (auto s = num(ParseInt(key, value), mb); !s.ok()) return s;
    if (mb < 1) return Bad(absl::StrCat(where, ": spool_max_mb must be at least 1"));
    c.spool_max_bytes = static_cast<uint64_t>(mb) << 20;
  } else if (key == "kubelet_url") {
    c.kubelet.url = value;
  } else if (key == "kubelet_token_file") {
    c.kubelet.token_file = value;
  } else if (key == "kubelet_ca_file") {
    c.kubelet.ca_file = value;
  } else if (key == "kubelet_insecure_skip_verify") {
    if (value == "true" || value == "1" || value == "yes") c.kubelet.insecure_skip_verify = true;
    else if (value == "false" || value == "0" || value == "no") c.kubelet.insecure_skip_verify = false;
    else return Bad(absl::StrCat(where, ": kubelet_insecure_skip_verify wants true or false, not '", value, "'"));
  } else if (key == "pod_labels") {
    c.kubelet.labels = SplitList(value);
  } else if (key == "log_format") {
    auto f = logging::ParseFormat(value);
    if (!f.ok()) return Bad(absl::StrCat(where, ": ", f.status().message()));
    c.log.format = *f;
  } else if (key == "log_level") {
    auto l = logging::ParseLevel(value);
    if (!l.ok()) return Bad(absl::StrCat(where, ": ", l.status().message()));
    c.log.level = *l;
  } else if (key == "log_repeat_seconds") {
    double seconds = 0;
    if (auto s = num(ParseDouble(key, value), seconds); !s.ok()) return s;
    if (!(seconds >= 0 && seconds <= 86400))
      return Bad(absl::StrCat(where, ": log_repeat_seconds wants 0 to 86400 seconds, not '", value, "'"));
    c.log.repeat_interval_s = seconds;
  } else if (IsProfilingOption(key)) {
    if (auto s = SetProfilingOption(c.profiling, key, value); !s.ok())
      return Bad(absl::StrCat(where, ": ", s.message()));
  } else {
    return Bad(absl::StrCat(where, ": unknown setting '", key, "'"));
  }
  return absl::OkStatus();
}

// What a config-file key holds, for the one message that names the key and
// what it wants when a file gives it the wrong shape.
struct KeyShape {
  bool list = false;  // a YAML list (or one value); otherwise one plain value
  const char* wants = "";
};

std::optional<KeyShape> ShapeOf(const std::string& key) {
  static const std::map<std::string, KeyShape> kShapes = {
      {"pyroscope_url", {false, "a URL"}},
      {"tenant", {false, "a tenant id"}},
      {"protocol", {false, "connect, grpc or ingest"}},
      {"basic_auth_user", {false, "a user name"}},
      {"basic_auth_password", {false, "a password"}},
      {"bearer_token_file", {false, "a file path"}},
      {"ca_file", {false, "a file path"}},
      {"window", {false, "a number of seconds"}},
      {"nccl_hang_seconds", {false, "a number of seconds"}},
      {"flight_recorder_seconds", {false, "a number of seconds"}},
      {"symbol_cache_keep_seconds", {false, "a number of seconds"}},
      {"flight_recorder_max_mb", {false, "a whole number of MiB"}},
      {"flight_recorder_process_max_mb", {false, "a whole number of MiB"}},
      {"incident_trace_dir", {false, "a directory"}},
      {"incident_trace_max_files", {false, "a whole number"}},
      {"incident_trace_max_mb", {false, "a whole number of MiB"}},
      {"metrics_port", {false, "a port number"}},
      {"metrics_address", {false, "an address"}},
      {"node", {false, "a node name"}},
      {"service_name", {false, "a service name"}},
      {"service_name_from", {true, "a list of kubernetes, systemd, script, process"}},
      {"series_labels", {true, "a list of pid, thread_name"}},
      {"namespaces", {true, "a list of namespace names"}},
      {"pods", {true, "a list of pod names"}},
      {"processes", {true, "a list of process names"}},
      {"pids", {true, "a list of process ids"}},
      {"queue_requests", {false, "a whole number"}},
      {"spool_dir", {false, "a directory"}},
      {"spool_max_mb", {false, "a whole number of MiB"}},
      {"kubelet_url", {false, "a URL"}},
      {"kubelet_token_file", {false, "a file path"}},
      {"kubelet_ca_file", {false, "a file path"}},
      {"kubelet_insecure_skip_verify", {false, "true or false"}},
      {"pod_labels", {true, "a list of label names"}},
      {"log_format", {false, "text, logfmt or json"}},
      {"log_level", {false, "debug, info, warning or error"}},
      {"log_repeat_seconds", {false, "a number of seconds"}},
      {"binaries", {true, "a list of directories"}},
  };
  if (auto it = kShapes.find(key); it != kShapes.end()) return it->second;
  // The profiling options parse their own values and say what they want.
  if (IsProfilingOption(key)) return KeyShape{false, "a single value"};
  return std::nullopt;
}

// One setting's value as Apply takes it (a list joined with commas), or the
// error naming the key and the shape it wants. Never throws: only nodes
// checked to be scalars are read, so yaml-cpp has nothing to convert.
absl::StatusOr<std::string> ValueOf(const std::string& key, const KeyShape& shape, const YAML::Node& node) {
  auto wrong = [&](const char* got) { return Bad(absl::StrCat("'", key, "' wants ", shape.wants, ", not ", got)); };
  if (node.IsScalar()) return node.Scalar();
  if (node.IsNull()) return wrong("an empty value");
  if (node.IsMap()) return wrong("a map");
  if (!node.IsSequence()) return wrong("this");
  if (!shape.list) return wrong("a list");
  std::vector<std::string> items;
  for (const YAML::Node& item : node) {
    // A nested list or map, an alias of the list itself: a list's items
    // are plain values, and nothing is followed further.
    if (!item.IsScalar())
      return Bad(absl::StrCat("'", key, "' wants ", shape.wants, ": item ", items.size() + 1, " is ",
                              item.IsSequence() ? "a list"
                              : item.IsMap()    ? "a map"
                                                : "empty"));
    // Items are joined with commas for Apply: one with a comma would split.
    if (item.Scalar().find(',') != std::string::npos)
      return Bad(absl::StrCat("'", key, "' wants ", shape.wants, ": item ", items.size() + 1, " has a comma"));
    items.push_back(item.Scalar());
  }
  return absl::StrJoin(items, ",");
}

// A config file is a few KiB; the bound keeps a wrong path (a log, a device)
// from being read whole.
constexpr size_t kMaxConfigBytes = 1u << 20;

// |path|'s text: a regular file of at most kMaxConfigBytes. yaml-cpp's own
// LoadFile let a directory through to a std::ios_base::failure it does not
// catch (an abort).
absl::StatusOr<std::string> ReadConfigText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  if (!in || !std::filesystem::is_regular_file(path, ec))
    return Bad(absl::StrCat("cannot read config file ", path, ": not a readable file"));
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return Bad(absl::StrCat("cannot read config file ", path));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) return Bad(absl::StrCat("config file ", path, " is larger than 1 MiB"));
  return text;
}

absl::Status LoadFile(AgentConfig& c, const std::string& path) {
  absl::StatusOr<std::string> text = ReadConfigText(path);
  if (!text.ok()) return text.status();
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    // yaml-cpp's messages for a nesting past its depth limit or a broken
    // document; the line says where.
    return Bad(absl::StrCat(path, ":", e.mark.line + 1, ": not valid YAML: ", e.msg));
  } catch (const std::exception& e) {
    return Bad(absl::StrCat(path, ": not valid YAML: ", e.what()));
  }
  if (!root || root.IsNull()) return absl::OkStatus();
  if (!root.IsMap()) return Bad(absl::StrCat(path, ": expected key: value settings"));
  // Every node's type is checked before it is read, so nothing below should
  // throw; the catch keeps a yaml-cpp surprise a message, never an abort.
  try {
    std::map<std::string, int> seen;  // key -> line
    for (const auto& kv : root) {
      const int line = kv.first.Mark().line + 1;
      std::string where = absl::StrCat(path, ":", line);
      if (!kv.first.IsScalar()) return Bad(absl::StrCat(where, ": a setting's name must be a plain word"));
      const std::string& key = kv.first.Scalar();
      std::optional<KeyShape> shape = ShapeOf(key);
      if (!shape) return Bad(absl::StrCat(where, ": unknown setting '", key, "'"));
      if (auto [it, fresh] = seen.emplace(key, line); !fresh)
        return Bad(absl::StrCat(where, ": '", key, "' is already set on line ", it->second));
      absl::StatusOr<std::string> value = ValueOf(key, *shape, kv.second);
      if (!value.ok()) return Bad(absl::StrCat(where, ": ", value.status().message()));
      if (auto s = Apply(c, key, *value, where); !s.ok()) return s;
    }
  } catch (const YAML::Exception& e) {
    return Bad(absl::StrCat(path, ":", e.mark.line + 1, ": ", e.msg));
  } catch (const std::exception& e) {
    return Bad(absl::StrCat(path, ": ", e.what()));
  }
  return absl::OkStatus();
}

absl::Status Validate(const AgentConfig& c) {
  const std::string& url = c.pyroscope.url;
  if (url.empty())
    return Bad(
        "no Pyroscope URL: give --pyroscope-url URL (or GPUFLAME_PYROSCOPE_URL, or pyroscope_url in the config file)");
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
    return Bad(absl::StrCat("the Pyroscope URL must start with http:// or https://, not '", base::RedactUrl(url), "'"));
  if (c.protocol != "connect" && c.protocol != "grpc" && c.protocol != "ingest")
    return Bad(absl::StrCat("protocol must be connect, grpc or ingest, not '", c.protocol, "'"));
  if (!(c.window_seconds >= 1 && c.window_seconds <= 3600))
    return Bad(absl::StrCat("window must be between 1 and 3600 seconds, not ", c.window_seconds));
  // As record's --nccl-hang-s: below 0.1 s every healthy collective would be a hang.
  if (!(c.nccl_hang_seconds >= 0.1 && c.nccl_hang_seconds <= 86400))
    return Bad(absl::StrCat("nccl_hang_seconds wants 0.1 to 86400 seconds, not ", c.nccl_hang_seconds));
  // A minute of a busy process is already hundreds of MB of events: the
  // recorder is for the seconds before an incident, record for longer.
  if (!(c.flight.seconds >= 0 && c.flight.seconds <= 60))
    return Bad(absl::StrCat("flight_recorder_seconds wants 0 (off) to 60 seconds, not ", c.flight.seconds));
  if (!(c.symbol_cache_keep_seconds >= 0 && c.symbol_cache_keep_seconds <= 86400))
    return Bad(absl::StrCat("symbol_cache_keep_seconds wants 0 to 86400 seconds, not ", c.symbol_cache_keep_seconds));
  if (c.flight.process_max_bytes > c.flight.max_bytes)
    return Bad("flight_recorder_process_max_mb must not be more than flight_recorder_max_mb");
  if (c.flight.incident_max_files < 1 || c.flight.incident_max_files > 10000)
    return Bad(absl::StrCat("incident_trace_max_files wants 1 to 10000, not ", c.flight.incident_max_files));
  if (c.metrics_port < 0 || c.metrics_port > 65535)
    return Bad(absl::StrCat("metrics_port must be 0-65535, not ", c.metrics_port));
  if (c.pyroscope.basic_user.empty() != c.pyroscope.basic_password.empty())
    return Bad("basic auth needs both a user and a password");
  if (base::HasControlCharacters(url)) return Bad("the Pyroscope URL must not contain control characters");
  if (!c.pyroscope.ca_file.empty() && access(c.pyroscope.ca_file.c_str(), R_OK) != 0)
    return Bad(absl::StrCat("cannot read ", c.pyroscope.ca_file));
  // Read again at each push (rotation); checked here so that a bad token is
  // a start-up error, not a stream of rejected pushes.
  for (const std::string* f : {&c.pyroscope.bearer_token_file, &c.kubelet.token_file})
    if (!f->empty())
      if (auto token = exporters::ReadBearerToken(*f); !token.ok()) return token.status();
  if (c.queue_requests == 0) return Bad("queue_requests must be at least 1");
  // These go into HTTP headers: a line break would start another header.
  for (const auto& [what, value] : {std::pair<const char*, const std::string*>{"tenant", &c.pyroscope.tenant},
                                    {"basic_auth_user", &c.pyroscope.basic_user},
                                    {"basic_auth_password", &c.pyroscope.basic_password},
                                    {"service_name", &c.service_name}})
    if (base::HasControlCharacters(*value))
      return Bad(absl::StrCat(what, " must not contain control characters (line breaks, tabs)"));
  if (!c.kubelet.url.empty() && c.kubelet.url.rfind("http://", 0) != 0 && c.kubelet.url.rfind("https://", 0) != 0)
    return Bad(absl::StrCat("the kubelet URL must start with http:// or https://, not '",
                            base::RedactUrl(c.kubelet.url), "'"));
  if (c.kubelet.url.empty() && !c.kubelet.labels.empty())
    return Bad("pod_labels needs kubelet_url: pod labels come from the kubelet");
  if (!c.kubelet.ca_file.empty() && access(c.kubelet.ca_file.c_str(), R_OK) != 0)
    return Bad(absl::StrCat("cannot read ", c.kubelet.ca_file));
  if (base::HasControlCharacters(c.kubelet.url)) return Bad("the kubelet URL must not contain control characters");
  return absl::OkStatus();
}

}  // namespace

const std::vector<AgentFlag>& AgentFlags() {
  static const std::vector<AgentFlag> kFlags = {
      {"--pyroscope-url", "URL", "pyroscope_url", "Pyroscope's base URL (required)"},
      {"--window", "SECONDS", "window", "window length, default 15"},
      {"--nccl-hang-s", "SECONDS", "nccl_hang_seconds",
       "an NCCL call outstanding this long is a hang: logged with\n"
       "its stack and the ranks it waits for, and counted in\n"
       "/metrics; default 10"},
      {"--flight-seconds", "SECONDS", "flight_recorder_seconds",
       "keep each process's last SECONDS of timeline events in\n"
       "memory, for GET /timeline and `gpuflame timeline`, and\n"
       "for the trace written on an OOM or NCCL hang; 0 to\n"
       "disable, default 5, at most 60"},
      {"--flight-max-mb", "N", "flight_recorder_max_mb", "the flight recorder's memory for all processes, default 64"},
      {"--flight-process-max-mb", "N", "flight_recorder_process_max_mb",
       "the flight recorder's memory for one process, default 16"},
      {"--symbol-keep-s", "SECONDS", "symbol_cache_keep_seconds",
       "keep a library's symbol and unwind tables this long after\n"
       "the last process using it exits (a job restarted within\n"
       "finds them parsed); default 120"},
      {"--incident-trace-dir", "DIR", "incident_trace_dir",
       "where a trace is written on an OOM or NCCL hang, default\n/var/lib/gpuflame/traces; empty: none"},
      {"--incident-trace-max-files", "N", "incident_trace_max_files",
       "keep at most N such traces (the oldest go), default 20"},
      {"--incident-trace-max-mb", "N", "incident_trace_max_mb", "and at most N MiB of them, default 256"},
      {"--protocol", "P", "protocol",
       "connect (HTTP/1.1, default), grpc, or ingest (the legacy\n/ingest API; connect falls back to it on "
       "its own when the\nserver has no push API)"},
      {"--tenant", "ID", "tenant", "X-Scope-OrgID for multi-tenant Pyroscope"},
      {"--basic-auth-user", "U", "basic_auth_user",
       "basic auth; the password in GPUFLAME_BASIC_AUTH_PASSWORD\nor the file's basic_auth_password"},
      {"--bearer-token-file", "F", "bearer_token_file", "Authorization: Bearer <contents of F>, read at each push"},
      {"--ca-file", "F", "ca_file", "trust this CA for https"},
      {"--metrics-port", "N", "metrics_port", "Prometheus self-metrics on :N/metrics, 0 to disable,\ndefault 9400"},
      {"--metrics-address", "ADDR", "metrics_address", "the metrics server's address, default 0.0.0.0"},
      {"--node", "NAME", "node", "the node label (default $NODE_NAME, else the host name)"},
      {"--service-name", "NAME", "service_name", "service_name for every profile (default: see --service-name-from)"},
      {"--service-name-from", "LIST", "service_name_from",
       "where service_name comes from, the first the process has:\nkubernetes (namespace/container), systemd (its "
       ".service\n"
       "unit), script (python3 train.py: train.py; -m module; else\nargv[0]), process (executable name); default\n"
       "kubernetes,systemd,script,process"},
      {"--series-labels", "LIST", "series_labels",
       "opt-in series labels, each a series per value: pid (every\nprocess and DataLoader worker its own series), "
       "thread_name\n(CPU samples by thread name, as --thread-names); default none"},
      {"--spool-dir", "DIR", "spool_dir",
       "undelivered profiles wait here (zstd) across outages and\nrestarts, default /var/lib/gpuflame/spool; \"\" "
       "for memory only"},
      {"--spool-max-mb", "N", "spool_max_mb", "spool size bound, default 256 (oldest dropped, counted)"},
      {"--kubelet-url", "URL", "kubelet_url", "also copy pod labels from the kubelet (https://$NODE_IP:10250)"},
      {"--pod-labels", "a,b", "pod_labels", "which pod labels to copy"},
      {"--kubelet-token-file", "F", "kubelet_token_file", "service-account token for the kubelet"},
      {"--kubelet-ca-file", "F", "kubelet_ca_file",
       "the kubelet's CA (or kubelet_insecure_skip_verify: true in\nthe file)"},
      {"--log-format", "F", "log_format", "logfmt (default), json or text"},
      {"--log-level", "L", "log_level", "debug, info (default), warning or error"},
      {"--log-repeat-seconds", "S", "log_repeat_seconds",
       "the same log line at most once per S seconds, default 60;\nthe rest counted (repeated=N); 0: every time"},
  };
  return kFlags;
}

std::string AgentUsageText() {
  std::string out = R"(Usage:
  gpuflame agent --pyroscope-url URL [--window SECONDS] [--config FILE] [options]

  Profiles every CUDA process on this node (or those selected) and pushes, per
  process and per window, to Grafana Pyroscope:
    gpu_memory     device memory (cudaMalloc, cuMemCreate, ...) by stack: in use
                   at the window's end, at its peak, allocated in it, unused
                   (the caching allocator's slack)
    torch_memory   PyTorch's tensor allocations by stack, the same sample types
    process_cpu    CPU time by stack (Python and native frames)
    gpu_kernel     GPU kernel and copy time by the stack that launched them
                   (through libgpuflame_cupti.so; sampled, scaled estimates)
    gpu_oom        each out-of-memory episode's live set, pushed as it ends
  Logs go to stderr, levelled and structured (logfmt by default); SIGTERM or
  SIGINT stops it after pushing the last, partial window.

Options (in parentheses: the config-file key; most are also read from
GPUFLAME_<KEY> in the environment, which the flags override):
)";
  for (const AgentFlag& f : AgentFlags()) {
    std::string left = absl::StrCat("  ", f.flag, f.metavar[0] ? " " : "", f.metavar);
    std::string text = f.help;
    if (f.key[0]) absl::StrAppend(&text, " (", f.key, ")");
    absl::StrAppend(&out, absl::StrFormat("%-28s", left), left.size() >= 28 ? "\n" + std::string(28, ' ') : "");
    for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', nl + 29))
      text.insert(nl + 1, std::string(28, ' '));
    absl::StrAppend(&out, text, "\n");
  }
  absl::StrAppend(&out, R"(  --namespace NS            profile only processes in these namespaces (namespaces)
  --pod P                   ... in these pods (pods)
  --process NAME            ... with these process names (processes)
  --pid PID                 ... with these process ids (pids); each repeatable
  --config FILE             YAML file of the settings above, by key
  --check-config            validate, print the effective configuration, and exit
  -h, --help                this text

Profiling options (the same keys with underscores: native_stacks, cpu_hz, ...):
)",
                  ProfilingFlags::Help(28));
  return out;
}

absl::StatusOr<AgentConfig> LoadAgentConfig(const std::vector<std::string>& args,
                                            const std::map<std::string, std::string>& env) {
  AgentConfig c;
  // Continuous profiling keeps to 1% of the workload's CPU time by default
  // (record, the exact mode, sets no such limit).
  c.profiling.guardrails.max_overhead = 0.01;
  c.profiling.kernel_time_exact = false;  // continuous: activity duty-cycled, estimates scaled
  c.profiling.tensor_exact = false;       // continuous: tensor allocations sampled by bytes, scaled
  // Continuous: launch stacks by the launch route, which leaves nothing on
  // between its windows nor after the agent leaves, where CUPTI's launch
  // callbacks, once on, cost every launch for the process's life (an H100:
  // 0.37-0.59 us a launch; README, Measured, session 40). A process whose
  // library could not prime the route gets the callbacks, and says so.
  c.profiling.launch_uprobes = true;
  c.log.format = logging::Format::kLogfmt;
  // The file first, wherever --config appears.
  for (size_t i = 0; i < args.size(); i++) {
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) return Bad("--config needs a file");
      if (auto s = LoadFile(c, args[i + 1]); !s.ok()) return s;
    }
  }
  static const std::pair<const char*, const char*> kEnv[] = {
      {"GPUFLAME_PYROSCOPE_URL", "pyroscope_url"},
      {"GPUFLAME_WINDOW", "window"},
      {"GPUFLAME_NCCL_HANG_SECONDS", "nccl_hang_seconds"},
      {"GPUFLAME_FLIGHT_RECORDER_SECONDS", "flight_recorder_seconds"},
      {"GPUFLAME_SYMBOL_CACHE_KEEP_SECONDS", "symbol_cache_keep_seconds"},
      {"GPUFLAME_FLIGHT_RECORDER_MAX_MB", "flight_recorder_max_mb"},
      {"GPUFLAME_FLIGHT_RECORDER_PROCESS_MAX_MB", "flight_recorder_process_max_mb"},
      {"GPUFLAME_INCIDENT_TRACE_DIR", "incident_trace_dir"},
      {"GPUFLAME_INCIDENT_TRACE_MAX_FILES", "incident_trace_max_files"},
      {"GPUFLAME_INCIDENT_TRACE_MAX_MB", "incident_trace_max_mb"},
      {"GPUFLAME_TENANT", "tenant"},
      {"GPUFLAME_BASIC_AUTH_USER", "basic_auth_user"},
      {"GPUFLAME_BASIC_AUTH_PASSWORD", "basic_auth_password"},
      {"GPUFLAME_BEARER_TOKEN_FILE", "bearer_token_file"},
      {"GPUFLAME_CA_FILE", "ca_file"},
      {"GPUFLAME_METRICS_PORT", "metrics_port"},
      {"GPUFLAME_SERVICE_NAME", "service_name"},
      {"GPUFLAME_SERVICE_NAME_FROM", "service_name_from"},
      {"GPUFLAME_SERIES_LABELS", "series_labels"},
      {"GPUFLAME_NODE", "node"},
      {"NODE_NAME", "node"},
      {"GPUFLAME_SPOOL_DIR", "spool_dir"},
      {"GPUFLAME_BINARIES", "binaries"},
      {"GPUFLAME_NATIVE_STACKS", "native_stacks"},
      {"GPUFLAME_CPU_HZ", "cpu_hz"},
      {"GPUFLAME_THREAD_NAMES", "thread_names"},
      {"GPUFLAME_KERNEL_TIME", "kernel_time"},
      {"GPUFLAME_KERNEL_ACTIVITY", "kernel_activity"},
      {"GPUFLAME_LAUNCH_STACKS", "launch_stacks"},
      {"GPUFLAME_TENSOR_SAMPLING", "tensor_sampling"},
      {"GPUFLAME_TENSOR_STARTUP_S", "tensor_startup_s"},
      {"GPUFLAME_GATE_NEW_LIBRARIES", "gate_new_libraries"},
      {"GPUFLAME_KUBELET_URL", "kubelet_url"},
      {"GPUFLAME_KUBELET_INSECURE_SKIP_VERIFY", "kubelet_insecure_skip_verify"},
      {"GPUFLAME_LOG_FORMAT", "log_format"},
      {"GPUFLAME_LOG_LEVEL", "log_level"}};
  for (const auto& [var, key] : kEnv)
    if (auto it = env.find(var); it != env.end() && !it->second.empty())
      if (auto s = Apply(c, key, it->second, var); !s.ok()) return s;

  std::map<std::string, std::string> flags;
  for (const AgentFlag& f : AgentFlags()) flags.emplace(f.flag, f.key);
  ProfilingFlags profiling(c.profiling);
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    if (a == "--config") {
      i++;
      continue;
    }
    if (a == "--check-config") {
      c.check_only = true;
      continue;
    }
    auto took = profiling.Consume(args, i);
    if (!took.ok()) return took.status();
    if (*took > 0) {
      i += *took - 1;
      continue;
    }
    if (i + 1 >= args.size()) return Bad(absl::StrCat(a, flags.count(a) ? " needs a value" : ": unknown option"));
    const std::string& v = args[++i];
    if (auto it = flags.find(a); it != flags.end()) {
      if (auto s = Apply(c, it->second, v, a); !s.ok()) return s;
    } else if (a == "--namespace") {
      c.select.namespaces.push_back(v);
    } else if (a == "--pod") {
      c.select.pods.push_back(v);
    } else if (a == "--process") {
      c.select.processes.push_back(v);
    } else if (a == "--pid") {
      auto pid = ParsePid("--pid", v);
      if (!pid.ok()) return pid.status();
      c.select.pids.push_back(*pid);
    } else {
      return Bad(absl::StrCat("unknown option '", a, "'"));
    }
  }
  if (c.log.repeat_interval_s < 0) c.log.repeat_interval_s = 0;
  // Credentials written into the URL become basic auth here, once: the URL
  // that every client, message and metric sees from now on holds none.
  if (base::UrlCredentials split = base::SplitUrlCredentials(c.pyroscope.url); split.had_credentials) {
    if (!c.pyroscope.basic_user.empty())
      return Bad("credentials are in both the Pyroscope URL and basic_auth_user: give them once");
    c.pyroscope.url = split.url;
    c.pyroscope.basic_user = split.user;
    c.pyroscope.basic_password = split.password;
  }
  if (c.node.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) == 0) c.node = host;
  }
  if (auto s = Validate(c); !s.ok()) return s;
  return c;
}

std::string DescribeConfig(const AgentConfig& c) {
  auto list = [](const auto& v) { return v.empty() ? std::string("(all)") : absl::StrJoin(v, ","); };
  return absl::StrCat(
      "pyroscope_url: ", base::RedactUrl(c.pyroscope.url), " (", c.protocol, ")\nwindow: ", c.window_seconds,
      "\nnccl_hang_seconds: ", c.nccl_hang_seconds, "\nsymbol_cache_keep_seconds: ", c.symbol_cache_keep_seconds,
      "\nflight recorder: ",
      c.flight.seconds > 0 ? absl::StrCat(c.flight.seconds, " s, ", c.flight.max_bytes >> 20, " MiB (",
                                          c.flight.process_max_bytes >> 20, " MiB a process); incident traces: ",
                                          c.flight.incident_dir.empty()
                                              ? std::string("off")
                                              : absl::StrCat(c.flight.incident_dir, " (", c.flight.incident_max_files,
                                                             " files, ", c.flight.incident_max_bytes >> 20, " MiB)"))
                           : std::string("off"),
      "\ntenant: ", c.pyroscope.tenant.empty() ? "(none)" : c.pyroscope.tenant, "\nauth: ",
      !c.pyroscope.basic_user.empty()          ? "basic"
      : !c.pyroscope.bearer_token_file.empty() ? "bearer token file"
                                               : "none",
      "\nmetrics: ", c.metrics_port ? absl::StrCat(c.metrics_address, ":", c.metrics_port) : "off", "\nnode: ", c.node,
      "\nservice_name: ",
      c.service_name.empty() ? absl::StrCat("from ", DescribeServiceSources(c.labels.service_from)) : c.service_name,
      "\nseries labels: service_name, process, node, namespace, pod, container, container_id",
      c.labels.pid ? ", pid" : "", c.profiling.thread_names ? ", thread_name (CPU)" : "",
      "\nnamespaces: ", list(c.select.namespaces), "\npods: ", list(c.select.pods),
      "\nprocesses: ", list(c.select.processes), "\npids: ", list(c.select.pids), "\nspool: ",
      c.spool_dir.empty() ? std::string("off") : absl::StrCat(c.spool_dir, " (", c.spool_max_bytes >> 20, " MiB)"),
      "\nlog: ", logging::FormatName(c.log.format), ", ", logging::LevelName(c.log.level), ", repeats every ",
      c.log.repeat_interval_s, "s\nkernel_activity: ", c.profiling.kernel_time_exact ? "exact" : "sampled",
      "\nlaunch_stacks: ", c.profiling.launch_uprobes ? "uprobes" : "callbacks", "\ntensor_sampling: ",
      c.profiling.tensor_exact ? std::string("exact")
                               : absl::StrCat("sampled (the probes from ", c.profiling.tensor_startup_s,
                                              " s after a process's first tensor)"),
      "\n");
}

}  // namespace gpuflame::profiler
