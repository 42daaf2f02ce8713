#include "profiler/pipeline/event_processor.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "profiler/collectives/nccl_api.h"
#include "profiler/pipeline/io_record.h"
#include "profiler/probes/probe_table.h"

namespace gpuflame::profiler {

std::string AutogradAmbiguousFrame(uint64_t concurrent) {
  // The count is the workload's to write: a bounded name, whatever it says.
  if (concurrent > 99) return "<autograd engine: over 99 concurrent backward calls>";
  return absl::StrCat("<autograd engine: ", concurrent, " concurrent backward calls>");
}

EventProcessor::EventProcessor(ProcessRegistry* registry, StackResolver& resolver, NativeUnwinder* unwinder)
    : registry_(registry), resolver_(resolver), unwinder_(unwinder) {
  oom_.SetContext([this](pid_t pid) { return OomContext(pid); });
  oom_.SetTotals([this](pid_t pid) -> std::optional<OomAllocatorTotals> {
    auto it = totals_.find(static_cast<uint32_t>(pid));
    if (it == totals_.end() || !it->second.known) return std::nullopt;
    return OomAllocatorTotals{it->second.allocated, it->second.reserved};
  });
}

OomProcessContext EventProcessor::OomContext(pid_t pid) const {
  const auto upid = static_cast<uint32_t>(pid);
  OomProcessContext c;
  c.tensors_expected = totals_.contains(upid) || inprocess_since_.contains(upid);
  if (const ProcessInfo* info = registry_ ? registry_->Find(pid) : nullptr) {
    c.process = info->comm;
    c.pod = info->pod;
    c.service = info->service;
    c.tensors_expected |= info->has_torch;
  }
  c.device.unknown = "not read";
  return c;
}

void EventProcessor::StartKey(const gf_event& ev, bool mixed) {
  // Key: what makes two raw stacks the same for a profile. Frame words are
  // per-process addresses, so the pid is part of it.
  key_.clear();
  uint32_t bits = (ev.flags & GF_EVF_PY_TRUNCATED) | (mixed ? GF_EVF_USER_STACK : 0);
  key_.append(reinterpret_cast<const char*>(&ev.pid), sizeof(ev.pid));
  key_.append(reinterpret_cast<const char*>(&ev.api), sizeof(ev.api));
  key_.push_back(static_cast<char>(ev.domain));
  key_.append(reinterpret_cast<const char*>(&bits), sizeof(bits));
  // A launch's leaf may be named by the callback it came from
  // (NameUnnamedLaunchLeaf): the same frames from two APIs are two stacks.
  if (ev.kind == GF_EV_KERNEL_LAUNCH) {
    const auto api = static_cast<uint32_t>(ev.arg1);
    key_.append(reinterpret_cast<const char*>(&api), sizeof(api));
  }
}

StackId EventProcessor::InternStack(const gf_event& ev, std::span<const uint8_t> payload) {
  StartKey(ev, /*mixed=*/false);
  key_.append(reinterpret_cast<const char*>(payload.data()), payload.size());
  StackId id = stacks_.Find(key_);
  if (id != StackTable::kNone) return id;
  if (frozen_) return OverBudgetStack(ev);

  // First sighting: copy the frames out (the record buffer is not aligned for
  // in-place reads) and resolve them while the process is alive.
  std::vector<gf_py_frame> py(ev.py_count);
  std::vector<uint64_t> native(ev.native_count);
  // Guarded: an empty vector's data() may be null, and memcpy wants pointers.
  if (!py.empty()) std::memcpy(py.data(), payload.data(), py.size() * sizeof(gf_py_frame));
  if (!native.empty())
    std::memcpy(native.data(), payload.data() + py.size() * sizeof(gf_py_frame), native.size() * sizeof(uint64_t));
  StackInfo info;
  info.pid = static_cast<pid_t>(ev.pid);
  info.domain = ev.domain;
  for (const symbolizer::Frame& f : resolver_.Resolve(ev, py, native)) info.frames.push_back(frames_.Intern(f));
  return stacks_.Insert(key_, std::move(info));
}

StackId EventProcessor::InternMixedStack(const gf_event& ev, std::span<const uint8_t> payload) {
  const size_t py_bytes = GF_MAX_PY_FRAMES * sizeof(gf_py_frame);
  gf_user_regs regs;
  std::memcpy(&regs, payload.data() + py_bytes, sizeof(regs));
  std::span<const uint8_t> stack = payload.subspan(py_bytes + sizeof(regs), ev.user_stack_len);
  std::vector<uint64_t> pcs;
  if (unwinder_) pcs = unwinder_->Unwind(static_cast<pid_t>(ev.pid), regs, stack);
  StartKey(ev, /*mixed=*/true);
  key_.append(reinterpret_cast<const char*>(payload.data()), ev.py_count * sizeof(gf_py_frame));
  key_.append(reinterpret_cast<const char*>(pcs.data()), pcs.size() * sizeof(uint64_t));
  StackId id = stacks_.Find(key_);
  if (id != StackTable::kNone) return id;
  if (frozen_) return OverBudgetStack(ev);
  std::vector<gf_py_frame> py(ev.py_count);
  if (!py.empty()) std::memcpy(py.data(), payload.data(), py.size() * sizeof(gf_py_frame));
  StackInfo info;
  info.pid = static_cast<pid_t>(ev.pid);
  info.domain = ev.domain;
  for (const symbolizer::Frame& f : resolver_.ResolveMixed(ev, py, pcs)) info.frames.push_back(frames_.Intern(f));
  return stacks_.Insert(key_, std::move(info));
}

StackId EventProcessor::AllocationStack(const gf_event& ev, std::span<const uint8_t> payload, bool mixed) {
  if (!(ev.flags & GF_EVF_STACK_AT_ENTRY)) return RecordStack(ev, payload, mixed);
  auto it = entry_stacks_.find(ev.tid);
  // Without it (entry missed: attached mid-call), the Python-less fallback
  // still names the API.
  const StackId stack = it != entry_stacks_.end() && stacks_.Get(it->second).pid == static_cast<pid_t>(ev.pid)
                            ? it->second
                            : RecordStack(ev, payload, mixed);
  if (it != entry_stacks_.end()) entry_stacks_.erase(it);
  return stack;
}

StackId EventProcessor::RecordStack(const gf_event& ev, std::span<const uint8_t> payload, bool mixed) {
  if (stack_unknown_) {
    if (frozen_) return OverBudgetStack(ev);  // its frames were not kept: over budget when they came
    stats_.stack_id_unknown++;
    return MarkerStack(ev, kStackUnknownFrame);
  }
  if (ev.flags & GF_EVF_BACKWARD_CALLER) return LentStack(ev, payload, mixed);
  return mixed ? InternMixedStack(ev, payload) : InternStack(ev, payload);
}

StackId EventProcessor::LentStack(const gf_event& ev, std::span<const uint8_t> payload, bool mixed) {
  const bool ambiguous = ev.flags & GF_EVF_AUTOGRAD_AMBIGUOUS;
  const size_t py_bytes = ev.py_count * sizeof(gf_py_frame);
  // This thread's own part: native frames only (its Python frames, none, are not in the record).
  gf_event own = ev;
  own.py_count = 0;
  StackId tail = StackTable::kNone;
  if (mixed) {
    tail = InternMixedStack(own, payload);
  } else if (ev.native_count != 0) {
    tail = InternStack(own, payload.subspan(py_bytes));
  }
  StackId origin = StackTable::kNone;
  if (!ambiguous && ev.py_count != 0) {
    // Keyed as the caller's own stacks are: the same frames share one entry.
    gf_event caller = ev;
    caller.native_count = 0;
    caller.flags &= ~static_cast<uint32_t>(GF_EVF_USER_STACK);
    origin = InternStack(caller, payload.first(py_bytes));
  }
  uint64_t* counter = nullptr;
  switch (ev.kind) {
    case GF_EV_KERNEL_LAUNCH: counter = ambiguous ? &stats_.lent_launches_ambiguous : &stats_.lent_launches; break;
    case GF_EV_CPU_SAMPLE: counter = ambiguous ? &stats_.lent_cpu_samples_ambiguous : &stats_.lent_cpu_samples; break;
    default: counter = ambiguous ? &stats_.lent_allocations_ambiguous : &stats_.lent_allocations;
  }
  ++*counter;
  return AutogradStack(ev, origin, ambiguous ? AutogradAmbiguousFrame(ev.backward_calls) : kAutogradFrame, tail);
}

bool EventProcessor::ExpandStackId(gf_event& ev, std::span<const uint8_t>& body) {
  const bool named = ev.flags & GF_EVF_STACK_ID;
  const bool carried = ev.flags & GF_EVF_STACK_NEW;
  if (named == carried || (ev.flags & GF_EVF_USER_STACK) || ev.native_count != 0 || ev.py_count == 0 ||
      ev.py_count > GF_MAX_PY_FRAMES)
    return false;
  const size_t frame_bytes = ev.py_count * sizeof(gf_py_frame);
  gf_stack_id id;
  if (carried) {
    if (body.size() != frame_bytes + sizeof(id)) return false;
    std::memcpy(&id, body.data() + frame_bytes, sizeof(id));
    body = body.first(frame_bytes);
    // Over the memory budget nothing new is kept; the records naming it
    // will go where this one's stack goes, to the over-budget stack.
    if (!frozen_) kernel_stacks_.Remember(ev.pid, id, body);
  } else {
    if (body.size() != sizeof(id)) return false;
    std::memcpy(&id, body.data(), sizeof(id));
    stats_.stack_id_records++;
    auto frames = kernel_stacks_.Find(ev.pid, id);
    if (frames && frames->size() == frame_bytes) {
      body = *frames;
    } else {
      stack_unknown_ = true;
      body = {};
      ev.py_count = 0;
    }
  }
  ev.flags &= ~static_cast<uint32_t>(GF_EVF_STACK_ID | GF_EVF_STACK_NEW);
  return true;
}

StackId EventProcessor::OverBudgetStack(const gf_event& ev) {
  stats_.over_budget_events++;
  return MarkerStack(ev, kOverBudgetFrame);
}

StackId EventProcessor::FindMarker(const gf_event& ev, const char* name) {
  StartKey(ev, /*mixed=*/false);
  // Raw stacks append whole 8-byte words (frames are 24 bytes): a tail that
  // is not a multiple of 8 bytes cannot be one.
  const size_t prefix = key_.size();
  key_.append(name);
  if ((key_.size() - prefix) % 8 == 0) key_.push_back('\0');
  return stacks_.Find(key_);
}

StackId EventProcessor::MarkerStack(const gf_event& ev, const char* name) {
  StackId id = FindMarker(ev, name);  // leaves the marker's key in key_
  if (id != StackTable::kNone) return id;
  symbolizer::Frame marker;
  marker.kind = symbolizer::FrameKind::kMarker;
  marker.name = name;
  StackInfo info;
  info.pid = static_cast<pid_t>(ev.pid);
  info.domain = ev.domain;
  info.frames.push_back(frames_.Intern(marker));
  return stacks_.Insert(key_, std::move(info));
}

StackId EventProcessor::AutogradStack(const gf_event& ev, StackId origin, std::string_view marker, StackId tail) {
  StartKey(ev, /*mixed=*/false);
  // Not a raw stack's tail (whole 8-byte words) nor a marker's (a name): a
  // tag byte, the two stack IDs and the marker's name, padded to an odd length.
  const size_t prefix = key_.size();
  key_.push_back('\x02');
  key_.append(reinterpret_cast<const char*>(&origin), sizeof(origin));
  key_.append(reinterpret_cast<const char*>(&tail), sizeof(tail));
  key_.append(marker);
  if ((key_.size() - prefix) % 2 == 0) key_.push_back('\0');
  StackId id = stacks_.Find(key_);
  if (id != StackTable::kNone) return id;
  if (frozen_) return OverBudgetStack(ev);
  StackInfo info;
  info.pid = static_cast<pid_t>(ev.pid);
  info.domain = ev.domain;
  if (origin != StackTable::kNone) {
    const std::vector<FrameId>& caller = stacks_.Get(origin).frames;
    size_t keep = caller.size();
    while (keep > 0 && frames_.Get(caller[keep - 1]).kind == symbolizer::FrameKind::kApi) keep--;
    info.frames.assign(caller.begin(), caller.begin() + static_cast<std::ptrdiff_t>(keep));
  }
  symbolizer::Frame engine;
  engine.kind = symbolizer::FrameKind::kMarker;
  engine.name = std::string(marker);
  info.frames.push_back(frames_.Intern(engine));
  if (tail != StackTable::kNone) {
    const std::vector<FrameId>& own = stacks_.Get(tail).frames;
    info.frames.insert(info.frames.end(), own.begin(), own.end());
  } else if (ev.api != GF_API_NONE) {
    symbolizer::Frame leaf;
    leaf.kind = symbolizer::FrameKind::kApi;
    leaf.name = std::string(ApiName(ev.api));
    info.frames.push_back(frames_.Intern(leaf));
  }
  return stacks_.Insert(key_, std::move(info));
}

StackId EventProcessor::AutogradLaunchStack(const gf_event& ev, StackId own) {
  // A launch with Python frames of its own is its own thread's, whatever it says.
  if (ev.py_count != 0 || (ev.arg2 == 0 && ev.size < 2)) return own;
  if (ev.arg2 == 0) {
    stats_.autograd_launches_ambiguous++;
    return AutogradStack(ev, StackTable::kNone, AutogradAmbiguousFrame(ev.size), own);
  }
  auto it = inprocess_stacks_.find({ev.pid, ev.arg2});
  if (it == inprocess_stacks_.end()) {
    // Its tensor batch was lost, or the agent attached mid-call: the
    // launch keeps its own stack rather than a guess.
    stats_.autograd_unknown_origins++;
    return own;
  }
  stats_.autograd_launches++;
  return AutogradStack(ev, it->second, kAutogradFrame, own);
}

uint32_t EventProcessor::ThreadLabel(const gf_event& ev) {
  uint64_t key = (uint64_t{ev.pid} << 32) | ev.tid;
  auto it = thread_labels_.find(key);
  if (it != thread_labels_.end()) return it->second;
  // Read once per thread: a thread renaming itself later keeps its first name.
  std::string name;
  if (std::ifstream f(absl::StrCat("/proc/", ev.pid, "/task/", ev.tid, "/comm")); f) std::getline(f, name);
  if (thread_labels_.size() > 1 << 16) thread_labels_.clear();  // tids churn; bound the cache
  return thread_labels_[key] = cpu_.Label(name.empty() ? "[unknown thread]" : name);
}

void EventProcessor::OnIo(const gf_event& ev, std::span<const uint8_t> body) {
  const std::optional<IoRecord> r = DecodeIo(ev, body);
  if (!r) {
    stats_.malformed++;
    return;
  }
  stats_.io_calls++;
  if (!timeline_) {
    stats_.io_calls_unused++;  // the probes run only with a timeline; a record past its end
    return;
  }
  timeline_->OnIo(static_cast<pid_t>(r->pid), r->tid, r->start_ns, r->end_ns, r->call, r->fd, r->bytes, r->result,
                  r->arg, r->name, r->truncated);
}

void EventProcessor::OnLaunchStack(pid_t pid, uint32_t tid, uint32_t correlation, uint32_t api, StackId stack,
                                   uint64_t ts_ns, bool late) {
  joiner_.OnLaunch(pid, correlation, stack, ts_ns);
  // A launch the launch route joined a flush after it happened: the NCCL
  // call in flight on its thread now is not the one it was made in (the
  // tracker took that one at the hit), and the timeline has moved past it
  // (its spans come from the library's own records, launches included,
  // with --timeline).
  if (late) {
    stats_.launches_late++;
    nccl_.OnLaunchJoined(pid, tid, correlation, ts_ns);
    return;
  }
  nccl_.OnLaunch(pid, tid, correlation, ts_ns);  // inside an NCCL call: its kernel
  if (timeline_) timeline_->OnLaunch(pid, tid, ts_ns, correlation, api, stack);
}

void EventProcessor::OnGpuRecord(const gf_event& ev, std::span<const uint8_t> payload) {
  auto pid = static_cast<pid_t>(ev.pid);
  if (ev.kind < kKinds) by_kind_[ev.kind]++;
  if (ev.kind == GF_EV_LIB_COST) {
    OnLibCost(ev);
    return;
  }
  // A window's word goes to the registry whatever the library speaks: its
  // uprobes must not stay on for want of the close.
  if (ev.kind != GF_EV_CUPTI_STATUS && ev.kind != GF_EV_LAUNCH_WINDOW && ForeignAbi(pid)) {
    stats_.foreign_abi_records++;
    return;
  }
  switch (ev.kind) {
    case GF_EV_KERNEL_BATCH: {
      if (ev.size > GF_KERNEL_BATCH_MAX || payload.size() != ev.size * sizeof(gf_kernel_record)) {
        stats_.malformed++;
        return;
      }
      // Copied out: ring-buffer records are not aligned for in-place reads.
      batch_.resize(ev.size);
      if (!batch_.empty()) std::memcpy(batch_.data(), payload.data(), payload.size());
      if (utilization_) utilization_->OnGpuRecords(pid, batch_);
      // Synchronise waits are the CPU's and activity windows say when CUPTI
      // looked, neither is GPU work: the utilization's alone. Kinds we do
      // not know are left out too (the ABI's v5 rule).
      const auto work_end = std::stable_partition(batch_.begin(), batch_.end(),
                                                  [](const gf_kernel_record& r) { return GF_GPU_IS_WORK(r.kind); });
      const std::span<const gf_kernel_record> work(batch_.data(), static_cast<size_t>(work_end - batch_.begin()));
      joiner_.OnRecords(pid, work, ev.ts_ns);
      nccl_.OnGpuRecords(pid, work);  // NCCL's kernels back to their calls: nothing to do without NCCL
      if (timeline_) timeline_->OnGpuRecords(pid, work);
      return;
    }
    case GF_EV_TENSOR_BATCH: OnTensorBatch(ev, payload); return;
    case GF_EV_API_BATCH: {
      if (ev.size > GF_API_BATCH_MAX || payload.size() != ev.size * sizeof(gf_api_record)) {
        stats_.malformed++;
        return;
      }
      stats_.api_calls += ev.size;
      if (!timeline_) {
        stats_.api_calls_unused += ev.size;  // attached only with a timeline; a batch past its end
        return;
      }
      api_batch_.resize(ev.size);
      if (!api_batch_.empty()) std::memcpy(api_batch_.data(), payload.data(), payload.size());
      timeline_->OnApiCalls(pid, api_batch_, ev.arg0);
      return;
    }
    case GF_EV_LAUNCH_RECORDS: {
      if (ev.size > GF_API_BATCH_MAX || payload.size() != ev.size * sizeof(gf_api_record)) {
        stats_.malformed++;
        return;
      }
      // The library's count is its own, cumulative: what grew since its last word.
      if (uint64_t& last = launch_records_unconverted_[pid]; ev.arg0 > last) {
        stats_.launch_records_unconverted += ev.arg0 - last;
        last = ev.arg0;
      }
      api_batch_.resize(ev.size);
      if (!api_batch_.empty()) std::memcpy(api_batch_.data(), payload.data(), payload.size());
      route_.OnRecords(pid, api_batch_, [&](const LaunchRouteJoiner::Launch& l) {
        OnLaunchStack(pid, l.tid, l.correlation, l.api, l.stack, l.ts_ns, /*late=*/true);
      });
      route_.Expire(ev.ts_ns);
      return;
    }
    case GF_EV_LAUNCH_WINDOW:
      if (registry_) registry_->OnLaunchWindow(pid, ev.arg0 != 0, ev.ts_ns);
      route_.Expire(ev.ts_ns);
      return;
    case GF_EV_KERNEL_NAME: {
      // NUL-terminated within the payload.
      auto end = std::find(payload.begin(), payload.end(), uint8_t{0});
      if (payload.empty() || end == payload.end()) {
        stats_.malformed++;
        return;
      }
      const std::string_view name(reinterpret_cast<const char*>(payload.data()), end - payload.begin());
      joiner_.OnName(pid, static_cast<uint32_t>(ev.arg0), name);
      nccl_.OnKernelName(pid, static_cast<uint32_t>(ev.arg0), name);
      if (timeline_) timeline_->OnKernelName(pid, static_cast<uint32_t>(ev.arg0), name);
      return;
    }
    case GF_EV_CUPTI_STATUS: {
      // The library says which GF_ABI_VERSION it speaks at start, before its
      // first launch or activity record, and again before each flush (an
      // agent may attach at any time). Another version's records may not
      // mean what ours do: from here on, none of its kernel records is read,
      // and what it already sent is dropped unjoined. A library from before
      // versioning says 0 (and only at start).
      const auto abi = static_cast<uint32_t>(ev.arg1);
      if (abi != GF_ABI_VERSION) {
        foreign_abi_.insert(ev.pid);
        joiner_.ForgetProcess(pid);
        route_.ForgetProcess(pid);
      } else {
        foreign_abi_.erase(ev.pid);
      }
      if (registry_) registry_->OnCuptiStatus(pid, static_cast<uint32_t>(ev.arg0), abi, ev.ts_ns);
      // Its clocks read together (addr: CUPTI's; size, arg2: CLOCK_MONOTONIC
      // before and after), from a library that sends them.
      if (timeline_ && ev.addr) timeline_->OnClock(pid, ev.addr, ev.size, ev.arg2);
      if (utilization_ && ev.addr) utilization_->OnClock(pid, ev.addr, ev.size, ev.arg2);
      return;
    }
  }
}

void EventProcessor::TimelineMemory(const gf_event& ev, uint8_t domain, StackId stack, int64_t before) {
  if (!timeline_) return;
  const auto pid = static_cast<pid_t>(ev.pid);
  const int64_t after = tracker_.InUse(pid, domain);
  if (after == before && ev.kind == GF_EV_FREE) return;
  // An allocation's own size; a free's, what it released (its allocation's).
  // A sampled tensor block released the bytes it stood for from in use (the
  // counter), but its slice says its own size, as its allocation's did,
  // where the record has it (not USDT's pytorch:free).
  int64_t bytes = ev.kind == GF_EV_FREE ? after - before : static_cast<int64_t>(ev.size);
  if (ev.kind == GF_EV_FREE && domain == GF_DOMAIN_TORCH && ev.size && ev.size < uint64_t{1} << 50)
    bytes = -static_cast<int64_t>(ev.size);
  timeline_->OnMemory(pid, ev.tid, ev.ts_ns, domain, ev.api, ev.addr, bytes, stack, after);
}

void EventProcessor::OnLibCost(const gf_event& ev) {
  // Cumulative figures from inside the workload: a counter that goes back
  // (a forked child's copy, an exec) restarts from there, and no report may
  // add more time than 256 threads could have spent since the last one, so
  // a lying process cannot push the node's agent over its overhead budget.
  LibraryCost now{ev.addr, ev.size, ev.arg0, ev.arg1, ev.arg2, 0};
  auto [it, first] = library_cost_by_pid_.try_emplace(ev.pid);
  PidCost& last = it->second;
  if (first) library_cost_.processes++;
  // A first report covers the library's life so far. Of a process followed
  // from its start that life was spent for us: counted, held to 256
  // threads' worth of 10 s. Of a process found running, another gpuflame
  // (this agent before a restart) may have kept the library busy for hours:
  // that report is only where counting starts, or the restarted agent
  // would see its first 10 s far over budget and shed at once.
  const ProcessInfo* info = first && registry_ ? registry_->Find(static_cast<pid_t>(ev.pid)) : nullptr;
  const bool baseline_only = info && info->attached_late;
  constexpr uint64_t kThreads = 256, kFirstNs = 10'000'000'000;
  const uint64_t cap = first ? kThreads * kFirstNs : ev.ts_ns > last.ts_ns ? (ev.ts_ns - last.ts_ns) * kThreads : 0;
  auto grow = [&](uint64_t& sum, uint64_t& was, uint64_t is, bool time) {
    const uint64_t delta = is >= was ? is - was : is;
    if (!baseline_only) sum += time && delta > cap ? cap : delta;
    was = is;
  };
  grow(library_cost_.hook_calls, last.cost.hook_calls, now.hook_calls, false);
  grow(library_cost_.hook_ns, last.cost.hook_ns, now.hook_ns, true);
  grow(library_cost_.callback_ns, last.cost.callback_ns, now.callback_ns, true);
  grow(library_cost_.thread_ns, last.cost.thread_ns, now.thread_ns, true);
  grow(library_cost_.cupti_overhead_ns, last.cost.cupti_overhead_ns, now.cupti_overhead_ns, true);
  last.ts_ns = ev.ts_ns;
}

bool EventProcessor::SupersededByInProcess(const gf_event& ev) {
  if (ev.domain != GF_DOMAIN_TORCH) return false;
  auto it = inprocess_since_.find(ev.pid);
  bool superseded = it != inprocess_since_.end() && ev.ts_ns >= it->second;
  // Decided in-process, hook not heard yet: its batches trail the probes'
  // records by up to a flush period, so the same allocation would come
  // twice. The library reports it; if its hook never goes live, the
  // registry moves the process to the probes (and says what was missed).
  if (!superseded && registry_) {
    const ProcessInfo* info = registry_->Find(static_cast<pid_t>(ev.pid));
    superseded = info && info->tensor_inprocess.value_or(false);
  }
  if (superseded) stats_.bpf_tensor_events_superseded++;
  return superseded;
}

void EventProcessor::OnTensorBatch(const gf_event& outer, std::span<const uint8_t> payload) {
  if (payload.size() != outer.size || payload.size() > GF_TENSOR_BATCH_MAX) {
    stats_.malformed++;
    return;
  }
  if (registry_) registry_->Observe(static_cast<pid_t>(outer.pid));
  // Whole records, each 8-byte aligned; the walk stops at the first that
  // does not fit (the rest of the batch is counted as malformed, once).
  size_t at = 0;
  while (at < payload.size()) {
    if (payload.size() - at < sizeof(gf_event)) {
      stats_.malformed++;
      return;
    }
    gf_event ev;
    std::memcpy(&ev, payload.data() + at, sizeof(ev));
    const size_t refs = ev.kind == GF_EV_ALLOC && (ev.flags & GF_EVF_SAMPLED) ? 2 : 1;
    size_t body = ev.kind == GF_EV_PY_STACK     ? ev.py_count * sizeof(gf_py_frame)
                  : ev.flags & GF_EVF_STACK_REF ? refs * sizeof(uint64_t)
                                                : 0;
    size_t bytes = (sizeof(ev) + body + 7) & ~size_t{7};
    if (ev.py_count > GF_MAX_PY_FRAMES || bytes > payload.size() - at) {
      stats_.malformed++;
      return;
    }
    // The probe's pid is the host's; the library sees its own namespace's.
    // And whatever the workload wrote, these are tensor-level events.
    ev.pid = outer.pid;
    ev.domain = GF_DOMAIN_TORCH;
    ev.api = GF_API_TORCH_REPORT;
    // Only a stack record carries frames, and never native ones: counts the
    // workload wrote elsewhere must not size a read of the payload.
    if (ev.kind != GF_EV_PY_STACK) ev.py_count = 0;
    ev.native_count = 0;
    ev.user_stack_len = 0;
    ev.flags &= ~static_cast<uint32_t>(GF_EVF_USER_STACK);
    OnInProcessRecord(ev, payload.subspan(at + sizeof(ev), body));
    at += bytes;
  }
}

void EventProcessor::OnInProcessRecord(const gf_event& ev, std::span<const uint8_t> payload) {
  auto pid = static_cast<pid_t>(ev.pid);
  if (ev.kind < kKinds) by_kind_[ev.kind]++;
  switch (ev.kind) {
    case GF_EV_AUTOGRAD_HOOK:
      if (registry_) registry_->OnAutogradHook(pid, static_cast<uint32_t>(ev.arg0));
      return;
    case GF_EV_TENSOR_HOOK:
      if (ev.arg0 == GF_TENSOR_HOOK_LIVE && ev.arg2 == GF_ABI_VERSION) inprocess_since_.emplace(ev.pid, ev.ts_ns);
      if (registry_)
        registry_->OnTensorHook(pid, static_cast<uint32_t>(ev.arg0), static_cast<uint32_t>(ev.arg1),
                                static_cast<uint32_t>(ev.arg2), ev.size);
      return;
    case GF_EV_PY_STACK: {
      if (!inprocess_since_.contains(ev.pid)) return;
      stats_.inprocess_stacks++;
      // Over the memory budget, no new stack is kept: its events go to the
      // over-budget stack below.
      if (frozen_) return;
      gf_event as_alloc = ev;
      as_alloc.kind = GF_EV_ALLOC;
      inprocess_stacks_[{ev.pid, ev.arg0}] = InternStack(as_alloc, payload);
      return;
    }
    case GF_EV_ALLOC: {
      if (!inprocess_since_.contains(ev.pid)) return;
      stats_.inprocess_events++;
      // The stack's ID, and for a sampled allocation the bytes it stands for.
      uint64_t id = 0, stands_for = 0;
      if (payload.size() >= sizeof(id)) std::memcpy(&id, payload.data(), sizeof(id));
      if (payload.size() == 2 * sizeof(id)) {
        std::memcpy(&stands_for, payload.data() + sizeof(id), sizeof(stands_for));
        // A workload's word: at least its own size, at most what a tensor can be.
        stands_for = std::max(std::min(stands_for, uint64_t{1} << 50), ev.size);
      }
      const StackId stack = InProcessStack(ev, id);
      oom_.BeforeTensorEvent(pid, ev.ts_ns);
      const int64_t before = InUseIfTimeline(ev, GF_DOMAIN_TORCH);
      tracker_.OnAlloc(pid, GF_DOMAIN_TORCH, false, ev.addr, ev.size, stack, stands_for, ev.ts_ns);
      TimelineMemory(ev, GF_DOMAIN_TORCH, stack, before);
      UpdateTotals(ev);
      return;
    }
    case GF_EV_FREE: {
      if (!inprocess_since_.contains(ev.pid)) return;
      stats_.inprocess_events++;
      oom_.BeforeTensorEvent(pid, ev.ts_ns);
      const int64_t before = InUseIfTimeline(ev, GF_DOMAIN_TORCH);
      tracker_.OnFree(pid, GF_DOMAIN_TORCH, false, ev.addr, ev.ts_ns);
      TimelineMemory(ev, GF_DOMAIN_TORCH, StackTable::kNone, before);
      UpdateTotals(ev);
      return;
    }
    case GF_EV_TENSOR_TOTALS:
      // A sampled run's latest totals, its event not sent: what summary.json
      // and the before-attach marker read stays the allocator's own.
      if (inprocess_since_.contains(ev.pid)) UpdateTotals(ev);
      return;
    case GF_EV_OOM_REPORT: {
      // PyTorch gave up: after every tensor event it made before, in this
      // same stream, so the tensor level is as it was.
      if (!inprocess_since_.contains(ev.pid)) return;
      uint64_t id = 0;
      if (payload.size() >= sizeof(id)) std::memcpy(&id, payload.data(), sizeof(id));
      OnTorchOomReport(ev, InProcessStack(ev, id));
      return;
    }
    default: stats_.malformed++;
  }
}

StackId EventProcessor::InProcessStack(const gf_event& ev, uint64_t id) {
  if (ev.flags & GF_EVF_AUTOGRAD_AMBIGUOUS) {
    // |id| is the number of backward() calls that ran.
    stats_.autograd_events_ambiguous++;
    return AutogradStack(ev, StackTable::kNone, AutogradAmbiguousFrame(id), StackTable::kNone);
  }
  const bool autograd = id != 0 && (ev.flags & GF_EVF_AUTOGRAD);
  if (id == 0) return InternStack(ev, {});  // no Python frames on this thread
  if (auto it = inprocess_stacks_.find({ev.pid, id}); it != inprocess_stacks_.end()) {
    if (!autograd) return it->second;
    // An engine thread's event: |id| is the backward() caller's stack.
    stats_.autograd_events++;
    return AutogradStack(ev, it->second, kAutogradFrame, StackTable::kNone);
  }
  if (frozen_) return OverBudgetStack(ev);
  if (autograd) stats_.autograd_unknown_origins++;
  stats_.inprocess_unknown_stacks++;
  return MarkerStack(ev, kStackUnknownFrame);
}

void EventProcessor::OnTorchOomReport(const gf_event& ev, StackId stack) {
  OomTorchReport report;
  report.ts_ns = ev.ts_ns;
  report.tid = ev.tid;
  report.bytes = ev.size;
  report.device = static_cast<uint32_t>(ev.arg0 & 0xff);
  report.allocated = ev.arg1;
  report.reserved = ev.arg2;
  oom_.OnTorchReport(static_cast<pid_t>(ev.pid), std::move(report), stack);
}

StackId EventProcessor::LostStack(uint32_t pid, uint8_t domain) {
  gf_event ev{};
  ev.pid = pid;
  ev.domain = domain;
  return MarkerStack(ev, kLostFrame);
}

void EventProcessor::OnLosses(std::span<const std::pair<gf_loss_key, gf_loss>> totals) {
  for (const auto& [key, total] : totals) {
    const uint64_t k = uint64_t{key.pid} << 16 | uint64_t{key.domain} << 8 | key.kind;
    gf_loss& seen = losses_seen_[k];
    if (total.records <= seen.records) continue;
    const uint64_t records = total.records - seen.records;
    const uint64_t bytes = total.bytes > seen.bytes ? total.bytes - seen.bytes : 0;
    const uint64_t objects = total.objects > seen.objects ? total.objects - seen.objects : 0;
    seen = total;
    ProcessLoss& p = losses_[key.pid];
    p.records += records;
    stats_.lost_records += records;
    if (key.kind == GF_EV_ALLOC && (key.domain == GF_DOMAIN_GPU || key.domain == GF_DOMAIN_TORCH)) {
      p.allocs += records;
      p.alloc_bytes += bytes;
      tracker_.AddLostAllocated(LostStack(key.pid, key.domain), static_cast<int64_t>(std::max(objects, records)),
                                static_cast<int64_t>(bytes));
    } else if (key.kind == GF_EV_FREE) {
      p.frees += records;
    } else if (key.kind == GF_EV_CPU_SAMPLE) {
      p.cpu_samples += records;
      cpu_.Add(LostStack(key.pid, GF_DOMAIN_CPU), 0, static_cast<int64_t>(records),
               static_cast<int64_t>(records) * cpu_period_ns_);
    } else if (key.kind == GF_EV_KERNEL_LAUNCH) {
      p.launches += records;  // their kernels are charged by share (KernelJoiner)
    } else {
      p.other += records;  // activity batches, tensor batches, stacks at entry, lifecycle
    }
  }
}

void EventProcessor::OnLostEvents(std::vector<std::pair<gf_lost_key, gf_lost_event>> events) {
  // In the order they happened (the map hands them out in hash order): an
  // address reused at once may have lost several allocations and frees.
  std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.second.ts_ns < b.second.ts_ns; });
  for (const auto& [key, lost] : events) {
    const auto pid = static_cast<pid_t>(key.pid);
    if (registry_)
      if (const ProcessInfo* info = registry_->Find(pid); info && info->exited) continue;  // its live set is gone
    if (key.kind == GF_EV_ALLOC)
      tracker_.OnLostAlloc(pid, key.domain, key.handle, key.addr, lost.size,
                           static_cast<int64_t>(std::min<uint64_t>(lost.objects, GF_PROBE_TENSOR_SAMPLE_BYTES)),
                           LostStack(key.pid, key.domain), lost.ts_ns);
    else if (key.kind == GF_EV_FREE)
      tracker_.OnLostFree(pid, key.domain, key.handle, key.addr, lost.ts_ns, key.sampled);
  }
}

