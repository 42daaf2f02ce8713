#include "profiler/aggregate/kernel_joiner.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "symbolizer/demangle.h"

namespace gpuflame::profiler {
namespace {

// Names of CUpti_ActivityMemcpyKind values, as Nsight prints them.
const char* CopyKind(uint8_t k) {
  static constexpr const char* kNames[] = {"?",    "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                           "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
  return k < std::size(kNames) ? kNames[k] : "?";
}

// What pools together: one kernel name, or one kind of copy / memset.
uint32_t PoolId(const gf_kernel_record& r) {
  if (r.kind == GF_GPU_KERNEL) return r.name_id;
  return 0xFF000000u | (static_cast<uint32_t>(r.kind) << 8) | r.copy_kind;
}

}  // namespace

void KernelJoiner::OnLaunch(pid_t pid, uint32_t correlation, StackId stack, uint64_t ts_ns) {
  stats_.launches++;
  if (launches_.size() >= kMaxPendingLaunches) {
    // Bounded: a process that launches but never completes work (or a lost
    // library) cannot grow this without limit. Oldest go first.
    Flush(ts_ns);
    if (launches_.size() >= kMaxPendingLaunches) return;
  }
  launches_[Key{pid, correlation}] = Launch{stack, ts_ns, false};
}

void KernelJoiner::OnName(pid_t pid, uint32_t name_id, std::string_view mangled) {
  names_[Key{pid, name_id}] = symbolizer::Demangle(mangled);
  auto held = unnamed_.extract(Key{pid, name_id});
  if (held.empty()) return;
  unnamed_count_ -= held.mapped().size();
  for (const Unnamed& u : held.mapped()) OnRecord(pid, u.record, u.now_ns, /*may_wait=*/false);
}

std::string ActivityLeafName(const gf_kernel_record& r, const std::string* kernel_name) {
  switch (r.kind) {
    case GF_GPU_KERNEL: return kernel_name ? *kernel_name : absl::StrCat("[kernel ", r.name_id, "]");
    case GF_GPU_MEMCPY: return absl::StrCat("[memcpy ", CopyKind(r.copy_kind), "]");
    case GF_GPU_MEMSET: return "[memset]";
    default: return "[gpu activity]";
  }
}

std::string KernelJoiner::LeafName(pid_t pid, const gf_kernel_record& r) {
  const std::string* name = nullptr;
  if (r.kind == GF_GPU_KERNEL) {
    auto it = names_.find(Key{pid, r.name_id});
    if (it != names_.end()) name = &it->second;
    else stats_.unknown_names++;
  }
  return ActivityLeafName(r, name);
}

StackId KernelJoiner::KernelStack(pid_t pid, StackId launch, const gf_kernel_record& r) {
  key_.assign("K");
  uint32_t pool = PoolId(r);
  key_.append(reinterpret_cast<const char*>(&pid), sizeof(pid));
  key_.append(reinterpret_cast<const char*>(&launch), sizeof(launch));
  key_.append(reinterpret_cast<const char*>(&pool), sizeof(pool));
  StackId id = stacks_.Find(key_);
  if (id != StackTable::kNone) return id;
  StackInfo info;
  info.pid = pid;
  info.domain = GF_DOMAIN_LAUNCH;
  if (launch != StackTable::kNone) {
    info.frames = stacks_.Get(launch).frames;
  } else {
    symbolizer::Frame marker;
    marker.kind = symbolizer::FrameKind::kMarker;
    marker.name = "[launch stack not sampled]";
    info.frames.push_back(frames_.Intern(marker));
  }
  symbolizer::Frame leaf;
  leaf.kind = symbolizer::FrameKind::kApi;
  leaf.name = LeafName(pid, r);
  info.frames.push_back(frames_.Intern(leaf));
  return stacks_.Insert(key_, std::move(info));
}

void KernelJoiner::OnRecords(pid_t pid, std::span<const gf_kernel_record> records, uint64_t now_ns) {
  // Only GPU work is charged to stacks: sync waits, activity windows and
  // kinds from a newer library are not (EventProcessor leaves them out too).
  for (const gf_kernel_record& r : records)
    if (GF_GPU_IS_WORK(r.kind)) OnRecord(pid, r, now_ns, /*may_wait=*/true);
}

void KernelJoiner::OnRecord(pid_t pid, const gf_kernel_record& r, uint64_t now_ns, bool may_wait) {
  if (may_wait && r.kind == GF_GPU_KERNEL && unnamed_count_ < kMaxUnnamed && !names_.contains(Key{pid, r.name_id})) {
    unnamed_[Key{pid, r.name_id}].push_back({r, now_ns});
    unnamed_count_++;
    return;
  }
  stats_.records++;
  uint64_t span = r.end_ns > r.start_ns ? r.end_ns - r.start_ns : 0;
  if (span > static_cast<uint64_t>(kMaxKernelNs)) {
    stats_.implausible_durations++;
    span = static_cast<uint64_t>(kMaxKernelNs);
  }
  const auto observed = static_cast<int64_t>(span);
  // A record of duty-cycled activity stands for |weight| records (0 from
  // a library that does not weight: itself).
  const int64_t weight = std::clamp<int64_t>(r.weight, 1, GF_KERNEL_WEIGHT_MAX);
  if (weight > 1) stats_.weighted_records++;
  stats_.estimated_records += static_cast<uint64_t>(weight);
  const int64_t nanos = observed * weight;
  auto it = launches_.find(Key{pid, r.correlation});
  if (it != launches_.end()) {
    stats_.joined++;
    it->second.ts_ns = now_ns;  // a graph's later kernels keep it alive
    it->second.joined = true;
    time_.Add(KernelStack(pid, it->second.stack, r), 0, weight, nanos, observed);
    sampled_[Key{pid, PoolId(r)}][it->second.stack]++;
    return;
  }
  Pool& p = unsampled_[Key{pid, PoolId(r)}];
  p.sample = r;
  p.count += weight;
  p.nanos += nanos;
  p.observed_nanos += observed;
}

void KernelJoiner::Flush(uint64_t now_ns, bool everything) {
  // Held records whose name never came go on as they are (oldest first).
  for (auto it = unnamed_.begin(); it != unnamed_.end();) {
    std::vector<Unnamed>& held = it->second;
    size_t done = 0;
    while (done < held.size() && (everything || held[done].now_ns + kUnnamedTtlNs <= now_ns)) {
      OnRecord(it->first.pid, held[done].record, held[done].now_ns, /*may_wait=*/false);
      done++;
    }
    unnamed_count_ -= done;
    held.erase(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(done));
    if (held.empty()) {
      unnamed_.erase(it++);
    } else {
      ++it;
    }
  }
  for (auto& [key, pool] : unsampled_) {
    auto dist = sampled_.find(key);
    if (dist == sampled_.end() || dist->second.empty()) {
      stats_.unattributed += static_cast<uint64_t>(pool.count);
      time_.Add(KernelStack(key.pid, StackTable::kNone, pool.sample), 0, pool.count, pool.nanos, pool.observed_nanos);
      continue;
    }
    // Largest-remainder apportionment of count and time over the sampled
    // launch stacks, so that the charged parts sum exactly to the pool.
    std::vector<std::pair<StackId, int64_t>> weights(dist->second.begin(), dist->second.end());
    std::sort(weights.begin(), weights.end());
    int64_t total = 0;
    for (const auto& [s, w] : weights) total += w;
    auto apportion = [&](int64_t amount) {
      std::vector<int64_t> parts(weights.size());
      std::vector<std::pair<int64_t, size_t>> remainders;
      int64_t given = 0;
      for (size_t i = 0; i < weights.size(); i++) {
        __int128 exact = static_cast<__int128>(amount) * weights[i].second;
        parts[i] = static_cast<int64_t>(exact / total);
        remainders.push_back({static_cast<int64_t>(exact % total), i});
        given += parts[i];
      }
      std::sort(remainders.begin(), remainders.end(), [](auto a, auto b) { return a.first > b.first; });
      for (size_t i = 0; given < amount && i < remainders.size(); i++, given++) parts[remainders[i].second]++;
      return parts;
    };
    std::vector<int64_t> counts = apportion(pool.count), nanos = apportion(pool.nanos),
                         observed = apportion(pool.observed_nanos);
    for (size_t i = 0; i < weights.size(); i++)
      if (counts[i] || nanos[i])
        time_.Add(KernelStack(key.pid, weights[i].first, pool.sample), 0, counts[i], nanos[i], observed[i]);
    stats_.scaled += static_cast<uint64_t>(pool.count);
  }
  unsampled_.clear();
  absl::erase_if(launches_, [&](const auto& kv) {
    uint64_t age = now_ns > kv.second.ts_ns ? now_ns - kv.second.ts_ns : 0;
    bool expired = age > (kv.second.joined ? kJoinedTtlNs : kLaunchTtlNs);
    if (expired && !kv.second.joined) stats_.expired_launches++;  // its kernels never came
    return expired;
  });
}

void KernelJoiner::ForgetProcess(pid_t pid) {
  absl::erase_if(launches_, [&](const auto& kv) { return kv.first.pid == pid; });
  absl::erase_if(names_, [&](const auto& kv) { return kv.first.pid == pid; });
  absl::erase_if(sampled_, [&](const auto& kv) { return kv.first.pid == pid; });
  absl::erase_if(unnamed_, [&](const auto& kv) {
    if (kv.first.pid != pid) return false;
    unnamed_count_ -= kv.second.size();
    return true;
  });
}

}  // namespace gpuflame::profiler
