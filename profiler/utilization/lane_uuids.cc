#include "profiler/utilization/lane_uuids.h"

#include <cstring>

namespace gpuflame::profiler::utilization {

std::string GpuUuidText(const gf_kernel_record& r) {
  unsigned char b[16];
  std::memcpy(b, &r.start_ns, 8);
  std::memcpy(b + 8, &r.end_ns, 8);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "GPU-";
  out.reserve(40);
  for (size_t i = 0; i < sizeof(b); i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[b[i] >> 4];
    out += kHex[b[i] & 0xf];
  }
  return out;
}

void LaneUuids::OnRecord(pid_t pid, const gf_kernel_record& r) {
  if (r.kind != GF_GPU_DEVICE) return;
  if (r.device >= kMaxOrdinal) {
    dropped_++;
    return;
  }
  const auto key = std::pair{pid, r.device};
  auto it = uuids_.find(key);
  if (it == uuids_.end()) {
    if (uuids_.size() >= kMaxEntries) {
      dropped_++;
      return;
    }
    it = uuids_.emplace(key, std::string()).first;
  }
  // Said again at every flush: the same, unless the pid was reused.
  it->second = GpuUuidText(r);
}

const std::string& LaneUuids::Of(pid_t pid, uint32_t device) const {
  static const std::string kNone;
  auto it = uuids_.find({pid, device});
  return it == uuids_.end() ? kNone : it->second;
}

void LaneUuids::Forget(pid_t pid) { uuids_.erase(uuids_.lower_bound({pid, 0}), uuids_.lower_bound({pid + 1, 0})); }

}  // namespace gpuflame::profiler::utilization
