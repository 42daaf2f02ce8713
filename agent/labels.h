// Pyroscope series labels for one process's profiles: service_name, node,
// pid, process, and, in Kubernetes, namespace/pod/container and the pod
// labels chosen from the kubelet. Label names and values are made to fit
// Pyroscope's rules (LabelName, LabelValue).
// Not thread-safe: owned by the export thread (WindowExporter), so that a
// kubelet refresh (an HTTP request) never holds up the event loop.
#ifndef GPUFLAME_AGENT_LABELS_H_
#define GPUFLAME_AGENT_LABELS_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "agent/kubelet_pods.h"
#include "profiler/process/k8s_metadata.h"

namespace gpuflame::profiler {

using SeriesLabels = std::vector<std::pair<std::string, std::string>>;

// Kubernetes label keys (app.kubernetes.io/name) as Pyroscope label names.
std::string LabelName(const std::string& key);
// Pyroscope label values are at most 2048 bytes.
std::string LabelValue(std::string value);

// The `process` label of a process that exited before its name was read.
inline constexpr const char* kUnknownProcess = "unknown_process";

class SeriesLabeler {
 public:
  // |service_name|: overrides the derived one when not empty.
  SeriesLabeler(std::string service_name, std::string node, KubeletOptions kubelet)
      : service_name_(std::move(service_name)), node_(std::move(node)), kubelet_(std::move(kubelet)) {}

  // The labels of |profile| (its name: gpu_memory, ...) for process |pid|
  // named |process|, running in |pod| (empty outside Kubernetes).
  SeriesLabels Labels(const std::string& profile, pid_t pid, const std::string& process, const PodInfo& pod);

 private:
  std::string service_name_;
  std::string node_;
  KubeletPods kubelet_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_LABELS_H_
