// `gpuflame record` end to end: real BPF probes on the simulated CUDA runtime
// (a test fixture, not a GPU), real CPython processes of every supported
// shape, and the produced pprof read back twice: with the schema and with
// `go tool pprof`.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include <bpf/btf.h>

#include "absl/strings/str_split.h"
#include "e2e/e2e_support.h"

namespace gpuflame::e2e {
namespace {

constexpr int64_t MiB = 1 << 20;
const std::string kTorchLeaf = "c10::cuda::CUDACachingAllocator::malloc";

RunResult Record(const std::string& out, const std::string& python, const std::string& script,
                 const std::string& extra_env = "", const std::string& flags = "") {
  return Sh(SimEnv() + " " + extra_env + " " + GPUFLAME_BIN + " record -q -o " + out + " " + flags + " -- " + python +
            " " + Workload(script));
}

// Value of the single stack that ends with |suffix|; fails if ambiguous.
int64_t ValueEndingWith(const std::map<std::string, int64_t>& stacks, const std::string& suffix,
                        std::string* matched = nullptr) {
  int64_t v = -1;
  int hits = 0;
  for (const auto& [stack, value] : stacks) {
    if (stack.size() >= suffix.size() && stack.compare(stack.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        (stack.size() == suffix.size() || stack[stack.size() - suffix.size() - 1] == ';')) {
      v = value;
      hits++;
      if (matched) *matched = stack;
    }
  }
  return hits == 1 ? v : -hits - 1;
}

// Every Python shape, exact to the byte, with tensor events observed either
// way: by libgpuflame_cupti.so in-process (record's default for its own
// command) or by probes (a uprobe per event, --tensor-events probes, as for
// --pid). Both must give the same profiles.
void CheckFeatures(const Interpreter& py, const std::string& flags) {
  std::string out = TempDir("features-" + py.label);
  RunResult r = Record(out, py.path, "features.py", "", flags);
  ASSERT_EQ(r.status, 0) << r.output;

  pprof::Profile gpu, torch;
  ASSERT_TRUE(LoadPprof(out + "/gpu_memory.pb.gz", &gpu));
  ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch));

  const std::string tensor = "empty;Tensor > __init__;";
  const std::string inner = py.minor >= 11 ? "outer;outer > inner;" : "outer;inner;";
  auto t_alloc = Stacks(torch, "alloc_space");
  auto t_inuse = Stacks(torch, "inuse_space");
  // Device-level stacks also carry the native frames between Python and the
  // API (RecordTest.MixedStacks checks those); here, the Python part.
  auto g_alloc = Stacks(gpu, "alloc_space", true, /*drop_native=*/true);
  auto g_inuse = Stacks(gpu, "inuse_space", true, /*drop_native=*/true);

  // Tensor level: exactly the tensors each function created; in use at exit
  // is the live set when the interpreter began to shut down.
  EXPECT_EQ(ValueEndingWith(t_inuse, "<module>;GPUModelRunner > _allocate_kv_cache_tensors;" + tensor + kTorchLeaf),
            64 * MiB)
      << Dump(t_inuse);
  EXPECT_EQ(ValueEndingWith(t_inuse, "<module>;" + inner + tensor + kTorchLeaf), 2 * MiB) << Dump(t_inuse);
  EXPECT_EQ(ValueEndingWith(t_inuse, "<module>;<lambda>;" + tensor + kTorchLeaf), 4 * MiB);
  EXPECT_EQ(ValueEndingWith(t_inuse, "<module>;gen_blocks;" + tensor + kTorchLeaf), 3 * MiB);
  std::string thread_stack;
  EXPECT_EQ(ValueEndingWith(t_inuse, "Worker > run;" + tensor + kTorchLeaf, &thread_stack), 8 * MiB);
  EXPECT_NE(thread_stack.find("_bootstrap"), std::string::npos) << thread_stack;
  EXPECT_EQ(thread_stack.find("<module>"), std::string::npos) << "thread stacks start at the thread";
  std::string deep;
  EXPECT_EQ(ValueEndingWith(t_inuse, "recurse;" + tensor + kTorchLeaf, &deep), 1 * MiB);
  EXPECT_EQ(deep.rfind("[truncated: deeper than 128 frames];recurse;recurse;", 0), 0u) << deep;
  EXPECT_EQ(ValueEndingWith(t_alloc, "<module>;scratch;" + tensor + kTorchLeaf), 32 * MiB);
  EXPECT_EQ(ValueEndingWith(t_inuse, "<module>;scratch;" + tensor + kTorchLeaf), -1) << "freed";
  EXPECT_EQ(Total(torch, "alloc_space"), 114 * MiB);
  EXPECT_EQ(Total(torch, "inuse_space"), 82 * MiB);
  EXPECT_EQ(Total(torch, "alloc_objects"), 4 + 1 + 1 + 3 + 1 + 1 + 1);

  // Device level: the runtime call is counted once (cudaMalloc, not also the
  // cuMemAlloc_v2 it forwards to); direct driver calls keep the driver leaf.
  EXPECT_EQ(ValueEndingWith(g_inuse, "<module>;GPUModelRunner > _allocate_kv_cache_tensors;" + tensor + "cudaMalloc"),
            64 * MiB)
      << Dump(g_inuse);
  EXPECT_EQ(ValueEndingWith(g_inuse, "<module>;gen_blocks;" + tensor + "cudaMalloc"), 6 * MiB);
  EXPECT_EQ(ValueEndingWith(g_inuse, "<module>;driver_workspace;cu_mem_alloc;cuMemAlloc_v2"), 3 * MiB);
  EXPECT_EQ(ValueEndingWith(g_alloc, "<module>;scratch;" + tensor + "cudaMalloc"), 32 * MiB);
  EXPECT_EQ(ValueEndingWith(g_inuse, "<module>;scratch;" + tensor + "cudaMalloc"), -1) << "empty_cache freed it";
  EXPECT_EQ(Total(gpu, "alloc_space"), 121 * MiB);
  EXPECT_EQ(Total(gpu, "inuse_space"), 89 * MiB);

  // Trampolines: CPython 3.11+ enters the eval loop from C for <module> and
  // for calls made by C code (type.__call__ -> __init__); 3.10 has none.
  auto raw = Stacks(torch, "inuse_space", /*drop_trampolines=*/false);
  const std::string kv_raw =
      "<interpreter trampoline>;<module>;GPUModelRunner > _allocate_kv_cache_tensors;empty;<interpreter "
      "trampoline>;Tensor > __init__;" +
      kTorchLeaf;
  if (py.minor >= 11) {
    EXPECT_EQ(ValueEndingWith(raw, kv_raw), 64 * MiB) << Dump(raw);
  } else {
    EXPECT_EQ(ValueEndingWith(raw, "<module>;GPUModelRunner > _allocate_kv_cache_tensors;" + tensor + kTorchLeaf),
              64 * MiB);
  }

  // The line of the call inside each Python function.
  EXPECT_EQ(LineOf(torch, "GPUModelRunner > _allocate_kv_cache_tensors"),
            SourceLine(Workload("features.py"), "self.kv_caches.append(sim_torch.empty(16 * MiB))"));

  // An independent reader agrees.
  RunResult go = Sh("go tool pprof -raw " + out + "/torch_memory.pb.gz");
  ASSERT_EQ(go.status, 0) << go.output;
  EXPECT_NE(go.output.find("GPUModelRunner > _allocate_kv_cache_tensors"), std::string::npos);
  EXPECT_NE(go.output.find("alloc_space/bytes"), std::string::npos);
  RunResult top = Sh("go tool pprof -top -sample_index=inuse_space " + out + "/gpu_memory.pb.gz");
  ASSERT_EQ(top.status, 0) << top.output;
  EXPECT_NE(top.output.find("89MB total"), std::string::npos) << top.output;
  // Names as our flame graph shows them, in pprof's own text views too
  // (which "simplify" anything that looks like a C++ template away).
  RunResult traces = Sh("go tool pprof -traces " + out + "/torch_memory.pb.gz");
  ASSERT_EQ(traces.status, 0) << traces.output;
  EXPECT_EQ(traces.output.find("<unknown>"), std::string::npos) << traces.output;
  EXPECT_NE(traces.output.find("\n             <module>\n"), std::string::npos) << traces.output;
  EXPECT_NE(traces.output.find("GPUModelRunner > _allocate_kv_cache_tensors"), std::string::npos) << traces.output;
  if (py.minor >= 11) {
    EXPECT_NE(traces.output.find("<interpreter trampoline>"), std::string::npos) << traces.output;
  }

  std::string summary = ReadFile(out + "/summary.json");
  EXPECT_NE(summary.find("\"ringbuf_full_drops\": 0"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"python_frames_unresolved\": 0"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"unmatched_frees\": 0"), std::string::npos) << summary;
  std::string html = ReadFile(out + "/flamegraph.html");
  EXPECT_NE(html.find("GPUModelRunner \\u003e _allocate_kv_cache_tensors"), std::string::npos);
  auto json = nlohmann::json::parse(summary);
  if (flags.find("probes") == std::string::npos) {
    // Every tensor event came through the library; no probe sat on libc10_cuda.so.
    EXPECT_EQ(json["tensor_events"], "auto") << summary;
    int inprocess = 0;
    for (const auto& p : json["processes"]) inprocess += p.value("tensor_events", "") == "inprocess";
    EXPECT_EQ(inprocess, 1) << summary;
    // 12 allocations and scratch()'s free, then whatever interpreter teardown frees.
    EXPECT_GE(json["inprocess"]["events"], 13) << summary;
    EXPECT_EQ(json["inprocess"]["events_with_unknown_stack"], 0);
    EXPECT_GT(json["bpf"]["tensor_batches"], 0);
    // The hook counted its own events and time, and said so at exit.
    EXPECT_EQ(json["self_cost"]["library"]["tensor_events"], json["inprocess"]["events"]) << summary;
    EXPECT_GT(json["self_cost"]["library"]["tensor_hook_ns"], 0) << summary;
  } else {
    EXPECT_EQ(json["tensor_events"], "probes") << summary;
    EXPECT_EQ(json["inprocess"]["events"], 0);
    // The KV-cache loop's stack went whole once, then as its ID
    // (struct gf_stack_id), and the bytes above are exact all the same.
    EXPECT_GT(json["bpf"]["stacks_sent_with_ids"], 0) << summary;
    EXPECT_GT(json["bpf"]["stacks_sent_as_ids"], 0) << summary;
    EXPECT_EQ(json["events"]["stack_id_records"], json["bpf"]["stacks_sent_as_ids"]) << summary;
    EXPECT_EQ(json["events"]["stack_id_unknown"], 0) << summary;
  }
}

class FeaturesTest : public InterpreterTest {};
TEST_P(FeaturesTest, ExactFramesAndBytes) {
  GPUFLAME_REQUIRE_ROOT();
  CheckFeatures(GetParam(), "--tensor-events probes");
}
class InProcessFeaturesTest : public InterpreterTest {};
TEST_P(InProcessFeaturesTest, SameFramesAndBytesWithoutProbes) {
  GPUFLAME_REQUIRE_ROOT();
  CheckFeatures(GetParam(), "");
}

std::string InterpreterName(const ::testing::TestParamInfo<Interpreter>& info) {
  std::string n = info.param.label;
  for (char& c : n)
    if (c == '.' || c == '-') c = '_';
  return "Python" + n;
}
INSTANTIATE_TEST_SUITE_P(AllPythons, FeaturesTest, ::testing::ValuesIn(SupportedInterpreters()), InterpreterName);
INSTANTIATE_TEST_SUITE_P(AllPythons, InProcessFeaturesTest, ::testing::ValuesIn(SupportedInterpreters()),
                         InterpreterName);

// gpuflame raises its own soft limit on open descriptors to the hard one
// (base/open_file_limit.h: it holds descriptors per process it follows);
// the command it runs gets the limit it was started with.
TEST(RecordTest, RaisesItsOwnOpenFileLimitButNotTheCommands) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const std::string dir = TempDir("nofile");
  RunResult r = Sh("ulimit -Sn 512 && ulimit -Hn 4096 && " + std::string(GPUFLAME_BIN) + " record -q -o " + dir +
                   "/out -- " + PyenvPython("3.12") +
                   " -c 'import os, resource; print(resource.getrlimit(resource.RLIMIT_NOFILE)); "
                   "print(open(\"/proc/%d/limits\" % os.getppid()).read())' 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("(512, 4096)"), std::string::npos) << r.output;
  // Its parent, gpuflame: soft and hard alike.
  EXPECT_TRUE(std::regex_search(r.output, std::regex("Max open files +4096 +4096 +files"))) << r.output;
}

TEST(RecordTest, SampledTensorEventsAreUnbiasedEstimatesAndSaySo) {
  // The agent's default, asked of record: allocations sampled by bytes in
  // the process (1 MiB on average here; start-up not exempted).
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("sampled-tensors");
  // Its own copy of the library: the kernel keeps an earlier session's
  // probes, and so its gpuflame:tensor_exact switch, up for a while.
  const std::string lib = out + "/libgpuflame_cupti.so";
  std::filesystem::copy_file(GPUFLAME_CUPTI_LIB, lib);
  RunResult r = Record(out, PyenvPython("3.12"), "sampled_tensors.py",
                       "CUDA_INJECTION64_PATH=" + lib + " GPUFLAME_STARTUP_S=0 GPUFLAME_TENSOR_SAMPLE_BYTES=1048576",
                       "--tensor-sampling sampled");
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile torch;
  ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch)) << r.output;
  ASSERT_EQ(torch.sample_type_size(), 7);
  EXPECT_EQ(torch.string_table(torch.sample_type(6).type()), "alloc_samples");
  bool said = false;
  for (int64_t c : torch.comment()) said |= torch.string_table(c).find("sampled by bytes") != std::string::npos;
  EXPECT_TRUE(said);
  const std::string kStep = "<module>;Trainer > step;empty;Tensor > __init__;" + kTorchLeaf;
  const std::string kLoad =
      "<module>;Loader > load_weights;empty;Tensor > __init__;" + kTorchLeaf;  // 3.12: no <listcomp>
  auto alloc = Stacks(torch, "alloc_space", true, true);
  auto inuse = Stacks(torch, "inuse_space", true, true);
  auto samples = Stacks(torch, "alloc_samples", true, true);
  // 1.25 GiB in 64 KiB pieces: about 1280 samples, each standing for a
  // multiple of 1 MiB; the estimate within 15 % (over 5 standard errors).
  const int64_t truth = 20000 * (64 << 10);
  EXPECT_NEAR(static_cast<double>(alloc[kStep]), static_cast<double>(truth), 0.15 * truth) << Dump(alloc);
  EXPECT_EQ(alloc[kStep] % MiB, 0) << Dump(alloc);
  EXPECT_GT(samples[kStep], 500) << Dump(samples);
  EXPECT_LT(samples[kStep], 2500) << Dump(samples);
  // Each sampled block's free is sent: nothing of the churn stays in use.
  EXPECT_EQ(inuse[kStep], 0) << Dump(inuse);
  // Allocations of the interval or more are exact, in use too.
  EXPECT_EQ(alloc[kLoad], 80 * MiB) << Dump(alloc);
  EXPECT_EQ(inuse[kLoad], 80 * MiB) << Dump(inuse);
  EXPECT_EQ(samples[kLoad], 10) << Dump(samples);
  const std::string summary = ReadFile(out + "/summary.json");
  auto json = nlohmann::json::parse(summary, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << summary;
  EXPECT_EQ(json["processes"][0]["tensor_sample_bytes"], 1048576) << summary;
  EXPECT_EQ(json["events"]["unmatched_frees"], 0) << summary;
  // The allocator's own total, though the last events were not sent.
  EXPECT_EQ(json["processes"][0]["torch_allocated_bytes"], 80 * MiB + 16 * 4096) << summary;
  // What the hook saw against what it sent.
  EXPECT_GE(json["self_cost"]["library"]["tensor_events"], 40036) << summary;
  EXPECT_LT(json["inprocess"]["events"], 6000) << summary;
}

