#include "profiler/probes/program_stats.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include <cerrno>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {

ProgramStats ProgramStats::Enable() {
  ProgramStats s;
  int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  if (fd >= 0) {
    s.fd_.reset(fd);
    s.reason_.clear();
    return s;
  }
  const int err = fd < 0 ? -fd : errno;
  // EINVAL: a kernel without BPF_ENABLE_STATS (before 5.8) rejects the command.
  s.reason_ = err == EINVAL ? absl::StrCat("the kernel has no BPF_ENABLE_STATS (Linux 5.8+): ", std::strerror(err))
              : err == EPERM || err == EACCES
                  ? absl::StrCat("BPF_ENABLE_STATS needs CAP_SYS_ADMIN: ", std::strerror(err))
                  : absl::StrCat("BPF_ENABLE_STATS: ", std::strerror(err));
  return s;
}

std::string ProgramStats::Describe() const { return available() ? "on" : absl::StrCat("unavailable: ", reason_); }

std::vector<ProgramRunStats> ProgramStats::Read(const bpf_object* object) const {
  std::vector<ProgramRunStats> out;
  if (!available() || object == nullptr) return out;
  bpf_program* prog;  // the iterator takes a non-const cursor
  bpf_object__for_each_program(prog, object) {
    const int fd = bpf_program__fd(prog);
    if (fd < 0) continue;  // not loaded (autoload off)
    // Zeroed: every array pointer and length is 0, so the kernel copies out
    // the fixed fields only (no instructions, maps or line info).
    bpf_prog_info info{};
    __u32 len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) continue;
    out.push_back({bpf_program__name(prog), info.run_cnt, info.run_time_ns,
                   bpf_program__type(prog) == BPF_PROG_TYPE_TRACING});
  }
  return out;
}

std::vector<ProgramCost> ProgramCostBetween(std::span<const ProgramRunStats> before,
                                            std::span<const ProgramRunStats> after) {
  absl::flat_hash_map<std::string_view, const ProgramRunStats*> earlier;
  for (const ProgramRunStats& b : before) earlier.emplace(b.name, &b);
  std::vector<ProgramCost> out;
  out.reserve(after.size());
  for (const ProgramRunStats& a : after) {
    ProgramCost c{a.name, a.run_cnt, a.run_time_ns, a.machine_wide};
    if (auto it = earlier.find(a.name); it != earlier.end()) {
      const ProgramRunStats& b = *it->second;
      if (a.run_cnt >= b.run_cnt && a.run_time_ns >= b.run_time_ns) {
        c.hits = a.run_cnt - b.run_cnt;
        c.ns_total = a.run_time_ns - b.run_time_ns;
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

ProgramCost Sum(std::span<const ProgramCost> costs, std::string name, bool machine_wide_only) {
  ProgramCost sum{std::move(name)};
  for (const ProgramCost& c : costs)
    if (!machine_wide_only || c.machine_wide) {
      sum.hits += c.hits;
      sum.ns_total += c.ns_total;
    }
  return sum;
}

}  // namespace

ProgramCost TotalCost(std::span<const ProgramCost> costs) { return Sum(costs, "total", false); }

ProgramCost MachineWideCost(std::span<const ProgramCost> costs) { return Sum(costs, "machine-wide", true); }

uint64_t InProcessRunTimeNs(std::span<const ProgramRunStats> programs) {
  uint64_t ns = 0;
  for (const ProgramRunStats& p : programs)
    if (!p.machine_wide) ns += p.run_time_ns;
  return ns;
}

}  // namespace gpuflame::profiler
