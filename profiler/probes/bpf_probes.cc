#include "profiler/probes/bpf_probes.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/scoped_fd.h"
#include "gpuflame_bpf.skel.h"
#include "profiler/probes/uprobe_multi.h"

namespace gpuflame::profiler {
namespace {

absl::Status Errno(int err, std::string_view what) {
  err = err < 0 ? -err : err;
  std::string msg = absl::StrCat(std::string(what), ": ", std::strerror(err));
  if (err == EPERM || err == EACCES) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

int QuietPrint(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level != LIBBPF_WARN || getenv("GPUFLAME_BPF_DEBUG") == nullptr) return 0;
  return vfprintf(stderr, fmt, args);
}

bpf_program* ProgramFor(gpuflame_bpf* s, ProbeProgram p) {
  switch (p) {
    case ProbeProgram::kAllocEnter: return s->progs.alloc_enter;
    case ProbeProgram::kAllocExit: return s->progs.alloc_exit;
    case ProbeProgram::kFreeEnter: return s->progs.free_enter;
    case ProbeProgram::kFreeExit: return s->progs.free_exit;
    case ProbeProgram::kMapEnter: return s->progs.map_enter;
    case ProbeProgram::kMapExit: return s->progs.map_exit;
    case ProbeProgram::kTorchReport: return s->progs.torch_report;
    case ProbeProgram::kPyFinalize: return s->progs.py_finalize;
    case ProbeProgram::kKernelLaunch: return s->progs.kernel_launch;
    case ProbeProgram::kKernelBatch: return s->progs.kernel_batch;
    case ProbeProgram::kApiBatch: return s->progs.api_batch;
    case ProbeProgram::kKernelName: return s->progs.kernel_name;
    case ProbeProgram::kCuptiStatus: return s->progs.cupti_status;
    case ProbeProgram::kTensorBatch: return s->progs.tensor_batch;
    case ProbeProgram::kUsdtSwitch: return s->progs.usdt_switch;
    case ProbeProgram::kLibCost: return s->progs.lib_cost;
    case ProbeProgram::kHello: return s->progs.hello;
    case ProbeProgram::kThrift: return s->progs.thrift;
    case ProbeProgram::kEngineExecute: return s->progs.engine_execute;
    case ProbeProgram::kTorchOom: return s->progs.torch_oom;
    case ProbeProgram::kNcclEnter: return s->progs.nccl_enter;
    case ProbeProgram::kNcclExit: return s->progs.nccl_exit;
    case ProbeProgram::kCudaSyncEnter: return s->progs.cuda_sync_enter;
    case ProbeProgram::kCudaSyncExit: return s->progs.cuda_sync_exit;
    case ProbeProgram::kLaunchEntry: return s->progs.launch_entry;
    case ProbeProgram::kLaunchWindow: return s->progs.launch_window;
    case ProbeProgram::kLaunchRecords: return s->progs.launch_records;
  }
  return nullptr;
}

// USDT probes' programs: the pytorch:malloc/free notes have their own
// (their arguments are read through the spec), the rest are USDT-only.
bpf_program* UsdtProgramFor(gpuflame_bpf* s, ProbeProgram p) {
  if (p == ProbeProgram::kAllocEnter) return s->progs.torch_malloc;
  if (p == ProbeProgram::kFreeEnter) return s->progs.torch_free;
  return ProgramFor(s, p);
}

// The programs attached as uprobes (AttachUprobe, AttachUsdt); every other
// is a tracepoint's or a perf event's, or kThrift's (AttachSwitch: one
// perf-event uprobe per link, which a program loaded for uprobe_multi links
// could not take).
constexpr ProbeProgram kPlainUprobes[] = {
    ProbeProgram::kAllocEnter, ProbeProgram::kAllocExit,     ProbeProgram::kFreeEnter,    ProbeProgram::kFreeExit,
    ProbeProgram::kMapEnter,   ProbeProgram::kMapExit,       ProbeProgram::kTorchReport,  ProbeProgram::kPyFinalize,
    ProbeProgram::kHello,      ProbeProgram::kEngineExecute, ProbeProgram::kTorchOom,     ProbeProgram::kNcclEnter,
    ProbeProgram::kNcclExit,   ProbeProgram::kCudaSyncEnter, ProbeProgram::kCudaSyncExit, ProbeProgram::kLaunchEntry,
};
constexpr ProbeProgram kUsdtPrograms[] = {
    ProbeProgram::kAllocEnter, ProbeProgram::kFreeEnter,  ProbeProgram::kKernelLaunch, ProbeProgram::kKernelBatch,
    ProbeProgram::kApiBatch,   ProbeProgram::kKernelName, ProbeProgram::kCuptiStatus,  ProbeProgram::kTensorBatch,
    ProbeProgram::kUsdtSwitch, ProbeProgram::kLibCost,    ProbeProgram::kLaunchWindow, ProbeProgram::kLaunchRecords,
};

}  // namespace

absl::StatusOr<std::unique_ptr<BpfProbes>> BpfProbes::Load(const Options& options) {
  libbpf_set_print(QuietPrint);
  std::unique_ptr<BpfProbes> p(new BpfProbes());
  p->skel_.reset(gpuflame_bpf__open());
  if (!p->skel_) return Errno(errno, "opening the BPF object");
  gpuflame_bpf* skel = p->skel_.get();
  skel->rodata->filter_targets = options.filter_targets;
  skel->rodata->capture_native_fallback = options.native_fallback;
  skel->rodata->wakeup_bytes = options.ring_bytes / 8;
  skel->rodata->ring_bytes = options.ring_bytes;
  skel->rodata->native_stacks = static_cast<uint32_t>(options.native_stacks);
  skel->rodata->gate_new_files = options.gate_new_files;
  skel->rodata->follow_forks = options.follow_forks;
  // Our pid is the kernel's tgid: gpuflame runs in the host's pid namespace (hostPID).
  skel->rodata->self_tgid = static_cast<uint32_t>(getpid());
  skel->rodata->bench_stop_at = options.bench_stop_at;
  skel->rodata->intern_stacks = options.intern_stacks;
  skel->rodata->sync_returns_all = options.sync_returns_all;
  skel->rodata->tensor_sample_after_ns = options.tensor_sample_after_ns;
  skel->rodata->io_min_bytes = options.io_spans.min_bytes;
  skel->rodata->io_min_ns = options.io_spans.min_us * 1000;
  skel->rodata->io_max_per_process = options.io_spans.max_per_process;
  // Without the timeline the I/O programs are not loaded: every syscall of
  // the machine would otherwise run them.
  bpf_program__set_autoload(skel->progs.io_enter, options.io_spans.on);
  bpf_program__set_autoload(skel->progs.io_exit, options.io_spans.on);
  if (int err = bpf_map__set_max_entries(skel->maps.events,
                                         static_cast<uint32_t>(options.ring_bytes)))
    return Errno(err, "sizing the ring buffer");
  // Uprobes (USDT sites too) as uprobe_multi links where the kernel makes
  // them (uprobe_multi.h says why); GPUFLAME_UPROBE_MULTI=0 keeps perf
  // events (benchmarks comparing the two). Decided before load: a program
  // loaded for one kind cannot attach as the other.
  const char* multi_env = getenv("GPUFLAME_UPROBE_MULTI");
  p->uprobe_multi_ = !(multi_env && std::strcmp(multi_env, "0") == 0) && UprobeMultiSupported();
  if (p->uprobe_multi_) {
    for (ProbeProgram program : kPlainUprobes)
      bpf_program__set_expected_attach_type(ProgramFor(skel, program),
                                            static_cast<bpf_attach_type>(kBpfTraceUprobeMulti));
    for (ProbeProgram program : kUsdtPrograms)
      bpf_program__set_expected_attach_type(UsdtProgramFor(skel, program),
                                            static_cast<bpf_attach_type>(kBpfTraceUprobeMulti));
  }
  if (int err = gpuflame_bpf__load(skel)) return Errno(err, "loading the BPF programs");
  p->usdt_specs_ = std::make_shared<UsdtSpecTable>(bpf_map__fd(skel->maps.__bpf_usdt_specs),
                                                   bpf_map__max_entries(skel->maps.__bpf_usdt_specs));
  if (options.follow_forks || options.reap_in_background) p->reaper_ = std::make_unique<LinkReaper>(p->last_attach_ns_);

  // Before any gate can fire: a process stopped by the machine-wide gate is
  // known to no one but this map until its record is read, so the machine-wide
  // gate runs only once the guardian holds the map itself.
  absl::Status shared = options.share_held_map ? options.share_held_map(bpf_map__fd(skel->maps.held))
                                               : absl::FailedPreconditionError("no guardian");
  if (shared.ok()) {
    __atomic_store_n(&skel->bss->held_guarded, true, __ATOMIC_SEQ_CST);
  } else if (options.gate_new_files) {
    p->gate_warning_ = absl::StrCat("new processes are not held until their probes are in place (", shared.message(),
                                    "): gpuflame's guardian could not take the list of held processes, which it "
                                    "needs to resume them should gpuflame be killed");
  }
  // The SIGCONT and exit hooks first: they keep `held` exact from the first
  // stop on.
  for (bpf_program* prog : {skel->progs.watch_sigcont, skel->progs.watch_exit, skel->progs.watch_mmap,
                            skel->progs.watch_exec, skel->progs.watch_fork}) {
    LinkPtr link(bpf_program__attach(prog));
    if (!link)
      return Errno(errno, absl::StrCat("attaching ", bpf_program__name(prog)));
    p->links_.push_back(ProbeLink(std::move(link)));
  }
  if (options.io_spans.on) {
    for (bpf_program* prog : {skel->progs.io_exit, skel->progs.io_enter}) {
      LinkPtr link(bpf_program__attach(prog));
      if (!link)
        return Errno(errno, absl::StrCat("attaching ", bpf_program__name(prog), " (the timeline's I/O spans)"));
      p->links_.push_back(ProbeLink(std::move(link)));
    }
    p->io_spans_attached_ = true;
  }
  return p;
}

// Teardown order is the members' declaration order, reversed (see the header).
BpfProbes::~BpfProbes() {
  // The probes of processes alive at the end (record's command still
  // running, Ctrl-C) and those the reaper had not come to are left to the
  // kernel, which closes them as gpuflame exits: waiting a grace period
  // each here would hold the user's terminal for seconds.
  reaper_.reset();
  for (auto& [pid, links] : process_links_)
    for (ProbeLink& l : links) AbandonLink(std::move(l));
}

void BpfProbes::SkeletonDeleter::operator()(gpuflame_bpf* skel) const { gpuflame_bpf__destroy(skel); }

void BpfProbes::Keep(pid_t pid, ProbeLink link) {
  last_attached_ = pid;
  if (pid == kEveryProcess) {
    links_.push_back(std::move(link));
  } else {
    process_links_[pid].push_back(std::move(link));
  }
}

void BpfProbes::Destroy(ProbeLink link) {
  if (reaper_) reaper_->Reap(std::move(link));
  // else destroyed on return: the link closes, then its specs go
}

void BpfProbes::NoteAttach() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  last_attach_ns_.store(now.tv_sec * 1'000'000'000ll + now.tv_nsec, std::memory_order_relaxed);
}

absl::Status BpfProbes::AttachUprobe(pid_t pid, const std::string& path, uint64_t offset, ProbeProgram program,
                                     bool retprobe, uint64_t cookie, uint64_t semaphore_offset) {
  const UprobeSite site{.offset = offset,
                        .program = program,
                        .retprobe = retprobe,
                        .cookie = cookie,
                        .semaphore_offset = semaphore_offset};
  return AttachUprobes(pid, path, {&site, 1}).status;
}

BpfProbes::Attached BpfProbes::AttachUprobes(pid_t pid, const std::string& path, std::span<const UprobeSite> sites) {
  return AttachSites(pid, path, sites, /*usdt=*/false);
}

BpfProbes::Attached BpfProbes::AttachUprobesOwned(pid_t pid, const std::string& path, std::span<const UprobeSite> sites,
                                                  std::vector<ProbeLink>& links) {
  return AttachSites(pid, path, sites, /*usdt=*/false, &links);
}

std::vector<BpfProbes::UprobeSite> BpfProbes::AttachOrder(std::span<const UprobeSite> sites) {
  // A call that enters between its entry probe's attach and its return
  // probe's would be seen entering and never returning: the kernel sets a
  // return probe's trap at the function's entry. The probes that pair an
  // entry with its thread's return (NCCL calls, synchronise calls, the
  // driver's nested calls: bpf/) take one so seen as still in flight and
  // fold every later call of that thread into it, for good (the agent on a
  // one-rank torch.distributed job found running, on an H100: one NCCL call
  // in 15 s, and a hang said in ncclGroupStart). Return probes go first:
  // such a call is then seen returning without its entry, which each
  // counts (GF_STAT_CTX_MISSING) and drops. A return probe refused keeps
  // its entry probe out as well (AttachSites).
  std::vector<UprobeSite> ordered(sites.begin(), sites.end());
  std::stable_partition(ordered.begin(), ordered.end(), [](const UprobeSite& s) { return s.retprobe; });
  return ordered;
}

BpfProbes::Attached BpfProbes::AttachSites(pid_t pid, const std::string& path, std::span<const UprobeSite> sites,
                                           bool usdt, std::vector<ProbeLink>* owned) {
  auto keep = [&](ProbeLink link) {
    if (owned) owned->push_back(std::move(link));
    else Keep(pid, std::move(link));
  };
  NoteAttach();
  auto program_of = [&](ProbeProgram p) { return usdt ? UsdtProgramFor(skel_.get(), p) : ProgramFor(skel_.get(), p); };
  // Each link's own references to its sites' specs (AttachUsdt holds
  // Acquire's until the links have theirs).
  auto specs_of = [&](std::span<const uint64_t> cookies) {
    if (!usdt) return UsdtSpecRefs();
    return UsdtSpecRefs(usdt_specs_, std::vector<uint32_t>(cookies.begin(), cookies.end()));
  };
  Attached out;
  auto refused = [&out](absl::Status st) {
    if (out.status.ok()) out.status = std::move(st);
  };
  const std::vector<UprobeSite> ordered = AttachOrder(sites);
  // Return probes that did not go in: their functions' entry probes stay
  // out too, or each call would be seen never returning (AttachOrder).
  absl::flat_hash_set<uint64_t> returns_refused;
  auto entry_unpaired = [&](const UprobeSite& s) { return !s.retprobe && returns_refused.contains(s.offset); };
  auto entries_left_out = [&](size_t n) {
    if (n) refused(absl::UnavailableError(absl::StrCat(n, " entry probes in ", path, " left out with their returns")));
  };
  if (!uprobe_multi_) {
    size_t left_out = 0;
    for (const UprobeSite& s : ordered) {
      if (entry_unpaired(s)) {
        left_out++;
        continue;
      }
      LIBBPF_OPTS(bpf_uprobe_opts, opts, .ref_ctr_offset = s.semaphore_offset, .bpf_cookie = s.cookie,
                  .retprobe = s.retprobe);
      LinkPtr link(bpf_program__attach_uprobe_opts(program_of(s.program), pid, path.c_str(), s.offset, &opts));
      if (!link) {
        refused(Errno(errno, absl::StrCat("uprobe on ", path, "+0x", absl::Hex(s.offset))));
        if (s.retprobe) returns_refused.insert(s.offset);
        continue;
      }
      keep(ProbeLink(std::move(link), specs_of({&s.cookie, 1})));
      out.attached++;
    }
    entries_left_out(left_out);
    return out;
  }
  // One link per (program, kind), in the order the groups first appear.
  std::vector<std::pair<std::pair<ProbeProgram, bool>, std::vector<MultiSite>>> groups;
  for (const UprobeSite& s : ordered) {
    const auto key = std::pair{s.program, s.retprobe};
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) it = groups.insert(groups.end(), {key, {}});
    it->second.push_back({.offset = s.offset, .cookie = s.cookie, .semaphore = s.semaphore_offset});
  }
  size_t left_out = 0;
  for (auto& [key, group] : groups) {
    if (!key.second) {  // entries: the return groups, first, have gone in or not
      const size_t before = group.size();
      std::erase_if(group, [&](const MultiSite& m) { return returns_refused.contains(m.offset); });
      left_out += before - group.size();
      if (group.empty()) continue;
    }
    const int prog_fd = bpf_program__fd(program_of(key.first));
    absl::StatusOr<base::ScopedFd> fd =
        CreateUprobeMultiLink(prog_fd, path, group, key.second, pid == kEveryProcess ? 0 : pid);
    if (!fd.ok()) {
      refused(fd.status());
      if (key.second)
        for (const MultiSite& m : group) returns_refused.insert(m.offset);
      continue;
    }
    std::vector<uint64_t> cookies;
    for (const MultiSite& m : group) cookies.push_back(m.cookie);
    keep(ProbeLink(std::move(*fd), specs_of(cookies)));
    out.attached += group.size();
  }
  entries_left_out(left_out);
  return out;
}

