// The driver's figures (profiler/devices/gpu_reader.h) against a fake NVML
// function table, their sums over a stretch (profiler/utilization/
// device_figures.h), and the verdict's step 3 that reads them.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "profiler/devices/gpu_reader.h"
#include "profiler/utilization/device_figures.h"
#include "profiler/utilization/report.h"

namespace gpuflame::profiler {
namespace {

constexpr uint64_t kMs = 1'000'000;

// One fake driver at a time: the table's entries are plain functions.
struct FakeGpu {
  unsigned int devices = 2;
  bool gpm = true;       // GPU 0 only; GPU 1 says not supported
  int power_result = 0;  // nvmlDeviceGetPowerUsage's answer
  int power_calls = 0;
  double dram = 70, sm = 90;  // GPM's answers
  int metric_failing = -1;    // that metric's nvmlReturn fails
  int metrics_calls = 0;
  std::vector<NvmlProcessUtilization> samples;  // GPU 0's, since the last read
  unsigned long long last_seen = 0;
};
FakeGpu* fake = nullptr;
NvmlGpmSampleOpaque* const kSamples[2] = {reinterpret_cast<NvmlGpmSampleOpaque*>(0x10),
                                          reinterpret_cast<NvmlGpmSampleOpaque*>(0x20)};
int allocated = 0, freed = 0;

unsigned Index(NvmlDevice d) { return static_cast<unsigned>(reinterpret_cast<uintptr_t>(d) - 1); }

std::unique_ptr<GpuReader> Open() {
  NvmlApi base;
  base.init = [] { return kNvmlSuccess; };
  base.shutdown = [] { return kNvmlSuccess; };
  base.device_count = [](unsigned int* n) {
    *n = fake->devices;
    return kNvmlSuccess;
  };
  base.device_by_index = [](unsigned int i, NvmlDevice* d) {
    *d = reinterpret_cast<NvmlDevice>(uintptr_t{i} + 1);
    return kNvmlSuccess;
  };
  base.compute_processes = [](NvmlDevice, unsigned int* count, NvmlProcessInfo*) {
    *count = 0;
    return kNvmlSuccess;
  };
  base.error_string = [](int r) { return r == 3 ? "Not Supported" : "Unknown Error"; };
  base.memory_info = [](NvmlDevice d, NvmlMemory* m) {
    *m = {80ull << 30, (80ull << 30) - (Index(d) + 1) * (1ull << 30), (Index(d) + 1) * (1ull << 30)};
    return kNvmlSuccess;
  };
  NvmlReadingApi api;
  api.uuid = [](NvmlDevice d, char* text, unsigned int n) {
    snprintf(text, n, "GPU-fake-%u", Index(d));
    return kNvmlSuccess;
  };
  api.utilization = [](NvmlDevice d, NvmlUtilization* u) {
    *u = {Index(d) == 0 ? 80u : 0u, 40u};
    return kNvmlSuccess;
  };
  api.power = [](NvmlDevice, unsigned int* mw) {
    fake->power_calls++;
    *mw = 350'000;
    return fake->power_result;
  };
  api.process_utilization = [](NvmlDevice d, NvmlProcessUtilization* out, unsigned int* count,
                               unsigned long long last_seen) {
    if (Index(d) != 0 || fake->samples.empty()) return 6;  // NOT_FOUND
    fake->last_seen = last_seen;
    const auto n = static_cast<unsigned int>(fake->samples.size());
    if (!out || *count < n) {
      *count = n;
      return kNvmlErrorInsufficientSize;
    }
    std::memcpy(out, fake->samples.data(), n * sizeof(*out));
    *count = n;
    fake->samples.clear();
    return kNvmlSuccess;
  };
  api.gpm_support = [](NvmlDevice d, NvmlGpmSupport* s) {
    s->is_supported_device = fake->gpm && Index(d) == 0;
    return kNvmlSuccess;
  };
  api.gpm_alloc = [](NvmlGpmSample* s) {
    *s = kSamples[allocated++ % 2];
    return kNvmlSuccess;
  };
  api.gpm_free = [](NvmlGpmSample) {
    freed++;
    return kNvmlSuccess;
  };
  api.gpm_sample = [](NvmlDevice, NvmlGpmSample) { return kNvmlSuccess; };
  api.gpm_metrics = [](NvmlGpmMetricsGet* g) {
    fake->metrics_calls++;
    EXPECT_EQ(g->version, 1u);
    EXPECT_NE(g->sample1, g->sample2);
    for (unsigned int i = 0; i < g->num_metrics; i++) {
      NvmlGpmMetric& m = g->metrics[i];
      m.result = static_cast<int>(m.metric_id) == fake->metric_failing ? 3 : kNvmlSuccess;
      m.value = m.metric_id == kGpmDramBwUtil ? fake->dram : m.metric_id == kGpmSmUtil ? fake->sm : 50;
    }
    return kNvmlSuccess;
  };
  auto nvml = Nvml::FromApi(base, "fake NVML");
  EXPECT_TRUE(nvml.ok()) << nvml.status();
  auto reader = GpuReader::FromApi(std::move(*nvml), api);
  EXPECT_TRUE(reader.ok()) << reader.status();
  return std::move(*reader);
}

class GpuReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake = &gpu;
    allocated = freed = 0;
  }
  void TearDown() override { fake = nullptr; }
  FakeGpu gpu;
};

