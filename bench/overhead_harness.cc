// Overhead of gpuflame on the profiled process, measured the way the GPU
// host's reference numbers were: one workload process, observers switched
// on and off between rounds, rounds interleaved (mode order rotates), medians
// of per-round timings. Modes:
//   none      no probe at all
//   noop      a counting BPF program on the same USDT points (the kernel trap)
//   gpuflame  the full agent: stack walk in BPF, ring buffer, event loop
//   inprocess        the agent with tensor events from libgpuflame_cupti.so
//                    (--injection LIB), sampled by bytes; with --kernel-time
//                    also kernel time, CUPTI activity duty-cycled (the
//                    agent's defaults)
//   inprocess-exact  the same with every tensor event and activity on all
//                    the time (record's mode)
//   inprocess-spans  inprocess-exact with every CUDA launch, copy, memset and
//                    memory call recorded as a span (gpuflame:api_batch,
//                    record --timeline's mode): its difference to
//                    inprocess-exact, over the step's calls, is a call's cost
//   history-python, history-all  PyTorch's own recorder (step_workload.py)
//   agent     the real `gpuflame agent` as its own process (--agent BIN
//             --pyroscope-url URL), at its defaults: everything the in-process
//             observers leave out (CPU samples, native stacks of device-level
//             events, windows closed and pushed, its budget), --window 2 so
//             that rounds see window closes (7.5 times as often as the default)
//   placebo   nothing, like none: its ratio to none is this host's noise
//             between rounds (an A/A test), the resolution of every other ratio
//   stage-1 ... stage-8  gpuflame's probes stopping after one part of the
//             allocation path (enum gf_bench_stage: entry, frees whole,
//             header, thread state, innermost frame, data-stack copy, walk,
//             stack ID; no allocation is emitted): their BPF time per hit, against
//             each other and gpuflame's, is each part's cost
//   gpuflame-sampled  gpuflame with its tensor events sampled by bytes in BPF,
//             as the guardrails' third CPU rung does (GF_SHED_TENSOR_SAMPLED)
//   gpuflame-sampled-past-startup  the same, as the agent's default samples
//             past a process's start-up (tensor_sample_after_ns, here 1 ns:
//             every event also pays the start-up test's map lookup)
//   gpuflame-nointern  gpuflame with every Python stack sent whole, as before
//             stacks were interned in the kernel (struct gf_stack_id): its
//             difference to gpuflame is what interning saves
// With --kernel-time each observer's round is followed by --settle-ms
// (default 2000) without it: the kernel lets go of a session's uprobes, and
// so of the library's semaphores, a while after the session ends, and the
// library turns CUPTI off on its next tick after that.
// Reports ns added per allocator event (or per --events-per-iter N: the
// kernel loop's 500 launches, where no allocator event happens) and
// gpuflame's cost relative to noop,
// and splits the added time per event into the BPF programs' own run time
// (the kernel's per-program run-time stats, per program) and the rest: the
// uprobe trap and machinery, which the kernel's figure leaves out. Run-time
// stats cost every BPF program run two clock reads, in both probe modes;
// --no-bpf-stats measures without them (and without the split).
// --ring-mib N sizes gpuflame's events ring (a power of two; default 16).
#include <bpf/libbpf.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "base/scoped_fd.h"
#include "noop_probe.skel.h"
#include "profiler/probes/bpf_probes.h"
#include "profiler/probes/program_stats.h"
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