BpfProbes::Attached BpfProbes::AttachUsdt(pid_t pid, const std::string& path, std::span<const UsdtSite> sites,
                                          ProbeProgram program, std::vector<ProbeLink>* owned) {
  if (sites.empty())
    return {.attached = 0, .status = absl::NotFoundError(absl::StrCat("no such USDT probe in ", path))};
  std::vector<UprobeSite> uprobes;
  std::vector<uint32_t> ids;
  absl::Status refused;
  for (const UsdtSite& s : sites) {
    absl::StatusOr<uint32_t> id = usdt_specs_->Acquire(s.spec);
    if (!id.ok()) {
      refused = id.status();
      continue;
    }
    ids.push_back(*id);
    uprobes.push_back({.offset = s.offset,
                       .program = program,
                       .retprobe = false,
                       .cookie = *id,
                       .semaphore_offset = s.semaphore_offset});
  }
  Attached a = AttachSites(pid, path, uprobes, /*usdt=*/true, owned);
  for (uint32_t id : ids) usdt_specs_->Release(id);  // Acquire's: each link holds its own
  if (a.status.ok()) a.status = refused;
  return a;
}

absl::StatusOr<ProbeLink> BpfProbes::AttachSwitch(pid_t pid, const std::string& path, uint64_t offset,
                                                  uint64_t semaphore_offset, ProbeProgram program) {
  NoteAttach();
  LIBBPF_OPTS(bpf_uprobe_opts, opts, .ref_ctr_offset = semaphore_offset);
  LinkPtr link(bpf_program__attach_uprobe_opts(ProgramFor(skel_.get(), program), pid, path.c_str(), offset, &opts));
  if (!link) return Errno(errno, absl::StrCat("uprobe on ", path, "+0x", absl::Hex(offset)));
  return ProbeLink(std::move(link));
}

