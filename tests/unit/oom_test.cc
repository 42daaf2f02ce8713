// Out-of-memory forensics (profiler/forensics/): episodes fed through the
// event loop as BPF and the injection library send them, without a kernel;
// what each capture holds, to the byte, and how it is written.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exporters/pprof/pprof_writer.h"
#include "profiler/forensics/oom_report.h"
#include "profiler/pipeline/event_processor.h"
#include "profiler/probes/probe_table.h"
#include "symbolizer/elf_cache.h"
#include "symbolizer/native_symbolizer.h"
#include "tests/support/records.h"

namespace gpuflame::profiler {
namespace {

constexpr uint64_t MiB = 1 << 20;
constexpr uint32_t kPid = 4242;

class OomTest : public ::testing::Test {
 protected:
  // A device-level or probe tensor record of kPid with native frames
  // |native| (their raw addresses make the stack).
  void Send(uint8_t kind, uint8_t domain, uint16_t api, uint64_t ts, uint64_t addr, uint64_t size,
            std::vector<uint64_t> native = {}, uint32_t tid = kPid, uint64_t arg1 = 0, uint64_t arg2 = 0) {
    gf_event ev = testing::Header(kind, domain, api, kPid, tid);
    ev.ts_ns = ts;
    ev.addr = addr;
    ev.size = size;
    ev.arg1 = arg1;
    ev.arg2 = arg2;
    if (kind == GF_EV_ALLOC_FAILED) ev.arg0 = GF_CUDA_OUT_OF_MEMORY;
    ev.native_count = static_cast<uint16_t>(native.size());
    events_.OnRecord(testing::MakeRecord(ev, native.data(), native.size() * 8));
  }
  // The probes' tensor events: c10::reportMemoryUsageToProfiler with the allocator's totals.
  void TensorAlloc(uint64_t ts, uint64_t addr, uint64_t size, uint64_t allocated, uint64_t reserved) {
    Send(GF_EV_ALLOC, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, ts, addr, size, {0x500}, kPid, allocated, reserved);
  }
  void TensorFree(uint64_t ts, uint64_t addr, uint64_t allocated, uint64_t reserved) {
    Send(GF_EV_FREE, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, ts, addr, 0, {}, kPid, allocated, reserved);
  }
  std::vector<OomCapture> Take() { return events_.oom().Take(); }
  std::vector<std::string> Names(const std::vector<FrameId>& frames) const {
    std::vector<std::string> out;
    for (FrameId f : frames) out.push_back(events_.frames().Get(f).name);
    return out;
  }
  static int64_t Sum(const Profile& p, const std::string& type) {
    const int t = p.SampleTypeIndex(type);
    int64_t sum = 0;
    for (const Sample& s : p.samples) sum += s.values[static_cast<size_t>(t)];
    return sum;
  }

