// What the in-process tensor hook (inprocess/tensor_events.cc) adds to each
// caching-allocator event, on the simulated libc10_cuda.so: its allocations
// and frees call c10::reportMemoryUsageToProfiler through the GOT, as
// PyTorch's do, and the hook is patched into that slot as in a workload.
//
// Each round runs every mode in a process of its own (a fresh hook), in an
// order that alternates between rounds, over the same stream of events:
//   none     the hook not installed (no agent listens): the baseline;
//   sampled  the agent's default, allocations sampled by bytes;
//   exact    record's default, every allocation and free sent.
// Between events the stream touches --pollute-kib of a 64 MiB buffer, as
// PyTorch's own work between two allocator calls (dispatch, the launches,
// the interpreter) does: the hook's lines are then no longer in cache,
// which is what it costs on a training step. 0 gives the warm-cache floor.
//
// The stream: sizes log-uniform from 512 B to 2 MiB in 32 size classes (so
// the allocator's cache reuses blocks, and addresses repeat as a training
// loop's do), live blocks growing to ~300 and back, as a step's forward and
// backward do; at a 4 MiB interval about 6% of allocations are taken (the
// launch-bound GPT step measured on an H100: 5%). There is no Python in
// this process: a taken allocation's walk finds no frames, so its cost here
// is the record's, not the walk's.
//
// Prints, per mode, ns per event (median over rounds, min-max), the median
// of each round's difference to the baseline, the same for the time inside
// the allocator's calls alone (a cycle-counter pair around each: the
// pollution's own time and its noise left out, so tens of ns can be told
// apart at any --pollute-kib; the pair's part is the same in every mode), and the
// hook's own estimate of itself (HookCostSoFar: what /metrics and
// summary.json report), which should agree with those differences.
//
//   gpuflame_tensor_hook_benchmark [--events N] [--rounds R] [--pollute-kib K] [--interval BYTES]
#include <dlfcn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/child_rounds.h"
#include "inprocess/self_timing.h"
#include "inprocess/tensor_events.h"

extern "C" {
extern unsigned short gpuflame_tensor_batch_semaphore;
extern unsigned short gpuflame_tensor_exact_semaphore;
}

