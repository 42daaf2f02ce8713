#include "profiler/pipeline/driver_held.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {

DriverHeld::DriverHeld(Opener open) : open_(std::move(open)) {
  if (!open_) open_ = [] { return Nvml::Open(); };
}

Nvml* DriverHeld::Get() {
  if (tried_) return nvml_.get();
  tried_ = true;
  auto nvml = open_();
  if (nvml.ok()) {
    nvml_ = std::move(*nvml);
    return nvml_.get();
  }
  // Said once, where the profiles are read (record: the summary and the
  // gpu_memory profile; the agent: its log).
  unavailable_ = absl::StrCat(
      "device memory held before gpuflame attached is not shown: NVML is unavailable (", nvml.status().message(),
      "); gpu_memory in use of processes found running counts only what they allocated since (", Nvml::kLibraryVariable,
      " names the library where the loader does not find ", Nvml::kSoname, ")");
  Warn(unavailable_);
  return nullptr;
}

void DriverHeld::Warn(std::string message) {
  if (warned_.size() >= kMaxWarned) warned_.clear();  // bounded: most name a pid
  if (warned_.insert(message).second) warnings_.push_back(std::move(message));
}

absl::flat_hash_map<uint32_t, uint64_t> DriverHeld::ReadDriver(std::span<const pid_t> pids) {
  absl::flat_hash_map<uint32_t, uint64_t> held;
  Nvml* nvml = Get();
  if (!nvml) return held;
  auto list = nvml->ComputeProcesses();
  if (!list.ok()) {
    Warn(absl::StrCat("device memory held before gpuflame attached: ", list.status().message()));
    return held;
  }
  for (const std::string& gpu : list->unreadable) Warn(absl::StrCat("NVML (", nvml->name(), "): ", gpu));
  const absl::flat_hash_set<uint32_t> wanted(pids.begin(), pids.end());
  absl::flat_hash_set<uint32_t> unknown;
  for (const DeviceProcess& p : list->processes) {
    if (!wanted.contains(p.pid)) continue;
    if (!p.bytes) {
      unknown.insert(p.pid);
      continue;
    }
    held[p.pid] += *p.bytes;  // device-level events do not say which GPU: summed
  }
  // Part of a figure would be a guess: none.
  for (uint32_t pid : unknown) {
    held.erase(pid);
    Warn(absl::StrCat("pid ", pid,
                      ": the driver does not say how much device memory it holds (NVML_VALUE_NOT_AVAILABLE, as under "
                      "some MIG and container setups): what it held before gpuflame attached is not in gpu_memory"));
  }
  return held;
}

DriverHeld::Reading DriverHeld::ReadQuietly(std::span<const pid_t> pids, EventProcessor& events,
                                            const std::function<void()>& drain) {
  Reading r;
  if (drain) drain();
  const auto before = events.InUse(GF_DOMAIN_GPU, pids);
  r.driver = ReadDriver(pids);
  if (r.driver.empty()) return r;
  if (drain) drain();
  const auto after = events.InUse(GF_DOMAIN_GPU, pids);
  for (const auto& [pid, bytes] : after)
    if (auto it = before.find(pid); it != before.end() && it->second == bytes) r.quiet.insert(pid);
  return r;
}

void DriverHeld::OnAttached(std::span<const pid_t> pids, EventProcessor& events, const std::function<void()>& drain) {
  std::vector<pid_t> left(pids.begin(), pids.end());
  for (int attempt = 0; attempt < kQuietAttempts && !left.empty(); attempt++) {
    Reading r = ReadQuietly(left, events, drain);
    std::vector<pid_t> again;
    for (pid_t pid : left) {
      auto it = r.driver.find(static_cast<uint32_t>(pid));
      if (it == r.driver.end()) continue;  // not listed: no CUDA context yet, nothing held
      // One that kept allocating through every attempt is charged from the
      // last: off by what moved during the reading, a few milliseconds' worth.
      if (!r.quiet.contains(it->first) && attempt + 1 < kQuietAttempts) {
        again.push_back(pid);
        continue;
      }
      events.AccountHeldBeforeAttach(pid, it->second, /*lower_only=*/false);
      if (events.HeldBeforeAttach(pid) > 0) charged_.insert(it->first);
    }
    left = std::move(again);
  }
}

void DriverHeld::Refresh(EventProcessor& events, const std::function<bool(pid_t)>& exited,
                         const std::function<void()>& drain) {
  if (charged_.empty()) return;
  std::vector<pid_t> pids;
  absl::erase_if(charged_, [&](uint32_t upid) {
    const auto pid = static_cast<pid_t>(upid);
    // Gone, frozen or with nothing left to lower: its figure stays as it is.
    if (exited(pid) || events.tracker().Frozen(pid) || events.HeldBeforeAttach(pid) <= 0) return true;
    pids.push_back(pid);
    return false;
  });
  if (pids.empty()) return;
  Reading r = ReadQuietly(pids, events, drain);
  for (pid_t pid : pids) {
    const auto upid = static_cast<uint32_t>(pid);
    // Not listed (exiting) or not quiet: the next build reads it again.
    if (auto it = r.driver.find(upid); it != r.driver.end() && r.quiet.contains(upid))
      events.AccountHeldBeforeAttach(pid, it->second, /*lower_only=*/true);
  }
}

}  // namespace gpuflame::profiler
