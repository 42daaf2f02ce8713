#include "profiler/collectives/nccl_report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/human_units.h"
#include "base/json_string.h"
#include "bpf/gpuflame_abi.h"
#include "profiler/collectives/nccl_api.h"
#include "profiler/collectives/nccl_straggler_report.h"
#include "profiler/forensics/stack_names.h"
#include "profiler/probes/probe_table.h"

namespace gpuflame::profiler {
using base::HumanBytes;

namespace {

// absl's StrCat takes its own string_view, not std::string_view.
std::string Api(uint16_t api) { return std::string(ApiName(api)); }

double Seconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

const std::vector<FrameId>* FramesOf(StackId id, StackSource source) {
  if (id == StackTable::kNone || id >= source.stacks.size()) return nullptr;
  const std::vector<FrameId>& f = source.stacks.Get(id).frames;
  return f.empty() ? nullptr : &f;
}

// "ncclSend to peer 1", "ncclBroadcast from root 0", "ncclGroupEnd of ncclSend, ncclRecv".
std::string Operation(const NcclHang& h) {
  std::string out(Api(h.api));
  if (IsNcclPointToPoint(h.api) && h.peer >= 0)
    absl::StrAppend(&out, h.api == GF_API_NCCL_SEND ? " to peer " : " from peer ", h.peer);
  if (h.api == GF_API_NCCL_BROADCAST && h.peer >= 0) absl::StrAppend(&out, " from root ", h.peer);
  if (!h.grouped.empty()) {
    out += " of";
    for (size_t i = 0; i < h.grouped.size() && i < 8; i++) absl::StrAppend(&out, i ? ", " : " ", Api(h.grouped[i]));
    if (h.grouped.size() > 8) absl::StrAppend(&out, ", ... (", h.grouped.size(), " calls)");
  }
  return out;
}

std::string RankPart(const NcclHang& h) {
  return h.rank >= 0 ? absl::StrCat("rank ", h.rank, " of ", h.nranks) : std::string("rank unknown");
}

std::string Ordinal(uint64_t n) {
  const char* suffix = (n % 100 >= 11 && n % 100 <= 13) ? "th"
                       : n % 10 == 1                    ? "st"
                       : n % 10 == 2                    ? "nd"
                       : n % 10 == 3                    ? "rd"
                                                        : "th";
  return absl::StrCat(n, suffix);
}

std::string MatchingCall(const NcclHang& h) {
  if (GF_API_IS_NCCL_INIT(h.api)) return "ncclCommInitRank";
  if (!h.grouped.empty()) return "calls";
  return std::string(NcclMatchingCall(h.api));
}

const char* OutcomeName(NcclHang::Outcome o) {
  switch (o) {
    case NcclHang::Outcome::kReturned: return "returned";
    case NcclHang::Outcome::kProcessEnded: return "process ended";
    case NcclHang::Outcome::kThreadEnded: return "thread ended";
    default: return "still stuck when recording ended";
  }
}

bool Gpu(const NcclHang& h) { return h.side == NcclHang::Side::kGpu; }

// The synchronise call's result: the runtime's cudaError_t or the driver's
// CUresult (0: success in both).
std::string SyncResultName(uint16_t api, uint32_t result) {
  const bool runtime =
      api == GF_API_CUDA_STREAM_SYNC || api == GF_API_CUDA_DEVICE_SYNC || api == GF_API_CUDA_EVENT_SYNC;
  if (result == 0) return runtime ? "cudaSuccess" : "CUDA_SUCCESS";
  return absl::StrCat(runtime ? "cudaError " : "CUresult ", result);
}

std::string ResultName(const NcclHang& h) {
  return Gpu(h) ? SyncResultName(h.sync_api, h.result) : NcclResultName(h.result);
}

// "on stream 0x5000", "on event 0x...", "" (the whole device or context).
std::string WaitedFor(const NcclHang& h) {
  if (h.sync_api == GF_API_CUDA_DEVICE_SYNC || h.sync_api == GF_API_CU_CTX_SYNC) return "";
  const bool event = h.sync_api == GF_API_CUDA_EVENT_SYNC || h.sync_api == GF_API_CU_EVENT_SYNC;
  return absl::StrFormat(" on %s 0x%x", event ? "event" : "stream", h.sync_object);
}

// What is stuck, of whom: "ncclSend to peer 1 of pid 41 (rank 0 of 2)", or
// "cudaStreamSynchronize (GPU side, after ncclSend to peer 1) of pid 41 (rank 0 of 2)".
std::string Subject(const NcclHang& h) {
  if (!Gpu(h)) return absl::StrCat(Operation(h), " of pid ", h.pid, " (", RankPart(h), ")");
  return absl::StrCat(Api(h.sync_api), " (GPU side, after ", Operation(h), ") of pid ", h.pid, " (", RankPart(h), ")");
}

// "ncclSend to peer 1 (4.00 MiB, float32 x 1048576) on communicator 0x55d0 (id 1f2e...)".
std::string CallPart(const NcclHang& h) {
  std::string out = Operation(h);
  if (h.bytes)
    absl::StrAppend(&out, " (", HumanBytes(static_cast<int64_t>(std::min<uint64_t>(h.bytes, INT64_MAX))),
                    h.grouped.empty() ? absl::StrCat(", ", NcclTypeName(h.datatype), " x ", h.count) : "", ")");
  if (h.comm) absl::StrAppend(&out, absl::StrFormat(" on communicator 0x%x", h.comm));
  if (h.comm_id) absl::StrAppend(&out, " (id ", NcclCommIdHex(*h.comm_id).substr(0, 16), ")");
  return out;
}

}  // namespace

std::string NcclCommIdHex(const NcclCommId& id) { return absl::StrFormat("%016x%016x", id.hi, id.lo); }

std::optional<double> NcclBusBandwidth(const NcclGpuTotals& g) {
  if (!g.bus_nanos || !g.bus_bytes) return std::nullopt;
  return static_cast<double>(g.bus_bytes) / Seconds(g.bus_nanos);
}

namespace {

// An operation's GPU side in summary.json: null where no kernel of it was joined.
std::string GpuJson(const NcclGpuTotals& g) {
  if (!g.nanos) return "null";
  const std::optional<double> bw = NcclBusBandwidth(g);
  return absl::StrCat("{\"calls\": ", g.calls, ", \"seconds\": ", absl::StrFormat("%.6f", Seconds(g.nanos)),
                      ", \"bytes\": ", g.bytes, ", \"bus_bytes\": ", g.bus_bytes,
                      ", \"bus_bandwidth_gb_per_s\": ", bw ? absl::StrFormat("%.3f", *bw / 1e9) : "null", "}");
}

// "; GPU 1.536 ms in 6 calls, bus 4.10 GB/s" (nothing where no kernel was joined).
std::string GpuPart(const NcclGpuTotals& g) {
  if (!g.nanos) return "";
  const std::optional<double> bw = NcclBusBandwidth(g);
  return absl::StrCat(absl::StrFormat("; GPU %.3f ms in %d calls", static_cast<double>(g.nanos) / 1e6, g.calls),
                      bw ? absl::StrFormat(", bus %.2f GB/s", *bw / 1e9) : "");
}

}  // namespace

namespace {

// The GPU side's head: the synchronise call that waits, then the NCCL call
// blamed. "NCCL hang #2 (GPU side): pid 41 rank 0 of 2 stuck for 1.0 s in
// cudaStreamSynchronize on stream 0x5000, called from ...; the first of its
// NCCL calls on that stream a rank has not matched (they return once
// enqueued): ncclSend to peer 1 (...), called from ..., 1.2 s before".
std::string GpuHead(const NcclHang& h, StackSource source, uint64_t now_ns) {
  std::string out =
      absl::StrFormat("NCCL hang #%d (GPU side): pid %d %s stuck for %.1f s in %s%s", h.number, h.pid, RankPart(h),
                      Seconds(now_ns > h.start_ns ? now_ns - h.start_ns : 0), Api(h.sync_api), WaitedFor(h));
  if (h.tid != static_cast<uint32_t>(h.pid)) absl::StrAppend(&out, " (thread ", h.tid, ")");
  if (const std::vector<FrameId>* f = FramesOf(h.sync_stack, source))
    absl::StrAppend(&out, ", called from ", ShortStack(*f, source.frames, 4));
  const bool on_stream = h.sync_api == GF_API_CUDA_STREAM_SYNC || h.sync_api == GF_API_CU_STREAM_SYNC;
  const char* where = h.same_stream ? "on that stream"
                      : on_stream   ? "on any stream (none on that one)"
                                    : "on any stream";
  if (h.absent.empty())
    absl::StrAppend(&out, "; every rank seen has entered the matching call of each of its recent NCCL calls ", where,
                    " (they return once enqueued), the last: ");
  else
    absl::StrAppend(&out, "; the first of its NCCL calls ", where,
                    " (they return once enqueued) that a rank has not matched: ");
  out += CallPart(h);
  if (const std::vector<FrameId>* f = FramesOf(h.stack, source))
    absl::StrAppend(&out, ", called from ", ShortStack(*f, source.frames, 4));
  absl::StrAppend(
      &out, absl::StrFormat(", %.1f s before the wait", Seconds(h.start_ns > h.call_ns ? h.start_ns - h.call_ns : 0)));
  if (h.unmatched_calls > 1) absl::StrAppend(&out, " (", h.unmatched_calls, " of its recent calls not matched)");
  return out;
}

}  // namespace

std::string NcclHangLine(const NcclHang& h, StackSource source, const ProcessStateFn& state, uint64_t now_ns) {
  std::string out;
  if (Gpu(h)) {
    out = GpuHead(h, source, now_ns);
    if (h.absent.empty()) {
      absl::StrAppend(&out, h.comm_id ? ": the wait may be the GPU's own work, not a peer"
                                      : ": its communicator's init was not seen: the ranks it waits for are not known");
      return out;
    }
  } else {
    out = absl::StrFormat("NCCL hang #%d: pid %d %s stuck for %.1f s in %s", h.number, h.pid, RankPart(h),
                          Seconds(now_ns > h.start_ns ? now_ns - h.start_ns : 0), Operation(h));
    if (h.bytes)
      absl::StrAppend(&out, " (", HumanBytes(static_cast<int64_t>(std::min<uint64_t>(h.bytes, INT64_MAX))),
                      h.grouped.empty() ? absl::StrCat(", ", NcclTypeName(h.datatype), " x ", h.count) : "", ")");
    if (h.comm) absl::StrAppend(&out, absl::StrFormat(" on communicator 0x%x", h.comm));
    if (h.comm_id) absl::StrAppend(&out, " (id ", NcclCommIdHex(*h.comm_id).substr(0, 16), ")");
    if (const std::vector<FrameId>* f = FramesOf(h.stack, source))
      absl::StrAppend(&out, ", called from ", ShortStack(*f, source.frames, 4));
  }
  if (h.absent.empty()) {
    absl::StrAppend(&out, h.comm_id || GF_API_IS_NCCL_INIT(h.api)
                              ? "; every other rank seen has entered the matching call"
                              : "; its communicator's init was not seen: the ranks it waits for are not known");
    return out;
  }
  out += "; waiting for";
  for (size_t i = 0; i < h.absent.size() && i < 8; i++) {
    const NcclAbsentRank& a = h.absent[i];
    absl::StrAppend(&out, i ? "," : "", " rank ", a.rank);
    if (a.pid == 0) {
      // Which process will be that rank is known only from its init call.
      out += " (no process followed here has joined as that rank: another node, not started, or not in its init yet)";
      continue;
    }
    std::string st = state ? state(a.pid) : "";
    absl::StrAppend(&out, " (pid ", a.pid, st.empty() ? "" : ", ", st, ")");
  }
  if (h.absent.size() > 8) absl::StrAppend(&out, " and ", h.absent.size() - 8, " more");
  if (GF_API_IS_NCCL_INIT(h.api)) {
    absl::StrAppend(&out, h.absent.size() == 1 ? ": it has" : ": they have", " not entered ", MatchingCall(h));
  } else {
    absl::StrAppend(&out, h.absent.size() == 1 ? ": it has" : ": they have", " not entered the matching ",
                    MatchingCall(h));
    if (h.grouped.empty() && h.sequence) {
      if (IsNcclCollective(h.api)) absl::StrAppend(&out, " (collective #", h.sequence, " on the communicator)");
      else if (h.rank >= 0)
        absl::StrAppend(&out, " (the ", Ordinal(h.sequence), h.api == GF_API_NCCL_SEND ? " from rank " : " to rank ",
                        h.rank, ")");
    }
  }
  return out;
}

std::string NcclHangEndLine(const NcclHang& h) {
  const double lasted = Seconds(h.end_ns > h.start_ns ? h.end_ns - h.start_ns : 0);
  if (h.outcome == NcclHang::Outcome::kProcessEnded)
    return absl::StrFormat("NCCL hang #%d over: %s ended with its process after %.1f s", h.number, Subject(h), lasted);
  if (h.outcome == NcclHang::Outcome::kThreadEnded)
    return absl::StrFormat("NCCL hang #%d over: %s ended with its thread %d after %.1f s; the process lives on",
                           h.number, Subject(h), h.tid, lasted);
  return absl::StrFormat("NCCL hang #%d over: %s lasted %.1f s, returned %s", h.number, Subject(h), lasted,
                         ResultName(h));
}

std::optional<Profile> BuildNcclProfile(const NcclTracker& t, StackSource source,
                                        const absl::flat_hash_map<pid_t, std::string>& comm, int64_t time_nanos,
                                        int64_t duration_nanos) {
  if (t.stats().calls == 0) return std::nullopt;
  Profile p;
  p.name = kNcclProfile;
  // In Grafana: nccl:time:nanoseconds:time:nanoseconds, the CPU threads'
  // time inside NCCL calls by stack; calls and bytes beside it; and
  // nccl:gpu_time:nanoseconds:time:nanoseconds, the GPU time of the
  // kernels each call launched (a group's: its ncclGroupEnd's).
  p.sample_types = {{"calls", "count"}, {"time", "nanoseconds"}, {"bytes", "bytes"}, {"gpu_time", "nanoseconds"}};
  p.default_sample_type = "time";
  p.period_type = {"time", "nanoseconds"};
  p.period = 1;  // every call: no sampling
  p.time_nanos = time_nanos;
  p.duration_nanos = duration_nanos;
  SampleMaker make(source, comm, p);
  std::vector<std::pair<StackId, NcclStackTotals>> rows(t.totals().begin(), t.totals().end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [id, totals] : rows) {
    if (id == StackTable::kNone || id >= source.stacks.size() || source.stacks.Get(id).frames.empty()) continue;
    Sample s = make.Make(source.stacks.Get(id));
    s.values = {static_cast<int64_t>(totals.calls), static_cast<int64_t>(std::min<uint64_t>(totals.nanos, INT64_MAX)),
                static_cast<int64_t>(std::min<uint64_t>(totals.bytes, INT64_MAX)),
                static_cast<int64_t>(std::min<uint64_t>(totals.gpu_nanos, INT64_MAX))};
    p.samples.push_back(std::move(s));
  }
  p.comments.push_back(
      "gpuflame: time is each NCCL call's, from entry to return on the calling CPU thread; NCCL's collectives return "
      "once enqueued on their stream, so on a GPU this is enqueue and blocking time, not transfer time");
  p.comments.push_back(
      "gpuflame: bytes are the count each call names times its datatype's size (all-gather: each "
      "rank's part; reduce-scatter: each rank's result)");
  p.comments.push_back(
      "gpuflame: gpu_time is the GPU time of the NCCL kernels each call launched (CUPTI activity, joined by "
      "correlation ID); a group's kernels launch at its ncclGroupEnd and are charged to it");
  if (t.stats().gpu_records_not_joined)
    p.comments.push_back(absl::StrFormat(
        "gpuflame: %d NCCL kernel records (%.6f s of GPU time) were not joined to a call and are not in gpu_time",
        t.stats().gpu_records_not_joined, Seconds(t.stats().gpu_nanos_not_joined)));
  if (t.stats().unfinished)
    p.comments.push_back(absl::StrCat("gpuflame: ", t.stats().unfinished,
                                      " calls were still in flight when recording ended: charged up to its end"));
  return p;
}

std::string NcclJson(const NcclTracker& t, StackSource source, const absl::flat_hash_map<pid_t, std::string>& comm,
                     uint64_t start_ns) {
  const NcclStats& s = t.stats();
  auto since = [&](uint64_t ns) { return absl::StrFormat("%.3f", Seconds(ns > start_ns ? ns - start_ns : 0)); };
  std::string out =
      absl::StrFormat("{\"profile\": %s, \"hang_threshold_seconds\": %.3f",
                      s.calls ? absl::StrCat("\"", kNcclProfile, ".pb.gz\"") : "null", Seconds(t.hang_threshold_ns()));
  absl::StrAppend(
      &out, ", \"calls\": ", s.calls, ", \"returns\": ", s.returns,
      ", \"returns_without_call\": ", s.returns_without_call, ", \"calls_without_return\": ", s.calls_without_return,
      ", \"failed_calls\": ", s.failed_calls, ", \"unfinished_calls\": ", s.unfinished,
      ", \"calls_on_unknown_communicators\": ", s.unknown_communicator_calls,
      ", \"unknown_datatypes\": ", s.unknown_datatypes, ", \"synchronise_calls_entered\": ", s.sync_entries,
      ", \"calls_ended_with_thread\": ", s.ended_with_thread,
      ", \"dropped\": {\"communicators\": ", s.dropped_communicators, ", \"ranks\": ", s.dropped_ranks,
      ", \"group_calls\": ", s.dropped_group_calls, ", \"in_flight\": ", s.dropped_in_flight,
      ", \"synchronise_calls\": ", s.dropped_syncs, ", \"processes_recent_calls\": ", s.dropped_recent_processes,
      ", \"hangs\": ", s.hangs_not_kept, "}, \"gpu_hangs\": ", s.gpu_hangs);
  absl::StrAppend(&out, ", \"gpu_time\": {\"launches\": ", s.gpu_launches,
                  ", \"launches_in_other_calls\": ", s.gpu_launches_other_calls,
                  ", \"launches_dropped\": ", s.dropped_gpu_launches,
                  ", \"launches_without_record\": ", s.gpu_launches_without_record,
                  ", \"launches_replaced\": ", s.gpu_launches_replaced, ", \"records\": ", s.gpu_records,
                  ", \"records_not_joined\": ", s.gpu_records_not_joined,
                  ", \"seconds_not_joined\": ", absl::StrFormat("%.6f", Seconds(s.gpu_nanos_not_joined)),
                  ", \"kernel_names_dropped\": ", s.dropped_kernel_names, "}");
  out += ", \"by_operation\": [";
  bool first = true;
  for (size_t i = 0; i < NcclTracker::kApis; i++) {
    const NcclStackTotals& o = t.by_api()[i];
    if (!o.calls) continue;
    const NcclGpuTotals& g = t.gpu_by_api()[i];
    absl::StrAppend(&out, first ? "" : ", ", "{\"operation\": \"",
                    Api(static_cast<uint16_t>(GF_API_NCCL_ALL_REDUCE + i)), "\", \"calls\": ", o.calls,
                    ", \"seconds\": ", absl::StrFormat("%.6f", Seconds(o.nanos)), ", \"bytes\": ", o.bytes,
                    ", \"gpu\": ", GpuJson(g), "}");
    first = false;
  }
  out += "], \"communicators\": [";
  std::vector<const NcclCommunicator*> comms;
  for (const auto& [id, c] : t.communicators()) comms.push_back(&c);
  std::sort(comms.begin(), comms.end(), [](const NcclCommunicator* a, const NcclCommunicator* b) {
    return std::pair{a->id.hi, a->id.lo} < std::pair{b->id.hi, b->id.lo};
  });
  for (size_t i = 0; i < comms.size(); i++) {
    const NcclCommunicator& c = *comms[i];
    absl::StrAppend(&out, i ? ", " : "", "{\"id\": \"", NcclCommIdHex(c.id), "\", \"nranks\": ", c.nranks,
                    ", \"ranks\": [");
    std::vector<const NcclRank*> ranks;
    for (const auto& [r, state] : c.ranks) ranks.push_back(&state);
    std::sort(ranks.begin(), ranks.end(), [](const NcclRank* a, const NcclRank* b) { return a->rank < b->rank; });
    for (size_t j = 0; j < ranks.size(); j++) {
      const NcclRank& r = *ranks[j];
      uint64_t sends = 0, recvs = 0;
      for (const auto& [peer, n] : r.sends_to) sends += n;
      for (const auto& [peer, n] : r.recvs_from) recvs += n;
      auto name = comm.find(r.pid);
      absl::StrAppend(&out, j ? ", " : "", "{\"rank\": ", r.rank, ", \"pid\": ", r.pid,
                      ", \"process\": ", base::JsonString(name == comm.end() ? "" : name->second),
                      ", \"communicator\": \"", absl::StrFormat("0x%x", r.comm),
                      "\", \"initialized\": ", r.ready ? "true" : "false", ", \"collectives\": ", r.collectives,
                      ", \"sends\": ", sends, ", \"recvs\": ", recvs, "}");
    }
    out += "]}";
  }
  out += "], \"hangs\": [";
  bool first_hang = true;
  for (const auto& [number, h] : t.hangs()) {
    const std::vector<FrameId>* f = FramesOf(h.stack, source);
    auto name = comm.find(h.pid);
    absl::StrAppend(&out, first_hang ? "\n    " : ",\n    ");
    first_hang = false;
    absl::StrAppend(
        &out, "{\"number\": ", h.number, ", \"side\": \"", Gpu(h) ? "gpu" : "call", "\", \"pid\": ", h.pid,
        ", \"tid\": ", h.tid, ", \"process\": ", base::JsonString(name == comm.end() ? "" : name->second),
        ", \"operation\": \"", Api(h.api), "\", \"rank\": ", h.rank >= 0 ? absl::StrCat(h.rank) : "null",
        ", \"nranks\": ", h.nranks ? absl::StrCat(h.nranks) : "null",
        ", \"peer\": ", IsNcclPointToPoint(h.api) && h.peer >= 0 ? absl::StrCat(h.peer) : "null",
        ", \"root\": ", h.api == GF_API_NCCL_BROADCAST && h.peer >= 0 ? absl::StrCat(h.peer) : "null",
        ", \"bytes\": ", h.bytes, ", \"count\": ", h.count, ", \"datatype\": ",
        h.grouped.empty() && (IsNcclCollective(h.api) || IsNcclPointToPoint(h.api))
            ? base::JsonString(NcclTypeName(h.datatype))
            : "null",
        ", \"reduction\": ", h.op != GF_NCCL_NO_OP ? base::JsonString(NcclOpName(h.op)) : "null", ", \"stream\": \"",
        absl::StrFormat("0x%x", h.stream), "\"", ", \"communicator\": \"", absl::StrFormat("0x%x", h.comm),
        "\", \"communicator_id\": ", h.comm_id ? absl::StrCat("\"", NcclCommIdHex(*h.comm_id), "\"") : "null",
        ", \"sequence\": ", h.sequence, ", \"grouped\": [");
    for (size_t j = 0; j < h.grouped.size(); j++) absl::StrAppend(&out, j ? ", " : "", "\"", Api(h.grouped[j]), "\"");
    absl::StrAppend(&out, "], \"stack\": ", f ? base::JsonString(FoldedStack(*f, source.frames)) : "null",
                    ", \"started_seconds\": ", since(h.start_ns), ", \"found_seconds\": ", since(h.found_ns));
    if (Gpu(h)) {
      // The synchronise call that waits; the NCCL fields are the call blamed.
      const std::vector<FrameId>* sf = FramesOf(h.sync_stack, source);
      const std::string waited = WaitedFor(h);
      absl::StrAppend(&out, ", \"sync\": {\"operation\": \"", Api(h.sync_api), "\", \"tid\": ", h.tid,
                      ", \"waits_on\": ", waited.empty() ? "null" : base::JsonString(waited.substr(4)),
                      ", \"stack\": ", sf ? base::JsonString(FoldedStack(*sf, source.frames)) : "null",
                      "}, \"call_tid\": ", h.call_tid, ", \"call_started_seconds\": ", since(h.call_ns),
                      ", \"same_stream\": ", h.same_stream ? "true" : "false",
                      ", \"unmatched_calls\": ", h.unmatched_calls);
    } else {
      out += ", \"sync\": null";
    }
    out += ", \"waiting_for\": [";
    for (size_t j = 0; j < h.absent.size(); j++) {
      const NcclAbsentRank& a = h.absent[j];
      absl::StrAppend(&out, j ? ", " : "", "{\"rank\": ", a.rank, ", \"pid\": ", a.pid ? absl::StrCat(a.pid) : "null",
                      ", \"matching_calls_entered\": ", a.entered, "}");
    }
    absl::StrAppend(
        &out, "], \"outcome\": \"", OutcomeName(h.outcome), "\", \"lasted_seconds\": ",
        h.end_ns ? absl::StrFormat("%.3f", Seconds(h.end_ns > h.start_ns ? h.end_ns - h.start_ns : 0)) : "null",
        ", \"result\": ", h.outcome == NcclHang::Outcome::kReturned ? base::JsonString(ResultName(h)) : "null", "}");
  }
  absl::StrAppend(&out, t.hangs().empty() ? "]" : "\n  ]",
                  ", \"stragglers\": ", NcclStragglersJson(t.stragglers(), source, comm),
                  ", \"steps\": ", t.steps().enabled() ? NcclStepsJson(t.steps(), source) : "null", "}");
  return out;
}

std::vector<std::string> NcclLines(const NcclTracker& t) {
  std::vector<std::string> out;
  if (t.stats().calls == 0) return out;
  std::string line = absl::StrCat("NCCL: ", t.stats().calls, " calls");
  for (size_t i = 0; i < NcclTracker::kApis; i++) {
    const NcclStackTotals& o = t.by_api()[i];
    const auto api = static_cast<uint16_t>(GF_API_NCCL_ALL_REDUCE + i);
    if (!o.calls ||
        !(IsNcclCollective(api) || IsNcclPointToPoint(api) || (api == GF_API_NCCL_GROUP_END && o.gpu_nanos)))
      continue;
    absl::StrAppend(&out.emplace_back(), "  ", Api(static_cast<uint16_t>(GF_API_NCCL_ALL_REDUCE + i)), ": ", o.calls,
                    " calls, ", absl::StrFormat("%.3f s", Seconds(o.nanos)), ", ",
                    HumanBytes(static_cast<int64_t>(std::min<uint64_t>(o.bytes, INT64_MAX))),
                    GpuPart(t.gpu_by_api()[i]));
  }
  const NcclStats& s = t.stats();
  absl::StrAppend(&line, s.hangs == 0 ? ", no hang" : absl::StrCat(", ", s.hangs, " hang(s)"),
                  s.gpu_hangs ? absl::StrCat(" (", s.gpu_hangs, " GPU side)") : "",
                  absl::StrFormat(" (threshold %.1f s)", Seconds(t.hang_threshold_ns())));
  out.insert(out.begin(), line);
  for (const auto& [number, h] : t.hangs()) {
    std::string l = NcclHangEndLine(h);
    if (h.outcome == NcclHang::Outcome::kStuck)
      l = absl::StrFormat("NCCL hang #%d: %s still stuck after %.1f s when recording ended", h.number, Subject(h),
                          Seconds(h.end_ns > h.start_ns ? h.end_ns - h.start_ns : 0));
    out.push_back("  " + l);
  }
  if (s.hangs_not_kept)
    out.push_back(absl::StrCat("  ", s.hangs_not_kept, " more hang(s) found while ", NcclTracker::kMaxHangs,
                               " were held: counted, not said"));
  return out;
}

}  // namespace gpuflame::profiler
