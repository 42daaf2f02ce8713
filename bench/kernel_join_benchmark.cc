// Kernel-time join throughput on the event loop: sampled launch records
// (20-frame Python stacks, 50 call sites) and activity batches of 64
// records, through EventProcessor::OnRecord as the ring buffer delivers them.
// Reports kernels/s, with and without record's utilisation collector
// (profiler/utilization: busy lanes, gaps, histograms) fed the same batches,
// and the join's memory after one simulated minute at
// 100 000 kernels/s (every launch sampled: the worst case). BM_LaunchRouteJoin
// is the same through the launch route (--launch-stacks uprobes): each launch a
// hit without a correlation ID (GF_EVF_LAUNCH_HIT), then the driver's launch
// records that give them one (GF_EV_LAUNCH_RECORDS), then the kernels.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "profiler/pipeline/event_processor.h"
#include "profiler/utilization/utilization.h"
#include "symbolizer/elf_cache.h"
#include "symbolizer/native_symbolizer.h"
#include "tests/support/records.h"

namespace {

using namespace gpuflame;

std::vector<uint8_t> LaunchRecord(uint32_t corr, int site, uint64_t ts) {
  gf_event ev = testing::Header(GF_EV_KERNEL_LAUNCH, GF_DOMAIN_LAUNCH, GF_API_NONE, 4321);
  ev.ts_ns = ts;
  ev.arg0 = corr;
  return testing::PythonRecord(ev, 20, static_cast<uint64_t>(site));
}

std::vector<uint8_t> BatchRecord(uint32_t first_corr, uint64_t ts) {
  gf_event ev = testing::Header(GF_EV_KERNEL_BATCH, GF_DOMAIN_NONE, GF_API_NONE, 4321);
  ev.ts_ns = ts;
  std::vector<gf_kernel_record> batch(GF_KERNEL_BATCH_MAX);
  for (uint32_t i = 0; i < GF_KERNEL_BATCH_MAX; i++) {
    gf_kernel_record& r = batch[i];
    r.kind = GF_GPU_KERNEL;
    r.correlation = first_corr + i;
    r.name_id = 1 + i % 8;
    r.start_ns = ts;
    r.end_ns = ts + 5000;
  }
  return testing::ArrayRecord(ev, batch);
}

// The launch route's hit: a launch stack with no correlation ID, on thread
// |tid| (also its namespace ID), cuLaunchKernel's.
std::vector<uint8_t> LaunchHit(uint32_t tid, int site, uint64_t ts) {
  gf_event ev = testing::Header(GF_EV_KERNEL_LAUNCH, GF_DOMAIN_LAUNCH, GF_API_NONE, 4321, tid);
  ev.flags |= GF_EVF_LAUNCH_HIT;
  ev.ts_ns = ts;
  ev.addr = tid;
  ev.arg1 = GF_LAUNCH_API(1, 307);
  return testing::PythonRecord(ev, 20, static_cast<uint64_t>(site));
}

// The driver's records of |n| launches on |tid|, the first at |ts| (each
// 2 us after its hit, 10 us apart), correlation IDs from |first_corr|.
std::vector<uint8_t> LaunchRecords(uint32_t tid, uint32_t first_corr, uint32_t n, uint64_t ts) {
  gf_event ev = testing::Header(GF_EV_LAUNCH_RECORDS, GF_DOMAIN_NONE, GF_API_NONE, 4321);
  ev.ts_ns = ts + n * 10'000;
  std::vector<gf_api_record> records(n);
  for (uint32_t i = 0; i < n; i++)
    records[i] = {.start_ns = ts + i * 10'000 + 2'000,
                  .end_ns = ts + i * 10'000 + 6'000,
                  .correlation = first_corr + i,
                  .tid = tid,
                  .cbid = 307,
                  .domain = 1,
                  .pad = 0,
                  .result = 0};
  return testing::ArrayRecord(ev, records);
}

struct Loop {
  symbolizer::ElfCache elves;
  symbolizer::NativeSymbolizer native{elves};
  profiler::StackResolver resolver{nullptr, native, {}};
  profiler::EventProcessor events{nullptr, resolver};
};

// One iteration: 64 launches (every one sampled) and their batch; with the
// utilisation collector when state.range(0) is 1.
void BM_KernelJoin(benchmark::State& state) {
  Loop loop;
  profiler::utilization::Utilization utilization{profiler::utilization::UtilizationOptions{}};
  if (state.range(0)) loop.events.SetUtilization(&utilization);
  uint32_t corr = 1;
  uint64_t ts = 1'000'000'000;
  std::vector<std::vector<uint8_t>> launches;
  for (auto _ : state) {
    state.PauseTiming();
    launches.clear();
    for (uint32_t i = 0; i < GF_KERNEL_BATCH_MAX; i++) launches.push_back(LaunchRecord(corr + i, (corr + i) % 50, ts));
    std::vector<uint8_t> batch = BatchRecord(corr, ts);
    state.ResumeTiming();
    for (const auto& l : launches) loop.events.OnRecord(l);
    loop.events.OnRecord(batch);
    corr += GF_KERNEL_BATCH_MAX;
    ts += 640'000;  // 64 kernels at 100 000/s
    if (corr % (GF_KERNEL_BATCH_MAX * 1024) == 1) loop.events.joiner().Flush(ts);
  }
  state.SetItemsProcessed(state.iterations() * GF_KERNEL_BATCH_MAX);
}
BENCHMARK(BM_KernelJoin)->ArgName("utilization")->Arg(0)->Arg(1);

// One iteration: 64 launch hits, their records and their kernels' batch.
void BM_LaunchRouteJoin(benchmark::State& state) {
  Loop loop;
  constexpr uint32_t kTid = 4321;
  uint32_t corr = 1;
  uint64_t ts = 1'000'000'000;
  std::vector<std::vector<uint8_t>> hits;
  for (auto _ : state) {
    state.PauseTiming();
    hits.clear();
    for (uint32_t i = 0; i < GF_KERNEL_BATCH_MAX; i++)
      hits.push_back(LaunchHit(kTid, (corr + i) % 50, ts + i * 10'000));
    std::vector<uint8_t> records = LaunchRecords(kTid, corr, GF_KERNEL_BATCH_MAX, ts);
    std::vector<uint8_t> batch = BatchRecord(corr, ts);
    state.ResumeTiming();
    for (const auto& h : hits) loop.events.OnRecord(h);
    loop.events.OnRecord(records);
    loop.events.OnRecord(batch);
    corr += GF_KERNEL_BATCH_MAX;
    ts += GF_KERNEL_BATCH_MAX * 10'000;
    if (corr % (GF_KERNEL_BATCH_MAX * 1024) == 1) loop.events.joiner().Flush(ts);
  }
  state.SetItemsProcessed(state.iterations() * GF_KERNEL_BATCH_MAX);
  state.counters["route_joined"] = static_cast<double>(loop.events.launch_route().stats().joined);
}
BENCHMARK(BM_LaunchRouteJoin);

// A minute at 100 000 kernels/s, flushed once a second as the agent does.
void BM_KernelJoinMemoryAfterAMinute(benchmark::State& state) {
  for (auto _ : state) {
    Loop loop;
    uint32_t corr = 1;
    uint64_t ts = 1'000'000'000;
    for (int second = 0; second < 60; second++) {
      for (int b = 0; b < 100'000 / GF_KERNEL_BATCH_MAX; b++) {
        for (uint32_t i = 0; i < GF_KERNEL_BATCH_MAX; i++)
          loop.events.OnRecord(LaunchRecord(corr + i, (corr + i) % 50, ts));
        loop.events.OnRecord(BatchRecord(corr, ts));
        corr += GF_KERNEL_BATCH_MAX;
        ts += 640'000;
      }
      loop.events.joiner().Flush(ts);
      loop.events.kernels().TakeWindow();
    }
    state.counters["pending_launches"] = static_cast<double>(loop.events.joiner().pending_launches());
    state.counters["launch_table_MiB"] = static_cast<double>(loop.events.joiner().MemoryUsage()) / (1 << 20);
    state.counters["kernel_stacks"] = static_cast<double>(loop.events.kernels().totals().size());
    state.counters["joined"] = static_cast<double>(loop.events.joiner().stats().joined);
  }
}
BENCHMARK(BM_KernelJoinMemoryAfterAMinute)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
