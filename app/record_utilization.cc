#include "app/record_utilization.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/human_units.h"
#include "profiler/utilization/idle_profile.h"

namespace gpuflame::profiler {
namespace {

using utilization::Ratio;

double Seconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }
double Micros(uint64_t ns) { return static_cast<double>(ns) / 1e3; }
double Round(double v, int digits) {
  const double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

// The figures the verdict reads, of the whole run or its steady state.
nlohmann::json PartJson(const utilization::PartStats& p) {
  nlohmann::json j;
  j["span_s"] = Round(Seconds(p.span_ns()), 6);
  j["busy_s"] = Round(Seconds(p.busy_ns), 6);
  j["busy_ratio"] = Round(Ratio(p.busy_ns, p.span_ns()), 4);
  j["idle_gaps"] = {
      {"count", p.gaps}, {"seconds", Round(Seconds(p.gap_ns), 6)}, {"ratio", Round(Ratio(p.gap_ns, p.span_ns()), 4)}};
  j["short_gaps_s"] = Round(Seconds(p.short_gap_ns), 6);
  const utilization::DurationHistogram& h = p.kernel_durations;
  j["kernels"] = {{"count", p.kernels},
                  {"seconds", Round(Seconds(p.kernel_ns), 6)},
                  {"p50_us", Round(Micros(h.Quantile(0.5)), 2)},
                  {"p95_us", Round(Micros(h.Quantile(0.95)), 2)},
                  {"max_us", Round(Micros(h.max_ns()), 2)},
                  {"under_10us_ratio", Round(Ratio(p.short_kernels, p.kernels), 4)}};
  nlohmann::json copies = nlohmann::json::object();
  for (size_t d = 0; d < p.copies.size(); d++) {
    const utilization::CopyStats& c = p.copies[d];
    if (!c.count) continue;
    copies[utilization::DirectionName(static_cast<utilization::CopyDirection>(d))] = {
        {"count", c.count},
        {"bytes", c.bytes},
        {"seconds", Round(Seconds(c.ns), 6)},
        {"gb_per_s", c.ns ? Round(static_cast<double>(c.bytes) / static_cast<double>(c.ns), 3) : 0.0}};
  }
  j["copies"] = copies;
  j["memsets"] = {{"count", p.memsets}, {"bytes", p.memset_bytes}};
  return j;
}

// NVML's figures of one GPU over a stretch: mean and max of each figure
// the driver gave; a figure it did not give is absent (see "missing").
nlohmann::json StatsJson(const utilization::DeviceStats& s, const absl::flat_hash_map<pid_t, std::string>& comm) {
  nlohmann::json j;
  j["readings"] = s.readings;
  auto put = [&](const char* name, const utilization::FigureStat& f, int digits) {
    if (f.n) j[name] = {{"mean", Round(f.mean(), digits)}, {"max", Round(f.max, digits)}, {"readings", f.n}};
  };
  put("utilization_gpu_pct", s.util_gpu, 1);
  put("utilization_memory_pct", s.util_memory, 1);
  put("gpm_sm_active_pct", s.gpm_sm, 1);
  put("gpm_sm_occupancy_pct", s.gpm_occupancy, 1);
  put("gpm_tensor_active_pct", s.gpm_tensor, 1);
  put("gpm_dram_bandwidth_pct", s.gpm_dram, 1);
  put("memory_used_bytes", s.memory_used, 0);
  put("power_w", s.power_w, 1);
  put("temperature_c", s.temperature_c, 1);
  put("sm_clock_mhz", s.sm_clock_mhz, 0);
  put("memory_clock_mhz", s.memory_clock_mhz, 0);
  // Per-process SM utilisation of the recorded processes (the driver's
  // list holds every process on the GPU; others are counted, not named).
  nlohmann::json procs = nlohmann::json::array();
  size_t others = 0;
  for (const auto& [pid, f] : s.process_sm) {
    if (!comm.contains(static_cast<pid_t>(pid))) {
      others++;
      continue;
    }
    procs.push_back(
        {{"pid", pid}, {"sm_pct_mean", Round(f.mean(), 1)}, {"sm_pct_max", Round(f.max, 1)}, {"readings", f.n}});
  }
  j["process_sm_utilization"] = procs;
  j["other_processes"] = others;
  return j;
}

// |j| as text for summary.json and the HTML page's data block: invalid
// UTF-8 (a process's name is any bytes it set) becomes U+FFFD, and '<', '>'
// and '&' are \u escapes, as base::JsonString writes them, so no
// "</script>" appears (in JSON text those occur only inside strings).
std::string Dump(const nlohmann::json& j) {
  const std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else out += c;
  }
  return out;
}

}  // namespace

