// Pyroscope series labels for one process's profiles: service_name, node,
// process, and, in Kubernetes, namespace/pod/container and the pod labels
// chosen from the kubelet. Label names and values are made to fit
// Pyroscope's rules (LabelName, LabelValue).
//
// Series cardinality is bounded by default: every distinct label set is a
// series (Pyroscope's per-tenant limit, 5000 by default, refuses the rest),
// and a pprof's string sample labels are no way out, since Pyroscope's
// distributor splits a profile into one series per distinct sample-label set
// (all but trace/span IDs). So the pid, which makes every process and every
// DataLoader worker a series of its own, is a series label only when asked
// for (series_labels: pid); without it, the processes of one service, pod
// and name share a series, which Pyroscope sums, as a pod's total should be.
// Thread names (a CPU sample label, series_labels: thread_name or
// thread_names) are likewise opt-in.
// Not thread-safe: owned by the export thread (WindowExporter), so that a
// kubelet refresh (an HTTP request) never holds up the event loop.
#ifndef GPUFLAME_AGENT_LABELS_H_
#define GPUFLAME_AGENT_LABELS_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/kubelet_pods.h"
#include "profiler/process/k8s_metadata.h"
#include "profiler/process/service_hints.h"

namespace gpuflame::profiler {

using SeriesLabels = std::vector<std::pair<std::string, std::string>>;

// Kubernetes label keys (app.kubernetes.io/name) as Pyroscope label names.
std::string LabelName(const std::string& key);
// Pyroscope label values are at most 2048 bytes.
std::string LabelValue(std::string value);

// The `process` label of a process that exited before its name was read.
inline constexpr const char* kUnknownProcess = "unknown_process";

// Where service_name comes from, tried in order (service_name_from); the
// first that the process has wins.
enum class ServiceSource {
  kKubernetes,  // namespace/container
  kSystemd,     // the systemd service it runs in, without ".service"
  kScript,      // the script it runs (train.py), its -m module, or argv[0]'s base name
  kProcess,     // the executable's name (comm)
};

struct SeriesLabelOptions {
  std::vector<ServiceSource> service_from = {ServiceSource::kKubernetes, ServiceSource::kSystemd,
                                             ServiceSource::kScript, ServiceSource::kProcess};
  bool pid = false;  // a pid series label (series_labels: pid)
};

// "kubernetes,systemd,script,process" (any order, at least one).
absl::StatusOr<std::vector<ServiceSource>> ParseServiceSources(const std::vector<std::string>& names);
std::string DescribeServiceSources(const std::vector<ServiceSource>& sources);

class SeriesLabeler {
 public:
  // |service_name|: overrides the derived one when not empty.
  SeriesLabeler(std::string service_name, std::string node, KubeletOptions kubelet, SeriesLabelOptions options = {})
      : service_name_(std::move(service_name)),
        node_(std::move(node)),
        options_(std::move(options)),
        kubelet_(std::move(kubelet)) {}

  // The labels of |profile| (its name: gpu_memory, ...) for process |pid|
  // named |process|, running in |pod| (empty outside Kubernetes), whose
  // service outside Kubernetes |service| may name.
  SeriesLabels Labels(const std::string& profile, pid_t pid, const std::string& process, const PodInfo& pod,
                      const ServiceHints& service = {});

 private:
  std::string ServiceName(const std::string& process, const PodInfo& pod, const ServiceHints& service) const;

  std::string service_name_;
  std::string node_;
  SeriesLabelOptions options_;
  KubeletPods kubelet_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_LABELS_H_
