// What the injection library's CUPTI callbacks (cupti/kernel_time_cupti.cc)
// add to a kernel launch. The library is loaded by cuInit as the driver
// loads it (CUDA_INJECTION64_PATH), on the simulated driver, runtime and
// CUPTI; an agent "listens" through its probes' semaphores, raised by hand
// (tests/support/usdt_semaphore.h: no BPF, so the probe sites cost nothing
// past their semaphore test). A launch here is its callbacks alone, as
// CUPTI raises them for a runtime cudaLaunchKernel with the driver's
// cuLaunchKernel inside it (entry, entry, exit, exit; one correlation ID,
// as the real driver's), through the simulated CUPTI's dispatch (a table
// lookup, and a call where enabled: the library enables the driver's
// launches, and the runtime's only for API spans): the simulated launch
// itself costs about a microsecond on a VM, whose noise would drown the
// callbacks. The difference to `none` is our callbacks' part of a launch.
//
// Modes, each in a process of its own, in an order that alternates between
// rounds (bench/child_rounds.h):
//   none    the library not loaded;
//   closed  an agent listens and a launch is asked for nothing: no launch
//           window, no activity, no API spans (nine ticks in ten at the
//           agent's defaults);
//   window  a launch window every tick: every callback does its whole
//           work, the launch sampler taking about 1,000 stacks a second.
// Between launches the loop touches --pollute-kib of a 64 MiB buffer, as
// PyTorch's dispatch between two launches does: 0 gives the warm-cache floor.
//
//   gpuflame_launch_callback_benchmark [--launches N] [--rounds R] [--pollute-kib K] [--library PATH]
#include <dlfcn.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench/child_rounds.h"
#include "tests/support/usdt_semaphore.h"

namespace {

namespace bench = gpuflame::bench;

enum class Mode { kNone, kClosed, kWindow };
constexpr const char* kModeNames[] = {"none", "closed", "window"};
constexpr int kModes = 3;

struct Options : bench::RoundOptions {
  uint64_t launches = 200'000;
  std::string library = GPUFLAME_CUPTI_LIB;  // another build's, to compare two
};

struct Result {
  double ns_per_launch = 0;
  uint64_t callbacks = 0;  // the simulated CUPTI's count of callbacks delivered
};

struct Dim3 {
  unsigned x, y, z;
};
using LaunchFn = int (*)(const void*, Dim3, Dim3, void**, size_t, void*);
using RaiseFn = void (*)(int runtime, uint32_t cbid, int exit, uint32_t correlation, const char* name,
                         const char* symbol);

// CUPTI's callback IDs (cupti_runtime_cbid.h, cupti_driver_cbid.h), which
// this file needs no CUPTI header for.
constexpr uint32_t kCudaLaunchKernel = 211;  // CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000
constexpr uint32_t kCuLaunchKernel = 307;    // CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "launch_callback_benchmark: %s\n", what);
  _exit(2);
}