RecordUtilization::RecordUtilization(bool lanes, const UtilizationRequest& request, EventProcessor& events)
    : events_(events) {
  const char* kinds = std::getenv("GPUFLAME_CUPTI_KINDS");
  sync_asked_ = request.sync_waits || (kinds && std::string_view(kinds).find("sync") != std::string_view::npos);
  if (auto reader = GpuReader::Open(); reader.ok())
    sampler_ = std::make_unique<utilization::GpuSampler>(
        std::move(*reader), utilization::GpuSamplerOptions{.interval = std::chrono::milliseconds(request.interval_ms)});
  else no_nvml_ = std::string(reader.status().message());
  if (!lanes) return;
  utilization::UtilizationOptions o;
  o.lane.window_ns = request.interval_ms * 1'000'000;
  o.lane.gap_ns = request.idle_gap_ms * 1'000'000;
  utilization_ = std::make_unique<utilization::Utilization>(o);
  events.SetUtilization(utilization_.get());
}

RecordUtilization::~RecordUtilization() {
  if (utilization_) events_.SetUtilization(nullptr);
}

void RecordUtilization::Finish() {
  if (sampler_) sampler_->Stop();
  if (!utilization_) return;
  utilization_->Finish();
  std::map<std::pair<pid_t, uint32_t>, uint64_t> steady;
  for (const auto& [key, lane] : utilization_->lanes()) {
    reports_.push_back(utilization::SteadyState(key.first, key.second, lane));
    steady[key] = reports_.back().steady_start_ns;
  }
  join_ = utilization_->JoinIdle(steady);
  std::map<pid_t, size_t> lanes_of;
  for (const utilization::LaneReport& r : reports_) lanes_of[r.pid]++;
  for (utilization::LaneReport& r : reports_) {
    LaneGpu& g = lane_gpus_.emplace_back();
    g.uuid = utilization_->uuids().Of(r.pid, r.device);
    if (!sampler_) {
      g.why = absl::StrCat("NVML is not read: ", no_nvml_);
    } else if (g.index = sampler_->figures().GpuOf(static_cast<uint32_t>(r.pid), lanes_of[r.pid], g.uuid, &g.why);
               g.index) {
      // The steady state on the sampler's clock; the whole run without a clock pair.
      const std::optional<uint64_t> from = utilization_->clock().ToMonotonic(r.pid, r.steady_start_ns);
      g.steady = sampler_->figures().Over(*g.index, from.value_or(0));
    }
    auto it = join_.sync_in_gaps_ns.find({r.pid, r.device});
    utilization::Judge(r, it == join_.sync_in_gaps_ns.end() ? 0 : it->second, g.index ? &g.steady : nullptr, g.why);
  }
}

std::optional<Profile> RecordUtilization::IdleProfile(const absl::flat_hash_map<pid_t, std::string>& comm,
                                                      int64_t time_nanos, int64_t duration_nanos) const {
  if (!utilization_ || join_.ns.empty()) return std::nullopt;
  return utilization::BuildIdleProfile(events_.stack_source(), join_, comm, time_nanos, duration_nanos);
}

