#include "app/cli.h"

#include <charconv>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {

std::string UsageText() {
  return absl::StrCat(R"(gpuflame: GPU memory flame graphs for unmodified CUDA / PyTorch processes

Usage:
  gpuflame record -o DIR [--duration SECONDS] [--pid PID ...] [-- COMMAND ARGS ...]

  gpuflame agent --pyroscope-url URL [--window SECONDS] [--config FILE]
  gpuflame symbolize IN.pb.gz -o OUT.pb.gz [--binaries DIR ...]
  gpuflame diff BASE NEW -o DIR [-q]

  record      Profile a command (-- COMMAND), running processes (--pid), or,
              with neither, every CUDA process on this machine. Writes
              DIR/gpu_memory.pb.gz, DIR/torch_memory.pb.gz (when PyTorch's
              allocator was used), DIR/process_cpu.pb.gz (CPU time),
              DIR/gpu_kernel.pb.gz (kernel time), folded stacks and
              DIR/flamegraph.html.
  symbolize   Resolve a stored profile's raw-address frames against binaries
              found later (matched by build ID), e.g. unstripped copies.
              Reads profiles up to 256 MiB, gzipped or not, 256 MiB once
              inflated, and 4 M samples, locations, strings and the like.
  diff        What changed from BASE to NEW: each a profile (.pb.gz or .pb,
              any pprof), a record output directory (every profile in both is
              diffed) or a file of the agent's spool (.push: its processes'
              windows). Writes DIR/<profile>.diff.pb.gz, NEW's samples and
              BASE's negated (what `go tool pprof -diff_base BASE NEW` shows),
              and DIR/diff_flamegraph.html (red grew, blue shrank); prints
              the totals and the stacks that changed most. Reads profiles up
              to 256 MiB each, and per side 512 MiB, 1024 profiles and 2 M
              samples, locations, strings and the like.
  agent       Run continuously and push per-process profiles to Grafana
              Pyroscope every window (see gpuflame agent --help).

Options:
  -o, --output DIR        where to write the profiles (required)
  -d, --duration SECONDS  stop after this long (default: until the command or
                          the PIDs exit, or Ctrl-C)
  -p, --pid PID           profile this process (repeatable)
)", ProfilingFlags::Help(26), R"(  -q, --quiet             no progress bar or summary
  -h, --help              this text
      --version           print the version

With -- COMMAND, gpuflame exits with the command's exit status.
)");
}

namespace {

absl::Status Bad(const std::string& msg) {
  return absl::InvalidArgumentError(absl::StrCat(msg, " (see gpuflame --help)"));
}

}  // namespace

absl::StatusOr<Command> ParseCommandLine(const std::vector<std::string>& args,
                                         const std::map<std::string, std::string>& env) {
  if (args.empty()) return Bad("missing command: try `gpuflame record -o DIR -- COMMAND`");
  if (args[0] == "-h" || args[0] == "--help" || args[0] == "help") return HelpRequest{UsageText()};
  if (args[0] == "--version" || args[0] == "version") return VersionRequest{};
  if (args[0] == "agent") {
    std::vector<std::string> rest(args.begin() + 1, args.end());
    for (const std::string& a : rest)
      if (a == "-h" || a == "--help") return HelpRequest{AgentUsageText()};
    auto cfg = LoadAgentConfig(rest, env);
    if (!cfg.ok()) return Bad(std::string(cfg.status().message()));
    return *cfg;
  }
  if (args[0] == "symbolize") {
    SymbolizeOptions o;
    for (size_t i = 1; i < args.size(); i++) {
      const std::string& a = args[i];
      if ((a == "-o" || a == "--output" || a == "--binaries") && i + 1 >= args.size())
        return Bad(absl::StrCat(a, " needs a path"));
      if (a == "-o" || a == "--output") {
        o.output = args[++i];
      } else if (a == "--binaries") {
        o.binary_dirs.push_back(args[++i]);
      } else if (a == "-h" || a == "--help") {
        return HelpRequest{UsageText()};
      } else if (!a.empty() && a[0] == '-') {
        return Bad(absl::StrCat("unknown option '", a, "'"));
      } else if (o.input.empty()) {
        o.input = a;
      } else {
        return Bad("symbolize takes one input profile");
      }
    }
    if (o.input.empty() || o.output.empty()) return Bad("usage: gpuflame symbolize IN.pb.gz -o OUT.pb.gz [--binaries DIR]");
    return o;
  }
  if (args[0] == "diff") {
    DiffOptions o;
    std::vector<std::string> inputs;
    for (size_t i = 1; i < args.size(); i++) {
      const std::string& a = args[i];
      if ((a == "-o" || a == "--output") && i + 1 >= args.size()) return Bad(absl::StrCat(a, " needs a directory"));
      if (a == "-o" || a == "--output") {
        o.output = args[++i];
      } else if (a == "-q" || a == "--quiet") {
        o.quiet = true;
      } else if (a == "-h" || a == "--help") {
        return HelpRequest{UsageText()};
      } else if (!a.empty() && a[0] == '-') {
        return Bad(absl::StrCat("unknown option '", a, "'"));
      } else {
        inputs.push_back(a);
      }
    }
    if (inputs.size() != 2 || o.output.empty()) return Bad("usage: gpuflame diff BASE NEW -o DIR");
    o.base = inputs[0];
    o.neu = inputs[1];
    return o;
  }
  if (args[0] != "record") return Bad(absl::StrCat("unknown command '", args[0], "'"));

  RecordOptions o;
  ProfilingFlags profiling(o.profiling);
  for (size_t i = 1; i < args.size(); i++) {
    const std::string& a = args[i];
    auto took = profiling.Consume(args, i);
    if (!took.ok()) return Bad(std::string(took.status().message()));
    if (*took > 0) {
      i += *took - 1;
      continue;
    }
    auto value = [&](const char* what) -> absl::StatusOr<std::string> {
      if (i + 1 >= args.size()) return Bad(absl::StrCat(a, " needs ", what));
      return args[++i];
    };
    if (a == "--") {
      o.command.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      if (o.command.empty()) return Bad("nothing to run after --");
      break;
    } else if (a == "-h" || a == "--help") {
      return HelpRequest{UsageText()};
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
        return Bad(absl::StrCat("--duration wants a positive number of seconds, not '", *v, "'"));
      o.duration_s = d;
    } else if (a == "-p" || a == "--pid") {
      auto v = value("a process ID");
      if (!v.ok()) return v.status();
      int pid = 0;
      auto r = std::from_chars(v->data(), v->data() + v->size(), pid);
      if (r.ec != std::errc() || r.ptr != v->data() + v->size() || pid <= 0)
        return Bad(absl::StrCat("--pid wants a process ID, not '", *v, "'"));
      o.pids.push_back(pid);
    } else if (a == "-q" || a == "--quiet") {
      o.quiet = true;
    } else if (a == "--no-progress") {
      o.progress = false;
    } else {
      return Bad(absl::StrCat("unknown option '", a, "'"));
    }
  }
  if (o.output_dir.empty()) return Bad("record needs -o DIR");
  if (!o.command.empty() && !o.pids.empty())
    return Bad("give either --pid or -- COMMAND, not both");
  return o;
}

}  // namespace gpuflame::profiler