  symbolizer::ElfCache elves_;
  symbolizer::NativeSymbolizer native_{elves_};
  StackResolver resolver_{nullptr, native_, {}};
  EventProcessor events_{nullptr, resolver_};
};

TEST_F(OomTest, ARetryThatSucceedsEndsTheEpisodeWithTheLiveSetsOfTheFirstFailure) {
  // A 20 MiB segment whose tensor was freed (cached), a 6 MiB segment
  // holding a tensor, then 40 MiB that does not fit.
  Send(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 10, 0x1000, 20 * MiB, {0x100});
  TensorAlloc(11, 0x1000, 20 * MiB, 20 * MiB, 20 * MiB);
  Send(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 12, 0x9000, 6 * MiB, {0x200});
  TensorAlloc(13, 0x9000, 6 * MiB, 26 * MiB, 26 * MiB);
  TensorFree(14, 0x1000, 6 * MiB, 26 * MiB);
  Send(GF_EV_ALLOC_FAILED, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 20, 0, 40 * MiB, {0x300});
  EXPECT_EQ(events_.oom().open(), 1u);
  // PyTorch frees its cached segment and retries: the retry succeeds.
  Send(GF_EV_FREE, GF_DOMAIN_GPU, GF_API_CUDA_FREE, 21, 0x1000, 0);
  Send(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 22, 0x5000, 40 * MiB, {0x300});
  EXPECT_TRUE(Take().empty()) << "its tensor level is awaited (the retried tensor's event)";
  TensorAlloc(23, 0x5000, 40 * MiB, 46 * MiB, 46 * MiB);

  std::vector<OomCapture> got = Take();
  ASSERT_EQ(got.size(), 1u);
  const OomCapture& c = got[0];
  EXPECT_EQ(c.pid, static_cast<pid_t>(kPid));
  EXPECT_EQ(c.number, 1u);
  EXPECT_EQ(c.outcome, OomOutcome::kRetrySucceeded);
  EXPECT_EQ(c.outcome_ns, 22u);
  EXPECT_EQ(c.failed_calls, 1u);
  ASSERT_TRUE(c.request);
  EXPECT_EQ(c.request->api, GF_API_CUDA_MALLOC);
  EXPECT_EQ(c.request->bytes, 40 * MiB);
  EXPECT_EQ(c.request->error, uint32_t{GF_CUDA_OUT_OF_MEMORY});
  EXPECT_EQ(Names(c.request->frames).back(), "cudaMalloc");
  // Device level at the failure: both segments, the cached one included.
  EXPECT_EQ(c.device.bytes, int64_t{26 * MiB});
  EXPECT_EQ(c.device.objects, 2);
  ASSERT_EQ(c.device.holders.size(), 2u);
  EXPECT_EQ(c.device.holders[0].bytes, int64_t{20 * MiB});
  EXPECT_EQ(c.device.holders[1].bytes, int64_t{6 * MiB});
  // Tensor level before the retried tensor: the 6 MiB one.
  ASSERT_TRUE(c.tensors);
  EXPECT_EQ(c.tensors->bytes, int64_t{6 * MiB});
  ASSERT_TRUE(c.totals);
  EXPECT_EQ(c.totals->allocated, 6 * MiB);
  EXPECT_EQ(c.totals->reserved, 26 * MiB);
  EXPECT_FALSE(c.torch);

  const std::string line = OomSummaryLine(c, events_.frames());
  EXPECT_NE(line.find("OOM in pid 4242 at "), std::string::npos) << line;
  EXPECT_NE(line.find(": 40.00 MiB requested by cudaMalloc"), std::string::npos) << line;
  EXPECT_NE(line.find("; live 26.00 MiB, of which 20.00 MiB cached and unused (tensors 6.00 MiB)"), std::string::npos)
      << line;
  EXPECT_NE(line.find("device memory unknown (not read)"), std::string::npos) << line;
  EXPECT_NE(line.find("largest holders: 6.00 MiB `"), std::string::npos) << line;
  EXPECT_NE(line.find("; PyTorch freed its cache and the retry succeeded"), std::string::npos) << line;
  const OomStats& st = events_.oom().stats();
  EXPECT_EQ(st.episodes, 1u);
  EXPECT_EQ(st.failed_calls, 1u);
  EXPECT_EQ(st.captured, 1u);
  EXPECT_EQ(st.retry_succeeded, 1u);
}

TEST_F(OomTest, TheProfileHoldsBothLevelsAndTheRequestAsItsOwnFrame) {
  Send(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 10, 0x1000, 20 * MiB, {0x100});
  TensorAlloc(11, 0x1000, 8 * MiB, 8 * MiB, 20 * MiB);
  Send(GF_EV_ALLOC_FAILED, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 20, 0, 64 * MiB, {0x300});
  Send(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 22, 0x5000, 64 * MiB, {0x300});
  TensorAlloc(23, 0x5000, 64 * MiB, 72 * MiB, 84 * MiB);
  std::vector<OomCapture> got = Take();
  ASSERT_EQ(got.size(), 1u);
  const Profile p = BuildOomProfile(got[0], events_.stack_source());
  EXPECT_EQ(p.name, "gpu_oom");
  EXPECT_EQ(p.default_sample_type, "gpu_inuse_space");
  ASSERT_EQ(p.sample_types.size(), 5u);
  EXPECT_EQ(Sum(p, "gpu_inuse_space"), int64_t{20 * MiB});
  EXPECT_EQ(Sum(p, "gpu_inuse_objects"), 1);
  EXPECT_EQ(Sum(p, "torch_inuse_space"), int64_t{8 * MiB});
  EXPECT_EQ(Sum(p, "torch_inuse_objects"), 1);
  EXPECT_EQ(Sum(p, "requested_space"), int64_t{64 * MiB});
  const Sample& request = p.samples.back();
  ASSERT_GE(request.frames.size(), 2u);
  EXPECT_EQ(p.frames[request.frames.back()].name, "[out of memory: 64.00 MiB requested]");
  EXPECT_EQ(p.frames[request.frames[request.frames.size() - 2]].name, "cudaMalloc");
  bool labelled = false;
  for (const Label& l : request.labels) labelled |= l.key == "oom_request" && l.str == "cudaMalloc";
  EXPECT_TRUE(labelled);
  ASSERT_FALSE(p.comments.empty());
  EXPECT_EQ(p.comments[0].rfind("gpuflame: OOM in pid 4242", 0), 0u) << p.comments[0];
  // Encodes as any profile does.
  EXPECT_TRUE(exporters::EncodePprofGz(p).ok());

  const std::string json = OomJson(got[0], events_.frames(), "gpu_oom.pb.gz");
  for (const char* want :
       {"\"pid\": 4242", "\"episode\": 1", "\"api\": \"cudaMalloc\"", "\"requested_bytes\": 67108864", "\"error\": 2",
        "\"failed_calls\": 1", "\"outcome\": \"retry_succeeded\"", "\"outcome_after_ns\": 2", "\"torch_report\": null",
        "\"device_live_bytes\": 20971520", "\"tensor_live_bytes\": 8388608", "\"allocator_allocated_bytes\": 8388608",
        "\"allocator_reserved_bytes\": 20971520", "\"cached_unused_bytes\": 12582912", "\"gpus\": []",
        "\"gpu_memory_unknown\": \"not read\"", "\"profile\": \"gpu_oom.pb.gz\""})
    EXPECT_NE(json.find(want), std::string::npos) << want << " in " << json;
}

TEST_F(OomTest, PyTorchsReportAfterItsRetriesFailedSaysItRaisedWithTheTensorsAsTheyWere) {
  // In-process tensor events: batches that trail the device-level records.
  events_.OnRecord(testing::TensorBatch(kPid).Hook(1).Stack(0x51, 3, 1).Build());
  Send(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 4, 0x1000, 8 * MiB, {0x100});
  Send(GF_EV_ALLOC_FAILED, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 10, 0, 40 * MiB, {0x300});
  Send(GF_EV_ALLOC_FAILED, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 12, 0, 40 * MiB, {0x300});  // its retry
  // The batch: the tensor made before the failure, then PyTorch's report.
  events_.OnRecord(testing::TensorBatch(kPid)
                       .Alloc(5, 0x1000, 8 * MiB, 0x51, 8 * MiB, 10 * MiB)
                       .OomReport(13, 40 * MiB, 0x51, 8 * MiB, 8 * MiB)
                       .Build());
  EXPECT_EQ(events_.stats().malformed, 0u);
  std::vector<OomCapture> got = Take();
  ASSERT_EQ(got.size(), 1u);
  const OomCapture& c = got[0];
  EXPECT_EQ(c.outcome, OomOutcome::kRaised);
  EXPECT_EQ(c.failed_calls, 2u);
  ASSERT_TRUE(c.tensors);
  EXPECT_EQ(c.tensors->bytes, int64_t{8 * MiB});
  EXPECT_EQ(c.device.bytes, int64_t{8 * MiB});
  ASSERT_TRUE(c.totals);
  EXPECT_EQ(c.totals->reserved, 10 * MiB);
  ASSERT_TRUE(c.torch);
  EXPECT_EQ(c.torch->bytes, 40 * MiB);
  EXPECT_EQ(c.torch->reserved, 8 * MiB);
  EXPECT_EQ(Names(c.torch->frames).size(), 4u);  // three Python frames and the allocator's leaf
  const std::string line = OomSummaryLine(c, events_.frames());
  EXPECT_NE(line.find("; live 8.00 MiB, of which 2.00 MiB cached and unused (tensors 8.00 MiB)"), std::string::npos)
      << line;
  EXPECT_NE(line.find("; the process raised OutOfMemoryError (PyTorch: 8.00 MiB allocated, 8.00 MiB reserved after "
                      "freeing its cache)"),
            std::string::npos)
      << line;
  EXPECT_EQ(events_.oom().stats().torch_reports, 1u);
}

TEST_F(OomTest, ATensorLevelFromSampledAllocationsSaysItIsAnEstimate) {
  // The agent's default in-process: tensor allocations sampled by bytes.
  events_.OnRecord(testing::TensorBatch(kPid)
                       .Hook(1)
                       .Stack(0x51, 2, 1)
                       .SampledAlloc(5, 0x1000, 1 * MiB, 0x51, 4 * MiB)
                       .OomReport(9, 8 * MiB, 0x51, 5 * MiB, 6 * MiB)
                       .Build());
  std::vector<OomCapture> got = Take();
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(got[0].tensors);
  EXPECT_TRUE(got[0].tensors->estimated);
  EXPECT_EQ(got[0].tensors->bytes, int64_t{4 * MiB});
  EXPECT_NE(OomSummaryLine(got[0], events_.frames()).find("(tensors about 4.00 MiB, from sampled allocations)"),
            std::string::npos);
  EXPECT_NE(OomJson(got[0], events_.frames(), "").find("\"tensor_live_estimated\": true"), std::string::npos);
}

TEST_F(OomTest, AReportWithoutAFailedCallIsAnEpisodeOfItsOwn) {
  // PyTorch refuses without calling the driver (its per-process memory
  // fraction): the report is the request.
  TensorAlloc(5, 0x1000, 2 * MiB, 2 * MiB, 2 * MiB);
  Send(GF_EV_OOM_REPORT, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, 9, 0, 4 * MiB, {0x700}, kPid, 2 * MiB, 2 * MiB);
  std::vector<OomCapture> got = Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_FALSE(got[0].request);
  EXPECT_EQ(got[0].requested_bytes(), 4 * MiB);
  EXPECT_EQ(got[0].outcome, OomOutcome::kRaised);
  EXPECT_EQ(got[0].failed_calls, 0u);
  const std::string line = OomSummaryLine(got[0], events_.frames());
  EXPECT_NE(line.find(": 4.00 MiB requested from PyTorch's caching allocator (no device call failed)"),
            std::string::npos)
      << line;
}

TEST_F(OomTest, ACaptureSurvivesItsProcessExitingAndBeingRetired) {
  Send(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CU_MEM_ALLOC, 10, 0x1000, 12 * MiB, {0x100, 0x101});
  Send(GF_EV_ALLOC_FAILED, GF_DOMAIN_GPU, GF_API_CU_MEM_ALLOC, 20, 0, 1 * MiB, {0x300});
  Send(GF_EV_EXIT, GF_DOMAIN_NONE, 0, 21, 0, 0);
  events_.oom().Tick(21 + OomEpisodes::kExitGraceNs - 1);
  EXPECT_TRUE(Take().empty()) << "a report may trail the exit";
  const std::vector<std::string> held = Names(events_.stacks().Get(0).frames);
  const pid_t pid = kPid;
  events_.RetireProcesses({&pid, 1});  // its stack ids go to others
  Send(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 30, 0x7000, 3 * MiB, {0x999});
  std::vector<OomCapture> got = Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].outcome, OomOutcome::kProcessExited);
  ASSERT_EQ(got[0].device.holders.size(), 1u);
  EXPECT_EQ(got[0].device.holders[0].bytes, int64_t{12 * MiB});
  EXPECT_EQ(Names(got[0].device.holders[0].frames), held);
  EXPECT_EQ(Names(got[0].request->frames).back(), "cuMemAlloc_v2");
  EXPECT_NE(OomSummaryLine(got[0], events_.frames()).find("; the process exited before any retry succeeded"),
            std::string::npos);
  EXPECT_EQ(events_.oom().stats().exited, 1u);
}

