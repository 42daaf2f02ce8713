// User-space hot path: decode a ring-buffer record, intern its stack, update
// the live-allocation table. Stacks are resolved once and then hit the
// interning cache, as in steady state.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "profiler/pipeline/event_processor.h"
#include "profiler/timeline/phase_order.h"
#include "symbolizer/elf_cache.h"
#include "symbolizer/native_symbolizer.h"
#include "tests/support/records.h"

namespace {

using namespace gpuflame;

std::vector<uint8_t> Alloc(uint64_t addr, int stack, int depth) {
  gf_event ev = testing::Header(GF_EV_ALLOC, GF_DOMAIN_TORCH, GF_API_TORCH_MALLOC, 1234);
  ev.addr = addr;
  ev.size = 4096;
  return testing::PythonRecord(ev, depth, static_cast<uint64_t>(stack));
}

std::vector<uint8_t> Free(uint64_t addr) {
  gf_event ev = testing::Header(GF_EV_FREE, GF_DOMAIN_TORCH, GF_API_TORCH_FREE, 1234);
  ev.addr = addr;
  return testing::MakeRecord(ev);
}

// Alloc + free pairs over |stacks| distinct stacks of |depth| Python frames.
// Each of 1024 alloc/free record pairs once untimed (every stack seen),
// then pairs in turn, timed.
void TimeAllocFree(benchmark::State& state, profiler::EventProcessor& events,
                   const std::vector<std::vector<uint8_t>>& allocs, const std::vector<std::vector<uint8_t>>& frees) {
  for (auto& a : allocs) events.OnRecord(a);
  for (auto& f : frees) events.OnRecord(f);
  size_t i = 0;
  for (auto _ : state) {
    events.OnRecord(allocs[i]);
    events.OnRecord(frees[i]);
    i = (i + 1) & 1023;
  }
  state.SetItemsProcessed(state.iterations() * 2);
}

void BM_EventLoop_AllocFree(benchmark::State& state) {
  const int stacks = static_cast<int>(state.range(0));
  const int depth = static_cast<int>(state.range(1));
  symbolizer::ElfCache elves;
  symbolizer::NativeSymbolizer native(elves);
  profiler::StackResolver resolver(nullptr, native, {});
  profiler::EventProcessor events(nullptr, resolver);
  std::vector<std::vector<uint8_t>> allocs, frees;
  for (int i = 0; i < 1024; i++) {
    allocs.push_back(Alloc(0x7f1500000000ull + static_cast<uint64_t>(i) * 4096, i % stacks, depth));
    frees.push_back(Free(0x7f1500000000ull + static_cast<uint64_t>(i) * 4096));
  }
  TimeAllocFree(state, events, allocs, frees);
}
BENCHMARK(BM_EventLoop_AllocFree)->Args({16, 20})->Args({1000, 20})->Args({1000, 64})->Args({16, 128});

// The same with record --timeline on: each allocation and free also goes to
// the timeline's collector (an event and the process's in use). 2^20 pairs
// at most, so that every timed event is kept, none only counted as dropped.
void BM_EventLoop_AllocFreeTimeline(benchmark::State& state) {
  symbolizer::ElfCache elves;
  symbolizer::NativeSymbolizer native(elves);
  profiler::StackResolver resolver(nullptr, native, {});
  profiler::EventProcessor events(nullptr, resolver);
  profiler::timeline::TimelineOptions o;
  o.max_events = 1 << 22;
  profiler::timeline::Timeline timeline(events.stacks(), events.frames(), o);
  events.SetTimeline(&timeline);
  std::vector<std::vector<uint8_t>> allocs, frees;
  for (int i = 0; i < 1024; i++) {
    allocs.push_back(Alloc(0x7f1500000000ull + static_cast<uint64_t>(i) * 4096, i % 16, 20));
    frees.push_back(Free(0x7f1500000000ull + static_cast<uint64_t>(i) * 4096));
  }
  TimeAllocFree(state, events, allocs, frees);
  state.counters["dropped"] = static_cast<double>(
      timeline.stats().dropped[static_cast<size_t>(profiler::timeline::EventType::kMemory)]);
}
BENCHMARK(BM_EventLoop_AllocFreeTimeline)->Iterations(1 << 20);

// The same with the agent's flight recorder on (flight_ring.h, its default
// bounds: 16 MiB a process): the events' times do not advance, so each
// event evicts the oldest, its steady state under load. The ring is filled
// first, untimed: its growth (doublings and page faults, once per process)
// is not the steady state.
void BM_EventLoop_AllocFreeFlightRecorder(benchmark::State& state) {
  symbolizer::ElfCache elves;
  symbolizer::NativeSymbolizer native(elves);
  profiler::StackResolver resolver(nullptr, native, {});
  profiler::EventProcessor events(nullptr, resolver);
  profiler::timeline::FlightRing ring({.window_ns = 5'000'000'000,
                                       .max_process_events = (16u << 20) / profiler::timeline::FlightRing::kSlotBytes,
                                       .max_total_events = (64u << 20) / profiler::timeline::FlightRing::kSlotBytes});
  for (uint64_t i = 0; i < ring.options().max_process_events; i++)
    ring.Push({.pid = 1234, .type = profiler::timeline::EventType::kMemory}, 0);
  profiler::timeline::Timeline timeline(events.stacks(), events.frames(), {}, &ring);
  events.SetTimeline(&timeline);
  std::vector<std::vector<uint8_t>> allocs, frees;
  for (int i = 0; i < 1024; i++) {
    allocs.push_back(Alloc(0x7f1500000000ull + static_cast<uint64_t>(i) * 4096, i % 16, 20));
    frees.push_back(Free(0x7f1500000000ull + static_cast<uint64_t>(i) * 4096));
  }
  TimeAllocFree(state, events, allocs, frees);
  state.counters["held"] = static_cast<double>(ring.stats().events);
  state.counters["evicted"] = static_cast<double>(ring.stats().evicted);
}
BENCHMARK(BM_EventLoop_AllocFreeFlightRecorder)->Iterations(1 << 20);

// The ring alone: one event appended, the oldest aged out (times advance
// 1 us an event, the window 5 ms: ~5000 held).
void BM_FlightRing_Push(benchmark::State& state) {
  profiler::timeline::FlightRing ring(
      {.window_ns = 5'000'000, .max_process_events = 1 << 20, .max_total_events = 1 << 22});
  profiler::timeline::Event e{.pid = 1234, .type = profiler::timeline::EventType::kMemory};
  uint64_t t = 0;
  for (auto _ : state) {
    t += 1000;
    e.ts_ns = e.end_ns = t;
    benchmark::DoNotOptimize(ring.Push(e, t));
  }
  state.counters["held"] = static_cast<double>(ring.stats().events);
}
BENCHMARK(BM_FlightRing_Push);

// The phases' reorder buffer (--mark: every CPU sample, call and
// allocation with a Python stack goes through it, profiler/timeline/
// phase_order.h): one input added and, in the steady state, the oldest
// released. |gap_ns| apart in time: 8 us is the H200's launch-bound loop's
// ~125k inputs a second, which holds ~37,500 over the 300 ms delay; 0 never
// ages anything out, so the heap stays at its bound (kMaxHeld) and each
// input evicts the oldest, the worst case.
void BM_PhaseOrder_Add(benchmark::State& state) {
  const auto gap_ns = static_cast<uint64_t>(state.range(0));
  uint64_t released = 0;
  profiler::timeline::PhaseOrder order([&released](uint64_t, uint64_t, profiler::StackId, bool) { released++; });
  uint64_t t = 1;
  // Filled first, untimed: the steady state, not the heap's growth.
  const size_t fill =
      gap_ns ? profiler::timeline::PhaseOrder::kDelayNs / gap_ns : profiler::timeline::PhaseOrder::kMaxHeld;
  for (size_t i = 0; i < fill; i++, t += gap_ns) order.Add(i & 7, t, static_cast<profiler::StackId>(i & 1023), i & 1);
  uint64_t i = 0;
  for (auto _ : state) {
    order.Add(i & 7, t, static_cast<profiler::StackId>(i & 1023), i & 1);
    t += gap_ns;
    i++;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.counters["held"] = static_cast<double>(order.held());
  benchmark::DoNotOptimize(released);
}
BENCHMARK(BM_PhaseOrder_Add)->Arg(8000)->Arg(0);

// The same with the blocks inside device segments (cudaMalloc records of
// the same process), |segments| of 2 MiB in all: each tensor event finds
// its segment and moves its stack's unused_space (segment_slack.h).
void BM_EventLoop_AllocFreeInSegments(benchmark::State& state) {
  const int segments = static_cast<int>(state.range(0));
  symbolizer::ElfCache elves;
  symbolizer::NativeSymbolizer native(elves);
  profiler::StackResolver resolver(nullptr, native, {});
  profiler::EventProcessor events(nullptr, resolver);
  constexpr uint64_t kBase = 0x7f1500000000ull, kSegment = 2 << 20;
  for (int s = 0; s < segments; s++) {
    gf_event ev = testing::Header(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 1234);
    ev.addr = kBase + static_cast<uint64_t>(s) * kSegment;
    ev.size = kSegment;
    events.OnRecord(testing::PythonRecord(ev, 20, static_cast<uint64_t>(100000 + s % 50)));
  }
  std::vector<std::vector<uint8_t>> allocs, frees;
  for (int i = 0; i < 1024; i++) {
    // Spread over the segments: 4 KiB blocks, several per segment.
    const uint64_t addr = kBase + static_cast<uint64_t>(i % segments) * kSegment + static_cast<uint64_t>(i / segments) * 4096;
    allocs.push_back(Alloc(addr, i % 16, 20));
    frees.push_back(Free(addr));
  }
  TimeAllocFree(state, events, allocs, frees);
}
BENCHMARK(BM_EventLoop_AllocFreeInSegments)->Arg(16)->Arg(1000);

// Memory held per live allocation (agent side), reported as a counter.
void BM_LiveTable_Memory(benchmark::State& state) {
  const int64_t live = state.range(0);
  for (auto _ : state) {
    profiler::AllocationTracker t;
    for (int64_t i = 0; i < live; i++)
      t.OnAlloc(1234, GF_DOMAIN_TORCH, false, 0x7f1500000000ull + static_cast<uint64_t>(i) * 512, 512,
                static_cast<profiler::StackId>(i % 100));
    state.counters["bytes_per_live_alloc"] =
        static_cast<double>(t.MemoryUsage()) / static_cast<double>(live);
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_LiveTable_Memory)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
