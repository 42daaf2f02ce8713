#include "profiler/pipeline/profiling_options.h"

#include <charconv>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace gpuflame::profiler {
namespace {

constexpr absl::string_view kKeys[] = {"native_stacks",    "cpu_hz",
                                       "thread_names",     "kernel_time",
                                       "hide_trampolines", "keep_interpreter_frames",
                                       "binaries",         "max_cpu",
                                       "max_memory_mb",    "tensor_events",
                                       "max_overhead",     "kernel_activity",
                                       "tensor_sampling",  "gate_new_libraries",
                                       "ring_buffer_kb",   "tensor_startup_s",
                                       "launch_stacks"};

absl::StatusOr<bool> ParseBool(absl::string_view key, absl::string_view v) {
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  return absl::InvalidArgumentError(absl::StrCat(key, " wants true or false, not '", v, "'"));
}

// |v| as a T in [lo, hi], the whole text; nullopt otherwise.
template <typename T>
std::optional<T> NumberIn(absl::string_view v, T lo, T hi) {
  T n{};
  auto r = std::from_chars(v.data(), v.data() + v.size(), n);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size() || !(n >= lo && n <= hi)) return std::nullopt;
  return n;
}

}  // namespace

const char* TensorEventsName(TensorEvents t) {
  switch (t) {
    case TensorEvents::kAuto: return "auto";
    case TensorEvents::kProbes: return "probes";
    case TensorEvents::kInProcess: return "inprocess";
  }
  return "?";
}

bool IsProfilingOption(absl::string_view key) {
  for (absl::string_view k : kKeys)
    if (k == key) return true;
  return false;
}

absl::Status SetProfilingOption(ProfilingOptions& o, absl::string_view key, absl::string_view value) {
  if (key == "native_stacks") {
    if (value == "off") o.native_stacks = NativeStacks::kOff;
    else if (value == "gpu") o.native_stacks = NativeStacks::kDevice;
    else if (value == "all") o.native_stacks = NativeStacks::kAll;
    else return absl::InvalidArgumentError(absl::StrCat("native_stacks wants off, gpu or all, not '", value, "'"));
    return absl::OkStatus();
  }
  if (key == "tensor_events") {
    if (value == "auto") o.tensor_events = TensorEvents::kAuto;
    else if (value == "probes") o.tensor_events = TensorEvents::kProbes;
    else if (value == "inprocess") o.tensor_events = TensorEvents::kInProcess;
    else return absl::InvalidArgumentError(absl::StrCat("tensor_events wants auto, probes or inprocess, not '", value, "'"));
    return absl::OkStatus();
  }
  if (key == "kernel_activity" || key == "tensor_sampling") {
    bool& exact = key == "kernel_activity" ? o.kernel_time_exact : o.tensor_exact;
    if (value == "exact") exact = true;
    else if (value == "sampled") exact = false;
    else return absl::InvalidArgumentError(absl::StrCat(key, " wants exact or sampled, not '", value, "'"));
    return absl::OkStatus();
  }
  if (key == "launch_stacks") {
    if (value == "callbacks") o.launch_uprobes = false;
    else if (value == "uprobes") o.launch_uprobes = true;
    else return absl::InvalidArgumentError(absl::StrCat("launch_stacks wants callbacks or uprobes, not '", value, "'"));
    return absl::OkStatus();
  }
  if (key == "gate_new_libraries") {
    auto b = ParseBool(key, value);
    if (!b.ok()) return b.status();
    o.gate_new_libraries = *b;
    return absl::OkStatus();
  }
  if (key == "cpu_hz") {
    auto hz = NumberIn(value, 0, 10000);
    if (!hz)
      return absl::InvalidArgumentError(
          absl::StrCat("cpu_hz wants 0 to 10000 samples per second, not '", value, "'"));
    o.cpu_hz = *hz;
    return absl::OkStatus();
  }
  if (key == "max_cpu") {
    auto cores = NumberIn(value, 0.0, 1024.0);
    if (!cores)
      return absl::InvalidArgumentError(absl::StrCat("max_cpu wants CPU cores (e.g. 0.5; 0: no limit), not '", value, "'"));
    o.guardrails.max_cpu_cores = *cores;
    return absl::OkStatus();
  }
  if (key == "max_overhead") {
    // A percentage, as users say it: "1" is 1% of the profiled processes' CPU time.
    auto percent = NumberIn(value, 0.0, 100.0);
    if (!percent)
      return absl::InvalidArgumentError(
          absl::StrCat("max_overhead wants a percentage of the profiled processes' CPU time (e.g. 1; 0: no limit), not '",
                       value, "'"));
    o.guardrails.max_overhead = *percent / 100;
    return absl::OkStatus();
  }
  if (key == "max_memory_mb") {
    auto mb = NumberIn<uint64_t>(value, 0, 1ull << 24);
    if (!mb) return absl::InvalidArgumentError(absl::StrCat("max_memory_mb wants MiB (0: no limit), not '", value, "'"));
    o.guardrails.max_rss_bytes = *mb << 20;
    return absl::OkStatus();
  }
  if (key == "tensor_startup_s") {
    auto secs = NumberIn<uint64_t>(value, 0, 86400);
    if (!secs)
      return absl::InvalidArgumentError(
          absl::StrCat("tensor_startup_s wants seconds from 0 to 86400, not '", value, "'"));
    o.tensor_startup_s = *secs;
    return absl::OkStatus();
  }
  if (key == "ring_buffer_kb") {
    // The kernel wants a power-of-two multiple of the page size; 4 GiB is
    // the ring buffer's limit.
    auto kb = NumberIn<uint64_t>(value, 16, 4ull << 20);
    if (!kb || (*kb & (*kb - 1)))
      return absl::InvalidArgumentError(
          absl::StrCat("ring_buffer_kb wants a power of two from 16 to 4194304 KiB, not '", value, "'"));
    o.ring_buffer_kb = *kb;
    return absl::OkStatus();
  }
  if (key == "binaries") {
    o.binary_dirs.clear();
    for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipWhitespace())) o.binary_dirs.emplace_back(part);
    return absl::OkStatus();
  }
  bool* flag = key == "thread_names"              ? &o.thread_names
               : key == "kernel_time"             ? &o.kernel_time
               : key == "keep_interpreter_frames" ? &o.keep_interpreter_frames
                                                  : nullptr;
  if (key == "hide_trampolines") {
    auto b = ParseBool(key, value);
    if (!b.ok()) return b.status();
    o.show_trampolines = !*b;
    return absl::OkStatus();
  }
  if (!flag) return absl::InvalidArgumentError(absl::StrCat("unknown setting '", key, "'"));
  auto b = ParseBool(key, value);
  if (!b.ok()) return b.status();
  *flag = *b;
  return absl::OkStatus();
}

