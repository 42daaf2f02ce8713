#include "symbolizer/native_symbolizer.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "symbolizer/demangle.h"

namespace gpuflame::symbolizer {

const Mapping* NativeSymbolizer::FindMapping(pid_t pid, uint64_t address) {
  auto find = [&](const std::vector<Mapping>& maps) -> const Mapping* {
    auto it = std::upper_bound(maps.begin(), maps.end(), address,
                               [](uint64_t a, const Mapping& m) { return a < m.start; });
    if (it == maps.begin()) return nullptr;
    --it;
    return it->Contains(address) ? &*it : nullptr;
  };
  auto it = maps_.find(pid);
  if (it != maps_.end())
    if (const Mapping* m = find(it->second)) return m;
  // A miss may be a library mapped since we last looked: re-read once.
  auto fresh = ReadProcMaps(pid);
  if (!fresh.ok()) return nullptr;
  auto& slot = maps_[pid];
  slot = std::move(*fresh);
  return find(slot);
}

const std::vector<Mapping>* NativeSymbolizer::Maps(pid_t pid) {
  auto it = maps_.find(pid);
  if (it != maps_.end()) return &it->second;
  auto fresh = ReadProcMaps(pid);
  if (!fresh.ok()) return nullptr;
  return &(maps_[pid] = std::move(*fresh));
}

Frame NativeSymbolizer::Symbolize(pid_t pid, uint64_t address) {
  Frame f;
  f.kind = FrameKind::kNative;
  f.address = address;
  f.name = absl::StrFormat("0x%x", address);
  const Mapping* m = FindMapping(pid, address);
  if (!m || m->inode == 0) {
    unresolved_++;
    return f;
  }
  f.file = m->path;
  const ElfFile* elf = elves_.Get(pid, *m);
  if (!elf) {
    unresolved_++;
    return f;
  }
  f.build_id = elf->build_id();
  auto bias = elf->LoadBias(m->start, m->offset);
  if (!bias) {
    unresolved_++;
    return f;
  }
  uint64_t vaddr = address - *bias;
  f.address = vaddr;
  auto [it, inserted] = names_.try_emplace(NameKey{elf, vaddr});
  if (inserted) {
    // Demangling dominates symbolization; each address is demangled once.
    if (names_.size() > kMaxCachedNames) {
      names_.clear();
      it = names_.try_emplace(NameKey{elf, vaddr}).first;
    }
    if (auto hit = elf->Lookup(vaddr)) {
      it->second.system_name = std::string(hit->name);
      it->second.name = Demangle(hit->name);
    }
  }
  if (it->second.system_name.empty()) {
    unresolved_++;
    f.name = absl::StrFormat("0x%x", address);
    return f;
  }
  f.system_name = it->second.system_name;
  f.name = it->second.name;
  return f;
}

}  // namespace gpuflame::symbolizer
