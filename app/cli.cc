#include "app/cli.h"

#include <charconv>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "logging/log.h"

namespace gpuflame::profiler {

std::string UsageText() {
  return R"(gpuflame: GPU memory flame graphs for unmodified CUDA / PyTorch processes

Usage:
  gpuflame record -o DIR [options] [--pid PID ... | -- COMMAND ARGS ...]
  gpuflame agent --pyroscope-url URL [--window SECONDS] [--config FILE] [options]
  gpuflame symbolize IN.pb.gz -o OUT.pb.gz [--binaries DIR ...]
  gpuflame diff BASE NEW -o DIR [-q]
  gpuflame timeline -o FILE [--agent HOST:PORT] [--pid PID ... | --pod POD] [--seconds S]

Commands:
  record      profile a command, running processes or every CUDA process on
              this machine; write pprof files and an HTML flame graph
  agent       run continuously and push per-process profiles to Grafana
              Pyroscope every window
  symbolize   name a stored profile's raw-address frames from binaries found later
  diff        what changed from one profile (or record directory) to another
  timeline    save the last seconds of a process or pod from a running
              agent's flight recorder, as a trace for ui.perfetto.dev

  gpuflame COMMAND --help   the options of one command
  gpuflame --version        print the version
)";
}

std::string RecordUsageText() {
  return absl::StrCat(R"(Usage:
  gpuflame record -o DIR [options] [--pid PID ... | -- COMMAND ARGS ...]

  Profile a command (-- COMMAND), running processes (--pid), or, with neither,
  every CUDA process on this machine, until it or they exit, --duration ends,
  or SIGINT/SIGTERM (passed on to COMMAND, whose exit ends the recording).
  Writes DIR/gpu_memory.pb.gz, DIR/torch_memory.pb.gz (when PyTorch's
  allocator was used), DIR/process_cpu.pb.gz (CPU time), DIR/gpu_kernel.pb.gz
  (kernel time), DIR/gpu_oom.pb.gz (out-of-memory captures), DIR/nccl.pb.gz
  (time in NCCL calls, when there were any), folded stacks,
  DIR/summary.json, DIR/flamegraph.html and, with --timeline,
  DIR/timeline.json.gz. Files an earlier record wrote in
  DIR are removed first (only those: DIR/.gpuflame-outputs lists them); when
  COMMAND cannot be run, nothing is written and gpuflame exits 127.

Options:
  -o, --output DIR        where to write the profiles (required)
  -d, --duration SECONDS  stop after this long (default: until the command or
                          the PIDs exit, or Ctrl-C)
  -p, --pid PID           profile this process (repeatable)
      --timeline          also write DIR/timeline.json.gz, a trace for
                          ui.perfetto.dev or chrome://tracing: each thread's
                          stacks over time, allocations and frees, every
                          launch, copy and memset call with arrows to its
                          kernels and copies on each GPU stream (stacks of
                          sampled launches), memory in use
      --timeline-every-launch-stack
                          every launch's stack on its span (a Python walk
                          per launch: costs a launch-bound step far more);
                          implies --timeline
      --timeline-max-events N
                          keep at most N events (default 1000000; the rest
                          are counted in the trace and summary.json)
      --timeline-max-mb N the trace's JSON at most N MiB before gzip
                          (default 256)
      --timeline-io-min-bytes N, --timeline-io-min-us US
                          model-loading I/O on the timeline (openat, file
                          mmap, GPU ioctl, and reads of at least N bytes
                          (default 65536) or US microseconds (default
                          1000); smaller reads are counted in summary.json)
      --timeline-io-max N at most N I/O spans per process (default 20000;
                          the rest counted)
      --no-timeline-io    no I/O spans: its syscall hooks are not loaded
      --mark FRAME        spans of this frame, as the flame graph names it
                          ('Trainer > step'), are phases on the timeline
                          (repeatable; implies --timeline)
      --interval MS       why the GPU idles: busy and idle per window of MS
                          milliseconds, 50 to 1000 (default 100)
      --idle-gap-ms MS    a GPU idle this long or longer is an idle gap
                          (default 5; 1 to 1000)
      --per-process-probes
                          attach the probes for each followed process alone,
                          not for every process mapping the same libraries:
                          other jobs on the machine take no trap and no
                          semaphore (experimental: each probe's close costs
                          the kernel a grace period, ~85 ms measured)
      --sync-waits        also CUPTI's synchronisation records (off by
                          default: they cost a launch-bound step more than
                          the kernels' own records). Synchronise waits are
                          recorded without it, with their stacks, by uprobes
                          on the CUDA synchronise calls; CUPTI's records only
                          count for a process the probes never reported
      --nccl-hang-s S     an NCCL call outstanding S seconds is a hang, said
                          at once (rank, peer, bytes, stack, the ranks that
                          have not entered the matching call) and when over
                          (default 10; 0.1 to 86400)
)",
                      ProfilingFlags::Help(26),
                      R"(  -q, --quiet             no progress line, summary or warnings on the terminal
      --no-progress       no progress line
      --log-format F      diagnostics as text (default), logfmt or json
      --log-level L       debug, info (default), warning or error
  -h, --help              this text

