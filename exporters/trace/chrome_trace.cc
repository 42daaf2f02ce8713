#include "exporters/trace/chrome_trace.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/json_string.h"
#include "profiler/aggregate/kernel_joiner.h"
#include "profiler/collectives/nccl_api.h"
#include "profiler/forensics/stack_names.h"
#include "profiler/probes/probe_table.h"
#include "profiler/resolve/cuda_api_name.h"

namespace gpuflame::exporters {
namespace {

using profiler::StackId;
using profiler::timeline::Event;
using profiler::timeline::EventType;
using profiler::timeline::Timeline;

// Thread IDs for tracks that are not threads (GPU streams, phases): above
// any Linux thread ID (PID_MAX_LIMIT is 2^22).
constexpr uint32_t kFirstTrackTid = 1u << 30;
// Room kept for the metadata after the last event.
constexpr uint64_t kTrailerBytes = 64 << 10;
// Tracks a GPU stream's overlapping work may take (AssignGpuLanes), its own included.
constexpr size_t kMaxGpuLanes = 8;

// Nanoseconds as the format's microseconds, exactly: "12345.678".
void AppendMicros(std::string& out, uint64_t ns) {
  char frac[8];
  std::snprintf(frac, sizeof(frac), ".%03u", static_cast<unsigned>(ns % 1000));
  absl::StrAppend(&out, ns / 1000, frac);
}

const char* LevelName(uint8_t domain) { return domain == GF_DOMAIN_TORCH ? "tensor" : "device"; }

// An event placed on the host's time axis (GPU records converted).
struct Placed {
  uint64_t ts = 0, end = 0;
  size_t index = 0;
  uint64_t flow = 0;  // its arrow's ID (0: none)
  bool flow_in = false, flow_out = false;
  uint8_t lane = 0;  // GPU work: its stream's track (0) or one below it (AssignGpuLanes)
};

// What one written event is of a placed one. Spans are written as B/E
// pairs, not X: a reader adds ts + dur in floating point, and a child that
// ends with its parent may then end after it (speedscope says so and drops
// the end); a B and an E written from the same nanoseconds are the same
// number to every reader. Instants, launches and empty spans are whole.
enum class Edge : uint8_t { kEnd = 0, kWhole = 1, kBegin = 2 };
struct Point {
  uint64_t at = 0;
  uint32_t placed = 0;
  Edge edge = Edge::kWhole;
};

class Writer {
 public:
  Writer(const Timeline& t, const ChromeTraceOptions& o, ChromeTraceStats& s)
      : t_(t), o_(o), s_(s), events_(o.events ? *o.events : t.events()) {}

  std::string Run() {
    Place();
    AssignGpuLanes();
    JoinMemoryCalls();
    Flows();
    Points();
    AssignTracks();
    out_ = "{\"traceEvents\":[\n";
    WriteTrackNames();
    WriteGpuBusy();
    WriteEvents();
    WriteTrailer();
    s_.json_bytes = out_.size();
    return std::move(out_);
  }

 private:
  void Place() {
    const std::deque<Event>& events = events_;
    placed_.reserve(events.size());
    // A sampled launch whose call came as an API span too is drawn as that
    // span, with the launch's stack: one event, not an instant inside it.
    for (const Event& e : events)
      if (e.type == EventType::kApi) api_calls_.insert(CorrelationKey(e));
    for (size_t i = 0; i < events.size(); i++) {
      const Event& e = events[i];
      if (e.type == EventType::kLaunch && api_calls_.contains(CorrelationKey(e))) {
        launch_stacks_.try_emplace(CorrelationKey(e), e.ref);
        continue;
      }
      Placed p{e.ts_ns, e.end_ns, i};
      if (e.type == EventType::kGpu) {
        // Both ends through the clock (monotonic, so work in order on a
        // stream stays in order; a duration may read a nanosecond off
        // CUPTI's, the offset's rounding).
        std::optional<uint64_t> ts = t_.clock().ToMonotonic(static_cast<pid_t>(e.pid), e.ts_ns);
        std::optional<uint64_t> end = t_.clock().ToMonotonic(static_cast<pid_t>(e.pid), e.end_ns);
        if (!ts || !end) {
          s_.gpu_uncalibrated++;
          continue;
        }
        p.ts = *ts;
        p.end = std::max(*end, *ts);
      }
      placed_.push_back(p);
    }
    base_ = placed_.empty() ? 0 : UINT64_MAX;
    for (const Placed& p : placed_) base_ = std::min(base_, p.ts);
  }

