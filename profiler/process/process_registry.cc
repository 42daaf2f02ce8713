#include "profiler/process/process_registry.h"

#include "profiler/process/run_control.h"
#include "profiler/process/usdt_sites.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/scoped_fd.h"
#include "bpf/gpuflame_abi.h"
#include "inspect/bounded_read.h"
#include "inspect/mount_types.h"
#include "inspect/proc_environ.h"
#include "inspect/proc_stat.h"
#include "inspect/process_memory.h"
#include "inspect/thread_group.h"
#include "profiler/process/python_discovery.h"

namespace gpuflame::profiler {

using inspect::Mapping;

namespace {

std::optional<LibraryKind> Classify(std::string_view base) {
  if (std::string_view(base).starts_with("libcudart.so")) return LibraryKind::kCudaRuntime;
  if (std::string_view(base).starts_with("libcuda.so")) return LibraryKind::kCudaDriver;
  if (base == "libc10_cuda.so" || std::string_view(base).starts_with("libc10_cuda.so."))
    return LibraryKind::kTorchCuda;
  if (base == "libc10.so" || std::string_view(base).starts_with("libc10.so.")) return LibraryKind::kTorchCore;
  if (std::string_view(base).starts_with("libgpuflame_cupti.so")) return LibraryKind::kCupti;
  if (std::string_view(base).starts_with("libnccl.so")) return LibraryKind::kNccl;
  if (base == GF_TORCH_AUTOGRAD_LIBRARY || std::string_view(base).starts_with(GF_TORCH_AUTOGRAD_LIBRARY "."))
    return LibraryKind::kTorchAutograd;
  return std::nullopt;
}

std::string ReadComm(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/comm"));
  std::string comm;
  std::getline(f, comm);
  return comm;
}

// At random, so that two agents most likely differ; GPUFLAME_HELLO_SITE
// fixes it (tests make two agents collide).
uint32_t FirstHelloSite() {
  if (const char* v = std::getenv("GPUFLAME_HELLO_SITE"); v && *v) return std::strtoul(v, nullptr, 10) % GF_HELLO_SITES;
  return std::random_device{}() % GF_HELLO_SITES;
}

}  // namespace

bool WaitStopped(pid_t pid, int timeout_ms) {
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    // The group's: a leader that ended (pthread_exit) is a zombie while
    // the rest of the process stops at the gate.
    const char state = inspect::GroupState(pid);
    if (state == 'T' || state == 't') return true;
    if (state == 0 || state == 'Z' || state == 'X') return false;
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    long elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    if (elapsed > timeout_ms) return false;
    timespec pause{0, 50'000};
    nanosleep(&pause, nullptr);
  }
}

ProcessRegistry::ProcessRegistry(BpfProbes& probes, symbolizer::ElfCache& elves, Options options,
                                 symbolizer::NativeSymbolizer* native)
    : probes_(probes),
      elves_(elves),
      hello_site_(FirstHelloSite()),
      options_(options),
      native_(native) {
  // Said where every other warning is (the terminal or log, summary.json).
  if (!probes_.gate_warning().empty()) Warn(probes_.gate_warning());
}

void ProcessRegistry::SayHello(pid_t pid, const std::string& path, const symbolizer::ElfFile& elf, const Mapping& lib,
                               const std::vector<Mapping>& maps) {
  if (!elf.Exports("gpuflame_hello_sites") || !elf.Exports("gpuflame_hello_semaphore")) return;
  auto sites = elf.FindSymbol("gpuflame_hello_sites");
  auto semaphore = elf.FindSymbol("gpuflame_hello_semaphore");
  auto semaphore_offset = semaphore ? elf.VaddrToOffset(*semaphore) : std::nullopt;
  if (!sites || !semaphore || !semaphore_offset) return;
  // Where |pid| holds the count: at the file's load bias (a file offset
  // is ambiguous: segments share their boundary pages), inside a writable
  // mapping of the file. Before the loader has mapped the data segment
  // (a process held at a gate) the kernel raises the count later, at that
  // mmap: nothing to read yet, and nobody else has greeted the process.
  std::optional<uint64_t> count_at;
  const FileKey file = FileKey::Of(lib);
  for (const Mapping& m : maps) {
    if (FileKey::Of(m) != file) continue;
    if (auto bias = elf.LoadBias(m.start, m.offset)) {
      const uint64_t at = *bias + *semaphore;
      for (const Mapping& in : maps)
        if (FileKey::Of(in) == file && in.writable && in.Contains(at) && in.Contains(at + 1)) count_at = at;
      break;
    }
  }
  if (const ProcessInfo* info = Find(pid); info && info->forked) {
    // Our site's breakpoint came with its parent's memory, so attaching it
    // raises no count here (the kernel counts a breakpoint it writes, not
    // one it finds): the parent's site, unchecked.
    if (auto site_offset = elf.VaddrToOffset(*sites + hello_site_ * GF_SITE_BYTES))
      (void)probes_.AttachUprobe(ProbeScope(pid), path, *site_offset, ProbeProgram::kHello, false, 0,
                                 *semaphore_offset);
    return;
  }
  inspect::RemoteProcessMemory memory(pid);
  auto count = [&]() -> std::optional<uint16_t> {
    uint16_t v = 0;
    if (!count_at || !memory.Read(*count_at, &v, sizeof(v))) return std::nullopt;
    return v;
  };
  for (uint32_t tried = 0; tried < GF_HELLO_SITES; tried++) {
    const uint32_t site = (hello_site_ + tried) % GF_HELLO_SITES;
    auto site_offset = elf.VaddrToOffset(*sites + site * GF_SITE_BYTES);
    if (!site_offset) return;
    const std::optional<uint16_t> before = count();
    // Failing costs a greeting, not data: what the library says once
    // (names, stacks) is then said to us only when the next agent comes.
    if (!probes_.AttachUprobe(ProbeScope(pid), path, *site_offset, ProbeProgram::kHello, false, 0, *semaphore_offset)
             .ok())
      return;
    const std::optional<uint16_t> after = count();
    // Unreadable (the process left): keep the site, the next one tells.
    if (!before || !after || *after != *before) {
      hello_site_ = site;
      return;
    }
    probes_.DetachLast();  // another agent's site: try the next
  }
  Warn(absl::StrCat("pid ", pid, ": every hello site of ", path,
                    " is held by another agent: names and stacks said before we came stay unknown"));
}

absl::Status ProcessRegistry::AttachUsdt(pid_t pid, const std::string& path, const symbolizer::ElfFile& elf,
                                         std::string_view provider, std::string_view name, ProbeProgram program,
                                         std::vector<ProbeLink>* owned) {
  std::string why;
  std::vector<BpfProbes::UsdtSite> sites = UsdtSites(elf, provider, name, &why);
  BpfProbes::Attached a = probes_.AttachUsdt(ProbeScope(pid), path, sites, program, owned);
  if (!a.status.ok() && why.empty()) why = std::string(a.status.message());
  if (a.attached == 0) {
    absl::Status st = a.status.ok() ? absl::NotFoundError("no site attached") : a.status;
    return why.empty() ? st : absl::Status(st.code(), absl::StrCat(st.message(), " (", why, ")"));
  }
  // Some sites of the probe, not all: its events from the others are missed.
  if (!why.empty())
    Warn(absl::StrCat("pid ", pid, ": USDT ", std::string(provider), ":", std::string(name), " in ", path, ": ",
                      a.attached, " site(s) attached, others not: ", why));
  return absl::OkStatus();
}

ProcessInfo& ProcessRegistry::Ensure(pid_t pid) {
  auto& slot = processes_[pid];
  if (!slot) {
    slot = std::make_unique<ProcessInfo>();
    slot->pid = pid;
    slot->comm = ReadComm(pid);
    slot->pod = ReadPodInfo(pid);
    slot->service = ReadServiceHints(pid);
    slot->memory = std::make_unique<inspect::RemoteProcessMemory>(pid);
    RememberTarget(pid);
  }
  return *slot;
}

ProcessInfo* ProcessRegistry::Find(pid_t pid) {
  auto it = processes_.find(pid);
  return it == processes_.end() ? nullptr : it->second.get();
}

void ProcessRegistry::Warn(std::string message) {
  // Said once each; most name their pid, so under process churn the set of
  // what was said would only grow (41 207 processes in 10 minutes): it is a
  // bounded memory of recent messages, and one may be said again after it.
  if (warned_.size() >= kMaxWarned) warned_.clear();
  if (warned_.insert(message).second) warnings_.push_back(std::move(message));
}

void ProcessRegistry::WarnIfRefused(const inspect::Mapping& m, int err) {
  // A process that is gone is ENOENT/ESRCH, a FUSE file EPERM (said apart):
  // EACCES is a directory on the way closed to gpuflame, and everything the
  // processes do through that file would be missed without a word.
  if (err != EACCES) return;
  Warn(absl::StrCat(m.path, ": gpuflame may not open it (", std::strerror(err),
                    "), so none of its probes are attached: CAP_DAC_READ_SEARCH lets it read files in directories "
                    "closed to others"));
}

std::vector<std::string> ProcessRegistry::TakeWarnings() {
  for (pid_t pid : inspect::TakeNewlyPoisoned())
    Warn(absl::StrCat("pid ", pid, ": a read of its memory did not return within ",
                      inspect::kReadDeadline.count(),
                      " ms (a file behind it that does not answer: FUSE, a hung network share?); nothing more is "
                      "read from it in user space, so its new Python frames and native stacks stay unnamed"));
  for (const std::string& file : inspect::TakeFuseFilesRefused())
    Warn(absl::StrCat(file, " is on FUSE, whose server may never answer: gpuflame does not open it (no probes in "
                            "it, its frames stay module+offset)"));
  return std::exchange(warnings_, {});
}

absl::Status ProcessRegistry::AddTarget(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH)
    return absl::NotFoundError(absl::StrCat("no such process: ", pid));
  if (auto s = probes_.SetTarget(pid, options_.target_flags); !s.ok()) return s;
  found_running_ = true;
  Scan(pid);
  found_running_ = false;
  if (ProcessInfo* info = Find(pid)) info->attached_late = info->has_cuda || info->has_torch;
  return absl::OkStatus();
}

