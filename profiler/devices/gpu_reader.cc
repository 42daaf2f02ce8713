#include "profiler/devices/gpu_reader.h"

#include <time.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {
namespace {

// nvmlReturn_t values told apart here.
constexpr int kNotSupported = 3, kNotFound = 6, kFunctionNotFound = 13;
constexpr int kTemperatureGpu = 0;          // NVML_TEMPERATURE_GPU
constexpr int kClockSm = 1, kClockMem = 2;  // NVML_CLOCK_SM, NVML_CLOCK_MEM
constexpr unsigned int kUuidLength = 96;    // NVML_DEVICE_UUID_V2_BUFFER_SIZE
// nvml.h: GPM samples more than 100 ms apart; ours are timed around the
// sample call (ReadGpm), with a margin.
constexpr uint64_t kGpmMinPeriodNs = 110'000'000;

uint64_t Now(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// |text| as NVML filled it: up to its NUL, within |n|.
std::string Bounded(const char* text, size_t n) { return std::string(text, strnlen(text, n)); }

}  // namespace

// Charges the driver calls of its scope to one figure's cost.
class CostTimer {
 public:
  CostTimer(GpuReader& reader, const char* figure)
      : cost_(reader.costs_[figure]), cpu_(Now(CLOCK_THREAD_CPUTIME_ID)), wall_(Now(CLOCK_MONOTONIC)) {}
  ~CostTimer() {
    cost_.calls++;
    cost_.cpu_ns += Now(CLOCK_THREAD_CPUTIME_ID) - cpu_;
    cost_.wall_ns += Now(CLOCK_MONOTONIC) - wall_;
  }
  CostTimer(const CostTimer&) = delete;
  CostTimer& operator=(const CostTimer&) = delete;

