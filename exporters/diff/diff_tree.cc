#include "exporters/diff/diff_tree.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "base/saturating.h"
#include "exporters/diff/pprof_diff.h"

namespace gpuflame::exporters {
uint32_t DiffTree::Child(uint32_t parent, uint32_t name) {
  const uint64_t key = static_cast<uint64_t>(parent) << 32 | name;
  auto [it, inserted] = child_index_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (inserted) {
    nodes_.push_back({name, parent, {}});
    nodes_[parent].children.push_back(it->second);
    base_.resize(base_.size() + types_.size());
    new_.resize(new_.size() + types_.size());
  }
  return it->second;
}

void DiffTree::Add(std::span<const uint32_t> names_root_first, std::span<const int64_t> values, bool base) {
  std::vector<int64_t>& into = base ? base_ : new_;
  auto add = [&](uint32_t node) {
    for (size_t t = 0; t < types_.size(); t++)
      // BASE's values are stored negated; -INT64_MIN saturates.
      base::SaturatingAdd(into[node * types_.size() + t], base ? base::SaturatingSub(0, values[t]) : values[t]);
  };
  uint32_t node = 0;
  add(node);
  for (uint32_t name : names_root_first) add(node = Child(node, name));
}

DiffTree DiffTree::FromPprof(const pprof::Profile& p) {
  DiffTree t;
  auto str = [&](int64_t i) -> const std::string& {
    static const std::string kEmpty;
    return i >= 0 && i < p.string_table_size() ? p.string_table(static_cast<int>(i)) : kEmpty;
  };
  for (const auto& st : p.sample_type()) t.types_.push_back({str(st.type()), str(st.unit())});
  t.default_type_ = t.types_.empty() ? 0 : t.types_.size() - 1;
  for (size_t i = 0; i < t.types_.size(); i++)
    if (p.default_sample_type() && t.types_[i].type == str(p.default_sample_type())) t.default_type_ = i;
  auto intern = [&](const std::string& name, const std::string& file) {
    auto [it, inserted] = t.name_index_.try_emplace(name, static_cast<uint32_t>(t.names_.size()));
    if (inserted) {
      t.names_.push_back(name);
      t.files_.push_back(file);
    }
    return it->second;
  };
  intern("total", "");
  t.nodes_.push_back({0, 0, {}});
  t.base_.resize(t.types_.size());
  t.new_.resize(t.types_.size());

  absl::flat_hash_map<uint64_t, const pprof::Function*> functions;
  for (const auto& f : p.function()) functions.emplace(f.id(), &f);
  // Each location's frames, outermost first: pprof lists a location's lines
  // innermost first, the last being the function the others were inlined into.
  absl::flat_hash_map<uint64_t, std::vector<uint32_t>> frames_of;
  for (const auto& l : p.location()) {
    std::vector<uint32_t>& frames = frames_of[l.id()];
    for (int i = l.line_size(); i-- > 0;) {
      auto f = functions.find(l.line(i).function_id());
      if (f == functions.end()) continue;
      const std::string& name = str(f->second->name()).empty() ? str(f->second->system_name()) : str(f->second->name());
      frames.push_back(intern(name, str(f->second->filename())));
    }
    // pprof names a location without lines by its address.
    if (frames.empty()) frames.push_back(intern(absl::StrFormat("0x%x", l.address()), ""));
  }

  std::vector<uint32_t> stack;
  for (const auto& s : p.sample()) {
    if (static_cast<size_t>(s.value_size()) != t.types_.size()) continue;
    bool base = false;
    for (const auto& l : s.label()) base = base || (str(l.key()) == kDiffBaseLabel && str(l.str()) == "true");
    stack.clear();
    for (int i = s.location_id_size(); i-- > 0;) {
      auto it = frames_of.find(s.location_id(i));
      if (it != frames_of.end()) stack.insert(stack.end(), it->second.begin(), it->second.end());
    }
    std::span<const uint32_t> frames(stack);
    if (stack.size() > kMaxDepth) {
      // The leaf-most kMaxDepth - 1 frames, under the marker.
      const size_t first = stack.size() - kMaxDepth;
      stack[first] = intern(absl::StrFormat("[truncated: deeper than %d frames]", kMaxDepth), "");
      frames = std::span<const uint32_t>(stack).subspan(first);
    }
    t.Add(frames, std::span<const int64_t>(s.value().data(), s.value_size()), base);
  }
  t.name_index_.clear();
  t.child_index_.clear();
  return t;
}

int64_t DiffTree::base_self(uint32_t node, size_t type) const {
  int64_t v = base(node, type);
  for (uint32_t c : nodes_[node].children) v = base::SaturatingSub(v, base(c, type));
  return v;
}

int64_t DiffTree::new_self(uint32_t node, size_t type) const {
  int64_t v = neu(node, type);
  for (uint32_t c : nodes_[node].children) v = base::SaturatingSub(v, neu(c, type));
  return v;
}

std::vector<std::string> DiffTree::Stack(uint32_t node) const {
  std::vector<std::string> out;
  for (uint32_t n = node; n != 0; n = nodes_[n].parent) out.push_back(names_[nodes_[n].name]);
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace gpuflame::exporters
