// What the thread that drains the BPF ring buffer pays per record, before and
// after the reader/worker split, on the same realistic records:
//
//   Before_*  the old ring callback: EventProcessor::OnRecord in the
//             callback (decode, DWARF unwind of copied stacks, interning,
//             tracker updates), so the ring waited on all of it;
//   After_*   the RingReader callback: one copy into the RecordQueue, with
//             the worker thread taking records off the other end (on the
//             other core, as in the agent).
//
// Records, as the agent sees them from PyTorch-like processes (bench mix):
//   torch alloc + free      20 Python frames (caching allocator hits: most events)
//   cpu sample              20 Python frames
//   device call stack       GF_EV_CALL_STACK with registers and 16 KB of a
//                           real stack of this process (native_stacks=1:
//                           device-level calls, the caching allocator's misses)
//                           then its GF_EV_ALLOC (stack at entry) and GF_EV_FREE
//   mix                     per 65 records: 29 torch allocs + 29 frees + 4 cpu
//                           samples + 1 device call stack, alloc and free
// Stacks are warm (every one seen before), as in steady state. The records
// are read from a 16 MiB arena, the default ring size, so that both sides
// read them as they would from the ring: mostly not from cache. Not included
// on either side: libbpf's own walk of the ring, the same before and after;
// and, before, the work of a record seen for the first time (resolving a new
// stack: reading the process's memory and files; an unknown pid's /proc
// scan and uprobe attach), rare but long, which only makes "before" worse.
//
// After is measured two ways: _After pushes one read's worth of records
// (1024) into a queue with room, the worker draining between reads outside
// the timing: the reader's own cost. _AfterLiveWorker has a worker thread
// popping concurrently on the other core: cache-line traffic and, when the
// worker is descheduled (a shared 2-core VM), waits on a full queue.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <span>
#include <thread>
#include <vector>

#include "profiler/pipeline/event_processor.h"
#include "profiler/probes/record_queue.h"
#include "profiler/probes/ring_reader.h"
#include "profiler/unwind/native_unwinder.h"
#include "symbolizer/elf_cache.h"
#include "symbolizer/native_symbolizer.h"
#include "tests/support/capture_stack.h"
#include "tests/support/records.h"

