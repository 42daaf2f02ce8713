// libgpuflame_cupti.so as the CUDA driver loads it, on the simulated driver,
// runtime and CUPTI (test fixture: no GPU, no BPF): the probes' semaphores
// are raised here by hand, as the kernel raises them when an agent attaches,
// so the library's flusher runs its duty cycles and switches CUPTI's launch
// callbacks while threads launch. The library starts once per process, at
// cuInit, from its environment: each case runs in a child process of its
// own (this binary again, one InjectionChild test selected), and the parent
// checks how it ended.
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <link.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/support/usdt_semaphore.h"

namespace {

constexpr const char* kChildEnv = "GF_INJECTION_TEST_CHILD";
constexpr const char* kChildLibEnv = "GF_INJECTION_TEST_LIB";

// The library the child loads: a private copy of GPUFLAME_CUPTI_LIB. A
// USDT probe attached by path raises its semaphore in every process that
// maps that file, so a `gpuflame record` of another test running beside
// this one would otherwise switch this child's callbacks on before the
// test does (seen: the switch it waits for came and went inside cuInit).
const char* ChildLib() {
  const char* lib = std::getenv(kChildLibEnv);
  return lib ? lib : GPUFLAME_CUPTI_LIB;
}

struct Dim3 {
  unsigned x, y, z;
};

// The simulated runtime's entry points, and the simulated CUPTI's counters.
struct Sim {
  int (*cu_init)(unsigned) = nullptr;
  int (*launch)(const void*, Dim3, Dim3, void**, size_t, void*) = nullptr;
  int (*enabling)() = nullptr;
  size_t (*delivered)() = nullptr;
  size_t (*switched_off)() = nullptr;
  size_t (*finalized)() = nullptr;
  size_t (*delivered_since_detach)() = nullptr;
  size_t (*calls_while_detached)() = nullptr;
  size_t (*finalized_outside_exit)() = nullptr;
};

Sim LoadSim() {
  Sim sim;
  if (!dlopen(GPUFLAME_SIM_DIR "/libcudart.so.13", RTLD_NOW | RTLD_GLOBAL)) return sim;
  sim.cu_init = reinterpret_cast<decltype(sim.cu_init)>(dlsym(RTLD_DEFAULT, "cuInit"));
  sim.launch = reinterpret_cast<decltype(sim.launch)>(dlsym(RTLD_DEFAULT, "cudaLaunchKernel"));
  sim.enabling = reinterpret_cast<decltype(sim.enabling)>(dlsym(RTLD_DEFAULT, "gf_sim_cupti_enabling"));
  sim.delivered = reinterpret_cast<decltype(sim.delivered)>(dlsym(RTLD_DEFAULT, "gf_sim_cupti_delivered"));
  sim.switched_off = reinterpret_cast<decltype(sim.switched_off)>(dlsym(RTLD_DEFAULT, "gf_sim_cupti_switched_off"));
  sim.finalized = reinterpret_cast<decltype(sim.finalized)>(dlsym(RTLD_DEFAULT, "gf_sim_cupti_finalized"));
  sim.delivered_since_detach = reinterpret_cast<decltype(sim.delivered_since_detach)>(
      dlsym(RTLD_DEFAULT, "gf_sim_cupti_delivered_since_detach"));
  sim.calls_while_detached =
      reinterpret_cast<decltype(sim.calls_while_detached)>(dlsym(RTLD_DEFAULT, "gf_sim_cupti_calls_while_detached"));
  sim.finalized_outside_exit = reinterpret_cast<decltype(sim.finalized_outside_exit)>(
      dlsym(RTLD_DEFAULT, "gf_sim_cupti_finalized_outside_exit"));
  return sim;
}

bool RaiseSemaphore(const char* name) { return gpuflame::testing::RaiseSemaphore(ChildLib(), name); }
bool LowerSemaphore(const char* name) { return gpuflame::testing::LowerSemaphore(ChildLib(), name); }

void Launch(const Sim& sim) { sim.launch("k", Dim3{0, 1, 1}, Dim3{1, 1, 1}, nullptr, 0, nullptr); }

// Launches, a millisecond apart, until |done| or |within| has passed;
// whether |done|.
template <typename Done>
bool LaunchUntil(const Sim& sim, Done done, std::chrono::milliseconds within = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    Launch(sim);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// cuInit on the simulated driver loads the library (CUDA_INJECTION64_PATH),
// then an agent "attaches": callbacks and activity follow the duty cycles.
Sim StartTraced() {
  Sim sim = LoadSim();
  if (!sim.cu_init || !sim.launch || !sim.enabling || !sim.delivered || !sim.switched_off || !sim.finalized ||
      !sim.delivered_since_detach || !sim.calls_while_detached || !sim.finalized_outside_exit) {
    ADD_FAILURE() << "the simulated CUDA runtime or CUPTI is missing in " GPUFLAME_SIM_DIR;
    return sim;
  }
  EXPECT_EQ(sim.cu_init(0), 0);
  EXPECT_TRUE(RaiseSemaphore("gpuflame_launch_semaphore")) << GPUFLAME_CUPTI_LIB " has no .symtab?";
  return sim;
}

// Runs this binary's InjectionChild.|name| with |env| added; the child's
// wait status, and its output.
std::pair<int, std::string> RunChild(const std::string& name, const std::vector<std::string>& env) {
  char out_path[] = "/tmp/injection_test_XXXXXX";
  const int out = mkstemp(out_path);
  if (out < 0) return {-1, "mkstemp failed"};
  char lib_dir[] = "/tmp/injection_test_lib_XXXXXX";
  if (!mkdtemp(lib_dir)) return {-1, "mkdtemp failed"};
  const std::string lib_path = std::string(lib_dir) + "/libgpuflame_cupti.so";
  std::error_code copy_error;
  if (!std::filesystem::copy_file(GPUFLAME_CUPTI_LIB, lib_path, copy_error))
    return {-1, "copying the library: " + copy_error.message()};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
    setenv(kChildEnv, "1", 1);
    setenv("CUDA_INJECTION64_PATH", lib_path.c_str(), 1);
    setenv(kChildLibEnv, lib_path.c_str(), 1);
    for (const std::string& kv : env) putenv(strdup(kv.c_str()));
    const std::string filter = "--gtest_filter=InjectionChild." + name;
    execl("/proc/self/exe", "injection_test_child", filter.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = -1;
  waitpid(pid, &status, 0);
  std::ifstream f(out_path);
  std::stringstream text;
  text << f.rdbuf();
  unlink(out_path);
  std::filesystem::remove_all(lib_dir);
  return {status, text.str()};
}

#define CHILD_ONLY() \
  if (!std::getenv(kChildEnv)) GTEST_SKIP() << "runs in a child process of InjectionTest"

// ---- in the child ----

// Threads launching all the while, as a training loop's do, while the
// launch duty cycle opens and closes its window every tick or two: the
// callbacks go on once and are never switched off (that crashes the real
// CUPTI).
TEST(InjectionChild, ManyThreadsLaunch) {
  CHILD_ONLY();
  Sim sim = StartTraced();
  ASSERT_TRUE(sim.launch);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; t++)
    threads.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) Launch(sim);
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_GT(sim.delivered(), 0u) << "the launch callbacks never went on";
  EXPECT_EQ(sim.switched_off(), 0u) << "launch callbacks were switched off while threads launched";
}

// Kernels launched for a while, with |thrift| levels asked of the library
// as an agent over its budget asks (its thrift sites' shared semaphore).
void LaunchUnderThrift(int thrift) {
  Sim sim = StartTraced();
  ASSERT_TRUE(sim.launch);
  for (int i = 0; i < thrift; i++) ASSERT_TRUE(RaiseSemaphore("gpuflame_thrift_semaphore"));
  // Long enough for a whole period at one tick in 16 (1.6 s) after the
  // levels are noticed, which a loaded machine may take ticks to do, one
  // level at a time (CI: level 2's period at one in 8 first, then no window
  // left in 2.5 s).
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(4500);
  while (std::chrono::steady_clock::now() < end) {
    Launch(sim);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// The callbacks CUPTI delivers to us per runtime launch, over |n| launches.
double CallbacksPerLaunch(const Sim& sim, int n) {
  const size_t before = sim.delivered();
  for (int i = 0; i < n; i++) Launch(sim);
  return static_cast<double>(sim.delivered() - before) / n;
}

// Launch stacks come from the driver's launch call, which a runtime launch
// makes with the runtime call's correlation ID: two callbacks a runtime
// launch (the driver's entry and exit), the runtime's own only once an agent
// asks for API spans, named after the runtime's calls.
TEST(InjectionChild, CallbacksPerRuntimeLaunch) {
  CHILD_ONLY();
  Sim sim = StartTraced();
  ASSERT_TRUE(sim.launch);
  for (int i = 0; i < 100 && sim.delivered() == 0; i++) {  // enabled at the flusher's first tick
    Launch(sim);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(sim.delivered(), 0u) << "the launch callbacks never went on";
  EXPECT_EQ(CallbacksPerLaunch(sim, 1000), 2.0);
  ASSERT_TRUE(RaiseSemaphore("gpuflame_api_batch_semaphore"));
  // The runtime's go on at the flusher's next tick (a loaded machine may
  // delay it): then every launch costs four.
  for (int i = 0; i < 100 && CallbacksPerLaunch(sim, 10) != 4.0; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(CallbacksPerLaunch(sim, 1000), 4.0);
  EXPECT_EQ(sim.switched_off(), 0u);
}

TEST(InjectionChild, LaunchUnthrifty) {
  CHILD_ONLY();
  LaunchUnderThrift(0);
}

TEST(InjectionChild, LaunchAtThriftThree) {
  CHILD_ONLY();
  LaunchUnderThrift(3);
}

// exit() while the flusher is inside a switch of the callbacks: CUPTI is
// torn down by the exit, so no call into it may follow the library's exit
// handler.
TEST(InjectionChild, ExitWhileSwitching) {
  CHILD_ONLY();
  Sim sim = StartTraced();
  ASSERT_TRUE(sim.launch);
  Launch(sim);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (sim.enabling() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  ASSERT_GT(sim.enabling(), 0) << "the flusher never switched the callbacks";
  std::exit(0);
}

// backward() calls from several threads (the engine thread allocating and
// launching for them) while other threads allocate and launch, with the
// tensor hook and the Engine::execute hook live: the table of running
// backward calls is read by every launch callback and tensor event while
// it changes.
TEST(InjectionChild, BackwardsWhileLaunching) {
  CHILD_ONLY();
  ASSERT_TRUE(dlopen(GPUFLAME_SIM_DIR "/libtorch_python.so", RTLD_NOW | RTLD_GLOBAL)) << dlerror();
  auto backward = reinterpret_cast<int (*)(size_t, int, unsigned, int, int)>(dlsym(RTLD_DEFAULT, "gf_sim_backward"));
  auto empty = reinterpret_cast<void* (*)(size_t, int)>(dlsym(RTLD_DEFAULT, "gf_sim_empty"));
  auto free_tensor = reinterpret_cast<void (*)(void*, int)>(dlsym(RTLD_DEFAULT, "gf_sim_free"));
  ASSERT_TRUE(backward && empty && free_tensor);
  Sim sim = StartTraced();
  ASSERT_TRUE(sim.launch);
  ASSERT_TRUE(RaiseSemaphore("gpuflame_tensor_batch_semaphore"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the flusher's ticks put the hooks in
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; t++)
    threads.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) EXPECT_EQ(backward(4096, 4, 0, 0, 0), 0);
    });
  for (int t = 0; t < 4; t++)
    threads.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        void* p = empty(1 << 20, 0);
        Launch(sim);
        free_tensor(p, 0);
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_GT(sim.delivered(), 0u);
}

// A child forked from a traced process, exiting: it has the library's
// state but not its flusher thread, which must be neither waited for nor
// joined (a join waits on a thread of the parent's, for ever).
TEST(InjectionChild, ForkedChildExits) {
  CHILD_ONLY();
  Sim sim = StartTraced();
  ASSERT_TRUE(sim.launch);
  Launch(sim);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));  // the flusher's ticks: activity on
  const auto start = std::chrono::steady_clock::now();
  // Its exit takes milliseconds; a join of the parent's flusher took 2 s
  // (or aborted it): the bound leaves room for a loaded machine.
  const pid_t pid = fork();
  if (pid == 0) std::exit(0);
  int status = -1;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_LT(took, std::chrono::milliseconds(1500)) << "the forked child's exit waited for a flusher it does not have";
}

// An agent attaches, leaves, comes back and leaves again while the
// workload launches: each time it has been gone GPUFLAME_CUPTI_DETACH_S
// CUPTI is detached (the callbacks' dispatch goes with it) at a launch's
// exit, and the agent's return subscribes again, callbacks and all.
TEST(InjectionChild, DetachesWhenTheAgentLeaves) {
  CHILD_ONLY();
  Sim sim = StartTraced();
  ASSERT_TRUE(sim.launch);
  if (std::getenv("GF_INJECTION_TEST_STATUS")) {
    ASSERT_TRUE(RaiseSemaphore("gpuflame_status_semaphore"));
  }
  for (int visit = 1; visit <= 2; visit++) {
    SCOPED_TRACE("visit " + std::to_string(visit));
    ASSERT_TRUE(LaunchUntil(sim, [&] { return sim.delivered_since_detach() > 0; }))
        << "the launch callbacks never went on";
    ASSERT_TRUE(LowerSemaphore("gpuflame_launch_semaphore"));
    ASSERT_TRUE(LaunchUntil(sim, [&] { return sim.finalized() == static_cast<size_t>(visit); }))
        << "CUPTI was not detached after the agent left";
    for (int i = 0; i < 200; i++) Launch(sim);
    EXPECT_EQ(sim.delivered_since_detach(), 0u) << "callbacks after the detach";
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the flusher's ticks, detached
    EXPECT_EQ(sim.calls_while_detached(), 0u) << "a call into CUPTI while it was detached or detaching";
    EXPECT_EQ(sim.finalized_outside_exit(), 0u) << "cuptiFinalize outside an API call's exit callback";
    ASSERT_TRUE(RaiseSemaphore("gpuflame_launch_semaphore"));
  }
  ASSERT_TRUE(LaunchUntil(sim, [&] { return sim.delivered_since_detach() > 0; }))
      << "the third agent never got the callbacks back";
  EXPECT_EQ(sim.switched_off(), 0u) << "launch callbacks were switched off while threads launched";
}

// An agent leaves while the workload makes no call: the detach is asked but
// no callback takes it, and the next agent calls it off. CUPTI never
// detaches, and the callbacks go on as before.
TEST(InjectionChild, TheNextAgentCallsOffAnAskedDetach) {
  CHILD_ONLY();
  Sim sim = StartTraced();
  ASSERT_TRUE(sim.launch);
  ASSERT_TRUE(LaunchUntil(sim, [&] { return sim.delivered() > 0; })) << "the launch callbacks never went on";
  ASSERT_TRUE(LowerSemaphore("gpuflame_launch_semaphore"));
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // gone 0.3 s, then asked: no call takes it
  ASSERT_TRUE(RaiseSemaphore("gpuflame_launch_semaphore"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the flusher's ticks: called off
  EXPECT_EQ(CallbacksPerLaunch(sim, 100), 2.0) << "the driver's entry and exit, each launch";
  EXPECT_EQ(sim.finalized(), 0u) << "a detach asked and called off was carried out";
}

// GPUFLAME_CUPTI_DETACH_S=0: CUPTI stays, its callbacks on, after the agent.
TEST(InjectionChild, StaysAttachedWhenTold) {
  CHILD_ONLY();
  Sim sim = StartTraced();
  ASSERT_TRUE(sim.launch);
  ASSERT_TRUE(LaunchUntil(sim, [&] { return sim.delivered() > 0; })) << "the launch callbacks never went on";
  ASSERT_TRUE(LowerSemaphore("gpuflame_launch_semaphore"));
  EXPECT_FALSE(LaunchUntil(
      sim, [&] { return sim.finalized() > 0; }, std::chrono::milliseconds(1000)));
  EXPECT_EQ(CallbacksPerLaunch(sim, 100), 2.0) << "the driver's entry and exit, each launch";
}

// ---- in the parent ----

const std::vector<std::string> kCallbacksOnly = {
    // The mode the H200 crash was seen in: launch callbacks only, no
    // start-up rule; the launch cycle at one tick in 2 switches every tick.
    "GPUFLAME_ACTIVITY=0", "GPUFLAME_STARTUP_S=0", "GPUFLAME_LAUNCH_ONE_IN=2"};

// Runs InjectionChild.|name| with |env| and expects it to exit cleanly,
// having passed.
void ExpectChildPasses(const std::string& name, const std::vector<std::string>& env) {
  auto [status, output] = RunChild(name, env);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << "\n" << output;
  EXPECT_EQ(WEXITSTATUS(status), 0) << output;
  EXPECT_NE(output.find("[  PASSED  ] 1 test"), std::string::npos) << output;
}

TEST(InjectionTest, ManyThreadsLaunchWhileTheLaunchWindowOpensAndCloses) {
  ExpectChildPasses("ManyThreadsLaunch", kCallbacksOnly);
}

TEST(InjectionTest, BackwardCallsFromSeveralThreadsWhileLaunchesAreSampled) {
  std::vector<std::string> env = kCallbacksOnly;
  // The simulated engine thread stays blocked, detached, through exit, and
  // LeakSanitizer's thread suspension at exit crashed on it (ASan builds).
  env.push_back("ASAN_OPTIONS=detect_leaks=0");
  ExpectChildPasses("BackwardsWhileLaunching", env);
}

TEST(InjectionTest, ARuntimeLaunchCostsTwoCallbacksUnlessApiSpansAreAsked) {
  ExpectChildPasses("CallbacksPerRuntimeLaunch", kCallbacksOnly);
}

// An agent over its overhead budget asks for thrift: CUPTI activity comes on
// half as often per level, its records weighted to match (the windows' weight
// is what the agent scales by), here one tick in 2 becoming one in 16.
TEST(InjectionTest, ThriftThinsActivityAndWeighsItsRecordsToMatch) {
  const std::vector<std::string> env = {"GPUFLAME_CUPTI_DEBUG=1", "GPUFLAME_STARTUP_S=0", "GPUFLAME_ACTIVITY_ON_S=0.1",
                                        "GPUFLAME_ACTIVITY_ONE_IN=2"};
  auto [status, plain] = RunChild("LaunchUnthrifty", env);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << plain;
  EXPECT_NE(plain.find("activity on, records weighted x2\n"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("thrift level"), std::string::npos) << plain;
  auto [thrift_status, thrifty] = RunChild("LaunchAtThriftThree", env);
  ASSERT_TRUE(WIFEXITED(thrift_status) && WEXITSTATUS(thrift_status) == 0) << thrifty;
  const size_t at = thrifty.find("thrift level 3: activity one tick in 16 from the next period\n");
  ASSERT_NE(at, std::string::npos) << thrifty;
  // From the next period on (one tick later, at one tick in 2) every window
  // is weighted 16.
  const size_t x2 = thrifty.find("records weighted x2\n", at);
  if (x2 != std::string::npos) {
    EXPECT_EQ(thrifty.find("records weighted x2\n", x2 + 1), std::string::npos) << thrifty;
  }
  EXPECT_NE(thrifty.find("activity on, records weighted x16\n", at), std::string::npos)
      << "a whole period at one in 16 and no window: " << thrifty;
}

TEST(InjectionTest, NoCuptiCallAfterTheLibrarysExitHandler) {
  std::vector<std::string> env = kCallbacksOnly;
  // Each switch takes 24 x 3 ms, most of a tick; CUPTI's teardown at exit
  // takes 300 ms: a flusher left running through exit calls into it.
  env.push_back("GF_SIM_CUPTI_ENABLE_US=3000");
  env.push_back("GF_SIM_CUPTI_TEARDOWN_MS=300");
  auto [status, output] = RunChild("ExitWhileSwitching", env);
  EXPECT_EQ(output.find("after CUPTI's teardown"), std::string::npos) << output;
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << "\n" << output;
  EXPECT_EQ(WEXITSTATUS(status), 0) << output;
}

TEST(InjectionTest, AForkedChildExitsWithoutWaitingForTheParentsFlusher) {
  // Activity always on: the exit's final flush is due.
  ExpectChildPasses("ForkedChildExits", {"GPUFLAME_STARTUP_S=0", "GPUFLAME_ACTIVITY_ONE_IN=1"});
}

TEST(InjectionTest, CuptiDetachesAfterTheAgentLeavesAndComesBackWithTheNext) {
  std::vector<std::string> env = kCallbacksOnly;
  env.push_back("GPUFLAME_CUPTI_DETACH_S=0.3");
  ExpectChildPasses("DetachesWhenTheAgentLeaves", env);
}

// The same with activity on all the time an agent listens and the status
// probe attached (the clock pairs each flush), the detach taking 50 ms: no
// call of the flusher's reaches CUPTI while it detaches or is detached.
TEST(InjectionTest, CuptiDetachesWithActivityAndStatusOnAndNoCallReachesItMeanwhile) {
  ExpectChildPasses(
      "DetachesWhenTheAgentLeaves",
      {"GPUFLAME_STARTUP_S=0", "GPUFLAME_ACTIVITY_ONE_IN=1", "GPUFLAME_LAUNCH_ONE_IN=1", "GPUFLAME_FLUSH_MS=100",
       "GPUFLAME_CUPTI_DETACH_S=0.3", "GF_SIM_CUPTI_FINALIZE_US=50000", "GF_INJECTION_TEST_STATUS=1"});
}

TEST(InjectionTest, AnAgentComingBackBeforeAnyCallCallsOffTheAskedDetach) {
  std::vector<std::string> env = kCallbacksOnly;
  env.push_back("GPUFLAME_CUPTI_DETACH_S=0.3");
  env.push_back("GPUFLAME_CUPTI_DEBUG=1");
  auto [status, output] = RunChild("TheNextAgentCallsOffAnAskedDetach", env);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_NE(output.find("[  PASSED  ] 1 test"), std::string::npos) << output;
  // It was asked (else the test shows nothing).
  EXPECT_NE(output.find("CUPTI detaches at the next call's exit"), std::string::npos) << output;
}

TEST(InjectionTest, CuptiStaysAttachedWithDetachOff) {
  std::vector<std::string> env = kCallbacksOnly;
  env.push_back("GPUFLAME_CUPTI_DETACH_S=0");
  ExpectChildPasses("StaysAttachedWhenTold", env);
}

}  // namespace