std::vector<std::pair<std::string, double>> RecordUtilization::TopIdle(pid_t pid, uint32_t device, size_t n) const {
  absl::flat_hash_map<std::string, uint64_t> by_frame;
  uint64_t total = 0;
  const StackSource source = events_.stack_source();
  for (const auto& [charge, ns] : join_.ns) {
    if (charge.pid != pid || charge.device != device || charge.start_up) continue;
    total += ns;
    std::string name = utilization::kNoThreadOnCpuFrame;
    if (charge.stack != StackTable::kNone && charge.stack < source.stacks.size()) {
      name = "[no Python frame]";
      const StackInfo& stack = source.stacks.Get(charge.stack);
      for (auto f = stack.frames.rbegin(); f != stack.frames.rend(); ++f)
        if (source.frames.Get(*f).kind == symbolizer::FrameKind::kPython) {
          name = source.frames.Get(*f).name;
          break;
        }
    }
    by_frame[name] += ns;
  }
  std::vector<std::pair<std::string, double>> top;
  for (const auto& [name, ns] : by_frame) top.emplace_back(name, Ratio(ns, total));
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (top.size() > n) top.resize(n);
  return top;
}

std::vector<std::pair<std::string, double>> RecordUtilization::TopSyncStacks(pid_t pid, size_t n) const {
  absl::flat_hash_map<std::string, uint64_t> by_stack;
  uint64_t total = 0;
  const StackSource source = events_.stack_source();
  for (const auto& [key, ns] : utilization_->sync_stacks()) {
    if (key.first != pid) continue;
    total += ns;
    std::string name;
    if (key.second != StackTable::kNone && key.second < source.stacks.size()) {
      const StackInfo& stack = source.stacks.Get(key.second);
      for (auto f = stack.frames.begin(); f != stack.frames.end(); ++f)
        if (source.frames.Get(*f).kind == symbolizer::FrameKind::kPython)
          absl::StrAppend(&name, name.empty() ? "" : ";", source.frames.Get(*f).name);
    }
    by_stack[name.empty() ? std::string("[no Python frame]") : name] += ns;
  }
  std::vector<std::pair<std::string, double>> top;
  for (const auto& [name, ns] : by_stack) top.emplace_back(name, Ratio(ns, total));
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (top.size() > n) top.resize(n);
  return top;
}