void BpfProbes::Release(ProbeLink link) { Destroy(std::move(link)); }

void BpfProbes::DetachLast() {
  if (last_attached_ == kEveryProcess) {
    if (!links_.empty()) links_.pop_back();
    return;
  }
  auto it = process_links_.find(last_attached_);
  if (it == process_links_.end() || it->second.empty()) return;
  ProbeLink last = std::move(it->second.back());
  it->second.pop_back();
  Destroy(std::move(last));
}

void BpfProbes::DetachProcess(pid_t pid) {
  // Its uprobes go, and the USDT specs only they held return for reuse: a
  // pid reused later starts with none.
  auto it = process_links_.find(pid);
  if (it == process_links_.end()) return;
  std::vector<ProbeLink> links = std::move(it->second);
  process_links_.erase(it);
  for (ProbeLink& l : links) Destroy(std::move(l));
}

void BpfProbes::CloseUprobeMultiLinks() {
  std::vector<ProbeLink> doomed;
  auto take = [&doomed](std::vector<ProbeLink>& links) {
    for (ProbeLink& l : links)
      if (l.fd) doomed.push_back(std::move(l));
    std::erase_if(links, [](const ProbeLink& l) { return !l; });
  };
  take(links_);
  for (auto& [pid, links] : process_links_) take(links);
  // Each close waits for its own grace period (uprobe_unregister_sync),
  // under no global lock: closed side by side, the waits overlap (17 links
  // one after another took 0.43-0.46 s on the development VM, side by side
  // 23 ms). At most kClosers threads (record may follow many processes,
  // each with its own links), each closing every kClosers-th.
  constexpr size_t kClosers = 32;
  const size_t n = doomed.size();
  std::vector<std::thread> closers;
  for (size_t first = 0; first < std::min(n, kClosers); first++) {
    try {
      closers.emplace_back([&doomed, first, n] {
        for (size_t i = first; i < n; i += kClosers) {
          ProbeLink gone = std::move(doomed[i]);  // closes, then drops its specs
        }
      });
    } catch (const std::system_error&) {
      break;  // no thread to be had: the rest close below, one after another
    }
  }
  for (std::thread& t : closers) t.join();
  doomed.clear();  // what no thread came to
}