TEST(RecordTest, RecordSendsEveryTensorEventByDefault) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("exact-tensors");
  RunResult r = Record(out, PyenvPython("3.12"), "sampled_tensors.py", "GPUFLAME_STARTUP_S=0");
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile torch;
  ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch)) << r.output;
  EXPECT_EQ(torch.sample_type_size(), 6);
  auto alloc = Stacks(torch, "alloc_space", true, true);
  EXPECT_EQ(alloc["<module>;Trainer > step;empty;Tensor > __init__;" + kTorchLeaf], 20000 * (64 << 10)) << Dump(alloc);
  EXPECT_NE(ReadFile(out + "/summary.json").find("\"tensor_sample_bytes\": 0"), std::string::npos);
}

// Tensor bytes are the caching allocator's blocks (what memory_allocated()
// counts), not the requested sizes, through the probes and in-process alike;
// a CPU allocation reported to the same hook is not GPU memory.
TEST(RecordTest, TensorBytesAreTheAllocatorsBlocksOnBothPaths) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const int64_t blocks = 1024 + (1 << 20) + 512 + 3 * 512;
  for (const std::string way : {"probes", "inprocess"}) {
    std::string out = TempDir("rounded-" + way);
    RunResult r = Record(out, PyenvPython("3.12"), "rounded_sizes.py", "", "--tensor-events " + way);
    ASSERT_EQ(r.status, 0) << r.output;
    pprof::Profile torch;
    ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch)) << r.output;
    auto inuse = Stacks(torch, "inuse_space", true, true);
    EXPECT_EQ(Total(torch, "inuse_space"), blocks) << way << "\n" << Dump(inuse);
    EXPECT_EQ(inuse["<module>;Loader > load;empty;Tensor > __init__;" + kTorchLeaf], blocks)  // 3.12: no <listcomp>
        << way << "\n"
        << Dump(inuse);
    EXPECT_EQ(Total(torch, "inuse_objects"), 5) << way;
  }
}

// Whether the kernel's sched_process_exit says when a process's last thread
// ends: what watch_exit asks by CO-RE (bpf/process_lifecycle.bpf.h).
bool ExitTracepointHasGroupDead() {
  std::unique_ptr<btf, decltype(&btf__free)> vmlinux(btf__load_vmlinux_btf(), btf__free);
  if (!vmlinux) return false;
  const int id = btf__find_by_name_kind(vmlinux.get(), "trace_event_raw_sched_process_exit", BTF_KIND_STRUCT);
  if (id <= 0) return false;
  const btf_type* t = btf__type_by_id(vmlinux.get(), id);
  const btf_member* m = btf_members(t);
  for (int i = 0; i < btf_vlen(t); i++)
    if (std::string_view(btf__name_by_offset(vmlinux.get(), m[i].name_off)) == "group_dead") return true;
  return false;
}

// A process whose leader thread ends first lives on in its other threads:
// their allocations count, with their stacks named (its memory read through
// a live thread: the zombie leader's /proc/PID no longer serves it), and it
// ends with the last of them, not held alive by the library's flusher
// thread (which hung it for good before).
TEST(RecordTest, AProcessOutlivesItsLeaderThread) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  // Older kernels' exit tracepoint cannot tell the last thread: there the
  // leader's exit ends the process (bpf/process_lifecycle.bpf.h).
  if (!ExitTracepointHasGroupDead()) GTEST_SKIP() << "the exit tracepoint passes no group_dead";
  for (const std::string way : {"probes", "inprocess"}) {
    std::string out = TempDir("leader-exits-" + way);
    RunResult r = Record(out, PyenvPython("3.12"), "leader_exits.py", "", "--tensor-events " + way);
    ASSERT_EQ(r.status, 0) << r.output;
    pprof::Profile torch;
    ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch)) << r.output;
    auto inuse = Stacks(torch, "inuse_space", true, true);
    EXPECT_EQ(Total(torch, "inuse_space"), 12 * MiB) << way << "\n" << Dump(inuse);
    EXPECT_EQ(inuse["<module>;Loader > load;empty;Tensor > __init__;" + kTorchLeaf], 4 * MiB) << way << "\n"
                                                                                              << Dump(inuse);
    EXPECT_EQ(inuse["Thread > _bootstrap;Thread > _bootstrap_inner;Thread > run;work;Worker > run;empty;Tensor > "
                    "__init__;" +
                    kTorchLeaf],
              8 * MiB)
        << way << "\n"
        << Dump(inuse);
  }
}

TEST(RecordTest, ASecondGpuflameHearsTheHookWhileTheFirstHoldsItsSemaphore) {
  // A fleet agent is attached, and someone runs `gpuflame record -p` on the
  // same process: the hook never sees its semaphore drop, yet the second one
  // must learn within its deadline that the hook is live, with its stacks.
  // Both start at the same hello site: the second must find another.
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();  // and kernel names said again
  std::string dir = TempDir("second-agent");
  std::string lib = dir + "/libgpuflame_cupti.so";  // its own copy: no other session's semaphores
  std::filesystem::copy_file(GPUFLAME_CUPTI_LIB, lib);
  // Launch stacks thinned: two sessions on a loaded CI machine must keep up.
  RunResult p = Sh("cd " + dir + " && (" + SimEnv() + " GPUFLAME_LAUNCH_STACKS_PER_S=100 CUDA_INJECTION64_PATH=" + lib +
                   " " + PyenvPython("3.12") + " " + Workload("steady_kernels.py") +
                   " 0 pid go stop & ) && for i in $(seq 100); do [ -f pid ] " +
                   "&& break; sleep 0.05; done; touch go; export GPUFLAME_HELLO_SITE=7; " + GPUFLAME_BIN +
                   " record -q -d 9 -o first -p $(cat pid) & sleep 2.5; " + GPUFLAME_BIN +
                   " record -q -d 5 -o second -p $(cat pid); wait; touch stop; " +
                   "while kill -0 $(cat pid) 2>/dev/null; do sleep 0.1; done");
  for (const char* who : {"first", "second"}) {
    const std::string summary = ReadFile(dir + "/" + who + "/summary.json");
    auto json = nlohmann::json::parse(summary, nullptr, false);
    ASSERT_FALSE(json.is_discarded()) << who << ": " << summary << p.output;
    for (const auto& w : json["warnings"])
      EXPECT_EQ(w.get<std::string>().find("hook"), std::string::npos) << who << ": " << summary;
    EXPECT_EQ(json["processes"][0]["tensor_events"], "inprocess") << who << ": " << summary;
    EXPECT_EQ(json["inprocess"]["events_with_unknown_stack"], 0) << who << ": " << summary;
    pprof::Profile torch;
    ASSERT_TRUE(LoadPprof(dir + "/" + who + "/torch_memory.pb.gz", &torch)) << who;
    auto stacks = Stacks(torch, "alloc_space", /*drop_trampolines=*/true, /*drop_native=*/true);
    EXPECT_GT(stacks["<module>;run_until;Trainer > step;empty;Tensor > __init__;" + kTorchLeaf], 100 * MiB)
        << who << ": " << Dump(stacks);
    // Kernel names the library said before the second came are said again.
    EXPECT_GT(json["gpu_kernels"]["joined"], 100) << who << ": " << summary;
    EXPECT_EQ(json["gpu_kernels"]["unknown_kernel_names"], 0) << who << ": " << summary;
  }
}

TEST(RecordTest, AWorkloadHeldAtAGateResumesWhenGpuflameIsKilled) {
  // gpuflame is stopped (so it cannot lift the gate), its command maps the
  // CUDA runtime and is stopped there, then gpuflame is SIGKILLed: nothing
  // of it runs again, and its guardian must resume the command. gpuflame is
  // stopped as soon as the command has exec'd Python (it is let go only once
  // the probes are in): a fixed sleep stopped a slow start-up on a loaded
  // machine before its gate was armed.
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string dir = TempDir("killed-while-gated");
  RunResult r = Sh(
      "cd " + dir + " && { " + SimEnv() + " " + GPUFLAME_BIN + " record -q -o out -- " + PyenvPython("3.12") + " " +
      Workload("late_cuda.py") + " 1.5 > log 2>&1 & echo $! > rec; }; " +
      "rec=$(cat rec); for i in $(seq 400); do pgrep -P $rec python >/dev/null && break; sleep 0.05; done; " +
      "kill -STOP $rec; child=; held=no; " + "for i in $(seq 100); do child=$(pgrep -P $rec python); " +
      "if [ -n \"$child\" ] && grep -q '^State:.T' /proc/$child/status; then held=yes; break; fi; sleep 0.1; done; " +
      "echo held=$held; kill -9 $rec; for i in $(seq 100); do kill -0 $child 2>/dev/null || break; sleep 0.1; done; " +
      "if kill -0 $child 2>/dev/null; then echo still-there; kill -CONT $child; kill -9 $child; fi; " +
      "for i in $(seq 50); do grep -q guardian log && break; sleep 0.1; done; cat log");
  EXPECT_NE(r.output.find("held=yes"), std::string::npos) << "the gate never held it: " << r.output;
  EXPECT_EQ(r.output.find("still-there"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("done"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("its guardian resumed 1"), std::string::npos) << r.output;
}

TEST(RecordTest, ProbesTakeOverWhenTheInProcessHookNeverStarts) {
  // The command drops CUDA_INJECTION64_PATH before CUDA starts: the library
  // is mapped but never started, so its hook never says it is live.
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("late-hook");
  RunResult r = Record(out, PyenvPython("3.12"), "late_hook.py");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string summary_text = ReadFile(out + "/summary.json");
  EXPECT_NE(summary_text.find("tensor events through probes: its libgpuflame_cupti.so did not start its hook"),
            std::string::npos)
      << summary_text;
  pprof::Profile torch;
  ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch));
  EXPECT_EQ(ValueEndingWith(Stacks(torch, "inuse_space"), "<module>;late_tensor;empty;Tensor > __init__;" + kTorchLeaf),
            8 * MiB)
      << Dump(Stacks(torch, "inuse_space"));
  auto summary = nlohmann::json::parse(summary_text);
  for (const auto& p : summary["processes"]) {
    if (p.value("torch", false)) {
      EXPECT_EQ(p.value("tensor_events", ""), "probes") << summary.dump();
    }
  }
}

TEST(RecordTest, ExitsWithTheCommandsStatus) {
  GPUFLAME_REQUIRE_ROOT();
  std::string out = TempDir("status");
  RunResult r = Sh(std::string(GPUFLAME_BIN) + " record -q -o " + out + " -- sh -c 'exit 3'");
  EXPECT_EQ(r.status, 3) << r.output;
}

