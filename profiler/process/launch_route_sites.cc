#include "profiler/process/launch_route_sites.h"

#include <time.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bpf/gpuflame_abi.h"

namespace gpuflame::profiler {
namespace {

uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

LaunchRouteSites::~LaunchRouteSites() {
  for (auto& [pid, p] : processes_) Release(p);
}

LaunchRouteSites::Library* LaunchRouteSites::LibraryOf(pid_t pid, const inspect::Mapping& m,
                                                       const symbolizer::ElfFile& elf) {
  const inspect::FileKey key = inspect::FileKey::Of(m);
  if (auto it = libraries_.find(key); it != libraries_.end()) return it->second.get();
  auto lib = std::make_unique<Library>();
  lib->key = key;
  lib->file = inspect::PinnedFile::Open(pid, m);
  if (!lib->file->ok()) return nullptr;  // gone: the next process that maps it tries again
  for (const LaunchEntry& e : LaunchEntries()) {
    if (!elf.Exports(e.symbol)) continue;  // older drivers lack some
    const auto vaddr = elf.FindSymbol(e.symbol);
    const auto offset = vaddr ? elf.VaddrToOffset(*vaddr) : std::nullopt;
    if (!offset) continue;
    // Two names of one function (an alias) would hit twice a call.
    if (std::any_of(lib->sites.begin(), lib->sites.end(),
                    [&](const BpfProbes::UprobeSite& u) { return u.offset == *offset; }))
      continue;
    lib->sites.push_back({.offset = *offset,
                          .program = ProbeProgram::kLaunchEntry,
                          .retprobe = false,
                          .cookie = GF_LAUNCH_API(1, e.cbid),
                          .semaphore_offset = 0});
  }
  if (lib->sites.empty()) lib->file.reset();  // nothing to attach to: not kept open
  return libraries_.emplace(key, std::move(lib)).first->second.get();
}

std::string LaunchRouteSites::Add(pid_t pid, const inspect::Mapping& m, const symbolizer::ElfFile& elf,
                                  uint64_t open_now_ns) {
  if (processes_.contains(pid)) return {};
  if (processes_.size() >= kMaxProcesses)
    return absl::StrCat("more than ", kMaxProcesses,
                        " processes use the launch route: its launch stacks are not taken");
  Library* lib = LibraryOf(pid, m, elf);
  if (!lib) return {};  // gone: nothing to serve
  lib->users++;
  processes_.emplace(pid, Process{.library = lib, .held = {}, .opened_ns = 0});
  if (lib->sites.empty()) return absl::StrCat(m.path, " exports none of the CUDA launch, copy or memset functions");
  return open_now_ns ? OnWindow(pid, true, open_now_ns) : std::string();
}

std::string LaunchRouteSites::OnWindow(pid_t pid, bool open, uint64_t now_ns) {
  auto it = processes_.find(pid);
  if (!open) {
    if (it != processes_.end()) Release(it->second);
    return {};
  }
  if (it == processes_.end() || it->second.library->sites.empty()) {
    stats_.windows_unserved++;
    return "its library opened a launch window, but its libcuda's launch functions are not known: "
           "kernel time without launch stacks";
  }
  Process& p = it->second;
  if (!p.held.empty()) {
    p.opened_ns = now_ns;  // the library says it again each tick a window stays open
    return {};
  }
  const uint64_t start = MonotonicNs();
  const Library& lib = *p.library;
  const BpfProbes::Attached a = probes_.AttachUprobesOwned(pid, lib.file->path(), lib.sites, p.held);
  const uint64_t took = MonotonicNs() - start;
  stats_.attach_ns += took;
  stats_.attach_max_ns = std::max(stats_.attach_max_ns, took);
  if (p.held.empty()) {
    stats_.windows_unserved++;
    return absl::StrCat("the launch route's uprobes could not be attached: ", a.status.message());
  }
  stats_.windows++;
  p.opened_ns = now_ns;
  if (a.attached < lib.sites.size()) {
    // Launches through the entry points left out have no stack.
    stats_.windows_partial++;
    return absl::StrCat("the launch route's uprobes went on ", a.attached, " of ", lib.sites.size(),
                        " launch functions: ", a.status.message());
  }
  return {};
}

void LaunchRouteSites::Expire(uint64_t now_ns) {
  for (auto& [pid, p] : processes_) {
    if (p.held.empty() || now_ns < p.opened_ns + kMaxWindowNs) continue;
    stats_.windows_expired++;
    Release(p);
  }
}

void LaunchRouteSites::Forget(pid_t pid) {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return;
  Release(it->second);
  if (auto lib = libraries_.find(it->second.library->key); lib != libraries_.end() && --lib->second->users == 0)
    libraries_.erase(lib);  // its last process: the file is let go
  processes_.erase(it);
}

bool LaunchRouteSites::open(pid_t pid) const {
  auto it = processes_.find(pid);
  return it != processes_.end() && !it->second.held.empty();
}

void LaunchRouteSites::Release(Process& p) {
  const uint64_t start = MonotonicNs();
  for (ProbeLink& link : p.held) probes_.Release(std::move(link));
  p.held.clear();
  stats_.attach_ns += MonotonicNs() - start;
}

}  // namespace gpuflame::profiler