  // Work on one stream may overlap: on Hopper a kernel launched with
  // programmatic dependent launch (cuBLAS's split-K GEMMs) starts before
  // the one ahead of it ends (39 of 18,440 kernels of a launch-bound GPT's
  // steps on the H200, by ~0.1 us). A track's B/E pairs must nest, so such
  // work goes on a track of its own below the stream's: the first whose
  // last work ended before it began. Past kMaxGpuLanes (hostile records:
  // real streams overlap two deep), on the last, counted.
  void AssignGpuLanes() {
    std::vector<uint32_t> gpu;
    for (size_t i = 0; i < placed_.size(); i++)
      if (events_[placed_[i].index].type == EventType::kGpu) gpu.push_back(static_cast<uint32_t>(i));
    auto stream = [&](uint32_t i) {
      const Event& e = events_[placed_[i].index];
      return std::tuple{e.pid, e.tid, e.addr};
    };
    std::sort(gpu.begin(), gpu.end(), [&](uint32_t a, uint32_t b) {
      return std::tuple{stream(a), placed_[a].ts, placed_[a].end} <
             std::tuple{stream(b), placed_[b].ts, placed_[b].end};
    });
    std::vector<uint64_t> ends;  // the current stream's lanes: when their last work ends
    for (size_t k = 0; k < gpu.size(); k++) {
      Placed& p = placed_[gpu[k]];
      if (k == 0 || stream(gpu[k]) != stream(gpu[k - 1])) ends.clear();
      size_t lane = 0;
      while (lane < ends.size() && ends[lane] > p.ts) lane++;
      if (lane == ends.size() && ends.size() < kMaxGpuLanes) ends.push_back(0);
      if (lane == ends.size()) {
        lane = ends.size() - 1;
        s_.gpu_overlap_beyond_lanes++;
      }
      if (lane > 0) s_.gpu_overlapping++;
      ends[lane] = std::max(ends[lane], p.end);
      p.lane = static_cast<uint8_t>(lane);
    }
  }

  // Calls are written whole (X, with their exact duration), not as B/E
  // pairs: their stacks and arguments are written once, and a trace cut at
  // its byte limit never leaves one begun and not ended. Their ends are
  // probe timestamps, so a synchronise inside an NCCL call ends well before
  // it: the floating-point sum that B/E avoids elsewhere cannot reorder them.
  static bool IsSpan(const Event& e) {
    return e.type == EventType::kStackSpan || e.type == EventType::kMarkSpan || e.type == EventType::kGpu;
  }

  // In time order; at one instant, ends before wholes before begins, the
  // deepest end first and the shallowest begin first, so spans nest.
  void Points() {
    points_.reserve(placed_.size() * 2);
    for (size_t i = 0; i < placed_.size(); i++) {
      const Placed& p = placed_[i];
      const Event& e = events_[p.index];
      if (IsSpan(e) && p.end > p.ts) {
        points_.push_back({p.ts, static_cast<uint32_t>(i), Edge::kBegin});
        // A sampled span ends a nanosecond before the sample that no longer
        // shows it, where the next span begins: no reader has to order an
        // end and a begin at one instant (speedscope takes the begin first
        // when both have the same name, and the nesting breaks).
        const bool sampled = e.type != EventType::kGpu && p.end > p.ts + 1;
        points_.push_back({sampled ? p.end - 1 : p.end, static_cast<uint32_t>(i), Edge::kEnd});
      } else {
        points_.push_back({p.ts, static_cast<uint32_t>(i), Edge::kWhole});
      }
    }
    auto key = [&](const Point& x) {
      const int depth = events_[placed_[x.placed].index].depth;
      return std::tuple{x.at, x.edge, x.edge == Edge::kEnd ? -depth : depth, x.placed};
    };
    std::sort(points_.begin(), points_.end(), [&](const Point& a, const Point& b) { return key(a) < key(b); });
  }

  static uint64_t CorrelationKey(const Event& e) { return uint64_t{e.pid} << 32 | e.correlation; }

  static profiler::CudaApiKind ApiKind(const Event& e) { return profiler::CudaApiKindOf(e.kind, e.api); }

  // How long after a device memory call's exit callback its eBPF event may
  // come: a runtime call's own (not forwarded) event is taken at its return
  // probe, after CUPTI's exit callback. Microseconds in practice; the bound
  // only keeps a lone event from joining a call long gone (the nearest call
  // that began before it is the only candidate anyway).
  static constexpr uint64_t kMemoryJoinSlackNs = 1'000'000;

  // A device allocation's or free's call span (the library's) and its eBPF
  // memory event (bytes, address, stack) are one event of the application:
  // each event joins the last such call its thread began before it, if of
  // its direction, within the call (plus the slack) and not joined already.
  // The call is drawn with the event's bytes and stack; the event is not
  // drawn again as an instant (its counter still is).
  void JoinMemoryCalls() {
    using profiler::CudaApiKind;
    absl::flat_hash_map<uint64_t, std::vector<size_t>> calls;  // ThreadKey -> its calls, by start
    for (const Placed& p : placed_) {
      const Event& e = events_[p.index];
      if (e.type != EventType::kApi) continue;
      const CudaApiKind kind = ApiKind(e);
      if (kind == CudaApiKind::kAlloc || kind == CudaApiKind::kFree) calls[ThreadKey(e.pid, e.tid)].push_back(p.index);
    }
    if (calls.empty()) return;
    for (auto& [thread, list] : calls)
      std::stable_sort(list.begin(), list.end(),
                       [&](size_t a, size_t b) { return events_[a].ts_ns < events_[b].ts_ns; });
    for (const Placed& p : placed_) {
      const Event& m = events_[p.index];
      if (m.type != EventType::kMemory || m.kind == GF_DOMAIN_TORCH) continue;
      auto list = calls.find(ThreadKey(m.pid, m.tid));
      if (list == calls.end()) continue;
      auto after = std::upper_bound(list->second.begin(), list->second.end(), m.ts_ns,
                                    [&](uint64_t ts, size_t call) { return ts < events_[call].ts_ns; });
      if (after == list->second.begin()) continue;
      const size_t call = *std::prev(after);
      const Event& c = events_[call];
      const bool alloc = m.bytes > 0;
      if (alloc != (ApiKind(c) == CudaApiKind::kAlloc)) continue;
      if (m.ts_ns - c.ts_ns > c.end_ns - c.ts_ns + kMemoryJoinSlackNs) continue;
      if (!memory_of_call_.try_emplace(call, p.index).second) continue;
      memory_in_call_.insert(p.index);
      s_.memory_calls_joined++;
    }
  }