TEST(RecordTest, WhatTheRingBufferLosesIsChargedToALostFrameAndInUseStaysExact) {
  // Four threads allocate into a 64 KiB ring while the recorder is stopped
  // (the workload stops its parent for the burst: a reader that keeps up,
  // as on a quiet machine with records shed of native stacks under ring
  // pressure, would lose nothing and the test would show nothing). What is lost must
  // be in the profiles, under its own frame, with every byte: allocated
  // bytes exact, and in use exact too (BPF keeps lost allocations and frees).
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("ring-full");
  RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN + " record -q --ring-buffer-kb 64 --cpu-hz 0 --no-kernel-time -o " +
                   out + " -- " + PyenvPython("3.12") + " " + Workload("burst.py") + " 4 1500 stall-parent");
  ASSERT_EQ(r.status, 0) << r.output;
  auto field = [&](const std::string& text, const std::string& name) {
    auto at = text.find("\"" + name + "\": ");
    return at == std::string::npos ? int64_t{-1} : std::stoll(text.substr(at + name.size() + 4));
  };
  const int64_t allocated = field(r.output, "allocated"), in_use = field(r.output, "in_use");
  ASSERT_GT(allocated, 0) << r.output;
  const std::string summary = ReadFile(out + "/summary.json");
  ASSERT_GT(field(summary, "ringbuf_full_drops"), 0) << "nothing was lost: the test shows nothing\n" << summary;

  pprof::Profile gpu;
  ASSERT_TRUE(LoadPprof(out + "/gpu_memory.pb.gz", &gpu));
  EXPECT_EQ(Total(gpu, "alloc_space"), allocated) << summary;
  EXPECT_EQ(Total(gpu, "inuse_space"), in_use) << summary;
  EXPECT_EQ(Total(gpu, "alloc_objects"), 4 * 1500) << summary;
  auto lost = Stacks(gpu, "alloc_space");
  EXPECT_GT(lost["[lost: ring buffer full]"], 0) << Dump(lost);
  // Said where the user looks: per process in the summary, and in the stop line.
  EXPECT_NE(summary.find("\"lost\": {\"records\": "), std::string::npos) << summary;
  EXPECT_NE(summary.find("were lost because the ring buffer was full"), std::string::npos) << summary;
}

// The same burst of tensors, through probes that sample by bytes from the
// first allocation: a taken allocation the ring had no room for still
// stands for its 4 MiB, so the estimate holds with most records lost.
TEST(RecordTest, ASampledAllocationTheRingLosesStillStandsForItsInterval) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("ring-full-sampled");
  RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN +
                   " record -q --ring-buffer-kb 64 --cpu-hz 0 --no-kernel-time --tensor-events probes"
                   " --tensor-sampling sampled --tensor-startup-s 0 -o " +
                   out + " -- " + PyenvPython("3.12") + " " + Workload("burst.py") + " 4 3000 stall-parent tensors");
  ASSERT_EQ(r.status, 0) << r.output;
  auto field = [&](const std::string& text, const std::string& name) {
    auto at = text.find("\"" + name + "\": ");
    return at == std::string::npos ? int64_t{-1} : std::stoll(text.substr(at + name.size() + 4));
  };
  const int64_t allocated = field(r.output, "allocated");
  ASSERT_GT(allocated, 0) << r.output;
  const auto summary = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  ASSERT_GT(summary["bpf"]["ringbuf_full_drops"], 0) << "nothing was lost: the test shows nothing\n" << summary.dump();
  ASSERT_GT(summary["events"]["lost_allocs_kept"], 10) << summary["events"].dump();
  pprof::Profile torch;
  ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch)) << r.output;
  // 12,000 allocations of 4–256 KiB (1.5 GiB): about 380 taken, each for
  // 4 MiB; within 25 % is over 4 standard errors. Counted at their own
  // size, the lost ones would leave a fraction of it.
  EXPECT_NEAR(static_cast<double>(Total(torch, "alloc_space")), static_cast<double>(allocated), 0.25 * allocated)
      << Dump(Stacks(torch, "alloc_space"));
  EXPECT_GT(Stacks(torch, "alloc_space")["[lost: ring buffer full]"], allocated / 2)
      << Dump(Stacks(torch, "alloc_space"));
}

// The peak views: each level's live set at its high-water mark, mid-run,
// not the live set at the end; on both tensor paths.
TEST(RecordTest, PeakIsTheLiveSetAtTheHighWaterMark) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  for (const std::string way : {"probes", "inprocess"}) {
    std::string out = TempDir("peak-" + way);
    RunResult r = Record(out, PyenvPython("3.12"), "peak.py", "", "--tensor-events " + way);
    ASSERT_EQ(r.status, 0) << r.output;
    pprof::Profile torch, gpu;
    ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch)) << r.output;
    ASSERT_TRUE(LoadPprof(out + "/gpu_memory.pb.gz", &gpu)) << r.output;
    auto peak = Stacks(torch, "peak_space", true, true);
    const std::string tensor = "empty;Tensor > __init__;" + kTorchLeaf;
    EXPECT_EQ(peak["<module>;Model > load;" + tensor], 64 * MiB) << way << "\n" << Dump(peak);
    EXPECT_EQ(peak["<module>;Trainer > step;" + tensor], 256 * MiB) << way << "\n" << Dump(peak);
    EXPECT_EQ(peak.count("<module>;Trainer > keep;" + tensor), 0u) << "allocated after the peak";
    EXPECT_EQ(Total(torch, "peak_space"), 320 * MiB) << way;
    EXPECT_EQ(Total(torch, "peak_objects"), 9) << way;
    EXPECT_EQ(Total(torch, "inuse_space"), 80 * MiB) << way;
    // The device level peaks at the same instant: one segment per block here.
    auto g = Stacks(gpu, "peak_space", true, /*drop_native=*/true);
    EXPECT_EQ(ValueEndingWith(g, "<module>;Trainer > step;empty;Tensor > __init__;cudaMalloc"), 256 * MiB) << Dump(g);
    EXPECT_EQ(Total(gpu, "peak_space"), 320 * MiB) << way;
    EXPECT_EQ(Total(gpu, "inuse_space"), 80 * MiB) << way;
    const std::string summary = ReadFile(out + "/summary.json");
    EXPECT_NE(summary.find("\"peak_bytes\": {\"gpu_memory\": 335544320, \"torch_memory\": 335544320}"),
              std::string::npos)
        << summary;
    EXPECT_NE(ReadFile(out + "/torch_memory.peak_space.folded").find("Trainer > step"), std::string::npos);
  }
}

TEST(RecordTest, UnusedSpaceIsTheSegmentsSlackByTheStackThatMadeThem) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  constexpr int64_t KiB = 1 << 10;
  for (const std::string way : {"probes", "inprocess"}) {
    SCOPED_TRACE(way);
    std::string out = TempDir("slack-" + way);
    RunResult r = Record(out, PyenvPython("3.12"), "slack.py", "", "--tensor-events " + way);
    ASSERT_EQ(r.status, 0) << r.output;
    ASSERT_NE(r.output.find("reserved 20971520 allocated 9437184"), std::string::npos) << r.output;
    pprof::Profile gpu, torch;
    ASSERT_TRUE(LoadPprof(out + "/gpu_memory.pb.gz", &gpu)) << r.output;
    ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch)) << r.output;
    ASSERT_EQ(gpu.sample_type_size(), 8);
    EXPECT_EQ(gpu.string_table(gpu.sample_type(6).type()), "unused_objects");
    EXPECT_EQ(gpu.string_table(gpu.sample_type(7).type()), "unused_space");
    EXPECT_EQ(torch.sample_type_size(), 6) << "tensors hold no slack";
    const std::string segment = ";empty;Tensor > __init__;cudaMalloc";
    auto unused = Stacks(gpu, "unused_space", true, /*drop_native=*/true);
    auto segments = Stacks(gpu, "unused_objects", true, /*drop_native=*/true);
    // 2 MiB small segment: 256 KiB x 2 kept of six, then 512 KiB reused.
    EXPECT_EQ(ValueEndingWith(unused, "<module>;Tokenizer > build" + segment), 1 * MiB) << Dump(unused);
    EXPECT_EQ(ValueEndingWith(segments, "<module>;Tokenizer > build" + segment), 1) << Dump(segments);
    EXPECT_EQ(ValueEndingWith(unused, "<module>;Buffers > grow" + segment), 10 * MiB) << Dump(unused);
    // Model > load's segment is wholly used, Scratch > run's was given back
    // by empty_cache, Tokenizer > refill made none: no other stack has any.
    EXPECT_EQ(unused.size(), 2u) << Dump(unused);
    auto held = Stacks(gpu, "inuse_space", true, /*drop_native=*/true);
    EXPECT_EQ(ValueEndingWith(held, "<module>;Model > load" + segment), 8 * MiB) << Dump(held);
    EXPECT_EQ(Total(gpu, "unused_space"), 11 * MiB) << Dump(unused);
    EXPECT_EQ(Total(gpu, "unused_objects"), 2);
    // The small pool's blocks: one segment for seven tensors.
    auto t = Stacks(torch, "inuse_space", true, true);
    EXPECT_EQ(ValueEndingWith(t, "<module>;Tokenizer > build;empty;Tensor > __init__;" + kTorchLeaf), 512 * KiB)
        << Dump(t);
    EXPECT_EQ(Total(gpu, "inuse_space"), 20 * MiB);
    auto json = nlohmann::json::parse(ReadFile(out + "/summary.json"), nullptr, false);
    ASSERT_FALSE(json.is_discarded());
    const nlohmann::json slack = json["processes"][0]["slack"];
    EXPECT_EQ(slack["segments"], 3) << slack;
    EXPECT_EQ(slack["reserved_bytes"], 20 * MiB) << slack;
    EXPECT_EQ(slack["tensor_bytes"], 9 * MiB) << slack;
    EXPECT_EQ(slack["unused_bytes"], 11 * MiB) << slack;
    EXPECT_EQ(slack["blocks_in_no_known_segment"], 0) << slack;
    EXPECT_EQ(slack["bytes_in_no_known_segment"], 0) << slack;
    EXPECT_NE(ReadFile(out + "/gpu_memory.unused_space.folded").find("Buffers > grow"), std::string::npos);

    // Expandable segments: each mapped chunk, by the stack of its cuMemCreate.
    std::string exp = TempDir("slack-expandable-" + way);
    r = Record(exp, PyenvPython("3.12"), "slack_expandable.py", "", "--tensor-events " + way);
    ASSERT_EQ(r.status, 0) << r.output;
    ASSERT_TRUE(LoadPprof(exp + "/gpu_memory.pb.gz", &gpu)) << r.output;
    unused = Stacks(gpu, "unused_space", true, /*drop_native=*/true);
    const std::string chunk = ";empty;Tensor > __init__;cuMemCreate";
    EXPECT_EQ(ValueEndingWith(unused, "<module>;Cache > grow" + chunk), 1 * MiB) << Dump(unused);
    EXPECT_EQ(ValueEndingWith(unused, "<module>;Spill > run" + chunk), 4 * MiB) << Dump(unused);
    EXPECT_EQ(Total(gpu, "unused_space"), 5 * MiB) << Dump(unused);
    json = nlohmann::json::parse(ReadFile(exp + "/summary.json"), nullptr, false);
    ASSERT_FALSE(json.is_discarded());
    EXPECT_EQ(json["processes"][0]["slack"]["reserved_bytes"], 10 * MiB) << json["processes"][0];
    EXPECT_EQ(json["processes"][0]["slack"]["tensor_bytes"], 5 * MiB) << json["processes"][0];
  }
}

// summary.json's growth section of a run (|out|) of one process, which it
// must list, and that process's entry.
void GrowthOfOneProcess(const std::string& out, nlohmann::json* growth, nlohmann::json* process) {
  *growth = nlohmann::json::parse(ReadFile(out + "/summary.json"))["growth"];
  ASSERT_EQ((*growth)["processes"].size(), 1u) << growth->dump(2);
  *process = (*growth)["processes"][0];
}