TEST_F(OomTest, ExitGraceAndSettleTimesEndEpisodesThatSayNothingMore) {
  Send(GF_EV_ALLOC_FAILED, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 100, 0, 1 * MiB, {0x300});
  events_.oom().Tick(100 + OomEpisodes::kSettleNs - 1);
  EXPECT_TRUE(Take().empty());
  events_.oom().Tick(100 + OomEpisodes::kSettleNs);
  std::vector<OomCapture> got = Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].outcome, OomOutcome::kUnresolved);
  EXPECT_NE(
      OomSummaryLine(got[0], events_.frames()).find("; no retry succeeded and PyTorch reported nothing within 2 s"),
      std::string::npos);
}

TEST_F(OomTest, OnlyTheFailingThreadsSuccessIsItsRetry) {
  Send(GF_EV_ALLOC_FAILED, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 10, 0, 8 * MiB, {0x300}, /*tid=*/11);
  Send(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 11, 0x1000, 2 * MiB, {0x100}, /*tid=*/12);
  Send(GF_EV_ALLOC_FAILED, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 12, 0, 8 * MiB, {0x300}, /*tid=*/12);
  EXPECT_TRUE(Take().empty()) << "another thread's allocation is no retry";
  Send(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 13, 0x2000, 8 * MiB, {0x300}, /*tid=*/11);
  std::vector<OomCapture> got = Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].outcome, OomOutcome::kRetrySucceeded);
  EXPECT_EQ(got[0].failed_calls, 2u) << "the other thread's failure was in the same episode";
  EXPECT_EQ(got[0].request->tid, 11u);
  EXPECT_EQ(got[0].device.bytes, 0) << "as at the first failure";
  EXPECT_EQ(events_.oom().stats().failed_calls, 2u);
}

