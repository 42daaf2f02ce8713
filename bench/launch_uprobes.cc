// Whether launch stacks can come from uprobes on libcuda instead of CUPTI's
// launch callbacks, whose dispatch costs a launch-bound step about 2% for
// the process's life (README, Measured, session 35). Attaches a uprobe to
// each of libcuda's exported launch entry points, in every process that
// maps the file, until SIGINT or SIGTERM; then prints the hits by entry
// point and, with --out, has written each hit's process, thread,
// CLOCK_MONOTONIC time and entry point as a line of text:
//   <pid> <tid> <ns> <symbol>
// for tests/gpu/join_launches.py to join to CUPTI's API activity records
// (tests/gpu/api_records.c). Two questions for a GPU host: do the runtime's
// launches (which reach the driver through pointers cuGetProcAddress handed
// out) pass through the exported entry points, and what does the trap cost
// a step (tests/gpu/run_launch_route.sh)? Without --out, the program only
// counts: the trap alone.
//
//   gpuflame_launch_uprobes --lib /path/to/libcuda.so.1 [--out FILE] [--ready FILE] [--symbols A,B,...]
//
// --symbols replaces the launch entry points with up to 16 others (the
// copies' and memsets', tests/gpu/run_copy_correlation.sh).
#include <bpf/libbpf.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "launch_uprobes.skel.h"

namespace {

// The driver's launch entry points, as exported; their order is the attach
// cookie and so the symbol field of each hit.
constexpr const char* kLaunchSymbols[] = {
    "cuLaunchKernel",        "cuLaunchKernel_ptsz",       "cuLaunchKernelEx",
    "cuLaunchKernelEx_ptsz", "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz",
    "cuGraphLaunch",         "cuGraphLaunch_ptsz"};
constexpr uint32_t kRingFull = 16;  // LAUNCH_SYMBOLS in the BPF program

volatile sig_atomic_t stop = 0;

struct SkelDeleter {
  void operator()(launch_uprobes* s) const { launch_uprobes__destroy(s); }
};
struct LinkDeleter {
  void operator()(bpf_link* l) const { bpf_link__destroy(l); }
};
struct RingDeleter {
  void operator()(ring_buffer* r) const { ring_buffer__free(r); }
};
struct FileCloser {
  void operator()(FILE* f) const { fclose(f); }
};

struct LaunchHit {
  uint32_t pid, tid;
  uint64_t ns;
  uint32_t symbol, pad;
};

int WriteHit(void* ctx, void* data, size_t size) {
  if (size < sizeof(LaunchHit)) return 0;
  LaunchHit h;
  memcpy(&h, data, sizeof(h));
  fprintf(static_cast<FILE*>(ctx), "%u %u %llu %u\n", h.pid, h.tid, static_cast<unsigned long long>(h.ns), h.symbol);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string lib, out_path, ready_path;
  std::vector<std::string> symbols(std::begin(kLaunchSymbols), std::end(kLaunchSymbols));
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--lib") lib = argv[i + 1];
    else if (a == "--out") out_path = argv[i + 1];
    else if (a == "--ready") ready_path = argv[i + 1];
    else if (a == "--symbols") {
      symbols.clear();
      std::string list = argv[i + 1];
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        if (comma > at) symbols.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
    }
  }
  if (lib.empty() || symbols.empty() || symbols.size() > kRingFull) {
    fprintf(stderr, "usage: %s --lib LIBCUDA [--out FILE] [--ready FILE] [--symbols A,B,... (at most %u)]\n", argv[0],
            kRingFull);
    return 2;
  }
  std::unique_ptr<FILE, FileCloser> out;
  if (!out_path.empty()) {
    out.reset(fopen(out_path.c_str(), "w"));
    if (!out) {
      fprintf(stderr, "launch_uprobes: %s: %s\n", out_path.c_str(), strerror(errno));
      return 1;
    }
  }
  std::unique_ptr<launch_uprobes, SkelDeleter> skel(launch_uprobes__open());
  if (!skel) {
    fprintf(stderr, "launch_uprobes: open: %s\n", strerror(errno));
    return 1;
  }
  skel->rodata->record = out ? 1 : 0;
  if (launch_uprobes__load(skel.get())) {
    fprintf(stderr, "launch_uprobes: load: %s\n", strerror(errno));
    return 1;
  }
  std::vector<std::unique_ptr<bpf_link, LinkDeleter>> links;
  for (size_t i = 0; i < symbols.size(); i++) {
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = i, .func_name = symbols[i].c_str());
    bpf_link* l = bpf_program__attach_uprobe_opts(skel->progs.launch_hit, -1, lib.c_str(), 0, &opts);
    if (!l) {
      fprintf(stderr, "launch_uprobes: %s not attached: %s\n", symbols[i].c_str(), strerror(errno));
      continue;
    }
    links.emplace_back(l);
  }
  if (links.empty()) return 1;
  std::unique_ptr<ring_buffer, RingDeleter> ring;
  if (out) {
    ring.reset(ring_buffer__new(bpf_map__fd(skel->maps.launches), WriteHit, out.get(), nullptr));
    if (!ring) {
      fprintf(stderr, "launch_uprobes: ring: %s\n", strerror(errno));
      return 1;
    }
  }
  signal(SIGINT, [](int) { stop = 1; });
  signal(SIGTERM, [](int) { stop = 1; });
  if (!ready_path.empty()) {
    std::unique_ptr<FILE, FileCloser> ready(fopen(ready_path.c_str(), "w"));
  }
  fprintf(stderr, "launch_uprobes: %zu entry points of %s attached%s\n", links.size(), lib.c_str(),
          out ? ", recording each hit" : ", counting");
  while (!stop) {
    if (ring) ring_buffer__poll(ring.get(), 100);
    else usleep(100000);
  }
  links.clear();  // no hit after this; the ring is drained below
  if (ring) ring_buffer__consume(ring.get());
  const int ncpu = libbpf_num_possible_cpus();
  std::vector<uint64_t> per_cpu(ncpu > 0 ? ncpu : 1);
  auto total = [&](uint32_t key) {
    uint64_t sum = 0;
    if (bpf_map__lookup_elem(skel->maps.hits, &key, sizeof(key), per_cpu.data(), per_cpu.size() * sizeof(uint64_t),
                             0) == 0)
      for (uint64_t v : per_cpu) sum += v;
    return sum;
  };
  uint64_t all = 0;
  for (uint32_t i = 0; i < symbols.size(); i++) {
    const uint64_t n = total(i);
    all += n;
    if (n) printf("launch_uprobes: %s %llu\n", symbols[i].c_str(), static_cast<unsigned long long>(n));
  }
  printf("launch_uprobes: %llu hits, %llu not recorded (ring full)\n", static_cast<unsigned long long>(all),
         static_cast<unsigned long long>(total(kRingFull)));
  return 0;
}