size_t BpfProbes::link_count() const {
  size_t n = links_.size();
  for (const auto& [pid, links] : process_links_) n += links.size();
  return n;
}

absl::Status BpfProbes::StartCpuSampling(int hz) {
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return Errno(-cpus, "counting CPUs");
  int started = 0;
  for (int cpu = 0; cpu < cpus; cpu++) {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    // A fixed period of CPU time (not a frequency the kernel tunes): every
    // sample then stands for exactly this many nanoseconds on CPU.
    attr.sample_period = 1'000'000'000ull / static_cast<uint64_t>(hz);
    base::ScopedFd fd(static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC)));
    if (!fd) {
      if (errno == ENODEV) continue;  // offline CPU
      return Errno(errno, absl::StrCat("opening a cpu-clock perf event on CPU ", cpu));
    }
    LinkPtr link(bpf_program__attach_perf_event(skel_->progs.cpu_sample, fd.get()));
    if (!link) return Errno(errno, "attaching the CPU sampler");  // |fd| closed on return
    // The link owns the perf event fd from here (bpf_link__destroy closes it).
    (void)fd.release();
    links_.push_back(ProbeLink(std::move(link)));
    started++;
  }
  if (started == 0) return absl::UnavailableError("no online CPU accepted a cpu-clock perf event");
  return absl::OkStatus();
}

