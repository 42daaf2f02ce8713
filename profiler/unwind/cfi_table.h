// Unwind rows of one ELF file (x86-64), computed from its .eh_frame or
// .debug_frame by libdw on first use and cached as compact ranges, so that a
// warm unwind step is a binary search and two reads from the copied stack
// instead of a CFI program run (libdwfl re-interprets the FDE at every frame:
// 12-54 us per stack in bench/unwind_benchmark.cc, against ~1 us here).
// Only the rules compilers emit for ordinary code are kept (CFA = rsp/rbp +
// offset, RA and rbp saved at CFA + offset); anything else (PLT expressions,
// signal frames, DWARF expressions) is reported as unsupported and the caller
// falls back to libdwfl. Shared across processes through CfiCache, and its
// libelf handle with libdwfl's modules of the same file (ElfReference), so
// that one mapping of each file serves every process and no descriptor is
// held for it. Not thread-safe: event loop only.
#ifndef GPUFLAME_PROFILER_UNWIND_CFI_TABLE_H_
#define GPUFLAME_PROFILER_UNWIND_CFI_TABLE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "base/scoped_fd.h"

typedef struct Elf Elf;

namespace gpuflame::profiler {

struct UnwindRow {
  enum class Cfa : uint8_t { kRsp, kRbp };
  enum class Rbp : uint8_t { kSame, kAtCfa, kUndefined };
  enum class Kind : uint8_t {
    kFrame,        // caller's pc at CFA + ra_offset
    kOutermost,    // return address undefined: the stack ends here (_start, clone)
    kUnsupported,  // rules outside the fast subset, or no CFI: use libdwfl
  };
  uint64_t start = 0, end = 0;  // [start, end) in the file's virtual addresses
  int32_t cfa_offset = 0;
  int32_t ra_offset = -8;
  int32_t rbp_offset = 0;
  Cfa cfa = Cfa::kRsp;
  Rbp rbp = Rbp::kSame;
  Kind kind = Kind::kUnsupported;
};

class CfiTable {
 public:
  // Maps the file |fd| names and closes |fd| (kept only where the mapping
  // failed: symbolizer::HeldElf); nullptr if it is not an ELF file libelf
  // can read.
  static std::unique_ptr<CfiTable> Open(base::ScopedFd fd);
  ~CfiTable();
  CfiTable(const CfiTable&) = delete;
  CfiTable& operator=(const CfiTable&) = delete;

  // The row covering |vaddr| (a file virtual address, not a runtime one).
  const UnwindRow& Find(uint64_t vaddr);
  size_t rows() const { return rows_.size(); }
  size_t MemoryUsage() const { return rows_.capacity() * sizeof(UnwindRow); }

  // The file's loaded span in its own virtual addresses, as libdwfl reckons
  // a module's: from the first PT_LOAD's start rounded down to its alignment
  // to the highest segment end. Reported at a process's load bias plus this,
  // a libdwfl module's bias comes out as that load bias. None: no PT_LOAD,
  // a span that wraps, or a relocatable file (libdwfl gives those bias 0).
  struct LoadSpan {
    uint64_t low = 0, high = 0;
  };
  const std::optional<LoadSpan>& load_span() const { return load_span_; }
  // A new reference to the file's libelf handle, for a libdwfl module to
  // own (its elf_end drops the reference; the mapping goes with the last).
  Elf* ElfReference() const;

 private:
  struct Handles;
  explicit CfiTable(std::unique_ptr<Handles> h);
  UnwindRow Compute(uint64_t vaddr);

  std::unique_ptr<Handles> handles_;
  std::optional<LoadSpan> load_span_;
  std::vector<UnwindRow> rows_;  // sorted by start, disjoint
  UnwindRow overflow_;           // the answer when rows_ is full
};

// One CfiTable per build ID, whichever process mapped the file first. A
// table goes once no process's module list has held it for a while (Sweep):
// it keeps its file mapped, so a container image deleted from the node
// would otherwise stay on its disk for the agent's life.
class CfiCache {
 public:
  // |open_fd| is called only on a miss; it returns a base::ScopedFd, invalid
  // when the file cannot be opened.
  template <typename OpenFd>
  std::shared_ptr<CfiTable> Get(const std::string& key, OpenFd open_fd) {
    auto it = tables_.find(key);
    if (it != tables_.end()) {
      it->second.unused_since_ns = -1;  // the keep time counts from the last use
      return it->second.table;
    }
    base::ScopedFd fd = open_fd();
    // Not remembered: the next process that maps the file may open it (this
    // one has gone, or descriptors ran out). A file that opens and is no
    // ELF object is remembered as such.
    if (!fd) return nullptr;
    Entry e;
    e.table = CfiTable::Open(std::move(fd));
    return tables_.emplace(key, std::move(e)).first->second.table;
  }
  // Frees the tables no one else has held for |keep_ns| (0: at once), and
  // forgets files remembered as unreadable as long ago (they are tried
  // again). Returns how many went.
  size_t Sweep(int64_t now_ns, int64_t keep_ns);
  size_t size() const { return tables_.size(); }
  size_t evicted() const { return evicted_; }
  size_t MemoryUsage() const;

 private:
  struct Entry {
    std::shared_ptr<CfiTable> table;  // nullptr: unreadable
    int64_t unused_since_ns = -1;     // -1: held or asked for since the last sweep
  };
  absl::flat_hash_map<std::string, Entry> tables_;
  size_t evicted_ = 0;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_UNWIND_CFI_TABLE_H_