  // Each launch (its API span, or its sampled launch) to its GPU work: one
  // arrow per launch, through the records with its correlation ID in time
  // order (a graph's kernels).
  void Flows() {
    const std::deque<Event>& events = events_;
    absl::flat_hash_map<uint64_t, size_t> launch;  // correlation key -> placed index
    absl::flat_hash_map<uint64_t, std::vector<size_t>> work;
    for (size_t i = 0; i < placed_.size(); i++) {
      const Event& e = events[placed_[i].index];
      if (e.type == EventType::kLaunch || e.type == EventType::kApi) launch.try_emplace(CorrelationKey(e), i);
      else if (e.type == EventType::kGpu) work[CorrelationKey(e)].push_back(i);
    }
    uint64_t next = 1;
    for (auto& [key, records] : work) {
      auto l = launch.find(key);
      if (l == launch.end()) {
        s_.gpu_without_launch += records.size();
        continue;
      }
      std::sort(records.begin(), records.end(), [&](size_t a, size_t b) { return placed_[a].ts < placed_[b].ts; });
      const uint64_t id = next++;
      Placed& from = placed_[l->second];
      from.flow = id;
      from.flow_out = true;
      for (size_t k = 0; k < records.size(); k++) {
        Placed& to = placed_[records[k]];
        to.flow = id;
        to.flow_in = true;
        to.flow_out = k + 1 < records.size();
      }
      const Event& first = events[placed_[records.front()].index];
      launch_names_[key] = GpuName(first);
      if (first.kind == GF_GPU_MEMCPY || first.kind == GF_GPU_MEMSET) {
        int64_t bytes = 0;
        for (size_t r : records) bytes += events[placed_[r].index].bytes;
        launch_bytes_[key] = bytes;
      }
      s_.flows++;
    }
  }

  std::string GpuName(const Event& e) const {
    gf_kernel_record r{};
    r.kind = e.kind;
    r.copy_kind = e.copy_kind;
    r.name_id = e.ref;
    return profiler::ActivityLeafName(r, t_.KernelName(static_cast<pid_t>(e.pid), e.ref));
  }

  static uint64_t ThreadKey(uint32_t pid, uint32_t tid) { return uint64_t{pid} << 32 | tid; }

  // "openat /models/w.safetensors", "read 4.0 MiB", "mmap 4.0 MiB w.safetensors",
  // "ioctl nvidiactl": the call and what matters of it, at a glance.
  std::string IoSpanName(const Event& e) const {
    const std::string* name = t_.IoName(e.ref);
    const std::string file = name ? *name : std::string();
    switch (e.api) {
      case GF_IO_OPENAT: return absl::StrCat("openat ", name ? file : std::string("[name table full]"));
      case GF_IO_READ: return absl::StrCat("read ", HumanBytes(e.bytes));
      case GF_IO_PREAD64: return absl::StrCat("pread64 ", HumanBytes(e.bytes));
      case GF_IO_MMAP: return absl::StrCat("mmap ", HumanBytes(e.bytes), file.empty() ? "" : " ", file);
      case GF_IO_IOCTL: return absl::StrCat("ioctl ", file);
    }
    return absl::StrCat("syscall ", e.api);
  }

  static std::string HumanBytes(int64_t bytes) {
    if (bytes < 1024) return absl::StrCat(bytes, " B");
    if (bytes < (int64_t{1} << 20)) return absl::StrFormat("%.1f KiB", static_cast<double>(bytes) / 1024);
    if (bytes < (int64_t{1} << 30)) return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
    return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  }

  // Made-up thread IDs for GPU streams and phase tracks, in order of first
  // use, and the real threads each process has.
  void AssignTracks() {
    for (const Point& x : points_) {
      const Event& e = events_[placed_[x.placed].index];
      pids_.insert(e.pid);
      if (e.type == EventType::kGpu) {
        auto [it, fresh] = gpu_tracks_.try_emplace(GpuTrackKey(e, placed_[x.placed].lane), 0);
        if (fresh) it->second = next_tid_++;
      } else {
        threads_.insert({e.pid, e.tid});
        // Phases and calls on tracks of their own beside the thread's:
        // their exact spans do not nest with the sampled ones.
        auto* tracks = e.type == EventType::kMarkSpan                            ? &phase_tracks_
                       : e.type == EventType::kCall || e.type == EventType::kApi ? &call_tracks_
                       : e.type == EventType::kIo                                ? &io_tracks_
                                                                                 : nullptr;
        if (tracks) {
          auto [it, fresh] = tracks->try_emplace(ThreadKey(e.pid, e.tid), 0);
          if (fresh) it->second = next_tid_++;
        }
      }
    }
  }

  void Metadata(const char* what, uint32_t pid, uint32_t tid, const std::string& args) {
    absl::StrAppend(&out_, "{\"ph\":\"M\",\"name\":\"", what, "\",\"pid\":", pid, ",\"tid\":", tid, ",\"args\":", args,
                    "},\n");
    s_.events++;
  }

