#include "logging/repeat_limiter.h"

#include <algorithm>

namespace gpuflame::logging {

std::optional<uint64_t> RepeatLimiter::Admit(const std::string& key, int64_t now_ns) {
  if (interval_ns_ <= 0) return 0;
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= max_keys_) EvictQuiet(now_ns);
    if (entries_.size() >= max_keys_) return 0;  // untracked: never held back, never lost
    entries_.emplace(key, Entry{now_ns, 0});
    return 0;
  }
  Entry& e = it->second;
  if (now_ns - e.written_ns < interval_ns_) {
    e.held++;
    return std::nullopt;
  }
  const uint64_t held = e.held;
  e = Entry{now_ns, 0};
  return held;
}

// Keys whose interval has passed with nothing held back carry no count: a
// repeat of them later is let through as a first one would be.
void RepeatLimiter::EvictQuiet(int64_t now_ns) {
  absl::erase_if(entries_,
                 [&](const auto& kv) { return kv.second.held == 0 && now_ns - kv.second.written_ns >= interval_ns_; });
}

std::vector<std::pair<std::string, uint64_t>> RepeatLimiter::TakeHeld() {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (auto& [key, e] : entries_)
    if (e.held) out.emplace_back(key, e.held);
  std::sort(out.begin(), out.end());
  entries_.clear();
  return out;
}

}  // namespace gpuflame::logging