absl::Status BpfProbes::SetTarget(pid_t pid, uint32_t flags) {
  uint32_t key = static_cast<uint32_t>(pid);
  if (bpf_map__update_elem(skel_->maps.targets, &key, sizeof(key), &flags, sizeof(flags), BPF_ANY))
    return Errno(errno, "updating targets");
  return absl::OkStatus();
}

void BpfProbes::RemoveTarget(pid_t pid) {
  uint32_t key = static_cast<uint32_t>(pid);
  bpf_map__delete_elem(skel_->maps.targets, &key, sizeof(key), 0);
}

absl::Status BpfProbes::SetPython(pid_t pid, const gf_py_proc& layout) {
  uint32_t key = static_cast<uint32_t>(pid);
  gf_py_proc proc = layout;
  // A new seed for the process's stack IDs (gpuflame_abi.h): after an exec
  // or a reused pid, no ID matches one user space holds for another image.
  proc.generation = ++py_generation_;
  if (bpf_map__update_elem(skel_->maps.py_procs, &key, sizeof(key), &proc, sizeof(proc), BPF_ANY))
    return Errno(errno, "updating py_procs");
  return absl::OkStatus();
}

void BpfProbes::OpenGates() { __atomic_store_n(&skel_->bss->gates_open, true, __ATOMIC_SEQ_CST); }