  // Each device's busy fraction: the share of each bin in which at least one
  // kernel of the recorded processes ran (NVML's "utilization.gpu" counts
  // every process's), on a process of its own (pid 0, "GPUs"), a value where
  // it changes. Bins of 1 ms, wider where the trace is long: at most
  // kMaxBusyBins per device.
  static constexpr uint64_t kMaxBusyBins = 10'000;
  void WriteGpuBusy() {
    std::map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> kernels;  // device -> intervals
    for (const Placed& p : placed_) {
      const Event& e = events_[p.index];
      if (e.type == EventType::kGpu && e.kind == GF_GPU_KERNEL && p.end > p.ts) kernels[e.tid].push_back({p.ts, p.end});
    }
    if (kernels.empty()) return;
    Metadata("process_name", 0, 0, "{\"name\":\"GPUs (busy: kernels of the recorded processes)\"}");
    for (auto& [device, spans] : kernels) {
      std::sort(spans.begin(), spans.end());
      const uint64_t from = spans.front().first;
      uint64_t to = 0;
      for (const auto& sp : spans) to = std::max(to, sp.second);
      // The records' times are the workload's library's: any span, up to
      // 2^64 ns, without overflow (a sum here once wrapped: api_record_fuzzer).
      const uint64_t span = to - from;
      const uint64_t width = std::max<uint64_t>(1'000'000, span / kMaxBusyBins + 1);
      std::vector<uint64_t> busy(span / width + 1, 0);  // ns busy per bin; at most kMaxBusyBins + 1
      uint64_t covered = from;                          // the union so far ends here: overlapping kernels count once
      for (const auto& [start, end] : spans) {
        for (uint64_t t = std::max(start, covered); t < end;) {
          const uint64_t bin = (t - from) / width;
          // The bin's end, where it is before |end| ((bin + 1) * width then fits).
          const uint64_t bin_end = (end - from) / width > bin ? from + (bin + 1) * width : end;
          busy[bin] += bin_end - t;
          t = bin_end;
        }
        covered = std::max(covered, end);
      }
      const std::string name = absl::StrCat("{\"ph\":\"C\",\"name\":\"GPU ", device, " busy\",\"pid\":0,\"ts\":");
      double last = -1;
      for (size_t b = 0; b <= busy.size(); b++) {
        // The last bin may be partial: its share of its own length. After it, idle.
        // A bin's start, and after the last one where it would end (past
        // |to| by less than a bin); |to| where that would not fit.
        uint64_t offset = 0, sum = 0, bin_start = to;
        if (!__builtin_mul_overflow(b, width, &offset) && !__builtin_add_overflow(from, offset, &sum)) bin_start = sum;
        const uint64_t length = b < busy.size() ? std::min(width, to - bin_start) : 0;
        const double fraction = length ? static_cast<double>(busy[b]) / static_cast<double>(length) : 0.0;
        if (fraction == last) continue;
        last = fraction;
        out_ += name;
        AppendMicros(out_, bin_start - base_);
        absl::StrAppend(&out_, ",\"args\":{\"fraction\":", absl::StrFormat("%.4f", fraction), "}},\n");
        s_.events++;
      }
    }
  }

  void WriteTrackNames() {
    for (uint32_t pid : pids_) {
      auto name = o_.process_names.find(pid);
      Metadata("process_name", pid, pid,
               absl::StrCat("{\"name\":",
                            base::JsonString(name != o_.process_names.end() ? name->second : absl::StrCat("pid ", pid)),
                            "}"));
    }
    // A process's main thread first, then its threads by ID, each with its
    // phase track just above it and its calls just below; GPU streams after them.
    std::vector<std::pair<uint32_t, uint32_t>> order(threads_.begin(), threads_.end());
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return std::tuple{a.first, a.second != a.first, a.second} < std::tuple{b.first, b.second != b.first, b.second};
    });
    int64_t rank = 0;
    for (const auto& [pid, tid] : order) {
      std::string name = t_.ThreadName(static_cast<pid_t>(pid), tid);
      if (name.empty()) name = absl::StrCat("thread ", tid);
      if (auto phase = phase_tracks_.find(ThreadKey(pid, tid)); phase != phase_tracks_.end()) {
        Metadata("thread_name", pid, phase->second,
                 absl::StrCat("{\"name\":", base::JsonString("phases: " + name), "}"));
        Metadata("thread_sort_index", pid, phase->second, absl::StrCat("{\"sort_index\":", 4 * rank, "}"));
      }
      Metadata("thread_name", pid, tid, absl::StrCat("{\"name\":", base::JsonString(name), "}"));
      Metadata("thread_sort_index", pid, tid, absl::StrCat("{\"sort_index\":", 4 * rank + 1, "}"));
      if (auto calls = call_tracks_.find(ThreadKey(pid, tid)); calls != call_tracks_.end()) {
        Metadata("thread_name", pid, calls->second,
                 absl::StrCat("{\"name\":", base::JsonString("CUDA/NCCL calls: " + name), "}"));
        Metadata("thread_sort_index", pid, calls->second, absl::StrCat("{\"sort_index\":", 4 * rank + 2, "}"));
      }
      if (auto io = io_tracks_.find(ThreadKey(pid, tid)); io != io_tracks_.end()) {
        Metadata("thread_name", pid, io->second, absl::StrCat("{\"name\":", base::JsonString("I/O: " + name), "}"));
        Metadata("thread_sort_index", pid, io->second, absl::StrCat("{\"sort_index\":", 4 * rank + 3, "}"));
      }
      rank++;
    }
    std::vector<std::pair<GpuTrack, uint32_t>> gpu(gpu_tracks_.begin(), gpu_tracks_.end());
    std::sort(gpu.begin(), gpu.end());
    for (const auto& [key, tid] : gpu) {
      const auto& [pid, device, stream, lane] = key;
      Metadata("thread_name", pid, tid,
               absl::StrCat("{\"name\":\"GPU ", device, " stream ", stream,
                            lane ? absl::StrCat(", overlapping work ", lane) : std::string(), "\"}"));
      Metadata("thread_sort_index", pid, tid, absl::StrCat("{\"sort_index\":", 1'000'000 + rank++, "}"));
    }
  }