void ProcessRegistry::ScanAll() {
  base::ScopedDir dir(opendir("/proc"));
  if (!dir) return;
  size_t seen = 0;
  while (dirent* e = readdir(dir.get())) {
    if (++seen > 1'000'000) break;
    char* end = nullptr;
    long pid = strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == getpid()) continue;
    auto maps = inspect::ReadProcMaps(static_cast<pid_t>(pid));
    if (!maps.ok()) continue;
    bool cuda = false;
    for (const Mapping& m : *maps) cuda |= Classify(m.Basename()).has_value();
    if (!cuda) continue;
    found_running_ = true;
    Scan(static_cast<pid_t>(pid));
    found_running_ = false;
    if (ProcessInfo* info = Find(static_cast<pid_t>(pid))) info->attached_late = true;
  }
}

void ProcessRegistry::Scan(pid_t pid) {
  auto maps = inspect::ReadProcMaps(pid);
  if (!maps.ok()) return;
  ProcessInfo& info = Ensure(pid);
  if (!options_.filtered) (void)probes_.SetTarget(pid, options_.target_flags);

  if (!info.python) {
    auto py = DiscoverPython(pid, *maps, elves_);
    if (!py.ok()) {
      Warn(absl::StrCat("pid ", pid, " (", info.comm, "): ", py.status().message()));
    } else if (py->has_value()) {
      PythonProcess& p = **py;
      if (auto s = probes_.SetPython(pid, p.bpf); s.ok()) {
        info.python = p.layout;
        info.python_module = p.mapping->path;
        info.code = std::make_unique<symbolizer::PythonCodeReader>(*info.memory, p.layout);
        const AttachKey key = Attached(pid, FileKey::Of(*p.mapping));
        inspect::PinnedFile file = inspect::PinnedFile::Open(pid, *p.mapping);
        if (p.finalize_offset && !attached_.contains(key) && file.ok()) {
          auto st = probes_.AttachUprobe(ProbeScope(pid), file.path(), *p.finalize_offset, ProbeProgram::kPyFinalize,
                                         false, 0);
          if (st.ok()) attached_.emplace(key, LibraryKind::kPython);
        }
      }
    }
  }
  for (const Mapping& m : *maps) {
    if (!m.executable) continue;
    auto kind = Classify(m.Basename());
    if (!kind) continue;
    // The dynamic loader run as a program (`ld.so --list`, library lookups)
    // and ldconfig map libraries without running them: not CUDA processes.
    const std::string_view comm = info.comm;
    const bool resolver = comm.starts_with("ld-linux") || comm == "ld.so" || comm.starts_with("ldconfig");
    if ((*kind == LibraryKind::kCudaRuntime || *kind == LibraryKind::kCudaDriver) && !resolver) info.has_cuda = true;
    if (*kind == LibraryKind::kCudaDriver && !resolver && info.cuda_driver_since_ns == 0)
      info.cuda_driver_since_ns = NowNs(CLOCK_MONOTONIC);
    if (*kind == LibraryKind::kTorchCuda) info.has_torch = true;
    if (*kind == LibraryKind::kCupti && !info.has_cupti) {
      info.has_cupti = true;
      timespec now{};
      clock_gettime(CLOCK_MONOTONIC, &now);
      info.tensor_wait_since_ns = now.tv_sec * 1'000'000'000ll + now.tv_nsec;
    }
    if (*kind == LibraryKind::kCudaDriver && !resolver) AddLaunchRoute(pid, m, info);
    AttachLibrary(pid, m, *kind, *maps, info);
    // /proc's identity of the file; a process that maps it through another
    // (overlayfs) is gated once more, then covered by the kernel's.
    Cover(m.inode, (uint64_t{m.dev_major} << 20) | m.dev_minor);
  }
  if (native_) native_->Remember(pid, std::move(*maps));
}

