// A diff profile (pprof_diff.h) as the call tree a flame graph draws: stacks
// merged by frame name from the root, each node holding BASE's and NEW's
// total through it for every sample type. The HTML diff flame graph and the
// terminal summary both read it, so they show what the pprof file holds.
// Any thread may build one; it is immutable after.
#ifndef GPUFLAME_EXPORTERS_DIFF_DIFF_TREE_H_
#define GPUFLAME_EXPORTERS_DIFF_DIFF_TREE_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profile.pb.h"  // generated from exporters/proto/profile.proto

namespace gpuflame::exporters {

class DiffTree {
 public:
  // Stacks deeper than this keep their leaf-most frames under a
  // "[truncated: deeper than 512 frames]" frame, as record truncates at 128:
  // the tree is drawn and written recursively, and a file may hold any depth.
  // The pprof keeps every frame.
  static constexpr size_t kMaxDepth = 512;

  struct SampleType {
    std::string type;  // "inuse_space"
    std::string unit;  // "bytes"
  };
  struct Node {
    uint32_t name = 0;               // index into names()
    uint32_t parent = 0;             // the root is its own parent
    std::vector<uint32_t> children;  // node indices, in order of first appearance
  };

  // |diff| as DiffPprof writes it: samples labelled pprof::base=true are
  // BASE's, negated; the others are NEW's. |diff| must be valid
  // (ValidatePprof); a dangling reference is skipped, never followed.
  static DiffTree FromPprof(const pprof::Profile& diff);

  const std::vector<SampleType>& sample_types() const { return types_; }
  // pprof's default: the profile's default sample type, else its last.
  size_t default_type() const { return default_type_; }
  // Frame names; names()[0] is the root's, "total".
  const std::vector<std::string>& names() const { return names_; }
  // A frame's source file (its function's), "" when none.
  const std::string& file(uint32_t name) const { return files_[name]; }
  const std::vector<Node>& nodes() const { return nodes_; }  // nodes()[0] is the root
  // Totals through |node| for sample type |type|, saturating.
  int64_t base(uint32_t node, size_t type) const { return base_[node * types_.size() + type]; }
  int64_t neu(uint32_t node, size_t type) const { return new_[node * types_.size() + type]; }
  // What |node| holds itself (its total less its children's), so that the
  // stack ending at |node| is one row of the profile's `-traces`.
  int64_t base_self(uint32_t node, size_t type) const;
  int64_t new_self(uint32_t node, size_t type) const;
  // The frame names from the root's child down to |node|.
  std::vector<std::string> Stack(uint32_t node) const;

 private:
  uint32_t Child(uint32_t parent, uint32_t name);
  void Add(std::span<const uint32_t> names_root_first, std::span<const int64_t> values, bool base);

  std::vector<SampleType> types_;
  size_t default_type_ = 0;
  std::vector<std::string> names_;
  std::vector<std::string> files_;
  std::vector<Node> nodes_;
  std::vector<int64_t> base_, new_;  // node * types + type
  // Only while building.
  absl::flat_hash_map<std::string, uint32_t> name_index_;
  absl::flat_hash_map<uint64_t, uint32_t> child_index_;  // parent << 32 | name
};

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_DIFF_DIFF_TREE_H_
