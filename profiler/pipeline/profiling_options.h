// What a profiling session collects and how it names frames: the settings
// `record` and `agent` share, declared and checked once. Each front end
// reads them from its own sources (flags; YAML, environment and flags) by
// the same keys and hands the struct to Session as it is.
#ifndef GPUFLAME_PROFILER_PIPELINE_PROFILING_OPTIONS_H_
#define GPUFLAME_PROFILER_PIPELINE_PROFILING_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "profiler/pipeline/guardrails.h"
#include "profiler/probes/bpf_probes.h"         // IoSpanOptions
#include "profiler/process/process_registry.h"  // TensorEvents

namespace gpuflame::profiler {

// Which events carry a copy of the user stack for DWARF unwinding. The
// values are the BPF program's `native_stacks` rodata (bpf/gpuflame_abi.h).
enum class NativeStacks : uint32_t {
  kOff = 0,     // Python frames only
  kDevice = 1,  // device-level allocations (cudaMalloc, cuMemCreate, ...)
  kAll = 2,     // every allocation, tensors too: 16 KB copied per event
};

const char* TensorEventsName(TensorEvents t);

struct ProfilingOptions {
  bool show_trampolines = true;          // hide_trampolines: false
  bool keep_interpreter_frames = false;  // CPython's own C frames in mixed stacks
  NativeStacks native_stacks = NativeStacks::kDevice;
  int cpu_hz = 97;            // CPU-time samples per second of CPU; 0: no CPU profile
  bool thread_names = false;  // thread_name label on CPU samples (series cardinality)
  bool kernel_time = true;    // kernel time through libgpuflame_cupti.so
  // CUPTI activity on all the time (exact kernel time), or duty-cycled by
  // the library, one period in N, records weighted N (record: exact; agent:
  // sampled). bpf/gpuflame_abi.h, gpuflame:kernel_time_exact.
  bool kernel_time_exact = true;
  // Every tensor allocation from libgpuflame_cupti.so, or a sample by bytes
  // scaled to unbiased estimates (record: exact; agent: sampled).
  // bpf/gpuflame_abi.h, gpuflame:tensor_exact.
  bool tensor_exact = true;
  // Sampled through the probes, a process's first seconds from its first
  // caching-allocator event are still exact (bpf/lib/tensor_sampling.bpf.h):
  // model load and KV cache. The injection library has its own start-up
  // (GPUFLAME_STARTUP_S in the workload, from cuInit).
  uint64_t tensor_startup_s = 30;
  // The probes on the CUDA synchronise calls (bpf/cuda_sync.bpf.h): two
  // probe hits and a record with a stack per call, taken only where
  // profiler/utilization joins them with the idle gaps (record with kernel
  // time). Off: the agent has no utilization to take them.
  bool sync_waits = false;
  // Attach those probes anyway, for NCCL's GPU-side hangs (a synchronise
  // call stuck after NCCL calls that returned once enqueued:
  // profiler/collectives/). Without sync_waits only processes that issued
  // NCCL calls send records (two per synchronise call); every other
  // process pays the two probe hits and a hash lookup per synchronise call.
  bool nccl_gpu_hangs = true;
  // Model-loading I/O spans for the timeline (record --timeline only; the
  // agent's flight recorder takes none: the hooks would run on every
  // syscall of every followed process all day, for spans that matter at
  // start-up). bpf/io_calls.bpf.h.
  IoSpanOptions io_spans;
  // Every CUDA launch, copy and memset call, entry to return, from the
  // injection library (gpuflame:api_batch): the timeline's. Off, the
  // library's callbacks record nothing.
  bool api_spans = false;
  // Where launch stacks are taken: in the library's CUPTI launch callbacks
  // (false), or by the launch route (true: uprobes on libcuda's launch
  // entry points in the library's launch windows, joined to CUPTI's records
  // of those calls; bpf/gpuflame_abi.h), which spares every launch CUPTI's
  // callback dispatch for the life of the process.
  bool launch_uprobes = false;
  TensorEvents tensor_events = TensorEvents::kAuto;
  // Machine-wide (the agent, `record` without a command): the first process
  // to map a CUDA, PyTorch or libpython file not yet covered waits until its
  // probes are attached, once per file (bpf/process_lifecycle.bpf.h).
  bool gate_new_libraries = true;
  // libgpuflame_cupti.so is needed in the workload (record loads it).
  bool NeedsInjection() const { return kernel_time || tensor_events != TensorEvents::kProbes; }
  // Where raw-address frames are looked up again by build ID (debug files,
  // unstripped copies) before each export.
  std::vector<std::string> binary_dirs = {"/usr/lib/debug"};
  // The BPF ring buffer records leave by, in KiB (a power of two): what a
  // burst of events may fill while the reader catches up. What it has no
  // room for is charged to each process's "[lost: ring buffer full]" frame.
  size_t ring_buffer_kb = 16384;
  // gpuflame's own CPU and memory budget (max_cpu in cores, max_memory_mb).
  GuardrailLimits guardrails;
};

// The configuration keys of ProfilingOptions ("native_stacks", "cpu_hz",
// "thread_names", "kernel_time", "hide_trampolines",
// "keep_interpreter_frames", "binaries", "max_cpu", "max_memory_mb",
// "tensor_events", "max_overhead", "kernel_activity", "tensor_sampling",
// "tensor_startup_s", "ring_buffer_kb", "launch_stacks"); flags
// are the same with dashes.
bool IsProfilingOption(absl::string_view key);

// Sets one option from its text form. Booleans take true/false, 1/0, yes/no;
// "binaries" a comma-separated list. The error names the key and the value
// and says what is wanted; callers prefix where it came from.
absl::Status SetProfilingOption(ProfilingOptions& options, absl::string_view key, absl::string_view value);

// The same options as command-line flags, for every command that profiles:
// --native-stacks M, --cpu-hz N, --thread-names, --no-kernel-time,
// --hide-trampolines, --keep-interpreter-frames, --binaries DIR (repeatable,
// or a comma-separated list; the first replaces the default), --max-cpu C,
// --max-memory-mb N, --tensor-events auto|probes|inprocess, --max-overhead P,
// --kernel-activity exact|sampled, --tensor-sampling exact|sampled,
// --tensor-startup-s N, --ring-buffer-kb N, --launch-stacks callbacks|uprobes.
class ProfilingFlags {
 public:
  explicit ProfilingFlags(ProfilingOptions& options) : options_(options) {}
  // Applies the flag at args[i] (and its value). Returns how many arguments
  // it took: 0 when args[i] is not a profiling flag.
  absl::StatusOr<size_t> Consume(const std::vector<std::string>& args, size_t i);
  // Help lines for these flags, aligned at |column|.
  static std::string Help(int column);

 private:
  ProfilingOptions& options_;
  bool binaries_given_ = false;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PIPELINE_PROFILING_OPTIONS_H_
