#include "profiler/process/usdt_sites.h"

#include "absl/strings/str_cat.h"
#include "profiler/probes/usdt_notes.h"

namespace gpuflame::profiler {

std::vector<BpfProbes::UsdtSite> UsdtSites(const symbolizer::ElfFile& elf, std::string_view provider,
                                           std::string_view name, std::string* why) {
  std::vector<BpfProbes::UsdtSite> sites;
  auto skip = [&](const std::string& reason) {
    if (why && why->empty()) *why = reason;
  };
  for (const UsdtNote& note : ParseUsdtNotes(elf.usdt_notes())) {
    if (note.provider != provider || note.name != name) continue;
    const std::string probe = absl::StrCat(note.provider, ":", note.name, " at 0x", absl::Hex(note.pc));
    auto offset = elf.CodeVaddrToOffset(UsdtSiteAddress(note, elf.usdt_base()));
    if (!offset) {
      skip(absl::StrCat(probe, ": not in the file's code"));
      continue;
    }
    BpfProbes::UsdtSite site;
    site.offset = *offset;
    if (note.semaphore) {
      auto semaphore = elf.VaddrToOffset(note.semaphore);
      if (!semaphore || elf.CodeVaddrToOffset(note.semaphore)) {
        skip(absl::StrCat(probe, ": its semaphore is not in the file's data"));
        continue;
      }
      site.semaphore_offset = *semaphore;
    }
    absl::StatusOr<gf_usdt_spec> spec = ParseUsdtArgs(note.args);
    if (!spec.ok()) {
      skip(absl::StrCat(probe, ": ", std::string(spec.status().message())));
      continue;
    }
    site.spec = *spec;
    sites.push_back(site);
  }
  return sites;
}

}  // namespace gpuflame::profiler