// Leaks and growth: of a stack that leaks 2 MiB every 100 ms, one that
// allocates and frees, and one that takes 8 MiB once and keeps it, only the
// leak is reported, at both levels, with its exact bytes; its stack is the
// one the flame graphs name. Inprocess is recorded without -q, for the
// terminal's block.
TEST(RecordTest, GrowthReportsOnlyTheLeakingStack) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  for (const std::string way : {"probes", "inprocess"}) {
    const std::string out = TempDir("growth-" + way);
    const RunResult r =
        Sh(SimEnv() + " " + GPUFLAME_BIN + " record --no-progress " + (way == "probes" ? "-q " : "") + "-o " + out +
           " --tensor-events " + way + " -- " + PyenvPython("3.12") + " " + Workload("leak.py"));
    ASSERT_EQ(r.status, 0) << r.output;
    nlohmann::json growth, p;
    ASSERT_NO_FATAL_FAILURE(GrowthOfOneProcess(out, &growth, &p));
    for (const std::string level : {"torch_memory", "gpu_memory"}) {
      ASSERT_EQ(p[level].size(), 1u) << way << " " << level << "\n" << growth.dump(2);
      const auto& s = p[level][0];
      const std::string stack = s["stack"];
      std::string python = stack;  // CPython's entries from C aside
      for (size_t at; (at = python.find("<interpreter trampoline>;")) != std::string::npos;)
        python.erase(at, std::string("<interpreter trampoline>;").size());
      EXPECT_TRUE(python.starts_with("<module>;Cache > leak;empty;Tensor > __init__;")) << stack;
      EXPECT_TRUE(stack.ends_with(level == "torch_memory" ? ";" + kTorchLeaf : std::string(";cudaMalloc"))) << stack;
      EXPECT_EQ(s["growth_bytes"], 50 * MiB) << way << " " << level;
      EXPECT_EQ(s["first_inuse_bytes"], 0) << way << " " << level;
      EXPECT_EQ(s["last_inuse_bytes"], 50 * MiB) << way << " " << level;
      const int grown = s["intervals_grown"], intervals = s["intervals"];
      EXPECT_GE(grown * 3, intervals * 2) << growth.dump(2);
      EXPECT_GE(grown, 3) << growth.dump(2);
      EXPECT_LE(intervals, static_cast<int>(growth["intervals"])) << growth.dump(2);
      // Named as in the flame graphs: its line in the in-use .folded file.
      EXPECT_NE(ReadFile(out + "/" + level + ".inuse_space.folded").find(stack + " " + std::to_string(50 * MiB) + "\n"),
                std::string::npos)
          << stack;
    }
    EXPECT_EQ(growth["thresholds"]["min_bytes"], MiB);
    if (way == "inprocess") {
      EXPECT_NE(r.output.find("gpuflame: growing (in use, "), std::string::npos) << r.output;
      EXPECT_NE(r.output.find("torch_memory +50.00 MiB in "), std::string::npos) << r.output;
      EXPECT_NE(r.output.find("under `… › Cache > leak › empty › Tensor > __init__`"), std::string::npos) << r.output;
      EXPECT_EQ(r.output.find("Trainer > step"), std::string::npos) << r.output;
      // The page's growth table: one row per level, nothing else.
      const std::string html = ReadFile(out + "/flamegraph.html");
      size_t rows = 0;
      for (size_t at = 0; (at = html.find("{\"pid\":", at)) != std::string::npos; at++) rows++;
      EXPECT_EQ(rows, 2u);
      EXPECT_NE(html.find("\"growth\":[{\"pid\":"), std::string::npos);
      EXPECT_NE(html.find(",\"growth\":52428800,"), std::string::npos);
    }
  }
}

// The same leak, freed by the script before it exits: judged before that
// teardown (profiler/forensics/growth.h), it is reported as it stood, with
// what the teardown left of it.
TEST(RecordTest, GrowthReportsALeakFreedByTheTeardownBeforeExit) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const std::string out = TempDir("growth-teardown");
  const RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN + " record --no-progress -o " + out + " -- " +
                         PyenvPython("3.12") + " " + Workload("leak.py") + " teardown");
  ASSERT_EQ(r.status, 0) << r.output;
  nlohmann::json growth, p;
  ASSERT_NO_FATAL_FAILURE(GrowthOfOneProcess(out, &growth, &p));
  for (const std::string level : {"torch_memory", "gpu_memory"}) {
    ASSERT_EQ(p[level].size(), 1u) << level << "\n" << growth.dump(2);
    const auto& s = p[level][0];
    EXPECT_NE(s["stack"].get<std::string>().find(";Cache > leak;"), std::string::npos) << s.dump();
    EXPECT_EQ(s["growth_bytes"], 50 * MiB) << level << " " << s.dump();
    EXPECT_EQ(s["last_inuse_bytes"], 50 * MiB) << level;
    EXPECT_EQ(s["before_teardown"], true) << level;
    EXPECT_EQ(s["final_inuse_bytes"], 0) << level;
    // It grew to the end of the loop, 2.5 s in; the teardown came 1 s later.
    EXPECT_GE(s["until_seconds"].get<double>(), 2.4) << s.dump();
  }
  // Nothing is left in use of it: the profile says what the end held.
  EXPECT_EQ(ReadFile(out + "/torch_memory.inuse_space.folded").find("Cache > leak"), std::string::npos);
  EXPECT_NE(r.output.find("until its teardown freed it to 0 B) under `… › Cache > leak › empty › Tensor > __init__`"),
            std::string::npos)
      << r.output;
}

TEST(RecordTest, ExpandableSegmentsAreCountedThroughCuMemCreate) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("expandable");
  RunResult r = Record(out, PyenvPython("3.12"), "expandable.py");
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile gpu;
  ASSERT_TRUE(LoadPprof(out + "/gpu_memory.pb.gz", &gpu));
  auto g = Stacks(gpu, "inuse_space", true, /*drop_native=*/true);
  EXPECT_EQ(ValueEndingWith(g, "<module>;Cache > grow;empty;Tensor > __init__;cuMemCreate"), 6 * MiB) << Dump(g);
  EXPECT_EQ(Total(gpu, "inuse_space"), 6 * MiB);
  EXPECT_NE(ReadFile(out + "/summary.json").find("\"cu_mem_mapped_bytes\": 6291456"), std::string::npos);
  // The mapped chunk is a segment of its handle's stack, the tensor in it whole.
  auto json = nlohmann::json::parse(ReadFile(out + "/summary.json"), nullptr, false);
  ASSERT_FALSE(json.is_discarded());
  const auto& slack = json["processes"][0]["slack"];
  EXPECT_EQ(slack["segments"], 1) << slack;
  EXPECT_EQ(slack["reserved_bytes"], 6 * MiB) << slack;
  EXPECT_EQ(slack["tensor_bytes"], 6 * MiB) << slack;
  EXPECT_EQ(slack["bytes_in_no_known_segment"], 0) << slack;
  EXPECT_EQ(Total(gpu, "unused_space"), 0);
}

TEST(RecordTest, UsesTheUsdtNotesWhereLibc10LacksTheReportHook) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("noreport");
  RunResult r = Record(out, PyenvPython("3.12"), "basic_model.py",
                       std::string("GPUFLAME_SIM_C10_DIR=") + GPUFLAME_SIM_DIR + "/noreport", "--tensor-events probes");
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile torch;
  ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch));
  auto t = Stacks(torch, "alloc_space");
  EXPECT_EQ(ValueEndingWith(t, "<module>;Model > __init__;LlamaMLP > __init__;empty;Tensor > __init__;" + kTorchLeaf),
            8 * MiB)
      << Dump(t);
  EXPECT_EQ(Total(torch, "alloc_space"), 12 * MiB);
  EXPECT_EQ(Total(torch, "inuse_space"), 8 * MiB);  // forward()'s temporary was freed
  EXPECT_TRUE(nlohmann::json::parse(ReadFile(out + "/summary.json"))["warnings"].empty());
}

TEST(RecordTest, AttachesToARunningProcessByPid) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.11");
  std::string dir = TempDir("pid");
  std::string pidfile = dir + "/pid", go = dir + "/go";
  std::string py = PyenvPython("3.11");
  std::thread workload(
      [&] { Sh(SimEnv() + " timeout 60 " + py + " " + Workload("steady.py") + " " + pidfile + " " + go); });
  for (int i = 0; i < 3000 && !std::filesystem::exists(pidfile); i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::filesystem::exists(pidfile));
  pid_t pid = std::stoi(ReadFile(pidfile));
  // gpuflame says "recording" once attached; only then does the workload
  // allocate. It finds the simulated NVML as it would the driver's.
  const RunResult r = RecordAttached(
      SimNvmlEnv() + " " + GPUFLAME_BIN + " record --no-progress -d 3 -o " + dir + "/out -p " + std::to_string(pid),
      go);
  const std::string& log = r.output;
  kill(pid, SIGKILL);
  workload.join();
  ASSERT_EQ(r.status, 0) << log;
  pprof::Profile torch;
  ASSERT_TRUE(LoadPprof(dir + "/out/torch_memory.pb.gz", &torch)) << log;
  auto t = Stacks(torch, "inuse_space");
  EXPECT_EQ(ValueEndingWith(t, "<module>;hold;empty;Tensor > __init__;" + kTorchLeaf), 10 * MiB) << Dump(t) << log;
  // What it held before we attached is said, not silently missing: the
  // caching allocator's own total, beyond what we saw allocated.
  EXPECT_EQ(t["[allocated before gpuflame attached]"], 6 * MiB) << Dump(t);
  EXPECT_EQ(Total(torch, "inuse_space"), 16 * MiB) << Dump(t);
  // Device level: in use is what the driver says the process holds, exactly;
  // the part from before (its 6 MiB segment and its CUDA context) under the
  // frame that says so, the 10 MiB segment seen allocated under its stack.
  const int64_t held = WaitForNumber(pidfile + ".held");
  EXPECT_GT(held, 16 * MiB) << "the simulated context is held too";
  pprof::Profile gpu;
  ASSERT_TRUE(LoadPprof(dir + "/out/gpu_memory.pb.gz", &gpu)) << log;
  auto g = Stacks(gpu, "inuse_space", true, /*drop_native=*/true);
  EXPECT_EQ(Total(gpu, "inuse_space"), held) << Dump(g);
  EXPECT_EQ(g[kHeldBeforeAttachFrame], held - 10 * MiB) << Dump(g);
  EXPECT_EQ(Stacks(gpu, "inuse_objects").count(kHeldBeforeAttachFrame), 0u) << "no object count: the driver gives none";
  EXPECT_EQ(ReadFile(dir + "/out/summary.json").find("NVML is unavailable"), std::string::npos);
}

TEST(RecordTest, WhatWasHeldBeforeAttachStaysSaidWhenTheProcessExitsFirst) {
  // The process ends during the recording: its teardown frees every tensor,
  // and the allocator's totals it reports fall to 0. What it held before we
  // came is what it held as its live set froze (on the H200 the frame was
  // missing: the totals were read after teardown).
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string dir = TempDir("pid-exit");
  const std::string pidfile = dir + "/pid", go = dir + "/go";
  const pid_t pid = StartSteadyWorkload(PyenvPython("3.12"), pidfile, go, "exit");
  ASSERT_GT(pid, 0);
  const RunResult r = RecordAttached(
      SimNvmlEnv() + " " + GPUFLAME_BIN + " record --no-progress -d 3 -o " + dir + "/out -p " + std::to_string(pid),
      go);
  const std::string& log = r.output;
  ASSERT_EQ(r.status, 0) << log;
  pprof::Profile torch;
  ASSERT_TRUE(LoadPprof(dir + "/out/torch_memory.pb.gz", &torch)) << log;
  auto t = Stacks(torch, "inuse_space");
  EXPECT_EQ(t["[allocated before gpuflame attached]"], 6 * MiB) << Dump(t) << log;
  EXPECT_EQ(Total(torch, "inuse_space"), 16 * MiB) << Dump(t);
}

TEST(RecordTest, WhatWasHeldBeforeAttachIsSaidToBeAnEstimateOnceTheProbesSample) {
  // Sampled from the first event on: what it held before is the allocator's
  // exact total less a sampled estimate, and its frame says so.
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string dir = TempDir("pid-sampled");
  const std::string pidfile = dir + "/pid", go = dir + "/go";
  const pid_t pid = StartSteadyWorkload(PyenvPython("3.12"), pidfile, go, "sampled");
  ASSERT_GT(pid, 0);
  const RunResult r =
      RecordAttached(SimNvmlEnv() + " " + GPUFLAME_BIN +
                         " record --no-progress -d 3 --tensor-sampling sampled --tensor-startup-s 0 -o " + dir +
                         "/out -p " + std::to_string(pid),
                     go);
  const std::string& log = r.output;
  kill(pid, SIGKILL);
  ASSERT_EQ(r.status, 0) << log;
  pprof::Profile torch;
  ASSERT_TRUE(LoadPprof(dir + "/out/torch_memory.pb.gz", &torch)) << log;
  auto t = Stacks(torch, "inuse_space");
  // 16 blocks of 2 MiB, each taken with probability 1/2 for 4 MiB, then
  // one of 4 MiB, always: the 2 MiB ones' estimate (at most 64 MiB) never
  // exceeds the 64 + 32 MiB the gap is taken from.
  const int64_t blocks = ValueEndingWith(t, "<module>;small_blocks;empty;Tensor > __init__;" + kTorchLeaf) - 4 * MiB;
  ASSERT_GE(blocks, 0) << Dump(t) << log;
  EXPECT_EQ(blocks % (4 * MiB), 0) << Dump(t);
  EXPECT_EQ(t.count("[allocated before gpuflame attached]"), 0u) << Dump(t);
  EXPECT_EQ(t["[allocated before gpuflame attached: estimate]"], 64 * MiB + 32 * MiB - blocks) << Dump(t);
  EXPECT_EQ(ValueEndingWith(t, "<module>;hold;empty;Tensor > __init__;" + kTorchLeaf), 10 * MiB) << Dump(t);
  // Sampled or not, the process's whole in use is the allocator's total
  // (the last record's: an allocation not taken sends none).
  EXPECT_EQ(Total(torch, "inuse_space"), 110 * MiB) << Dump(t);
}