std::string RecordUtilization::SummaryJson(const absl::flat_hash_map<pid_t, std::string>& comm) const {
  if (!utilization_ && !sampler_) return "null";
  nlohmann::json j;
  j["sources"] = {
      {"busy, gaps, kernels, copies",
       utilization_ ? "CUPTI activity (exact in record)" : "not read: kernel time is off (--no-kernel-time)"},
      {"sync", !utilization_ ? "not read: kernel time is off"
               : sync_asked_ ? "uprobes on the CUDA synchronise calls; CUPTI SYNCHRONIZATION activity too, counted "
                               "only for a process the probes never reported (never twice)"
                             : "uprobes on the CUDA synchronise calls"},
      {"idle_time_stacks", utilization_ ? "CPU samples joined with the idle gaps" : "not read: kernel time is off"},
      {"devices", sampler_ ? absl::StrCat("NVML (", sampler_->reader().library(),
                                          "): classic utilisation rates, GPM metrics where the GPU has them, "
                                          "per-process SM utilisation, memory, power, temperature, clocks")
                           : absl::StrCat("not read: ", no_nvml_)}};
  nlohmann::json devices = nlohmann::json::array();
  if (sampler_) {
    const utilization::DeviceFigures& f = sampler_->figures();
    for (const GpuIdentity& g : f.gpus()) {
      nlohmann::json d = StatsJson(f.Over(g.index), comm);
      d["index"] = g.index;
      d["uuid"] = g.uuid;
      d["name"] = g.name;
      d["gpm"] = g.gpm;
      // Each reading's four figures, for a strip of the driver's own: one
      // per window, every n-th past 20,000 (said by the stride); null where
      // the driver gave none.
      size_t total = 0;
      f.ForEachReading(g.index, [&](uint64_t, const GpuReading&) { total++; });
      const size_t stride = std::max<size_t>(1, (total + 19'999) / 20'000);
      nlohmann::json t = nlohmann::json::array(), util = nlohmann::json::array(), sm = nlohmann::json::array(),
                     dram = nlohmann::json::array();
      size_t i = 0;
      uint64_t first = 0;
      f.ForEachReading(g.index, [&](uint64_t mono_ns, const GpuReading& r) {
        if (i++ % stride) return;
        if (t.empty()) first = mono_ns;
        t.push_back(Round(Seconds(mono_ns - first), 3));
        util.push_back(r.util_gpu ? nlohmann::json(*r.util_gpu) : nlohmann::json(nullptr));
        sm.push_back(r.gpm ? nlohmann::json(Round(r.gpm->sm_util, 1)) : nlohmann::json(nullptr));
        dram.push_back(r.gpm ? nlohmann::json(Round(r.gpm->dram_bw_util, 1)) : nlohmann::json(nullptr));
      });
      d["series"] = {{"stride", stride},
                     {"t_s", t},
                     {"utilization_gpu_pct", util},
                     {"gpm_sm_active_pct", sm},
                     {"gpm_dram_bandwidth_pct", dram}};
      devices.push_back(std::move(d));
    }
    nlohmann::json missing = nlohmann::json::object();
    for (const auto& [figure, why] : sampler_->reader().missing()) missing[figure] = why;
    j["devices_missing"] = missing;
    // Figures the driver has whose readings failed now and then (each is
    // missing from those readings' windows, and from devices_missing only
    // once read again).
    nlohmann::json failed = nlohmann::json::object();
    for (const auto& [figure, f] : sampler_->reader().failed())
      failed[figure] = {{"readings", f.readings}, {"last", f.last}};
    j["devices_failed_readings"] = failed;
    j["devices_readings_dropped"] = f.readings_dropped();
    // What reading the driver cost gpuflame (its sampler thread's CPU time).
    j["devices_cost"] = {
        {"readings", sampler_->reads()},
        {"cpu_s", Round(Seconds(sampler_->cpu_ns()), 6)},
        {"cpu_us_per_reading",
         Round(sampler_->reads() ? Micros(sampler_->cpu_ns()) / static_cast<double>(sampler_->reads()) : 0, 1)}};
    nlohmann::json calls = nlohmann::json::object();
    for (const auto& [figure, c] : sampler_->reader().costs())
      calls[figure] = {{"calls", c.calls},
                       {"cpu_us_per_call", Round(c.calls ? Micros(c.cpu_ns) / static_cast<double>(c.calls) : 0, 1)},
                       {"wall_us_per_call", Round(c.calls ? Micros(c.wall_ns) / static_cast<double>(c.calls) : 0, 1)}};
    j["devices_cost"]["by_figure"] = calls;
  }
  j["devices"] = devices;
  if (!utilization_) {
    j["gpus"] = nlohmann::json::array();
    return Dump(j);
  }
  const utilization::UtilizationOptions& o = utilization_->options();
  j["interval_ms"] = o.lane.window_ns / 1'000'000;
  j["idle_gap_ms"] = o.lane.gap_ns / 1'000'000;
  nlohmann::json lanes = nlohmann::json::array();
  for (size_t ri = 0; ri < reports_.size(); ri++) {
    const utilization::LaneReport& r = reports_[ri];
    const utilization::BusyLane& lane = utilization_->lanes().at({r.pid, r.device});
    nlohmann::json l;
    l["pid"] = r.pid;
    if (auto it = comm.find(r.pid); it != comm.end()) l["process"] = it->second;
    l["gpu"] = r.device;
    l["verdict"] = utilization::VerdictName(r.verdict);
    l["reason"] = r.reason;
    l["whole"] = PartJson(r.whole);
    l["steady"] = PartJson(r.steady);
    l["pauses"] = r.pauses;
    l["start_up"] = r.start_up_ns ? nlohmann::json{{"seconds", Round(Seconds(r.start_up_ns), 6)},
                                                   {"busy_s", Round(Seconds(r.start_up_busy_ns), 6)},
                                                   {"pauses", r.start_up_pauses}}
                                  : nlohmann::json(nullptr);
    l["idle_gaps_in_sync_s"] = Round(Seconds(r.sync_in_gaps_ns), 6);
    const LaneGpu g = ri < lane_gpus_.size() ? lane_gpus_[ri] : LaneGpu{};
    if (!g.uuid.empty()) l["uuid"] = g.uuid;
    l["nvml"] = g.index ? nlohmann::json{{"index", *g.index},
                                         {"by", g.uuid.empty() ? "process list" : "uuid"},
                                         {"steady", StatsJson(g.steady, comm)}}
                        : nlohmann::json{{"not_joined", g.why}};
    if (auto s = utilization_->syncs().find(r.pid); s != utilization_->syncs().end())
      l["sync"] = {{"calls", s->second.calls},
                   {"seconds", Round(Seconds(s->second.ns), 6)},
                   {"stream_s", Round(Seconds(s->second.stream_ns), 6)},
                   {"context_s", Round(Seconds(s->second.context_ns), 6)},
                   {"event_s", Round(Seconds(s->second.event_ns), 6)},
                   {"not_joined", s->second.not_kept + s->second.not_aligned},
                   {"source", s->second.from_probes ? "uprobes" : "CUPTI"},
                   {"cupti_ignored", s->second.cupti_ignored},
                   {"under", [&] {
                      nlohmann::json under = nlohmann::json::array();
                      for (const auto& [stack, share] : TopSyncStacks(r.pid, 5))
                        under.push_back({{"stack", stack}, {"share", Round(share, 4)}});
                      return under;
                    }()}};
    nlohmann::json top = nlohmann::json::array();
    for (const auto& [name, share] : TopIdle(r.pid, r.device, 5))
      top.push_back({{"frame", name}, {"share", Round(share, 4)}});
    l["idle_time_under"] = top;
    // The strip: each window's busy and idle-gap share, and its kernels.
    nlohmann::json busy = nlohmann::json::array(), gap = nlohmann::json::array(), kernels = nlohmann::json::array();
    for (const utilization::Window& w : lane.windows()) {
      busy.push_back(Round(Ratio(w.busy_ns, lane.window_ns()), 3));
      gap.push_back(Round(Ratio(w.gap_ns, lane.window_ns()), 3));
      kernels.push_back(w.kernels);
    }
    l["windows"] = {{"ms", lane.window_ns() / 1'000'000}, {"busy", busy}, {"idle_gap", gap}, {"kernels", kernels}};
    // Minute roll-ups of the same.
    nlohmann::json minutes = nlohmann::json::array();
    const size_t per_minute = std::max<size_t>(1, 60'000'000'000 / lane.window_ns());
    for (size_t i = 0; i < lane.windows().size(); i += per_minute) {
      uint64_t b = 0, g = 0, k = 0;
      const size_t end = std::min(lane.windows().size(), i + per_minute);
      for (size_t w = i; w < end; w++) {
        b += lane.windows()[w].busy_ns;
        g += lane.windows()[w].gap_ns;
        k += lane.windows()[w].kernels;
      }
      const uint64_t span = (end - i) * lane.window_ns();
      minutes.push_back({{"busy", Round(Ratio(b, span), 4)}, {"idle_gap", Round(Ratio(g, span), 4)}, {"kernels", k}});
    }
    l["minutes"] = minutes;
    nlohmann::json hist = nlohmann::json::array();
    const utilization::DurationHistogram& h = r.whole.kernel_durations;
    for (int i = 0; i < utilization::DurationHistogram::kBuckets; i++)
      if (h.bucket(i)) hist.push_back({utilization::DurationHistogram::Lower(i), h.bucket(i)});
    l["kernel_histogram_ns"] = hist;  // [bucket's lower bound, kernels]
    const utilization::LaneCounts& c = r.counts;
    l["records"] = {{"applied", c.records},
                    {"late", c.late_records},
                    {"late_s", Round(Seconds(c.late_ns), 6)},
                    {"duty_cycled", c.weighted_records},
                    {"gaps_not_joined", c.gaps_not_kept},
                    {"implausible", c.implausible}};
    lanes.push_back(std::move(l));
  }
  j["gpus"] = lanes;
  j["idle_join"] = {{"gaps", join_.gaps},
                    {"gaps_without_cpu_sample", join_.gaps_without_sample},
                    {"gaps_unaligned", join_.gaps_unaligned},
                    {"cpu_samples_kept", utilization_->samples()},
                    {"cpu_samples_dropped", join_.samples_dropped}};
  j["lanes_dropped_records"] = utilization_->lanes_dropped();
  return Dump(j);
}

std::vector<std::string> RecordUtilization::NvmlLines(const absl::flat_hash_map<pid_t, std::string>& comm) const {
  std::vector<std::string> lines;
  if (!sampler_) return lines;
  const utilization::DeviceFigures& f = sampler_->figures();
  for (const GpuIdentity& g : f.gpus()) {
    const utilization::DeviceStats s = f.Over(g.index);
    if (!s.readings) continue;
    std::string line = absl::StrFormat("NVML GPU %d (%s), over the recording", g.index, g.name.empty() ? "?" : g.name);
    if (s.util_gpu.n)
      absl::StrAppend(&line, absl::StrFormat(": a kernel running %.0f%% of the time (max %.0f%%), memory read or "
                                             "written %.0f%%",
                                             s.util_gpu.mean(), s.util_gpu.max, s.util_memory.mean()));
    if (s.gpm_sm.n)
      absl::StrAppend(&line,
                      absl::StrFormat("; GPM: SMs active %.0f%%, occupancy %.0f%%, tensor pipes %.0f%%, DRAM "
                                      "bandwidth %.0f%%",
                                      s.gpm_sm.mean(), s.gpm_occupancy.mean(), s.gpm_tensor.mean(), s.gpm_dram.mean()));
    if (s.power_w.n) absl::StrAppend(&line, absl::StrFormat("; %.0f W (max %.0f)", s.power_w.mean(), s.power_w.max));
    if (s.temperature_c.n) absl::StrAppend(&line, absl::StrFormat(", %.0f C", s.temperature_c.max));
    if (s.sm_clock_mhz.n) absl::StrAppend(&line, absl::StrFormat(", SM clock %.0f MHz", s.sm_clock_mhz.mean()));
    for (const auto& [pid, p] : s.process_sm)
      if (auto it = comm.find(static_cast<pid_t>(pid)); it != comm.end())
        absl::StrAppend(&line, absl::StrFormat("; pid %d (%s) SMs %.0f%%", pid, it->second, p.mean()));
    lines.push_back(std::move(line));
  }
  return lines;
}

std::vector<std::string> RecordUtilization::Lines(const absl::flat_hash_map<pid_t, std::string>& comm) const {
  std::vector<std::string> lines = NvmlLines(comm);
  if (!utilization_) return lines;
  for (const utilization::LaneReport& r : reports_) {
    const utilization::PartStats& s = r.steady;
    auto name = comm.find(r.pid);
    lines.push_back(
        absl::StrFormat("GPU %d of pid %d (%s): %s. busy %.1f%%, idle gaps %.1f%% (%d of %.0f ms or more) of %.2f s; "
                        "%d kernels, P50 %.1f us, P95 %.1f us, max %.1f us, %.0f%% under 10 us",
                        r.device, r.pid, name == comm.end() ? "?" : name->second, utilization::VerdictName(r.verdict),
                        100 * Ratio(s.busy_ns, s.span_ns()), 100 * Ratio(s.gap_ns, s.span_ns()), s.gaps,
                        static_cast<double>(r.gap_threshold_ns) / 1e6, Seconds(s.span_ns()), s.kernels,
                        Micros(s.kernel_durations.Quantile(0.5)), Micros(s.kernel_durations.Quantile(0.95)),
                        Micros(s.kernel_durations.max_ns()), 100 * Ratio(s.short_kernels, s.kernels)));
    lines.push_back(absl::StrCat("  why: ", r.reason));
    const size_t ri = static_cast<size_t>(&r - reports_.data());
    if (ri < lane_gpus_.size() && lane_gpus_[ri].index && lane_gpus_[ri].steady.readings) {
      const LaneGpu& g = lane_gpus_[ri];
      const utilization::DeviceStats& n = g.steady;
      std::string driver =
          absl::StrFormat("  NVML GPU %d over this steady state: a kernel running %.0f%%", *g.index, n.util_gpu.mean());
      if (n.gpm_sm.n)
        absl::StrAppend(&driver,
                        absl::StrFormat(", SMs active %.0f%%, tensor pipes %.0f%%, DRAM bandwidth %.0f%% (GPM)",
                                        n.gpm_sm.mean(), n.gpm_tensor.mean(), n.gpm_dram.mean()));
      if (auto p = n.process_sm.find(static_cast<uint32_t>(r.pid)); p != n.process_sm.end())
        absl::StrAppend(&driver, absl::StrFormat("; this process's SMs %.0f%%", p->second.mean()));
      lines.push_back(std::move(driver));
    }
    std::string copies;
    for (size_t d = 0; d < s.copies.size(); d++) {
      const utilization::CopyStats& c = s.copies[d];
      if (!c.count) continue;
      absl::StrAppend(
          &copies, copies.empty() ? "" : ", ", utilization::DirectionName(static_cast<utilization::CopyDirection>(d)),
          " ", base::HumanBytes(static_cast<int64_t>(c.bytes)),
          absl::StrFormat(" at %.2f GB/s", c.ns ? static_cast<double>(c.bytes) / static_cast<double>(c.ns) : 0.0));
    }
    if (auto y = utilization_->syncs().find(r.pid); y != utilization_->syncs().end())
      absl::StrAppend(&copies, copies.empty() ? "" : "; ",
                      absl::StrFormat("%d synchronise calls waited %.3f s", y->second.calls, Seconds(y->second.ns)));
    if (!copies.empty()) lines.push_back(absl::StrCat("  ", copies));
    std::string under;
    for (const auto& [frame, share] : TopIdle(r.pid, r.device, 3))
      absl::StrAppend(&under, under.empty() ? "" : ", ", absl::StrFormat("%.0f%% ", 100 * share), frame);
    if (!under.empty()) lines.push_back(absl::StrCat("  idle time under: ", under, " (gpu_idle.pb.gz)"));
    if (r.start_up_ns)
      lines.push_back(absl::StrFormat("  start-up: the first %.2f s (%d pause%s of 1 s or more, %.1f%% busy) set apart",
                                      Seconds(r.start_up_ns), r.start_up_pauses, r.start_up_pauses == 1 ? "" : "s",
                                      100 * Ratio(r.start_up_busy_ns, r.start_up_ns)));
    if (r.counts.late_records)
      lines.push_back(absl::StrFormat("  %d activity records came too late to merge (%.3f s of work left out of busy)",
                                      r.counts.late_records, Seconds(r.counts.late_ns)));
  }
  return lines;
}

}  // namespace gpuflame::profiler