TEST_F(OomTest, AProcessCapturesEightEpisodesAndCountsTheRest) {
  for (uint64_t i = 0; i < OomEpisodes::kMaxCapturesPerProcess + 3; i++) {
    Send(GF_EV_ALLOC_FAILED, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 100 + 10 * i, 0, 8 * MiB, {0x300});
    Send(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 101 + 10 * i, 0x1000 + i, 1 * MiB, {0x300});
    Send(GF_EV_FREE, GF_DOMAIN_GPU, GF_API_CUDA_FREE, 102 + 10 * i, 0x1000 + i, 0);
  }
  std::vector<OomCapture> got = Take();
  ASSERT_EQ(got.size(), OomEpisodes::kMaxCapturesPerProcess);
  EXPECT_EQ(got.back().number, OomEpisodes::kMaxCapturesPerProcess);
  const OomStats& st = events_.oom().stats();
  EXPECT_EQ(st.episodes, OomEpisodes::kMaxCapturesPerProcess + 3);
  EXPECT_EQ(st.captured, OomEpisodes::kMaxCapturesPerProcess);
  EXPECT_EQ(st.not_captured, 3u);
  EXPECT_EQ(events_.oom().open(), 0u);
}

TEST_F(OomTest, AProbesReportOfAProcessServedInProcessIsNotCountedTwice) {
  events_.OnRecord(testing::TensorBatch(kPid).Hook(1).Build());
  Send(GF_EV_OOM_REPORT, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, 9, 0, 4 * MiB, {0x700});
  EXPECT_EQ(events_.stats().bpf_tensor_events_superseded, 1u);
  EXPECT_EQ(events_.oom().stats().torch_reports, 0u);
  EXPECT_TRUE(Take().empty());
}

}  // namespace
}  // namespace gpuflame::profiler