TEST(RecordTest, WithoutNvmlWhatWasHeldBeforeAttachIsSaidToBeMissingOnce) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string dir = TempDir("pid-nonvml");
  const std::string pidfile = dir + "/pid", go = dir + "/go";
  const pid_t pid = StartSteadyWorkload(PyenvPython("3.12"), pidfile, go);
  ASSERT_GT(pid, 0);
  RunResult r = Sh(std::string("GPUFLAME_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 ") + GPUFLAME_BIN +
                   " record --no-progress -d 1 -o " + dir + "/out -p " + std::to_string(pid));
  kill(pid, SIGKILL);
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string said = "NVML is unavailable (cannot load /nonexistent/libnvidia-ml.so.1";
  const std::string summary = ReadFile(dir + "/out/summary.json");
  const size_t first = summary.find(said);
  EXPECT_NE(first, std::string::npos) << summary;
  EXPECT_EQ(summary.find(said, first + 1), std::string::npos) << "once: " << summary;
  const size_t on_terminal = r.output.find(said);
  EXPECT_NE(on_terminal, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(said, on_terminal + 1), std::string::npos) << "once: " << r.output;
  pprof::Profile gpu;
  ASSERT_TRUE(LoadPprof(dir + "/out/gpu_memory.pb.gz", &gpu));
  int comments = 0;
  for (int64_t c : gpu.comment()) comments += gpu.string_table(static_cast<int>(c)).find(said) != std::string::npos;
  EXPECT_EQ(comments, 1) << "the device-level profile says its in use is partial";
  EXPECT_EQ(Stacks(gpu, "inuse_space").count(kHeldBeforeAttachFrame), 0u);
}

TEST(RecordTest, EveryRuntimeAndDriverApiIsCountedOnce) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.13");
  std::string out = TempDir("apis");
  RunResult r = Record(out, PyenvPython("3.13"), "driver_apis.py");
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile gpu;
  ASSERT_TRUE(LoadPprof(out + "/gpu_memory.pb.gz", &gpu));
  auto a = Stacks(gpu, "alloc_space", true, /*drop_native=*/true);
  auto u = Stacks(gpu, "inuse_space", true, /*drop_native=*/true);
  EXPECT_EQ(ValueEndingWith(a, "<module>;stream_ordered;cuda_malloc_async;cudaMallocAsync"), 5 * MiB) << Dump(a);
  EXPECT_EQ(ValueEndingWith(u, "<module>;stream_ordered;cuda_malloc_async;cudaMallocAsync"), -1)
      << "freed with cudaFreeAsync";
  EXPECT_EQ(ValueEndingWith(u, "<module>;managed;cuda_malloc_managed;cudaMallocManaged"), 7 * MiB) << Dump(u);
  EXPECT_EQ(ValueEndingWith(u, "<module>;pitched;cu_mem_alloc_pitch;cuMemAllocPitch_v2"), 2 * MiB) << Dump(u);
  EXPECT_EQ(Total(gpu, "alloc_space"), 14 * MiB);  // the failed 2 TiB cudaMalloc counts for nothing
  EXPECT_EQ(Total(gpu, "inuse_space"), 9 * MiB);
  std::string summary = ReadFile(out + "/summary.json");
  EXPECT_NE(summary.find("\"failed_cuda_calls\": 2"), std::string::npos) << summary;  // runtime + driver
  EXPECT_NE(summary.find("\"unmatched_frees\": 0"), std::string::npos) << summary;
}

TEST(RecordTest, HidesTrampolinesOnRequest) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("hide");
  RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN + " record -q --hide-trampolines -o " + out + " -- " +
                   PyenvPython("3.12") + " " + Workload("basic_model.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(ReadFile(out + "/gpu_memory.alloc_space.folded").find("<interpreter trampoline>"), std::string::npos);
  EXPECT_NE(ReadFile(out + "/gpu_memory.alloc_space.folded").find("<module>;Model > __init__;LlamaMLP > __init__"),
            std::string::npos);
}

TEST(RecordTest, NativeProgramsGetSymbolizedNativeStacks) {
  GPUFLAME_REQUIRE_ROOT();
  std::string out = TempDir("native");
  RunResult r = Sh(std::string(GPUFLAME_BIN) + " record -q -o " + out + " -- " + GPUFLAME_SIM_DIR + "/native_alloc");
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile gpu;
  ASSERT_TRUE(LoadPprof(out + "/gpu_memory.pb.gz", &gpu));
  auto a = Stacks(gpu, "alloc_space");
  ASSERT_EQ(a.size(), 1u) << Dump(a);
  const std::string& stack = a.begin()->first;
  EXPECT_EQ(a.begin()->second, 12 * MiB);
  // DWARF unwinding from cudaMalloc's entry (its own .eh_frame, then the
  // PIE's with its load bias) recovers load_weights, which a frame-pointer
  // walk misses, though the process exited before its stack was unwound (the
  // maps seen at its gates are kept). libc's __libc_start_call_main is a
  // local symbol Debian's stripped libc does not name: a raw address, rightly,
  // unless libc6-dbg put its debug file in /usr/lib/debug.
  const std::string tail = ";main;load_weights.constprop.0;cudaMalloc";
  if (stack.find("__libc_start_call_main") == std::string::npos) {
    // The raw frame, up to its ';' (a fresh machine has no libc6-dbg).
    const std::string raw = stack.substr(25, stack.find(';', 25) - 25);
    EXPECT_EQ(raw.rfind("libc.so.6+0x", 0), 0u) << stack;
    EXPECT_EQ(stack, "_start;__libc_start_main;" + raw + tail);
  } else EXPECT_EQ(stack, "_start;__libc_start_main;__libc_start_call_main" + tail);
}

TEST(RecordTest, MixedStacksJoinPythonAndNativeFrames) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("mixed");
  RunResult r = Record(out, PyenvPython("3.12"), "basic_model.py");
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile gpu;
  ASSERT_TRUE(LoadPprof(out + "/gpu_memory.pb.gz", &gpu));
  auto a = Stacks(gpu, "alloc_space", /*drop_trampolines=*/false);
  // Python from the top (no libc start-up frames above <module>), then ctypes
  // and libffi, then the simulated caching allocator and the API, unwound
  // through code built without frame pointers; NewSegment is inlined into
  // gf_sim_empty and named from DWARF, with its line.
  bool found = false;
  for (const auto& [stack, v] : a) {
    if (stack.find("LlamaMLP > __init__") == std::string::npos) continue;
    found = true;
    EXPECT_EQ(v, 8 * MiB);
    EXPECT_EQ(stack.rfind("<interpreter trampoline>;<module>;", 0), 0u) << stack;
    EXPECT_NE(stack.find("Tensor > __init__;PyCFuncPtr_call;_ctypes_callproc;"), std::string::npos) << stack;
    EXPECT_NE(stack.find(";ffi_call;"), std::string::npos) << stack;
    EXPECT_TRUE(std::string_view(stack).ends_with(";gf_sim_empty;NewSegment;cudaMalloc")) << stack;
    EXPECT_EQ(stack.find("_PyEval_EvalFrameDefault"), std::string::npos) << "eval frames are replaced: " << stack;
  }
  EXPECT_TRUE(found) << Dump(a);
  // The inlined frame carries its source line (DWARF line table), and the
  // frame it was inlined into the line of the call.
  std::string sim = std::string(GPUFLAME_WORKLOADS) + "/../fixtures/cuda_sim/c10_cuda_sim.cc";
  EXPECT_EQ(LineOf(gpu, "gf_sim_empty"), SourceLine(sim, "ptr = NewSegment(a, seg);"));
  EXPECT_EQ(LineOf(gpu, "NewSegment"), SourceLine(sim, "return cudaMalloc(&p, bytes) == 0 ? p : nullptr;"));
  EXPECT_NE(ReadFile(out + "/summary.json").find("\"mixed_stacks\": "), std::string::npos);
}

TEST(RecordTest, NativeThreadsInPythonProcessesGetNativeStacks) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.11");
  std::string out = TempDir("native-thread");
  RunResult r = Record(out, PyenvPython("3.11"), "native_thread.py");
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile gpu;
  ASSERT_TRUE(LoadPprof(out + "/gpu_memory.pb.gz", &gpu));
  auto a = Stacks(gpu, "alloc_space", false);
  ASSERT_EQ(a.size(), 1u) << Dump(a);
  const std::string& stack = a.begin()->first;
  EXPECT_EQ(a.begin()->second, 5 * MiB);
  // The worker thread never ran Python: no Python frame, no <module>; its
  // native frames from the thread's start down to the API.
  EXPECT_EQ(stack.find("<module>"), std::string::npos) << stack;
  EXPECT_EQ(stack.find("start_worker"), std::string::npos) << stack;
  // Above it only libc's start_thread and clone3: local symbols, which
  // Debian's stripped libc does not name (module and offset, the same in
  // every process), unless its debug file (libc6-dbg) is in /usr/lib/debug,
  // found by build ID.
  EXPECT_TRUE(stack.rfind("libc.so.6+0x", 0) == 0 || stack.rfind("__clone3;start_thread;", 0) == 0) << stack;
  EXPECT_TRUE(std::string_view(stack).ends_with(";NativeWorker(void*);cudaMalloc") ||
              std::string_view(stack).ends_with(";(anonymous namespace)::NativeWorker(void*);cudaMalloc"))
      << stack;
}

// A library mapped after gpuflame last looked (a C++ extension dlopen()ed by
// ctypes, a file gpuflame does not watch): its first call's native stack is
// unwound through it as the later ones are.
TEST(RecordTest, TheFirstCallThroughAFreshExtensionUnwindsWhole) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("fresh-ext");
  RunResult r = Record(out, PyenvPython("3.12"), "fresh_extension.py");
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile gpu;
  ASSERT_TRUE(LoadPprof(out + "/gpu_memory.pb.gz", &gpu));
  auto a = Stacks(gpu, "alloc_space", true);
  int64_t through_ext = 0;
  for (const auto& [stack, v] : a) {
    if (stack.find("ext_alloc_entry") == std::string::npos) continue;
    through_ext += v;
    // All three calls, one stack: Python, ctypes, the extension, the API.
    EXPECT_EQ(v, 3 * MiB) << Dump(a);
    EXPECT_TRUE(stack.starts_with("<module>;Loader > load;")) << stack;
    EXPECT_NE(stack.find(";ffi_call;"), std::string::npos) << stack;
    EXPECT_TRUE(stack.ends_with(";ext_alloc_entry;ext::Pool::Grow(unsigned long);cudaMalloc")) << stack;
  }
  EXPECT_EQ(through_ext, 3 * MiB) << Dump(a);
}

TEST(RecordTest, NativeStacksForTensorsAndInterpreterFramesOnRequest) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("native-all");
  RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN + " record -q --native-stacks all --keep-interpreter-frames -o " +
                   out + " -- " + PyenvPython("3.12") + " " + Workload("basic_model.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile torch;
  ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch));
  auto a = Stacks(torch, "alloc_space", false);
  ASSERT_FALSE(a.empty());
  for (const auto& [stack, v] : a) {
    // Tensor stacks now go through ctypes into the allocator, and CPython's
    // own C frames are kept (the eval loop itself is still replaced by the
    // Python frames it ran).
    EXPECT_NE(stack.find("gf_sim_empty;" + kTorchLeaf), std::string::npos) << stack;
    EXPECT_NE(stack.find("_PyObject_MakeTpCall;"), std::string::npos) << stack;
    EXPECT_EQ(stack.find("_PyEval_EvalFrameDefault"), std::string::npos) << stack;
  }
  EXPECT_EQ(Total(torch, "alloc_space"), 12 * MiB);
}

TEST(RecordTest, CpuTimeLandsOnTheHotPythonFunction) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("cpu");
  RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN + " record -q --thread-names -o " + out + " -- " +
                   PyenvPython("3.12") + " " + Workload("cpu_hot.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile cpu;
  ASSERT_TRUE(LoadPprof(out + "/process_cpu.pb.gz", &cpu)) << r.output;
  ASSERT_EQ(cpu.sample_type_size(), 1);
  EXPECT_EQ(cpu.string_table(cpu.sample_type(0).type()), "cpu");
  EXPECT_EQ(cpu.string_table(cpu.sample_type(0).unit()), "nanoseconds");
  EXPECT_EQ(cpu.string_table(cpu.period_type().type()), "cpu");
  EXPECT_EQ(cpu.period(), 1000000000 / 97);
  auto stacks = Stacks(cpu, "cpu");
  int64_t total = Total(cpu, "cpu"), hot = 0, sleeping = 0;
  for (const auto& [stack, v] : stacks) {
    if (stack.find("<module>;Trainer > step;hot_loop") != std::string::npos) hot += v;
    if (stack.find(";idle") != std::string::npos) sleeping += v;
  }
  // ~1 s of CPU in hot_loop out of ~1.1-1.3 s in all (interpreter start-up,
  // imports). Sampling: bounds, not exact values.
  EXPECT_GT(hot, total * 6 / 10) << Dump(stacks);
  EXPECT_GT(hot, 800'000'000) << Dump(stacks);
  EXPECT_LT(hot, 1'300'000'000) << Dump(stacks);
  EXPECT_LT(sleeping, total / 20) << "time.sleep is off CPU: " << Dump(stacks);
  // Every sample carries its thread's name; the main thread's is the process's.
  for (const auto& s : cpu.sample()) {
    ASSERT_EQ(s.label_size() >= 1, true);
    bool named = false;
    for (const auto& l : s.label())
      if (cpu.string_table(l.key()) == "thread_name") named = !cpu.string_table(l.str()).empty();
    EXPECT_TRUE(named);
  }
  // An independent reader agrees.
  RunResult top = Sh("go tool pprof -top " + out + "/process_cpu.pb.gz");
  ASSERT_EQ(top.status, 0) << top.output;
  EXPECT_NE(top.output.find("hot_loop"), std::string::npos) << top.output;
  // The report offers it next to the memory profiles.
  EXPECT_NE(ReadFile(out + "/flamegraph.html").find("process_cpu"), std::string::npos);
}

// A CPU sample is taken in the timer interrupt, which can land in the middle
// of a probe's BPF program on the same CPU: at 10 kHz, in most runs, inside
// some of cudaMalloc's entry probes. Each keeps its own per-CPU scratch
// (bpf/lib/python_stack.bpf.h, GF_SLOTS), so no allocation loses its stack
// at entry to the sample (a lone cudaMalloc frame) and no sample goes out
// twice.
TEST(RecordTest, CpuSamplesInsideAProbeLeaveItsStackAlone) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const std::string out = TempDir("sample-in-probe");
  RunResult r = Record(out, PyenvPython("3.12"), "leak.py", "", "--tensor-events probes --cpu-hz 10000");
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile gpu;
  ASSERT_TRUE(LoadPprof(out + "/gpu_memory.pb.gz", &gpu)) << r.output;
  auto g = Stacks(gpu, "alloc_objects", true, /*drop_native=*/true);
  for (const auto& [stack, n] : g) EXPECT_TRUE(stack.starts_with("<module>;")) << Dump(g);
  EXPECT_EQ(Total(gpu, "alloc_objects"), 25 + 1 + 1) << Dump(g);  // leak's, step's first, load's
  const auto summary = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  EXPECT_GT(summary["bpf"]["cpu_samples"], 0);
  EXPECT_LE(summary["events"]["cpu_samples"], summary["bpf"]["cpu_samples"]) << "a sample went out twice";
}

