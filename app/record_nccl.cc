#include "app/record_nccl.h"

#include <unistd.h>

#include <cstdio>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "logging/log.h"
#include "profiler/collectives/nccl_report.h"
#include "profiler/collectives/nccl_straggler_report.h"
#include "profiler/process/process_state.h"

namespace gpuflame::profiler {

void RecordNccl::Start(Session& session) const {
  session.events().nccl().SetHangThreshold(static_cast<uint64_t>(hang_seconds_ * 1e9));
  session.events().nccl().EnableSteps();
}

void RecordNccl::Say(Session& session, uint64_t now_ns) {
  NcclTracker& t = session.events().nccl();
  const std::vector<NcclHang> found = t.TakeFound();
  const std::vector<NcclHang> ended = t.TakeEnded();
  if (quiet_ || (found.empty() && ended.empty())) return;
  if (isatty(STDERR_FILENO)) std::fputs("\r\033[K", stderr);  // over the progress line
  for (const NcclHang& h : found)
    logging::Warning(NcclHangLine(h, session.events().stack_source(), ProcessStateName, now_ns));
  for (const NcclHang& h : ended) logging::Info(NcclHangEndLine(h));
}

void RecordNccl::Tick(Session& session, uint64_t now_ns) {
  session.events().nccl().Tick(now_ns);
  Say(session, now_ns);
}

void RecordNccl::Finish(Session& session, uint64_t now_ns) {
  NcclTracker& t = session.events().nccl();
  t.Tick(now_ns);
  Say(session, now_ns);
  t.Finish(now_ns);
}

std::optional<Profile> RecordNccl::BuildProfile(const Session& session,
                                                const absl::flat_hash_map<pid_t, std::string>& comm, int64_t time_nanos,
                                                int64_t duration_nanos) const {
  return BuildNcclProfile(session.events().nccl(), session.events().stack_source(), comm, time_nanos, duration_nanos);
}

std::string RecordNccl::Json(const Session& session, const absl::flat_hash_map<pid_t, std::string>& comm,
                             uint64_t start_ns) const {
  return NcclJson(session.events().nccl(), session.events().stack_source(), comm, start_ns);
}

std::vector<std::string> RecordNccl::Lines(const Session& session) const {
  std::vector<std::string> out = NcclLines(session.events().nccl());
  for (std::string& line : NcclStragglerLines(session.events().nccl().stragglers(), session.events().stack_source()))
    out.push_back("  " + std::move(line));
  for (std::string& line : NcclStepLines(session.events().nccl().steps(), session.events().stack_source()))
    out.push_back("  " + std::move(line));
  return out;
}

std::vector<std::string> RecordNccl::HangLines(const Session& session) const {
  std::vector<std::string> out;
  for (const std::string& line : Lines(session))
    if (line.starts_with("  NCCL hang") || line.starts_with("  NCCL straggler")) out.push_back(line.substr(2));
  return out;
}

}  // namespace gpuflame::profiler
