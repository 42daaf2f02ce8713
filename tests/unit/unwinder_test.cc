// The native unwinder against itself: the cached-row fast path must find
// exactly the frames libdwfl finds, on this test's own stack captured the way
// the BPF program captures a profiled thread's (registers plus a copy).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <ucontext.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "base/scoped_fd.h"
#include "profiler/unwind/cfi_table.h"
#include "profiler/unwind/native_unwinder.h"
#include "symbolizer/elf_cache.h"
#include "symbolizer/native_symbolizer.h"
#include "tests/support/capture_stack.h"
#include "tests/support/own_mappings.h"

namespace gpuflame::profiler {
namespace {

using testing::Captured;
using testing::CaptureHere;

extern "C" __attribute__((noinline)) Captured gf_test_unwind_depth(int n) {
  if (n == 0) return CaptureHere();
  Captured c = gf_test_unwind_depth(n - 1);
  asm volatile("" ::: "memory");  // not a tail call: each level keeps a frame
  return c;
}

TEST(NativeUnwinderTest, FastPathFindsWhatLibdwflFinds) {
  Captured c = gf_test_unwind_depth(6);
  symbolizer::ElfCache elves;
  symbolizer::NativeSymbolizer symbols(elves);
  NativeUnwinder fast(symbols), slow(symbols);
  slow.set_fast_path(false);
  std::vector<uint64_t> a = fast.Unwind(getpid(), c.regs, c.stack);
  std::vector<uint64_t> b = slow.Unwind(getpid(), c.regs, c.stack);
  EXPECT_EQ(fast.stats().fast, 1u);
  EXPECT_EQ(fast.stats().fallback, 0u);
  EXPECT_EQ(a, b);
  // Every level of the recursion, then on to main and libc's start.
  size_t depth_frames = 0;
  bool saw_main = false;
  for (size_t i = 1; i < a.size(); i++) {
    std::string name = symbols.Symbolize(getpid(), a[i] - 1).name;
    if (name == "gf_test_unwind_depth") depth_frames++;
    if (name == "main") saw_main = true;
  }
  EXPECT_EQ(depth_frames, 7u);  // n = 6 down to 0
  EXPECT_TRUE(saw_main);
  EXPECT_GT(fast.cfi().size(), 0u);
}

size_t OpenDescriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) n++;
  return n;
}

// libdwfl's modules share the CfiTables' handles of their files: the
// fallback holds no descriptor of its own (it held one per mapped file per
// process: hundreds for a PyTorch process), and neither do the tables nor
// the symbolizer's DWARF readers (this binary has DWARF).
TEST(NativeUnwinderTest, LibdwflHoldsNoDescriptorOfTheFilesItUnwindsThrough) {
  Captured c = gf_test_unwind_depth(3);
  symbolizer::ElfCache elves;
  symbolizer::NativeSymbolizer symbols(elves);
  symbols.Maps(getpid());  // the maps are read (and remembered) before counting
  const size_t before = OpenDescriptors();
  NativeUnwinder slow(symbols);
  slow.set_fast_path(false);
  std::vector<uint64_t> pcs = slow.Unwind(getpid(), c.regs, c.stack);
  EXPECT_EQ(slow.stats().fallback, 1u);
  EXPECT_EQ(slow.stats().failures, 0u);
  size_t depth_frames = 0;
  for (size_t i = 1; i < pcs.size(); i++)
    if (symbols.Symbolize(getpid(), pcs[i] - 1).name == "gf_test_unwind_depth") depth_frames++;
  EXPECT_EQ(depth_frames, 4u);  // libdwfl found the files it was handed, at their load bias
  EXPECT_GT(slow.cfi().size(), 1u);
  EXPECT_EQ(OpenDescriptors(), before);
  // A second unwinder, with tables of its own, holds none either.
  NativeUnwinder again(symbols);
  again.set_fast_path(false);
  EXPECT_EQ(again.Unwind(getpid(), c.regs, c.stack), pcs);
  EXPECT_EQ(OpenDescriptors(), before);
}

TEST(NativeUnwinderTest, GarbageStackEndsQuicklyAndBounded) {
  Captured c = CaptureHere();
  std::mt19937_64 rng(42);
  for (auto& b : c.stack) b = static_cast<uint8_t>(rng());
  symbolizer::ElfCache elves;
  symbolizer::NativeSymbolizer symbols(elves);
  NativeUnwinder unwinder(symbols);
  for (int trial = 0; trial < 50; trial++) {
    c.regs.sp = rng() & ~7ull;
    c.regs.bp = rng();
    std::vector<uint64_t> pcs = unwinder.Unwind(getpid(), c.regs, c.stack, 64);
    EXPECT_LE(pcs.size(), 64u);
  }
}

