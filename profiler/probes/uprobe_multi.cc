#include "profiler/probes/uprobe_multi.h"

#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {
namespace {

constexpr uint32_t kReturn = 1u << 0;  // BPF_F_UPROBE_MULTI_RETURN

// union bpf_attr's link_create with the uprobe_multi member, as in Linux
// 6.6's uapi (Debian's 6.1 headers predate it); the kernel takes the
// union's full size, zeroed past what we set.
struct LinkCreateUprobeMulti {
  uint32_t prog_fd, target_fd, attach_type, flags;
  uint64_t path, offsets, ref_ctr_offsets, cookies;
  uint32_t cnt, multi_flags, pid;
};
static_assert(sizeof(LinkCreateUprobeMulti) <= sizeof(bpf_attr));
static_assert(offsetof(LinkCreateUprobeMulti, path) == 16, "the link_create union starts at byte 16");

long LinkCreate(const LinkCreateUprobeMulti& a) {
  bpf_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  std::memcpy(&attr, &a, sizeof(a));
  return syscall(SYS_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
}

// A socket-filter-sized program, "return 0", loaded for uprobe_multi: an
// older kernel refuses the attach type at load.
base::ScopedFd LoadProbeProgram() {
  const bpf_insn insns[] = {
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .src_reg = 0, .off = 0, .imm = 0},
      {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
  };
  static const char kLicense[] = "GPL";
  bpf_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.prog_type = BPF_PROG_TYPE_KPROBE;
  attr.expected_attach_type = kBpfTraceUprobeMulti;
  attr.insns = reinterpret_cast<uintptr_t>(insns);
  attr.insn_cnt = sizeof(insns) / sizeof(insns[0]);
  attr.license = reinterpret_cast<uintptr_t>(kLicense);
  return base::ScopedFd(static_cast<int>(syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr))));
}

bool Probe() {
  base::ScopedFd prog = LoadProbeProgram();
  if (!prog) return false;
  const uint64_t offset = 0;
  LinkCreateUprobeMulti a{};
  a.prog_fd = static_cast<uint32_t>(prog.get());
  a.attach_type = kBpfTraceUprobeMulti;
  a.path = reinterpret_cast<uintptr_t>("/");
  a.offsets = reinterpret_cast<uintptr_t>(&offset);
  a.cnt = 1;
  const long fd = LinkCreate(a);
  if (fd >= 0) {  // no kernel should take a directory; if one did, it does make the links
    base::ScopedFd link(static_cast<int>(fd));
    return true;
  }
  return errno == EBADF;
}

}  // namespace

bool UprobeMultiSupported() {
  static const bool supported = Probe();
  return supported;
}

absl::StatusOr<base::ScopedFd> CreateUprobeMultiLink(int prog_fd, const std::string& path,
                                                     std::span<const MultiSite> sites, bool retprobe, pid_t pid) {
  if (sites.empty()) return absl::InvalidArgumentError("no uprobe site");
  std::vector<uint64_t> offsets, cookies, semaphores;
  bool any_semaphore = false;
  for (const MultiSite& s : sites) {
    offsets.push_back(s.offset);
    cookies.push_back(s.cookie);
    semaphores.push_back(s.semaphore);
    any_semaphore |= s.semaphore != 0;
  }
  LinkCreateUprobeMulti a{};
  a.prog_fd = static_cast<uint32_t>(prog_fd);
  a.attach_type = kBpfTraceUprobeMulti;
  a.path = reinterpret_cast<uintptr_t>(path.c_str());
  a.offsets = reinterpret_cast<uintptr_t>(offsets.data());
  a.cookies = reinterpret_cast<uintptr_t>(cookies.data());
  a.ref_ctr_offsets = any_semaphore ? reinterpret_cast<uintptr_t>(semaphores.data()) : 0;
  a.cnt = static_cast<uint32_t>(sites.size());
  a.multi_flags = retprobe ? kReturn : 0;
  a.pid = pid < 0 ? 0 : static_cast<uint32_t>(pid);
  const long fd = LinkCreate(a);
  if (fd < 0) {
    const int err = errno;
    std::string msg = absl::StrCat(retprobe ? "uretprobes" : "uprobes", " (", sites.size(),
                                   ", one uprobe_multi link) on ", path, ": ", std::strerror(err));
    if (err == EPERM || err == EACCES) return absl::PermissionDeniedError(msg);
    return absl::InternalError(msg);
  }
  return base::ScopedFd(static_cast<int>(fd));
}

}  // namespace gpuflame::profiler
