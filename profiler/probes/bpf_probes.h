// Owns the loaded BPF object: its maps, its links and the ring buffer.
// open -> size/rodata -> load -> attach lifecycle hooks; library probes are
// attached later, per file, as processes map CUDA libraries. Every kernel
// resource is released by the destructor. Not thread-safe: event loop only.
#ifndef GPUFLAME_PROFILER_PROBES_BPF_PROBES_H_
#define GPUFLAME_PROFILER_PROBES_BPF_PROBES_H_

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bpf/gpuflame_abi.h"
#include "profiler/probes/probe_table.h"

struct gpuflame_bpf;
struct ring_buffer;
struct bpf_link;

namespace gpuflame::profiler {

using RecordHandler = std::function<void(std::span<const uint8_t>)>;

class BpfProbes {
 public:
  struct Options {
    bool filter_targets = true;       // only processes in the targets map
    size_t ring_bytes = 16u << 20;    // power of two
    bool native_fallback = true;      // frame-pointer stacks for threads without Python
    int native_stacks = 1;            // stack copies for DWARF: 0 off, 1 device level, 2 all
  };

  static absl::StatusOr<std::unique_ptr<BpfProbes>> Load(const Options& options,
                                                         RecordHandler handler);
  ~BpfProbes();
  BpfProbes(const BpfProbes&) = delete;
  BpfProbes& operator=(const BpfProbes&) = delete;

  // Attaches |program| at |offset| in the file at |path| for every process
  // (pid -1): uprobes live on the inode, so processes that map the same file
  // later are covered without another attach.
  absl::Status AttachUprobe(const std::string& path, uint64_t offset, ProbeProgram program,
                            bool retprobe, uint64_t cookie);
  absl::Status AttachUsdt(const std::string& path, const char* provider, const char* name,
                          ProbeProgram program);

  // One cpu-clock perf event per online CPU, |hz| samples per second of CPU
  // time, feeding the cpu_sample program (which keeps profiled processes only).
  absl::Status StartCpuSampling(int hz);

  absl::Status SetTarget(pid_t pid, uint32_t flags);
  void RemoveTarget(pid_t pid);
  absl::Status SetPython(pid_t pid, const gf_py_proc& proc);
  void RemovePython(pid_t pid);

  // Delivers ready records to the handler; returns how many (negative: error).
  int Poll(int timeout_ms);
  std::array<uint64_t, GF_STAT_MAX> ReadStats() const;
  size_t link_count() const { return links_.size(); }

 private:
  BpfProbes() = default;
  static int OnRecord(void* ctx, void* data, size_t size);

  gpuflame_bpf* skel_ = nullptr;
  ring_buffer* ring_ = nullptr;
  std::vector<bpf_link*> links_;
  RecordHandler handler_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROBES_BPF_PROBES_H_