TEST_F(GpuReaderTest, ReadsEachFigureAndSaysWhichAreMissing) {
  gpu.power_result = 3;  // NOT_SUPPORTED on this board
  auto reader = Open();
  ASSERT_EQ(reader->gpus().size(), 2u);
  EXPECT_EQ(reader->gpus()[0].uuid, "GPU-fake-0");
  EXPECT_TRUE(reader->gpus()[0].gpm);
  EXPECT_FALSE(reader->gpus()[1].gpm);
  EXPECT_EQ(allocated, 2);  // GPU 0's two samples
  std::vector<GpuReading> first = reader->Read(1000 * kMs);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].util_gpu, 80u);
  EXPECT_EQ(first[0].util_memory, 40u);
  EXPECT_EQ(first[1].memory_used, 2ull << 30);
  EXPECT_FALSE(first[0].power_mw);
  EXPECT_FALSE(first[0].gpm) << "the first sample has nothing to compare with";
  // Missing figures are said, with NVML's words; one that is not supported
  // is not asked again.
  EXPECT_EQ(reader->missing().at("GPU 0 power"), "Not Supported (3)");
  EXPECT_NE(reader->missing().at("GPU 1 GPM").find("Hopper"), std::string::npos);
  EXPECT_EQ(gpu.power_calls, 2);
  // 50 ms later: too soon for GPM; 150 ms later: GPM over the period.
  EXPECT_FALSE(reader->Read(1050 * kMs)[0].gpm);
  std::vector<GpuReading> later = reader->Read(1150 * kMs);
  ASSERT_TRUE(later[0].gpm);
  EXPECT_EQ(later[0].gpm->dram_bw_util, 70);
  EXPECT_EQ(later[0].gpm->sm_util, 90);
  EXPECT_EQ(gpu.metrics_calls, 1);
  EXPECT_EQ(gpu.power_calls, 2);
  reader.reset();
  EXPECT_EQ(freed, 2);
}

