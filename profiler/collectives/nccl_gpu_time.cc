// NcclTracker's GPU time: NCCL's kernels joined back to the NCCL call that
// launched them (nccl_tracker.h says how, and what a group's kernels go to).
#include <algorithm>

#include "bpf/nccl_kernel_name.h"
#include "profiler/aggregate/kernel_joiner.h"
#include "profiler/collectives/nccl_api.h"
#include "profiler/collectives/nccl_tracker.h"

namespace gpuflame::profiler {
namespace {

// One call's bytes, and in bus-bandwidth terms (none: not known).
std::pair<uint64_t, std::optional<uint64_t>> Moved(const NcclCall& c, int nranks) {
  const uint64_t bytes = NcclCallBytes(c.api, c.count, c.datatype).value_or(0);
  return {bytes, NcclBusBytes(c.api, bytes, nranks)};
}

uint64_t Add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
uint64_t Mul(uint64_t a, uint64_t b) { return b && a > UINT64_MAX / b ? UINT64_MAX : a * b; }

}  // namespace

std::optional<NcclTracker::GpuLaunch> NcclTracker::LaunchInCall(pid_t pid, uint32_t tid, uint64_t ts_ns, bool hit) {
  if (in_flight_.empty()) return std::nullopt;  // the common case: no NCCL call anywhere
  auto it = in_flight_.find(ThreadKey{pid, tid});
  if (it == in_flight_.end()) return std::nullopt;  // not NCCL's
  InFlight& f = it->second;
  const NcclCall& c = f.call;
  if (!IsNcclCollective(c.api) && !IsNcclPointToPoint(c.api) && c.api != GF_API_NCCL_GROUP_END) {
    stats_.gpu_launches_other_calls++;  // init's copies and the like: no operation to charge
    return std::nullopt;
  }
  // Room first, so that a launch dropped takes nothing of its call's (its
  // first launch carries the call's bytes).
  auto full = [&] { return (hit ? route_hits_.size() : gpu_launches_.size()) >= kMaxGpuLaunches; };
  if (full()) {
    ExpireGpuLaunches(ts_ns);
    if (full()) {
      stats_.dropped_gpu_launches++;
      return std::nullopt;
    }
  }
  GpuLaunch l;
  l.stack = c.stack;
  l.api = c.api;
  l.ts_ns = ts_ns;
  // Every launch of the call says whether its bus bytes are known (its
  // kernels' time counts for the bandwidth then); the first carries them.
  l.first = f.launches++ == 0;
  l.bus_known = true;
  auto add = [&](const NcclCall& call) {
    const auto [bytes, bus] = Moved(call, RankOf(call.pid, call.comm).second);
    l.bytes = Add(l.bytes, bytes);
    if (bus) l.bus_bytes = Add(l.bus_bytes, *bus);
    else l.bus_known = false;
  };
  if (c.api == GF_API_NCCL_GROUP_END) {
    for (const auto& [g, seq] : f.grouped) add(g);
    if (f.grouped.empty()) l.bus_known = false;
  } else {
    add(c);
  }
  return l;
}

void NcclTracker::OnLaunch(pid_t pid, uint32_t tid, uint32_t correlation, uint64_t ts_ns) {
  auto l = LaunchInCall(pid, tid, ts_ns, /*hit=*/false);
  if (!l) return;
  stats_.gpu_launches++;
  auto [at, inserted] = gpu_launches_.insert_or_assign(PidKey{pid, correlation}, *l);
  // A correlation ID the process gave twice before the first's record came:
  // the first launch is lost, since no record can tell the two apart.
  if (!inserted) stats_.gpu_launches_replaced++;
}

// A hit is counted as a launch once joined: the launch route's joiner
// counts those never joined (LaunchRouteStats), and they go at the TTL.
void NcclTracker::OnLaunchHit(pid_t pid, uint32_t tid, uint64_t ts_ns) {
  if (auto l = LaunchInCall(pid, tid, ts_ns, /*hit=*/true)) route_hits_[HitKey{pid, tid, ts_ns}] = *l;
}

void NcclTracker::OnLaunchJoined(pid_t pid, uint32_t tid, uint32_t correlation, uint64_t ts_ns) {
  if (route_hits_.empty()) return;
  auto it = route_hits_.find(HitKey{pid, tid, ts_ns});
  if (it == route_hits_.end()) return;  // not in an NCCL call
  const GpuLaunch l = it->second;
  route_hits_.erase(it);
  if (gpu_launches_.size() >= kMaxGpuLaunches) ExpireGpuLaunches(ts_ns);
  auto [at, inserted] = gpu_launches_.try_emplace(PidKey{pid, correlation}, l);
  if (!inserted) {
    // Taken by the callbacks too, as the route's last window closed on a
    // process handed back to them: one launch, which may be its call's first.
    at->second.first = at->second.first || l.first;
    return;
  }
  if (gpu_launches_.size() > kMaxGpuLaunches) {
    gpu_launches_.erase(at);
    stats_.dropped_gpu_launches++;
    return;
  }
  stats_.gpu_launches++;
}

void NcclTracker::OnKernelName(pid_t pid, uint32_t name_id, std::string_view name) {
  if (!IsNcclKernelName(name.data(), name.size())) return;
  if (nccl_kernel_names_.size() >= kMaxNcclKernelNames) {
    stats_.dropped_kernel_names++;
    return;
  }
  nccl_kernel_names_.insert(PidKey{pid, name_id});
}

void NcclTracker::OnGpuRecords(pid_t pid, std::span<const gf_kernel_record> records) {
  if (gpu_launches_.empty() && nccl_kernel_names_.empty()) return;  // no NCCL process: nothing to look up
  for (const gf_kernel_record& r : records) {
    if (r.kind != GF_GPU_KERNEL) continue;
    // As the kernel joiner counts them: clamped, each record worth its weight.
    const uint64_t span =
        std::min<uint64_t>(r.end_ns > r.start_ns ? r.end_ns - r.start_ns : 0, static_cast<uint64_t>(kMaxKernelNs));
    const uint64_t weight = std::clamp<uint64_t>(r.weight, 1, GF_KERNEL_WEIGHT_MAX);
    const uint64_t nanos = Mul(span, weight);
    auto it = gpu_launches_.find(PidKey{pid, r.correlation});
    if (it == gpu_launches_.end()) {
      if (nccl_kernel_names_.contains(PidKey{pid, r.name_id})) {
        stats_.gpu_records_not_joined++;
        stats_.gpu_nanos_not_joined = Add(stats_.gpu_nanos_not_joined, nanos);
      }
      continue;
    }
    const GpuLaunch& l = it->second;
    stats_.gpu_records++;
    if (l.stack != StackTable::kNone) {
      NcclStackTotals& t = totals_[l.stack];
      t.gpu_nanos = Add(t.gpu_nanos, nanos);
    }
    const size_t api = size_t{l.api} - GF_API_NCCL_ALL_REDUCE;
    if (l.api >= GF_API_NCCL_ALL_REDUCE && api < kApis) {
      by_api_[api].gpu_nanos = Add(by_api_[api].gpu_nanos, nanos);
      NcclGpuTotals& g = gpu_by_api_[api];
      g.nanos = Add(g.nanos, nanos);
      if (l.first) {
        g.calls += weight;
        g.bytes = Add(g.bytes, Mul(l.bytes, weight));
        if (l.bus_known) g.bus_bytes = Add(g.bus_bytes, Mul(l.bus_bytes, weight));
      }
      if (l.bus_known) g.bus_nanos = Add(g.bus_nanos, nanos);
    }
    // One kernel per launch: NCCL launches no graphs of its own.
    gpu_launches_.erase(it);
  }
}

void NcclTracker::ExpireGpuLaunches(uint64_t now_ns) {
  last_gpu_sweep_ns_ = now_ns;
  auto old = [&](const auto& kv) { return now_ns > kv.second.ts_ns && now_ns - kv.second.ts_ns > kGpuLaunchTtlNs; };
  stats_.gpu_launches_without_record += absl::erase_if(gpu_launches_, old);
  absl::erase_if(route_hits_, old);  // never joined: the route's joiner counted them
}

void NcclTracker::ForgetGpuProcess(pid_t pid) {
  stats_.gpu_launches_without_record +=
      absl::erase_if(gpu_launches_, [&](const auto& kv) { return kv.first.first == pid; });
  absl::erase_if(route_hits_, [&](const auto& kv) { return std::get<0>(kv.first) == pid; });
  absl::erase_if(nccl_kernel_names_, [&](const PidKey& k) { return k.first == pid; });
}

}  // namespace gpuflame::profiler
