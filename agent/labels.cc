#include "agent/labels.h"

#include <cctype>

#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {

std::string LabelName(const std::string& key) {
  std::string out;
  for (char c : key) out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
  return out.substr(0, 1024);
}

std::string LabelValue(std::string value) {
  if (value.size() > 2048) value.resize(2048);
  return value;
}

SeriesLabels SeriesLabeler::Labels(const std::string& profile, pid_t pid, const std::string& process_name,
                                   const PodInfo& pod) {
  // Pyroscope rejects a series with an empty label value (the whole push):
  // a process that exited before its name could be read still gets one.
  const std::string process = process_name.empty() ? kUnknownProcess : process_name;
  std::string service = service_name_;
  if (service.empty())
    service = pod.in_kubernetes() && !pod.namespace_name.empty()
                  ? absl::StrCat(pod.namespace_name, "/", pod.container.empty() ? process : pod.container)
                  : process;
  if (service.empty() || service == kUnknownProcess) service = "unknown_service";
  SeriesLabels l = {
      {"__name__", profile},
      {"service_name", LabelValue(service)},
      {"pid", std::to_string(pid)},
      {"process", LabelValue(process)},
  };
  if (!node_.empty()) l.push_back({"node", LabelValue(node_)});
  if (!pod.namespace_name.empty()) l.push_back({"namespace", LabelValue(pod.namespace_name)});
  if (!pod.pod.empty()) l.push_back({"pod", LabelValue(pod.pod)});
  if (!pod.container.empty()) l.push_back({"container", LabelValue(pod.container)});
  if (!pod.container_id.empty()) l.push_back({"container_id", pod.container_id.substr(0, 12)});
  for (const auto& [key, value] : kubelet_.LabelsOf(pod.pod_uid)) {
    if (l.size() >= 30) break;  // Pyroscope's per-series label limit
    if (value.empty()) continue;  // an empty pod label is no label: Pyroscope rejects it
    l.push_back({LabelName(key), LabelValue(value)});
  }
  return l;
}

}  // namespace gpuflame::profiler
