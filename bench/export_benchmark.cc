// The export path: build + serialize + gzip a 10 000-stack profile, and push
// it over Connect to a local receiver; plus the agent's bookkeeping memory
// for 100 profiled processes fed synthetic allocator events.
#include <benchmark/benchmark.h>
#include <httplib.h>

#include <cstring>
#include <thread>

#include "exporters/pprof/gzip.h"
#include "exporters/pprof/pprof_writer.h"
#include "exporters/pyroscope/pyroscope_client.h"
#include "profiler/pipeline/event_processor.h"
#include "tests/support/records.h"
#include "symbolizer/elf_cache.h"
#include "symbolizer/native_symbolizer.h"

namespace {

using namespace gpuflame;

// A profile shaped like a large model: 10 000 distinct stacks, 24 frames
// deep, sharing a common trunk and drawing on 2 000 distinct functions.
profiler::Profile BigProfile(int stacks) {
  profiler::Profile p;
  p.name = "gpu_memory";
  p.sample_types = {{"alloc_objects", "count"}, {"alloc_space", "bytes"},
                    {"inuse_objects", "count"}, {"inuse_space", "bytes"}};
  for (int f = 0; f < 2000; f++) {
    symbolizer::Frame fr;
    fr.kind = symbolizer::FrameKind::kPython;
    fr.name = "Module" + std::to_string(f % 97) + " > method_" + std::to_string(f);
    fr.file = "/srv/model/layer_" + std::to_string(f % 131) + ".py";
    fr.line = f % 400;
    p.frames.push_back(fr);
  }
  for (int s = 0; s < stacks; s++) {
    profiler::Sample sample;
    for (int d = 0; d < 24; d++) sample.frames.push_back(static_cast<uint32_t>(d < 8 ? d : (s * 31 + d * 7) % 2000));
    sample.values = {1 + s % 5, (s % 97 + 1) * 4096, s % 3, (s % 7) * 4096};
    p.samples.push_back(std::move(sample));
  }
  return p;
}

void BM_Export_SerializeCompress(benchmark::State& state) {
  profiler::Profile p = BigProfile(static_cast<int>(state.range(0)));
  size_t raw = 0, gz = 0;
  for (auto _ : state) {
    std::string bytes = exporters::SerializePprof(p);
    auto compressed = exporters::Gzip(bytes);
    raw = bytes.size();
    gz = compressed->size();
    benchmark::DoNotOptimize(compressed);
  }
  state.counters["pprof_bytes"] = static_cast<double>(raw);
  state.counters["gzip_bytes"] = static_cast<double>(gz);
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Export_SerializeCompress)->Arg(10000)->Unit(benchmark::kMillisecond);

void BM_Export_PushConnect(benchmark::State& state) {
  httplib::Server server;
  server.Post("/push.v1.PusherService/Push", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("", "application/proto");
  });
  int port = server.bind_to_any_port("127.0.0.1");
  std::thread t([&] { server.listen_after_bind(); });
  exporters::PyroscopeEndpoint endpoint;
  endpoint.url = "http://127.0.0.1:" + std::to_string(port);
  exporters::PyroscopeClient client(endpoint);
  profiler::Profile p = BigProfile(10000);
  std::string gz = *exporters::EncodePprofGz(p);
  std::vector<exporters::Series> req = {{{{"__name__", "gpu_memory"}, {"service_name", "bench"}}, gz}};
  for (auto _ : state) {
    absl::Status s = client.Push(req);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(gz.size()));
  server.stop();
  t.join();
}
BENCHMARK(BM_Export_PushConnect)->Unit(benchmark::kMillisecond);

// Bookkeeping for 100 processes x 50 stacks x 1 000 live allocations each.
void BM_Agent_MemoryFor100Processes(benchmark::State& state) {
  for (auto _ : state) {
    symbolizer::ElfCache elves;
    symbolizer::NativeSymbolizer native(elves);
    profiler::StackResolver resolver(nullptr, native, {});
    profiler::EventProcessor events(nullptr, resolver);
    for (uint32_t pid = 1; pid <= 100; pid++) {
      for (int i = 0; i < 1000; i++) {
        gf_event ev = testing::Header(GF_EV_ALLOC, GF_DOMAIN_TORCH, GF_API_TORCH_MALLOC, pid);
        ev.addr = 0x7f0000000000ull + static_cast<uint64_t>(i) * 4096;
        ev.size = 4096;
        events.OnRecord(testing::PythonRecord(ev, 20, static_cast<uint64_t>(i % 50)));
      }
    }
    size_t bytes = events.tracker().MemoryUsage() + events.stacks().MemoryUsage();
    state.counters["agent_bytes"] = static_cast<double>(bytes);
    state.counters["bytes_per_process"] = static_cast<double>(bytes) / 100;
  }
}
BENCHMARK(BM_Agent_MemoryFor100Processes)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