With -- COMMAND, gpuflame exits with the command's exit status (127 when it
could not be run, 128+N when signal N ended it).
)");
}

std::string SymbolizeUsageText() {
  return R"(Usage:
  gpuflame symbolize IN.pb.gz -o OUT.pb.gz [--binaries DIR ...]

  Resolve a stored profile's raw-address frames against binaries found later
  (matched by build ID), e.g. unstripped copies or debug files. Reads profiles
  up to 256 MiB, gzipped or not, 256 MiB once inflated, and 4 M samples,
  locations, strings and the like.

Options:
  -o, --output OUT.pb.gz  where to write the symbolized profile (required)
      --binaries DIR      look for binaries and debug files here (repeatable)
  -h, --help              this text
)";
}

std::string DiffUsageText() {
  return R"(Usage:
  gpuflame diff BASE NEW -o DIR [-q]

  What changed from BASE to NEW: each a profile (.pb.gz or .pb, any pprof), a
  record output directory (every profile in both is diffed) or a file of the
  agent's spool (.push: its processes' windows). Writes DIR/<profile>.diff.pb.gz,
  NEW's samples and BASE's negated (what `go tool pprof -diff_base BASE NEW`
  shows), and DIR/diff_flamegraph.html (red grew, blue shrank); prints the
  totals and the stacks that changed most. Reads profiles up to 256 MiB each,
  and per side 512 MiB, 1024 profiles and 2 M samples, locations, strings and
  the like.

Options:
  -o, --output DIR        where to write the diff (required)
  -q, --quiet             no summary on stdout
  -h, --help              this text
)";
}

std::string TimelineUsageText() {
  return R"(Usage:
  gpuflame timeline -o FILE [--agent HOST:PORT] [--pid PID ... | --pod POD]
                    [--namespace NS] [--seconds S]

  Ask a running agent (gpuflame agent) for the trace of the last seconds it
  keeps of some processes (its flight recorder: flight_recorder_seconds,
  default 5) and save it: gzipped Chrome trace JSON, as record --timeline
  writes, for ui.perfetto.dev or chrome://tracing. The agent answers on its
  metrics port: GET /timeline?pid=PID&seconds=S (or namespace=NS&pod=POD).
  With no --pid, --pod or --namespace: every process the agent reports.

Options:
  -o, --output FILE       where to write the trace (required; .json.gz)
      --agent HOST:PORT   the agent's metrics server (default 127.0.0.1:9400)
  -p, --pid PID           this process (repeatable)
      --pod POD           the processes of this pod
      --namespace NS      of this namespace (alone: every pod in it)
      --seconds S         the last S seconds (default: all the agent keeps)
  -h, --help              this text
)";
}

namespace {

// One line for the user, and where to read more: the help of the command
// that was given (or the general help before one was).
absl::Status Bad(absl::string_view command, absl::string_view msg) {
  return absl::InvalidArgumentError(command.empty() ? absl::StrCat(msg, " (see gpuflame --help)")
                                                    : absl::StrCat(msg, " (see gpuflame ", command, " --help)"));
}

bool IsHelp(const std::string& a) { return a == "-h" || a == "--help"; }

}  // namespace