  const std::string& Stack(StackId id) {
    auto [it, fresh] = stacks_.try_emplace(id);
    if (fresh)
      it->second =
          base::JsonString(id < t_.stacks().size() ? profiler::FoldedStack(t_.stacks().Get(id).frames, t_.frames())
                                                   : std::string("[no stack]"));
    return it->second;
  }

  // The event's common head: phase, category, name, pid, tid, ts.
  void Head(std::string& out, const char* ph, const char* cat, const std::string& name_json, uint32_t pid, uint32_t tid,
            uint64_t ts) {
    absl::StrAppend(&out, "{\"ph\":\"", ph, "\",\"cat\":\"", cat, "\",\"name\":", name_json, ",\"pid\":", pid,
                    ",\"tid\":", tid, ",\"ts\":");
    AppendMicros(out, ts - base_);
  }

  void Flow(std::string& out, const Placed& p) {
    if (!p.flow) return;
    absl::StrAppend(&out, ",\"bind_id\":\"0x", absl::Hex(p.flow), "\"", p.flow_in ? ",\"flow_in\":true" : "",
                    p.flow_out ? ",\"flow_out\":true" : "");
  }

  // A span's head: "B" or "E" of a pair, or "X" of no duration.
  void SpanHead(std::string& out, Edge edge, const char* cat, const std::string& name_json, uint32_t pid, uint32_t tid,
                uint64_t at) {
    Head(out, edge == Edge::kBegin ? "B" : edge == Edge::kEnd ? "E" : "X", cat, name_json, pid, tid, at);
    if (edge == Edge::kWhole) out += ",\"dur\":0";
  }

