#include "symbolizer/build_id_index.h"

#include <filesystem>

namespace gpuflame::symbolizer {
namespace {

constexpr size_t kMaxFilesScanned = 100000;

}  // namespace

void BuildIdIndex::ScanOnce() {
  if (scanned_) return;
  scanned_ = true;
  std::map<std::string, size_t> symbols;
  for (const std::string& dir : dirs_) {
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(
             dir, std::filesystem::directory_options::skip_permission_denied, ec);
         it != std::filesystem::recursive_directory_iterator() && files_scanned_ < kMaxFilesScanned;
         it.increment(ec)) {
      if (ec) break;
      if (!it->is_regular_file(ec)) continue;
      files_scanned_++;
      auto elf = ElfFile::Open(it->path().string());
      if (!elf.ok() || elf->build_id().empty()) continue;
      auto [best, inserted] = symbols.try_emplace(elf->build_id(), elf->symbol_count());
      if (inserted || elf->symbol_count() > best->second) {
        best->second = elf->symbol_count();
        scan_[elf->build_id()] = it->path().string();
      }
    }
  }
}

const ElfFile* BuildIdIndex::Find(const std::string& build_id) {
  if (build_id.size() < 3) return nullptr;
  auto cached = opened_.find(build_id);
  if (cached != opened_.end()) return cached->second.get();
  std::vector<std::string> candidates;
  for (const std::string& dir : dirs_) {
    std::string base = dir + "/.build-id/" + build_id.substr(0, 2) + "/" + build_id.substr(2);
    candidates.push_back(base + ".debug");
    candidates.push_back(base);
  }
  std::unique_ptr<ElfFile> best;
  auto consider = [&](const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return;
    auto elf = ElfFile::Open(path);
    if (!elf.ok() || elf->build_id() != build_id || elf->symbol_count() == 0) return;
    if (!best || elf->symbol_count() > best->symbol_count()) best = std::make_unique<ElfFile>(std::move(*elf));
  };
  for (const std::string& path : candidates) consider(path);
  if (!best) {
    ScanOnce();
    if (auto it = scan_.find(build_id); it != scan_.end()) consider(it->second);
  }
  const ElfFile* raw = best.get();
  opened_.emplace(build_id, std::move(best));
  return raw;
}

void BuildIdIndex::Rescan() {
  scanned_ = false;
  files_scanned_ = 0;
  scan_.clear();
  std::erase_if(opened_, [](const auto& kv) { return kv.second == nullptr; });
}

}  // namespace gpuflame::symbolizer