namespace {

namespace bench = gpuflame::bench;

enum class Mode { kNone, kSampled, kExact };
constexpr const char* kModeNames[] = {"none", "sampled", "exact"};

struct Options : bench::RoundOptions {
  Options() { pollute_kib = 256; }
  uint64_t events = 200'000;
  uint64_t interval = 4 << 20;
};

struct Result {
  double ns_per_event = 0;
  double call_ns_per_event = 0;  // inside the allocator's calls only
  double self_ns_per_event = 0;  // the hook's estimate of itself
  uint64_t hook_calls = 0;
};

// One allocator event of the stream: an allocation of |size|, or (size 0)
// the free of live block |victim| (an index into the live list).
struct Event {
  uint32_t size;
  uint32_t victim;
};

std::vector<Event> MakeStream(uint64_t n) {
  std::mt19937_64 rng(42);
  std::vector<uint32_t> classes;
  for (int i = 0; i < 32; i++) classes.push_back(static_cast<uint32_t>(512.0 * std::pow(4096.0, i / 31.0)) & ~511u);
  std::vector<Event> out;
  out.reserve(n);
  size_t live = 0;
  bool growing = true;
  for (uint64_t i = 0; i < n; i++) {
    if (live >= 300) growing = false;
    if (live <= 50) growing = true;
    // Mostly the phase's direction, some of the other (a step's temporaries).
    const bool alloc = live == 0 || (rng() % 100 < (growing ? 70u : 30u));
    if (alloc) {
      out.push_back({classes[rng() % classes.size()], 0});
      live++;
    } else {
      out.push_back({0, static_cast<uint32_t>(rng() % live)});
      live--;
    }
  }
  return out;
}

using EmptyFn = void* (*)(size_t, int);
using FreeFn = void (*)(void*, int);

// The child: replays the stream in |mode|, returns what it measured.
Result RunMode(Mode mode, const Options& o, const std::vector<Event>& stream) {
  void* lib = dlopen((bench::SimDir() + "/libc10_cuda.so").c_str(), RTLD_NOW);
  if (!lib) {
    std::fprintf(stderr, "%s\n", dlerror());
    _exit(2);
  }
  auto empty = reinterpret_cast<EmptyFn>(dlsym(lib, "gf_sim_empty"));
  auto free_ = reinterpret_cast<FreeFn>(dlsym(lib, "gf_sim_free"));
  if (mode != Mode::kNone) {
    // As an agent attached: the hook goes in and records (no tracer is
    // attached to the batch site, so handing a batch over costs nothing
    // here; on a real agent it is one trap per ~1,000 records).
    gpuflame_tensor_batch_semaphore = 1;
    gpuflame_tensor_exact_semaphore = mode == Mode::kExact;
    gpuflame::inprocess::StartTensorEvents(o.interval, 0, 0);
  }
  bench::Pollution pollution(o.pollute_kib);
  std::vector<void*> live;
  live.reserve(1024);
  uint64_t in_calls_ticks = 0;
  auto replay = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; i++) {
      const Event& e = stream[i];
      if (!e.size) std::swap(live[e.victim], live.back());
      const uint64_t call_start = gpuflame::inprocess::Ticks();
      if (e.size) {
        live.push_back(empty(e.size, 0));
      } else {
        free_(live.back(), 0);
        live.pop_back();
      }
      in_calls_ticks += gpuflame::inprocess::Ticks() - call_start;
      pollution.Touch();
    }
  };
  const size_t warm = std::min<size_t>(stream.size() / 10, 20'000);
  replay(0, warm);
  const auto before = gpuflame::inprocess::HookCostSoFar();
  in_calls_ticks = 0;
  const uint64_t start = bench::NowNs(), start_ticks = gpuflame::inprocess::Ticks();
  replay(warm, stream.size());
  const uint64_t ns = bench::NowNs() - start, ticks = gpuflame::inprocess::Ticks() - start_ticks;
  const auto after = gpuflame::inprocess::HookCostSoFar();
  const double events = static_cast<double>(stream.size() - warm);
  Result r;
  r.ns_per_event = static_cast<double>(ns) / events;
  r.call_ns_per_event =
      ticks ? static_cast<double>(in_calls_ticks) * static_cast<double>(ns) / static_cast<double>(ticks) / events : 0;
  r.hook_calls = after.calls - before.calls;
  r.self_ns_per_event = static_cast<double>(after.ns - before.ns) / events;
  return r;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  return bench::ParseFlags(argc, argv, o, [o](const std::string& flag, const char* value) {
    const uint64_t v = std::strtoull(value, nullptr, 10);
    if (flag == "--events" && v >= 1000) o->events = v;
    else if (flag == "--interval") o->interval = v;
    else return false;
    return true;
  });
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: %s [--events N (>= 1000)] [--rounds R] [--pollute-kib K (<= 65536)] [--interval BYTES]\n",
                 argv[0]);
    return 2;
  }
  const std::vector<Event> stream = MakeStream(o.events);
  constexpr int kModes = 3;
  std::vector<double> ns[kModes], self[kModes], delta[kModes], call_delta[kModes];
  uint64_t calls[kModes] = {};
  const bool ok = bench::RunAlternatingRounds<Result>(
      o.rounds, kModes, kModeNames, [&](int m) { return RunMode(static_cast<Mode>(m), o, stream); },
      [&](const std::vector<Result>& r) {
        for (int m = 0; m < kModes; m++) {
          ns[m].push_back(r[m].ns_per_event);
          self[m].push_back(r[m].self_ns_per_event);
          delta[m].push_back(r[m].ns_per_event - r[0].ns_per_event);
          call_delta[m].push_back(r[m].call_ns_per_event - r[0].call_ns_per_event);
          calls[m] = r[m].hook_calls;
        }
      });
  if (!ok) return 1;
  std::printf("tensor hook: %llu events a round (%d rounds), %llu KiB touched between events, interval %llu bytes\n",
              static_cast<unsigned long long>(o.events), o.rounds, static_cast<unsigned long long>(o.pollute_kib),
              static_cast<unsigned long long>(o.interval));
  std::printf("%-8s %12s %18s %14s %18s %14s %18s %12s\n", "mode", "ns/event", "(min-max)", "hook ns/event",
              "(min-max)", "in the call", "(min-max)", "self-timed");
  for (int m = 0; m < kModes; m++) {
    const bench::Spread n = bench::SpreadOf(ns[m]), d = bench::SpreadOf(delta[m]), c = bench::SpreadOf(call_delta[m]);
    std::printf("%-8s %12.1f %8.1f-%-9.1f %14.1f %8.1f-%-9.1f %14.1f %8.1f-%-9.1f %12.1f\n", kModeNames[m], n.median,
                n.lo, n.hi, d.median, d.lo, d.hi, c.median, c.lo, c.hi, bench::Median(self[m]));
  }
  std::printf("hook calls in the last round: sampled %llu, exact %llu\n", static_cast<unsigned long long>(calls[1]),
              static_cast<unsigned long long>(calls[2]));
  return 0;
}
