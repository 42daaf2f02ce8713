#include "agent/oom_push.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/selection.h"
#include "logging/log.h"
#include "profiler/forensics/oom_report.h"

namespace gpuflame::profiler {

std::vector<pid_t> PushOomCaptures(const AgentConfig& cfg, Session& session, WindowExporter& exporter) {
  std::vector<OomCapture> captures = session.events().oom().Take();
  if (captures.empty()) return {};
  std::vector<ProcessWindow> out;
  for (OomCapture& c : captures) {
    if (!Selected(cfg.select, c.pid, c.context.process, c.context.pod)) continue;
    logging::Warning(absl::StrCat(OomSummaryLine(c, session.events().frames()), " (pushed as ", kOomProfile, ")"),
                     {{"pid", c.pid}});
    ProcessWindow w;
    w.pid = c.pid;
    w.process = c.context.process;
    w.pod = c.context.pod;
    w.service = c.context.service;
    w.profiles.push_back(BuildOomProfile(c, session.events().stack_source()));
    out.push_back(std::move(w));
  }
  std::vector<pid_t> pids;
  for (const ProcessWindow& w : out) pids.push_back(w.pid);
  exporter.Submit(std::move(out));
  return pids;
}

}  // namespace gpuflame::profiler