absl::StatusOr<Command> ParseCommandLine(const std::vector<std::string>& args,
                                         const std::map<std::string, std::string>& env) {
  if (args.empty()) return Bad("", "missing command: try `gpuflame record -o DIR -- COMMAND`");
  if (args[0] == "-h" || args[0] == "--help" || args[0] == "help") return HelpRequest{UsageText()};
  if (args[0] == "--version" || args[0] == "version") return VersionRequest{};
  if (args[0] == "agent") {
    std::vector<std::string> rest(args.begin() + 1, args.end());
    for (const std::string& a : rest)
      if (IsHelp(a)) return HelpRequest{AgentUsageText()};
    auto cfg = LoadAgentConfig(rest, env);
    if (!cfg.ok()) return Bad("agent", cfg.status().message());
    return *cfg;
  }
  if (args[0] == "symbolize") {
    SymbolizeOptions o;
    for (size_t i = 1; i < args.size(); i++) {
      const std::string& a = args[i];
      if ((a == "-o" || a == "--output" || a == "--binaries") && i + 1 >= args.size())
        return Bad("symbolize", absl::StrCat(a, " needs a path"));
      if (a == "-o" || a == "--output") {
        o.output = args[++i];
      } else if (a == "--binaries") {
        o.binary_dirs.push_back(args[++i]);
      } else if (IsHelp(a)) {
        return HelpRequest{SymbolizeUsageText()};
      } else if (!a.empty() && a[0] == '-') {
        return Bad("symbolize", absl::StrCat("unknown option '", a, "'"));
      } else if (o.input.empty()) {
        o.input = a;
      } else {
        return Bad("symbolize", "symbolize takes one input profile");
      }
    }
    if (o.input.empty()) return Bad("symbolize", "symbolize needs an input profile");
    if (o.output.empty()) return Bad("symbolize", "symbolize needs -o OUT.pb.gz");
    return o;
  }
  if (args[0] == "diff") {
    DiffOptions o;
    std::vector<std::string> inputs;
    for (size_t i = 1; i < args.size(); i++) {
      const std::string& a = args[i];
      if ((a == "-o" || a == "--output") && i + 1 >= args.size())
        return Bad("diff", absl::StrCat(a, " needs a directory"));
      if (a == "-o" || a == "--output") {
        o.output = args[++i];
      } else if (a == "-q" || a == "--quiet") {
        o.quiet = true;
      } else if (IsHelp(a)) {
        return HelpRequest{DiffUsageText()};
      } else if (!a.empty() && a[0] == '-') {
        return Bad("diff", absl::StrCat("unknown option '", a, "'"));
      } else {
        inputs.push_back(a);
      }
    }
    if (inputs.size() != 2) return Bad("diff", "diff needs two inputs, BASE and NEW");
    if (o.output.empty()) return Bad("diff", "diff needs -o DIR");
    o.base = inputs[0];
    o.neu = inputs[1];
    return o;
  }
  if (args[0] == "timeline") {
    TimelineFetchOptions o;
    for (size_t i = 1; i < args.size(); i++) {
      const std::string& a = args[i];
      if (IsHelp(a)) return HelpRequest{TimelineUsageText()};
      if (i + 1 >= args.size() || a.empty() || a[0] != '-')
        return Bad("timeline",
                   a.empty() || a[0] != '-' ? absl::StrCat("unexpected '", a, "'") : absl::StrCat(a, " needs a value"));
      const std::string& v = args[++i];
      if (a == "-o" || a == "--output") {
        o.output = v;
      } else if (a == "--agent") {
        o.agent = v;
      } else if (a == "-p" || a == "--pid") {
        int pid = 0;
        if (!absl::SimpleAtoi(v, &pid) || pid <= 0)
          return Bad("timeline", absl::StrCat("--pid wants a process id, not '", v, "'"));
        o.pids.push_back(pid);
      } else if (a == "--pod") {
        o.pod = v;
      } else if (a == "--namespace") {
        o.namespace_name = v;
      } else if (a == "--seconds") {
        if (!absl::SimpleAtod(v, &o.seconds) || !(o.seconds > 0 && o.seconds <= 3600))
          return Bad("timeline", absl::StrCat("--seconds wants a number of seconds above 0, not '", v, "'"));
      } else {
        return Bad("timeline", absl::StrCat("unknown option '", a, "'"));
      }
    }
    if (o.output.empty()) return Bad("timeline", "timeline needs -o FILE");
    return o;
  }
  if (args[0] != "record") return Bad("", absl::StrCat("unknown command '", args[0], "'"));

  RecordOptions o;
  ProfilingFlags profiling(o.profiling);
  for (size_t i = 1; i < args.size(); i++) {
    const std::string& a = args[i];
    auto took = profiling.Consume(args, i);
    if (!took.ok()) return Bad("record", took.status().message());
    if (*took > 0) {
      i += *took - 1;
      continue;
    }
    auto value = [&](const char* what) -> absl::StatusOr<std::string> {
      if (i + 1 >= args.size()) return Bad("record", absl::StrCat(a, " needs ", what));
      return args[++i];
    };
    if (a == "--") {
      o.command.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      if (o.command.empty()) return Bad("record", "nothing to run after --");
      break;
    } else if (IsHelp(a)) {
      return HelpRequest{RecordUsageText()};
    } else if (a == "-o" || a == "--output") {
      auto v = value("a directory");
      if (!v.ok()) return v.status();
      o.output_dir = *v;
    } else if (a == "-d" || a == "--duration") {
      auto v = value("a number of seconds");
      if (!v.ok()) return v.status();
      double d = 0;
      auto r = std::from_chars(v->data(), v->data() + v->size(), d);
      if (r.ec != std::errc() || r.ptr != v->data() + v->size() || !(d > 0))
        return Bad("record", absl::StrCat("--duration wants a positive number of seconds, not '", *v, "'"));
      o.duration_s = d;
    } else if (a == "-p" || a == "--pid") {
      auto v = value("a process ID");
      if (!v.ok()) return v.status();
      int pid = 0;
      auto r = std::from_chars(v->data(), v->data() + v->size(), pid);
      if (r.ec != std::errc() || r.ptr != v->data() + v->size() || pid <= 0)
        return Bad("record", absl::StrCat("--pid wants a process ID, not '", *v, "'"));
      o.pids.push_back(pid);
    } else if (a == "--timeline") {
      o.timeline.on = true;
    } else if (a == "--timeline-every-launch-stack") {
      o.timeline.on = true;
      o.timeline.every_launch_stack = true;
    } else if (a == "--timeline-max-events" || a == "--timeline-max-mb") {
      auto v = value("a positive number");
      if (!v.ok()) return v.status();
      uint64_t n = 0;
      auto r = std::from_chars(v->data(), v->data() + v->size(), n);
      if (r.ec != std::errc() || r.ptr != v->data() + v->size() || n == 0 || n > (uint64_t{1} << 40))
        return Bad("record", absl::StrCat(a, " wants a positive number, not '", *v, "'"));
      (a == "--timeline-max-events" ? o.timeline.max_events : o.timeline.max_mb) = n;
      o.timeline.on = true;
    } else if (a == "--no-timeline-io") {
      o.timeline.io = false;
    } else if (a == "--timeline-io-min-bytes" || a == "--timeline-io-min-us" || a == "--timeline-io-max") {
      auto v = value("a number");
      if (!v.ok()) return v.status();
      uint64_t n = 0;
      auto r = std::from_chars(v->data(), v->data() + v->size(), n);
      const uint64_t most = a == "--timeline-io-max" ? UINT32_MAX : (uint64_t{1} << 40);
      if (r.ec != std::errc() || r.ptr != v->data() + v->size() || n > most)
        return Bad("record", absl::StrCat(a, " wants a number from 0 to ", most, ", not '", *v, "'"));
      if (a == "--timeline-io-min-bytes") o.timeline.io_min_bytes = n;
      else if (a == "--timeline-io-min-us") o.timeline.io_min_us = n;
      else o.timeline.io_max_per_process = static_cast<uint32_t>(n);
      o.timeline.on = true;
    } else if (a == "--mark") {
      auto v = value("a frame name ('Trainer > step')");
      if (!v.ok()) return v.status();
      if (v->empty()) return Bad("record", "--mark wants a frame name, not ''");
      o.timeline.marks.push_back(*v);
      o.timeline.on = true;
    } else if (a == "--interval" || a == "--idle-gap-ms") {
      auto v = value("a number of milliseconds");
      if (!v.ok()) return v.status();
      const bool interval = a == "--interval";
      const uint64_t lo = interval ? 50 : 1, hi = 1000;
      uint64_t n = 0;
      auto r = std::from_chars(v->data(), v->data() + v->size(), n);
      if (r.ec != std::errc() || r.ptr != v->data() + v->size() || n < lo || n > hi)
        return Bad("record", absl::StrCat(a, " wants ", lo, " to ", hi, " milliseconds, not '", *v, "'"));
      (interval ? o.utilization.interval_ms : o.utilization.idle_gap_ms) = n;
    } else if (a == "--per-process-probes") {
      o.per_process_probes = true;
    } else if (a == "--sync-waits") {
      o.utilization.sync_waits = true;
    } else if (a == "--nccl-hang-s") {
      auto v = value("a number of seconds");
      if (!v.ok()) return v.status();
      double d = 0;
      auto r = std::from_chars(v->data(), v->data() + v->size(), d);
      if (r.ec != std::errc() || r.ptr != v->data() + v->size() || !(d >= 0.1 && d <= 86400))
        return Bad("record", absl::StrCat("--nccl-hang-s wants 0.1 to 86400 seconds, not '", *v, "'"));
      o.nccl_hang_s = d;
    } else if (a == "-q" || a == "--quiet") {
      o.quiet = true;
    } else if (a == "--no-progress") {
      o.progress = false;
    } else if (a == "--log-format" || a == "--log-level") {
      auto v = value(a == "--log-format" ? "text, logfmt or json" : "debug, info, warning or error");
      if (!v.ok()) return v.status();
      if (a == "--log-format") {
        auto f = logging::ParseFormat(*v);
        if (!f.ok()) return Bad("record", f.status().message());
        o.log.format = *f;
      } else {
        auto l = logging::ParseLevel(*v);
        if (!l.ok()) return Bad("record", l.status().message());
        o.log.level = *l;
      }
    } else {
      return Bad("record", absl::StrCat("unknown option '", a, "'"));
    }
  }
  if (o.output_dir.empty()) return Bad("record", "record needs -o DIR");
  if (!o.command.empty() && !o.pids.empty()) return Bad("record", "give either --pid or -- COMMAND, not both");
  return o;
}

}  // namespace gpuflame::profiler
