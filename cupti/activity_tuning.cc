#include "cupti/activity_tuning.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace gpuflame::cupti {
namespace {

// A whole non-negative decimal number at most |max|, else false.
bool ReadNumber(const char* text, uint64_t max, uint64_t* out) {
  if (!text || !*text) return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (errno || !end || *end || *text == '-' || v > max) return false;
  *out = v;
  return true;
}

uint32_t ParseKinds(std::string_view list, std::string* error) {
  uint32_t mask = 0;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view word = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (word.empty()) continue;
    bool known = false;
    for (size_t i = 0; i < std::size(kActivityKindNames); i++) {
      if (word == kActivityKindNames[i]) {
        mask |= 1u << i;
        known = true;
      }
    }
    if (!known) {
      *error = "GPUFLAME_CUPTI_KINDS: unknown kind '" + std::string(word) +
               "' (kernel, memcpy, memset, sync, overhead): the default kinds kept";
      return kDefaultActivityKinds;
    }
  }
  return mask;
}

}  // namespace

ActivityTuning TuningFromEnv(const char* (*get)(const char*)) {
  ActivityTuning t;
  auto number = [&](const char* name, uint64_t max, uint64_t* out) {
    const char* v = get(name);
    if (!v || !*v) return false;
    if (ReadNumber(v, max, out)) return true;
    if (t.error.empty()) t.error = std::string(name) + "=" + v + " is not a number up to " + std::to_string(max);
    return false;
  };
  if (const char* kinds = get("GPUFLAME_CUPTI_KINDS"); kinds && *kinds) t.kinds = ParseKinds(kinds, &t.error);
  uint64_t v = 0;
  // At least one record of the largest kind; at most what a buffer of
  // ours should ever hold (CUPTI keeps every one it was handed until flushed).
  if (number("GPUFLAME_CUPTI_BUFFER_KB", 256 * 1024, &v) && v >= 4) t.buffer_bytes = v << 10;
  if (number("GPUFLAME_CUPTI_DEVICE_BUFFER_MB", 1024, &v) && v > 0) t.device_buffer_bytes = v << 20;
  if (number("GPUFLAME_CUPTI_PINNED", 1, &v)) t.pinned = static_cast<int>(v);
  if (number("GPUFLAME_CUPTI_PER_THREAD", 1, &v)) t.per_thread = static_cast<int>(v);
  if (number("GPUFLAME_CUPTI_ZEROED", 1, &v)) t.zeroed_buffers = v != 0;
  if (number("GPUFLAME_CUPTI_FLUSH_PERIOD_MS", 60'000, &v)) t.flush_period_ms = static_cast<uint32_t>(v);
  return t;
}

std::vector<CUpti_ActivityKind> ActivityTuning::Kinds() const {
  std::vector<CUpti_ActivityKind> out;
  for (size_t i = 0; i < std::size(kActivityKinds); i++)
    if (kinds & (1u << i)) out.push_back(kActivityKinds[i]);
  return out;
}

std::string ActivityTuning::Describe() const {
  const ActivityTuning d;
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  if (kinds != d.kinds) {
    std::string names;
    for (size_t i = 0; i < std::size(kActivityKindNames); i++)
      if (kinds & (1u << i)) names += (names.empty() ? "" : "+") + std::string(kActivityKindNames[i]);
    add("kinds " + (names.empty() ? std::string("none") : names));
  }
  if (buffer_bytes != d.buffer_bytes) add("buffers " + std::to_string(buffer_bytes >> 10) + " KiB");
  if (zeroed_buffers) add("zeroed buffers");
  if (device_buffer_bytes) add("device buffer " + std::to_string(device_buffer_bytes >> 20) + " MiB");
  if (pinned >= 0) add(std::string("pinned ") + (pinned ? "on" : "off"));
  if (per_thread >= 0) add(std::string("per-thread buffers ") + (per_thread ? "on" : "off"));
  if (flush_period_ms) add("CUPTI flush period " + std::to_string(flush_period_ms) + " ms");
  return s.empty() ? "defaults" : s;
}

}  // namespace gpuflame::cupti
