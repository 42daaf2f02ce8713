#include "app/cli.h"

#include <charconv>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {

std::string UsageText() {
  return R"(gpuflame: GPU memory flame graphs for unmodified CUDA / PyTorch processes

Usage:
  gpuflame record -o DIR [--duration SECONDS] [--pid PID ...] [-- COMMAND ARGS ...]

  gpuflame agent --pyroscope-url URL [--window SECONDS] [--config FILE]
  gpuflame symbolize IN.pb.gz -o OUT.pb.gz [--binaries DIR ...]

  record      Profile a command (-- COMMAND), running processes (--pid), or,
              with neither, every CUDA process on this machine. Writes
              DIR/gpu_memory.pb.gz, DIR/torch_memory.pb.gz (when PyTorch's
              allocator was used), DIR/process_cpu.pb.gz (CPU time),
              DIR/gpu_kernel.pb.gz (kernel time), folded stacks and
              DIR/flamegraph.html.
  symbolize   Resolve a stored profile's raw-address frames against binaries
              found later (matched by build ID), e.g. unstripped copies.
  agent       Run continuously and push per-process profiles to Grafana
              Pyroscope every window (see gpuflame agent --help).

Options:
  -o, --output DIR        where to write the profiles (required)
  -d, --duration SECONDS  stop after this long (default: until the command or
                          the PIDs exit, or Ctrl-C)
  -p, --pid PID           profile this process (repeatable)
      --hide-trampolines  drop CPython's <interpreter trampoline> frames
      --native-stacks M   native frames (DWARF-unwound) for: gpu (device-level
                          allocations, default), all (tensors too: costly), off
      --keep-interpreter-frames  keep CPython's own C frames in mixed stacks
      --cpu-hz N          CPU-time samples per second of CPU (default 97; 0: off)
      --thread-names      label CPU samples with their thread's name
      --no-kernel-time    do not load libgpuflame_cupti.so into the command
                          (kernel time, DIR/gpu_kernel.pb.gz, needs it)
      --binaries DIR      name raw-address frames from binaries or debug files
                          here, matched by build ID (repeatable; default
                          /usr/lib/debug)
  -q, --quiet             no progress bar or summary
  -h, --help              this text
      --version           print the version

With -- COMMAND, gpuflame exits with the command's exit status.
)";
}

namespace {

absl::Status Bad(std::string msg) {
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
  if (args[0] != "record") return Bad(absl::StrCat("unknown command '", args[0], "'"));

  RecordOptions o;
  bool binaries_given = false;
  for (size_t i = 1; i < args.size(); i++) {
    const std::string& a = args[i];
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
    } else if (a == "--hide-trampolines") {
      o.show_trampolines = false;
    } else if (a == "--cpu-hz") {
      auto v = value("samples per second");
      if (!v.ok()) return v.status();
      int hz = -1;
      auto r = std::from_chars(v->data(), v->data() + v->size(), hz);
      if (r.ec != std::errc() || r.ptr != v->data() + v->size() || hz < 0 || hz > 10000)
        return Bad(absl::StrCat("--cpu-hz wants 0 to 10000 samples per second, not '", *v, "'"));
      o.cpu_hz = hz;
    } else if (a == "--thread-names") {
      o.thread_names = true;
    } else if (a == "--no-kernel-time") {
      o.kernel_time = false;
    } else if (a == "--binaries") {
      auto v = value("a directory");
      if (!v.ok()) return v.status();
      if (!binaries_given) o.binary_dirs.clear();
      binaries_given = true;
      o.binary_dirs.push_back(*v);
    } else if (a == "--keep-interpreter-frames") {
      o.keep_interpreter_frames = true;
    } else if (a == "--native-stacks") {
      auto v = value("off, gpu or all");
      if (!v.ok()) return v.status();
      if (*v == "off") o.native_stacks = 0;
      else if (*v == "gpu") o.native_stacks = 1;
      else if (*v == "all") o.native_stacks = 2;
      else return Bad(absl::StrCat("--native-stacks wants off, gpu or all, not '", *v, "'"));
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
