// Holds back repeats of the same log line: each distinct key is let through
// once per interval, and what was held back in between is counted, to be
// said with the next one let through (or by TakeHeld at exit).
// Not thread-safe: the log calls it under its lock.
#ifndef GPUFLAME_LOGGING_REPEAT_LIMITER_H_
#define GPUFLAME_LOGGING_REPEAT_LIMITER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace gpuflame::logging {

class RepeatLimiter {
 public:
  // |max_keys| bounds the memory a stream of distinct lines can take: when
  // that many are tracked, lines not tracked go through unlimited.
  explicit RepeatLimiter(int64_t interval_ns, size_t max_keys = 1024)
      : interval_ns_(interval_ns), max_keys_(max_keys) {}

  // nullopt: hold this one back (counted). Otherwise write it, saying how
  // many were held back since the last one written (0 the first time).
  std::optional<uint64_t> Admit(const std::string& key, int64_t now_ns);
  // The keys with repeats held back, and how many; forgotten here.
  std::vector<std::pair<std::string, uint64_t>> TakeHeld();
  size_t tracked() const { return entries_.size(); }

 private:
  struct Entry {
    int64_t written_ns = 0;  // when this key was last let through
    uint64_t held = 0;       // held back since
  };
  void EvictQuiet(int64_t now_ns);

  int64_t interval_ns_;
  size_t max_keys_;
  absl::flat_hash_map<std::string, Entry> entries_;
};

}  // namespace gpuflame::logging

#endif  // GPUFLAME_LOGGING_REPEAT_LIMITER_H_
