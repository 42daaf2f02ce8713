// Overhead of gpuflame on the profiled process, measured the way the GPU
// host's reference numbers were: one workload process, observers switched
// on and off between rounds, rounds interleaved (mode order rotates), medians
// of per-round timings. Modes:
//   none      no probe at all
//   noop      a counting BPF program on the same USDT points (the kernel trap)
//   gpuflame  the full agent: stack walk in BPF, ring buffer, event loop
// Reports ns added per allocator event and gpuflame's cost relative to noop.
#include <bpf/libbpf.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/scoped_fd.h"
#include "noop_probe.skel.h"
#include "profiler/probes/bpf_probes.h"
#include "profiler/pipeline/event_processor.h"
#include "profiler/process/process_registry.h"
#include "profiler/resolve/stack_resolver.h"
#include "inspect/proc_maps.h"

namespace {

using namespace gpuflame;

struct Workload {
  pid_t pid = -1;
  FILE* in = nullptr;
  FILE* out = nullptr;
  std::string backend;
};

Workload Start(const std::string& python, const std::string& script, int cpu) {
  // Close-on-exec: the workload keeps only the copies dup2() makes on 0 and 1.
  std::optional<base::Pipe> to_child = base::Pipe::Open();
  std::optional<base::Pipe> from_child = base::Pipe::Open();
  if (!to_child || !from_child) return {};
  pid_t pid = fork();
  if (pid == 0) {
    if (cpu >= 0) {
      // The workload alone on one CPU, as the reference measurement was;
      // the agent's event loop runs elsewhere.
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      sched_setaffinity(0, sizeof(set), &set);
    }
    dup2(to_child->read_end.get(), 0);
    dup2(from_child->write_end.get(), 1);
    execlp(python.c_str(), python.c_str(), script.c_str(), nullptr);
    _exit(127);
  }
  // Our ends go to stdio streams, which own them from here; the child's
  // ends close when their owners leave scope.
  Workload w{pid, fdopen(to_child->write_end.release(), "w"), fdopen(from_child->read_end.release(), "r"), ""};
  char line[256];
  if (!fgets(line, sizeof(line), w.out)) return {};
  char backend[64] = {};
  int child = 0;
  if (sscanf(line, "ready %d %63s", &child, backend) != 2) return {};
  w.backend = backend;
  return w;
}

int64_t RunRound(Workload& w, long iters) {
  fprintf(w.in, "run %ld\n", iters);
  fflush(w.in);
  char line[64];
  if (!fgets(line, sizeof(line), w.out)) return -1;
  return atoll(line);
}

std::string FindLibrary(pid_t pid, const char* base) {
  auto maps = inspect::ReadProcMaps(pid);
  if (!maps.ok()) return "";
  for (const auto& m : *maps)
    if (m.Basename() == base) return inspect::OpenablePath(pid, m);
  return "";
}

// The counting probe on pytorch:malloc and pytorch:free.
class NoopObserver {
 public:
  bool Start(const std::string& lib) {
    skel_ = noop_probe__open_and_load();
    if (!skel_) return false;
    for (const char* name : {"malloc", "free"}) {
      bpf_link* l = bpf_program__attach_usdt(skel_->progs.noop_hit, -1, lib.c_str(), "pytorch", name, nullptr);
      if (!l) return false;
      links_.push_back(l);
    }
    return true;
  }
  ~NoopObserver() {
    for (auto* l : links_) bpf_link__destroy(l);
    if (skel_) noop_probe__destroy(skel_);
  }

 private:
  noop_probe* skel_ = nullptr;
  std::vector<bpf_link*> links_;
};

// The real agent, in process: probes, registry, the ring-buffer reader
// thread and the event loop on a worker thread, as in a Session.
class AgentObserver {
 public:
  bool Start(pid_t pid) {
    profiler::BpfProbes::Options opt;
    opt.filter_targets = true;
    auto probes = profiler::BpfProbes::Load(opt);
    if (!probes.ok()) {
      fprintf(stderr, "gpuflame: %s\n", std::string(probes.status().message()).c_str());
      return false;
    }
    probes_ = std::move(*probes);
    auto reader = probes_->StartRingReader({});
    if (!reader.ok()) {
      fprintf(stderr, "gpuflame: %s\n", std::string(reader.status().message()).c_str());
      return false;
    }
    reader_ = std::move(*reader);
    registry_ = std::make_unique<profiler::ProcessRegistry>(*probes_, elves_, profiler::ProcessRegistry::Options{});
    resolver_ = std::make_unique<profiler::StackResolver>(registry_.get(), native_, profiler::StackResolver::Options{});
    events_ = std::make_unique<profiler::EventProcessor>(registry_.get(), *resolver_);
    if (!registry_->AddTarget(pid).ok()) return false;
    poller_ = std::thread([this] {
      auto handle = [this](std::span<const uint8_t> r) { events_->OnRecord(r); };
      while (!stop_) reader_->Poll(20, handle);
      reader_->Drain(handle);
    });
    return true;
  }
  uint64_t Stop() {
    stop_ = true;
    if (poller_.joinable()) poller_.join();
    if (reader_) reader_->Stop();
    return events_ ? events_->stats().records : 0;
  }
  uint64_t Dropped() const { return probes_ ? probes_->ReadStats()[GF_STAT_RINGBUF_FULL] : 0; }
  ~AgentObserver() { Stop(); }

