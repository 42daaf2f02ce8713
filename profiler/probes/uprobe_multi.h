// Uprobes as one kernel link per program and file (BPF_TRACE_UPROBE_MULTI,
// Linux 6.6 and later), made with a raw BPF_LINK_CREATE: Debian's libbpf
// 1.1 has no bpf_program__attach_uprobe_multi (it came in 1.3).
//
// Why: a uprobe made as a perf event is removed by its own close, which
// waits for three grace periods (perf_event_detach_bpf_prog,
// uprobe_unregister_sync, tracepoint_synchronize_unregister, the last two
// under the kernel's global event_mutex): 54-160 ms a probe on the
// development VM (kernel 6.18), one probe after another. gpuflame's ~100
// CUDA and NCCL uprobes then took seconds to leave after `record` ended,
// and every process that ran meanwhile still trapped on them (7.4 us a
// simulated all-reduce against 0.11 us). A uprobe_multi link removes all
// its breakpoints at once and waits for one grace period: 8-44 ms for
// 111 probes, untrapped within 1.5-29 ms (measured, 3 runs each).
//
// A program loaded for uprobe_multi cannot attach as a perf-event uprobe
// nor the other way round, so the choice is made once, before the BPF
// object loads (Supported()).
#ifndef GPUFLAME_PROFILER_PROBES_UPROBE_MULTI_H_
#define GPUFLAME_PROFILER_PROBES_UPROBE_MULTI_H_

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "base/scoped_fd.h"

namespace gpuflame::profiler {

inline constexpr uint32_t kBpfTraceUprobeMulti = 48;  // enum bpf_attach_type, uapi of 6.6

// Whether this kernel makes uprobe_multi links: a program loaded for them
// and a link asked on a directory, which such a kernel refuses with EBADF
// (as libbpf 1.3's own probe does). Cached after the first call.
bool UprobeMultiSupported();

struct MultiSite {
  uint64_t offset = 0;     // file offset of the probed instruction
  uint64_t cookie = 0;     // bpf_get_attach_cookie() there
  uint64_t semaphore = 0;  // file offset of a USDT-style semaphore the kernel raises; 0: none
};

// One link of |prog_fd| (loaded with expected attach type
// kBpfTraceUprobeMulti) at every site in |path|, return probes if
// |retprobe|, for process |pid| alone (its threads) or, pid 0, for every
// process. The kernel attaches all or none.
absl::StatusOr<base::ScopedFd> CreateUprobeMultiLink(int prog_fd, const std::string& path,
                                                     std::span<const MultiSite> sites, bool retprobe, pid_t pid);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROBES_UPROBE_MULTI_H_
