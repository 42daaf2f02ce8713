// Which pod a process belongs to, without the API server: container ID and
// pod UID from /proc/PID/cgroup (cgroup v1 and v2; containerd, CRI-O and
// Docker path shapes), the container name from kubelet's bind mounts in
// /proc/PID/mountinfo, the pod name from the container's /etc/hostname and
// the namespace from its service-account mount, both read inside the
// container's root. Every read is bounded; missing pieces stay empty.
#ifndef GPUFLAME_PROFILER_PROCESS_K8S_METADATA_H_
#define GPUFLAME_PROFILER_PROCESS_K8S_METADATA_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace gpuflame::profiler {

struct PodInfo {
  std::string container_id;  // 64 hex digits
  std::string pod_uid;       // with dashes
  std::string pod;
  std::string namespace_name;
  std::string container;     // container name, from kubelet's bind mounts
  bool in_kubernetes() const { return !pod_uid.empty(); }
};

std::optional<std::string> ContainerIdFromCgroup(std::string_view cgroup_text);
std::optional<std::string> PodUidFromCgroup(std::string_view cgroup_text);
// The container name from /proc/PID/mountinfo: kubelet bind-mounts each
// container's termination log (and more) from
// /var/lib/kubelet/pods/<pod uid>/containers/<name>/..., and mountinfo keeps
// that source path as the mount's root.
std::optional<std::string> ContainerNameFromMountinfo(std::string_view mountinfo, std::string_view pod_uid);

// |proc| is "/proc" except in tests.
PodInfo ReadPodInfo(pid_t pid, const std::string& proc = "/proc");

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROCESS_K8S_METADATA_H_