 private:
  symbolizer::ElfCache elves_;
  symbolizer::NativeSymbolizer native_{elves_};
  std::unique_ptr<profiler::BpfProbes> probes_;
  std::unique_ptr<profiler::RingReader> reader_;
  std::unique_ptr<profiler::ProcessRegistry> registry_;
  std::unique_ptr<profiler::StackResolver> resolver_;
  std::unique_ptr<profiler::EventProcessor> events_;
  std::thread poller_;
  std::atomic<bool> stop_{false};
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string python = "python3", script = "overhead_workload.py";
  int rounds = 8;
  int cpu = -1;
  long iters = 100000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--python") python = argv[i + 1];
    else if (a == "--workload") script = argv[i + 1];
    else if (a == "--rounds") rounds = atoi(argv[i + 1]);
    else if (a == "--iters") iters = atol(argv[i + 1]);
    else if (a == "--workload-cpu") cpu = atoi(argv[i + 1]);
  }
  Workload w = Start(python, script, cpu);
  if (w.pid <= 0) {
    fprintf(stderr, "overhead: could not start %s %s\n", python.c_str(), script.c_str());
    return 1;
  }
  std::string lib = FindLibrary(w.pid, "libc10_cuda.so");
  if (lib.empty()) {
    fprintf(stderr, "overhead: no libc10_cuda.so in the workload\n");
    return 1;
  }
  const char* modes[] = {"none", "noop", "gpuflame"};
  std::map<std::string, std::vector<double>> ns_per_iter;
  uint64_t agent_events = 0, agent_drops = 0;
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < 3; k++) {
      std::string mode = modes[(r + k) % 3];
      std::unique_ptr<NoopObserver> noop;
      std::unique_ptr<AgentObserver> agent;
      if (mode == "noop") {
        noop = std::make_unique<NoopObserver>();
        if (!noop->Start(lib)) return 1;
      } else if (mode == "gpuflame") {
        agent = std::make_unique<AgentObserver>();
        if (!agent->Start(w.pid)) return 1;
      }
      int64_t ns = RunRound(w, iters);
      if (ns < 0) return 1;
      ns_per_iter[mode].push_back(static_cast<double>(ns) / static_cast<double>(iters));
      if (agent) {
        agent_events += agent->Stop();
        agent_drops += agent->Dropped();
      }
    }
  }
  fprintf(w.in, "quit\n");
  fflush(w.in);
  waitpid(w.pid, nullptr, 0);

  double none = Median(ns_per_iter["none"]);
  double noop = Median(ns_per_iter["noop"]);
  double agent = Median(ns_per_iter["gpuflame"]);
  // Each iteration is one allocation and one free: two probe hits.
  double noop_added = (noop - none) / 2, agent_added = (agent - none) / 2;
  printf("overhead harness: backend=%s rounds=%d iters/round=%ld workload-cpu=%d (alloc+free per iter, 20 Python frames deep)\n",
         w.backend.c_str(), rounds, iters, cpu);
  printf("  mode       median ns/iter   added ns/event\n");
  printf("  none       %10.1f\n", none);
  printf("  noop       %10.1f       %8.1f\n", noop, noop_added);
  printf("  gpuflame   %10.1f       %8.1f\n", agent, agent_added);
  printf("  gpuflame / noop added cost: %.2fx   agent events: %llu (expected %llu), ring-buffer drops: %llu\n",
         noop_added > 0 ? agent_added / noop_added : 0.0, static_cast<unsigned long long>(agent_events),
         static_cast<unsigned long long>(2ull * static_cast<unsigned long long>(rounds) * iters),
         static_cast<unsigned long long>(agent_drops));
  return 0;
}
