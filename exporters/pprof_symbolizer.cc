#include "exporters/pprof_symbolizer.h"

#include <filesystem>
#include <map>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "profile.pb.h"
#include "symbolizer/demangle.h"
#include "symbolizer/elf_file.h"

namespace gpuflame::exporters {
namespace {

constexpr size_t kMaxFilesScanned = 100000;

bool IsRawAddress(const std::string& name) { return name.rfind("0x", 0) == 0; }

// Build ID -> path, for every ELF file under |dirs|. Stripped and unstripped
// copies share a build ID: the one with the most symbols wins.
std::map<std::string, std::string> IndexBinaries(const std::vector<std::string>& dirs) {
  std::map<std::string, std::string> index;
  std::map<std::string, size_t> symbols;
  size_t seen = 0;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(
             dir, std::filesystem::directory_options::skip_permission_denied, ec);
         it != std::filesystem::recursive_directory_iterator() && seen < kMaxFilesScanned; it.increment(ec)) {
      if (ec) break;
      if (!it->is_regular_file(ec)) continue;
      seen++;
      auto elf = symbolizer::ElfFile::Open(it->path().string());
      if (!elf.ok() || elf->build_id().empty()) continue;
      auto [best, inserted] = symbols.try_emplace(elf->build_id(), elf->symbol_count());
      if (inserted || elf->symbol_count() > best->second) {
        best->second = elf->symbol_count();
        index[elf->build_id()] = it->path().string();
      }
    }
  }
  return index;
}

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

  std::map<std::string, std::string> index = IndexBinaries(binary_dirs);
  std::map<std::string, std::unique_ptr<symbolizer::ElfFile>> opened;  // by build ID
  auto binary_for = [&](const pprof::Mapping& m) -> const symbolizer::ElfFile* {
    const std::string& build_id = str(m.build_id());
    auto cached = opened.find(build_id);
    if (cached != opened.end()) return cached->second.get();
    std::unique_ptr<symbolizer::ElfFile> file;
    auto it = index.find(build_id);
    std::vector<std::string> candidates;
    if (it != index.end()) candidates.push_back(it->second);
    candidates.push_back(str(m.filename()));
    for (const std::string& path : candidates) {
      auto elf = symbolizer::ElfFile::Open(path);
      if (elf.ok() && (build_id.empty() || elf->build_id() == build_id)) {
        file = std::make_unique<symbolizer::ElfFile>(std::move(*elf));
        break;
      }
    }
    const symbolizer::ElfFile* raw = file.get();
    opened.emplace(build_id, std::move(file));
    return raw;
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