absl::StatusOr<size_t> ProfilingFlags::Consume(const std::vector<std::string>& args, size_t i) {
  const std::string& a = args[i];
  bool* flag = a == "--thread-names"              ? &options_.thread_names
               : a == "--keep-interpreter-frames" ? &options_.keep_interpreter_frames
                                                  : nullptr;
  if (flag) {
    *flag = true;
    return size_t{1};
  }
  if (a == "--no-gate") {
    options_.gate_new_libraries = false;
    return size_t{1};
  }
  if (a == "--no-kernel-time" || a == "--hide-trampolines") {
    (a == "--no-kernel-time" ? options_.kernel_time : options_.show_trampolines) = false;
    return size_t{1};
  }
  const char* key = a == "--native-stacks"      ? "native_stacks"
                    : a == "--cpu-hz"           ? "cpu_hz"
                    : a == "--binaries"         ? "binaries"
                    : a == "--max-cpu"          ? "max_cpu"
                    : a == "--max-memory-mb"    ? "max_memory_mb"
                    : a == "--tensor-events"    ? "tensor_events"
                    : a == "--max-overhead"     ? "max_overhead"
                    : a == "--kernel-activity"  ? "kernel_activity"
                    : a == "--tensor-sampling"  ? "tensor_sampling"
                    : a == "--ring-buffer-kb"   ? "ring_buffer_kb"
                    : a == "--tensor-startup-s" ? "tensor_startup_s"
                    : a == "--launch-stacks"    ? "launch_stacks"
                                                : nullptr;
  if (!key) return size_t{0};
  if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat(a, " needs a value"));
  const std::string& value = args[i + 1];
  if (absl::string_view(key) == "binaries" && binaries_given_) {
    ProfilingOptions more;
    if (auto s = SetProfilingOption(more, key, value); !s.ok()) return s;
    options_.binary_dirs.insert(options_.binary_dirs.end(), more.binary_dirs.begin(), more.binary_dirs.end());
    return size_t{2};
  }
  if (auto s = SetProfilingOption(options_, key, value); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat(a, ": ", s.message()));
  binaries_given_ |= absl::string_view(key) == "binaries";
  return size_t{2};
}