void EventProcessor::ProcessExited(pid_t pid, uint64_t ts_ns) {
  const auto upid = static_cast<uint32_t>(pid);
  // What it lost in the ring is in BPF's maps by now: applied before its
  // live set goes (after, it would stay live for good).
  if (collect_losses_) collect_losses_();
  if (unwinder_) unwinder_->Invalidate(pid);
  absl::erase_if(entry_stacks_, [&](const auto& kv) { return stacks_.Get(kv.second).pid == pid; });
  oom_.OnProcessExit(pid, ts_ns);   // its live set as it was, before it goes
  nccl_.OnProcessExit(pid, ts_ns);  // its calls in flight end with it
  tracker_.OnProcessExit(pid);
  absl::erase_if(thread_labels_, [&](const auto& kv) { return kv.first >> 32 == upid; });
  joiner_.Flush(ts_ns, /*everything=*/true);  // its pooled kernels are charged before its names go
  joiner_.ForgetProcess(pid);
  route_.ForgetProcess(pid);
  launch_records_unconverted_.erase(pid);
  foreign_abi_.erase(upid);
  inprocess_since_.erase(upid);
  probe_sampled_.erase(upid);
  absl::erase_if(inprocess_stacks_, [&](const auto& kv) { return kv.first.first == upid; });
  kernel_stacks_.ForgetProcess(upid);
  if (timeline_) timeline_->OnProcessExit(pid, ts_ns);
  if (registry_) registry_->OnExit(pid);
}

