// The HTML diff flame graph: exporters/files/flamegraph.html (one page for
// both kinds, with its search, zoom, selectors and table) filled with diff
// trees, each node carrying BASE's total beside NEW's. The page colours each
// frame by its change and draws frames only in BASE hatched.
#ifndef GPUFLAME_EXPORTERS_DIFF_DIFF_HTML_H_
#define GPUFLAME_EXPORTERS_DIFF_DIFF_HTML_H_

#include <string>
#include <vector>

#include "exporters/diff/diff_tree.h"

namespace gpuflame::exporters {

struct DiffView {
  std::string name;  // the profile selector's entry: "torch_memory"
  const DiffTree* tree;
};

// |base_label| and |new_label| say what was compared ("run1/", a file);
// |notes| head the page, one paragraph each (what a diff left out).
std::string DiffFlameGraphHtml(const std::vector<DiffView>& diffs, const std::string& base_label,
                               const std::string& new_label, const std::string& title,
                               const std::vector<std::string>& notes = {});

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_DIFF_DIFF_HTML_H_