Workload Start(const std::string& python, const std::string& script, int cpu, const std::string& injection,
               bool kernel_time) {
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
    if (!injection.empty()) {
      // libgpuflame_cupti.so for the in-process mode, loaded at cuInit as
      // `record` loads it; without --kernel-time, with CUPTI left alone:
      // tensor events only.
      setenv("CUDA_INJECTION64_PATH", injection.c_str(), 1);
      if (!kernel_time) setenv("GPUFLAME_KERNEL_TIME", "0", 1);
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

// PyTorch's own allocator recorder, switched in the workload
// (step_workload.py): "python", "all" or "off".
bool SetHistory(Workload& w, const char* stacks) {
  fprintf(w.in, "history %s\n", stacks);
  fflush(w.in);
  char line[64];
  return fgets(line, sizeof(line), w.out) && strncmp(line, "ok", 2) == 0;
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
  // The counting program's runs and run time since it was loaded.
  std::vector<profiler::ProgramRunStats> Programs(const profiler::ProgramStats& stats) const {
    return skel_ ? stats.Read(skel_->obj) : std::vector<profiler::ProgramRunStats>{};
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
  // |elves| outlives the observer: ELF files parsed once for every round
  // (a PyTorch process maps gigabytes of them).
  explicit AgentObserver(symbolizer::ElfCache& elves) : elves_(elves) {}
  // |inprocess|: tensor events from libgpuflame_cupti.so's hook, no probes
  // on libc10_cuda.so (--tensor-events inprocess).
  // |exact|: record's mode (every tensor event, CUPTI activity always on),
  // else the agent's (tensor events sampled by bytes, activity duty-cycled).
  // |shed|: enum gf_shed bits in force from the start (gpuflame-sampled:
  // the guardrails' sampled rung).
  bool Start(pid_t pid, bool inprocess, bool exact, uint32_t stop_at = 0, bool intern_stacks = true,
             size_t ring_bytes = 0, bool api_spans = false, uint32_t shed = 0, uint64_t tensor_sample_after_ns = 0) {
    profiler::BpfProbes::Options opt;
    opt.tensor_sample_after_ns = tensor_sample_after_ns;
    if (ring_bytes) opt.ring_bytes = ring_bytes;
    opt.filter_targets = true;
    opt.bench_stop_at = stop_at;
    opt.intern_stacks = intern_stacks;
    auto probes = profiler::BpfProbes::Load(opt);
    if (!probes.ok()) {
      fprintf(stderr, "gpuflame: %s\n", std::string(probes.status().message()).c_str());
      return false;
    }
    probes_ = std::move(*probes);
    if (shed) probes_->SetShed(shed);
    auto reader = probes_->StartRingReader({});
    if (!reader.ok()) {
      fprintf(stderr, "gpuflame: %s\n", std::string(reader.status().message()).c_str());
      return false;
    }
    reader_ = std::move(*reader);
    profiler::ProcessRegistry::Options ropt;
    ropt.tensor_events = inprocess ? profiler::TensorEvents::kInProcess : profiler::TensorEvents::kProbes;
    ropt.kernel_time_exact = exact;
    ropt.tensor_exact = exact;
    ropt.api_spans = api_spans;
    registry_ = std::make_unique<profiler::ProcessRegistry>(*probes_, elves_, ropt);
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
  // Allocator events handled: probe records or in-process events.
  uint64_t Stop() {
    stop_ = true;
    if (poller_.joinable()) poller_.join();
    if (reader_) reader_->Stop();
    if (!events_) return 0;
    return events_->stats().inprocess_events ? events_->stats().inprocess_events : events_->stats().records;
  }
  uint64_t Dropped() const { return probes_ ? probes_->ReadStats()[GF_STAT_RINGBUF_FULL] : 0; }
  // CUDA calls the library sent as spans (inprocess-spans). After Stop().
  uint64_t ApiCalls() const { return events_ ? events_->stats().api_calls : 0; }
  // Each program's runs and run time since it was loaded. After Stop(): the
  // poller thread, which attaches through the registry, owns the object
  // until it is joined.
  std::vector<profiler::ProgramRunStats> Programs(const profiler::ProgramStats& stats) const {
    return probes_ ? stats.Read(probes_->object()) : std::vector<profiler::ProgramRunStats>{};
  }
  ~AgentObserver() { Stop(); }

 private:
  symbolizer::ElfCache& elves_;
  symbolizer::NativeSymbolizer native_{elves_};
  std::unique_ptr<profiler::BpfProbes> probes_;
  std::unique_ptr<profiler::RingReader> reader_;
  std::unique_ptr<profiler::ProcessRegistry> registry_;
  std::unique_ptr<profiler::StackResolver> resolver_;
  std::unique_ptr<profiler::EventProcessor> events_;
  std::thread poller_;
  std::atomic<bool> stop_{false};
};

// The real agent, a process of its own: started before a round, stopped
// (SIGTERM, so that it closes its last window and pushes it) after.
class RealAgent {
 public:
  bool Start(const std::string& bin, pid_t target, const std::string& url, int metrics_port) {
    metrics_port_ = metrics_port;
    pid_ = fork();
    if (pid_ == 0) {
      const std::string pid = std::to_string(target), port = std::to_string(metrics_port);
      // Its log would interleave with the harness's table.
      freopen("/dev/null", "w", stderr);
      execl(bin.c_str(), bin.c_str(), "agent", "--pyroscope-url", url.c_str(), "--pid", pid.c_str(),
            "--metrics-port", port.c_str(), "--spool-dir", "", "--window", "2", nullptr);
      _exit(127);
    }
    // Attached once /metrics counts the workload and the number of library
    // files with probes has stayed the same for a second (it attaches them
    // one by one after the process); the library then installs its hook
    // within one 100 ms tick, during the round's warm-up steps.
    double files = -1;
    int stable = 0;
    for (int i = 0; i < 600; i++) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) break;
      const double now = Metric("gpuflame_library_files_attached");
      stable = now >= 1 && now == files && Metric("gpuflame_processes_attached") >= 1 ? stable + 1 : 0;
      if (stable >= 10) return true;
      files = now;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    fprintf(stderr, "overhead: gpuflame agent did not attach to %d within 60 s\n", target);
    return false;
  }
  // Its /metrics, line by line (empty when it does not answer).
  std::vector<std::string> Scrape() const {
    // The host's curl, not with the libraries a bundle puts on LD_LIBRARY_PATH for gpuflame.
    const std::string cmd =
        "env -u LD_LIBRARY_PATH curl -s --max-time 1 http://127.0.0.1:" + std::to_string(metrics_port_) + "/metrics";
    std::vector<std::string> lines;
    FILE* f = popen(cmd.c_str(), "r");
    if (!f) return lines;
    std::array<char, 1024> line;
    while (fgets(line.data(), line.size(), f)) lines.emplace_back(line.data());
    pclose(f);
    return lines;
  }
  // A counter or gauge from its /metrics, -1 when it does not answer.
  double Metric(const char* name) const {
    double value = -1;
    const size_t n = strlen(name);
    for (const std::string& line : Scrape())
      if (line.compare(0, n, name) == 0 && line.size() > n && line[n] == ' ') value = atof(line.c_str() + n + 1);
    return value;
  }
  // Its BPF programs' run-time stats as its /metrics gives them (since it
  // loaded them: one agent per round), the same table as the in-harness
  // observers'.
  std::vector<profiler::ProgramRunStats> Programs() const {
    std::map<std::string, profiler::ProgramRunStats> by_name;
    auto program = [](const std::string& line, const std::string& family) -> std::optional<std::string> {
      const std::string head = family + "{program=\"";
      if (line.compare(0, head.size(), head) != 0) return std::nullopt;
      const size_t end = line.find('"', head.size());
      if (end == std::string::npos) return std::nullopt;
      return line.substr(head.size(), end - head.size());
    };
    for (const std::string& line : Scrape()) {
      const size_t space = line.rfind(' ');
      if (space == std::string::npos) continue;
      const double value = atof(line.c_str() + space + 1);
      if (auto name = program(line, "gpuflame_bpf_program_runs_total")) {
        by_name[*name].name = *name;
        by_name[*name].run_cnt = static_cast<uint64_t>(value);
        by_name[*name].machine_wide = line.find("scope=\"node\"") != std::string::npos;
      } else if (auto name = program(line, "gpuflame_bpf_program_run_seconds_total")) {
        by_name[*name].name = *name;
        by_name[*name].run_time_ns = static_cast<uint64_t>(value * 1e9);
      }
    }
    std::vector<profiler::ProgramRunStats> out;
    for (auto& [name, p] : by_name) out.push_back(std::move(p));
    return out;
  }
  ~RealAgent() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }

 private:
  pid_t pid_ = -1;
  int metrics_port_ = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The agent's own account, read from /metrics at the end of each round.
constexpr const char* kAgentReadings[] = {
    "gpuflame_overhead_ratio",                     // BPF + library time per unit of the workload's CPU time, last 10 s
    "gpuflame_self_cpu_cores",                     // its own threads, last 10 s
    "gpuflame_library_time_seconds_total",         // libgpuflame_cupti.so inside the workload
    "gpuflame_library_tensor_hook_seconds_total",  // of which the tensor hook
    "gpuflame_library_tensor_hook_calls_total",    // the events it handled
    "gpuflame_sampled_tensor_allocations_total",   // those it took (and walked)
    "gpuflame_library_cupti_callback_seconds_total",  // our CUPTI callbacks
    "gpuflame_library_thread_seconds_total",          // its own threads
    "gpuflame_records_total",                         // records handled (in-process batches count once)
    "gpuflame_cpu_samples_total",
    "gpuflame_shedding",  // anything shed to stay in budget
};

// The 95% interval of the mean of |v| by resampling its rounds (percentile
// bootstrap; a fixed seed, so the same numbers print the same interval).
std::pair<double, double> MeanInterval(const std::vector<double>& v) {
  if (v.size() < 2) return {0, 0};
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<size_t> pick(0, v.size() - 1);
  std::vector<double> means(2000);
  for (double& m : means) {
    double sum = 0;
    for (size_t i = 0; i < v.size(); i++) sum += v[pick(rng)];
    m = sum / static_cast<double>(v.size());
  }
  std::sort(means.begin(), means.end());
  return {means[means.size() / 40], means[means.size() - 1 - means.size() / 40]};
}

// Per program, summed over rounds (each round loads its programs afresh).
using ProgramTotals = std::map<std::string, profiler::ProgramCost>;
void AddRound(ProgramTotals& totals, const std::vector<profiler::ProgramRunStats>& since_load) {
  for (const profiler::ProgramCost& c : profiler::ProgramCostBetween({}, since_load)) {
    profiler::ProgramCost& t = totals[c.name];
    t.name = c.name;
    t.hits += c.hits;
    t.ns_total += c.ns_total;
  }
}

// BPF nanoseconds per workload event: the programs that run on the
// workload's threads. The lifecycle hooks (watch_*) run in every process on
// the host, on mmap/exec/fork/exit, not per allocator event; the CPU
// sampler fires on every CPU at its rate, busy or idle: of its hits only
// the 97 a second on the CPU a workload thread runs on fall on it (0.5 us
// each: 0.005% of that thread's time), so counting all of them here
// charged the workload with the rest of the machine's.
double BpfNsPerEvent(const ProgramTotals& totals, uint64_t events) {
  uint64_t ns = 0;
  for (const auto& [name, c] : totals)
    if (name.rfind("watch_", 0) != 0 && name != "cpu_sample") ns += c.ns_total;
  return events ? static_cast<double>(ns) / static_cast<double>(events) : 0;
}

// The enum gf_bench_stage of a stage-N mode; 0 for any other mode.
uint32_t StageOf(const std::string& mode) {
  if (mode.size() != 7 || mode.rfind("stage-", 0) != 0) return 0;
  const int n = mode[6] - '0';
  return n >= GF_STAGE_ENTRY && n <= GF_STAGE_INTERN ? static_cast<uint32_t>(n) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string python = "python3", script = "overhead_workload.py";
  int ring_mib = 0;  // 0: BpfProbes' default
  int rounds = 8;
  int cpu = -1;
  long iters = 100000;
  bool bpf_stats = true;
  std::string injection;  // libgpuflame_cupti.so: enables the inprocess mode
  std::string agent_bin, pyroscope_url;  // the agent mode
  int metrics_port = 9499;
  bool kernel_time = false;
  int settle_ms = -1;
  double events_per_iter_given = 0;  // --events-per-iter: what an iteration is made of, where no allocator event is
  std::vector<std::string> modes = {"none", "noop", "gpuflame"};
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--no-bpf-stats") {
      bpf_stats = false;
      continue;
    }
    if (a == "--kernel-time") {
      kernel_time = true;
      continue;
    }
    if (i + 1 >= argc) break;
    const char* v = argv[++i];
    if (a == "--python") python = v;
    else if (a == "--workload") script = v;
    else if (a == "--rounds") rounds = atoi(v);
    else if (a == "--ring-mib") ring_mib = atoi(v);
    else if (a == "--iters") iters = atol(v);
    else if (a == "--workload-cpu") cpu = atoi(v);
    else if (a == "--injection") injection = v;
    else if (a == "--settle-ms") settle_ms = atoi(v);
    else if (a == "--agent") agent_bin = v;
    else if (a == "--pyroscope-url") pyroscope_url = v;
    else if (a == "--metrics-port") metrics_port = atoi(v);
    else if (a == "--events-per-iter") events_per_iter_given = atof(v);
    else if (a == "--modes") {
      modes.clear();
      for (absl::string_view m : absl::StrSplit(v, ',')) modes.emplace_back(m);
    }
  }
  for (const std::string& m : modes)
    if (m != "none" && m != "placebo" && m != "noop" && m != "gpuflame" && m != "gpuflame-nointern" &&
        m != "gpuflame-sampled" && m != "gpuflame-sampled-past-startup" && StageOf(m) == 0 && m != "history-python" &&
        m != "history-all" &&
        ((m != "inprocess" && m != "inprocess-exact" && m != "inprocess-spans") || injection.empty()) &&
        (m != "agent" || agent_bin.empty() || pyroscope_url.empty())) {
      fprintf(stderr,
              "overhead: unknown mode %s (none, placebo, noop, gpuflame, gpuflame-nointern, gpuflame-sampled, "
              "gpuflame-sampled-past-startup, "
              "stage-1 ... stage-8; "
              "inprocess, inprocess-exact, inprocess-spans with --injection "
              "LIB; agent with --agent BIN --pyroscope-url URL; history-python and history-all with "
              "step_workload.py)\n",
              m.c_str());
      return 2;
    }
  if (std::find(modes.begin(), modes.end(), "none") == modes.end()) modes.insert(modes.begin(), "none");
  if (settle_ms < 0) settle_ms = kernel_time ? 2000 : 0;
  Workload w = Start(python, script, cpu, injection, kernel_time);
  if (w.pid <= 0) {
    fprintf(stderr, "overhead: could not start %s %s\n", python.c_str(), script.c_str());
    return 1;
  }
  std::string lib = FindLibrary(w.pid, "libc10_cuda.so");
  if (lib.empty()) {
    fprintf(stderr, "overhead: no libc10_cuda.so in the workload\n");
    return 1;
  }
  // On for every round and mode, so that its clock reads weigh the same on both probe modes.
  profiler::ProgramStats stats = bpf_stats ? profiler::ProgramStats::Enable() : profiler::ProgramStats();
  std::map<std::string, ProgramTotals> programs;
  std::map<std::string, std::vector<double>> ns_per_iter;
  // Per-round ratios to the neighbouring `none` round: drifts of the
  // workload over minutes (clocks, caches) cancel out.
  std::map<std::string, std::vector<double>> ratios;
  std::map<std::string, uint64_t> events_seen, drops, api_calls;
  std::map<std::string, std::vector<double>> agent_readings;  // per round, by metric
  const size_t n = modes.size();
  symbolizer::ElfCache elves;
  // Untimed iterations before each timed round: every mode's round then
  // starts from a running workload, whatever its observer's set-up cost
  // (seconds of idle GPU change its clocks).
  const long warm = std::max(1L, iters / 4);
  for (int r = 0; r < rounds; r++) {
    std::map<std::string, double> this_round;
    for (size_t k = 0; k < n; k++) {
      const std::string& mode = modes[(static_cast<size_t>(r) + k) % n];
      std::unique_ptr<NoopObserver> noop;
      std::unique_ptr<AgentObserver> agent;
      std::unique_ptr<RealAgent> real_agent;
      if (mode == "agent") {
        real_agent = std::make_unique<RealAgent>();
        if (!real_agent->Start(agent_bin, w.pid, pyroscope_url, metrics_port)) return 1;
      } else if (mode == "noop") {
        noop = std::make_unique<NoopObserver>();
        if (!noop->Start(lib)) return 1;
      } else if (mode == "gpuflame-sampled" || mode == "gpuflame-sampled-past-startup") {
        agent = std::make_unique<AgentObserver>(elves);
        const bool shed = mode == "gpuflame-sampled";
        if (!agent->Start(w.pid, false, false, 0, true, size_t(ring_mib) << 20, false,
                          shed ? GF_SHED_TENSOR_SAMPLED : 0, shed ? 0 : 1))
          return 1;
      } else if (StageOf(mode) != 0 || mode == "gpuflame-nointern") {
        agent = std::make_unique<AgentObserver>(elves);
        if (!agent->Start(w.pid, false, false, StageOf(mode), mode != "gpuflame-nointern", size_t(ring_mib) << 20))
          return 1;
      } else if (mode == "gpuflame" || mode.rfind("inprocess", 0) == 0) {
        agent = std::make_unique<AgentObserver>(elves);
        const bool inprocess = mode != "gpuflame";
        const bool spans = mode == "inprocess-spans";
        if (!agent->Start(w.pid, inprocess, mode == "inprocess-exact" || spans, 0, true, size_t(ring_mib) << 20, spans))
          return 1;
        // The library installs its hook within a 100 ms tick of the first agent.
        if (inprocess) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      }
      const bool history = mode.rfind("history-", 0) == 0;
      if (history && !SetHistory(w, mode.c_str() + 8)) return 1;
      if (RunRound(w, warm) < 0) return 1;
      int64_t ns = RunRound(w, iters);
      if (ns < 0 || (history && !SetHistory(w, "off"))) return 1;
      this_round[mode] = static_cast<double>(ns) / static_cast<double>(iters);
      ns_per_iter[mode].push_back(this_round[mode]);
      if (real_agent) {
        // What it says of itself after the round: its cost as it measures it
        // (item by item beside the step time measured here), and any loss;
        // /metrics is refreshed when a window closes.
        std::this_thread::sleep_for(std::chrono::milliseconds(2100));
        for (const char* name : kAgentReadings) agent_readings[name].push_back(real_agent->Metric(name));
        AddRound(programs[mode], real_agent->Programs());
        // Its tensor events, as the library counted them (none pass through
        // an observer of ours in this mode).
        events_seen[mode] +=
            static_cast<uint64_t>(std::max(0.0, agent_readings["gpuflame_library_tensor_hook_calls_total"].back()));
        drops[mode] += static_cast<uint64_t>(std::max(0.0, real_agent->Metric("gpuflame_lost_records_total")));
      }
      if (agent) {
        events_seen[mode] += agent->Stop();
        drops[mode] += agent->Dropped();
        api_calls[mode] += agent->ApiCalls();
        AddRound(programs[mode], agent->Programs(stats));
      }
      if (noop) AddRound(programs[mode], noop->Programs(stats));
      if ((agent || noop || real_agent) && settle_ms > 0) {
        agent.reset();
        noop.reset();
        real_agent.reset();
        std::this_thread::sleep_for(std::chrono::milliseconds(settle_ms));
      }
    }
    for (const auto& [mode, v] : this_round) ratios[mode].push_back(v / this_round["none"]);
    // Progress, so that a run cut short still says something.
    fprintf(stderr, "round %d:", r + 1);
    for (const auto& [mode, v] : this_round) fprintf(stderr, " %s=%.4f", mode.c_str(), v / this_round["none"]);
    fprintf(stderr, "\n");
  }
  fprintf(w.in, "quit\n");
  fflush(w.in);
  waitpid(w.pid, nullptr, 0);

  const double none = Median(ns_per_iter["none"]);
  // Allocator events per iteration, as the agent saw them (every mode
  // observes the same workload); 2 for the alloc+free loop.
  double events_per_iter = 0;
  for (const auto& [mode, e] : events_seen)
    events_per_iter = std::max(events_per_iter, static_cast<double>(e) / (static_cast<double>(rounds) * (iters + warm)));
  if (events_per_iter_given > 0) events_per_iter = events_per_iter_given;
  if (events_per_iter == 0) events_per_iter = 2;
  printf("overhead harness: backend=%s rounds=%d iters/round=%ld workload-cpu=%d, %.1f %s/iter\n", w.backend.c_str(),
         rounds, iters, cpu, events_per_iter, events_per_iter_given > 0 ? "events (given)" : "allocator events");
  // The mean ratio too: with duty-cycled activity a round may fall in or
  // out of an "on" window, and the cost is the average over both.
  printf("  %-15s %14s %8s %15s %8s %15s %15s %12s %8s\n", "mode", "median ns/iter", "ratio", "ratio p25-p75",
         "mean", "mean 95% CI", "added ns/event", "events", "drops");
  for (const std::string& mode : modes) {
    std::vector<double> rs = ratios[mode];
    std::sort(rs.begin(), rs.end());
    const double median = Median(ns_per_iter[mode]);
    const double p25 = rs.empty() ? 0 : rs[rs.size() / 4], p75 = rs.empty() ? 0 : rs[(rs.size() * 3) / 4];
    double mean = 0;
    for (double x : rs) mean += x / static_cast<double>(rs.empty() ? 1 : rs.size());
    const auto [lo, hi] = MeanInterval(rs);
    printf("  %-15s %14.1f %8.3f %7.3f-%-7.3f %8.3f %7.3f-%-7.3f %15.1f %12llu %8llu\n", mode.c_str(), median,
           Median(rs), p25, p75, mean, lo, hi, (median - none) / events_per_iter,
           static_cast<unsigned long long>(events_seen[mode]),
           static_cast<unsigned long long>(drops[mode]));
  }
  // A call's cost with spans: the step's added time over record's exact
  // mode, per call the library sent (warm-up iterations ran under it too).
  if (api_calls["inprocess-spans"] && !ns_per_iter["inprocess-exact"].empty()) {
    const double calls = static_cast<double>(api_calls["inprocess-spans"]) / (static_cast<double>(rounds) * (iters + warm));
    printf("  inprocess-spans: %.1f CUDA calls sent as spans per iteration; %.1f ns added per call over "
           "inprocess-exact (medians)\n",
           calls, (Median(ns_per_iter["inprocess-spans"]) - Median(ns_per_iter["inprocess-exact"])) / calls);
  }
  if (!agent_readings.empty()) {
    printf("  gpuflame agent's own readings at the end of each round (median, min-max over rounds):\n");
    for (const auto& [name, v] : agent_readings) {
      std::vector<double> sorted = v;
      std::sort(sorted.begin(), sorted.end());
      printf("    %-40s %12.6g (%g-%g)\n", name.c_str(), Median(sorted), sorted.front(), sorted.back());
    }
    // The library's parts per iteration (each round's agent counts from its
    // own start, so a round's figure covers its warm-up and timed iterations).
    for (const auto& [name, v] : agent_readings)
      if (name.find("_seconds_total") != std::string::npos)
        printf("    %-40s %9.1f us per iteration (median round)\n", name.c_str(),
               Median(v) * 1e6 / static_cast<double>(iters + warm));
  }
  if (!stats.available()) {
    printf("  BPF program time: %s\n", stats.Describe().c_str());
    return 0;
  }
  // Per component: the programs' own run time (kernel stats) and the rest of
  // the added time: the uprobe trap and machinery, or, in-process, the hook
  // and stack walk inside the workload (plus anything gpuflame's threads
  // take from the workload's CPU).
  const double events = events_per_iter * static_cast<double>(rounds) * (iters + warm);
  printf("  BPF program time (kernel run-time stats, on in every mode; excludes the uprobe trap):\n");
  printf("    %-10s %-20s %12s %10s\n", "mode", "program", "hits", "ns/hit");
  for (const auto& [mode, totals] : programs)
    for (const auto& [name, c] : totals)
      if (c.hits)
        printf("    %-10s %-20s %12llu %10.1f\n", mode.c_str(), name.c_str(), static_cast<unsigned long long>(c.hits),
               c.ns_per_hit());
  for (const auto& [mode, totals] : programs) {
    const double added = (Median(ns_per_iter[mode]) - none) / events_per_iter;
    const double bpf = BpfNsPerEvent(totals, static_cast<uint64_t>(events));  // warm-up events ran under it too
    printf("  per event: %-10s %8.1f ns added = %8.1f ns BPF programs + %8.1f ns the rest (trap or in-process hook)\n",
           mode.c_str(), added, bpf, added - bpf);
  }
  return 0;
}
