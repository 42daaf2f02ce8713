#include "app/diff_command.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "app/record_output.h"
#include "exporters/diff/diff_html.h"
#include "exporters/diff/diff_inputs.h"
#include "exporters/diff/diff_run.h"
#include "exporters/diff/diff_summary.h"
#include "exporters/pprof/gzip.h"
#include "exporters/pprof/pprof_writer.h"
#include "logging/log.h"

namespace gpuflame::profiler {
namespace {

int Fail(const std::string& message) {
  logging::Error(message);
  return 2;
}

std::string Kinds(const exporters::DiffSide& side) {
  std::vector<std::string> names;
  for (const auto& p : side.profiles) names.push_back(p.DisplayName());
  return absl::StrJoin(names, ", ");
}

}  // namespace

int RunDiff(const DiffOptions& o) {
  absl::StatusOr<exporters::DiffSide> base = exporters::LoadDiffSide(o.base);
  if (!base.ok()) return Fail(std::string(base.status().message()));
  absl::StatusOr<exporters::DiffSide> neu = exporters::LoadDiffSide(o.neu);
  if (!neu.ok()) return Fail(std::string(neu.status().message()));

  exporters::DiffRun run = exporters::DiffSides(*base, *neu);
  if (run.outcomes.empty())
    return Fail(absl::StrCat("nothing to diff: no profile of ", o.base, " (", Kinds(*base), ") pairs with one of ",
                             o.neu, " (", Kinds(*neu), ")"));
  std::vector<const exporters::DiffOutcome*> done;
  for (const auto& d : run.outcomes)
    if (d.status.ok()) done.push_back(&d);
  auto why = [](const exporters::DiffOutcome& d) {
    return absl::StrCat("cannot diff ", d.base_origin, " against ", d.new_origin, ": ", d.status.message());
  };
  if (done.empty()) {
    // One line: the first reason says what is wrong with the inputs.
    if (run.outcomes.size() == 1) return Fail(why(run.outcomes[0]));
    for (size_t i = 1; i < run.outcomes.size(); i++) logging::Error(why(run.outcomes[i]));
    return Fail(why(run.outcomes[0]));
  }
  for (const auto& d : run.outcomes)
    if (!d.status.ok()) logging::Warning(why(d));
  // Where the two sides' sample types differ, what the diff left out, as it
  // is said on the page and in the diff file's comments.
  std::vector<std::string> notes;
  for (const exporters::DiffOutcome* d : done)
    if (!d->left_out.empty()) {
      notes.push_back(absl::StrCat(d->name, ": ", d->left_out));
      logging::Info(notes.back());
    }
  for (const auto& origin : run.only_in_base) logging::Info(absl::StrCat("only in BASE, not diffed: ", origin));
  for (const auto& origin : run.only_in_new) logging::Info(absl::StrCat("only in NEW, not diffed: ", origin));

  if (auto s = PrepareOutputDir(o.output); !s.ok()) return Fail(std::string(s.message()));
  std::vector<exporters::DiffView> views;
  std::vector<std::string> written;
  for (const exporters::DiffOutcome* d : done) {
    auto gz = exporters::Gzip(d->diff.SerializeAsString());
    if (!gz.ok()) return Fail(absl::StrCat(d->name, ": ", gz.status().message()));
    const std::string path = absl::StrCat(o.output, "/", d->stem, ".diff.pb.gz");
    if (auto s = exporters::WriteFile(path, *gz); !s.ok()) return Fail(std::string(s.message()));
    written.push_back(path);
    views.push_back({d->name, &*d->tree});
  }
  // The page opens on its first profile: one with stacks, not a profile
  // neither run filled (gpu_kernel without kernels), which sorts first by name.
  std::stable_partition(views.begin(), views.end(),
                        [](const exporters::DiffView& v) { return v.tree->nodes().size() > 1; });
  const std::string html_path = absl::StrCat(o.output, "/diff_flamegraph.html");
  const std::string html =
      exporters::DiffFlameGraphHtml(views, o.base, o.neu, absl::StrCat("diff ", o.base, " → ", o.neu), notes);
  if (auto s = exporters::WriteFile(html_path, html); !s.ok()) return Fail(std::string(s.message()));
  written.push_back(html_path);

  if (!o.quiet) {
    std::printf("gpuflame diff: BASE %s, NEW %s\n", o.base.c_str(), o.neu.c_str());
    for (const exporters::DiffOutcome* d : done) std::fputs(exporters::DiffSummary(d->name, *d->tree).c_str(), stdout);
    std::fflush(stdout);
  }
  logging::Info(absl::StrCat("wrote ", absl::StrJoin(written, ", ")));
  return 0;
}

}  // namespace gpuflame::profiler
