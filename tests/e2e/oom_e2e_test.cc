// Out-of-memory forensics end to end: `gpuflame record` with real BPF
// probes, real CPython and the simulated CUDA runtime (a test fixture, not
// a GPU) on a 43 MiB device, where tests/workloads/oom.py runs out of
// memory on purpose. The capture is read back from gpu_oom.pb.gz (with the
// schema and with `go tool pprof`), summary.json, the HTML page and the
// terminal, on both paths of tensor events: in-process (record's default
// for its command) and the probes (--tensor-events probes).
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "e2e/e2e_support.h"

namespace gpuflame::e2e {
namespace {

constexpr int64_t MiB = 1 << 20;
// The simulated device: its 3 MiB context and 40 MiB (cuda_sim/README.md).
constexpr int64_t kDeviceBytes = 43 * MiB;
const std::string kDevice = "GF_SIM_GPU_MEMORY_BYTES=" + std::to_string(kDeviceBytes);
const std::string kTensor = "empty;Tensor > __init__;";

struct Recorded {
  RunResult run;
  std::string out;
  nlohmann::json summary;
  nlohmann::json capture;  // the one capture
  pprof::Profile profile;  // gpu_oom.pb.gz
};

// Records oom.py |mode| (not quiet: the terminal line is checked too) on
// the simulated device |device| (its environment).
Recorded RecordOom(const std::string& label, const std::string& mode, const std::string& flags,
                   const std::string& device = kDevice) {
  Recorded r;
  r.out = TempDir("oom-" + label);
  r.run = Sh(SimEnv() + " " + SimNvmlEnv() + " " + device + " " + GPUFLAME_BIN + " record -o " + r.out + " " + flags +
             " -- " + PyenvPython("3.12") + " " + Workload("oom.py") + " " + mode + " 2>&1");
  r.summary = nlohmann::json::parse(ReadFile(r.out + "/summary.json"), nullptr, /*allow_exceptions=*/false);
  if (r.summary.is_object() && r.summary["oom"]["captures"].size() == 1) r.capture = r.summary["oom"]["captures"][0];
  LoadPprof(r.out + "/gpu_oom.pb.gz", &r.profile);
  return r;
}

// Records |mode| and checks what every run says: record's status (its
// command's), the allocator's own figures as the workload printed them
// (|printed|, unless empty), and one capture in summary.json.
void RecordOomRun(const std::string& label, const std::string& mode, const std::string& flags, int status,
                  const std::string& printed, Recorded* r, const std::string& device = kDevice) {
  *r = RecordOom(label, mode, flags, device);
  ASSERT_EQ(r->run.status, status) << r->run.output;
  if (!printed.empty()) {
    EXPECT_NE(r->run.output.find(printed), std::string::npos) << r->run.output;
  }
  ASSERT_TRUE(r->capture.is_object()) << ReadFile(r->out + "/summary.json");
}

// The single stack of |stacks| ending in |leaf| and its value ("" and -1:
// none, or several).
std::pair<std::string, int64_t> EndingIn(const std::map<std::string, int64_t>& stacks, const std::string& leaf) {
  std::pair<std::string, int64_t> found{"", -1};
  int n = 0;
  for (const auto& [stack, value] : stacks)
    if (stack.size() >= leaf.size() && stack.compare(stack.size() - leaf.size(), leaf.size(), leaf) == 0) {
      found = {stack, value};
      n++;
    }
  return n == 1 ? found : std::pair<std::string, int64_t>{"", -1};
}

// What every mode held at its first failure, both levels, to the byte, and
// (|named|) under which Python functions; |api|: the call that failed (and
// made each segment).
void ExpectLiveSetsAtTheFirstFailure(const Recorded& r, bool named = true, const std::string& api = "cudaMalloc") {
  const nlohmann::json& c = r.capture;
  EXPECT_EQ(c["device_live_bytes"], 36 * MiB) << c.dump(2);
  EXPECT_EQ(c["device_live_objects"], 2);
  EXPECT_EQ(c["tensor_live_bytes"], 16 * MiB);
  EXPECT_EQ(c["tensor_live_objects"], 1);
  EXPECT_EQ(c["allocator_allocated_bytes"], 16 * MiB);
  EXPECT_EQ(c["allocator_reserved_bytes"], 36 * MiB);
  EXPECT_EQ(c["cached_unused_bytes"], 20 * MiB);
  ASSERT_EQ(c["gpus"].size(), 1u) << c.dump(2);
  EXPECT_EQ(c["gpus"][0]["index"], 0);
  EXPECT_EQ(c["gpus"][0]["total_bytes"], kDeviceBytes);
  EXPECT_EQ(c["api"], api);
  EXPECT_EQ(c["error"], 2);
  EXPECT_EQ(c["episode"], 1);
  EXPECT_EQ(c["profile"], "gpu_oom.pb.gz");

  // The profile: the live sets by stack as sample types.
  EXPECT_EQ(Total(r.profile, "gpu_inuse_space"), 36 * MiB);
  EXPECT_EQ(Total(r.profile, "gpu_inuse_objects"), 2);
  EXPECT_EQ(Total(r.profile, "torch_inuse_space"), 16 * MiB);
  EXPECT_EQ(Total(r.profile, "torch_inuse_objects"), 1);
  // An independent reader agrees.
  RunResult top = Sh("go tool pprof -top -sample_index=gpu_inuse_space " + r.out + "/gpu_oom.pb.gz");
  ASSERT_EQ(top.status, 0) << top.output;
  EXPECT_NE(top.output.find("36MB total"), std::string::npos) << top.output;
  if (!named) return;
  const std::string module = "<module>;main;";
  auto gpu = Stacks(r.profile, "gpu_inuse_space", true, /*drop_native=*/true);
  EXPECT_EQ(gpu, (std::map<std::string, int64_t>{{module + "load_weights;" + kTensor + api, 16 * MiB},
                                                 {module + "warm_up;" + kTensor + api, 20 * MiB}}))
      << Dump(gpu);
  auto torch = Stacks(r.profile, "torch_inuse_space", true, true);
  EXPECT_EQ(torch, (std::map<std::string, int64_t>{
                       {module + "load_weights;" + kTensor + "c10::cuda::CUDACachingAllocator::malloc", 16 * MiB}}))
      << Dump(torch);
}

// The failing request: its own sample, under its stack (|named|: with its
// Python functions' names).
void ExpectRequest(const Recorded& r, int64_t bytes, bool named = true, const std::string& api = "cudaMalloc") {
  auto request = Stacks(r.profile, "requested_space", true, true);
  const std::string leaf = api + ";[out of memory: " + std::to_string(bytes / MiB) + ".00 MiB requested]";
  EXPECT_EQ(request.size(), 1u) << Dump(request);
  EXPECT_EQ(EndingIn(request, leaf).second, bytes) << Dump(request);
  if (named) {
    EXPECT_EQ(request, (std::map<std::string, int64_t>{{"<module>;main;Trainer > step;" + kTensor + leaf, bytes}}))
        << Dump(request);
  }
  EXPECT_EQ(r.capture["requested_bytes"], bytes);
}

void ExpectSaidEverywhere(const Recorded& r, const std::string& outcome_text, const std::string& api = "cudaMalloc") {
  const std::string line = r.capture["summary"];
  EXPECT_EQ(line.rfind("OOM in pid ", 0), 0u) << line;
  // What it asked for, under which function; what was live; the device; who
  // held it (the tensor level: the weights, not the cache); how it ended.
  const size_t at = line.find(" UTC: ");
  ASSERT_NE(at, std::string::npos) << line;
  EXPECT_EQ(line.substr(at + 6),
            std::to_string(r.capture["requested_bytes"].get<int64_t>() / MiB) + ".00 MiB requested by " + api +
                " under `… › Trainer > step › empty › Tensor > __init__`; live 36.00 "
                "MiB, of which 20.00 MiB cached and unused (tensors 16.00 MiB); GPU 0 has 43.00 MiB; largest "
                "holders: 16.00 MiB `… › load_weights › empty › Tensor > __init__`; " +
                outcome_text);
  EXPECT_NE(r.run.output.find("gpuflame: " + line), std::string::npos) << r.run.output;
  const std::string html = ReadFile(r.out + "/flamegraph.html");
  EXPECT_NE(html.find("\"notes\":[\"OOM in pid"), std::string::npos);
  EXPECT_NE(html.find("\"name\":\"gpu_oom\""), std::string::npos);
}

// Each test runs on both paths of tensor events (in-process, probes) and
// both of PyTorch's ways to make segments: cudaMalloc, and
// expandable_segments:True, where a segment is cuMemCreate'd physical memory
// mapped into reserved address space and cuMemCreate is the call that fails
// (CUDA_ERROR_OUT_OF_MEMORY), handled as a failed cudaMalloc is: the cache
// freed, one retry, then PyTorch's report and raise.
class OomForensicsTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {
 protected:
  void SetUp() override {
    GPUFLAME_REQUIRE_PYTHON("3.12");
  }
  const std::string& Flags() const { return std::get<0>(GetParam()); }
  bool Expandable() const { return std::get<1>(GetParam()); }
  // oom.py's arguments for |mode|.
  std::string Mode(const std::string& mode) const { return mode + (Expandable() ? " expandable" : ""); }
  std::string Label(const std::string& mode) const {
    return mode + (Flags().empty() ? "-inprocess" : "-probes") + (Expandable() ? "-expandable" : "");
  }
  // The call that makes each segment, and fails.
  std::string Api() const { return Expandable() ? "cuMemCreate" : "cudaMalloc"; }
};

TEST_P(OomForensicsTest, AnOomTheRetryRescuesIsCapturedAsAtItsFirstFailure) {
  GPUFLAME_REQUIRE_ROOT();
  Recorded r;
  ASSERT_NO_FATAL_FAILURE(RecordOomRun(Label("rescue"), Mode("rescue"), Flags(), 0,
                                       "oom.py rescue: allocated; memory_allocated 39845888 memory_reserved "
                                       "39845888 num_ooms 0",
                                       &r));
  EXPECT_EQ(r.capture["outcome"], "retry_succeeded");
  EXPECT_EQ(r.capture["failed_calls"], 1);
  EXPECT_TRUE(r.capture["torch_report"].is_null());
  EXPECT_EQ(r.summary["oom"]["episodes"], 1);
  EXPECT_EQ(r.summary["oom"]["not_captured"], 0);
  ExpectLiveSetsAtTheFirstFailure(r, true, Api());
  ExpectRequest(r, 22 * MiB, true, Api());
  ExpectSaidEverywhere(r, "PyTorch freed its cache and the retry succeeded", Api());
}

TEST_P(OomForensicsTest, AnOomThatRaisesAndIsCaughtSaysItRaised) {
  GPUFLAME_REQUIRE_ROOT();
  Recorded r;
  ASSERT_NO_FATAL_FAILURE(RecordOomRun(Label("raise"), Mode("raise"), Flags(), 0,
                                       "oom.py raise: caught OutOfMemoryError; memory_allocated 16777216 "
                                       "memory_reserved 16777216 num_ooms 1",
                                       &r));
  EXPECT_EQ(r.capture["outcome"], "raised");
  EXPECT_EQ(r.capture["failed_calls"], 2) << "the first call and the retry after freeing the cache";
  const nlohmann::json& report = r.capture["torch_report"];
  EXPECT_EQ(report["bytes"], 30 * MiB);
  EXPECT_EQ(report["allocated_bytes"], 16 * MiB);
  EXPECT_EQ(report["reserved_bytes"], 16 * MiB) << "after freeing its cache";
  EXPECT_EQ(report["device"], 0);
  EXPECT_NE(report["stack"].get<std::string>().find("main;Trainer > step;"), std::string::npos) << report.dump();
  ExpectLiveSetsAtTheFirstFailure(r, true, Api());
  ExpectRequest(r, 30 * MiB, true, Api());
  ExpectSaidEverywhere(r,
                       "the process raised OutOfMemoryError (PyTorch: 16.00 MiB allocated, 16.00 MiB "
                       "reserved after freeing its cache)",
                       Api());
}

TEST_P(OomForensicsTest, AnOomCaptureSurvivesTheProcessExitingAtOnce) {
  // os._exit right after the OutOfMemoryError: no interpreter shutdown (no
  // last chance to read its code objects), no flush at exit. The whole run
  // takes a few milliseconds, so its Python functions may be gone before
  // their names are read (as for any allocation of a process that short:
  // README, "Requirements and limits"); what it held is exact regardless.
  GPUFLAME_REQUIRE_ROOT();
  Recorded r;
  ASSERT_NO_FATAL_FAILURE(RecordOomRun(Label("exit"), Mode("exit"), Flags(), 3, "", &r));
  EXPECT_EQ(r.capture["outcome"], "raised");
  EXPECT_EQ(r.capture["failed_calls"], 2);
  EXPECT_EQ(r.capture["torch_report"]["bytes"], 30 * MiB);
  ExpectLiveSetsAtTheFirstFailure(r, /*named=*/false, Api());
  ExpectRequest(r, 30 * MiB, /*named=*/false, Api());
}

INSTANTIATE_TEST_SUITE_P(Paths, OomForensicsTest,
                         ::testing::Combine(::testing::Values("", "--tensor-events probes"), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, bool>>& p) {
                           return std::string(std::get<0>(p.param).empty() ? "InProcess" : "Probes") +
                                  (std::get<1>(p.param) ? "Expandable" : "");
                         });

// A cuMemMap that runs out of memory (the simulated driver fails the third,
// the step's, on a device of room enough): captured as a failed allocation
// is, its live set with the handle the step had just created. On both paths
// of tensor events.
class OomMapTest : public ::testing::TestWithParam<std::string> {};

TEST_P(OomMapTest, AnOomOfCuMemMapIsCapturedAsAnAllocationsIs) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  Recorded r;
  ASSERT_NO_FATAL_FAILURE(RecordOomRun(std::string("map-") + (GetParam().empty() ? "inprocess" : "probes"),
                                       "rescue expandable", GetParam(), 0,
                                       "oom.py rescue: allocated; memory_allocated 39845888 memory_reserved "
                                       "39845888 num_ooms 0",
                                       &r, "GF_SIM_CU_MEM_MAP_FAIL=3"));
  const nlohmann::json& c = r.capture;
  EXPECT_EQ(c["api"], "cuMemMap") << c.dump(2);
  EXPECT_EQ(c["error"], 2);
  EXPECT_EQ(c["outcome"], "retry_succeeded");
  EXPECT_EQ(c["failed_calls"], 1);
  EXPECT_EQ(c["device_live_bytes"], (16 + 20 + 22) * MiB);
  EXPECT_EQ(c["device_live_objects"], 3);
  EXPECT_EQ(c["tensor_live_bytes"], 16 * MiB);
  const std::string module = "<module>;main;";
  auto gpu = Stacks(r.profile, "gpu_inuse_space", true, /*drop_native=*/true);
  EXPECT_EQ(gpu, (std::map<std::string, int64_t>{{module + "load_weights;" + kTensor + "cuMemCreate", 16 * MiB},
                                                 {module + "warm_up;" + kTensor + "cuMemCreate", 20 * MiB},
                                                 {module + "Trainer > step;" + kTensor + "cuMemCreate", 22 * MiB}}))
      << Dump(gpu);
  ExpectRequest(r, 22 * MiB, true, "cuMemMap");
  // The failed map backs nothing: what is mapped at the end is what the
  // allocator holds, 16 + 22 MiB.
  EXPECT_EQ(r.summary["events"]["cu_mem_mapped_bytes"], 38 * MiB) << r.summary["events"].dump(2);
}

INSTANTIATE_TEST_SUITE_P(Paths, OomMapTest, ::testing::Values("", "--tensor-events probes"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.param.empty() ? std::string("InProcess") : std::string("Probes");
                         });

}  // namespace
}  // namespace gpuflame::e2e
