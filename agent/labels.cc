#include "agent/labels.h"

#include <algorithm>
#include <cctype>
#include <iterator>

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

namespace {

constexpr std::pair<const char*, ServiceSource> kSources[] = {{"kubernetes", ServiceSource::kKubernetes},
                                                              {"systemd", ServiceSource::kSystemd},
                                                              {"script", ServiceSource::kScript},
                                                              {"process", ServiceSource::kProcess}};

}  // namespace

absl::StatusOr<std::vector<ServiceSource>> ParseServiceSources(const std::vector<std::string>& names) {
  std::vector<ServiceSource> out;
  for (const std::string& name : names) {
    const auto* it =
        std::find_if(std::begin(kSources), std::end(kSources), [&](const auto& s) { return name == s.first; });
    if (it == std::end(kSources))
      return absl::InvalidArgumentError(
          absl::StrCat("service_name_from wants kubernetes, systemd, script or process, not '", name, "'"));
    if (std::find(out.begin(), out.end(), it->second) == out.end()) out.push_back(it->second);
  }
  if (out.empty())
    return absl::InvalidArgumentError("service_name_from needs at least one of kubernetes, systemd, script, process");
  return out;
}

std::string DescribeServiceSources(const std::vector<ServiceSource>& sources) {
  std::string out;
  for (ServiceSource s : sources)
    for (const auto& [name, source] : kSources)
      if (source == s) absl::StrAppend(&out, out.empty() ? "" : ",", name);
  return out;
}

std::string SeriesLabeler::ServiceName(const std::string& process, const PodInfo& pod,
                                       const ServiceHints& service) const {
  if (!service_name_.empty()) return service_name_;
  for (ServiceSource source : options_.service_from) {
    switch (source) {
      case ServiceSource::kKubernetes:
        if (pod.in_kubernetes() && !pod.namespace_name.empty())
          return absl::StrCat(pod.namespace_name, "/", pod.container.empty() ? process : pod.container);
        break;
      case ServiceSource::kSystemd:
        if (!service.systemd_service.empty()) return service.systemd_service;
        break;
      case ServiceSource::kScript:
        if (!service.script.empty()) return service.script;
        break;
      case ServiceSource::kProcess:
        if (process != kUnknownProcess) return process;
        break;
    }
  }
  return "unknown_service";
}

SeriesLabels SeriesLabeler::Labels(const std::string& profile, pid_t pid, const std::string& process_name,
                                   const PodInfo& pod, const ServiceHints& service) {
  // Pyroscope rejects a series with an empty label value (the whole push):
  // a process that exited before its name could be read still gets one.
  const std::string process = process_name.empty() ? kUnknownProcess : process_name;
  SeriesLabels l = {
      {"__name__", profile},
      {"service_name", LabelValue(ServiceName(process, pod, service))},
      {"process", LabelValue(process)},
  };
  if (options_.pid) l.push_back({"pid", std::to_string(pid)});
  if (!node_.empty()) l.push_back({"node", LabelValue(node_)});
  if (!pod.namespace_name.empty()) l.push_back({"namespace", LabelValue(pod.namespace_name)});
  if (!pod.pod.empty()) l.push_back({"pod", LabelValue(pod.pod)});
  if (!pod.container.empty()) l.push_back({"container", LabelValue(pod.container)});
  if (!pod.container_id.empty()) l.push_back({"container_id", pod.container_id.substr(0, 12)});
  for (const auto& [key, value] : kubelet_.LabelsOf(pod.pod_uid)) {
    if (l.size() >= 30) break;    // Pyroscope's per-series label limit
    if (value.empty()) continue;  // an empty pod label is no label: Pyroscope rejects it
    l.push_back({LabelName(key), LabelValue(value)});
  }
  return l;
}

}  // namespace gpuflame::profiler