void BpfProbes::MarkCovered(uint64_t inode, uint64_t dev) {
  const gf_file_key key{inode, dev};
  const uint8_t yes = 1;
  // A full map (8192 files) only means later mappers of new files wait too.
  (void)bpf_map__update_elem(skel_->maps.covered_files, &key, sizeof(key), &yes, sizeof(yes), BPF_ANY);
}

void BpfProbes::RemovePython(pid_t pid) {
  uint32_t key = static_cast<uint32_t>(pid);
  bpf_map__delete_elem(skel_->maps.py_procs, &key, sizeof(key), 0);
}

absl::StatusOr<std::unique_ptr<RingReader>> BpfProbes::StartRingReader(const RingReader::Options& options) const {
  auto reader = RingReader::Start(bpf_map__fd(skel_->maps.events), options, bpf_map__fd(skel_->maps.lifecycle));
  if (!reader.ok()) return absl::Status(reader.status().code(), absl::StrCat("events ring buffer: ", reader.status().message()));
  return reader;
}

void BpfProbes::SetShed(uint32_t shed) {
  // The .bss global is mmapped: a plain store, seen by the next event.
  __atomic_store_n(&skel_->bss->shed, shed, __ATOMIC_RELAXED);
}

std::array<uint64_t, GF_STAT_MAX> BpfProbes::ReadStats() const {
  std::array<uint64_t, GF_STAT_MAX> out{};
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return out;
  std::vector<uint64_t> values(static_cast<size_t>(ncpu));
  for (uint32_t i = 0; i < GF_STAT_MAX; i++) {
    if (bpf_map__lookup_elem(skel_->maps.stats, &i, sizeof(i), values.data(),
                             values.size() * sizeof(uint64_t), 0))
      continue;
    for (uint64_t v : values) out[i] += v;
  }
  return out;
}