// The child: sets its mode's environment before cuInit loads the library.
Result RunMode(Mode mode, const Options& o) {
  if (mode != Mode::kNone) {
    setenv("CUDA_INJECTION64_PATH", o.library.c_str(), 1);
    // The start-up rule's window enables the callbacks (for good, as in any
    // process an agent saw start); the loop runs after it.
    setenv("GPUFLAME_STARTUP_S", "0.2", 1);
    setenv("GPUFLAME_ACTIVITY", "0", 1);  // no CUPTI activity: the simulation's records are not ours to time
    // The launch duty cycle: every tick, or (practically) never.
    setenv("GPUFLAME_LAUNCH_ONE_IN", mode == Mode::kWindow ? "1" : "1000000", 1);
  }
  if (!dlopen((bench::SimDir() + "/libcudart.so.13").c_str(), RTLD_NOW | RTLD_GLOBAL)) Fail(dlerror());
  auto cu_init = reinterpret_cast<int (*)(unsigned)>(dlsym(RTLD_DEFAULT, "cuInit"));
  auto launch = reinterpret_cast<LaunchFn>(dlsym(RTLD_DEFAULT, "cudaLaunchKernel"));
  auto delivered = reinterpret_cast<size_t (*)()>(dlsym(RTLD_DEFAULT, "gf_sim_cupti_delivered"));
  auto raise = reinterpret_cast<RaiseFn>(dlsym(RTLD_DEFAULT, "gf_sim_cupti_launch"));
  if (!cu_init || !launch || !delivered || !raise)
    Fail("the simulated runtime lacks cuInit, cudaLaunchKernel or the simulated CUPTI's hooks");
  if (cu_init(0) != 0) Fail("cuInit failed");
  if (mode != Mode::kNone) {
    if (!gpuflame::testing::RaiseSemaphore(o.library, "gpuflame_launch_semaphore") ||
        !gpuflame::testing::RaiseSemaphore(o.library, "gpuflame_kernel_batch_semaphore"))
      Fail("the library's semaphores were not found (a stripped library?)");
    // The flusher enables the callbacks at its next 100 ms tick.
    launch("k", Dim3{0, 1, 1}, Dim3{1, 1, 1}, nullptr, 0, nullptr);
    for (int i = 0; i < 100 && delivered() == 0; i++) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      launch("k", Dim3{0, 1, 1}, Dim3{1, 1, 1}, nullptr, 0, nullptr);
    }
    if (delivered() == 0) Fail("the library never enabled its callbacks");
    std::this_thread::sleep_for(std::chrono::milliseconds(400));  // past the start-up rule, and a tick
  }
  bench::Pollution pollution(o.pollute_kib);
  uint32_t correlation = 1'000'000;
  auto run = [&](uint64_t n) {
    for (uint64_t i = 0; i < n; i++, correlation++) {
      raise(1, kCudaLaunchKernel, 0, correlation, "cudaLaunchKernel", "k");
      raise(0, kCuLaunchKernel, 0, correlation, "cuLaunchKernel", "k");
      raise(0, kCuLaunchKernel, 1, correlation, "cuLaunchKernel", "k");
      raise(1, kCudaLaunchKernel, 1, correlation, "cudaLaunchKernel", "k");
      pollution.Touch();
    }
  };
  run(o.launches / 10);  // warm-up
  const size_t before = delivered();
  const uint64_t start = bench::NowNs();
  run(o.launches);
  const uint64_t ns = bench::NowNs() - start;
  return {static_cast<double>(ns) / static_cast<double>(o.launches), delivered() - before};
}

bool ParseArgs(int argc, char** argv, Options* o) {
  return bench::ParseFlags(argc, argv, o, [o](const std::string& flag, const char* value) {
    const uint64_t v = std::strtoull(value, nullptr, 10);
    if (flag == "--launches" && v >= 1000) o->launches = v;
    else if (flag == "--library") o->library = value;
    else return false;
    return true;
  });
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: %s [--launches N (>= 1000)] [--rounds R] [--pollute-kib K (<= 65536)] [--library PATH]\n",
                 argv[0]);
    return 2;
  }
  std::vector<double> ns[kModes], delta[kModes];
  uint64_t callbacks[kModes] = {};
  const bool ok = bench::RunAlternatingRounds<Result>(
      o.rounds, kModes, kModeNames, [&](int m) { return RunMode(static_cast<Mode>(m), o); },
      [&](const std::vector<Result>& r) {
        for (int m = 0; m < kModes; m++) {
          ns[m].push_back(r[m].ns_per_launch);
          delta[m].push_back(r[m].ns_per_launch - r[0].ns_per_launch);
          callbacks[m] = r[m].callbacks;
        }
      });
  if (!ok) return 1;
  std::printf("launch callbacks: %llu launches a round (%d rounds), %llu KiB touched between launches, %s\n",
              static_cast<unsigned long long>(o.launches), o.rounds, static_cast<unsigned long long>(o.pollute_kib),
              o.library.c_str());
  std::printf("%-8s %12s %18s %16s %18s %12s\n", "mode", "ns/launch", "(min-max)", "added ns/launch", "(min-max)",
              "callbacks");
  for (int m = 0; m < kModes; m++) {
    const bench::Spread n = bench::SpreadOf(ns[m]), d = bench::SpreadOf(delta[m]);
    std::printf("%-8s %12.1f %8.1f-%-9.1f %16.1f %8.1f-%-9.1f %12llu\n", kModeNames[m], n.median, n.lo, n.hi, d.median,
                d.lo, d.hi, static_cast<unsigned long long>(callbacks[m]));
  }
  return 0;
}