void EventProcessor::OnProcessGone(pid_t pid, uint64_t now_ns) {
  stats_.exits_inferred++;
  ProcessExited(pid, now_ns);
}

void EventProcessor::UpdateTotals(const gf_event& ev) {
  // The allocator's totals as the process's live set froze (teardown frees
  // it all: totals of 0 would say nothing was held before we came).
  if (tracker_.FrozenAt(static_cast<pid_t>(ev.pid), ev.ts_ns)) return;
  totals_[ev.pid].Update(ev.arg0, ev.arg1, ev.arg2);
}

void EventProcessor::AccountAllocatedBeforeAttach() {
  if (!registry_) return;
  absl::flat_hash_map<uint32_t, int64_t> tracked;  // pid -> in-use tensor bytes we saw allocated
  for (const auto& [pid, totals] : totals_) {
    const ProcessInfo* info = registry_->Find(static_cast<pid_t>(pid));
    if (totals.known && info && info->attached_late) tracked.emplace(pid, 0);
  }
  if (tracked.empty()) return;
  AddInUse(GF_DOMAIN_TORCH, tracked);
  const std::vector<StackCounters>& counters = tracker_.counters();
  auto in_use = [&](const absl::flat_hash_map<uint32_t, StackId>& markers, uint32_t pid) -> int64_t {
    auto it = markers.find(pid);
    return it != markers.end() && it->second < counters.size() ? counters[it->second].inuse_bytes : 0;
  };
  for (const auto& [pid, seen] : tracked) {
    const int64_t marked = in_use(before_attach_stacks_, pid) + in_use(before_attach_estimate_stacks_, pid);
    const int64_t gap = std::max<int64_t>(static_cast<int64_t>(totals_[pid].allocated) - (seen - marked), 0);
    // Once its in use is sampled the gap is an estimate, and moves to a
    // marker that says so; the exact one keeps 0 from then on.
    // Sampled now or before, in-process (its hook announced an interval) or
    // by the probes: allocations made since may have been left out, taken
    // or not.
    const ProcessInfo* info = registry_->Find(static_cast<pid_t>(pid));
    const bool estimate = probe_sampled_.contains(pid) || (info && info->tensor_sample_bytes > 0) ||
                          before_attach_estimate_stacks_.contains(pid);  // for good, once said
    auto& markers = estimate ? before_attach_estimate_stacks_ : before_attach_stacks_;
    if (auto exact = before_attach_stacks_.find(pid); estimate && exact != before_attach_stacks_.end())
      tracker_.SetInUse(static_cast<pid_t>(pid), GF_DOMAIN_TORCH, exact->second, 0, 0);
    auto marker = markers.find(pid);
    if (gap == 0 && marker == markers.end()) continue;
    if (marker == markers.end()) {
      gf_event ev{};
      ev.pid = pid;
      ev.domain = GF_DOMAIN_TORCH;
      marker = markers.emplace(pid, MarkerStack(ev, estimate ? kBeforeAttachEstimateFrame : kBeforeAttachFrame)).first;
    }
    tracker_.SetInUse(static_cast<pid_t>(pid), GF_DOMAIN_TORCH, marker->second, 0, gap);
  }
}

