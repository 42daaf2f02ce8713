#include "symbolizer/build_id_index.h"

#include <filesystem>

namespace gpuflame::symbolizer {
namespace {

constexpr size_t kMaxFilesScanned = 100000;

}  // namespace

void BuildIdIndex::ScanOnce() {
  if (scanned_) return;
  scanned_ = true;
  // A walk stats every file, but only files new or changed since the last
  // walk are opened: the agent rescans every window that still has raw
  // frames, and a debug tree of thousands of files must not be parsed anew.
  absl::flat_hash_map<std::string, Seen> seen;
  size_t files = 0;
  for (const std::string& dir : dirs_) {
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(
             dir, std::filesystem::directory_options::skip_permission_denied, ec);
         it != std::filesystem::recursive_directory_iterator() && files < kMaxFilesScanned; it.increment(ec)) {
      if (ec) break;
      if (!it->is_regular_file(ec)) continue;
      files++;
      std::string path = it->path().string();
      Seen now{static_cast<uint64_t>(it->file_size(ec)),
               static_cast<int64_t>(it->last_write_time(ec).time_since_epoch().count()), "", 0};
      auto known = seen_.find(path);
      if (known != seen_.end() && known->second.size == now.size && known->second.mtime == now.mtime) {
        now = known->second;
      } else {
        files_opened_++;
        if (auto elf = ElfFile::Open(path); elf.ok()) {
          now.build_id = elf->build_id();
          now.symbols = elf->symbol_count();
        }
      }
      seen.emplace(std::move(path), now);
    }
  }
  seen_ = std::move(seen);
  scan_.clear();
  std::map<std::string, size_t> best_symbols;
  for (const auto& [path, s] : seen_) {
    if (s.build_id.empty()) continue;
    auto [best, inserted] = best_symbols.try_emplace(s.build_id, s.symbols);
    if (inserted || s.symbols > best->second) {
      best->second = s.symbols;
      scan_[s.build_id] = path;
    }
  }
}

std::string BuildIdPath(const std::string& dir, const std::string& build_id) {
  return dir + "/.build-id/" + build_id.substr(0, 2) + "/" + build_id.substr(2);
}

const ElfFile* BuildIdIndex::Find(const std::string& build_id) {
  if (build_id.size() < 3) return nullptr;
  auto cached = opened_.find(build_id);
  if (cached != opened_.end()) return cached->second.get();
  std::vector<std::string> candidates;
  for (const std::string& dir : dirs_) {
    std::string base = BuildIdPath(dir, build_id);
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
  std::erase_if(opened_, [](const auto& kv) { return kv.second == nullptr; });
}

}  // namespace gpuflame::symbolizer