  // One event's JSON (two for a memory event: the instant and its counter).
  void Render(const Point& x, std::string& out) {
    const Placed& p = placed_[x.placed];
    const Event& e = events_[p.index];
    switch (e.type) {
      case EventType::kStackSpan:
      case EventType::kMarkSpan: {
        const bool phase = e.type == EventType::kMarkSpan;
        const uint32_t tid = phase ? phase_tracks_.at(ThreadKey(e.pid, e.tid)) : e.tid;
        SpanHead(out, x.edge, phase ? "phase" : "cpu", base::JsonString(t_.frames().Get(e.ref).name), e.pid, tid, x.at);
        out += "},\n";
        return;
      }
      case EventType::kMemory: {
        // Drawn as its call's span (JoinMemoryCalls): only its counter here.
        if (memory_in_call_.contains(p.index)) {
          InUseCounter(out, e, p.ts);
          return;
        }
        const bool alloc = e.bytes > 0;
        std::string name = e.kind == GF_DOMAIN_TORCH ? (alloc ? "tensor alloc" : "tensor free")
                                                     : std::string(profiler::ApiName(e.api));
        if (name.empty()) name = alloc ? "alloc" : "free";
        Head(out, "i", "memory", base::JsonString(name), e.pid, e.tid, p.ts);
        absl::StrAppend(&out, ",\"s\":\"t\",\"args\":{\"bytes\":", e.bytes < 0 ? -e.bytes : e.bytes, ",\"level\":\"",
                        LevelName(e.kind), "\",\"address\":\"0x", absl::Hex(e.addr), "\",\"in_use\":", e.in_use);
        // A free's record carries no stack of its own here.
        if (e.ref < t_.stacks().size()) absl::StrAppend(&out, ",\"stack\":", Stack(e.ref));
        out += "}},\n";
        InUseCounter(out, e, p.ts);
        return;
      }
      case EventType::kLaunch: {
        auto named = launch_names_.find(CorrelationKey(e));
        Head(out, "X", "launch",
             base::JsonString(named != launch_names_.end() ? absl::StrCat("launch: ", named->second) : "launch"), e.pid,
             e.tid, p.ts);
        out += ",\"dur\":0";
        Flow(out, p);
        absl::StrAppend(&out, ",\"args\":{\"correlation\":", e.correlation, ",\"stack\":", Stack(e.ref), "}},\n");
        return;
      }
      case EventType::kApi: {
        // "cudaLaunchKernel: gemm", "cudaMemcpyAsync: [memcpy HtoD] 8.0 MiB",
        // "cudaMalloc 16.0 MiB": the call and the GPU work it made (when its
        // record came), or the memory it took or gave back.
        std::string name = profiler::CudaApiName(e.kind, e.api);
        const uint64_t key = CorrelationKey(e);
        if (auto named = launch_names_.find(key); named != launch_names_.end())
          absl::StrAppend(&name, ": ", named->second);
        auto copied = launch_bytes_.find(key);
        if (copied != launch_bytes_.end()) absl::StrAppend(&name, " ", HumanBytes(copied->second));
        auto memory = memory_of_call_.find(p.index);
        const Event* m = memory != memory_of_call_.end() ? &events_[memory->second] : nullptr;
        // A free that matched no allocation gpuflame saw released an unknown size: no "0 B".
        if (m && m->bytes != 0) absl::StrAppend(&name, " ", HumanBytes(m->bytes < 0 ? -m->bytes : m->bytes));
        Head(out, "X", "cuda", base::JsonString(name), e.pid, call_tracks_.at(ThreadKey(e.pid, e.tid)), p.ts);
        out += ",\"dur\":";
        AppendMicros(out, p.end - p.ts);
        Flow(out, p);
        absl::StrAppend(&out, ",\"args\":{\"correlation\":", e.correlation, ",\"result\":", e.addr);
        if (copied != launch_bytes_.end()) absl::StrAppend(&out, ",\"bytes\":", copied->second);
        if (m)
          absl::StrAppend(&out, ",\"bytes\":", m->bytes < 0 ? -m->bytes : m->bytes, ",\"level\":\"",
                          LevelName(m->kind), "\",\"address\":\"0x", absl::Hex(m->addr), "\",\"in_use\":", m->in_use);
        out += ",\"stack\":";
        if (auto stack = launch_stacks_.find(key); stack != launch_stacks_.end()) out += Stack(stack->second);
        else if (m && m->ref < t_.stacks().size()) out += Stack(m->ref);
        else if (m && m->bytes <= 0) out += "\"[a free takes no stack: the thread's track above shows where it was]\"";
        else out += "\"[not sampled: the thread's track above shows where it was]\"";
        out += "}},\n";
        return;
      }
      case EventType::kCall: {
        const bool nccl = e.kind == GF_DOMAIN_NCCL;
        Head(out, "X", nccl ? "nccl" : "cuda", base::JsonString(std::string(profiler::ApiName(e.api))), e.pid,
             call_tracks_.at(ThreadKey(e.pid, e.tid)), p.ts);
        out += ",\"dur\":";
        AppendMicros(out, p.end - p.ts);
        const bool unfinished = e.flags & profiler::timeline::kCallUnfinished;
        std::vector<std::string> args;
        if (nccl) {
          // An init's communicator is not known until it returns; its peer
          // field is the rank it joins as.
          if (e.addr) args.push_back(absl::StrCat("\"communicator\":\"0x", absl::Hex(e.addr), "\""));
          if (e.bytes)
            args.push_back(absl::StrCat("\"bytes\":", e.bytes,
                                        ",\"datatype\":", base::JsonString(profiler::NcclTypeName(e.copy_kind))));
          if (e.peer >= 0)
            args.push_back(absl::StrCat(GF_API_IS_NCCL_INIT(e.api)       ? "\"rank\":"
                                        : e.api == GF_API_NCCL_BROADCAST ? "\"root\":"
                                                                         : "\"peer\":",
                                        e.peer));
          if (!unfinished)
            args.push_back(absl::StrCat("\"result\":", base::JsonString(profiler::NcclResultName(e.correlation))));
        } else {
          // What it waited for: a stream (0: the default one), an event, or
          // the whole device.
          const bool event = e.api == GF_API_CUDA_EVENT_SYNC || e.api == GF_API_CU_EVENT_SYNC;
          const bool device = e.api == GF_API_CUDA_DEVICE_SYNC || e.api == GF_API_CU_CTX_SYNC;
          if (!device)
            args.push_back(absl::StrCat(event ? "\"event\":\"0x" : "\"stream\":\"0x", absl::Hex(e.addr), "\""));
          args.push_back(absl::StrCat("\"result\":", e.correlation));
        }
        if (unfinished)
          args.push_back(
              "\"unfinished\":\"no return seen: ended at its thread's or process's exit, its thread's next call "
              "or the recording's (or flight recorder trace's) end\"");
        args.push_back(absl::StrCat("\"stack\":", Stack(e.ref)));
        absl::StrAppend(&out, ",\"args\":{", absl::StrJoin(args, ","), "}},\n");
        return;
      }
      case EventType::kIo: {
        Head(out, "X", "io", base::JsonString(IoSpanName(e)), e.pid, io_tracks_.at(ThreadKey(e.pid, e.tid)), p.ts);
        out += ",\"dur\":";
        AppendMicros(out, p.end - p.ts);
        const std::string* name = t_.IoName(e.ref);
        const uint64_t arg = uint64_t{e.graph} << 32 | e.correlation;
        absl::StrAppend(&out, ",\"args\":{");
        if (e.api == GF_IO_OPENAT) {
          absl::StrAppend(&out, "\"path\":", base::JsonString(name ? *name : std::string("[name table full]")),
                          ",\"dirfd\":", static_cast<int32_t>(e.addr), ",\"flags\":\"0x", absl::Hex(arg), "\",");
        } else {
          if (name && !name->empty()) absl::StrAppend(&out, "\"file\":", base::JsonString(*name), ",");
          absl::StrAppend(&out, "\"fd\":", static_cast<int32_t>(e.addr), ",");
          if (e.api != GF_IO_IOCTL) absl::StrAppend(&out, "\"bytes\":", e.bytes, ",");
          if (e.api == GF_IO_PREAD64 || e.api == GF_IO_MMAP) absl::StrAppend(&out, "\"offset\":", arg, ",");
          if (e.api == GF_IO_IOCTL) absl::StrAppend(&out, "\"request\":\"0x", absl::Hex(arg), "\",");
        }
        if (e.flags & profiler::timeline::kIoNameTruncated)
          absl::StrAppend(&out, "\"name_truncated\":\"longer than ", GF_IO_NAME_MAX - 1, " bytes: cut there\",");
        // mmap returns an address: in hex; the others a count or -errno.
        if (e.api == GF_IO_MMAP && (e.in_use >= 0 || e.in_use < -4095))
          absl::StrAppend(&out, "\"result\":\"0x", absl::Hex(static_cast<uint64_t>(e.in_use)), "\"}},\n");
        else absl::StrAppend(&out, "\"result\":", e.in_use, "}},\n");
        return;
      }
      case EventType::kGpu: {
        SpanHead(out, x.edge, "gpu", base::JsonString(GpuName(e)), e.pid, gpu_tracks_.at(GpuTrackKey(e, p.lane)), x.at);
        // The end repeats the begin's args: readers match a pair by name and args.
        if (x.edge != Edge::kEnd) Flow(out, p);
        absl::StrAppend(&out, ",\"args\":{\"correlation\":", e.correlation, ",\"device\":", e.tid,
                        ",\"stream\":", e.addr);
        if (e.graph) absl::StrAppend(&out, ",\"graph\":", e.graph);
        if (e.kind == GF_GPU_MEMCPY || e.kind == GF_GPU_MEMSET) {
          absl::StrAppend(&out, ",\"bytes\":", e.bytes);
          // GB/s: bytes per nanosecond.
          if (p.end > p.ts)
            absl::StrAppend(&out, ",\"gb_per_s\":",
                            absl::StrFormat("%.2f", static_cast<double>(e.bytes) / static_cast<double>(p.end - p.ts)));
        }
        out += "}},\n";
        return;
      }
    }
  }

