// What recording one CUDA call as a span costs inside the workload
// (cupti/api_spans.h, record --timeline): the library's callback reads the
// clock at the call's entry and exit and adds a 32-byte record under the
// buffer's spinlock; the flusher drains it every 100 ms tick. CUPTI's own
// dispatch to the callback is not ours and not here (it is paid with or
// without spans: the launch callbacks are on for kernel time anyway).
//   BM_SpanRecorded: entry clock, exit clock, Add, as one call does; 1 to 4
//                    threads on one buffer (contention on its lock). Every
//                    thread drains it, one at a time and outside the
//                    timing, after each 1/8 of its capacity it added: at
//                    these rates the library's 100 ms flusher would let it
//                    fill, and the cheaper drop path would be timed (the
//                    run's drops are reported: 0).
//   BM_SpansOff:     what a call pays when no agent asks for spans: the
//                    probe semaphore's load.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <mutex>

#include "cupti/api_spans.h"
#include "cupti/library_util.h"

namespace {

using gpuflame::cupti::ApiSpans;
using gpuflame::cupti::NowNs;

ApiSpans& Spans() {
  static ApiSpans* spans = [] {
    auto* s = new ApiSpans;
    s->Enable();
    return s;
  }();
  return *spans;
}
std::mutex drainer;  // Drain is the flusher's alone: one thread at a time plays it

void BM_SpanRecorded(benchmark::State& state) {
  ApiSpans& spans = Spans();
  const uint32_t tid = static_cast<uint32_t>(state.thread_index()) + 1;
  uint32_t correlation = 0;
  constexpr uint32_t kDrainEvery = ApiSpans::kCapacity / 8 / 4;  // 4 threads at most: under 1/2 full
  for (auto _ : state) {
    gf_api_record r{};
    r.start_ns = NowNs();
    r.correlation = ++correlation;
    r.tid = tid;
    r.cbid = 211;  // cudaLaunchKernel
    r.domain = 2;
    r.end_ns = NowNs();
    spans.Add(r);
    if (correlation % kDrainEvery == 0) {
      state.PauseTiming();
      {
        std::lock_guard<std::mutex> hold(drainer);
        spans.Drain([](const gf_api_record*, size_t, uint64_t) {});
      }
      state.ResumeTiming();
    }
  }
  // Cumulative over the run: any at all means the drop path was timed too.
  state.counters["dropped"] = static_cast<double>(spans.dropped());
}
BENCHMARK(BM_SpanRecorded)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();

void BM_SpansOff(benchmark::State& state) {
  static volatile unsigned short semaphore = 0;  // as the USDT semaphore is read
  uint64_t on = 0;
  for (auto _ : state) {
    on += semaphore != 0;
    benchmark::DoNotOptimize(on);
  }
}
BENCHMARK(BM_SpansOff);

}  // namespace

BENCHMARK_MAIN();
