// Symbols and layout of one ELF file, read once with libelf and kept as
// compact sorted tables. ELF files come from profiled processes (containers,
// pip wheels) and are untrusted: sizes are capped and a malformed file is an
// error value, never a crash.
#ifndef GPUFLAME_SYMBOLIZER_ELF_FILE_H_
#define GPUFLAME_SYMBOLIZER_ELF_FILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuflame::symbolizer {

struct LoadSegment {
  uint64_t vaddr = 0;
  uint64_t offset = 0;
  uint64_t filesz = 0;
  uint64_t memsz = 0;
  bool executable = false;
};

class ElfFile {
 public:
  // Reads the file's program headers, symbol tables (.symtab and .dynsym) and
  // build ID. |path| may be a /proc/PID/root/... or /proc/PID/map_files/... path.
  static absl::StatusOr<ElfFile> Open(const std::string& path);

  // The file offset of the exported (.dynsym) function |name|, read without
  // indexing the file: for one lookup while a process waits at a gate, in a
  // library whose tables take long to index (libtorch_cpu.so: ~0.3 s).
  static std::optional<uint64_t> ExportedFunctionOffset(const std::string& path, std::string_view name);

  ElfFile(ElfFile&&) = default;
  ElfFile& operator=(ElfFile&&) = default;

  // Address (st_value) of a defined symbol, functions and data alike.
  std::optional<uint64_t> FindSymbol(std::string_view name) const;
  // Whether |name| is defined in .dynsym, i.e. callable from other objects.
  bool Exports(std::string_view name) const;
  // The function or object containing |vaddr|, with its start.
  struct Hit {
    std::string_view name;
    uint64_t start;
  };
  std::optional<Hit> Lookup(uint64_t vaddr) const;

  // File offset of a virtual address (what uprobes attach to).
  std::optional<uint64_t> VaddrToOffset(uint64_t vaddr) const;
  // The same for an address in an executable segment only (a probe site).
  std::optional<uint64_t> CodeVaddrToOffset(uint64_t vaddr) const;
  // The .note.stapsdt section's bytes, raw (USDT probes; "" without), and
  // the address of .stapsdt.base (0: none), which prelink moves them by.
  std::string_view usdt_notes() const { return usdt_notes_; }
  uint64_t usdt_base() const { return usdt_base_; }
  // Load bias of a mapping of this file at |map_start| with file offset |map_offset|.
  std::optional<uint64_t> LoadBias(uint64_t map_start, uint64_t map_offset) const;
  // Bytes of the file's initialised data at |vaddr| (e.g. a constant like Py_Version).
  std::optional<std::string> ReadVaddr(uint64_t vaddr, size_t len) const;

  bool is_executable_type() const { return is_exec_; }  // ET_EXEC: bias 0
  const std::string& build_id() const { return build_id_; }
  const std::string& path() const { return path_; }
  size_t symbol_count() const { return symbols_.size(); }
  // Bytes held for this file's tables (for the per-module memory figure).
  size_t MemoryUsage() const;

 private:
  ElfFile() = default;
  struct Symbol {
    uint64_t start;
    uint64_t size;
    uint32_t name_offset;  // into names_
    bool exported;
  };
  std::string_view NameOf(const Symbol& s) const;

  std::string path_;
  std::string build_id_;  // hex
  bool is_exec_ = false;
  std::vector<LoadSegment> loads_;
  std::vector<Symbol> symbols_;  // sorted by start
  std::string names_;            // NUL-separated symbol names
  std::string usdt_notes_;
  uint64_t usdt_base_ = 0;
};

}  // namespace gpuflame::symbolizer

#endif  // GPUFLAME_SYMBOLIZER_ELF_FILE_H_