std::string ProfilingFlags::Help(int column) {
  static constexpr std::pair<const char*, const char*> kLines[] = {
      {"--native-stacks M",
       "native frames (DWARF-unwound) for: gpu (device-level\n"
       "allocations, default), all (tensors too: costly), off"},
      {"--keep-interpreter-frames", "keep CPython's own C frames in mixed stacks"},
      {"--hide-trampolines", "drop CPython's <interpreter trampoline> frames"},
      {"--cpu-hz N", "CPU-time samples per second of CPU (default 97; 0: off)"},
      {"--thread-names", "label CPU samples with their thread's name"},
      {"--no-gate",
       "machine-wide, do not hold the first process that maps a CUDA,\n"
       "PyTorch or libpython file gpuflame has not attached to yet\n"
       "(by default it waits, once per new file, so that its start-up\n"
       "allocations are seen)"},
      {"--no-kernel-time",
       "no kernel time: libgpuflame_cupti.so leaves CUPTI alone, the\n"
       "agent does not report processes that lack it"},
      {"--kernel-activity A",
       "CUPTI activity exact (on all the time: record's default) or\n"
       "sampled (one second in ten at a random phase, records\n"
       "weighted ten: the agent's default; the first 5 s of a\n"
       "process are seen whole)"},
      {"--launch-stacks W",
       "where kernel launches' stacks are taken: callbacks (CUPTI's\n"
       "launch callbacks in libgpuflame_cupti.so: record's default;\n"
       "once on, every launch pays their dispatch) or uprobes (on\n"
       "libcuda's launch functions, only in the library's launch\n"
       "windows, joined to CUPTI's records of those calls: the\n"
       "agent's default)"},
      {"--tensor-sampling S",
       "tensor allocations exact (every one: record's default) or\n"
       "sampled (by bytes, one per 4 MiB on average, values scaled\n"
       "to unbiased estimates: the agent's default; allocations of\n"
       "4 MiB or more and a process's start-up are exact)"},
      {"--tensor-startup-s N",
       "with sampled tensor events through the probes, a process's\n"
       "first N seconds from its first tensor are exact (default\n"
       "30; the injection library's start-up is GPUFLAME_STARTUP_S,\n"
       "5 s from cuInit, in the workload's environment)"},
      {"--ring-buffer-kb N",
       "BPF ring buffer size in KiB, a power of two (default 16384):\n"
       "what it has no room for is under \"[lost: ring buffer full]\""},
      {"--tensor-events W",
       "where PyTorch's allocator is observed: inprocess\n"
       "(libgpuflame_cupti.so hooks it inside the workload: no trap\n"
       "per event), probes (a uprobe per event), or auto (default:\n"
       "inprocess for record's own command, probes otherwise)"},
      {"--binaries DIR",
       "name raw-address frames from binaries or debug files here,\n"
       "matched by build ID (repeatable or a,b; default /usr/lib/debug)"},
      {"--max-cpu C",
       "gpuflame's own CPU budget in cores, averaged over 10 s (default 1;\n"
       "0: none): over it, native stacks, then CPU samples, then\n"
       "tensor events are shed, counted and said in the output"},
      {"--max-overhead P",
       "gpuflame's time in the profiled processes (its BPF programs) as\n"
       "a percentage of their CPU time, over 10 s (record: none; agent:\n"
       "1): over it, the --max-cpu steps are taken, in the same order"},
      {"--max-memory-mb N",
       "gpuflame's own memory budget (default 768; 0: none): over it,\n"
       "native stacks are shed, then new stacks are not kept"},
  };
  std::string out;
  for (const auto& [flag, text] : kLines) {
    std::string pad = absl::StrFormat("      %-*s", column - 6, flag);
    if (pad.size() > static_cast<size_t>(column)) pad += "\n" + std::string(column, ' ');
    std::string body = text;
    for (size_t nl = body.find('\n'); nl != std::string::npos; nl = body.find('\n', nl + column + 1))
      body.insert(nl + 1, std::string(column, ' '));
    absl::StrAppend(&out, pad, body, "\n");
  }
  return out;
}

}  // namespace gpuflame::profiler