void ProcessRegistry::AttachLibrary(pid_t pid, const Mapping& m, LibraryKind kind,
                                    const std::vector<Mapping>& maps, ProcessInfo& info) {
  const AttachKey key = Attached(pid, FileKey::Of(m));
  if (attached_.contains(key)) {
    // Probed for every process that maps it (machine-wide): this one too.
    if (kind == LibraryKind::kCupti) info.cupti_library = m;
    return;
  }
  // libc10.so is probed for libc10_cuda.so's sake (below), never alone: a
  // CPU-only PyTorch process has no GPU tensors.
  if (kind == LibraryKind::kTorchCore) return;
  // The library's hook serves it. Not remembered as attached: a process
  // without the library that maps the same file gets the probes.
  if (kind == LibraryKind::kTorchCuda && TensorInProcess(info)) return;
  if (kind == LibraryKind::kTorchAutograd) {
    // Whom autograd's engine threads work for, in BPF (bpf/autograd_origin.bpf.h):
    // a trap per backward() call, in every PyTorch process: the probes'
    // tensor events and every CPU sample need it; the library's launches
    // carry their own. One symbol, looked up without indexing the file (the
    // process may be waiting at a gate); once per file, found or not.
    inspect::PinnedFile file = inspect::PinnedFile::Open(pid, m);
    if (!file.ok()) {
      WarnIfRefused(m, errno);
      return;  // gone: the next process mapping it tries again
    }
    const std::string path = file.path();
    if (auto offset = symbolizer::ElfFile::ExportedFunctionOffset(path, GF_TORCH_ENGINE_EXECUTE_SYMBOL)) {
      if (auto st = probes_.AttachUprobe(ProbeScope(pid), path, *offset, ProbeProgram::kEngineExecute, false, 0);
          !st.ok())
        Warn(absl::StrCat("pid ", pid, ": backward() callers unavailable: ", st.message()));
    }
    attached_.emplace(key, kind);
    return;
  }
  // Pinned open: a short-lived process may exit while we attach. If it is
  // already gone, the next process mapping this file tries again.
  inspect::PinnedFile file = inspect::PinnedFile::Open(pid, m);
  if (!file.ok()) WarnIfRefused(m, errno);
  const symbolizer::ElfFile* elf = file.ok() ? elves_.Get(pid, m) : nullptr;
  if (!elf) return;
  const std::string path = file.path();
  if (kind == LibraryKind::kCupti) {
    // The exact-mode switch goes up before any probe the library takes as
    // "an agent listens": else a tick in between starts a duty cycle.
    // A library from before duty cycles has no such probe: its activity is
    // always on anyway.
    if (options_.kernel_time_exact)
      (void)AttachUsdt(pid, path, *elf, "gpuflame", "kernel_time_exact", ProbeProgram::kUsdtSwitch);
    // The launch route: the window and its records before the switch that
    // makes the library open windows, and all three before any probe the
    // library takes as "an agent listens": else a tick in between enables
    // its launch callbacks, for good. The window and the records whether
    // or not we ask for the route: another gpuflame may ask, and then the
    // library's callbacks take no stack for us. A library from before it
    // has none: its launch stacks come from its callbacks.
    const bool followed = AttachUsdt(pid, path, *elf, "gpuflame", "launch_window", ProbeProgram::kLaunchWindow).ok() &&
                          AttachUsdt(pid, path, *elf, "gpuflame", "launch_records", ProbeProgram::kLaunchRecords).ok();
    // Asked, and it fails: its start-up window will not come, and the
    // uprobes in for it go.
    if (options_.launch_route &&
        !(followed && AttachUsdt(pid, path, *elf, "gpuflame", "launch_route", ProbeProgram::kUsdtSwitch).ok()))
      (void)launch_route_.OnWindow(pid, false, 0);
    static constexpr std::pair<const char*, ProbeProgram> kProbes[] = {
        {"launch", ProbeProgram::kKernelLaunch}, {"kernel_batch", ProbeProgram::kKernelBatch},
        {"kernel_name", ProbeProgram::kKernelName}, {"status", ProbeProgram::kCuptiStatus}};
    for (const auto& [name, program] : kProbes) {
      if (auto st = AttachUsdt(pid, path, *elf, "gpuflame", name, program); !st.ok()) {
        Warn(absl::StrCat("pid ", pid, ": kernel time unavailable: ", st.message()));
        return;
      }
    }
    // A library from before API spans has no such probe: its timeline has
    // sampled launches only.
    if (options_.api_spans) (void)AttachUsdt(pid, path, *elf, "gpuflame", "api_batch", ProbeProgram::kApiBatch);
    // Also from before self-costing: its cost is then not counted (said in summary.json).
    (void)AttachUsdt(pid, path, *elf, "gpuflame", "lib_cost", ProbeProgram::kLibCost);
    if (options_.tensor_events != TensorEvents::kProbes) {
      // The switch first, as for kernel time: no sampled event before it.
      if (options_.tensor_exact)
        (void)AttachUsdt(pid, path, *elf, "gpuflame", "tensor_exact", ProbeProgram::kUsdtSwitch);
      if (auto st = AttachUsdt(pid, path, *elf, "gpuflame", "tensor_batch", ProbeProgram::kTensorBatch); !st.ok())
        Warn(absl::StrCat("pid ", pid, ": tensor-level memory unavailable: ", st.message(),
                          " (an older libgpuflame_cupti.so? --tensor-events probes works with any)"));
    }
    info.cupti_library = m;  // its status and batches come: it can be asked to flush
    SayHello(pid, path, *elf, m, maps);
    // Kept open: the overhead ladder may ask for thrift at any time.
    if (std::string why = thrift_.Add(ProbeScope(pid), std::move(file), *elf, m.path); !why.empty())
      Warn(absl::StrCat("pid ", pid, ": ", why));
    attached_.emplace(key, kind);
    return;
  }
  if (kind == LibraryKind::kTorchCuda) {
    // The caching allocator calls c10::reportMemoryUsageToProfiler (libc10.so)
    // at every alloc and free with the block's size: what it holds, what
    // memory_allocated() counts. Its USDT notes pytorch:malloc/free carry the
    // requested size, smaller by its rounding (2.3 % of a GPT step's bytes),
    // so they serve only where libc10.so lacks that function. ld.so maps
    // libc10_cuda.so before its dependency libc10.so and runs neither before
    // both are: without libc10.so yet, a later scan decides (it is watched).
    switch (AttachTorchReport(pid, m, maps)) {
      case TorchReport::kNotMappedYet: return;
      case TorchReport::kAttached: attached_.emplace(key, kind); return;
      case TorchReport::kUnavailable: break;
    }
    auto a = AttachUsdt(pid, path, *elf, "pytorch", "malloc", ProbeProgram::kAllocEnter);
    auto f = AttachUsdt(pid, path, *elf, "pytorch", "free", ProbeProgram::kFreeEnter);
    attached_.emplace(key, kind);
    if (!a.ok() || !f.ok())
      Warn(absl::StrCat("pid ", pid, ": PyTorch has neither c10::reportMemoryUsageToProfiler nor USDT probes",
                        ": tensor-level memory unavailable"));
    return;
  }
  // Every API of the library at once: one link per program and kind where
  // the kernel makes uprobe_multi links (BpfProbes::AttachUprobes).
  std::vector<BpfProbes::UprobeSite> sites;
  for (const UprobeSpec& spec : UprobeSpecs()) {
    if (spec.library != kind) continue;
    if (spec.entry == ProbeProgram::kCudaSyncEnter && !options_.sync_waits) continue;
    if (!elf->Exports(spec.symbol)) continue;  // older CUDA: not every API exists
    auto vaddr = elf->FindSymbol(spec.symbol);
    auto offset = vaddr ? elf->VaddrToOffset(*vaddr) : std::nullopt;
    if (!offset) continue;
    sites.push_back({.offset = *offset, .program = spec.entry, .retprobe = false, .cookie = spec.api});
    if (spec.has_exit) sites.push_back({.offset = *offset, .program = spec.exit, .retprobe = true, .cookie = spec.api});
  }
  const BpfProbes::Attached attached = probes_.AttachUprobes(ProbeScope(pid), path, sites);
  if (!attached.status.ok()) Warn(absl::StrCat("pid ", pid, ": ", attached.status.message()));
  if (attached.attached == 0) {
    Warn(absl::StrCat("pid ", pid, ": ", m.path,
                      kind == LibraryKind::kNccl ? " exports none of the NCCL functions"
                                                 : " exports none of the CUDA allocation functions"));
    return;
  }
  attached_.emplace(key, kind);
}