TEST(NativeUnwinderTest, CopiedStackReadsAreBoundedForAnyAddress) {
  std::vector<uint8_t> copy(64);
  for (size_t i = 0; i < copy.size(); i++) copy[i] = static_cast<uint8_t>(i);
  uint64_t v = 0;
  const uint64_t sp = 0x7ffc00001000;
  EXPECT_TRUE(ReadCopiedWord(copy, sp, sp, &v));
  EXPECT_EQ(v, 0x0706050403020100u);
  EXPECT_TRUE(ReadCopiedWord(copy, sp, sp + 56, &v));
  EXPECT_FALSE(ReadCopiedWord(copy, sp, sp + 57, &v));  // would run past the copy
  EXPECT_FALSE(ReadCopiedWord(copy, sp, sp - 8, &v));
  // What crashed on a real GPU host: addresses whose + 8 wraps past zero.
  for (uint64_t addr : {~0ull, ~0ull - 3, ~0ull - 7, ~0ull - 8}) EXPECT_FALSE(ReadCopiedWord(copy, sp, addr, &v));
  EXPECT_TRUE(ReadCopiedWord(copy, ~0ull - 63, ~0ull - 7, &v));  // the very top, still inside
  EXPECT_FALSE(ReadCopiedWord(std::span<const uint8_t>(), sp, sp, &v));
}

base::ScopedFd OpenSelf() { return base::ScopedFd(open("/proc/self/exe", O_RDONLY | O_CLOEXEC)); }

TEST(CfiTableTest, ReadsItsFileWhereNoUprobeWritesABreakpoint) {
  // See ElfFileTest.ReadsFilesWhereNoUprobeWritesABreakpoint. The loader's
  // own mappings of this binary are counted before and after.
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  const testing::OwnMappings before = testing::OwnMappingsOf(self);
  auto table = CfiTable::Open(OpenSelf());
  ASSERT_NE(table, nullptr);
  (void)table->Find(reinterpret_cast<uint64_t>(&gf_test_unwind_depth));
  const testing::OwnMappings after = testing::OwnMappingsOf(self);
  EXPECT_GT(after.total, before.total) << "it reads the file through a mapping";
  EXPECT_EQ(after.breakpoint_targets, before.breakpoint_targets);
}

TEST(CfiTableTest, FunctionEntryHasTheCallRule) {
  auto table = CfiTable::Open(OpenSelf());
  ASSERT_NE(table, nullptr);
  // At a function's first instruction the call has just pushed the return
  // address: CFA = rsp + 8, return address at CFA - 8. The test binary is
  // position-independent, so the runtime address is rebased by hand.
  symbolizer::ElfCache elves;
  symbolizer::NativeSymbolizer symbols(elves);
  auto entry = reinterpret_cast<uint64_t>(&gf_test_unwind_depth);
  symbolizer::Frame f = symbols.Symbolize(getpid(), entry);
  ASSERT_EQ(f.name, "gf_test_unwind_depth");
  const UnwindRow& row = table->Find(f.address);
  EXPECT_EQ(row.kind, UnwindRow::Kind::kFrame);
  EXPECT_EQ(row.cfa, UnwindRow::Cfa::kRsp);
  EXPECT_EQ(row.cfa_offset, 8);
  EXPECT_EQ(row.ra_offset, -8);
  EXPECT_LE(row.start, f.address);
  EXPECT_GT(row.end, f.address);
  // A second lookup in the same range is served from the cache.
  size_t rows = table->rows();
  table->Find(f.address);
  EXPECT_EQ(table->rows(), rows);
}

TEST(CfiTableTest, NotElfOrTruncatedIsHandled) {
  EXPECT_EQ(CfiTable::Open(base::ScopedFd(open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC))), nullptr);
  EXPECT_EQ(CfiTable::Open(base::ScopedFd()), nullptr);
  // A truncated copy of a real binary: whatever rows it yields, no crash.
  char path[] = "/tmp/gf_cfi_truncXXXXXX";
  base::ScopedFd out(mkostemp(path, O_CLOEXEC));
  ASSERT_TRUE(out.valid());
  std::vector<char> buf(64 * 1024);
  ssize_t n = read(OpenSelf().get(), buf.data(), buf.size());
  ASSERT_GT(n, 0);
  ASSERT_EQ(write(out.get(), buf.data(), static_cast<size_t>(n)), n);
  lseek(out.get(), 0, SEEK_SET);
  unlink(path);
  auto table = CfiTable::Open(std::move(out));
  if (table) {
    for (uint64_t a = 0; a < 0x100000; a += 0x1000) {
      const UnwindRow& row = table->Find(a);
      EXPECT_LT(row.start, row.end);
    }
  }
}

