// Native unwinding cost per event on a warm cache: the benchmark captures
// its own registers (getcontext) and 16 KB of its stack, as the BPF program
// does at a probe, and unwinds that copy with the same NativeUnwinder, then
// symbolizes every frame. BM_Unwind_LibdwflOnly is the same unwind through
// libdwfl alone: the figure that justified caching unwind rows (CfiTable).
#include <benchmark/benchmark.h>
#include <ucontext.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "profiler/unwind/native_unwinder.h"
#include "tests/support/capture_stack.h"
#include "symbolizer/elf_cache.h"
#include "symbolizer/native_symbolizer.h"

namespace {

using namespace gpuflame;

using testing::Captured;
using testing::CaptureHere;

// A few real frames between the benchmark loop and the capture.
__attribute__((noinline)) Captured Depth(int n) {
  if (n == 0) return CaptureHere();
  Captured c = Depth(n - 1);
  benchmark::DoNotOptimize(c);
  return c;
}

void BM_Unwind_WarmCache(benchmark::State& state) {
  symbolizer::ElfCache elves;
  symbolizer::NativeSymbolizer symbols(elves);
  profiler::NativeUnwinder unwinder(symbols);
  Captured c = Depth(static_cast<int>(state.range(0)));
  size_t frames = unwinder.Unwind(getpid(), c.regs, c.stack).size();  // warm: Dwfl and CFI loaded
  for (auto _ : state) benchmark::DoNotOptimize(unwinder.Unwind(getpid(), c.regs, c.stack));
  state.counters["frames"] = static_cast<double>(frames);
}
BENCHMARK(BM_Unwind_WarmCache)->Arg(8)->Arg(32);

void BM_Unwind_LibdwflOnly(benchmark::State& state) {
  symbolizer::ElfCache elves;
  symbolizer::NativeSymbolizer symbols(elves);
  profiler::NativeUnwinder unwinder(symbols);
  unwinder.set_fast_path(false);
  Captured c = Depth(static_cast<int>(state.range(0)));
  size_t frames = unwinder.Unwind(getpid(), c.regs, c.stack).size();
  for (auto _ : state) benchmark::DoNotOptimize(unwinder.Unwind(getpid(), c.regs, c.stack));
  state.counters["frames"] = static_cast<double>(frames);
}
BENCHMARK(BM_Unwind_LibdwflOnly)->Arg(8)->Arg(32);

void BM_UnwindAndSymbolize_WarmCache(benchmark::State& state) {
  symbolizer::ElfCache elves;
  symbolizer::NativeSymbolizer symbols(elves);
  profiler::NativeUnwinder unwinder(symbols);
  Captured c = Depth(static_cast<int>(state.range(0)));
  // Append, as the stack resolver does: inlined frames included.
  const pid_t pid = getpid();
  std::vector<symbolizer::Frame> frames;
  for (uint64_t pc : unwinder.Unwind(pid, c.regs, c.stack)) symbols.Append(pid, pc - 1, frames);
  for (auto _ : state) {
    frames.clear();
    for (uint64_t pc : unwinder.Unwind(pid, c.regs, c.stack)) symbols.Append(pid, pc - 1, frames);
    benchmark::DoNotOptimize(frames);
  }
  state.counters["cached_modules"] = static_cast<double>(elves.size());
  state.counters["cfi_bytes_per_module"] =
      unwinder.cfi().size() ? static_cast<double>(unwinder.cfi().MemoryUsage()) / static_cast<double>(unwinder.cfi().size()) : 0;
  state.counters["fast_fraction"] =
      static_cast<double>(unwinder.stats().fast) / static_cast<double>(std::max<uint64_t>(1, unwinder.stats().unwinds));
  state.counters["bytes_per_cached_module"] =
      elves.size() ? static_cast<double>(elves.MemoryUsage()) / static_cast<double>(elves.size()) : 0;
}
BENCHMARK(BM_UnwindAndSymbolize_WarmCache)->Arg(8)->Arg(32);

}  // namespace

BENCHMARK_MAIN();