// gpuflame over its own memory budget (here 1 MiB, which it always is): it
// sheds native stacks, then stops keeping new stacks; every byte is still
// counted, the later ones under its over-budget frame, and the profiles and
// the summary say what was shed.
TEST(RecordTest, OverItsMemoryBudgetGpuflameShedsAndSaysSo) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("budget");
  RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN + " record --no-progress --max-memory-mb 1 -o " + out + " -- " +
                   PyenvPython("3.12") + " " + Workload("budget.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("gpuflame sheds native stacks"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("gpuflame sheds native stacks, new stacks"), std::string::npos) << r.output;
  pprof::Profile torch;
  ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch)) << r.output;
  EXPECT_EQ(Total(torch, "alloc_space"), 16 * MiB) << "nothing lost";
  int64_t over = 0, kept = 0;
  for (const auto& [stack, v] : Stacks(torch, "alloc_space")) {
    if (stack.find("[gpuflame over memory budget]") != std::string::npos) over += v;
    if (stack.find(";alloc_") != std::string::npos) kept += v;
  }
  EXPECT_GT(over, 0) << Dump(Stacks(torch, "alloc_space"));
  // Stacks seen before the freeze (about a second in) keep their names; how
  // many there are depends on how fast the interpreter started.
  EXPECT_EQ(over + kept, 16 * MiB);
  bool commented = false;
  for (int64_t c : torch.comment())
    commented |= torch.string_table(static_cast<int>(c)).find("RSS") != std::string::npos;
  EXPECT_TRUE(commented) << "the profile says why it has an over-budget frame";
  std::string summary = ReadFile(out + "/summary.json");
  EXPECT_NE(summary.find("\"shedding\": \"native stacks, new stacks\""), std::string::npos) << summary;
  EXPECT_EQ(summary.find("\"over_budget_events\": 0,"), std::string::npos) << summary;
}

// Over its CPU budget (here a thousandth of a core: one 10 ms clock tick in
// its first second is over it, and its start-up work takes several) gpuflame first stops copying native stacks, in BPF:
// the CPU samples keep their Python frames, and the shed copies are counted.
TEST(RecordTest, OverItsOverheadBudgetGpuflameShedsAndSaysWhy) {
  // Its BPF time as a share of the workload's CPU time (the sampler's runs
  // here), over a budget no profiler could keep.
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("overhead-budget");
  RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN + " record --no-progress --max-overhead 0.0001 -o " + out + " -- " +
                   PyenvPython("3.12") + " " + Workload("cpu_hot.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("of the profiled processes' CPU > 0.0001%) gpuflame sheds native stacks"), std::string::npos)
      << r.output;
  auto summary = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  EXPECT_DOUBLE_EQ(summary["guardrails"]["max_overhead"].get<double>(), 0.000001);
  EXPECT_GT(summary["guardrails"]["overhead"].get<double>(), 0) << summary["guardrails"].dump();
}

// Over its overhead budget, with tensor events from libgpuflame_cupti.so,
// gpuflame's second rung asks the library for thrift: it holds one of the
// library's thrift sites, whose semaphore the hook reads as a level, and the
// hook samples (record asked for every allocation) at four times its
// interval. The library's own announcement of its interval proves it heard;
// the memory profile stays, as estimates that say so.
TEST(RecordTest, OverItsOverheadBudgetTheInjectionLibrarySamplesMoreThinly) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("thrift");
  RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN + " record --no-progress --max-overhead 0.0001 -o " + out + " -- " +
                   PyenvPython("3.12") + " " + Workload("thrift.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("the injection library's work (thrift level 1: stack walks 1 in 4, duty-cycled kernel-time "
                          "activity half as often)"),
            std::string::npos)
      << r.output;
  auto summary = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  const int level = summary["guardrails"]["thrift_level"].get<int>();
  ASSERT_GE(level, 1) << summary["guardrails"].dump();
  ASSERT_EQ(summary["processes"].size(), 1u) << summary.dump();
  // Its own hook budget may have coarsened it further, by a power of two.
  const uint64_t interval = summary["processes"][0]["tensor_sample_bytes"].get<uint64_t>();
  const uint64_t thrift_interval = (4ull << 20) << (2 * level);
  EXPECT_TRUE(interval >= thrift_interval && interval % thrift_interval == 0 &&
              __builtin_popcountll(interval / thrift_interval) == 1)
      << "the library's own word for the interval it samples at\n"
      << summary["processes"][0].dump();
  pprof::Profile torch;
  ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch)) << r.output;
  bool estimates = false;
  for (int64_t c : torch.comment()) estimates |= torch.string_table(c).find("unbiased estimates") != std::string::npos;
  EXPECT_TRUE(estimates) << "the profile says its values are estimates";
  auto inuse = Stacks(torch, "inuse_space", true, true);
  EXPECT_EQ(inuse["<module>;empty;Tensor > __init__;" + kTorchLeaf], 16 * MiB)  // 3.12: no <listcomp>
      << "the weights, taken exactly (start-up), stay in use\n"
      << Dump(inuse);
}

// Thrift goes with the gpuflame that asked for it: the kernel drops its
// thrift sites when it exits, the library's level falls back to 0, and a
// gpuflame attached later without a budget gets every allocation again. On
// a running job (started with the library, without gpuflame): the first
// `record --pid` reaches thrift 1 (about 12 s in) and stops at 20 s while the
// job trains; the second, attached after, sees the job's evaluation exactly.
TEST(RecordTest, ThriftEndsWithTheGpuflameThatAskedForIt) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const std::string dir = TempDir("thrift-ends");
  const std::string lib = dir + "/libgpuflame_cupti.so";  // its own copy: see SampledTensorEvents...
  std::filesystem::copy_file(GPUFLAME_CUPTI_LIB, lib);
  const std::string pidfile = dir + "/pid", ready = dir + "/ready", stop = dir + "/stop", go = dir + "/go";
  std::thread workload([&] {
    Sh("cd " + dir + " && " + SimEnv() + " GPUFLAME_STARTUP_S=0 CUDA_INJECTION64_PATH=" + lib +
       " timeout 180 sh -c 'echo $$ > pid; exec " + PyenvPython("3.12") + " " + Workload("thrift.py") + " " + ready +
       " " + stop + " " + go + "' > /dev/null 2>&1");
  });
  // However the test ends, the job is let go and waited for.
  struct Finish {
    std::thread& workload;
    std::string stop, go;
    ~Finish() {
      std::ofstream(stop) << "stop";
      std::ofstream(go) << "go";
      if (workload.joinable()) workload.join();
    }
  } finish{workload, stop, go};
  // Its weights allocated: the library is loaded and its hook in.
  for (int i = 0; i < 3000 && !std::filesystem::exists(ready); i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::filesystem::exists(ready));
  const std::string pid = ReadFile(pidfile).substr(0, ReadFile(pidfile).find('\n'));
  // It trains until the first gpuflame is gone, however long that one took
  // to reach its thrift rung.
  const RunResult first = Sh(std::string(GPUFLAME_BIN) + " record --no-progress --max-overhead 0.0001 -d 20 -p " + pid +
                             " -o " + dir + "/first");
  std::ofstream(stop) << "stop";
  const RunResult second =
      RecordAttached(std::string(GPUFLAME_BIN) + " record --no-progress -p " + pid + " -o " + dir + "/second", go);
  workload.join();
  ASSERT_EQ(first.status, 0) << first.output;
  ASSERT_EQ(second.status, 0) << second.output;
  auto asked = nlohmann::json::parse(ReadFile(dir + "/first/summary.json"));
  ASSERT_GE(asked["guardrails"]["thrift_level"].get<int>(), 1) << asked["guardrails"].dump() << first.output;
  EXPECT_EQ(asked["guardrails"]["thrift_processes_short"], 0) << asked["guardrails"].dump();
  ASSERT_EQ(asked["processes"].size(), 1u) << asked.dump();
  EXPECT_GE(asked["processes"][0]["tensor_sample_bytes"].get<uint64_t>(), 16 * MiB)
      << "the library said it sampled at 4 times its 4 MiB\n"
      << asked["processes"][0].dump();
  auto after = nlohmann::json::parse(ReadFile(dir + "/second/summary.json"));
  EXPECT_EQ(after["guardrails"]["thrift_level"], 0) << after["guardrails"].dump();
  ASSERT_EQ(after["processes"].size(), 1u) << after.dump();
  EXPECT_EQ(after["processes"][0]["tensor_sample_bytes"], 0) << "exact again\n" << after["processes"][0].dump();
  pprof::Profile torch;
  ASSERT_TRUE(LoadPprof(dir + "/second/torch_memory.pb.gz", &torch)) << second.output;
  const std::string kEvaluate = "<module>;Evaluator > evaluate;empty;Tensor > __init__;" + kTorchLeaf;
  auto alloc = Stacks(torch, "alloc_space", true, true);
  EXPECT_EQ(alloc[kEvaluate], 10 * (128 << 10)) << "every allocation, as taken\n" << Dump(alloc);
  EXPECT_EQ(Stacks(torch, "alloc_objects", true, true)[kEvaluate], 10) << Dump(alloc);
}

// Still over its CPU budget after native stacks and CPU samples went (here
// a thousandth of a core, 21 s or so in), gpuflame samples the probes'
// tensor events by bytes before it drops them: the memory profiles stay, as
// unbiased estimates that say so, allocations of 4 MiB or more stay exact,
// and the frees of blocks not taken are counted apart, not as unmatched.
// What a recording whose probes sampled tensor allocations says of it: the
// draws not taken, the frees of blocks never taken counted apart (none
// unmatched), and a torch profile that says its values are estimates.
void LoadProbeSampled(const std::string& out, const nlohmann::json& summary, const std::string& output,
                      pprof::Profile& torch) {
  EXPECT_GT(summary["bpf"]["tensor_allocations_not_sampled"], 0) << summary["bpf"].dump();
  EXPECT_GT(summary["events"]["unsampled_frees"], 0) << summary["events"].dump();
  EXPECT_EQ(summary["events"]["unmatched_frees"], 0) << summary["events"].dump();
  ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch)) << output;
  bool said = false;
  for (int64_t c : torch.comment()) said |= torch.string_table(c).find("unbiased estimates") != std::string::npos;
  EXPECT_TRUE(said) << "the profile says its values are estimates";
}

TEST(RecordTest, OverItsCpuBudgetGpuflameSamplesTheProbesTensorEventsBeforeDroppingThem) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("sampled-probes");
  const std::string truth_file = out + "-truth";
  // gpuflame checks its budget once a second from its start and steps once
  // per 10 s: the sampled rung comes about 21 s in, the last one (tensor
  // events off) about 31 s in. The workload, started after it, runs 26 s:
  // about 4 s sampled, and it has ended before the last rung even where
  // its start-up took seconds.
  RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN + " record --no-progress --tensor-events probes --max-cpu 0.001 -o " +
                   out + " -- " + PyenvPython("3.12") + " " + Workload("sampled_probes.py") + " " + truth_file + " 26");
  ASSERT_EQ(r.status, 0) << r.output;
  int64_t steps = 0, snapshots = 0;
  ASSERT_EQ(std::sscanf(ReadFile(truth_file).c_str(), "%ld %ld", &steps, &snapshots), 2);
  const auto summary = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  ASSERT_EQ(summary["guardrails"]["shedding"],
            "native stacks, CPU samples, exact tensor-level events (the probes sample them by bytes)")
      << summary["guardrails"].dump() << r.output;
  EXPECT_EQ(summary["bpf"]["shed_tensor_events"], 0) << "the last rung was not reached: " << summary["bpf"].dump();
  pprof::Profile torch;
  ASSERT_NO_FATAL_FAILURE(LoadProbeSampled(out, summary, r.output, torch));
  auto alloc = Stacks(torch, "alloc_space", true, true);
  auto inuse = Stacks(torch, "inuse_space", true, true);
  const std::string kStep = "<module>;Trainer > step;empty;Tensor > __init__;" + kTorchLeaf;
  const std::string kSnapshot = "<module>;Trainer > snapshot;empty;Tensor > __init__;" + kTorchLeaf;
  const std::string kLoad = "<module>;Loader > load_weights;empty;Tensor > __init__;" + kTorchLeaf;
  // Exact for its first 21 s or so, then about one 64 KiB activation in 64
  // taken, each standing for 4 MiB: tens of thousands of them in the
  // sampled seconds keep the estimate well within 15 %.
  const double truth = static_cast<double>(steps) * (64 << 10);
  EXPECT_NEAR(static_cast<double>(alloc[kStep]), truth, 0.15 * truth) << steps << " steps\n" << Dump(alloc);
  // 8 MiB is over the interval: every snapshot is taken and stands for itself.
  EXPECT_EQ(alloc[kSnapshot], snapshots * (8 * MiB)) << snapshots << " snapshots\n" << Dump(alloc);
  EXPECT_EQ(alloc[kLoad], 80 * MiB) << Dump(alloc);
  // Every taken block's free was matched: nothing of the churn stays in use.
  EXPECT_EQ(inuse[kStep], 0) << Dump(inuse);
  EXPECT_EQ(inuse[kSnapshot], 0) << Dump(inuse);
  EXPECT_EQ(inuse[kLoad], 80 * MiB) << Dump(inuse);
}