// A file that could not be opened (its process gone, descriptors run out)
// is tried again for the next process that maps it; one that opened and is
// no ELF object is not.
TEST(CfiCacheTest, RemembersWhatItReadNotWhatItCouldNotOpen) {
  CfiCache cache;
  int opens = 0;
  EXPECT_EQ(cache.Get("self", [&] { return opens++, base::ScopedFd(); }), nullptr);
  std::shared_ptr<CfiTable> table = cache.Get("self", [&] { return opens++, OpenSelf(); });
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(cache.Get("self", [&] { return opens++, OpenSelf(); }), table);
  EXPECT_EQ(opens, 2);
  EXPECT_EQ(cache.Get("text", [&] { return opens++, base::ScopedFd(open("/proc/self/cmdline", O_RDONLY)); }), nullptr);
  EXPECT_EQ(cache.Get("text", [&] { return opens++, OpenSelf(); }), nullptr);
  EXPECT_EQ(opens, 3);
  EXPECT_EQ(cache.size(), 2u);
}

// A table goes once nothing but the cache has held it for the keep time;
// one held again before then stays. An unreadable file is forgotten as
// long after, and read again.
TEST(CfiCacheTest, ATableGoesOnceNoOneHasHeldItForTheKeepTime) {
  CfiCache cache;
  int opens = 0;
  std::shared_ptr<CfiTable> held = cache.Get("self", [&] { return opens++, OpenSelf(); });
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(cache.Get("text", [&] { return opens++, base::ScopedFd(open("/proc/self/cmdline", O_RDONLY)); }), nullptr);
  EXPECT_EQ(cache.Sweep(0, 100), 0u);  // "text" unused from 0
  EXPECT_EQ(cache.Sweep(99, 100), 0u);
  EXPECT_EQ(cache.Sweep(100, 100), 1u);  // "text" went; "self" is held
  EXPECT_EQ(cache.size(), 1u);
  held.reset();
  EXPECT_EQ(cache.Sweep(150, 100), 0u);  // unused from 150
  held = cache.Get("self", [&] { return opens++, OpenSelf(); });
  EXPECT_EQ(opens, 2);                   // still cached
  EXPECT_EQ(cache.Sweep(260, 100), 0u);  // held again: the clock restarts
  held.reset();
  EXPECT_EQ(cache.Sweep(300, 100), 0u);
  // Asked for since the last sweep, though not held now: the clock restarts
  // (a process shorter than the sweeps' interval used it).
  EXPECT_NE(cache.Get("self", [&] { return opens++, OpenSelf(); }), nullptr);
  EXPECT_EQ(cache.Sweep(350, 100), 0u);  // unused from 350
  EXPECT_EQ(cache.Sweep(449, 100), 0u);
  EXPECT_EQ(cache.Sweep(450, 100), 1u);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.evicted(), 2u);
  EXPECT_EQ(cache.MemoryUsage(), 0u);
  EXPECT_NE(cache.Get("self", [&] { return opens++, OpenSelf(); }), nullptr);
  EXPECT_EQ(opens, 3);  // read again
}

// Processes that went without their exit being seen are dropped, and the
// tables they alone held with them; unwinding one again reads them anew
// and finds the same frames.
TEST(NativeUnwinderTest, SweepDropsProcessesGoneAndTheTablesOnlyTheyHeld) {
  Captured c = gf_test_unwind_depth(3);
  symbolizer::ElfCache elves;
  symbolizer::NativeSymbolizer symbols(elves);
  NativeUnwinder unwinder(symbols);
  std::vector<uint64_t> pcs = unwinder.Unwind(getpid(), c.regs, c.stack);
  const size_t tables = unwinder.cfi().size();
  ASSERT_GT(tables, 0u);
  EXPECT_EQ(unwinder.Sweep(0, 0, [](pid_t) { return true; }), 0u);  // held by this process's module list
  EXPECT_EQ(unwinder.cfi().size(), tables);
  EXPECT_EQ(unwinder.Sweep(1, 0, [](pid_t) { return false; }), tables);
  EXPECT_EQ(unwinder.cfi().size(), 0u);
  EXPECT_EQ(unwinder.Unwind(getpid(), c.regs, c.stack), pcs);
  EXPECT_EQ(unwinder.cfi().size(), tables);
}

}  // namespace
}  // namespace gpuflame::profiler
