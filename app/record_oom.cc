#include "app/record_oom.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "logging/log.h"
#include "profiler/forensics/oom_report.h"

namespace gpuflame::profiler {

std::string RecordOom::ProfileName(size_t index) {
  return index == 0 ? std::string(kOomProfile) : absl::StrCat(kOomProfile, ".", index + 1);
}

void RecordOom::Collect(Session& session) {
  for (OomCapture& c : session.events().oom().Take()) {
    if (!quiet_) {
      if (isatty(STDERR_FILENO)) std::fputs("\r\033[K", stderr);  // over the progress line
      logging::Info(OomSummaryLine(c, session.events().frames()));
    }
    captures_.push_back(std::move(c));
  }
}

void RecordOom::Finish(Session& session) {
  session.events().oom().FinishAll();
  Collect(session);
}

std::vector<Profile> RecordOom::Profiles(const Session& session) const {
  std::vector<Profile> out;
  for (size_t i = 0; i < captures_.size(); i++)
    out.push_back(BuildOomProfile(captures_[i], session.events().stack_source(), ProfileName(i)));
  return out;
}

std::vector<std::string> RecordOom::Lines(const Session& session) const {
  std::vector<std::string> out;
  for (const OomCapture& c : captures_) out.push_back(OomSummaryLine(c, session.events().frames()));
  return out;
}

std::string RecordOom::Json(const Session& session) const {
  const OomStats& s = session.events().oom().stats();
  std::string out = absl::StrCat("{\"episodes\": ", s.episodes, ", \"failed_calls\": ", s.failed_calls,
                                 ", \"torch_reports\": ", s.torch_reports, ", \"captured\": ", s.captured,
                                 ", \"not_captured\": ", s.not_captured, ", \"captures\": [");
  for (size_t i = 0; i < captures_.size(); i++)
    absl::StrAppend(&out, i ? ",\n    " : "\n    ",
                    OomJson(captures_[i], session.events().frames(), ProfileName(i) + ".pb.gz"));
  absl::StrAppend(&out, captures_.empty() ? "]}" : "\n  ]}");
  return out;
}

}  // namespace gpuflame::profiler
