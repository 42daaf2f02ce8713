#include "exporters/diff/diff_summary.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/human_units.h"
#include "base/saturating.h"

namespace gpuflame::exporters {
namespace {

constexpr const char* kSeparator = " › ";
constexpr size_t kSeparatorWidth = 3;   // as a terminal shows it: "›" is one column
constexpr const char* kEllipsis = "…";  // one column too
constexpr const char* kTrampoline = "<interpreter trampoline>";
constexpr size_t kStackWidth = 110;

// "+34.8%", or "new" when BASE had none.
std::string Percent(int64_t base, int64_t delta) {
  if (base == 0) return delta == 0 ? "0%" : "new";
  return absl::StrFormat("%+.1f%%", 100.0 * static_cast<double>(delta) / std::fabs(static_cast<double>(base)));
}

}  // namespace

TopChanges TopStackChanges(const DiffTree& tree, size_t type, size_t top) {
  std::vector<std::pair<int64_t, uint32_t>> changes;
  // The root too: samples without a frame hold their value there.
  for (uint32_t n = 0; n < tree.nodes().size(); n++) {
    const int64_t delta = base::SaturatingSub(tree.new_self(n, type), tree.base_self(n, type));
    if (delta != 0) changes.emplace_back(delta, n);
  }
  // Largest change first; among equal ones, the earlier stack in the profile.
  std::stable_sort(changes.begin(), changes.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  // Leaf-most frames of |n| that no other changed stack ends with.
  auto distinct = [&](uint32_t n, const std::vector<std::string>& stack) {
    size_t k = std::min<size_t>(1, stack.size());
    for (const auto& [delta, other] : changes) {
      if (other == n) continue;
      size_t common = 0;
      for (uint32_t a = n, b = other; a != 0 && b != 0 && tree.nodes()[a].name == tree.nodes()[b].name;
           a = tree.nodes()[a].parent, b = tree.nodes()[b].parent)
        common++;
      k = std::max(k, std::min(stack.size(), common + 1));
    }
    return k;
  };
  auto change = [&](const std::pair<int64_t, uint32_t>& c) {
    StackChange out{c.first, tree.Stack(c.second), 0};
    out.distinct = distinct(c.second, out.stack);
    return out;
  };
  TopChanges out;
  for (size_t i = 0; i < changes.size() && out.grew.size() < top && changes[i].first > 0; i++)
    out.grew.push_back(change(changes[i]));
  for (size_t i = changes.size(); i-- > 0 && out.shrank.size() < top && changes[i].first < 0;)
    out.shrank.push_back(change(changes[i]));
  return out;
}

std::string LeafwardName(const std::vector<std::string>& stack, size_t distinct, size_t width) {
  if (stack.empty()) return "[no frames]";
  // The frame that tells the stack apart, shown whatever it is, as is the leaf.
  const size_t telling = stack.size() - std::clamp<size_t>(distinct, 1, stack.size());
  // Frames from |from| on as shown.
  auto shown = [&](size_t from) {
    std::vector<const std::string*> out;
    for (size_t i = from; i < stack.size(); i++)
      if (i == telling || i + 1 == stack.size() || stack[i] != kTrampoline) out.push_back(&stack[i]);
    return out;
  };
  auto width_of = [](const std::vector<const std::string*>& frames, size_t from) {
    size_t w = 0;
    for (size_t i = from; i < frames.size(); i++) w += (i > from ? kSeparatorWidth : 0) + frames[i]->size();
    return w;
  };
  auto join = [](const std::vector<const std::string*>& frames, size_t from) {
    std::string out;
    for (size_t i = from; i < frames.size(); i++) absl::StrAppend(&out, i > from ? kSeparator : "", *frames[i]);
    return out;
  };
  auto head = [](size_t from) { return from > 0 ? absl::StrCat(kEllipsis, kSeparator) : std::string(); };
  auto head_width = [](size_t from) { return from > 0 ? 1 + kSeparatorWidth : 0; };
  // From the telling frame, with as many of its callers as fit.
  size_t from = telling;
  std::vector<const std::string*> part = shown(from);
  if (head_width(from) + width_of(part, 0) <= width) {
    while (from > 0) {
      std::vector<const std::string*> more = shown(from - 1);
      if (head_width(from - 1) + width_of(more, 0) > width) break;
      part = std::move(more);
      from--;
    }
    return head(from) + join(part, 0);
  }
  if (part.size() == 1) return head(from) + join(part, 0);
  // The telling frame, "…", then the leaf-most frames that fit (the leaf
  // whatever its length).
  size_t first = part.size() - 1;
  size_t used = head_width(from) + part[0]->size() + 2 * kSeparatorWidth + 1 + part.back()->size();
  while (first > 1 && used + part[first - 1]->size() + kSeparatorWidth <= width)
    used += part[--first]->size() + kSeparatorWidth;
  return absl::StrCat(head(from), *part[0], kSeparator, first > 1 ? absl::StrCat(kEllipsis, kSeparator) : "",
                      join(part, first));
}

std::string DiffSummary(const std::string& name, const DiffTree& tree, size_t top) {
  std::string out = absl::StrCat("== ", name, "\n");
  size_t type_width = 0;
  for (const auto& t : tree.sample_types()) type_width = std::max(type_width, t.type.size());
  for (size_t t = 0; t < tree.sample_types().size(); t++) {
    const std::string& unit = tree.sample_types()[t].unit;
    const int64_t b = tree.base(0, t), n = tree.neu(0, t), d = base::SaturatingSub(n, b);
    absl::StrAppend(&out, absl::StrFormat("   %-*s %12s -> %-12s %12s (%s)\n", static_cast<int>(type_width),
                                          tree.sample_types()[t].type, base::HumanValue(b, unit),
                                          base::HumanValue(n, unit), base::HumanDelta(d, unit), Percent(b, d)));
  }
  if (tree.sample_types().empty()) return out;
  const size_t type = tree.default_type();
  const auto& st = tree.sample_types()[type];
  const TopChanges changes = TopStackChanges(tree, type, top);
  auto list = [&](const char* what, const std::vector<StackChange>& stacks) {
    if (stacks.empty()) return absl::StrCat("   ", what, " (", st.type, "): none\n");
    std::string s = absl::StrCat("   ", what, " (", st.type, "):\n");
    for (const StackChange& c : stacks)
      absl::StrAppend(&s, absl::StrFormat("     %12s  %s\n", base::HumanDelta(c.delta, st.unit),
                                          LeafwardName(c.stack, c.distinct, kStackWidth)));
    return s;
  };
  absl::StrAppend(&out, list("grew most", changes.grew), list("shrank most", changes.shrank));
  return out;
}

}  // namespace gpuflame::exporters
