// Pod labels from the node's kubelet (GET /pods), when configured: the one
// piece of pod metadata /proc cannot give. Chosen labels only, to keep
// Pyroscope's series count in check. Refreshed at most every |refresh_s|
// when a pod it has not seen asks. Not thread-safe: event loop only.
#ifndef GPUFLAME_AGENT_KUBELET_PODS_H_
#define GPUFLAME_AGENT_KUBELET_PODS_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace gpuflame::profiler {

struct KubeletOptions {
  std::string url;         // https://NODE_IP:10250 (empty: off)
  std::string token_file;  // service-account token
  std::string ca_file;     // kubelet's serving CA; empty: system trust
  bool insecure_skip_verify = false;
  std::vector<std::string> labels;  // pod labels to copy into profiles
  int refresh_s = 30;
};

// Pod UID -> the selected labels, from a kubelet /pods response (a PodList).
absl::StatusOr<absl::flat_hash_map<std::string, std::map<std::string, std::string>>> ParsePodList(
    const std::string& json, const std::vector<std::string>& wanted);

class KubeletPods {
 public:
  explicit KubeletPods(KubeletOptions options) : options_(std::move(options)) {}
  bool enabled() const { return !options_.url.empty(); }
  // The selected labels of pod |uid| (empty when unknown or off).
  const std::map<std::string, std::string>& LabelsOf(const std::string& uid);
  const std::string& last_error() const { return last_error_; }

 private:
  absl::Status Refresh();

  KubeletOptions options_;
  absl::flat_hash_map<std::string, std::map<std::string, std::string>> pods_;
  std::chrono::steady_clock::time_point last_refresh_{};
  bool refreshed_ = false;
  std::string last_error_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_KUBELET_PODS_H_
