#include "exporters/pprof/pprof_symbolizer.h"

#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "profile.pb.h"
#include "symbolizer/build_id_resolver.h"

namespace gpuflame::exporters {
namespace {

// A native frame not named at capture: `module+0xOFFSET` (no symbol has a
// '+' in its name), or, in profiles of earlier releases, `0xADDRESS`.
bool IsRaw(std::string_view name) {
  if (name.starts_with("0x")) return true;
  const size_t plus = name.rfind("+0x");
  return plus != std::string_view::npos && plus > 0 && plus + 3 < name.size() &&
         name.find_first_not_of("0123456789abcdef", plus + 3) == std::string_view::npos;
}

}  // namespace

absl::StatusOr<SymbolizeReport> SymbolizePprof(std::string& bytes, const std::vector<std::string>& binary_dirs) {
  pprof::Profile p;
  if (!p.ParseFromString(bytes)) return absl::InvalidArgumentError("not a pprof profile");
  // From here the parsed profile is the only copy: the bytes go now, not
  // when the new ones replace them (one profile's size less at the peak).
  std::string().swap(bytes);
  auto str = [&](int64_t i) -> const std::string& {
    static const std::string kEmpty;
    return i >= 0 && i < p.string_table_size() ? p.string_table(static_cast<int>(i)) : kEmpty;
  };
  // Keys are views of the table's own strings, not copies: a profile's
  // strings can be most of its size. The table's strings stay where they are
  // as it grows (a repeated string field holds pointers to them).
  absl::flat_hash_map<std::string_view, int64_t> strings;
  for (int i = 0; i < p.string_table_size(); i++) strings.emplace(p.string_table(i), i);
  auto intern = [&](const std::string& s) -> int64_t {
    if (auto it = strings.find(s); it != strings.end()) return it->second;
    const int64_t id = p.string_table_size();
    p.add_string_table(s);
    strings.emplace(p.string_table(static_cast<int>(id)), id);
    return id;
  };
  absl::flat_hash_map<uint64_t, pprof::Function*> functions;
  uint64_t next_function = 1;
  for (auto& f : *p.mutable_function()) {
    functions[f.id()] = &f;
    next_function = std::max(next_function, f.id() + 1);
  }
  absl::flat_hash_map<uint64_t, const pprof::Mapping*> mappings;
  for (const auto& m : p.mapping()) mappings[m.id()] = &m;

  symbolizer::BuildIdResolver resolver(binary_dirs);

  // New functions by name, so that equal names share one.
  absl::flat_hash_map<std::string, uint64_t> by_name;
  SymbolizeReport r;
  for (auto& loc : *p.mutable_location()) {
    if (loc.mapping_id() == 0 || loc.line_size() == 0) continue;
    auto fit = functions.find(loc.line(0).function_id());
    if (fit == functions.end() || !IsRaw(str(fit->second->name()))) continue;
    r.unresolved_before++;
    auto mit = mappings.find(loc.mapping_id());
    if (mit == mappings.end()) {
      r.no_binary++;
      continue;
    }
    const pprof::Mapping& m = *mit->second;
    auto found = resolver.Resolve(str(m.build_id()), loc.address(), str(m.filename()));
    if (found.outcome != symbolizer::BuildIdResolver::Outcome::kNamed) {
      (found.outcome == symbolizer::BuildIdResolver::Outcome::kNoBinary ? r.no_binary : r.no_symbol)++;
      continue;
    }
    const std::string& system = found.symbol.system_name;
    const std::string& name = found.symbol.name;
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