void EventProcessor::AddInUse(uint8_t domain, absl::flat_hash_map<uint32_t, int64_t>& in_use) const {
  const std::vector<StackCounters>& counters = tracker_.counters();
  for (StackId id = 0; id < stacks_.size() && id < counters.size(); id++) {
    const StackInfo& stack = stacks_.Get(id);
    if (stack.domain != domain) continue;
    if (auto it = in_use.find(static_cast<uint32_t>(stack.pid)); it != in_use.end())
      it->second += counters[id].inuse_bytes;
  }
}

void EventProcessor::AccountHeldBeforeAttach(pid_t pid, uint64_t driver_bytes, bool lower_only) {
  const auto upid = static_cast<uint32_t>(pid);
  const pid_t one[] = {pid};
  const int64_t live = InUse(GF_DOMAIN_GPU, one)[upid];
  const int64_t marked = HeldBeforeAttach(pid);
  const auto driver = static_cast<int64_t>(std::min<uint64_t>(driver_bytes, INT64_MAX));
  int64_t held = driver - (live - marked);  // what the driver has beyond what we saw allocated
  if (lower_only) held = std::min(held, marked);
  gf_event ev{};
  ev.pid = upid;
  ev.domain = GF_DOMAIN_GPU;
  StackId marker = FindMarker(ev, kHeldBeforeAttachFrame);
  if (marker == StackTable::kNone) {
    if (held <= 0) return;  // nothing to say: no frame
    marker = MarkerStack(ev, kHeldBeforeAttachFrame);
  }
  tracker_.SetInUse(pid, GF_DOMAIN_GPU, marker, 0, std::max<int64_t>(held, 0));
}

