// Fuzz target for the first parser of untrusted bytes on the data path:
// EventProcessor::OnRecord, which decodes ring-buffer records (gf_event and
// its payload, bpf/gpuflame_abi.h), including GF_EV_TENSOR_BATCH records
// whose inner records a library inside the workload wrote: the workload
// controls those bytes entirely.
//
// Why a sequence: the decoder keeps state between records (stack
// definitions, then references to them; frees after allocs; a hook that goes
// live; ABI status; kernel launches joined with later activity), so one input
// is a run of records, each framed by a 2-byte length:
//
//   input  := frame*
//   frame  := u16 len (little-endian) + len bytes: one record, handed to
//             OnRecord; a frame cut short by the end of the input is handed
//             over as it is (a truncated record)
//           | u16 0xffff + u8 op: what the agent does between records
//             (kControl below: guardrails freeze new stacks, a window
//             flushes the kernel joiner, exited processes are retired, time
//             passes for out-of-memory episodes or for NCCL calls in flight)
//
// Each record is copied into a heap block of exactly its size, so that a read
// past its end is a heap overflow to AddressSanitizer rather than a quiet read
// of the next frame. After the last frame, the profiles are built from what
// the records left behind, so that a stack ID or counter the decoder got
// wrong shows up where it is used.
//
// Memory is bounded per input: each input gets a new EventProcessor (and
// symbolizer caches), input bytes past kMaxInput and frames past kMaxFrames
// are ignored. As in the unit tests there is no process registry (Python
// frames resolve to markers) and no unwinder (GF_EVF_USER_STACK records are
// decoded, not unwound); native frames of a pid that exists on the machine
// running the fuzzer are symbolized against that process, as in production.
//
// Built with -fsanitize=fuzzer, libFuzzer drives it (scripts/fuzz.sh);
// otherwise fuzz_main.cc does (ctest RecordFuzzerSmoke).
#include <sys/types.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "bpf/gpuflame_abi.h"
#include "profiler/aggregate/profile_builder.h"
#include "profiler/collectives/nccl_report.h"
#include "profiler/forensics/oom_report.h"
#include "profiler/pipeline/event_processor.h"
#include "profiler/resolve/stack_resolver.h"
#include "symbolizer/elf_cache.h"
#include "symbolizer/native_symbolizer.h"

namespace {

using gpuflame::profiler::BuildMemoryProfile;
using gpuflame::profiler::BuildTimeProfile;
using gpuflame::profiler::BuildOomProfile;
using gpuflame::profiler::BuildNcclProfile;
using gpuflame::profiler::EventProcessor;
using gpuflame::profiler::NcclHang;
using gpuflame::profiler::NcclHangEndLine;
using gpuflame::profiler::NcclHangLine;
using gpuflame::profiler::NcclJson;
using gpuflame::profiler::NcclLines;
using gpuflame::profiler::OomCapture;
using gpuflame::profiler::OomEpisodes;
using gpuflame::profiler::OomJson;
using gpuflame::profiler::StackResolver;
using gpuflame::profiler::TimeKind;

constexpr size_t kMaxInput = 1 << 20;
constexpr size_t kMaxFrames = 4096;
constexpr uint16_t kControl = 0xffff;  // no record is this long (the largest is < 20 KB)

// Control operations (the byte after a kControl length).
enum ControlOp : uint8_t {
  kToggleFrozen = 0,  // guardrails' last memory step on or off (EventProcessor::SetFrozen)
  kFlushJoiner = 1,   // a window closes: unsampled kernels are charged (KernelJoiner::Flush)
  kRetireExited = 2,  // the agent retires processes whose GF_EV_EXIT it saw (agent/retirement.cc)
  kOomTick = 3,       // time passes: out-of-memory episodes past their settle time end (OomEpisodes::Tick)
  kNcclTick = 4,      // time passes: NCCL calls outstanding past the threshold are hangs (NcclTracker::Tick)
  kControlOps = 5,
};

void BuildProfiles(const EventProcessor& events) {
  const absl::flat_hash_map<pid_t, std::string> comm;
  for (uint8_t domain : {uint8_t{GF_DOMAIN_GPU}, uint8_t{GF_DOMAIN_TORCH}})
    BuildMemoryProfile(events.stack_source(), events.tracker().counters(), domain, comm, std::nullopt, 0, 0);
  BuildTimeProfile(events.stack_source(), events.cpu(), events.cpu_period_ns(), events.cpu().totals(), TimeKind::kCpu,
                   comm, std::nullopt, 0, 0);
  BuildTimeProfile(events.stack_source(), events.kernels(), events.cpu_period_ns(), events.kernels().totals(),
                   TimeKind::kGpuKernel, comm, std::nullopt, 0, 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size = std::min(size, kMaxInput);
  gpuflame::symbolizer::ElfCache elves;
  gpuflame::symbolizer::NativeSymbolizer native(elves);
  StackResolver resolver(nullptr, native, {});
  EventProcessor events(nullptr, resolver);

  bool frozen = false;
  uint64_t last_ts = 0;
  absl::flat_hash_set<uint32_t> exited;
  size_t at = 0;
  for (size_t frames = 0; frames < kMaxFrames && size - at >= 2; frames++) {
    const uint16_t len = static_cast<uint16_t>(data[at] | (data[at + 1] << 8));
    at += 2;
    if (len == kControl) {
      if (at == size) break;
      switch (data[at++] % kControlOps) {
        case kToggleFrozen:
          frozen = !frozen;
          events.SetFrozen(frozen);
          break;
        case kFlushJoiner: events.joiner().Flush(last_ts); break;
        case kRetireExited:
          events.RetireProcesses(std::vector<pid_t>(exited.begin(), exited.end()));
          exited.clear();
          break;
        case kOomTick: events.oom().Tick(last_ts + OomEpisodes::kSettleNs); break;
        case kNcclTick: {
          events.nccl().Tick(last_ts + events.nccl().hang_threshold_ns());
          for (const NcclHang& h : events.nccl().TakeFound())
            NcclHangLine(h, events.stack_source(), nullptr, last_ts + events.nccl().hang_threshold_ns());
          for (const NcclHang& h : events.nccl().TakeEnded()) NcclHangEndLine(h);
          break;
        }
      }
      continue;
    }
    const size_t n = std::min<size_t>(len, size - at);
    // Exactly |n| bytes on the heap: a read past the record is caught.
    std::unique_ptr<uint8_t[]> record(new uint8_t[n]);
    if (n) std::memcpy(record.get(), data + at, n);
    at += n;
    events.OnRecord(std::span<const uint8_t>(record.get(), n));
    if (n >= sizeof(gf_event)) {
      gf_event ev;
      std::memcpy(&ev, record.get(), sizeof(ev));
      last_ts = std::max(last_ts, ev.ts_ns);
      if (ev.kind == GF_EV_EXIT) exited.insert(ev.pid);
    }
  }
  events.joiner().Flush(last_ts, /*everything=*/true);
  BuildProfiles(events);
  // What the out-of-memory captures say, as `record` writes them.
  events.oom().FinishAll();
  for (const OomCapture& c : events.oom().Take()) {
    BuildOomProfile(c, events.stack_source());
    OomJson(c, events.frames(), "gpu_oom.pb.gz");
  }
  // What the NCCL tracker says, as `record` writes it.
  events.nccl().Finish(last_ts);
  BuildNcclProfile(events.nccl(), events.stack_source(), {}, 0, 0);
  NcclJson(events.nccl(), events.stack_source(), {}, 0);
  NcclLines(events.nccl());
  return 0;
}
