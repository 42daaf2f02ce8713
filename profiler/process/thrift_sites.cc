#include "profiler/process/thrift_sites.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bpf/gpuflame_abi.h"

namespace gpuflame::profiler {

ThriftSites::~ThriftSites() {
  for (File& f : files_)
    for (ProbeLink& link : f.held) probes_.Release(std::move(link));
}

std::string ThriftSites::Add(pid_t scope, inspect::PinnedFile file, const symbolizer::ElfFile& elf, std::string name) {
  if (!file.ok() || !elf.Exports("gpuflame_thrift_sites") || !elf.Exports("gpuflame_thrift_semaphore")) return {};
  const auto sites = elf.FindSymbol("gpuflame_thrift_sites");
  const auto semaphore = elf.FindSymbol("gpuflame_thrift_semaphore");
  const auto sites_offset = sites ? elf.VaddrToOffset(*sites) : std::nullopt;
  const auto semaphore_offset = semaphore ? elf.VaddrToOffset(*semaphore) : std::nullopt;
  if (!sites_offset || !semaphore_offset) return {};
  if (files_.size() >= kMaxFiles) {
    files_refused_++;
    return absl::StrCat("more than ", kMaxFiles, " libgpuflame_cupti.so files (or processes) probed at once: ",
                        "the newer ones are not thinned when gpuflame is over its overhead budget");
  }
  files_.push_back({scope, std::move(file), std::move(name), *sites_offset, *semaphore_offset, {}});
  return Reach(files_.back());
}

std::vector<std::string> ThriftSites::SetLevel(uint32_t level) {
  level_ = std::min<uint32_t>(level, GF_THRIFT_SITES);
  std::vector<std::string> out;
  for (File& f : files_)
    if (std::string why = Reach(f); !why.empty()) out.push_back(std::move(why));
  return out;
}

std::string ThriftSites::Reach(File& f) {
  // Highest first: the library's count falls a level at a time.
  while (f.held.size() > level_) {
    probes_.Release(std::move(f.held.back()));
    f.held.pop_back();
  }
  while (f.held.size() < level_) {
    const uint64_t offset = f.sites_offset + f.held.size() * GF_SITE_BYTES;
    auto link = probes_.AttachSwitch(f.scope, f.file.path(), offset, f.semaphore_offset, ProbeProgram::kThrift);
    if (!link.ok())
      return absl::StrCat(f.name, ": thrift level ", level_, " not reached (", f.held.size(),
                          " held): ", link.status().message());
    f.held.push_back(std::move(*link));
  }
  return {};
}

size_t ThriftSites::files_short() const {
  return static_cast<size_t>(
      std::count_if(files_.begin(), files_.end(), [&](const File& f) { return f.held.size() < level_; }));
}

void ThriftSites::Forget(pid_t pid) {
  for (auto it = files_.begin(); it != files_.end();) {
    if (it->scope != pid) {
      ++it;
      continue;
    }
    for (ProbeLink& link : it->held) probes_.Release(std::move(link));
    it = files_.erase(it);
  }
}

}  // namespace gpuflame::profiler