TEST_F(GpuReaderTest, AFigureThatFailsOnceIsMissingOnlyUntilItIsReadAgain) {
  auto reader = Open();
  gpu.power_result = 999;  // a transient error: asked again next time
  EXPECT_FALSE(reader->Read(0)[0].power_mw);
  EXPECT_EQ(reader->missing().at("GPU 0 power"), "Unknown Error (999)");
  EXPECT_FALSE(reader->Read(100 * kMs)[0].power_mw);
  gpu.power_result = 0;
  std::vector<GpuReading> r = reader->Read(200 * kMs);
  EXPECT_EQ(r[0].power_mw, 350'000u);
  EXPECT_EQ(reader->missing().count("GPU 0 power"), 0u) << "read again: no longer missing";
  // Both GPUs failed twice; the count stays for the summary.
  ASSERT_EQ(reader->failed().count("GPU 0 power"), 1u);
  EXPECT_EQ(reader->failed().at("GPU 0 power").readings, 2u);
  EXPECT_EQ(reader->failed().at("GPU 0 power").last, "Unknown Error (999)");
  EXPECT_EQ(reader->failed().count("GPU 1 GPM"), 0u) << "a figure the GPU does not have is not a failure";
}

TEST_F(GpuReaderTest, AFailingMetricGivesNoGpmFiguresRatherThanZeros) {
  gpu.metric_failing = static_cast<int>(kGpmDramBwUtil);
  gpu.dram = 1e9;  // out of range, were it read
  auto reader = Open();
  reader->Read(0);
  EXPECT_FALSE(reader->Read(200 * kMs)[0].gpm);
  EXPECT_EQ(reader->missing().count("GPU 0 GPM metric 10"), 1u);
}

TEST_F(GpuReaderTest, PerProcessSamplesAreAveragedPerPidAndReadOnce) {
  auto reader = Open();
  gpu.samples = {{7, 100, 60, 10, 0, 0}, {7, 200, 80, 30, 0, 0}, {9, 150, 500, 0, 0, 0}};
  std::vector<GpuReading> r = reader->Read(0);
  ASSERT_EQ(r[0].processes.size(), 2u);
  EXPECT_EQ(r[0].processes[0].pid, 7u);
  EXPECT_EQ(r[0].processes[0].sm_util, 70u);
  EXPECT_EQ(r[0].processes[0].samples, 2u);
  EXPECT_EQ(r[0].processes[1].sm_util, 100u) << "a value over 100 is kept in range";
  gpu.samples = {{7, 300, 10, 0, 0, 0}};
  reader->Read(100 * kMs);
  EXPECT_EQ(gpu.last_seen, 200u) << "only samples newer than those read are asked for";
}

TEST(DeviceFiguresTest, SumsAStretchAndJoinsALaneToItsGpuOnlyWhenCertain) {
  std::vector<GpuIdentity> gpus(2);
  gpus[1].index = 1;
  utilization::DeviceFigures f(gpus);
  for (uint64_t t = 0; t < 10; t++) {
    GpuReading a;
    a.index = 0;
    a.util_gpu = t < 5 ? 0 : 100;  // start-up, then busy
    a.gpm = GpmFigures{50, 25, 10, t < 5 ? 0.0 : 80.0};
    a.processes = {{42, 90, 0, 1}};
    GpuReading b;
    b.index = 1;
    f.Add(t * 100 * kMs, {a, b});
  }
  utilization::DeviceStats whole = f.Over(0), steady = f.Over(0, 500 * kMs);
  EXPECT_EQ(whole.readings, 10u);
  EXPECT_DOUBLE_EQ(whole.util_gpu.mean(), 50);
  EXPECT_DOUBLE_EQ(steady.util_gpu.mean(), 100);
  EXPECT_DOUBLE_EQ(steady.gpm_dram.mean(), 80);
  EXPECT_DOUBLE_EQ(steady.process_sm.at(42).mean(), 90);
  EXPECT_EQ(f.Over(1).gpm_dram.n, 0u);
  std::string why;
  EXPECT_FALSE(f.GpuOf(42, 1, "", &why));
  EXPECT_NE(why.find("never listed"), std::string::npos);
  f.OnComputeProcess(1, 42);
  EXPECT_EQ(f.GpuOf(42, 1, "", &why), 1u);
  f.OnComputeProcess(0, 42);
  EXPECT_FALSE(f.GpuOf(42, 1, "", &why)) << "on two GPUs: which lane is which is not known";
  utilization::DeviceFigures one({GpuIdentity{}});
  EXPECT_EQ(one.GpuOf(7, 3, "", &why), 0u) << "one GPU on the machine: every lane is on it";
}

TEST(DeviceFiguresTest, ALaneWithItsDevicesUuidIsTiedByItAlone) {
  std::vector<GpuIdentity> gpus(2);
  gpus[0].uuid = "GPU-5eed0000-0000-4000-8000-000000000000";
  gpus[1].index = 1;
  gpus[1].uuid = "GPU-5eed0000-0000-4000-8000-000000000001";
  utilization::DeviceFigures f(gpus);
  f.OnComputeProcess(0, 42);
  f.OnComputeProcess(1, 42);
  std::string why;
  // Two lanes on two GPUs: the lists cannot tell them apart, the UUIDs can.
  EXPECT_FALSE(f.GpuOf(42, 2, "", &why));
  EXPECT_EQ(f.GpuOf(42, 2, gpus[1].uuid, &why), 1u);
  EXPECT_EQ(f.GpuOf(42, 2, gpus[0].uuid, &why), 0u);
  // Never listed by NVML (another PID namespace): the UUID still ties it.
  EXPECT_EQ(f.GpuOf(77, 1, gpus[1].uuid, &why), 1u);
  // A UUID NVML does not list (a MIG instance's) leaves it to the process
  // lists: on two GPUs they do not settle it, on a machine of one they do.
  EXPECT_FALSE(f.GpuOf(42, 1, "GPU-00000000-0000-0000-0000-000000000000", &why));
  EXPECT_NE(why.find("not among NVML's GPUs"), std::string::npos) << why;
  EXPECT_NE(why.find("which is which is not known"), std::string::npos) << why;
  utilization::DeviceFigures one({gpus[0]});
  EXPECT_EQ(one.GpuOf(42, 1, "GPU-00000000-0000-0000-0000-000000000000", &why), 0u);
}

TEST(ReportTest, StepThreeReadsGpmDramBandwidthOverTheSteadyState) {
  utilization::BusyLane lane{utilization::LaneOptions{}};
  for (int i = 0; i < 2000; i++) {
    gf_kernel_record k{};
    k.kind = GF_GPU_KERNEL;
    k.start_ns = 1'000'000'000'000 + static_cast<uint64_t>(i) * 500'000;
    k.end_ns = k.start_ns + 500'000;
    k.weight = 1;
    lane.Add(k);
  }
  lane.Settle(true);
  utilization::DeviceStats gpu;
  gpu.gpm_dram.Add(75);
  gpu.gpm_sm.Add(95);
  utilization::LaneReport r = utilization::SteadyState(1, 0, lane);
  utilization::Judge(r, 0, &gpu, "");
  EXPECT_EQ(r.verdict, utilization::Verdict::kMemoryBound) << r.reason;
  EXPECT_NE(r.reason.find("75%"), std::string::npos) << r.reason;
  utilization::DeviceStats cool;
  cool.gpm_dram.Add(20);
  utilization::Judge(r, 0, &cool, "");
  EXPECT_EQ(r.verdict, utilization::Verdict::kBusy);
  EXPECT_NE(r.reason.find("not memory bound"), std::string::npos) << r.reason;
  utilization::Judge(r, 0, nullptr, "NVML is not read: no libnvidia-ml.so.1");
  EXPECT_EQ(r.verdict, utilization::Verdict::kBusy);
  EXPECT_NE(r.reason.find("not judged"), std::string::npos);
  EXPECT_NE(r.reason.find("no libnvidia-ml.so.1"), std::string::npos);
}

}  // namespace
}  // namespace gpuflame::profiler
