#include "profiler/utilization/gpu_sampler.h"

#include <time.h>

namespace gpuflame::profiler::utilization {
namespace {

uint64_t Now(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

GpuSampler::GpuSampler(std::unique_ptr<GpuReader> reader, GpuSamplerOptions options)
    : reader_(std::move(reader)), options_(options), figures_(reader_->gpus()) {
  ReadOnce();  // GPM's first sample, and the processes already there
  thread_ = std::thread([this] { Run(); });
}

GpuSampler::~GpuSampler() { Stop(); }

void GpuSampler::Stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  ReadOnce(/*last=*/true);
}

void GpuSampler::ReadOnce(bool last) {
  const uint64_t cpu_before = Now(CLOCK_THREAD_CPUTIME_ID);
  const uint64_t now = Now(CLOCK_MONOTONIC);  // the BPF programs' clock (bpf_ktime_get_ns)
  // The per-process figures and which process is on which GPU cost the
  // most to read (GpuReader::Read) and change slowly: once a second.
  const uint64_t per_second = std::max<int64_t>(1, 1000 / std::max<int64_t>(1, options_.interval.count()));
  const bool this_second = reads_.fetch_add(1, std::memory_order_relaxed) % per_second == 0 || last;
  std::vector<GpuReading> readings = reader_->Read(now, this_second);
  absl::StatusOr<DeviceProcesses> listed = absl::NotFoundError("not this reading");
  if (this_second) listed = reader_->ComputeProcesses();
  {
    std::lock_guard lock(figures_mu_);
    figures_.Add(now, std::move(readings));
    if (listed.ok())
      for (const DeviceProcess& p : listed->processes) figures_.OnComputeProcess(p.device, p.pid);
    const uint64_t keep_ns = static_cast<uint64_t>(options_.retention.count()) * 1'000'000'000ull;
    if (keep_ns && now > keep_ns) figures_.Trim(now - keep_ns);
    missing_ = reader_->missing();
  }
  cpu_ns_.fetch_add(Now(CLOCK_THREAD_CPUTIME_ID) - cpu_before, std::memory_order_relaxed);
}

std::vector<GpuNow> GpuSampler::Recent(uint64_t from_mono_ns) const {
  std::lock_guard lock(figures_mu_);
  std::vector<GpuNow> out;
  for (const GpuIdentity& g : figures_.gpus()) out.push_back({g, figures_.Over(g.index, from_mono_ns)});
  return out;
}

DeviceStats GpuSampler::Over(uint32_t index, uint64_t from_mono_ns, uint64_t to_mono_ns) const {
  std::lock_guard lock(figures_mu_);
  return figures_.Over(index, from_mono_ns, to_mono_ns);
}

std::map<std::string, std::string> GpuSampler::Missing() const {
  std::lock_guard lock(figures_mu_);
  return missing_;
}

void GpuSampler::Run() {
  std::unique_lock lock(mu_);
  auto next = std::chrono::steady_clock::now() + options_.interval;
  while (!stop_) {
    if (wake_.wait_until(lock, next, [this] { return stop_; })) break;
    lock.unlock();
    ReadOnce();
    lock.lock();
    // A slow reading skips the windows it overran rather than reading in a burst.
    next += options_.interval;
    if (const auto now = std::chrono::steady_clock::now(); next < now) next = now + options_.interval;
  }
}

}  // namespace gpuflame::profiler::utilization