absl::flat_hash_map<uint32_t, int64_t> EventProcessor::InUse(uint8_t domain, std::span<const pid_t> pids) const {
  absl::flat_hash_map<uint32_t, int64_t> in_use;
  for (pid_t pid : pids) in_use.emplace(static_cast<uint32_t>(pid), 0);
  AddInUse(domain, in_use);
  return in_use;
}

int64_t EventProcessor::HeldBeforeAttach(pid_t pid) {
  gf_event ev{};
  ev.pid = static_cast<uint32_t>(pid);
  ev.domain = GF_DOMAIN_GPU;
  const StackId marker = FindMarker(ev, kHeldBeforeAttachFrame);
  const std::vector<StackCounters>& counters = tracker_.counters();
  return marker != StackTable::kNone && marker < counters.size() ? counters[marker].inuse_bytes : 0;
}

std::vector<StackId> EventProcessor::RetireProcesses(std::span<const pid_t> pids) {
  if (pids.empty()) return {};
  const absl::flat_hash_set<pid_t> gone(pids.begin(), pids.end());
  std::vector<StackId> stacks;
  for (StackId id = 0; id < stacks_.size(); id++)
    if (!stacks_.Get(id).frames.empty() && gone.contains(stacks_.Get(id).pid)) stacks.push_back(id);
  oom_.Forget(pids);  // open episodes end while their stacks still mean theirs
  if (timeline_) timeline_->ForgetProcesses(pids, stacks);  // the agent's flight recorder
  tracker_.ForgetStacks(stacks);
  tracker_.ForgetPeaks(pids);
  cpu_.Forget(stacks);
  kernels_.Forget(stacks);
  nccl_.ForgetStacks(stacks);
  nccl_.ForgetProcesses(pids);
  stacks_.Retire(stacks);
  for (pid_t pid : pids) {
    const auto upid = static_cast<uint32_t>(pid);
    library_cost_by_pid_.erase(upid);
    losses_.erase(upid);
    before_attach_stacks_.erase(upid);
    before_attach_estimate_stacks_.erase(upid);
  }
  // Whatever still names a retired stack by id goes with it, in one pass
  // each: the ids are about to mean other processes' stacks.
  auto retired = [&](const auto& kv) { return stacks_.Get(kv.second).frames.empty(); };
  absl::erase_if(inprocess_stacks_, retired);
  absl::erase_if(entry_stacks_, retired);
  absl::erase_if(losses_seen_, [&](const auto& kv) { return gone.contains(static_cast<pid_t>(kv.first >> 16)); });
  return stacks;
}