  // The process's in use at the event's level, after it.
  void InUseCounter(std::string& out, const Event& e, uint64_t ts) {
    absl::StrAppend(&out, "{\"ph\":\"C\",\"name\":\"GPU memory in use: ", LevelName(e.kind),
                    " level\",\"pid\":", e.pid, ",\"ts\":");
    AppendMicros(out, ts - base_);
    absl::StrAppend(&out, ",\"args\":{\"bytes\":", e.in_use, "}},\n");
  }

  void Count(const Point& x) {
    const size_t index = placed_[x.placed].index;
    const Event& e = events_[index];
    s_.events += e.type == EventType::kMemory && !memory_in_call_.contains(index) ? 2 : 1;
  }

  void WriteEvents() {
    std::string piece;
    const uint64_t budget = o_.max_bytes > kTrailerBytes ? o_.max_bytes - kTrailerBytes : 0;
    std::vector<bool> begun(placed_.size(), false);
    size_t i = 0;
    for (; i < points_.size(); i++) {
      piece.clear();
      Render(points_[i], piece);
      if (out_.size() + piece.size() > budget) break;
      out_ += piece;
      Count(points_[i]);
      if (points_[i].edge == Edge::kBegin) begun[points_[i].placed] = true;
      last_ts_ = points_[i].at;
    }
    // Past the budget: the latest events go, counted, but the spans already
    // begun still end (in the room kept for the trailer), or readers would
    // stretch them to the end of the trace.
    for (; i < points_.size(); i++) {
      const Point& x = points_[i];
      if (x.edge == Edge::kEnd && begun[x.placed]) {
        piece.clear();
        Render(x, piece);
        if (out_.size() + piece.size() <= o_.max_bytes - std::min<uint64_t>(o_.max_bytes, kTrailerBytes / 2)) {
          out_ += piece;
          Count(x);
          last_ts_ = x.at;
          continue;
        }
      }
      // One count per event left out: at its begin, or whole.
      if (x.edge != Edge::kEnd) s_.dropped_for_bytes[static_cast<size_t>(events_[placed_[x.placed].index].type)]++;
    }
  }