namespace {

// Whether |path| names a regular file in |pid|'s root, resolved there (its
// symlinks cannot leave it) with O_PATH (a FIFO or device is not opened).
bool IsRegularFileInRoot(pid_t pid, const std::string& path) {
  base::ScopedFd root(open(absl::StrCat("/proc/", pid, "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return false;
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  base::ScopedFd file(static_cast<int>(syscall(SYS_openat2, root.get(), path.c_str(), &how, sizeof(how))));
  struct stat st{};
  return file && fstat(file.get(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

uint64_t ProcessRegistry::SampleFollowedCpuNs() {
  static const long ticks_per_s = sysconf(_SC_CLK_TCK);
  for (auto& [pid, info] : processes_) {
    if (info->exited) continue;
    base::ScopedFd fd(open(absl::StrCat("/proc/", pid, "/stat").c_str(), O_RDONLY | O_CLOEXEC));
    char buf[1024];
    ssize_t n = fd ? read(fd.get(), buf, sizeof(buf)) : -1;
    if (n <= 0) continue;
    auto cpu = inspect::CpuTicksFromStat(std::string_view(buf, static_cast<size_t>(n)));
    if (!cpu) continue;
    const uint64_t ticks = *cpu;
    // A first sample only sets the base: time used before it is not ours to share.
    if (info->cpu_ticks && ticks > *info->cpu_ticks) followed_cpu_ticks_ += ticks - *info->cpu_ticks;
    info->cpu_ticks = ticks;
  }
  return ticks_per_s > 0 ? followed_cpu_ticks_ * (1'000'000'000ull / static_cast<uint64_t>(ticks_per_s)) : 0;
}

namespace {

// Whether the process's environment has CUDA load libgpuflame_cupti.so at
// cuInit (an absolute path to a regular file in its root). Read once.
bool NamesInjectionLibrary(ProcessInfo& info) {
  if (!info.injection_named) {
    auto path = inspect::EnvironmentValue(info.pid, "CUDA_INJECTION64_PATH");
    info.injection_named = path && !path->empty() && (*path)[0] == '/' &&
                           std::string_view(*path).substr(path->rfind('/') + 1).starts_with("libgpuflame_cupti.so") &&
                           IsRegularFileInRoot(info.pid, *path);
  }
  return *info.injection_named;
}

}  // namespace

void ProcessRegistry::AddLaunchRoute(pid_t pid, const Mapping& m, ProcessInfo& info) {
  const symbolizer::ElfFile* elf = elves_.Get(pid, m);
  if (!elf) return;
  // The start-up's window goes up now, while the process may still wait at
  // the gate, where CUDA is to load the library at cuInit (launch_route_sites.h).
  // Not for a process found running: its start-up is behind it, or its
  // library says when its windows open.
  // Nor for a forked child (a DataLoader worker): its CUDA, if any, is its
  // parent's, initialised before it.
  // Nor where we do not ask for the route: its windows, if another
  // gpuflame asks, are followed from the library's word of them.
  const uint64_t open_now = options_.launch_route && !found_running_ && !info.forked && NamesInjectionLibrary(info)
                                ? static_cast<uint64_t>(NowNs(CLOCK_MONOTONIC))
                                : 0;
  // Said where we ask for the route; a follower hears of it only if a
  // window opens (OnLaunchWindow).
  if (std::string why = launch_route_.Add(pid, m, *elf, open_now); !why.empty() && options_.launch_route)
    Warn(absl::StrCat("pid ", pid, " (", info.comm, "): ", why));
}

bool ProcessRegistry::TensorInProcess(ProcessInfo& info) {
  if (info.tensor_inprocess) return *info.tensor_inprocess;
  bool inprocess = options_.tensor_events == TensorEvents::kInProcess;
  if (options_.tensor_events == TensorEvents::kAuto) {
    // libc10_cuda.so maps at `import torch`, before CUDA loads the injection
    // library (at cuInit): its environment says whether it will, and the
    // file must be there, or nothing would observe the tensors.
    inprocess = NamesInjectionLibrary(info);
  }
  info.tensor_inprocess = inprocess;
  return inprocess;
}

ProcessRegistry::TorchReport ProcessRegistry::AttachTorchReport(pid_t pid, const Mapping& c10_cuda,
                                                                const std::vector<Mapping>& maps) {
  auto dir_of = [](std::string_view path) { return path.substr(0, path.rfind('/') + 1); };
  const Mapping* c10 = nullptr;
  for (const Mapping& m : maps) {
    if (!m.executable || Classify(m.Basename()) != LibraryKind::kTorchCore) continue;
    if (!c10 || dir_of(m.path) == dir_of(c10_cuda.path)) c10 = &m;
  }
  if (!c10) return TorchReport::kNotMappedYet;
  const AttachKey key = Attached(pid, FileKey::Of(*c10));
  if (attached_.contains(key)) return TorchReport::kAttached;
  const symbolizer::ElfFile* elf = elves_.Get(pid, *c10);
  auto vaddr = elf ? elf->FindSymbol(kTorchReportSymbol) : std::nullopt;
  auto offset = vaddr ? elf->VaddrToOffset(*vaddr) : std::nullopt;
  if (!offset) return TorchReport::kUnavailable;
  inspect::PinnedFile file = inspect::PinnedFile::Open(pid, *c10);
  if (!file.ok()) return TorchReport::kNotMappedYet;  // gone meanwhile: the next mapper tries again
  auto st = probes_.AttachUprobe(ProbeScope(pid), file.path(), *offset, ProbeProgram::kTorchReport, false,
                                 GF_API_TORCH_REPORT);
  if (!st.ok()) {
    Warn(absl::StrCat("pid ", pid, ": ", st.message()));
    return TorchReport::kUnavailable;
  }
  attached_.emplace(key, LibraryKind::kTorchCore);
  AttachTorchOom(pid, file.path(), *elf);
  return TorchReport::kAttached;
}

void ProcessRegistry::AttachTorchOom(pid_t pid, const std::string& path, const symbolizer::ElfFile& c10) {
  // Called only when the allocator gives up (an OutOfMemoryError follows):
  // the probe costs nothing until then. Without it, an out-of-memory episode
  // still has its failed device calls, but not how it ended.
  for (const char* symbol : {GF_TORCH_OOM_SYMBOL, GF_TORCH_OOM_SYMBOL_UNSIGNED}) {
    auto vaddr = c10.FindSymbol(symbol);
    auto offset = vaddr ? c10.VaddrToOffset(*vaddr) : std::nullopt;
    if (!offset) continue;
    if (auto st =
            probes_.AttachUprobe(ProbeScope(pid), path, *offset, ProbeProgram::kTorchOom, false, GF_API_TORCH_REPORT);
        !st.ok())
      Warn(absl::StrCat("pid ", pid, ": PyTorch's out-of-memory report: ", st.message()));
    return;
  }
  Warn(absl::StrCat("pid ", pid, ": ", path, " has no c10::reportOutOfMemoryToProfiler: an out-of-memory error ",
                    "is seen at the failed device calls, without whether PyTorch raised it"));
}

void ProcessRegistry::OnLibraryMapped(pid_t pid, bool gated, uint64_t inode, uint64_t dev, uint64_t stopped_ns,
                                      std::string_view held_for) {
  if (gated) {
    if (WaitStopped(pid, 2000)) Scan(pid);
    if (inode) Cover(inode, dev);
    kill(pid, SIGCONT);
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const uint64_t now = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
    // Its hook's 3 s count from here: a process we held cannot start it (a
    // loaded machine held one 4.4 s attaching the library's probes).
    if (ProcessInfo* info = Find(pid); info && info->has_cupti && info->tensor_hook == 0)
      info->tensor_wait_since_ns = static_cast<int64_t>(now);
    // ld.so maps the rest of a library's dependencies after it: looked for again.
    rescans_[pid] = 3;
    if (stopped_ns) {
      const uint64_t pause = now > stopped_ns ? now - stopped_ns : 0;
      if (gate_pauses_ns_.size() >= kMaxPauses) gate_pauses_ns_.erase(gate_pauses_ns_.begin());
      gate_pauses_ns_.push_back(pause);
      gates_++;
      if (pause > slowest_gate_ns_) {
        // Which file made a user's process wait longest: read again only for a new maximum.
        slowest_gate_ns_ = pause;
        std::string_view name = inode ? "?" : held_for;  // a gate at exec or fork maps no file
        auto maps = inode ? inspect::ReadProcMaps(pid) : absl::StatusOr<std::vector<Mapping>>();
        if (maps.ok()) {
          for (const Mapping& m : *maps)
            if (m.inode == inode) name = m.Basename();
        }
        slowest_gate_file_.assign(name.data(), name.size());
      }
    }
    return;
  }
  if (inode) Cover(inode, dev);
  // The mapping is being created as we read: look now and a few ticks later.
  Scan(pid);
  rescans_[pid] = 3;
}

void ProcessRegistry::OnExec(pid_t pid, bool gated) {
  if (ProcessInfo* info = Find(pid)) {
    // A new program image: everything learnt about the old one is stale.
    probes_.RemovePython(pid);
    info->python.reset();
    info->code.reset();
    info->comm = ReadComm(pid);
    info->service = ReadServiceHints(pid);
    info->tensor_inprocess.reset();  // decided again from the new image's environment
    info->tensor_hook = 0;
    info->autograd_hook = 0;
    info->injection_named.reset();  // the new image's environment
    info->cupti_library.reset();    // mapped anew, if at all
    info->execed = true;
  }
  launch_route_.Forget(pid);  // its libcuda, if any, is mapped anew
  // Nor does it hold the files it mapped: they may go once nothing else does.
  if (native_) native_->Execed(pid);
  OnLibraryMapped(pid, gated);
}

void ProcessRegistry::OnForked(pid_t pid, pid_t parent, bool gated, uint64_t forked_ns) {
  // A copy of its parent: the same libraries and interpreter, and the
  // injection library's in-process hooks as the parent had them (patched
  // there before the fork, so here too; the library tells the child's own
  // pid at its first event). What the parent had decided stands: no
  // fallback to probes for a worker that never touches CUDA.
  Ensure(pid).forked = true;
  if (const ProcessInfo* p = Find(parent); p && p != Find(pid)) {
    ProcessInfo& info = Ensure(pid);
    info.tensor_inprocess = p->tensor_inprocess;
    info.tensor_hook = p->tensor_hook;
    info.tensor_hook_python = p->tensor_hook_python;
    info.tensor_sample_bytes = p->tensor_sample_bytes;
    info.autograd_hook = p->autograd_hook;
    info.cupti_status = p->cupti_status;
    info.cupti_abi = p->cupti_abi;
  }
  if (gated) {
    OnLibraryMapped(pid, true, 0, 0, forked_ns, "(fork)");
    return;
  }
  // Not held (its parent was found running, `record --pid`): it ran on
  // from its fork while we attached, and what it did until then is missed.
  Scan(pid);
  rescans_[pid] = 3;
  const ProcessInfo* info = Find(pid);
  if (!info || !(info->has_cuda || info->has_torch)) return;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const int64_t late_ns = now.tv_sec * 1'000'000'000ll + now.tv_nsec - static_cast<int64_t>(forked_ns);
  Warn(absl::StrCat("pid ", pid, " (", info->comm, "), forked by pid ", parent, ": its probes were attached ",
                    std::max<int64_t>(late_ns, 0) / 1'000'000,
                    " ms after its fork, which it was not held for (its parent was found running): what it "
                    "allocated in between is not in the profiles"));
}

void ProcessRegistry::OnFinalize(pid_t pid, bool gated) {
  // Nothing to read here: the caller has drained every earlier record and
  // resolved its frames before this one. Just let the process finish.
  (void)pid;
  if (gated) {
    WaitStopped(pid, 2000);
    kill(pid, SIGCONT);
  }
}

void ProcessRegistry::OnExit(pid_t pid) {
  if (ProcessInfo* info = Find(pid)) {
    info->exited = true;
    info->code.reset();
  }
  probes_.RemovePython(pid);
  probes_.RemoveTarget(pid);
  rescans_.erase(pid);
  DetachProcess(pid);
}

void ProcessRegistry::DetachProcess(pid_t pid) {
  if (!options_.per_process_probes) return;
  thrift_.Forget(pid);  // before its other probes: all of them go
  probes_.DetachProcess(pid);
  absl::erase_if(attached_, [pid](const auto& kv) { return kv.first.first == pid; });
}

std::string CuptiAbiMismatchWarning(pid_t pid, const std::string& comm, uint32_t library_abi) {
  return absl::StrCat("pid ", pid, " (", comm, "): libgpuflame_cupti.so speaks ABI v", library_abi,
                      library_abi == 0 ? " (from before ABI versions)" : "", ", this gpuflame v", GF_ABI_VERSION,
                      ": kernel time off for it; use the library shipped with this gpuflame");
}

void ProcessRegistry::OnCuptiStatus(pid_t pid, uint32_t status, uint32_t abi_version, uint64_t ts_ns) {
  ProcessInfo& info = Ensure(pid);
  info.has_cupti = true;
  // An answer to AskLibraryFlush (gpuflame:flushed), not a state: what the
  // library does stays what it last said.
  if (status == GF_CUPTI_FLUSHED && abi_version == GF_ABI_VERSION) {
    info.library_flushed_ns = std::max(info.library_flushed_ns, ts_ns);
    return;
  }
  info.cupti_abi = abi_version;
  if (abi_version != GF_ABI_VERSION) {
    // Not even its status code can be trusted to mean what ours do: this is
    // all that is said about it, once (Warn drops the repeats: the library
    // says its version every flush period).
    Warn(CuptiAbiMismatchWarning(pid, info.comm, abi_version));
    return;
  }
  info.cupti_status = status;
  // A library that stepped aside opens no launch window: the start-up's
  // uprobes, in since libcuda was mapped, go.
  if (status != GF_CUPTI_ACTIVE) (void)launch_route_.OnWindow(pid, false, 0);
  if (status == GF_CUPTI_OTHER_SUBSCRIBER)
    Warn(absl::StrCat("pid ", pid, " (", info.comm,
                      "): kernel time unavailable: another CUPTI client (torch.profiler, Nsight) "
                      "holds CUPTI, so libgpuflame_cupti.so stepped aside"));
  else if (status == GF_CUPTI_FAILED)
    Warn(absl::StrCat("pid ", pid, " (", info.comm, "): kernel time unavailable: CUPTI refused to start"));
  else if (status == GF_CUPTI_NOT_BUILT)
    Warn(absl::StrCat("pid ", pid, " (", info.comm,
                      "): kernel time unavailable: this gpuflame was built without CUPTI's headers (no CUDA "
                      "toolkit at build time; README: What a fresh machine gets); memory and CPU profiles are "
                      "unaffected"));
}

void ProcessRegistry::OnTensorHook(pid_t pid, uint32_t status, uint32_t python, uint32_t abi_version,
                                   uint64_t sample_bytes) {
  ProcessInfo& info = Ensure(pid);
  const std::string who = absl::StrCat("pid ", pid, " (", info.comm, "): ");
  // The numbers are the workload's to choose: one warning per process at
  // most, whatever it sends, so they cannot grow the warnings.
  const bool first = info.tensor_hook == 0;
  if (abi_version != GF_ABI_VERSION) {
    if (first) FallBackToProbes(info, "its libgpuflame_cupti.so speaks another ABI (use the library of this release)");
    info.tensor_hook = ~0u;
    return;
  }
  info.tensor_hook = status;
  info.tensor_hook_python = status == GF_TENSOR_HOOK_LIVE ? python : 0;
  info.tensor_sample_bytes = status == GF_TENSOR_HOOK_LIVE ? sample_bytes : 0;
  if (!first) return;
  switch (status == GF_TENSOR_HOOK_LIVE ? python : status) {
    case 0:
      return;
    case GF_TENSOR_HOOK_NO_TORCH:  // a CUDA process without PyTorch: nothing to hook
      if (info.has_torch) FallBackToProbes(info, "the library found no libc10_cuda.so to hook");
      return;
    case GF_TENSOR_HOOK_NO_PYTHON:
      Warn(absl::StrCat(who, "tensor events without Python frames: no CPython in the process"));
      return;
    case GF_TENSOR_HOOK_UNSUPPORTED_PYTHON:
      Warn(absl::StrCat(who, "tensor events without Python frames: CPython version not supported (3.10-3.13)"));
      return;
    case GF_TENSOR_HOOK_WALK_CHECK_FAILED:
      Warn(absl::StrCat(who, "tensor events without Python frames: the in-process stack walk failed its "
                             "checks (--tensor-events probes walks from the kernel instead)"));
      return;
    case GF_TENSOR_HOOK_PATCH_FAILED:
      FallBackToProbes(info, "libc10_cuda.so could not be hooked in-process");
      return;
    default:
      Warn(absl::StrCat(who, "the in-process tensor hook reported a state this gpuflame does not know"));
  }
}

void ProcessRegistry::OnAutogradHook(pid_t pid, uint32_t status) {
  ProcessInfo& info = Ensure(pid);
  // One warning per process at most, whatever the workload sends.
  const bool first = info.autograd_hook == 0;
  info.autograd_hook = status;
  if (!first) return;
  const std::string lost = absl::StrCat("pid ", pid, " (", info.comm,
                                        "): allocations and kernels of autograd's engine threads "
                                        "(loss.backward()) are not given the Python stack that called backward(): ");
  switch (status) {
    case GF_AUTOGRAD_HOOK_LIVE:
    case GF_AUTOGRAD_HOOK_NOT_FOUND:  // no PyTorch Python bindings (yet): nothing runs backward()
      return;
    case GF_AUTOGRAD_HOOK_OTHER_SIGNATURE:
      Warn(lost + "this PyTorch's torch::autograd::Engine::execute has a signature gpuflame does not know");
      return;
    case GF_AUTOGRAD_HOOK_PATCH_FAILED:
      Warn(lost + "libtorch_python.so could not be hooked in-process");
      return;
    default:
      Warn(lost + "the library reported a state this gpuflame does not know");
  }
}

void ProcessRegistry::FallBackToProbes(ProcessInfo& info, const std::string& why) {
  if (info.tensor_inprocess && !*info.tensor_inprocess) return;
  info.tensor_inprocess = false;
  Warn(absl::StrCat("pid ", info.pid, " (", info.comm, "): tensor events through probes: ", why,
                    "; what it allocated before they attached is not in the profiles"));
  // Attaches the probes on its libc10_cuda.so now that it is decided so.
  if (!info.exited) Scan(info.pid);
}

void ProcessRegistry::CheckKernelTime(absl::FunctionRef<bool(pid_t)> used_gpu, std::optional<int64_t> now_ns) {
  // CUDA loads the library inside cuInit, and `import torch` maps libcudart
  // seconds before anything calls cuInit: a process is judged once it has
  // allocated device memory, after cuInit. One whose environment names the
  // library then had it loaded unless that failed; while it runs it is
  // given 10 s from the driver's mapping, for the library's mapping to be
  // scanned (the simulated runtime maps the driver at import, and the real
  // one at its first call).
  constexpr int64_t kNamedGraceNs = 10'000'000'000;
  for (auto& [pid, info] : processes_) {
    if (info->kernel_time_reported || !info->has_cuda || info->has_cupti) continue;
    // Found running with the driver mapped (`--pid`, an agent's start): it
    // may have allocated everything before gpuflame looked.
    if (!used_gpu(pid) && !(info->attached_late && info->cuda_driver_since_ns != 0)) continue;
    const bool named = info->exited ? info->injection_named.value_or(false) : NamesInjectionLibrary(*info);
    if (now_ns && named && *now_ns - info->cuda_driver_since_ns < kNamedGraceNs) continue;
    info->kernel_time_reported = true;
    Warn(absl::StrCat("pid ", pid, " (", info->comm, "): kernel time unavailable: ",
                      named ? "CUDA_INJECTION64_PATH names libgpuflame_cupti.so, but CUDA has not loaded it"
                            : "libgpuflame_cupti.so is not loaded (start the workload with "
                              "CUDA_INJECTION64_PATH=/path/to/libgpuflame_cupti.so)",
                      "; memory and CPU profiles are unaffected"));
  }
}

void ProcessRegistry::Cover(uint64_t inode, uint64_t dev) {
  if (covered_.size() >= 8192 || !covered_.insert({inode, dev}).second) return;
  probes_.MarkCovered(inode, dev);
}

ProcessRegistry::GateStats ProcessRegistry::gate_stats() const {
  GateStats g;
  g.count = gates_;
  g.slowest_file = slowest_gate_file_;
  if (gate_pauses_ns_.empty()) return g;
  std::vector<uint64_t> sorted = gate_pauses_ns_;
  std::sort(sorted.begin(), sorted.end());
  auto at = [&](double q) { return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * sorted.size()))]; };
  g.p50_ns = at(0.5);
  g.p99_ns = at(0.99);
  g.max_ns = sorted.back();
  return g;
}

void ProcessRegistry::OnLaunchWindow(pid_t pid, bool open, uint64_t now_ns) {
  if (std::string why = launch_route_.OnWindow(pid, open, now_ns); !why.empty()) {
    ProcessInfo& info = Ensure(pid);
    if (!info.launch_route_warned) Warn(absl::StrCat("pid ", pid, " (", info.comm, "): ", why));
    info.launch_route_warned = true;
  }
}

void ProcessRegistry::Forget(pid_t pid) {
  inspect::ForgetPoisoned(pid);  // the pid may come back as another process
  launch_route_.Forget(pid);
  processes_.erase(pid);
  rescans_.erase(pid);
  DetachProcess(pid);  // its exit record may have been lost
  if (native_) native_->Forget(pid);
}

ProcessRegistry::LibraryFlushAsk ProcessRegistry::AskLibraryFlush() {
  LibraryFlushAsk ask;
  // Machine-wide probes: one attach asks every process mapping the file.
  absl::flat_hash_set<AttachKey> asked_files;
  for (auto& [pid, info] : processes_) {
    if (info->exited || !info->cupti_library) continue;
    if (info->forked && !info->execed) {
      ask.forked++;
      continue;
    }
    const AttachKey key = Attached(pid, FileKey::Of(*info->cupti_library));
    if (asked_files.contains(key)) {
      ask.asked.push_back(pid);
      continue;
    }
    inspect::PinnedFile file = inspect::PinnedFile::Open(pid, *info->cupti_library);
    const symbolizer::ElfFile* elf = file.ok() ? elves_.Get(pid, *info->cupti_library) : nullptr;
    if (!elf) {
      if (kill(pid, 0) == 0 || errno != ESRCH) {
        ask.failed++;
        Warn(absl::StrCat("pid ", pid, " (", info->comm, "): its last kernel records may be missing: ",
                          "its libgpuflame_cupti.so could not be read again"));
      }
      continue;  // else gone since: its exit flushed it
    }
    if (UsdtSites(*elf, "gpuflame", "flushed").empty()) {
      ask.without_probe++;
      continue;
    }
    if (absl::Status st =
            AttachUsdt(pid, file.path(), *elf, "gpuflame", "flushed", ProbeProgram::kCuptiStatus, &ask.links);
        !st.ok()) {
      ask.failed++;
      Warn(absl::StrCat("pid ", pid, " (", info->comm, "): its last kernel records may be missing: ",
                        "gpuflame:flushed not attached: ", st.message()));
      continue;
    }
    asked_files.insert(key);
    ask.asked.push_back(pid);
  }
  return ask;
}

void ProcessRegistry::EndLibraryFlush(LibraryFlushAsk& ask) {
  for (ProbeLink& link : ask.links) probes_.Release(std::move(link));
  ask.links.clear();
}

void ProcessRegistry::SetThrift(uint32_t level) {
  for (std::string& why : thrift_.SetLevel(level)) Warn(std::move(why));
}

void ProcessRegistry::Tick(const std::function<void()>& catch_up) {
  // A process that loaded the library for its tensor events and never said
  // its hook is live (an old library, a failed start): probes instead.
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const int64_t now = ts.tv_sec * 1'000'000'000ll + ts.tv_nsec;
  launch_route_.Expire(static_cast<uint64_t>(now));
  auto overdue = [&] {
    std::vector<ProcessInfo*> late;
    for (auto& [pid, info] : processes_)
      if (info->tensor_inprocess.value_or(false) && info->has_torch && info->has_cupti && info->tensor_hook == 0 &&
          !info->exited && now - info->tensor_wait_since_ns > kHookDueNs)
        late.push_back(info.get());
    return late;
  };
  std::vector<ProcessInfo*> late;
  if (now >= next_hook_check_ns_) {
    next_hook_check_ns_ = now + 1'000'000'000;
    late = overdue();
    // The word may be in the ring still, behind a backlog (a loaded
    // machine): everything sent until now is read before we decide.
    if (!late.empty() && catch_up) {
      catch_up();
      late = overdue();
    }
  }
  for (ProcessInfo* info : late) FallBackToProbes(*info, "its libgpuflame_cupti.so did not start its hook within 3 s");
  for (auto it = rescans_.begin(); it != rescans_.end();) {
    Scan(it->first);
    if (--it->second <= 0) {
      rescans_.erase(it++);
    } else {
      ++it;
    }
  }
}

}  // namespace gpuflame::profiler
