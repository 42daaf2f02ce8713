#include "exporters/pprof/pprof_symbolizer.h"

#include <map>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "profile.pb.h"
#include "symbolizer/build_id_index.h"
#include "symbolizer/demangle.h"
#include "symbolizer/elf_file.h"

namespace gpuflame::exporters {
namespace {

bool IsRawAddress(const std::string& name) { return name.rfind("0x", 0) == 0; }

}  // namespace

absl::StatusOr<SymbolizeReport> SymbolizePprof(std::string& bytes, const std::vector<std::string>& binary_dirs) {
  pprof::Profile p;
  if (!p.ParseFromString(bytes)) return absl::InvalidArgumentError("not a pprof profile");
  auto str = [&](int64_t i) -> const std::string& {
    static const std::string kEmpty;
    return i >= 0 && i < p.string_table_size() ? p.string_table(static_cast<int>(i)) : kEmpty;
  };
  absl::flat_hash_map<std::string, int64_t> strings;
  for (int i = 0; i < p.string_table_size(); i++) strings.emplace(p.string_table(i), i);
  auto intern = [&](const std::string& s) {
    auto [it, inserted] = strings.try_emplace(s, p.string_table_size());
    if (inserted) p.add_string_table(s);
    return it->second;
  };
  absl::flat_hash_map<uint64_t, pprof::Function*> functions;
  uint64_t next_function = 1;
  for (auto& f : *p.mutable_function()) {
    functions[f.id()] = &f;
    next_function = std::max(next_function, f.id() + 1);
  }
  absl::flat_hash_map<uint64_t, const pprof::Mapping*> mappings;
  for (const auto& m : p.mapping()) mappings[m.id()] = &m;

  symbolizer::BuildIdIndex index(binary_dirs);
  std::map<std::string, std::unique_ptr<symbolizer::ElfFile>> at_path;  // by build ID
  auto binary_for = [&](const pprof::Mapping& m) -> const symbolizer::ElfFile* {
    const std::string& build_id = str(m.build_id());
    if (const symbolizer::ElfFile* found = index.Find(build_id)) return found;
    // The mapping's own path, when it still holds that very build.
    auto [it, inserted] = at_path.try_emplace(build_id);
    if (inserted) {
      auto elf = symbolizer::ElfFile::Open(str(m.filename()));
      if (elf.ok() && (build_id.empty() || elf->build_id() == build_id))
        it->second = std::make_unique<symbolizer::ElfFile>(std::move(*elf));
    }
    return it->second.get();
  };

  // New functions by name, so that equal names share one.
  absl::flat_hash_map<std::string, uint64_t> by_name;
  SymbolizeReport r;
  for (auto& loc : *p.mutable_location()) {
    if (loc.mapping_id() == 0 || loc.line_size() == 0) continue;
    auto fit = functions.find(loc.line(0).function_id());
    if (fit == functions.end() || !IsRawAddress(str(fit->second->name()))) continue;
    r.unresolved_before++;
    auto mit = mappings.find(loc.mapping_id());
    const symbolizer::ElfFile* elf = mit == mappings.end() ? nullptr : binary_for(*mit->second);
    if (!elf) {
      r.no_binary++;
      continue;
    }
    auto hit = elf->Lookup(loc.address());
    if (!hit) {
      r.no_symbol++;
      continue;
    }
    std::string system(hit->name);
    std::string name = symbolizer::Demangle(system);
    auto [nit, inserted] = by_name.try_emplace(name, next_function);
    if (inserted) {
      auto* fn = p.add_function();
      fn->set_id(next_function++);
      fn->set_name(intern(name));
      fn->set_system_name(intern(system));
      fn->set_filename(mit->second->filename());
    }
    loc.mutable_line(0)->set_function_id(nit->second);
    r.resolved++;
  }
  bytes = p.SerializeAsString();
  return r;
}

}  // namespace gpuflame::exporters