// The agent's default through the probes (tensor_sampling: sampled), asked
// of record: a process's first seconds from its first tensor exact, sampled
// by bytes after, on every thread.
TEST(RecordTest, SampledProbesKeepAProcesssStartUpExact) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("probe-startup");
  const std::string truth_file = out + "-truth";
  RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN +
                   " record --no-progress --tensor-events probes --tensor-sampling sampled --tensor-startup-s 3 -o " +
                   out + " -- " + PyenvPython("3.12") + " " + Workload("probe_startup.py") + " " + truth_file + " 3 6");
  ASSERT_EQ(r.status, 0) << r.output;
  int64_t steps = 0;
  ASSERT_EQ(std::sscanf(ReadFile(truth_file).c_str(), "%ld", &steps), 1);
  ASSERT_GT(steps, 5000) << "too slow a machine for an estimate to say anything";
  const auto summary = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  ASSERT_EQ(summary["bpf"]["ringbuf_full_drops"], 0) << "losses would blur the estimate: " << summary["bpf"].dump();
  EXPECT_EQ(summary["guardrails"]["shedding"], "nothing") << summary["guardrails"].dump();
  EXPECT_EQ(summary["tensor_sampling"]["mode"], "sampled") << summary["tensor_sampling"].dump();
  pprof::Profile torch;
  ASSERT_NO_FATAL_FAILURE(LoadProbeSampled(out, summary, r.output, torch));
  auto alloc = Stacks(torch, "alloc_space", true, true);
  auto inuse = Stacks(torch, "inuse_space", true, true);
  auto objects = Stacks(torch, "alloc_objects", true, true);
  auto samples = Stacks(torch, "alloc_samples", true, true);
  const std::string kFill = "<module>;Warmup > fill;empty;Tensor > __init__;" + kTorchLeaf;  // 3.12: no <listcomp>
  const std::string kStep =
      "Thread > _bootstrap;Thread > _bootstrap_inner;Thread > run;train;Trainer > step;empty;"
      "Tensor > __init__;" +
      kTorchLeaf;
  // The start-up: every small buffer taken as itself; the half freed after
  // it (its frees flagged as sampled) released exactly.
  EXPECT_EQ(alloc[kFill], 200 * (64 << 10)) << Dump(alloc);
  EXPECT_EQ(objects[kFill], 200) << Dump(objects);
  EXPECT_EQ(samples[kFill], 200) << Dump(samples);
  EXPECT_EQ(inuse[kFill], 100 * (64 << 10)) << Dump(inuse);
  // After it, on a thread of its own: about one activation in 64 taken,
  // each standing for 4 MiB (a binomial count: relative error
  // sqrt(64 / steps)); the estimate within 5 of those, nothing left in use.
  const double truth = static_cast<double>(steps) * (64 << 10);
  const double tolerance = 5 * std::sqrt(64.0 / static_cast<double>(steps));
  EXPECT_NEAR(static_cast<double>(alloc[kStep]), truth, tolerance * truth) << steps << " steps\n" << Dump(alloc);
  EXPECT_LT(samples[kStep], steps / 16) << steps << " steps\n" << Dump(samples);
  EXPECT_EQ(inuse[kStep], 0) << Dump(inuse);
}

TEST(RecordTest, OverItsCpuBudgetGpuflameShedsNativeStacksFirst) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("cpu-budget");
  RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN + " record --no-progress --max-cpu 0.001 -o " + out + " -- " +
                   PyenvPython("3.12") + " " + Workload("cpu_hot.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("cores > 0.001) gpuflame sheds native stacks"), std::string::npos) << r.output;
  std::string summary = ReadFile(out + "/summary.json");
  EXPECT_EQ(summary.find("\"shed_native_stacks\": 0,"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"shed_cpu_samples\": 0,"), std::string::npos) << "one step at most per 10 s: " << summary;
  pprof::Profile cpu;
  ASSERT_TRUE(LoadPprof(out + "/process_cpu.pb.gz", &cpu)) << r.output;
  int64_t hot = 0;
  for (const auto& [stack, v] : Stacks(cpu, "cpu"))
    if (stack.find("Trainer > step;hot_loop") != std::string::npos) hot += v;
  EXPECT_GT(hot, Total(cpu, "cpu") / 2) << "Python frames are kept: " << Dump(Stacks(cpu, "cpu"));
}

// gpuflame's own cost: the kernel's run-time stats, on for the recording,
// count each BPF program's runs and time in the profiled process. Timings
// are checked to be there (> 0), never their size, which is the host's.
TEST(RecordTest, SummarySaysWhatItsBpfProgramsCost) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("self-cost");
  // Probes on PyTorch's allocator, as under --pid (its own command's
  // tensor events come in-process by default: InProcessFeaturesTest).
  RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN + " record --no-progress --tensor-events probes -o " + out + " -- " +
                   PyenvPython("3.12") + " " + Workload("features.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("gpuflame cost: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" in BPF programs ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" s CPU in gpuflame"), std::string::npos) << r.output;

  nlohmann::json summary = nlohmann::json::parse(ReadFile(out + "/summary.json"), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(summary.is_discarded()) << "summary.json is not JSON: " << ReadFile(out + "/summary.json");
  const nlohmann::json& cost = summary["self_cost"];
  ASSERT_EQ(cost["bpf_stats"], "on") << cost.dump(2);
  const nlohmann::json& programs = cost["programs"];
  uint64_t hits = 0, ns = 0;
  for (const auto& [name, p] : programs.items()) {
    hits += p["hits"].get<uint64_t>();
    ns += p["ns_total"].get<uint64_t>();
  }
  EXPECT_EQ(cost["bpf_hits"].get<uint64_t>(), hits) << cost.dump(2);
  EXPECT_EQ(cost["bpf_ns_total"].get<uint64_t>(), ns) << cost.dump(2);
  // The allocation programs: tensor level (c10::reportMemoryUsageToProfiler,
  // allocs and frees), device level (cudaMalloc/cuMemAlloc_v2 entry and
  // return, cudaFree/cuMemFree).
  for (const char* name : {"torch_report", "alloc_enter", "alloc_exit", "free_enter"}) {
    ASSERT_TRUE(programs.contains(name)) << name << ": " << cost.dump(2);
    EXPECT_GT(programs[name]["hits"].get<uint64_t>(), 0u) << name << ": " << cost.dump(2);
    EXPECT_GT(programs[name]["ns_total"].get<uint64_t>(), 0u) << name << ": " << cost.dump(2);
    EXPECT_GT(programs[name]["ns_per_hit"].get<double>(), 0) << name << ": " << cost.dump(2);
  }
  // The lifecycle programs on kernel tracepoints run in every process of the
  // node: said apart, and left out of the overhead budget; the probes are not.
  uint64_t machine_wide_ns = 0;
  for (const auto& [name, p] : programs.items())
    if (p["machine_wide"].get<bool>()) machine_wide_ns += p["ns_total"].get<uint64_t>();
  EXPECT_EQ(programs["watch_mmap"]["machine_wide"], true) << cost.dump(2);
  EXPECT_EQ(programs["watch_exit"]["machine_wide"], true) << cost.dump(2);
  EXPECT_EQ(programs["alloc_enter"]["machine_wide"], false) << cost.dump(2);
  EXPECT_EQ(programs["torch_report"]["machine_wide"], false) << cost.dump(2);
  EXPECT_EQ(cost["bpf_ns_machine_wide"].get<uint64_t>(), machine_wide_ns) << cost.dump(2);
  EXPECT_GT(machine_wide_ns, 0u) << "every syscall's exit passes watch_mmap: " << cost.dump(2);
  // Every tensor allocation and free in the profile took one run of the program.
  pprof::Profile torch;
  ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch));
  EXPECT_GE(programs["torch_report"]["hits"].get<int64_t>(),
            Total(torch, "alloc_objects") * 2 - Total(torch, "inuse_objects"))
      << cost.dump(2);
  EXPECT_GT(cost["gpuflame_cpu_seconds"].get<double>(), 0) << cost.dump(2);
}

