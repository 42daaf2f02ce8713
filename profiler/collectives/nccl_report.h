// What the NCCL tracker found, as record shows it: a hang's live lines on
// the terminal (found, then over), the `nccl` profile (time in NCCL calls by
// stack: in Grafana, the flame graph of where ranks spend their time in
// NCCL), and summary.json's `nccl` entry. Any thread that owns the tracker's
// data (record's loop, after the worker's records are in).
#ifndef GPUFLAME_PROFILER_COLLECTIVES_NCCL_REPORT_H_
#define GPUFLAME_PROFILER_COLLECTIVES_NCCL_REPORT_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profiler/aggregate/profile.h"
#include "profiler/aggregate/profile_builder.h"
#include "profiler/collectives/nccl_tracker.h"

namespace gpuflame::profiler {

inline constexpr const char* kNcclProfile = "nccl";

// Says what state a process is in ("stopped", "running", "gone"; "" when
// unknown): for a rank a hang waits on. Supplied by the front end.
using ProcessStateFn = std::function<std::string(pid_t)>;

// "NCCL hang #1: pid 41 rank 0 of 2 stuck for 2.0 s in ncclSend to peer 1
// (4.0 MiB, float32 x 1048576) on communicator 0x55d0 (id 1f2e...), called
// from Trainer > step › Comm > exchange › send; waiting for rank 1 (pid 42,
// stopped): it has not entered the matching ncclRecv (#3)", at |now_ns|.
std::string NcclHangLine(const NcclHang& h, StackSource source, const ProcessStateFn& state, uint64_t now_ns);
// "NCCL hang #1 over: ncclSend of pid 41 (rank 0 of 2) lasted 5.0 s, returned ncclSuccess".
std::string NcclHangEndLine(const NcclHang& h);

// The `nccl` profile: calls, time (entry to return, ns), bytes named by
// the calls (count x the datatype's size) and the GPU time of their kernels
// per stack, the API as the leaf;
// none when no NCCL call was seen.
std::optional<Profile> BuildNcclProfile(const NcclTracker& t, StackSource source,
                                        const absl::flat_hash_map<pid_t, std::string>& comm, int64_t time_nanos,
                                        int64_t duration_nanos);

// summary.json's `nccl`: the threshold, counts (every drop), totals per
// operation (with its kernels' GPU time and bus bandwidth on it, where
// kernel time is on; `gpu_time`: the join's counts), the communicators and their ranks, and every hang with its
// stack and the ranks it waited for. |start_ns|: the recording's start
// (CLOCK_MONOTONIC), times are said from it.
std::string NcclJson(const NcclTracker& t, StackSource source, const absl::flat_hash_map<pid_t, std::string>& comm,
                     uint64_t start_ns);

// The terminal's end-of-run lines: totals per operation, each hang.
std::vector<std::string> NcclLines(const NcclTracker& t);

// Bus bandwidth on GPU time, bytes per second: the bus bytes of the calls
// whose kernels' records came over those kernels' GPU time (nccl-tests'
// busBw, with the GPU's time instead of the host's); none where not known.
std::optional<double> NcclBusBandwidth(const NcclGpuTotals& g);

// "1f2e3d4c5b6a7988" + "..." : the communicator's ID hash as 32 hex digits (hi, lo).
std::string NcclCommIdHex(const NcclCommId& id);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_COLLECTIVES_NCCL_REPORT_H_