std::vector<std::pair<gf_loss_key, gf_loss>> BpfProbes::ReadLosses(size_t max) const {
  std::vector<std::pair<gf_loss_key, gf_loss>> out;
  gf_loss_key key{}, next{};
  const gf_loss_key* prev = nullptr;
  while (out.size() < max && !bpf_map__get_next_key(skel_->maps.losses, prev, &next, sizeof(next))) {
    gf_loss value{};
    if (!bpf_map__lookup_elem(skel_->maps.losses, &next, sizeof(next), &value, sizeof(value), 0))
      out.emplace_back(next, value);
    key = next;
    prev = &key;
  }
  return out;
}

std::vector<std::pair<gf_lost_key, gf_lost_event>> BpfProbes::TakeLostEvents(size_t max) {
  std::vector<std::pair<gf_lost_key, gf_lost_event>> out;
  gf_lost_key key{};
  // Always from the first key: each one read is deleted, so the walk never
  // loses its place, and BPF may add entries meanwhile (read next time).
  while (out.size() < max && !bpf_map__get_next_key(skel_->maps.lost_events, nullptr, &key, sizeof(key))) {
    gf_lost_event value{};
    // A look-up then a delete: BPF may overwrite the entry in between (the
    // same address lost again), which then goes uncounted here but counted
    // in `losses`. lookup_and_delete would close that gap from Linux 5.14.
    const bool read = !bpf_map__lookup_elem(skel_->maps.lost_events, &key, sizeof(key), &value, sizeof(value), 0);
    if (bpf_map__delete_elem(skel_->maps.lost_events, &key, sizeof(key), 0) && errno != ENOENT) break;
    if (read) out.emplace_back(key, value);
  }
  return out;
}

void BpfProbes::ForgetLosses(pid_t pid) {
  for (const auto& [key, loss] : ReadLosses(16384))
    if (key.pid == static_cast<uint32_t>(pid)) bpf_map__delete_elem(skel_->maps.losses, &key, sizeof(key), 0);
}

const bpf_object* BpfProbes::object() const { return skel_->obj; }

}  // namespace gpuflame::profiler