TEST(RecordTest, DeletedBinariesStillResolveThroughMapFiles) {
  GPUFLAME_REQUIRE_ROOT();
  std::string dir = TempDir("deleted");
  std::string exe = dir + "/native_alloc_deleted", go = dir + "/go";
  std::filesystem::copy_file(std::string(GPUFLAME_SIM_DIR) + "/native_alloc", exe);
  std::filesystem::permissions(exe, std::filesystem::perms::owner_all);
  pid_t pid = fork();
  if (pid == 0) {
    execl(exe.c_str(), exe.c_str(), go.c_str(), nullptr);
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::filesystem::remove(exe);  // a binary replaced or cleaned up while it runs
  const std::string log =
      RecordAttached(
          std::string(GPUFLAME_BIN) + " record --no-progress -d 2 -o " + dir + "/out -p " + std::to_string(pid), go)
          .output;
  waitpid(pid, nullptr, 0);
  pprof::Profile gpu;
  ASSERT_TRUE(LoadPprof(dir + "/out/gpu_memory.pb.gz", &gpu)) << log;
  auto a = Stacks(gpu, "alloc_space");
  ASSERT_EQ(a.size(), 1u) << Dump(a) << log;
  EXPECT_TRUE(std::string_view(a.begin()->first).ends_with(";main;load_weights.constprop.0;cudaMalloc"))
      << a.begin()->first;
}

TEST(RecordTest, StrippedBinariesAreSymbolizedLaterByBuildId) {
  GPUFLAME_REQUIRE_ROOT();
  std::string out = TempDir("stripped");
  RunResult r = Sh(std::string(GPUFLAME_BIN) + " record -q -o " + out + " -- " + GPUFLAME_SIM_DIR +
                   "/stripped/native_alloc_stripped");
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile before;
  ASSERT_TRUE(LoadPprof(out + "/gpu_memory.pb.gz", &before));
  std::string raw_stack = Stacks(before, "alloc_space").begin()->first;
  EXPECT_EQ(raw_stack.find(";main;"), std::string::npos) << "stripped: no name at capture: " << raw_stack;

  // The unstripped build, found by build ID in another directory.
  RunResult s = Sh(std::string(GPUFLAME_BIN) + " symbolize " + out + "/gpu_memory.pb.gz -o " + out +
                   "/symbolized.pb.gz --binaries " + GPUFLAME_SIM_DIR);
  ASSERT_EQ(s.status, 0) << s.output;
  EXPECT_NE(s.output.find("raw-address frames resolved"), std::string::npos) << s.output;
  pprof::Profile after;
  ASSERT_TRUE(LoadPprof(out + "/symbolized.pb.gz", &after));
  auto stacks = Stacks(after, "alloc_space");
  ASSERT_EQ(stacks.size(), 1u);
  EXPECT_NE(stacks.begin()->first.find(";main;load_weights.constprop.0;cudaMalloc"), std::string::npos)
      << stacks.begin()->first;
  EXPECT_EQ(stacks.begin()->second, 12 * MiB);
  RunResult go = Sh("go tool pprof -traces " + out + "/symbolized.pb.gz");
  EXPECT_EQ(go.status, 0) << go.output;
  EXPECT_NE(go.output.find("main"), std::string::npos) << go.output;
}

// A native frame gpuflame cannot name is `module+0xOFFSET`, the offset in the
// file: the same code is one frame in every process and restart, where by
// absolute address each process (each pod, each restart) had its own. Two
// processes run a stripped extension whose internal function has no name
// left (ext::Pool::Grow, hidden), loaded by ASLR at two addresses.
TEST(RecordTest, UnnamedNativeFramesAreOneFrameAcrossProcesses) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("frame-merge");
  const std::string lib = "ext/stripped/libext_hidden.so";
  const std::string run = PyenvPython("3.12") + " " + Workload("fresh_extension.py") + " " + lib;
  RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN + " record -q -o " + out + " -- sh -c '" + run + " > " + out +
                   "/a.txt & " + run + " > " + out + "/b.txt; wait'");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string base_a = ReadFile(out + "/a.txt"), base_b = ReadFile(out + "/b.txt");
  ASSERT_EQ(base_a.rfind("base 0x", 0), 0u) << base_a;
  ASSERT_EQ(base_b.rfind("base 0x", 0), 0u) << base_b;
  ASSERT_NE(base_a, base_b) << "ASLR is off: one address for both says nothing";

  pprof::Profile gpu;
  ASSERT_TRUE(LoadPprof(out + "/gpu_memory.pb.gz", &gpu));
  auto location = [&](uint64_t id) -> const pprof::Location& {
    for (const auto& l : gpu.location())
      if (l.id() == id) return l;
    return pprof::Location::default_instance();
  };
  auto name_of = [&](const pprof::Location& l) -> std::string {
    if (l.line_size() == 0) return "?";
    for (const auto& f : gpu.function())
      if (f.id() == l.line(0).function_id()) return gpu.string_table(f.name());
    return "?";
  };
  // Per process: the frame ext_alloc_entry called (Grow's), and every
  // nameless native frame of those stacks (libffi's too, where the
  // distribution stripped it).
  std::map<int64_t, std::set<uint64_t>> grow_locations;
  std::map<int64_t, std::set<std::string>> nameless;
  for (const auto& s : gpu.sample()) {
    int64_t pid = 0;
    for (const auto& label : s.label())
      if (gpu.string_table(label.key()) == "pid") pid = label.num();
    for (int i = 1; i < s.location_id_size(); i++) {
      if (name_of(location(s.location_id(i))) != "ext_alloc_entry") continue;
      grow_locations[pid].insert(s.location_id(i - 1));
      for (uint64_t id : s.location_id())
        if (const auto& l = location(id); l.mapping_id() != 0 && name_of(l).find("+0x") != std::string::npos)
          nameless[pid].insert(name_of(l));
    }
  }
  ASSERT_EQ(grow_locations.size(), 2u) << "both processes' calls: " << Dump(Stacks(gpu, "alloc_space"));
  const std::set<uint64_t>& grow = grow_locations.begin()->second;
  ASSERT_EQ(grow.size(), 1u);
  // One Location for both processes, hence one Function and one name.
  EXPECT_EQ(grow_locations.rbegin()->second, grow);
  EXPECT_EQ(nameless.begin()->second, nameless.rbegin()->second);
  const pprof::Location& l = location(*grow.begin());
  // Named by module and offset: the offset in the file, inside Grow as the
  // unstripped build's symbol table places it, never an absolute address.
  char expected[64];
  std::snprintf(expected, sizeof(expected), "libext_hidden.so+0x%llx", static_cast<unsigned long long>(l.address()));
  EXPECT_EQ(name_of(l), expected);
  EXPECT_TRUE(nameless.begin()->second.contains(expected));
  const std::string unstripped = std::string(GPUFLAME_SIM_DIR) + "/ext/unstripped";
  unsigned long long start = 0, size = 0;
  const RunResult nm = Sh("nm -S " + unstripped + "/libext_hidden.so | grep ' _ZN3ext4Pool4GrowEm$'");
  ASSERT_EQ(std::sscanf(nm.output.c_str(), "%llx %llx", &start, &size), 2) << nm.output;
  EXPECT_GE(l.address(), start) << name_of(l);
  EXPECT_LT(l.address(), start + size) << name_of(l);
  // Its Mapping keeps the file and build ID, so that it can be named later,
  ASSERT_NE(l.mapping_id(), 0u);
  const pprof::Mapping& m = gpu.mapping(static_cast<int>(l.mapping_id() - 1));
  ASSERT_EQ(m.id(), l.mapping_id());
  EXPECT_TRUE(gpu.string_table(m.filename()).ends_with("/" + lib)) << gpu.string_table(m.filename());
  const RunResult id =
      Sh("readelf -n " + std::string(GPUFLAME_SIM_DIR) + "/" + lib + " | sed -n 's/.*Build ID: *//p' | tr -d '\\n'");
  ASSERT_FALSE(id.output.empty());
  EXPECT_EQ(gpu.string_table(m.build_id()), id.output);
  // as it is: by build ID, from the unstripped build, in both processes.
  RunResult sym = Sh(std::string(GPUFLAME_BIN) + " symbolize " + out + "/gpu_memory.pb.gz -o " + out +
                     "/symbolized.pb.gz --binaries " + unstripped);
  ASSERT_EQ(sym.status, 0) << sym.output;
  pprof::Profile after;
  ASSERT_TRUE(LoadPprof(out + "/symbolized.pb.gz", &after));
  int64_t named = 0, raw = 0;
  for (const auto& [stack, v] : Stacks(after, "alloc_space")) {
    if (stack.ends_with(";ext_alloc_entry;ext::Pool::Grow(unsigned long);cudaMalloc")) named += v;
    if (stack.find("libext_hidden.so+0x") != std::string::npos) raw += v;
  }
  EXPECT_EQ(named, 6 * MiB) << Dump(Stacks(after, "alloc_space"));
  EXPECT_EQ(raw, 0);
}

TEST(RecordTest, UnsupportedPythonStillProfilesWithNativeFrames) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.9");
  std::string py39 = PyenvPython("3.9");
  std::string out = TempDir("py39");
  RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN + " record --no-progress -o " + out + " -- " + py39 + " " +
                   Workload("basic_model.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Python 3.9 is not supported (3.10-3.13): profiles will have native frames only"),
            std::string::npos)
      << r.output;
  pprof::Profile gpu;
  ASSERT_TRUE(LoadPprof(out + "/gpu_memory.pb.gz", &gpu));
  EXPECT_EQ(Total(gpu, "alloc_space"), 18 * MiB);
  for (const auto& [stack, v] : Stacks(gpu, "alloc_space"))
    EXPECT_EQ(stack.find("Model"), std::string::npos) << "no Python names without support: " << stack;
}

TEST(RecordTest, ClearMessagesForUserErrors) {
  GPUFLAME_REQUIRE_PYTHON("3.12");
  RunResult nopid = Sh(std::string(GPUFLAME_BIN) + " record -o /tmp/x -p 999999999");
  EXPECT_EQ(nopid.status, 2);
  if (geteuid() == 0) {
    EXPECT_NE(nopid.output.find("no such process: 999999999"), std::string::npos) << nopid.output;
  }
  RunResult usage = Sh(std::string(GPUFLAME_BIN) + " record");
  EXPECT_EQ(usage.status, 2);
  EXPECT_NE(usage.output.find("record needs -o DIR"), std::string::npos);
  if (geteuid() == 0) {
    RunResult unpriv = Sh("setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all " +
                          std::string(GPUFLAME_BIN) + " record -o /tmp/x -- true");
    EXPECT_EQ(unpriv.status, 2);
    EXPECT_NE(unpriv.output.find("gpuflame: root privileges needed"), std::string::npos) << unpriv.output;
    EXPECT_NE(unpriv.output.find("gpuflame: gpuflame"), 0u) << unpriv.output;  // the prefix once
    std::string out = TempDir("nocuda");
    RunResult nocuda =
        Sh(std::string(GPUFLAME_BIN) + " record --no-progress -o " + out + " -- " + PyenvPython("3.12") + " -c pass");
    EXPECT_EQ(nocuda.status, 0);
    EXPECT_NE(nocuda.output.find("no CUDA library was loaded"), std::string::npos) << nocuda.output;
  }
}

// A command that cannot be run: the reason (errno), a shell's 127, and no
// profiles, which would read as "it allocated nothing". A command's own 127
// is its status, with its profiles.
TEST(RecordTest, ACommandThatCannotRunSaysWhyAndWritesNothing) {
  GPUFLAME_REQUIRE_ROOT();
  const std::string dir = TempDir("cannot-run");
  RunResult missing = Sh(std::string(GPUFLAME_BIN) + " record --no-progress -o " + dir + "/new -- /nonexistent/cmd");
  EXPECT_EQ(missing.status, 127) << missing.output;
  EXPECT_NE(missing.output.find("gpuflame: could not run /nonexistent/cmd: No such file or directory\n"),
            std::string::npos)
      << missing.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/new")) << "the directory it made is gone again";

  std::ofstream(dir + "/script.sh") << "#!/bin/sh\nexit 0\n";  // not executable
  RunResult denied = Sh(std::string(GPUFLAME_BIN) + " record -q -o " + dir + " -- " + dir + "/script.sh");
  EXPECT_EQ(denied.status, 127) << denied.output;
  EXPECT_NE(denied.output.find("could not run " + dir + "/script.sh: Permission denied"), std::string::npos)
      << denied.output;
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1) << "only script.sh";

  RunResult own = Sh(std::string(GPUFLAME_BIN) + " record -q -o " + dir + "/own -- sh -c 'exit 127'");
  EXPECT_EQ(own.status, 127) << own.output;
  EXPECT_EQ(own.output.find("could not run"), std::string::npos) << own.output;
  EXPECT_TRUE(std::filesystem::exists(dir + "/own/gpu_memory.pb.gz"));
}

// SIGTERM or SIGINT sent to record (kill, systemd, Kubernetes) reaches the
// command; record ends with it, and its profiles include what the command
// did on the way out (until_signal.py allocates in its handler).
TEST(RecordTest, StopSignalsArePassedToTheCommandAndItsShutdownIsRecorded) {
  GPUFLAME_REQUIRE_ROOT();
  for (int sig : {SIGTERM, SIGINT}) {
    const std::string dir = TempDir(std::string("signal-") + sigabbrev_np(sig));
    const std::string ready = dir + "/ready", log = dir + "/log";
    const std::string cmd = SimEnv() + " exec " + GPUFLAME_BIN + " record --no-progress -o " + dir + "/out -- " +
                            PyenvPython("3.12") + " " + Workload("until_signal.py") + " " + ready + " 2>" + log;
    pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      _exit(126);
    }
    for (int i = 0; i < 3000 && !std::filesystem::exists(ready); i++)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(std::filesystem::exists(ready)) << ReadFile(log);
    kill(pid, sig);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    // The command's own status: its handler ran (not 128+sig: record passed
    // the signal on rather than dying of it; not 9: the command did get it).
    ASSERT_TRUE(WIFEXITED(status)) << ReadFile(log);
    EXPECT_EQ(WEXITSTATUS(status), 3) << ReadFile(log);
    EXPECT_NE(ReadFile(log).find(std::string("passed SIG") + sigabbrev_np(sig) + " on to "), std::string::npos)
        << ReadFile(log);
    pprof::Profile torch;
    ASSERT_TRUE(LoadPprof(dir + "/out/torch_memory.pb.gz", &torch)) << ReadFile(log);
    auto stacks = Stacks(torch, "alloc_space", true, /*drop_native=*/true);
    EXPECT_EQ(ValueEndingWith(stacks, "<module>;before_signal;empty;Tensor > __init__;" + kTorchLeaf), 8 * MiB)
        << Dump(stacks);
    EXPECT_EQ(ValueEndingWith(stacks, "<module>;on_signal;empty;Tensor > __init__;" + kTorchLeaf), 4 * MiB)
        << Dump(stacks);
  }
}

// A second record into the same directory: what the first wrote and the
// second does not (torch_memory, process_cpu) is gone, so `go tool pprof`
// sees only this run; a file of the user's stays.
TEST(RecordTest, AnEarlierRunsOutputsDoNotOutliveTheNextRun) {
  GPUFLAME_REQUIRE_ROOT();
  const std::string out = TempDir("stale");
  RunResult first = Sh(SimEnv() + " " + GPUFLAME_BIN + " record -q -o " + out + " -- " + PyenvPython("3.12") + " " +
                       Workload("until_signal.py") + " " + out + "/ready now");
  ASSERT_EQ(first.status, 0) << first.output;
  ASSERT_TRUE(std::filesystem::exists(out + "/torch_memory.pb.gz"));
  ASSERT_TRUE(std::filesystem::exists(out + "/process_cpu.pb.gz"));
  std::ofstream(out + "/notes.txt") << "mine";
  RunResult second =
      Sh(std::string(GPUFLAME_BIN) + " record -q --cpu-hz 0 -o " + out + " -- " + GPUFLAME_SIM_DIR + "/native_alloc");
  ASSERT_EQ(second.status, 0) << second.output;
  // What is there: the user's file, and exactly what the manifest lists.
  std::set<std::string> names, listed;
  for (const auto& e : std::filesystem::directory_iterator(out)) names.insert(e.path().filename().string());
  for (const auto& line : absl::StrSplit(ReadFile(out + "/.gpuflame-outputs"), '\n', absl::SkipEmpty()))
    listed.insert(std::string(line));
  EXPECT_TRUE(names.erase("notes.txt"));
  EXPECT_TRUE(names.erase(".gpuflame-outputs"));
  EXPECT_EQ(names, listed);
  EXPECT_FALSE(std::filesystem::exists(out + "/torch_memory.pb.gz"));
  EXPECT_FALSE(std::filesystem::exists(out + "/process_cpu.pb.gz"));
  for (const std::string& name : names) EXPECT_FALSE(name.starts_with("torch_memory")) << name;
  // Every profile pprof finds there is this run's: the second run's frames,
  // none of the first's.
  RunResult pprof = Sh("for f in " + out + "/*.pb.gz; do go tool pprof -raw $f; done");
  EXPECT_NE(pprof.output.find("load_weights"), std::string::npos) << pprof.output;
  EXPECT_EQ(pprof.output.find("before_signal"), std::string::npos) << pprof.output;
}

}  // namespace
}  // namespace gpuflame::e2e