 private:
  GpuReader::CallCost& cost_;
  uint64_t cpu_, wall_;
};

absl::StatusOr<std::unique_ptr<GpuReader>> GpuReader::Open(std::string library) {
  auto nvml = Nvml::Open(std::move(library));
  if (!nvml.ok()) return nvml.status();
  const Nvml& n = **nvml;
  NvmlReadingApi api;
  auto resolve = [&](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::decay_t<decltype(fn)>>(n.Symbol(symbol));
  };
  resolve(api.uuid, "nvmlDeviceGetUUID");
  resolve(api.name, "nvmlDeviceGetName");
  resolve(api.utilization, "nvmlDeviceGetUtilizationRates");
  resolve(api.process_utilization, "nvmlDeviceGetProcessUtilization");
  resolve(api.power, "nvmlDeviceGetPowerUsage");
  resolve(api.temperature, "nvmlDeviceGetTemperature");
  resolve(api.clock, "nvmlDeviceGetClockInfo");
  resolve(api.gpm_support, "nvmlGpmQueryDeviceSupport");
  resolve(api.gpm_alloc, "nvmlGpmSampleAlloc");
  resolve(api.gpm_free, "nvmlGpmSampleFree");
  resolve(api.gpm_sample, "nvmlGpmSampleGet");
  resolve(api.gpm_metrics, "nvmlGpmMetricsGet");
  return FromApi(std::move(*nvml), api);
}

absl::StatusOr<std::unique_ptr<GpuReader>> GpuReader::FromApi(std::unique_ptr<Nvml> nvml, const NvmlReadingApi& api) {
  auto count = nvml->DeviceCount();
  if (!count.ok()) return count.status();
  std::unique_ptr<GpuReader> reader(new GpuReader(std::move(nvml), api));
  reader->devices_.resize(std::min(*count, kMaxDevices));
  if (*count > kMaxDevices)
    reader->missing_["GPUs"] = absl::StrCat(*count - kMaxDevices, " GPUs past the first ", kMaxDevices, " not read");
  reader->Setup();
  return reader;
}

GpuReader::~GpuReader() {
  for (Device& d : devices_)
    for (NvmlGpmSample& s : d.samples)
      if (s && api_.gpm_free) (void)api_.gpm_free(s);
}

absl::StatusOr<DeviceProcesses> GpuReader::ComputeProcesses() {
  CostTimer timer(*this, "compute processes");
  return nvml_->ComputeProcesses();
}

bool GpuReader::Missing(uint32_t index, const char* figure, int result) {
  const bool permanent = result == kNotSupported || result == kFunctionNotFound;
  NoteMissing(absl::StrCat("GPU ", index, " ", figure), nvml_->Error(result), permanent);
  return permanent;
}

void GpuReader::NoteMissing(const std::string& key, const std::string& why, bool permanent) {
  missing_[key] = why;
  if (permanent) return;
  Failures& f = failed_[key];
  f.readings++;
  f.last = why;
}

void GpuReader::Read(uint32_t index, const char* figure) {
  // Only a figure that failed transiently can be missing and read: a
  // permanent one is never asked again.
  if (failed_.empty()) return;
  const std::string key = absl::StrCat("GPU ", index, " ", figure);
  if (failed_.contains(key)) missing_.erase(key);
}

void GpuReader::Setup() {
  for (uint32_t i = 0; i < devices_.size(); i++) {
    Device& d = devices_[i];
    GpuIdentity id;
    id.index = i;
    auto handle = nvml_->Device(i);
    if (!handle.ok()) {
      missing_[absl::StrCat("GPU ", i)] = std::string(handle.status().message());
      gpus_.push_back(id);
      continue;
    }
    d.handle = *handle;
    char text[kUuidLength] = {};
    if (api_.uuid && api_.uuid(d.handle, text, kUuidLength) == kNvmlSuccess) id.uuid = Bounded(text, kUuidLength);
    std::memset(text, 0, sizeof(text));
    if (api_.name && api_.name(d.handle, text, kUuidLength) == kNvmlSuccess) id.name = Bounded(text, kUuidLength);
    d.no_util = !api_.utilization;
    d.no_processes = !api_.process_utilization;
    d.no_power = !api_.power;
    d.no_temperature = !api_.temperature;
    d.no_clocks = !api_.clock;
    if (!api_.gpm_support || !api_.gpm_alloc || !api_.gpm_free || !api_.gpm_sample || !api_.gpm_metrics) {
      missing_[absl::StrCat("GPU ", i, " GPM")] =
          absl::StrCat(nvml_->name(), " has no GPM entry points (a driver before 520)");
    } else {
      NvmlGpmSupport support{1, 0};
      if (int r = api_.gpm_support(d.handle, &support); r != kNvmlSuccess) {
        Missing(i, "GPM", r);
      } else if (!support.is_supported_device) {
        missing_[absl::StrCat("GPU ", i, " GPM")] = "not supported on this GPU (GPM needs Hopper or newer)";
      } else if (int a = api_.gpm_alloc(&d.samples[0]), b = a == kNvmlSuccess ? api_.gpm_alloc(&d.samples[1]) : a;
                 a != kNvmlSuccess || b != kNvmlSuccess) {
        Missing(i, "GPM", a != kNvmlSuccess ? a : b);
      } else {
        id.gpm = true;
      }
    }
    gpus_.push_back(id);
  }
}

std::vector<GpuReading> GpuReader::Read(uint64_t now_ns, bool processes) {
  read_started_ = Now(CLOCK_MONOTONIC);
  std::vector<GpuReading> out;
  out.reserve(devices_.size());
  for (uint32_t i = 0; i < devices_.size(); i++) {
    Device& d = devices_[i];
    if (!d.handle) continue;
    GpuReading& r = out.emplace_back();
    r.index = i;
    if (!d.no_util) {
      CostTimer timer(*this, "utilization");
      NvmlUtilization u{};
      if (int e = api_.utilization(d.handle, &u); e == kNvmlSuccess) {
        r.util_gpu = u.gpu;
        r.util_memory = u.memory;
        Read(i, "utilization");
      } else {
        d.no_util = Missing(i, "utilization", e);
      }
    }
    if (!d.no_memory) {
      CostTimer timer(*this, "memory");
      if (auto m = nvml_->MemoryInfo(i); m.ok()) {
        r.memory_used = m->used;
        r.memory_total = m->total;
        Read(i, "memory");
      } else {
        d.no_memory = absl::IsUnimplemented(m.status());
        NoteMissing(absl::StrCat("GPU ", i, " memory"), std::string(m.status().message()), d.no_memory);
      }
    }
    unsigned int v = 0;
    if (!d.no_power) {
      CostTimer timer(*this, "power");
      if (int e = api_.power(d.handle, &v); e == kNvmlSuccess) {
        r.power_mw = v;
        Read(i, "power");
      } else {
        d.no_power = Missing(i, "power", e);
      }
    }
    if (!d.no_temperature) {
      CostTimer timer(*this, "temperature");
      if (int e = api_.temperature(d.handle, kTemperatureGpu, &v); e == kNvmlSuccess) {
        r.temperature_c = v;
        Read(i, "temperature");
      } else {
        d.no_temperature = Missing(i, "temperature", e);
      }
    }
    if (!d.no_clocks) {
      CostTimer timer(*this, "clocks");
      if (int e = api_.clock(d.handle, kClockSm, &v); e == kNvmlSuccess) {
        r.sm_clock_mhz = v;
        Read(i, "clocks");
      } else {
        d.no_clocks = Missing(i, "clocks", e);
      }
      if (!d.no_clocks && api_.clock(d.handle, kClockMem, &v) == kNvmlSuccess) r.memory_clock_mhz = v;
    }
    if (gpus_[i].gpm) {
      CostTimer timer(*this, "gpm");
      ReadGpm(i, d, now_ns, r);
    }
    if (processes && !d.no_processes) {
      CostTimer timer(*this, "per-process utilization");
      ReadProcesses(i, d, r);
    }
  }
  return out;
}

void GpuReader::ReadGpm(uint32_t index, Device& d, uint64_t now_ns, GpuReading& out) {
  // The samples' own times, not the reading's: the figures read before this
  // one (per-process ones take milliseconds) or a preemption on a loaded
  // machine put a sample later than |now_ns|, and NVML refuses two samples
  // 100 ms apart or less (Invalid Argument). |now_ns| plus the time this
  // reading has taken so far.
  const uint64_t before = now_ns + (Now(CLOCK_MONOTONIC) - read_started_);
  if (d.current >= 0 && before - d.sampled_ns <= kGpmMinPeriodNs) return;  // too soon: the next reading spans more
  const int next = d.current < 0 ? 0 : 1 - d.current;
  if (int e = api_.gpm_sample(d.handle, d.samples[next]); e != kNvmlSuccess) {
    Missing(index, "GPM sample", e);
    return;
  }
  Read(index, "GPM sample");
  const int previous = d.current;
  d.current = next;
  d.sampled_ns = now_ns + (Now(CLOCK_MONOTONIC) - read_started_);  // after the call: the sample is no later
  if (previous < 0) return;  // the first sample: metrics need two
  NvmlGpmMetricsGet get{};
  get.version = 1;
  get.num_metrics = kGpmMetricsAsked;
  get.sample1 = d.samples[previous];
  get.sample2 = d.samples[next];
  const unsigned int ids[kGpmMetricsAsked] = {kGpmSmUtil, kGpmSmOccupancy, kGpmAnyTensorUtil, kGpmDramBwUtil};
  for (unsigned int k = 0; k < kGpmMetricsAsked; k++) get.metrics[k].metric_id = ids[k];
  if (int e = api_.gpm_metrics(&get); e != kNvmlSuccess) {
    Missing(index, "GPM metrics", e);
    return;
  }
  for (unsigned int k = 0; k < kGpmMetricsAsked; k++)
    if (get.metrics[k].result != kNvmlSuccess) {
      Missing(index, absl::StrCat("GPM metric ", ids[k]).c_str(), get.metrics[k].result);
      return;  // the four together or none: a partial set would be read as zeros
    }
  Read(index, "GPM metrics");
  for (unsigned int k = 0; k < kGpmMetricsAsked; k++) Read(index, absl::StrCat("GPM metric ", ids[k]).c_str());
  // NVML gives percentages; a counter wrap or a driver bug is kept in range.
  auto pct = [&](unsigned int k) { return std::clamp(get.metrics[k].value, 0.0, 100.0); };
  out.gpm = GpmFigures{pct(0), pct(1), pct(2), pct(3)};
}

void GpuReader::ReadProcesses(uint32_t index, Device& d, GpuReading& out) {
  unsigned int count = 0;
  int e = api_.process_utilization(d.handle, nullptr, &count, d.last_seen_us);
  if (e == kNotFound) {  // nothing sampled since the last reading: an answer all the same
    Read(index, "per-process utilization");
    return;
  }
  if (e != kNvmlSuccess && e != kNvmlErrorInsufficientSize) {
    d.no_processes = Missing(index, "per-process utilization", e);
    return;
  }
  if (count == 0) return;
  count = std::min(count, kMaxProcessSamples);
  buffer_.assign(count, NvmlProcessUtilization{});
  e = api_.process_utilization(d.handle, buffer_.data(), &count, d.last_seen_us);
  if (e == kNotFound) return;
  if (e != kNvmlSuccess) {  // INSUFFICIENT_SIZE again: more came since; the next reading gets them
    if (e != kNvmlErrorInsufficientSize) d.no_processes = Missing(index, "per-process utilization", e);
    return;
  }
  Read(index, "per-process utilization");
  std::map<uint32_t, ProcessUtilization> by_pid;
  for (unsigned int k = 0; k < std::min<size_t>(count, buffer_.size()); k++) {
    const NvmlProcessUtilization& s = buffer_[k];
    ProcessUtilization& p = by_pid[s.pid];
    p.pid = s.pid;
    // Summed here, averaged below; a value over 100 is the driver's, kept in range.
    p.sm_util += std::min(s.sm_util, 100u);
    p.mem_util += std::min(s.mem_util, 100u);
    p.samples++;
    d.last_seen_us = std::max(d.last_seen_us, s.time_us);
  }
  for (auto& [pid, p] : by_pid) {
    p.sm_util /= p.samples;
    p.mem_util /= p.samples;
    out.processes.push_back(p);
  }
}

}  // namespace gpuflame::profiler
