// gpuflame's own cost inside the profiled processes: how often each of its
// BPF programs ran and for how long, from the kernel's per-program run-time
// statistics (struct bpf_prog_info's run_cnt and run_time_ns).
//
// Why the kernel's figures: a BPF program runs on the profiled thread, in its
// time slice, so what it costs is charged to the workload, not to gpuflame's
// own CPU time (which Guardrails reads). The kernel counts runs and
// nanoseconds per program only while run-time statistics are on: while a
// descriptor from BPF_ENABLE_STATS (Linux 5.8+, CAP_SYS_ADMIN) is open, or
// while the sysctl kernel.bpf_stats_enabled is 1. ProgramStats::Enable holds
// such a descriptor for as long as it lives. While stats are on, every BPF
// program on the host, ours and others', pays two clock reads per run (tens
// of ns): the price of the measurement, the same for every mode compared.
//
// What the figures leave out: a program's run time starts after the kernel
// has taken the uprobe's trap (the int3, the entry into the kernel, the
// uprobe lookup; for a uretprobe also the return trampoline) and ends before
// the return to user space, so the trap and the uprobe machinery are not in
// it. bench/overhead_harness measures the whole added time per event.
//
// Threads. Enable and the destructor: any thread. Read walks the libbpf
// object (bpf_object__for_each_program), which is not safe for concurrent
// use, so it is called only from the thread that owns the object (the
// pipeline's worker for Session's BpfProbes); it makes one syscall
// (BPF_OBJ_GET_INFO_BY_FD) per loaded program and nothing else.
#ifndef GPUFLAME_PROFILER_PROBES_PROGRAM_STATS_H_
#define GPUFLAME_PROFILER_PROBES_PROGRAM_STATS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/scoped_fd.h"

struct bpf_object;

namespace gpuflame::profiler {

// The counters of one program, as the kernel reports them: cumulative since
// the program was loaded, counted only while stats were on.
//
// machine_wide: a program on a kernel tracepoint (tp_btf: every syscall's
// exit, every fork, exit and signal of the host), which runs in every process
// and returns at its first test for all but the few it watches. Its time is
// the node's, not the profiled processes': a budget on their share must not
// count it, or a busy node's syscalls shed the profiles of an idle workload.
// The others (uprobes, USDT, the per-CPU sampler) do their work in profiled
// processes; their early returns elsewhere are a few tens of ns and are
// counted with them, erring on the side of gpuflame's cost.
struct ProgramRunStats {
  std::string name;  // the program's function name in bpf/ (bpf_program__name)
  uint64_t run_cnt = 0;
  uint64_t run_time_ns = 0;
  bool machine_wide = false;
};

// One program's cost over an interval: the difference of two reads.
struct ProgramCost {
  std::string name;
  uint64_t hits = 0;
  uint64_t ns_total = 0;
  bool machine_wide = false;  // as ProgramRunStats::machine_wide
  double ns_per_hit() const { return hits ? static_cast<double>(ns_total) / static_cast<double>(hits) : 0; }
};

// |after| - |before|, program by program (matched by name), in |after|'s
// order. A program absent from |before| (loaded in between) or whose
// counters went backwards (another object under the same name) counts from
// zero. With an empty |before|: the cost since each program was loaded.
std::vector<ProgramCost> ProgramCostBetween(std::span<const ProgramRunStats> before,
                                            std::span<const ProgramRunStats> after);
// The sum over programs (name "total"), or over the machine-wide ones alone.
ProgramCost TotalCost(std::span<const ProgramCost> costs);
ProgramCost MachineWideCost(std::span<const ProgramCost> costs);
// The run time of the programs that work in the profiled processes (not
// machine_wide): what a budget on gpuflame's share of their CPU counts.
uint64_t InProcessRunTimeNs(std::span<const ProgramRunStats> programs);

class ProgramStats {
 public:
  // Turns the kernel's run-time statistics on for as long as the returned
  // owner lives. Never fails: where the kernel refuses (before 5.8, without
  // CAP_SYS_ADMIN), available() is false and unavailable_reason() says why,
  // and everything else works as before.
  static ProgramStats Enable();

  // Off: "not enabled". Move-only (it owns the stats descriptor).
  ProgramStats() : reason_("not enabled") {}
  ProgramStats(ProgramStats&&) noexcept = default;
  ProgramStats& operator=(ProgramStats&&) noexcept = default;

  bool available() const { return fd_.valid(); }
  const std::string& unavailable_reason() const { return reason_; }
  // "on", or "unavailable: <reason>": what summary.json says.
  std::string Describe() const;

  // The counters of every loaded program of |object| (programs that were not
  // loaded, autoload off, are skipped; so is one whose info cannot be read).
  // Empty when stats are unavailable. The owner's thread only (see above).
  std::vector<ProgramRunStats> Read(const bpf_object* object) const;

 private:
  base::ScopedFd fd_;
  std::string reason_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROBES_PROGRAM_STATS_H_
