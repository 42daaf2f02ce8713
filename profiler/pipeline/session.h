// One profiling pipeline, two front ends (`record` and `agent`): BPF probes
// -> process registry -> event loop -> allocation tracker. Owns every piece
// and the order they are built and torn down in. Not thread-safe: the event
// loop thread owns it.
#ifndef GPUFLAME_PROFILER_PIPELINE_SESSION_H_
#define GPUFLAME_PROFILER_PIPELINE_SESSION_H_

#include <sys/types.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/probes/bpf_probes.h"
#include "profiler/pipeline/event_processor.h"
#include "profiler/resolve/frame_refresher.h"
#include "profiler/unwind/native_unwinder.h"
#include "profiler/process/process_registry.h"
#include "profiler/resolve/stack_resolver.h"
#include "symbolizer/elf_cache.h"
#include "symbolizer/native_symbolizer.h"

namespace gpuflame::profiler {

class Session {
 public:
  struct Options {
    bool system_wide = false;       // every CUDA process, not only targets
    bool show_trampolines = true;
    bool keep_interpreter_frames = false;
    int native_stacks = 1;  // 0 off, 1 device-level events, 2 every allocation
    size_t ring_bytes = 16u << 20;
    // Where raw-address frames are looked up again by build ID (debug files,
    // unstripped copies) before each export.
    std::vector<std::string> binary_dirs = {"/usr/lib/debug"};
    int cpu_hz = 97;            // CPU-time samples per second of CPU; 0: no CPU profile
    bool thread_names = false;  // label CPU samples with the thread's name
  };

  // Checks privileges and kernel support, loads and attaches the lifecycle
  // hooks. Errors are worded for the user.
  static absl::StatusOr<std::unique_ptr<Session>> Start(const Options& options);
  ~Session();

  // A running process named by the user (followed into its children).
  absl::Status AddTarget(pid_t pid);
  // A process we started and hold before exec: gated until probes are in place.
  absl::Status AddGatedChild(pid_t pid);
  // Waits up to |timeout_ms| for records and handles them.
  int Poll(int timeout_ms);
  // Hands what is still in the ring buffer to the event loop.
  void Drain();
  std::vector<std::string> TakeWarnings() { return registry_->TakeWarnings(); }

  EventProcessor& events() { return *events_; }
  const EventProcessor& events() const { return *events_; }
  ProcessRegistry& registry() { return *registry_; }
  const StackResolver& resolver() const { return *resolver_; }
  const NativeUnwinder& unwinder() const { return *unwinder_; }
  const symbolizer::NativeSymbolizer& native_symbols() const { return *native_; }
  std::array<uint64_t, GF_STAT_MAX> BpfStats() const { return probes_->ReadStats(); }
  // Names raw-address frames whose binaries or debug files can now be found;
  // call before building profiles. Returns how many were named.
  size_t RefreshFrames() { return refresher_->Refresh(events_->frames()); }
  const FrameRefresher& refresher() const { return *refresher_; }

  // Uprobe unregistration waits for an RCU grace period per probe (~100 ms
  // here): a child inherits the descriptors and drops them after we exit.
  static void DetachProbesInBackground();

 private:
  Session() = default;

  symbolizer::ElfCache elves_;
  std::unique_ptr<symbolizer::NativeSymbolizer> native_;
  std::unique_ptr<BpfProbes> probes_;
  std::unique_ptr<ProcessRegistry> registry_;
  std::unique_ptr<StackResolver> resolver_;
  std::unique_ptr<NativeUnwinder> unwinder_;
  std::unique_ptr<EventProcessor> events_;
  std::unique_ptr<FrameRefresher> refresher_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PIPELINE_SESSION_H_