void EventProcessor::OnRecord(std::span<const uint8_t> record) {
  stats_.records++;
  if (record.size() < sizeof(gf_event)) {
    stats_.malformed++;
    return;
  }
  gf_event ev;
  std::memcpy(&ev, record.data(), sizeof(ev));
  newest_ts_ns_ = std::max(newest_ts_ns_, ev.ts_ns);
  std::span<const uint8_t> body = record.subspan(sizeof(gf_event));
  const bool mixed = ev.flags & GF_EVF_USER_STACK;
  if (ev.kind == GF_EV_IO) {
    OnIo(ev, body);
    return;
  }
  // Records that carry no stack: GPU activity and kernel names.
  if (ev.kind == GF_EV_KERNEL_BATCH || ev.kind == GF_EV_KERNEL_NAME || ev.kind == GF_EV_CUPTI_STATUS ||
      ev.kind == GF_EV_TENSOR_BATCH || ev.kind == GF_EV_LIB_COST || ev.kind == GF_EV_API_BATCH ||
      ev.kind == GF_EV_LAUNCH_RECORDS || ev.kind == GF_EV_LAUNCH_WINDOW) {
    OnGpuRecord(ev, body);
    return;
  }
  stack_unknown_ = false;
  if ((ev.flags & (GF_EVF_STACK_ID | GF_EVF_STACK_NEW)) && !ExpandStackId(ev, body)) {
    stats_.malformed++;
    return;
  }
  const size_t payload = body.size();
  size_t expected = mixed ? GF_MAX_PY_FRAMES * sizeof(gf_py_frame) + sizeof(gf_user_regs) + GF_USER_STACK_BYTES
                          : ev.py_count * sizeof(gf_py_frame) + ev.native_count * sizeof(uint64_t);
  if (expected != payload || ev.py_count > GF_MAX_PY_FRAMES || ev.native_count > GF_MAX_NATIVE_FRAMES ||
      (mixed && (ev.native_count != 0 || ev.user_stack_len > GF_USER_STACK_BYTES))) {
    stats_.malformed++;
    return;
  }
  if (ev.kind < kKinds) by_kind_[ev.kind]++;
  auto pid = static_cast<pid_t>(ev.pid);
  bool gated = ev.flags & GF_EVF_GATED;
  bool handle = ev.flags & GF_EVF_HANDLE;
  switch (ev.kind) {
    case GF_EV_CALL_STACK:
      if (mixed) entry_stacks_[ev.tid] = RecordStack(ev, body, mixed);
      break;
    case GF_EV_CPU_SAMPLE: {
      if (registry_) registry_->Observe(pid);
      StackId stack = RecordStack(ev, body, mixed);
      stats_.cpu_samples++;
      cpu_.Add(stack, thread_names_ ? ThreadLabel(ev) : 0, 1, cpu_period_ns_);
      if (timeline_) timeline_->OnCpuSample(pid, ev.tid, ev.ts_ns, stack);
      if (utilization_) utilization_->OnCpuSample(pid, ev.ts_ns, stack);
      nccl_.OnCpuSample(pid, ev.ts_ns, stack);  // one hash lookup: kept only for processes with a rank
      break;
    }
    case GF_EV_KERNEL_LAUNCH: {
      if (ForeignAbi(pid)) {
        stats_.foreign_abi_records++;
        break;
      }
      StackId stack = RecordStack(ev, body, mixed);
      if (!(ev.flags & GF_EVF_BACKWARD_CALLER)) stack = AutogradLaunchStack(ev, stack);
      // The launch route's hit has no correlation ID yet: its record, a
      // flush later, gives it one (OnGpuRecord).
      if (ev.flags & GF_EVF_LAUNCH_HIT) {
        nccl_.OnLaunchHit(pid, ev.tid, ev.ts_ns);  // inside an NCCL call: its kernel, once joined
        route_.OnHit(pid, static_cast<uint32_t>(ev.addr), ev.tid, ev.ts_ns, stack, static_cast<uint32_t>(ev.arg1));
      } else {
        OnLaunchStack(pid, ev.tid, static_cast<uint32_t>(ev.arg0), static_cast<uint32_t>(ev.arg1), stack, ev.ts_ns);
      }
      break;
    }
    case GF_EV_ALLOC: {
      if (SupersededByInProcess(ev)) break;
      StackId stack = AllocationStack(ev, body, mixed);
      if (ev.domain == GF_DOMAIN_GPU) oom_.OnDeviceAlloc(pid, ev.tid, ev.ts_ns);
      else oom_.BeforeTensorEvent(pid, ev.ts_ns);
      const int64_t before = InUseIfTimeline(ev, ev.domain);
      // Taken by the probes' sampling (past the process's start-up where
      // tensor_sampling is sampled, or GF_SHED_TENSOR_SAMPLED): it stands for
      // at least the interval, as the draw that took it assumed.
      const bool sampled = ev.domain == GF_DOMAIN_TORCH && (ev.flags & GF_EVF_SAMPLED);
      if (sampled) probe_sampled_.insert(ev.pid);
      const uint64_t stands_for = sampled ? std::max<uint64_t>(ev.size, GF_PROBE_TENSOR_SAMPLE_BYTES) : 0;
      tracker_.OnAlloc(pid, ev.domain, handle, ev.addr, ev.size, stack, stands_for, ev.ts_ns);
      TimelineMemory(ev, ev.domain, stack, before);
      if (ev.api == GF_API_TORCH_REPORT) UpdateTotals(ev);
      break;
    }
    case GF_EV_FREE:
      if (SupersededByInProcess(ev)) break;
      if (ev.domain == GF_DOMAIN_TORCH) oom_.BeforeTensorEvent(pid, ev.ts_ns);
      {
        const int64_t before = InUseIfTimeline(ev, ev.domain);
        const bool torch = ev.domain == GF_DOMAIN_TORCH;
        if (torch && (ev.flags & GF_EVF_SAMPLED)) probe_sampled_.insert(ev.pid);
        // Sent while the probes sampled, or in a process they sampled before:
        // its block may never have been taken.
        const bool maybe_unsampled = torch && !probe_sampled_.empty() && probe_sampled_.contains(ev.pid);
        tracker_.OnFree(pid, ev.domain, handle, ev.addr, ev.ts_ns, maybe_unsampled);
        TimelineMemory(ev, ev.domain, StackTable::kNone, before);
      }
      if (ev.api == GF_API_TORCH_REPORT) UpdateTotals(ev);
      break;
    case GF_EV_ALLOC_FAILED:
      oom_.OnAllocFailed(pid, ev.tid, ev.ts_ns, ev.api, ev.size, static_cast<uint32_t>(ev.arg0),
                         AllocationStack(ev, body, mixed));
      break;
    case GF_EV_OOM_REPORT:
      if (SupersededByInProcess(ev)) break;  // its own report comes in its batches
      OnTorchOomReport(ev, RecordStack(ev, body, mixed));
      break;
    case GF_EV_MAP:
      stats_.map_calls++;
      stats_.mapped_bytes += ev.size;
      tracker_.OnMap(pid, ev.addr, ev.size, ev.arg0, ev.ts_ns);  // an expandable segment's chunk
      break;
    case GF_EV_UNMAP:
      stats_.map_calls++;
      stats_.mapped_bytes -= ev.size;
      tracker_.OnUnmap(pid, ev.addr, ev.size, ev.ts_ns);
      break;
    case GF_EV_LIB_MAPPED:
      if (unwinder_) unwinder_->Invalidate(pid);
      if (registry_) registry_->OnLibraryMapped(pid, gated, ev.arg0, ev.arg1, ev.ts_ns);
      break;
    case GF_EV_EXEC:
      if (unwinder_) unwinder_->Invalidate(pid);
      kernel_stacks_.ForgetProcess(ev.pid);  // the new image's stacks have IDs of their own
      foreign_abi_.erase(ev.pid);            // the new image says its own, if it loads the library
      inprocess_since_.erase(ev.pid);        // and its hook goes live again, or not
      absl::erase_if(inprocess_stacks_, [&](const auto& kv) { return kv.first.first == ev.pid; });
      if (registry_) registry_->OnExec(pid, gated);
      break;
    case GF_EV_FORKED:
      // Sent from the child itself: pid is the child, arg0 its parent.
      if (registry_) registry_->OnForked(pid, static_cast<pid_t>(ev.arg0), gated, ev.ts_ns);
      break;
    case GF_EV_PY_FINALIZE:
      tracker_.FreezeProcess(pid, ev.ts_ns);
      if (registry_) registry_->OnFinalize(pid, gated);
      break;
    case GF_EV_EXIT: ProcessExited(pid, ev.ts_ns); break;
    case GF_EV_NCCL_CALL: {
      // Every field is the target's to choose: the tracker bounds what it keeps.
      NcclCall call;
      call.pid = pid;
      call.tid = ev.tid;
      call.ts_ns = ev.ts_ns;
      call.api = ev.api;
      call.count = ev.size;
      call.datatype = static_cast<uint32_t>(ev.arg0);
      call.op = static_cast<uint32_t>(ev.arg0 >> 32);
      call.peer = static_cast<int32_t>(static_cast<uint32_t>(ev.arg1));
      if (GF_API_IS_NCCL_INIT(ev.api)) {
        call.id_lo = ev.arg2;
        call.id_hi = ev.addr;
      } else {
        call.comm = ev.addr;
        call.stream = ev.arg2;
      }
      call.stack = RecordStack(ev, body, mixed);
      nccl_.OnCall(call);
      if (timeline_) {
        const uint64_t bytes = NcclCallBytes(call.api, call.count, call.datatype).value_or(0);
        timeline_->OnNcclCall(pid, call.tid, call.ts_ns, call.api, call.comm,
                              static_cast<int64_t>(std::min<uint64_t>(bytes, INT64_MAX)), call.peer, call.datatype,
                              call.stack);
      }
      break;
    }
    case GF_EV_NCCL_DONE:
      nccl_.OnReturn(pid, ev.tid, ev.ts_ns, ev.addr, static_cast<uint32_t>(ev.arg0));
      if (timeline_) timeline_->OnNcclReturn(pid, ev.tid, ev.ts_ns, static_cast<uint32_t>(ev.arg0));
      break;
    case GF_EV_CUDA_SYNC_ENTER: {
      // Only NCCL processes send it (bpf/cuda_sync.bpf.h): a wait that
      // outlasts the hang threshold there may be a GPU-side NCCL hang.
      if (!GF_API_IS_CUDA_SYNC(ev.api)) {
        stats_.malformed++;
        break;
      }
      NcclSyncCall call;
      call.pid = pid;
      call.tid = ev.tid;
      call.ts_ns = ev.ts_ns;
      call.api = ev.api;
      call.object = ev.addr;
      call.stack = RecordStack(ev, body, mixed);
      nccl_.OnSyncEnter(call);
      break;
    }
    case GF_EV_THREAD_ENDED:
      // The thread ended inside these calls; its process lives on.
      nccl_.OnThreadEnded(pid, ev.tid, ev.ts_ns, static_cast<uint32_t>(ev.arg0));
      if (timeline_ && (ev.arg0 & GF_ENDED_NCCL_CALL)) timeline_->OnThreadEnded(pid, ev.tid, ev.ts_ns);
      break;
    case GF_EV_CUDA_SYNC:
      // The target's numbers: an API that is not a synchronise call, or an
      // end before the start, is no wait.
      if (!GF_API_IS_CUDA_SYNC(ev.api) || ev.arg0 > ev.ts_ns) {
        stats_.malformed++;
        break;
      }
    {
      stats_.sync_calls++;
      nccl_.OnSyncReturn(pid, ev.tid, ev.ts_ns, static_cast<uint32_t>(ev.arg1));  // a GPU-side hang ends
      if (!utilization_ && !timeline_) {
        stats_.sync_calls_unused++;  // neither kernel time nor a timeline takes them
        break;
      }
      const StackId stack = RecordStack(ev, body, mixed);
      if (utilization_) utilization_->OnSyncCall(pid, ev.api, ev.arg0, ev.ts_ns, stack);
      if (timeline_) timeline_->OnSyncCall(pid, ev.tid, ev.arg0, ev.ts_ns, ev.api, ev.addr, stack, ev.arg1);
      break;
    }
    default: stats_.malformed++;
  }
}

}  // namespace gpuflame::profiler
