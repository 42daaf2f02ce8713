#include "symbolizer/native_symbolizer.h"

#include <unistd.h>

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "symbolizer/build_id_resolver.h"
#include "symbolizer/demangle.h"

namespace gpuflame::symbolizer {

const inspect::Mapping* NativeSymbolizer::FindMapping(pid_t pid, uint64_t address) {
  auto find = [&](const std::vector<inspect::Mapping>& maps) -> const inspect::Mapping* {
    auto it = std::upper_bound(maps.begin(), maps.end(), address,
                               [](uint64_t a, const inspect::Mapping& m) { return a < m.start; });
    if (it == maps.begin()) return nullptr;
    --it;
    return it->Contains(address) ? &*it : nullptr;
  };
  auto it = maps_.find(pid);
  if (it != maps_.end())
    if (const inspect::Mapping* m = find(it->second)) return m;
  // A miss may be a library mapped since we last looked: re-read once.
  auto fresh = inspect::ReadProcMaps(pid);
  if (!fresh.ok()) return nullptr;
  auto& slot = maps_[pid];
  slot = std::move(*fresh);
  return find(slot);
}

const std::vector<inspect::Mapping>* NativeSymbolizer::Maps(pid_t pid) {
  auto it = maps_.find(pid);
  if (it != maps_.end()) return &it->second;
  auto fresh = inspect::ReadProcMaps(pid);
  if (!fresh.ok()) return nullptr;
  return &(maps_[pid] = std::move(*fresh));
}

size_t NativeSymbolizer::Sweep(int64_t now_ns, int64_t keep_ns, absl::FunctionRef<bool(pid_t)> alive) {
  // A process's maps go once it was found gone at two sweeps in a row: its
  // last records may still wait in the queue when it is first found gone.
  absl::flat_hash_set<pid_t> dead;
  for (const auto& [pid, maps] : maps_)
    if (!alive(pid)) dead.insert(pid);
  absl::erase_if(maps_, [&](const auto& kv) { return dead.contains(kv.first) && dead_maps_.contains(kv.first); });
  dead_maps_ = std::move(dead);
  return elves_.Sweep(now_ns, keep_ns, alive, [&](std::span<const ElfFile* const> files) {
    // Before the files are freed: no key outlives its file.
    const absl::flat_hash_set<const ElfFile*> gone(files.begin(), files.end());
    for (const ElfFile* elf : files) dwarf_.erase(elf);  // unmaps the file
    absl::erase_if(names_, [&](const auto& kv) { return gone.contains(kv.first.elf); });
  });
}

DwarfInlines* NativeSymbolizer::InlinesFor(pid_t pid, const inspect::Mapping& m, const ElfFile& elf) {
  auto [it, inserted] = dwarf_.try_emplace(&elf);
  if (inserted) {
    inspect::PinnedFile file = inspect::PinnedFile::Open(pid, m);
    if (file.ok()) it->second = DwarfInlines::Open(file.Dup());
  }
  return it->second.get();
}

const NativeSymbolizer::Entry* NativeSymbolizer::Lookup(pid_t pid, const inspect::Mapping& m, const ElfFile& elf,
                                                        uint64_t vaddr) {
  auto it = names_.find(NameKey{&elf, vaddr});
  if (it != names_.end()) return &it->second;
  // Demangling and DWARF walks dominate symbolization: each address once.
  if (names_.size() >= kMaxCachedNames) names_.clear();
  Entry e;
  SymbolName symbol = NameAt(elf, vaddr);
  e.function.system_name = std::move(symbol.system_name);
  e.function.name = std::move(symbol.name);
  if (DwarfInlines* dw = InlinesFor(pid, m, elf)) {
    std::vector<SourceFrame> src = dw->At(vaddr);
    if (!src.empty()) {
      // The outermost is the function .symtab named (or names it when the
      // symbol table was stripped but DWARF was not).
      if (e.function.system_name.empty() && !src[0].system_name.empty()) {
        e.function.system_name = src[0].system_name;
        e.function.name = Demangle(src[0].system_name);
      }
      e.function.line = src[0].line;
      for (size_t i = 1; i < src.size(); i++)
        e.inlined.push_back({Demangle(src[i].system_name), src[i].system_name, src[i].line});
    }
  }
  return &names_.emplace(NameKey{&elf, vaddr}, std::move(e)).first->second;
}

void NativeSymbolizer::Append(pid_t pid, uint64_t address, std::vector<Frame>& out) {
  Frame f;
  f.kind = FrameKind::kNative;
  f.address = address;
  f.name = absl::StrFormat("0x%x", address);
  const inspect::Mapping* m = FindMapping(pid, address);
  const ElfFile* elf = m && m->inode != 0 ? elves_.Get(pid, *m) : nullptr;
  if (m) f.file = m->path;
  auto bias = elf ? elf->LoadBias(m->start, m->offset) : std::nullopt;
  if (!elf || !bias) {
    unresolved_++;
    // No ELF file to name it by. An absolute address differs in every
    // process (ASLR): each would be a frame of its own, in no flame graph
    // merged, and the agent's frame table would grow with process churn.
    // Named by what holds it instead, the same in every process.
    if (!m) {
      f.name = kUnknownMappingFrame;  // gone before its mappings were read
      f.address = 0;
    } else if (m->inode == 0) {
      // [vdso] is the kernel's one image: its offsets name the same code.
      const bool image = m->path == "[vdso]" || m->path == "[vsyscall]";
      f.address = image ? address - m->start : 0;
      f.name = image ? absl::StrFormat("%s+0x%x", m->path, f.address) : std::string(kAnonymousMemoryFrame);
    } else {
      // A file that is no ELF we could read (or one left alone: FUSE):
      // named by file and offset, as a stripped library is.
      f.address = address - m->start + m->offset;
      const std::string_view path = m->path;
      f.name = absl::StrFormat("%s+0x%x", path.substr(path.rfind('/') + 1), f.address);
    }
    out.push_back(std::move(f));
    return;
  }
  f.build_id = elf->build_id();
  uint64_t vaddr = address - *bias;
  f.address = vaddr;
  const Entry* e = Lookup(pid, *m, *elf, vaddr);
  if (e->function.system_name.empty()) {
    // Raw, but with module, build ID and offset: `gpuflame symbolize` and
    // later windows can still name it. Named by module and offset, not by
    // address: the same code is one frame in every process and restart.
    const std::string_view path = m->path;
    f.name = absl::StrFormat("%s+0x%x", path.substr(path.rfind('/') + 1), vaddr);
    unresolved_++;
    out.push_back(std::move(f));
    return;
  }
  f.system_name = e->function.system_name;
  f.name = e->function.name;
  f.line = e->function.line;
  out.push_back(f);
  for (const Names& n : e->inlined) {
    inlined_++;
    f.inlined = true;
    f.name = n.name;
    f.system_name = n.system_name;
    f.line = n.line;
    out.push_back(f);
  }
}

Frame NativeSymbolizer::Symbolize(pid_t pid, uint64_t address) {
  std::vector<Frame> frames;
  Append(pid, address, frames);
  Frame outer = std::move(frames.front());
  outer.line = 0;
  return outer;
}

}  // namespace gpuflame::symbolizer
