// Fuzz target for the pod metadata parsers (profiler/process/k8s_metadata.cc):
// /proc/PID/cgroup and /proc/PID/mountinfo of a container, whose cgroup
// paths and mount roots the container runtime and the pod spec shape, and
// whose mount points the container itself can add to.
//
// Input: CGROUP '\0' MOUNTINFO. The pod UID found in CGROUP (else a fixed
// one, so that MOUNTINFO is searched on every input) selects the kubelet
// mount whose root names the container. Seeds: real cgroup and mountinfo
// files (cgroup v1 and v2; containerd, CRI-O, Docker, systemd and cgroupfs
// drivers). Checked: every answer has the shape a caller builds labels from.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "profiler/process/k8s_metadata.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuflame::profiler;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::string_view cgroup = gpuflame::fuzz::TakePart(in, '\0');
  const std::string_view mountinfo = in;

  if (auto id = ContainerIdFromCgroup(cgroup)) {
    FUZZ_CHECK(id->size() == 64);
    for (char c : *id) FUZZ_CHECK(std::isxdigit(static_cast<unsigned char>(c)));
  }
  auto uid = PodUidFromCgroup(cgroup);
  if (uid) {
    FUZZ_CHECK(uid->size() == 36);
    for (size_t i = 0; i < uid->size(); i++)
      FUZZ_CHECK((i == 8 || i == 13 || i == 18 || i == 23) ? (*uid)[i] == '-'
                                                           : std::isxdigit(static_cast<unsigned char>((*uid)[i])) != 0);
  }
  const std::string pod_uid = uid ? *uid : "0b9ad8e1-7c4e-4c8e-9a3e-3f5d2a1b6c7d";
  if (auto name = ContainerNameFromMountinfo(mountinfo, pod_uid)) {
    FUZZ_CHECK(!name->empty() && name->size() <= 253);
    FUZZ_CHECK(name->find_first_of("/ \n") == std::string::npos);
  }
  return 0;
}
