// Names a module-relative address in the binary with a given GNU build ID:
// the one path by which frames that were raw addresses at capture get their
// names later, whether in a running agent (FrameRefresher, before every
// window) or offline (`gpuflame symbolize` on a stored pprof).
// Binaries come from a BuildIdIndex over the configured directories, then
// from the frame's own file when it still holds that very build.
// Not thread-safe.
#ifndef GPUFLAME_SYMBOLIZER_BUILD_ID_RESOLVER_H_
#define GPUFLAME_SYMBOLIZER_BUILD_ID_RESOLVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "symbolizer/build_id_index.h"
#include "symbolizer/elf_file.h"

namespace gpuflame::symbolizer {

struct SymbolName {
  std::string name;         // demangled, as flame graphs show it
  std::string system_name;  // as in the symbol table
};

// The symbol covering |vaddr| in |elf|, demangled; empty names if none.
SymbolName NameAt(const ElfFile& elf, uint64_t vaddr);

class BuildIdResolver {
 public:
  enum class Outcome { kNamed, kNoBinary, kNoSymbol };
  struct Result {
    Outcome outcome = Outcome::kNoBinary;
    SymbolName symbol;  // set when kNamed
  };

  explicit BuildIdResolver(std::vector<std::string> dirs) : index_(std::move(dirs)) {}

  // |address| is module-relative, as frames record it. |file| (may be empty)
  // is the path the frame was captured from, tried when no indexed binary
  // has |build_id|.
  Result Resolve(const std::string& build_id, uint64_t address, const std::string& file = "");
  // Files added to the directories since the last call become findable.
  void Rescan() { index_.Rescan(); }
  bool has_dirs() const { return !index_.empty(); }

 private:
  const ElfFile* BinaryFor(const std::string& build_id, const std::string& file);

  BuildIdIndex index_;
  // By build ID (then path): a file's own copy, nullptr when it is not that build.
  std::map<std::pair<std::string, std::string>, std::unique_ptr<ElfFile>> at_path_;
};

}  // namespace gpuflame::symbolizer

#endif  // GPUFLAME_SYMBOLIZER_BUILD_ID_RESOLVER_H_