namespace {

using namespace gpuflame;
using testing::Record;

constexpr int kDepth = 20;

using testing::Header;

Record PyRecord(gf_event ev, int stack) { return testing::PythonRecord(ev, kDepth, static_cast<uint64_t>(stack)); }

Record TorchAlloc(uint64_t addr, int stack) {
  gf_event ev = Header(GF_EV_ALLOC, GF_DOMAIN_TORCH, GF_API_TORCH_MALLOC, 4321, 4321);
  ev.addr = addr;
  ev.size = 4096;
  return PyRecord(ev, stack);
}

Record TorchFree(uint64_t addr) {
  gf_event ev = Header(GF_EV_FREE, GF_DOMAIN_TORCH, GF_API_TORCH_FREE, 4321, 4321);
  ev.addr = addr;
  return testing::MakeRecord(ev);
}

Record CpuSample(int stack) {
  return PyRecord(Header(GF_EV_CPU_SAMPLE, GF_DOMAIN_CPU, GF_API_NONE, 4321, 4322), stack);
}

// The fixed-layout record BPF sends at a device-level call's entry: Python
// frames, registers and a copy of the top of the stack (a real one: ours).
Record DeviceCallStack(const testing::Captured& c, uint32_t tid) {
  gf_event ev = Header(GF_EV_CALL_STACK, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, static_cast<uint32_t>(getpid()), tid);
  ev.flags = GF_EVF_USER_STACK;
  ev.py_count = kDepth;
  ev.user_stack_len = static_cast<uint16_t>(c.stack.size());
  const size_t py_bytes = GF_MAX_PY_FRAMES * sizeof(gf_py_frame);
  Record rec(sizeof(ev) + py_bytes + sizeof(gf_user_regs) + GF_USER_STACK_BYTES);
  std::memcpy(rec.data(), &ev, sizeof(ev));
  testing::PutPythonFrames(rec, sizeof(ev), kDepth, 0);
  std::memcpy(rec.data() + sizeof(ev) + py_bytes, &c.regs, sizeof(c.regs));
  std::memcpy(rec.data() + sizeof(ev) + py_bytes + sizeof(c.regs), c.stack.data(), c.stack.size());
  return rec;
}

Record DeviceAlloc(uint64_t addr, uint32_t tid) {
  gf_event ev = Header(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, static_cast<uint32_t>(getpid()), tid);
  ev.flags = GF_EVF_STACK_AT_ENTRY;
  ev.addr = addr;
  ev.size = 2 << 20;
  return testing::MakeRecord(ev);
}

__attribute__((noinline)) testing::Captured Depth(int n) {
  if (n == 0) return testing::CaptureHere();
  testing::Captured c = Depth(n - 1);
  benchmark::DoNotOptimize(c);
  return c;
}

enum Kind { kAllocFree, kCpuSample, kDeviceCallStack, kMix };

// A cycle of records that leaves the tables as it found them (every alloc
// is freed later in the cycle), so it can repeat forever.
std::vector<Record> Cycle(Kind kind, const testing::Captured& c) {
  std::vector<Record> out;
  const uint64_t base = 0x7f1500000000ull;
  auto device = [&](uint64_t i) {
    out.push_back(DeviceCallStack(c, 7000));
    out.push_back(DeviceAlloc(0x7f2000000000ull + i * (2 << 20), 7000));
    gf_event ev = Header(GF_EV_FREE, GF_DOMAIN_GPU, GF_API_CUDA_FREE, static_cast<uint32_t>(getpid()), 7000);
    ev.addr = 0x7f2000000000ull + i * (2 << 20);
    Record free_rec(sizeof(ev));
    std::memcpy(free_rec.data(), &ev, sizeof(ev));
    out.push_back(std::move(free_rec));
  };
  switch (kind) {
    case kAllocFree:
      for (uint64_t i = 0; i < 512; i++) out.push_back(TorchAlloc(base + i * 4096, static_cast<int>(i % 64)));
      for (uint64_t i = 0; i < 512; i++) out.push_back(TorchFree(base + i * 4096));
      break;
    case kCpuSample:
      for (int i = 0; i < 1024; i++) out.push_back(CpuSample(i % 64));
      break;
    case kDeviceCallStack:
      for (uint64_t i = 0; i < 64; i++) device(i);
      break;
    case kMix: {
      std::vector<Record> frees;
      for (uint64_t block = 0; block < 16; block++) {
        for (uint64_t i = 0; i < 29; i++) {
          uint64_t addr = base + (block * 29 + i) * 4096;
          out.push_back(TorchAlloc(addr, static_cast<int>((block * 29 + i) % 64)));
          out.push_back(TorchFree(addr));
        }
        for (int i = 0; i < 4; i++) out.push_back(CpuSample(static_cast<int>(block * 4 + i) % 64));
        device(block);
      }
      break;
    }
  }
  return out;
}

// Everything the old ring callback ran, set up as in a Session (registry
// aside: records of unknown processes resolve to markers).
struct Pipeline {
  symbolizer::ElfCache elves;
  symbolizer::NativeSymbolizer native{elves};
  profiler::NativeUnwinder unwinder{native};
  profiler::StackResolver resolver{nullptr, native, {}};
  profiler::EventProcessor events{nullptr, resolver, &unwinder};
};

// The cycle repeated back to back, 8-byte aligned, over 16 MiB: records as
// they sit in the kernel ring (whole cycles, so allocs and frees still pair).
struct Arena {
  std::vector<uint64_t> storage;
  std::vector<std::span<const uint8_t>> records;
  size_t bytes = 0;  // record bytes, headers and padding excluded

