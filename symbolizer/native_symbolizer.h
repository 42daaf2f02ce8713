// Native addresses of a live process to frames: the mapping from
// /proc/PID/maps, the symbol from the module's .symtab/.dynsym with its load
// bias, demangled. Unresolvable addresses are named by module and offset
// (`libffi.so.8+0x640d`) with the build ID, so a later pass may name them;
// without a file behind them, by what holds them (`[vdso]+0x...`,
// `[anonymous memory]`, `[unknown mapping]`): the same in every process.
// Not thread-safe: event loop only.
#ifndef GPUFLAME_SYMBOLIZER_NATIVE_SYMBOLIZER_H_
#define GPUFLAME_SYMBOLIZER_NATIVE_SYMBOLIZER_H_

#include <sys/types.h>

#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "inspect/proc_maps.h"
#include "symbolizer/dwarf_inlines.h"
#include "symbolizer/elf_cache.h"
#include "symbolizer/frame.h"

namespace gpuflame::symbolizer {

// Native frames with no ELF file behind them, named the same in every
// process (an absolute address would be a frame per process).
inline constexpr const char* kUnknownMappingFrame = "[unknown mapping]";
inline constexpr const char* kAnonymousMemoryFrame = "[anonymous memory]";

class NativeSymbolizer {
 public:
  explicit NativeSymbolizer(ElfCache& elves) : elves_(elves) {}

  // The function containing |address|, by ELF symbol.
  Frame Symbolize(pid_t pid, uint64_t address);
  // Appends |address|'s frames to |out|, outermost first: the function, then
  // each call that -O2 inlined into it where the module has DWARF.
  void Append(pid_t pid, uint64_t address, std::vector<Frame>& out);
  // Keeps |maps| as |pid|'s layout: a process that exits right after its
  // last allocation is still symbolized from what was seen while it ran.
  void Remember(pid_t pid, std::vector<inspect::Mapping> maps) { maps_[pid] = std::move(maps); }
  // |pid|'s mappings as last seen (read now if never seen); nullptr if none.
  const std::vector<inspect::Mapping>* Maps(pid_t pid);
  ElfCache& elves() { return elves_; }
  // The mapping holding |address| in |pid|; on a miss the maps are read
  // again once (a library mapped since), so a miss costs a /proc read.
  const inspect::Mapping* FindMapping(pid_t pid, uint64_t address);
  // Drops the cached maps of |pid| (after exec, new mappings, or exit).
  void Forget(pid_t pid) { maps_.erase(pid); }
  // |pid| called exec: the files it mapped before are no longer its.
  void Execed(pid_t pid) {
    maps_.erase(pid);
    elves_.ForgetUser(pid);
  }
  // What processes now gone (|alive| false) left behind: their remembered
  // maps (once found gone twice), and each file no running process has
  // used for |keep_ns|, with the names and DWARF read from it
  // (ElfCache::Sweep). Returns the files freed.
  size_t Sweep(int64_t now_ns, int64_t keep_ns, absl::FunctionRef<bool(pid_t)> alive);
  size_t unresolved() const { return unresolved_; }
  // Files whose DWARF is open (each keeps its file mapped).
  size_t dwarf_files() const { return dwarf_.size(); }
  // Addresses whose names are cached.
  size_t cached_names() const { return names_.size(); }
  size_t inlined_frames() const { return inlined_; }

 private:

  struct NameKey {
    // Owned by elves_; its entries go before elves_ frees the file (Sweep),
    // so no key outlives its file and a new file at the same address is
    // never taken for the old one.
    const ElfFile* elf;
    uint64_t vaddr;
    bool operator==(const NameKey&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const NameKey& k) {
      return H::combine(std::move(h), k.elf, k.vaddr);
    }
  };
  struct Names {
    std::string name, system_name;  // empty: no symbol covers the address
    int64_t line = 0;
  };
  struct Entry {
    Names function;               // from .symtab/.dynsym
    std::vector<Names> inlined;   // from DWARF, outermost first
  };
  const Entry* Lookup(pid_t pid, const inspect::Mapping& m, const ElfFile& elf, uint64_t vaddr);
  DwarfInlines* InlinesFor(pid_t pid, const inspect::Mapping& m, const ElfFile& elf);
  static constexpr size_t kMaxCachedNames = 1 << 18;

  ElfCache& elves_;
  absl::flat_hash_map<pid_t, std::vector<inspect::Mapping>> maps_;
  absl::flat_hash_set<pid_t> dead_maps_;  // found gone at the last sweep
  absl::flat_hash_map<NameKey, Entry> names_;
  absl::flat_hash_map<const ElfFile*, std::unique_ptr<DwarfInlines>> dwarf_;  // nullptr: no DWARF
  size_t inlined_ = 0;
  size_t unresolved_ = 0;
};

}  // namespace gpuflame::symbolizer

#endif  // GPUFLAME_SYMBOLIZER_NATIVE_SYMBOLIZER_H_
