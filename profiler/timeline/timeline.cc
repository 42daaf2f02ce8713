#include "profiler/timeline/timeline.h"

#include <algorithm>
#include <fstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "symbolizer/demangle.h"

namespace gpuflame::profiler::timeline {
namespace {

// Names kept per recording (threads, kernels): beyond, an event still goes
// in, with a name made from its ID.
constexpr size_t kMaxNames = 1 << 16;

}  // namespace

const char* EventTypeName(EventType type) {
  switch (type) {
    case EventType::kStackSpan: return "cpu_stack";
    case EventType::kMarkSpan: return "phase";
    case EventType::kMemory: return "memory";
    case EventType::kLaunch: return "launch";
    case EventType::kGpu: return "gpu";
    case EventType::kCall: return "call";
    case EventType::kIo: return "io";
    case EventType::kApi: return "api";
  }
  return "?";
}

std::string EventCountsJson(const std::array<uint64_t, kEventTypes>& counts) {
  std::string out = "{";
  for (size_t i = 0; i < counts.size(); i++)
    absl::StrAppend(&out, i ? ", " : "", "\"", EventTypeName(static_cast<EventType>(i)), "\": ", counts[i]);
  return out + "}";
}

Timeline::Timeline(const StackTable& stacks, const FrameTable& frames, TimelineOptions options, FlightRing* ring)
    : stacks_(stacks),
      frames_(frames),
      options_(std::move(options)),
      stack_spans_(options_.sample_period_ns, SpanSink(EventType::kStackSpan)),
      mark_spans_(options_.sample_period_ns, SpanSink(EventType::kMarkSpan)),
      phase_order_([this](uint64_t thread, uint64_t ts_ns, StackId stack, bool exact) {
        ReleasePhase(thread, ts_ns, stack, exact);
      }),
      ring_(ring) {
  if (ring_) clock_.KeepRecentOnly();  // an agent's process may run for days
}

std::function<void(const StackSpan&)> Timeline::SpanSink(EventType type) {
  return [this, type](const StackSpan& s) {
    Add({.ts_ns = s.start_ns,
         .end_ns = s.end_ns,
         .pid = static_cast<uint32_t>(s.thread >> 32),
         .tid = static_cast<uint32_t>(s.thread),
         .ref = s.frame,
         .depth = s.depth,
         .type = type});
  };
}

uint64_t Timeline::HostTime(const Event& e) {
  if (e.type != EventType::kGpu) {
    latest_host_ns_ = std::max(latest_host_ns_, e.end_ns);
    return e.end_ns;
  }
  // CUPTI's clock: through the process's clock pairs, once it sent one.
  return clock_.ToMonotonic(static_cast<pid_t>(e.pid), e.end_ns).value_or(latest_host_ns_);
}

uint64_t Timeline::Add(const Event& e) {
  const auto t = static_cast<size_t>(e.type);
  if (ring_) {
    const uint64_t seq = ring_->Push(e, HostTime(e));
    (seq == FlightRing::kNone ? stats_.dropped : stats_.kept)[t]++;
    return seq == FlightRing::kNone ? kNotKept : seq;
  }
  if (events_.size() >= options_.max_events) {
    stats_.dropped[t]++;
    return kNotKept;
  }
  stats_.kept[t]++;
  events_.push_back(e);
  return events_.size() - 1;
}

uint32_t Timeline::Identity(FrameId frame) {
  if (frame >= identity_of_.size()) identity_of_.resize(frame + 1, 0);
  if (identity_of_[frame] != 0) return identity_of_[frame] - 1;
  // A function, not a line: Python frames of one function at two lines are
  // two frames in the table and one span on the timeline.
  const symbolizer::Frame& f = frames_.Get(frame);
  std::string key = absl::StrCat(static_cast<int>(f.kind), "\x1f", f.name, "\x1f", f.file);
  const uint32_t id = identities_.try_emplace(std::move(key), static_cast<uint32_t>(identities_.size())).first->second;
  identity_of_[frame] = id + 1;
  return id;
}

const Timeline::Sampled& Timeline::SampledStack(StackId stack) {
  auto [it, fresh] = sampled_.try_emplace(stack);
  if (!fresh) return it->second;
  Sampled& s = it->second;
  if (stack >= stacks_.size()) return s;
  for (FrameId f : stacks_.Get(stack).frames) {
    const SampledFrame sf{Identity(f), f};
    s.all.push_back(sf);
    const std::string& name = frames_.Get(f).name;
    s.python |= frames_.Get(f).kind == symbolizer::FrameKind::kPython;
    if (std::find(options_.marks.begin(), options_.marks.end(), name) != options_.marks.end()) s.marked.push_back(sf);
  }
  return s;
}

void Timeline::SeeThread(pid_t pid, uint32_t tid) {
  const uint64_t key = ThreadKey(pid, tid);
  if (key == last_thread_) return;
  last_thread_ = key;
  if (thread_names_.size() >= kMaxNames || thread_names_.contains(key)) return;
  // Once per thread: its name as the kernel keeps it (15 bytes, ours to read).
  std::string name;
  if (std::ifstream f(absl::StrCat("/proc/", pid, "/task/", tid, "/comm")); f) std::getline(f, name);
  thread_names_.emplace(key, std::move(name));
}

void Timeline::OnCpuSample(pid_t pid, uint32_t tid, uint64_t ts_ns, StackId stack) {
  SeeThread(pid, tid);
  const Sampled& s = SampledStack(stack);
  const uint64_t key = ThreadKey(pid, tid);
  stack_spans_.OnSample(key, ts_ns, s.all);
  if (!options_.marks.empty()) phase_order_.Add(key, ts_ns, stack, false);
}

void Timeline::PhaseAt(pid_t pid, uint32_t tid, uint64_t ts_ns, StackId stack) {
  if (options_.marks.empty() || stack == StackTable::kNone) return;
  phase_order_.Add(ThreadKey(pid, tid), ts_ns, stack, true);
}

void Timeline::ReleasePhase(uint64_t thread, uint64_t ts_ns, StackId stack, bool exact) {
  const Sampled& s = SampledStack(stack);
  if (!exact) {
    mark_spans_.OnSample(thread, ts_ns, s.marked);
    return;
  }
  // A call or allocation whose stack has no Python frame (none taken, a
  // native thread, a walk that failed) says nothing of the phases: taken as
  // a sample it would end them.
  if (s.python) mark_spans_.OnExactStack(thread, ts_ns, s.marked);
}

void Timeline::OnMemory(pid_t pid, uint32_t tid, uint64_t ts_ns, uint8_t domain, uint16_t api, uint64_t addr,
                        int64_t bytes, StackId stack, int64_t in_use) {
  SeeThread(pid, tid);
  PhaseAt(pid, tid, ts_ns, stack);  // an allocation's own stack (a free has none)
  Add({.ts_ns = ts_ns,
       .end_ns = ts_ns,
       .bytes = bytes,
       .in_use = in_use,
       .addr = addr,
       .pid = static_cast<uint32_t>(pid),
       .tid = tid,
       .ref = stack,
       .api = api,
       .type = EventType::kMemory,
       .kind = domain});
}

void Timeline::OnLaunch(pid_t pid, uint32_t tid, uint64_t ts_ns, uint32_t correlation, uint32_t cbid, StackId stack) {
  SeeThread(pid, tid);
  PhaseAt(pid, tid, ts_ns, stack);
  Add({.ts_ns = ts_ns,
       .end_ns = ts_ns,
       .pid = static_cast<uint32_t>(pid),
       .tid = tid,
       .ref = stack,
       .correlation = correlation,
       .api = static_cast<uint16_t>(cbid),
       .type = EventType::kLaunch});
}

void Timeline::OnGpuRecords(pid_t pid, std::span<const gf_kernel_record> records) {
  for (const gf_kernel_record& r : records) {
    if (!GF_GPU_IS_WORK(r.kind)) continue;  // not GPU work (EventProcessor leaves these out too)
    if (r.weight > 1) stats_.gpu_weighted_records++;
    Add({.ts_ns = r.start_ns,
         .end_ns = std::max(r.end_ns, r.start_ns),
         .bytes = static_cast<int64_t>(r.bytes),
         .addr = r.stream,
         .pid = static_cast<uint32_t>(pid),
         .tid = r.device,
         .ref = r.name_id,
         .correlation = r.correlation,
         .graph = r.graph_id,
         .type = EventType::kGpu,
         .kind = r.kind,
         .copy_kind = r.copy_kind});
  }
}

void Timeline::OnApiCalls(pid_t pid, std::span<const gf_api_record> records, uint64_t dropped_so_far) {
  // The library's count is cumulative: the latest is the process's.
  uint64_t& dropped = api_dropped_[pid];
  dropped = std::max(dropped, dropped_so_far);
  for (const gf_api_record& r : records) {
    SeeThread(pid, r.tid);
    Add({.ts_ns = r.start_ns,
         .end_ns = std::max(r.end_ns, r.start_ns),
         .addr = r.result,
         .pid = static_cast<uint32_t>(pid),
         .tid = r.tid,
         .correlation = r.correlation,
         .api = r.cbid,
         .type = EventType::kApi,
         .kind = r.domain});
  }
}

void Timeline::OnKernelName(pid_t pid, uint32_t name_id, std::string_view mangled) {
  const uint64_t key = uint64_t{static_cast<uint32_t>(pid)} << 32 | name_id;
  if (kernel_names_.size() >= kMaxNames && !kernel_names_.contains(key)) return;
  kernel_names_[key] = symbolizer::Demangle(mangled);  // as KernelJoiner names the flame graphs' leaves
}

const std::string* Timeline::KernelName(pid_t pid, uint32_t name_id) const {
  auto it = kernel_names_.find(uint64_t{static_cast<uint32_t>(pid)} << 32 | name_id);
  return it == kernel_names_.end() ? nullptr : &it->second;
}

std::string Timeline::ThreadName(pid_t pid, uint32_t tid) const {
  auto it = thread_names_.find(ThreadKey(pid, tid));
  return it == thread_names_.end() ? std::string() : it->second;
}

void Timeline::OnSyncCall(pid_t pid, uint32_t tid, uint64_t start_ns, uint64_t end_ns, uint16_t api, uint64_t object,
                          StackId stack, uint32_t result) {
  SeeThread(pid, tid);
  PhaseAt(pid, tid, start_ns, stack);  // usually older than the samples since: left out, counted
  PhaseAt(pid, tid, end_ns, stack);
  Add({.ts_ns = start_ns,
       .end_ns = std::max(start_ns, end_ns),
       .addr = object,
       .pid = static_cast<uint32_t>(pid),
       .tid = tid,
       .ref = stack,
       .correlation = result,
       .depth = 1,
       .api = api,
       .type = EventType::kCall,
       .kind = GF_DOMAIN_SYNC});
}

void Timeline::OnIo(pid_t pid, uint32_t tid, uint64_t start_ns, uint64_t end_ns, uint16_t call, uint64_t fd,
                    int64_t bytes, int64_t result, uint64_t arg, std::string_view name, bool truncated) {
  SeeThread(pid, tid);
  uint32_t ref = kNoIoName;
  if (auto it = io_name_ids_.find(absl::string_view(name.data(), name.size())); it != io_name_ids_.end()) {
    ref = it->second;
  } else if (io_names_.size() < kMaxIoNames) {
    ref = static_cast<uint32_t>(io_names_.size());
    io_names_.emplace_back(name);
    io_name_ids_.emplace(io_names_.back(), ref);
  } else {
    stats_.io_names_over++;
  }
  Add({.ts_ns = start_ns,
       .end_ns = std::max(start_ns, end_ns),
       .bytes = bytes,
       .in_use = result,
       .addr = fd,
       .pid = static_cast<uint32_t>(pid),
       .tid = tid,
       .ref = ref,
       .correlation = static_cast<uint32_t>(arg),
       .graph = static_cast<uint32_t>(arg >> 32),
       .api = call,
       .type = EventType::kIo,
       .kind = GF_DOMAIN_IO,
       .flags = truncated ? kIoNameTruncated : uint8_t{0}});
}

void Timeline::OnNcclCall(pid_t pid, uint32_t tid, uint64_t ts_ns, uint16_t api, uint64_t comm, int64_t bytes,
                          int32_t peer, uint32_t datatype, StackId stack) {
  SeeThread(pid, tid);
  PhaseAt(pid, tid, ts_ns, stack);
  const uint64_t key = ThreadKey(pid, tid);
  // An entry while one is open on the thread: its return was lost. The
  // earlier call ends here, unfinished.
  if (auto it = open_calls_.find(key); it != open_calls_.end()) {
    EndUnfinished(it->second, ts_ns);
    open_calls_.erase(it);
  }
  if (auto it = pending_calls_.find(key); it != pending_calls_.end()) {
    it->second.end_ns = std::max(it->second.ts_ns, ts_ns);
    Add(it->second);
    pending_calls_.erase(it);
  }
  const Event call{.ts_ns = ts_ns,
                   .end_ns = ts_ns,
                   .bytes = bytes,
                   .addr = comm,
                   .pid = static_cast<uint32_t>(pid),
                   .tid = tid,
                   .ref = stack,
                   .peer = peer,
                   .api = api,
                   .type = EventType::kCall,
                   .kind = GF_DOMAIN_NCCL,
                   .copy_kind = static_cast<uint8_t>(datatype <= UINT8_MAX ? datatype : UINT8_MAX),
                   .flags = kCallUnfinished};
  if (ring_) {
    pending_calls_[key] = call;
    return;
  }
  if (const uint64_t at = Add(call); at != kNotKept) open_calls_[key] = at;
}

void Timeline::OnNcclReturn(pid_t pid, uint32_t tid, uint64_t ts_ns, uint32_t result) {
  if (auto it = pending_calls_.find(ThreadKey(pid, tid)); it != pending_calls_.end()) {
    Event& e = it->second;
    e.end_ns = std::max(e.ts_ns, ts_ns);
    e.correlation = result;
    e.flags &= static_cast<uint8_t>(~kCallUnfinished);
    Add(e);
    pending_calls_.erase(it);
    return;
  }
  auto it = open_calls_.find(ThreadKey(pid, tid));
  if (it == open_calls_.end()) return;  // its entry was over max_events, or came before the recording
  Event& e = events_[it->second];
  e.end_ns = std::max(e.ts_ns, ts_ns);
  e.correlation = result;
  e.flags &= static_cast<uint8_t>(~kCallUnfinished);
  open_calls_.erase(it);
}

void Timeline::OnThreadEnded(pid_t pid, uint32_t tid, uint64_t ts_ns) {
  auto it = open_calls_.find(ThreadKey(pid, tid));
  if (it == open_calls_.end()) return;
  EndUnfinished(it->second, ts_ns);
  open_calls_.erase(it);
}

void Timeline::EndUnfinished(size_t index, uint64_t ts_ns) {
  Event& e = events_[index];
  e.end_ns = std::max(e.ts_ns, ts_ns);
}

void Timeline::OnProcessExit(pid_t pid, uint64_t ts_ns) {
  phase_order_.Drain();  // its threads' phases end after their last input
  for (const auto& [key, name] : thread_names_) {
    if (key >> 32 != static_cast<uint32_t>(pid)) continue;
    stack_spans_.EndThread(key);
    mark_spans_.EndThread(key);
  }
  for (auto it = open_calls_.begin(); it != open_calls_.end();) {
    if (it->first >> 32 == static_cast<uint32_t>(pid)) {
      EndUnfinished(it->second, ts_ns);
      open_calls_.erase(it++);
    } else {
      ++it;
    }
  }
  for (auto it = pending_calls_.begin(); it != pending_calls_.end();) {
    if (it->first >> 32 == static_cast<uint32_t>(pid)) {
      it->second.end_ns = std::max(it->second.ts_ns, ts_ns);
      Add(it->second);
      pending_calls_.erase(it++);
    } else {
      ++it;
    }
  }
}

void Timeline::Finish(uint64_t now_ns) {
  stack_spans_.EndAll();
  phase_order_.Drain();
  mark_spans_.EndAll();
  for (const auto& [key, index] : open_calls_) EndUnfinished(index, now_ns);
  open_calls_.clear();
  for (auto& [key, call] : pending_calls_) {
    call.end_ns = std::max(call.ts_ns, now_ns);
    Add(call);
  }
  pending_calls_.clear();
}

std::deque<Event> Timeline::Snapshot(std::span<const uint32_t> pids, uint64_t since_ns, uint64_t now_ns) const {
  std::deque<Event> out;
  if (!ring_) return out;
  const absl::flat_hash_set<uint32_t> wanted(pids.begin(), pids.end());
  for (uint32_t pid : wanted) ring_->CopySince(pid, since_ns, out);
  auto open = [&](EventType type) {
    return [&, type](const StackSpan& s) {
      if (!wanted.contains(static_cast<uint32_t>(s.thread >> 32)) || s.end_ns < since_ns) return;
      out.push_back({.ts_ns = s.start_ns,
                     .end_ns = s.end_ns,
                     .pid = static_cast<uint32_t>(s.thread >> 32),
                     .tid = static_cast<uint32_t>(s.thread),
                     .ref = s.frame,
                     .depth = s.depth,
                     .type = type});
    };
  };
  stack_spans_.ForEachOpen(now_ns, open(EventType::kStackSpan));
  mark_spans_.ForEachOpen(now_ns, open(EventType::kMarkSpan));
  for (Event& e : out) {
    // A span begun before the window is cut at its start: a thread's root
    // frame began when the thread did, perhaps days ago. Parents and
    // children are cut alike, so they still nest.
    if ((e.type == EventType::kStackSpan || e.type == EventType::kMarkSpan) && e.ts_ns < since_ns) e.ts_ns = since_ns;
  }
  for (const auto& [key, call] : pending_calls_) {
    if (!wanted.contains(static_cast<uint32_t>(key >> 32))) continue;
    Event e = call;  // still in flight: to now, said unfinished
    e.end_ns = std::max(e.ts_ns, now_ns);
    out.push_back(e);
  }
  return out;
}

void Timeline::ForgetProcesses(std::span<const pid_t> pids, std::span<const StackId> stacks) {
  if (pids.empty() && stacks.empty()) return;
  const absl::flat_hash_set<uint32_t> gone(pids.begin(), pids.end());
  for (pid_t pid : pids) {
    OnProcessExit(pid, latest_host_ns_);  // anything still open goes first, into what is forgotten next
    if (ring_) ring_->Forget(static_cast<uint32_t>(pid));
    clock_.Forget(pid);
  }
  for (StackId id : stacks) sampled_.erase(id);
  absl::erase_if(thread_names_, [&](const auto& kv) { return gone.contains(static_cast<uint32_t>(kv.first >> 32)); });
  absl::erase_if(kernel_names_, [&](const auto& kv) { return gone.contains(static_cast<uint32_t>(kv.first >> 32)); });
  last_thread_ = 0;
}

TimelineStats Timeline::stats() const {
  TimelineStats s = stats_;
  s.samples_reordered = stack_spans_.reordered();
  s.phase_stacks_late = mark_spans_.exact_late();
  s.samples_truncated = stack_spans_.truncated();
  s.samples_over_threads = stack_spans_.over_threads();
  s.samples_after_end = stack_spans_.after_end() + mark_spans_.after_end();
  for (const auto& [pid, n] : api_dropped_) s.api_calls_dropped_in_process += n;
  return s;
}

}  // namespace gpuflame::profiler::timeline
