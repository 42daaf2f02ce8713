// DWARF CFI unwinding of a stack copied at a probe hit (.eh_frame and
// .debug_frame), so that libraries built without frame pointers (pip wheels,
// CPython) still yield their callers. The fast path replays unwind rows
// cached per build ID (CfiTable); a stack that needs a rule outside that
// subset is unwound by elfutils libdwfl instead, whole. Memory reads are
// served from the copy; anything outside it (rare: a caller's frame beyond
// the copied bytes) is read from the live process.
// Per process: its modules and one Dwfl, rebuilt when its mappings change;
// each file is mapped once, by its CfiTable, whatever the processes.
// Not thread-safe: event loop only.
#ifndef GPUFLAME_PROFILER_UNWIND_NATIVE_UNWINDER_H_
#define GPUFLAME_PROFILER_UNWIND_NATIVE_UNWINDER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "bpf/gpuflame_abi.h"
#include "profiler/unwind/cfi_table.h"
#include "symbolizer/native_symbolizer.h"

struct Dwfl;

namespace gpuflame::profiler {

struct UnwindStats {
  uint64_t unwinds = 0;
  uint64_t frames = 0;
  uint64_t fast = 0;      // unwound from cached rows alone
  uint64_t fallback = 0;  // needed libdwfl (expression rules, PLT, no CFI)
  uint64_t failures = 0;  // the process's modules could not be set up
  uint64_t relisted = 0;  // unwinds redone with the process's modules listed again (a library mapped since)
};

// The word at |addr| if it lies within |copy|, a copy of the stack from |sp|
// up. Any 64-bit |addr| and |sp| are safe.
bool ReadCopiedWord(std::span<const uint8_t> copy, uint64_t sp, uint64_t addr, uint64_t* out);

class NativeUnwinder {
 public:
  // Modules come from |symbols|' view of each process (maps remembered while
  // it ran), so a process that has exited can still be unwound.
  explicit NativeUnwinder(symbolizer::NativeSymbolizer& symbols);
  ~NativeUnwinder();
  NativeUnwinder(const NativeUnwinder&) = delete;
  NativeUnwinder& operator=(const NativeUnwinder&) = delete;

  // Return addresses, leaf first (the first is the probe's own pc).
  std::vector<uint64_t> Unwind(pid_t pid, const gf_user_regs& regs, std::span<const uint8_t> stack,
                               size_t max_frames = 128);
  // The process mapped something new (or exited): rebuild on next use.
  void Invalidate(pid_t pid);
  // Drops the processes |alive| says are gone (those whose exit was never
  // seen), then the unwind tables no process has held for |keep_ns|.
  // Returns the tables freed.
  size_t Sweep(int64_t now_ns, int64_t keep_ns, absl::FunctionRef<bool(pid_t)> alive);
  const UnwindStats& stats() const { return stats_; }
  const CfiCache& cfi() const { return cfi_; }
  // Only libdwfl, as before the row cache (benchmarks and cross-checks).
  void set_fast_path(bool on) { fast_path_ = on; }

  struct Context;  // per-unwind state handed to libdwfl's callbacks

 private:
  struct Process;
  struct Scratch;
  Process* Get(pid_t pid);
  // Whether an unwind that stopped at |pc| should be redone: |pc| lies in
  // a file mapping that |p|'s module list, older than it, lacks. |leaf|:
  // |pc| is where the probe fired, checked whatever the rate limit.
  bool Stale(Process& p, uint64_t pc, bool leaf);
  Dwfl* DwflFor(Process& p);
  bool FastUnwind(Process& p, size_t max_frames, std::vector<uint64_t>& pcs);
  void DwflUnwind(Process& p, size_t max_frames, std::vector<uint64_t>& pcs);

  symbolizer::NativeSymbolizer& symbols_;
  CfiCache cfi_;
  std::unique_ptr<Scratch> scratch_;
  bool fast_path_ = true;
  absl::flat_hash_map<pid_t, std::unique_ptr<Process>> processes_;
  // When each process's maps were last looked at for Stale(): a pc in no
  // mapping for good (JIT code, a garbage return address) costs a /proc
  // read at most this often.
  absl::flat_hash_map<pid_t, uint64_t> stale_checked_ns_;
  static constexpr uint64_t kStaleCheckNs = 50'000'000;
  UnwindStats stats_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_UNWIND_NATIVE_UNWINDER_H_
