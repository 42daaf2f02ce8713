#include "symbolizer/build_id_resolver.h"

#include "symbolizer/demangle.h"

namespace gpuflame::symbolizer {

SymbolName NameAt(const ElfFile& elf, uint64_t vaddr) {
  auto hit = elf.Lookup(vaddr);
  if (!hit) return {};
  return {Demangle(hit->name), std::string(hit->name)};
}

const ElfFile* BuildIdResolver::BinaryFor(const std::string& build_id, const std::string& file) {
  if (const ElfFile* found = index_.Find(build_id)) return found;
  if (file.empty()) return nullptr;
  auto [it, inserted] = at_path_.try_emplace({build_id, file});
  if (inserted) {
    auto elf = ElfFile::Open(file);
    if (elf.ok() && (build_id.empty() || elf->build_id() == build_id))
      it->second = std::make_unique<ElfFile>(std::move(*elf));
  }
  return it->second.get();
}

BuildIdResolver::Result BuildIdResolver::Resolve(const std::string& build_id, uint64_t address,
                                                 const std::string& file) {
  const ElfFile* elf = BinaryFor(build_id, file);
  if (!elf) return {Outcome::kNoBinary, {}};
  SymbolName symbol = NameAt(*elf, address);
  if (symbol.system_name.empty()) return {Outcome::kNoSymbol, {}};
  return {Outcome::kNamed, std::move(symbol)};
}

}  // namespace gpuflame::symbolizer
