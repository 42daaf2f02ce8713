// Native unwinding cost per event on a warm cache: the benchmark captures
// its own registers (getcontext) and 16 KB of its stack, as the BPF program
// does at a probe, and unwinds that copy with the same NativeUnwinder
// (libdwfl over .eh_frame), then symbolizes every frame.
#include <benchmark/benchmark.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "profiler/native_unwinder.h"
#include "symbolizer/elf_cache.h"
#include "symbolizer/native_symbolizer.h"

namespace {

using namespace gpuflame;

struct Captured {
  gf_user_regs regs{};
  std::vector<uint8_t> stack;
};

__attribute__((noinline)) Captured CaptureHere() {
  ucontext_t uc;
  getcontext(&uc);
  Captured c;
  c.regs.ip = static_cast<uint64_t>(uc.uc_mcontext.gregs[REG_RIP]);
  c.regs.sp = static_cast<uint64_t>(uc.uc_mcontext.gregs[REG_RSP]);
  c.regs.bp = static_cast<uint64_t>(uc.uc_mcontext.gregs[REG_RBP]);
  // The benchmark's main-thread stack has far more than 16 KB above here.
  c.stack.resize(GF_USER_STACK_BYTES);
  std::memcpy(c.stack.data(), reinterpret_cast<const void*>(c.regs.sp), c.stack.size());
  return c;
}

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

void BM_UnwindAndSymbolize_WarmCache(benchmark::State& state) {
  symbolizer::ElfCache elves;
  symbolizer::NativeSymbolizer symbols(elves);
  profiler::NativeUnwinder unwinder(symbols);
  Captured c = Depth(static_cast<int>(state.range(0)));
  for (uint64_t pc : unwinder.Unwind(getpid(), c.regs, c.stack)) symbols.Symbolize(getpid(), pc - 1);
  for (auto _ : state) {
    for (uint64_t pc : unwinder.Unwind(getpid(), c.regs, c.stack))
      benchmark::DoNotOptimize(symbols.Symbolize(getpid(), pc - 1));
  }
  state.counters["cached_modules"] = static_cast<double>(elves.size());
  state.counters["bytes_per_cached_module"] =
      elves.size() ? static_cast<double>(elves.MemoryUsage()) / static_cast<double>(elves.size()) : 0;
}
BENCHMARK(BM_UnwindAndSymbolize_WarmCache)->Arg(8)->Arg(32);

}  // namespace

BENCHMARK_MAIN();
