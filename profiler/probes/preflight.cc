#include "profiler/probes/preflight.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {
namespace {

bool HasCapability(int cap) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  return data[cap / 32].effective & (1u << (cap % 32));
}

}  // namespace

absl::Status CheckPrivileges() {
#ifndef CAP_BPF
#define CAP_BPF 39
#endif
#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
  if (geteuid() == 0 && HasCapability(CAP_SYS_ADMIN)) return absl::OkStatus();
  bool bpf = HasCapability(CAP_BPF) || HasCapability(CAP_SYS_ADMIN);
  bool perf = HasCapability(CAP_PERFMON) || HasCapability(CAP_SYS_ADMIN);
  bool ptrace = HasCapability(CAP_SYS_PTRACE);
  if (bpf && perf && ptrace) return absl::OkStatus();
  return absl::PermissionDeniedError(
      "root privileges needed: run it with sudo, or give it the capabilities CAP_BPF, CAP_PERFMON and "
      "CAP_SYS_PTRACE");
}

absl::Status CheckKernel() {
  if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
    return absl::FailedPreconditionError(
        "this kernel has no BTF (/sys/kernel/btf/vmlinux is missing): a kernel built with "
        "CONFIG_DEBUG_INFO_BTF=y (5.8 or newer) is needed");
  if (access("/sys/bus/event_source/devices/uprobe/type", R_OK) != 0)
    return absl::FailedPreconditionError(
        "this kernel has no uprobe support (CONFIG_UPROBE_EVENTS): gpuflame cannot hook CUDA");
  return absl::OkStatus();
}

absl::Status ExplainBpfFailure(const absl::Status& status) {
  if (absl::IsPermissionDenied(status))
    return absl::PermissionDeniedError(absl::StrCat(
        "the kernel refused gpuflame's BPF programs (", status.message(),
        "): run as root, and check kernel.unprivileged_bpf_disabled / lockdown settings"));
  return absl::InternalError(absl::StrCat("could not set up gpuflame's probes: ", status.message(),
                                          " (set GPUFLAME_BPF_DEBUG=1 for libbpf's log)"));
}

}  // namespace gpuflame::profiler