  void WriteTrailer() {
    profiler::timeline::TimelineStats ts = t_.stats();
    if (o_.events) {
      // A snapshot: what it holds, not what the collector took since it began.
      ts.kept = {};
      ts.dropped = {};
      for (const Event& e : events_) ts.kept[static_cast<size_t>(e.type)]++;
    }
    uint64_t dropped = s_.dropped_for_bytes_total() + s_.gpu_uncalibrated + o_.missing;
    // A snapshot's own losses are the caller's (|missing|): the timeline's
    // counts are of every process since the agent started.
    if (!o_.events)
      for (uint64_t d : ts.dropped) dropped += d;
    if (dropped && !pids_.empty()) {
      // Said where the user looks, on the timeline itself.
      const uint32_t pid = *pids_.begin();
      Head(
          out_, "i", "gpuflame",
          base::JsonString(absl::StrCat("gpuflame: ", dropped, " events are not in this trace (limits; see metadata)")),
          pid, pid, last_ts_);
      out_ += ",\"s\":\"g\"},\n";
      s_.events++;
    }
    if (out_.ends_with(",\n")) out_.erase(out_.size() - 2, 1);  // JSON has no trailing comma
    out_ += "],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":{";
    absl::StrAppend(
        &out_, "\"generator\":\"gpuflame\",\"title\":", base::JsonString(o_.title),
        ",\"clock\":\"CLOCK_MONOTONIC\",\"ts_zero_ns\":", base_,
        ",\"sample_period_ns\":", t_.options().sample_period_ns, ",\"precision\":",
        base::JsonString("cpu and phase spans: each edge within one sampling period; calls of one function with "
                         "no sample between them read as one span; tensor allocations and frees, and device ones "
                         "outside a traced call: exact instants; CUDA launch, copy, memset and device memory calls: "
                         "exact spans, with the stacks of sampled launches and of allocations"),
        ",\"limits\":{\"max_events\":", t_.options().max_events, ",\"max_bytes\":", o_.max_bytes, "}");
    absl::StrAppend(&out_, ",\"kept\":", profiler::timeline::EventCountsJson(ts.kept),
                    ",\"dropped\":{\"over_max_events\":", profiler::timeline::EventCountsJson(ts.dropped),
                    ",\"over_max_bytes\":", profiler::timeline::EventCountsJson(s_.dropped_for_bytes),
                    ",\"gpu_records_without_clock\":", s_.gpu_uncalibrated, "}");
    absl::StrAppend(
        &out_, ",\"flows\":", s_.flows, ",\"gpu_records_without_launch\":", s_.gpu_without_launch,
        ",\"api_calls_dropped_in_process\":", ts.api_calls_dropped_in_process,
        ",\"memory_calls_joined\":", s_.memory_calls_joined, ",\"gpu_work_overlapping\":", s_.gpu_overlapping,
        ",\"gpu_work_overlapping_beyond_tracks\":", s_.gpu_overlap_beyond_lanes,
        ",\"gpu_records_duty_cycled\":", ts.gpu_weighted_records, ",\"samples_reordered\":", ts.samples_reordered,
        ",\"phase_stacks_late\":", ts.phase_stacks_late, ",\"samples_truncated\":", ts.samples_truncated,
        ",\"samples_of_threads_over_cap\":", ts.samples_over_threads,
        ",\"samples_after_thread_end\":", ts.samples_after_end);
    out_ += ",\"marks\":[";
    for (size_t i = 0; i < t_.options().marks.size(); i++)
      absl::StrAppend(&out_, i ? "," : "", base::JsonString(t_.options().marks[i]));
    out_ += "],\"gpu_clock\":[";
    bool first = true;
    for (uint32_t pid : pids_) {
      const profiler::timeline::ClockAlignment a = t_.clock().Alignment(static_cast<pid_t>(pid));
      if (!a.snapshots && !a.rejected) continue;
      absl::StrAppend(&out_, first ? "" : ",", "{\"pid\":", pid, ",\"snapshots\":", a.snapshots,
                      ",\"max_uncertainty_ns\":", a.max_uncertainty_ns, ",\"max_step_ns\":", a.max_step_ns,
                      ",\"rejected\":", a.rejected, "}");
      first = false;
    }
    out_ += "]";
    if (!o_.metadata.empty()) absl::StrAppend(&out_, ",", o_.metadata);
    out_ += "}}\n";
  }

  const Timeline& t_;
  const ChromeTraceOptions& o_;
  ChromeTraceStats& s_;
  const std::deque<Event>& events_;
  std::vector<Placed> placed_;
  std::vector<Point> points_;
  uint64_t base_ = 0;
  uint64_t last_ts_ = 0;
  std::string out_;
  std::set<uint32_t> pids_;
  std::set<std::pair<uint32_t, uint32_t>> threads_;
  // A GPU stream's track, or one of its lanes for overlapping work: pid, device, stream, lane.
  using GpuTrack = std::tuple<uint32_t, uint32_t, uint64_t, uint8_t>;
  static GpuTrack GpuTrackKey(const Event& e, uint8_t lane) { return {e.pid, e.tid, e.addr, lane}; }
  absl::flat_hash_map<GpuTrack, uint32_t> gpu_tracks_;
  absl::flat_hash_map<uint64_t, uint32_t> phase_tracks_;
  absl::flat_hash_map<uint64_t, uint32_t> call_tracks_;  // ThreadKey -> its calls' track
  absl::flat_hash_map<uint64_t, uint32_t> io_tracks_;    // ThreadKey -> its I/O syscalls' track
  absl::flat_hash_map<uint64_t, std::string> launch_names_;
  absl::flat_hash_set<uint64_t> api_calls_;               // correlation keys of API spans
  absl::flat_hash_map<uint64_t, StackId> launch_stacks_;  // ... and their sampled launches' stacks
  absl::flat_hash_map<uint64_t, int64_t> launch_bytes_;   // correlation key -> its copies' or memsets' bytes
  absl::flat_hash_map<size_t, size_t> memory_of_call_;    // a memory call's event index -> its memory event's
  absl::flat_hash_set<size_t> memory_in_call_;            // memory events drawn as their calls
  absl::flat_hash_map<StackId, std::string> stacks_;
  uint32_t next_tid_ = kFirstTrackTid;
};

}  // namespace

std::string ChromeTraceJson(const profiler::timeline::Timeline& timeline, const ChromeTraceOptions& options,
                            ChromeTraceStats* stats) {
  *stats = ChromeTraceStats{};
  return Writer(timeline, options, *stats).Run();
}

}  // namespace gpuflame::exporters
