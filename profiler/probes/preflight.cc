#include "profiler/probes/preflight.h"

#include <linux/capability.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "base/scoped_fd.h"

namespace gpuflame::profiler {
namespace {

bool HasCapability(int cap) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  return data[cap / 32].effective & (1u << (cap % 32));
}

constexpr char kUprobeType[] = "/sys/bus/event_source/devices/uprobe/type";

// Asks the kernel whether this process may create uprobes, the way libbpf
// creates them (the uprobe PMU, every process, CPU 0), on a path that cannot
// exist. perf_uprobe_event_init() checks the caller's capability before it
// looks the path up, so EACCES is the refusal and ENOENT is permission, with
// no probe installed. Asked rather than guessed from the capabilities: the
// capability the check wants changed with kernel versions (CAP_SYS_ADMIN up
// to 5.7, CAP_PERFMON from 5.8, CAP_SYS_ADMIN again from 6.16 and the stable
// releases of July 2025, CVE-2025-38466).
absl::Status CheckUprobesAllowed() {
  std::ifstream in(kUprobeType);
  int type = -1;
  if (!(in >> type)) return absl::OkStatus();  // no uprobe PMU: CheckKernel() says so
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = static_cast<uint32_t>(type);
  static constexpr char kNoSuchPath[] = "/nonexistent/gpuflame-preflight";
  attr.config1 = reinterpret_cast<uint64_t>(kNoSuchPath);
  base::ScopedFd fd(static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC)));
  if (fd.valid() || errno != EACCES) return absl::OkStatus();
  return absl::PermissionDeniedError(
      "the kernel refuses uprobes to this process (EACCES from the uprobe PMU): Linux 6.16 and later, and "
      "5.10.240, 5.15.189, 6.1.146, 6.6.99, 6.12.39, 6.15.7 and later stable releases, want CAP_SYS_ADMIN "
      "for them (CAP_PERFMON is not enough): run it as root, or add CAP_SYS_ADMIN");
}

}  // namespace

absl::Status CheckPrivileges(bool holds_processes) {
#ifndef CAP_BPF
#define CAP_BPF 39
#endif
#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
  const bool admin = HasCapability(CAP_SYS_ADMIN);
  const bool bpf = HasCapability(CAP_BPF) || admin;
  const bool perf = HasCapability(CAP_PERFMON) || admin;
  // Even for root: without it other users' processes cannot be read (their
  // Python frames came out all unknown, without a word).
  const bool ptrace = HasCapability(CAP_SYS_PTRACE);
  if (!(bpf && perf && ptrace))
    return absl::PermissionDeniedError(
        "root privileges needed: run it with sudo, or give it the capabilities CAP_SYS_ADMIN, CAP_SYS_PTRACE "
        "and CAP_KILL");
  if (auto s = CheckUprobesAllowed(); !s.ok()) return s;
  // The gates stop processes (bpf_send_signal) that gpuflame then resumes
  // with SIGCONT: across users and sessions kill() wants CAP_KILL, and
  // without it another user's process would stay stopped.
  if (holds_processes && !HasCapability(CAP_KILL))
    return absl::PermissionDeniedError(
        "CAP_KILL needed: gpuflame holds new processes until its probes are in place and resumes them with "
        "SIGCONT, which another user's process would never get without it (machine-wide, --no-gate or the "
        "agent's gate_new_libraries: false hold nothing)");
  return absl::OkStatus();
}

absl::Status CheckKernel() {
  if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
    return absl::FailedPreconditionError(
        "this kernel has no BTF (/sys/kernel/btf/vmlinux is missing): a kernel built with "
        "CONFIG_DEBUG_INFO_BTF=y (5.8 or newer) is needed");
  if (access(kUprobeType, R_OK) != 0)
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