  explicit Arena(const std::vector<Record>& cycle, size_t target = 16u << 20) {
    size_t cycle_bytes = 0;
    for (const Record& r : cycle) cycle_bytes += (r.size() + 7) & ~size_t{7};
    const size_t copies = std::max<size_t>(1, target / cycle_bytes);
    storage.resize(copies * cycle_bytes / 8);
    auto* out = reinterpret_cast<uint8_t*>(storage.data());
    for (size_t k = 0; k < copies; k++)
      for (const Record& r : cycle) {
        std::memcpy(out, r.data(), r.size());
        records.emplace_back(out, r.size());
        bytes += r.size();
        out += (r.size() + 7) & ~size_t{7};
      }
  }
};

void SetCounters(benchmark::State& state, const Arena& arena, int64_t records) {
  state.SetItemsProcessed(records);
  state.counters["avg_record_bytes"] = static_cast<double>(arena.bytes) / static_cast<double>(arena.records.size());
}

void BM_RingCallback_Before(benchmark::State& state) {
  testing::Captured c = Depth(8);
  Arena arena(Cycle(static_cast<Kind>(state.range(0)), c));
  Pipeline p;
  for (auto r : arena.records) p.events.OnRecord(r);  // every stack seen: steady state
  size_t i = 0;
  for (auto _ : state) {
    p.events.OnRecord(arena.records[i]);
    if (++i == arena.records.size()) i = 0;
  }
  SetCounters(state, arena, static_cast<int64_t>(state.iterations()));
  state.counters["malformed"] = static_cast<double>(p.events.stats().malformed);
}

void BM_RingCallback_After(benchmark::State& state) {
  testing::Captured c = Depth(8);
  Arena arena(Cycle(static_cast<Kind>(state.range(0)), c));
  profiler::RecordQueue queue(16u << 20);
  constexpr size_t kRead = 1024;  // records per read of the ring
  size_t i = 0;
  for (auto _ : state) {
    uint32_t unnotified = 0;
    for (size_t n = 0; n < kRead; n++) {
      // What RingReader::OnRecord does with the span libbpf hands it.
      if (queue.Push(arena.records[i]) != profiler::RecordQueue::PushResult::kPushed) state.SkipWithError("push failed");
      if (++unnotified == profiler::RingReader::kNotifyEvery) {
        unnotified = 0;
        queue.NotifyConsumer();
      }
      if (++i == arena.records.size()) i = 0;
    }
    queue.NotifyConsumer();
    state.PauseTiming();  // the worker's side, not the reader's cost
    while (queue.Front()) queue.Pop();
    state.ResumeTiming();
  }
  SetCounters(state, arena, static_cast<int64_t>(state.iterations() * kRead));
  state.counters["full_waits"] = static_cast<double>(queue.full_waits());
}

void BM_RingCallback_AfterLiveWorker(benchmark::State& state) {
  testing::Captured c = Depth(8);
  Arena arena(Cycle(static_cast<Kind>(state.range(0)), c));
  profiler::RecordQueue queue(16u << 20);
  // The worker's side, emptied as fast as the queue fills, so that the
  // figure is the reader's own cost (the worker runs OnRecord there; how
  // fast it keeps up is BM_RingCallback_Before's figure, on its own core).
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    for (;;) {
      uint32_t epoch = queue.ConsumerEpoch();
      if (auto r = queue.Front()) {
        benchmark::DoNotOptimize(r->data());
        queue.Pop();
        continue;
      }
      if (stop.load(std::memory_order_acquire)) return;
      queue.WaitForData(epoch, 10);
    }
  });
  size_t i = 0;
  uint32_t unnotified = 0;
  for (auto _ : state) {
    if (queue.Push(arena.records[i]) != profiler::RecordQueue::PushResult::kPushed) state.SkipWithError("push failed");
    if (++unnotified == profiler::RingReader::kNotifyEvery) {
      unnotified = 0;
      queue.NotifyConsumer();
    }
    if (++i == arena.records.size()) i = 0;
  }
  stop = true;
  queue.WakeConsumer();
  worker.join();
  SetCounters(state, arena, static_cast<int64_t>(state.iterations()));
  state.counters["full_waits"] = static_cast<double>(queue.full_waits());
}

void Kinds(benchmark::internal::Benchmark* b) {
  b->ArgName("kind");  // 0 alloc+free, 1 cpu sample, 2 device call stack, 3 mix
  for (int k : {kAllocFree, kCpuSample, kDeviceCallStack, kMix}) b->Arg(k);
}
BENCHMARK(BM_RingCallback_Before)->Apply(Kinds);
BENCHMARK(BM_RingCallback_After)->Apply(Kinds);
BENCHMARK(BM_RingCallback_AfterLiveWorker)->Apply(Kinds);

}  // namespace

BENCHMARK_MAIN();
