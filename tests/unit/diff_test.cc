// `gpuflame diff`: the pprof of a difference (pprof_diff), its call tree, the
// HTML data, the terminal summary, the inputs and their pairing, and the
// command itself. `go tool pprof` reads the same diffs in
// tests/e2e/diff_e2e_test.cc.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"

#include "app/cli.h"
#include "app/diff_command.h"
#include "base/human_units.h"
#include "exporters/diff/diff_html.h"
#include "exporters/diff/diff_inputs.h"
#include "exporters/diff/diff_run.h"
#include "exporters/diff/diff_summary.h"
#include "exporters/diff/diff_tree.h"
#include "exporters/diff/pprof_diff.h"
#include "exporters/pprof/gzip.h"
#include "exporters/pprof/pprof_writer.h"
#include "exporters/pyroscope/spool.h"
#include "profile.pb.h"
#include "push.pb.h"
#include "tests/support/temp_dir.h"

namespace gpuflame::exporters {
namespace {

using profiler::Profile;
using symbolizer::Frame;
using symbolizer::FrameKind;

Frame Named(std::string name, FrameKind kind = FrameKind::kPython) {
  Frame f;
  f.kind = kind;
  f.name = std::move(name);
  f.file = kind == FrameKind::kPython ? "serve.py" : "";
  return f;
}

// A memory profile of two stacks under <module>; values {alloc, inuse}.
Profile Memory(const std::string& a, int64_t va, const std::string& b, int64_t vb) {
  Profile p;
  p.name = "torch_memory";
  p.sample_types = {{"alloc_space", "bytes"}, {"inuse_space", "bytes"}};
  p.default_sample_type = "inuse_space";
  p.period_type = {"space", "bytes"};
  p.period = 1;
  p.frames = {Named("<module>"), Named(a), Named(b), Named("malloc", FrameKind::kApi)};
  p.samples.push_back({{0, 1, 3}, {va, va}, {}});
  p.samples.push_back({{0, 2, 3}, {vb, vb}, {}});
  return p;
}

pprof::Profile Pprof(const Profile& p) {
  pprof::Profile out;
  EXPECT_TRUE(out.ParseFromString(SerializePprof(p)));
  return out;
}

// BASE: KVCache 64, legacy 12 (gone in NEW). NEW: KVCache 96, prefix 20 (new).
pprof::Profile Base() {
  Profile p = Memory("KVCache > __init__", 64, "legacy", 12);
  p.time_nanos = 2000;
  p.duration_nanos = 10;
  p.comments = {"shared", "base only"};
  return Pprof(p);
}
pprof::Profile New() {
  Profile p = Memory("KVCache > __init__", 96, "prefix", 20);
  p.time_nanos = 1000;
  p.duration_nanos = 5;
  p.comments = {"shared"};
  return Pprof(p);
}

const std::string& S(const pprof::Profile& p, int64_t i) { return p.string_table(static_cast<int>(i)); }

// "<module>;KVCache > __init__;malloc" (root first) for a sample.
std::string StackOf(const pprof::Profile& p, const pprof::Sample& s) {
  std::string out;
  for (int i = s.location_id_size(); i-- > 0;)
    for (const auto& l : p.location())
      if (l.id() == s.location_id(i))
        for (const auto& f : p.function())
          if (f.id() == l.line(0).function_id()) out += (out.empty() ? "" : ";") + S(p, f.name());
  return out;
}

bool IsBase(const pprof::Profile& p, const pprof::Sample& s) {
  for (const auto& l : s.label())
    if (S(p, l.key()) == "pprof::base") return S(p, l.str()) == "true";
  return false;
}

TEST(PprofDiffTest, NewSamplesThenBaseNegatedAndLabelledAsPprofDoes) {
  absl::StatusOr<pprof::Profile> d = DiffPprof(Base(), New());
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(ValidatePprof(*d).ok()) << ValidatePprof(*d);
  EXPECT_EQ(DescribeSampleTypes(*d), "alloc_space/bytes, inuse_space/bytes");
  ASSERT_EQ(d->sample_size(), 4);
  struct Row {
    std::string stack;
    std::vector<int64_t> values;
    bool base;
  };
  std::vector<Row> rows;
  for (const auto& s : d->sample())
    rows.push_back({StackOf(*d, s), {s.value().begin(), s.value().end()}, IsBase(*d, s)});
  EXPECT_EQ(rows[0].stack, "<module>;KVCache > __init__;malloc");
  EXPECT_EQ(rows[0].values, (std::vector<int64_t>{96, 96}));
  EXPECT_FALSE(rows[0].base);
  EXPECT_EQ(rows[1].stack, "<module>;prefix;malloc");
  EXPECT_EQ(rows[1].values, (std::vector<int64_t>{20, 20}));
  EXPECT_FALSE(rows[1].base);
  EXPECT_EQ(rows[2].stack, "<module>;KVCache > __init__;malloc");
  EXPECT_EQ(rows[2].values, (std::vector<int64_t>{-64, -64}));
  EXPECT_TRUE(rows[2].base);
  EXPECT_EQ(rows[3].stack, "<module>;legacy;malloc");
  EXPECT_EQ(rows[3].values, (std::vector<int64_t>{-12, -12}));
  EXPECT_TRUE(rows[3].base);
  // Equal functions and locations are stored once: <module>, KVCache and
  // malloc are shared by both sides.
  EXPECT_EQ(d->function_size(), 5);
  EXPECT_EQ(d->location_size(), 5);
  // Neither side has a mapping (Python and API frames only): pprof's driver
  // gives each one empty mapping as it reads them, and so does the diff.
  ASSERT_EQ(d->mapping_size(), 1);
  EXPECT_EQ(S(*d, d->mapping(0).filename()), "");
  for (const auto& l : d->location()) EXPECT_EQ(l.mapping_id(), d->mapping(0).id());
}

TEST(PprofDiffTest, NewsFirstMappingComesFirst) {
  // pprof prints the first mapping as the profile's File:.
  Profile with_native = Memory("a", 1, "b", 2);
  Frame native = Named("at::empty", FrameKind::kNative);
  native.file = "/lib/libtorch.so";
  native.build_id = "abcd";
  with_native.frames.push_back(native);
  with_native.samples[0].frames.insert(with_native.samples[0].frames.begin() + 1, 4);
  absl::StatusOr<pprof::Profile> d = DiffPprof(Base(), Pprof(with_native));
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->mapping_size(), 2);  // libtorch.so, then BASE's empty one
  EXPECT_EQ(S(*d, d->mapping(0).filename()), "/lib/libtorch.so");
  EXPECT_EQ(S(*d, d->mapping(0).build_id()), "abcd");
  EXPECT_EQ(S(*d, d->mapping(1).filename()), "");
}

TEST(PprofDiffTest, HeadersCombineAsPprofMergeCombinesThem) {
  absl::StatusOr<pprof::Profile> d = DiffPprof(Base(), New());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->time_nanos(), 1000);    // the earliest
  EXPECT_EQ(d->duration_nanos(), 15);  // summed
  EXPECT_EQ(d->period(), 1);
  EXPECT_EQ(S(*d, d->period_type().type()), "space");
  EXPECT_EQ(S(*d, d->default_sample_type()), "inuse_space");
  std::vector<std::string> comments;
  for (int64_t c : d->comment()) comments.push_back(S(*d, c));
  EXPECT_EQ(comments, (std::vector<std::string>{"shared", "base only"}));
  // A zero time in NEW gives BASE's; once set, a zero BASE time wins, as in
  // pprof's combineHeaders.
  pprof::Profile neu = New(), base = Base();
  neu.set_time_nanos(0);
  EXPECT_EQ(DiffPprof(base, neu)->time_nanos(), 2000);
  neu.set_time_nanos(1000);
  base.set_time_nanos(0);
  EXPECT_EQ(DiffPprof(base, neu)->time_nanos(), 0);
}

TEST(PprofDiffTest, ZeroSamplesGoAndNegationSaturates) {
  pprof::Profile base = Base();
  base.mutable_sample(0)->set_value(0, 0);
  base.mutable_sample(0)->set_value(1, 0);
  base.mutable_sample(1)->set_value(0, INT64_MIN);
  absl::StatusOr<pprof::Profile> d = DiffPprof(base, New());
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->sample_size(), 3);
  EXPECT_EQ(d->sample(2).value(0), INT64_MAX);
  EXPECT_EQ(d->sample(2).value(1), -12);
}

TEST(PprofDiffTest, ABaseLabelOfTheInputIsReplaced) {
  pprof::Profile base = Base();
  base.add_string_table("pprof::base");
  base.add_string_table("false");
  auto* l = base.mutable_sample(0)->add_label();
  l->set_key(base.string_table_size() - 2);
  l->set_str(base.string_table_size() - 1);
  absl::StatusOr<pprof::Profile> d = DiffPprof(base, New());
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->sample(2).label_size(), 1);
  EXPECT_TRUE(IsBase(*d, d->sample(2)));
}

TEST(PprofDiffTest, DifferentSampleTypesOrPeriodsAreRefusedByName) {
  Profile cpu;
  cpu.sample_types = {{"cpu", "nanoseconds"}};
  cpu.period_type = {"cpu", "nanoseconds"};
  cpu.frames = {Named("main")};
  cpu.samples.push_back({{0}, {10}, {}});
  absl::StatusOr<SampleTypeMatch> m = MatchSampleTypes(Pprof(cpu), New());
  EXPECT_EQ(m.status().message(),
            "they measure different things: BASE has cpu/nanoseconds; NEW has alloc_space/bytes, "
            "inuse_space/bytes");
  EXPECT_EQ(DiffPprof(Pprof(cpu), New()).status().message(), m.status().message());
  Profile other = Memory("a", 1, "b", 2);
  other.period_type = {"objects", "count"};
  EXPECT_EQ(MatchSampleTypes(Base(), Pprof(other)).status().message(),
            "their periods differ: BASE's is space/bytes, NEW's objects/count");
  // The same types are a complete match, which says nothing.
  m = MatchSampleTypes(Base(), New());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->complete());
  EXPECT_EQ(DescribeLeftOut(*m), "");
  const pprof::Profile d = *DiffPprof(Base(), New());
  for (int64_t c : d.comment()) EXPECT_FALSE(absl::StrContains(S(d, c), "gpuflame diff")) << S(d, c);
}

// BASE sampled its tensor allocations (alloc_samples); NEW is of an older
// gpuflame with no peak_space, and names its types in another order.
Profile Sampled() {
  Profile p = Memory("KVCache > __init__", 64, "legacy", 12);
  p.sample_types = {
      {"alloc_space", "bytes"}, {"inuse_space", "bytes"}, {"peak_space", "bytes"}, {"alloc_samples", "count"}};
  p.samples[0].values = {64, 60, 50, 3};
  p.samples[1].values = {12, 0, 0, 1};  // freed: in use 0
  p.comments = {"gpuflame: tensor allocations sampled by bytes"};
  return p;
}
Profile Older() {
  Profile p = Memory("KVCache > __init__", 96, "prefix", 20);
  p.sample_types = {{"inuse_space", "bytes"}, {"alloc_space", "bytes"}, {"launches", "count"}};
  p.default_sample_type = "launches";
  p.samples[0].values = {90, 96, 7};
  p.samples[1].values = {0, 0, 5};  // only in the type left out: no sample in the diff
  return p;
}

TEST(PprofDiffTest, OnlyTheSampleTypesBothHaveAreDiffedAndTheRestIsSaid) {
  absl::StatusOr<SampleTypeMatch> m = MatchSampleTypes(Pprof(Sampled()), Pprof(Older()));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->neu, (std::vector<int>{0, 1}));
  EXPECT_EQ(m->base, (std::vector<int>{1, 0}));
  EXPECT_EQ(m->only_in_base, (std::vector<std::string>{"peak_space/bytes", "alloc_samples/count"}));
  EXPECT_EQ(m->only_in_new, (std::vector<std::string>{"launches/count"}));
  const std::string said =
      "diffed the 2 sample types both have; only BASE has peak_space/bytes (each process's live set at its peak, "
      "which an older gpuflame's profiles lack), alloc_samples/count (allocations seen, where tensor allocations "
      "were sampled by bytes); only NEW has launches/count: left out";
  EXPECT_EQ(DescribeLeftOut(*m), said);

  absl::StatusOr<pprof::Profile> d = DiffPprof(Pprof(Sampled()), Pprof(Older()));
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(ValidatePprof(*d).ok()) << ValidatePprof(*d);
  // NEW's order; each side's values from its own columns.
  EXPECT_EQ(DescribeSampleTypes(*d), "inuse_space/bytes, alloc_space/bytes");
  std::vector<std::pair<std::string, std::vector<int64_t>>> rows;
  for (const auto& s : d->sample()) rows.push_back({StackOf(*d, s), {s.value().begin(), s.value().end()}});
  EXPECT_EQ(rows, (std::vector<std::pair<std::string, std::vector<int64_t>>>{
                      {"<module>;KVCache > __init__;malloc", {90, 96}},
                      {"<module>;KVCache > __init__;malloc", {-60, -64}},
                      {"<module>;legacy;malloc", {0, -12}}}));
  // NEW's default (launches) was left out; BASE's (inuse_space) is shared.
  EXPECT_EQ(S(*d, d->default_sample_type()), "inuse_space");
  std::vector<std::string> comments;
  for (int64_t c : d->comment()) comments.push_back(S(*d, c));
  EXPECT_EQ(comments,
            (std::vector<std::string>{"gpuflame: tensor allocations sampled by bytes", "gpuflame diff: " + said}));

  // The run says it beside the diff.
  InputProfile base{"torch_memory", {}, "base/torch_memory.pb.gz", Pprof(Sampled())};
  InputProfile neu{"torch_memory", {}, "new/torch_memory.pb.gz", Pprof(Older())};
  DiffRun run = DiffSides(DiffSide{"base", {base}}, DiffSide{"new", {neu}});
  ASSERT_EQ(run.outcomes.size(), 1u);
  ASSERT_TRUE(run.outcomes[0].status.ok()) << run.outcomes[0].status;
  EXPECT_EQ(run.outcomes[0].left_out, said);
  EXPECT_EQ(run.outcomes[0].diff.SerializeAsString(), d->SerializeAsString());
}

TEST(DiffRunTest, DeviceMemoryAgainstTensorMemoryIsRefusedByKind) {
  // The same sample types: only the kinds tell the levels apart.
  InputProfile gpu{"gpu_memory", {}, "a/gpu_memory.pb.gz", Base()};
  InputProfile torch{"torch_memory", {}, "b/torch_memory.pb.gz", New()};
  DiffRun run = DiffSides(DiffSide{"a/gpu_memory.pb.gz", {gpu}}, DiffSide{"b/torch_memory.pb.gz", {torch}});
  ASSERT_EQ(run.outcomes.size(), 1u);
  EXPECT_EQ(run.outcomes[0].status.message(),
            "they are different profiles: BASE is gpu_memory, NEW is torch_memory (gpu_memory is device memory, "
            "torch_memory PyTorch's tensors)");
  // Files named otherwise are the user's to pair.
  gpu.kind = "before";
  run = DiffSides(DiffSide{"a", {gpu}}, DiffSide{"b", {torch}});
  ASSERT_EQ(run.outcomes.size(), 1u);
  EXPECT_TRUE(run.outcomes[0].status.ok()) << run.outcomes[0].status;
  EXPECT_EQ(run.outcomes[0].left_out, "");
}

TEST(PprofDiffTest, ValidationRefusesWhatPprofRefuses) {
  auto expect = [](const std::function<void(pprof::Profile&)>& spoil, const std::string& why) {
    pprof::Profile p = New();
    spoil(p);
    EXPECT_EQ(ValidatePprof(p).message(), why);
    EXPECT_EQ(DiffPprof(Base(), p).status().message(), "NEW: " + why);
  };
  expect([](pprof::Profile& p) { p.mutable_sample(0)->add_location_id(99); },
         "a sample names location 99, which it lacks");
  expect([](pprof::Profile& p) { p.mutable_location(0)->mutable_line(0)->set_function_id(77); },
         "location 1 names function 77, which it lacks");
  expect([](pprof::Profile& p) { p.mutable_function(0)->set_name(1000); },
         "a function's name names string 1000 of a table of " + std::to_string(New().string_table_size()));
  expect([](pprof::Profile& p) { p.mutable_sample(0)->add_value(1); }, "a sample has 3 values for 2 sample types");
  expect([](pprof::Profile& p) { p.mutable_location(1)->set_id(p.location(0).id()); }, "two locations have id 1");
  expect([](pprof::Profile& p) { p.mutable_function(0)->set_id(0); }, "a function has id 0");
  expect([](pprof::Profile& p) { p.clear_sample_type(); }, "it has no sample types");
  expect([](pprof::Profile& p) { p.set_string_table(0, "x"); },
         "its string table does not start with the empty string");
  expect([](pprof::Profile& p) { p.mutable_sample(1)->add_label()->set_key(-1); },
         "a label's key names string -1 of a table of " + std::to_string(New().string_table_size()));
}

TEST(DiffTreeTest, BothSidesPerNodeAndFramesOnlyInOneSide) {
  pprof::Profile d = *DiffPprof(Base(), New());
  DiffTree t = DiffTree::FromPprof(d);
  ASSERT_EQ(t.sample_types().size(), 2u);
  EXPECT_EQ(t.default_type(), 1u);
  EXPECT_EQ(t.base(0, 1), 76);
  EXPECT_EQ(t.neu(0, 1), 116);
  auto find = [&](const std::vector<std::string>& stack) -> int {
    for (uint32_t n = 0; n < t.nodes().size(); n++)
      if (t.Stack(n) == stack) return static_cast<int>(n);
    return -1;
  };
  const int kv = find({"<module>", "KVCache > __init__"});
  const int legacy = find({"<module>", "legacy"});
  const int prefix = find({"<module>", "prefix", "malloc"});
  ASSERT_GE(kv, 0);
  ASSERT_GE(legacy, 0);
  ASSERT_GE(prefix, 0);
  EXPECT_EQ(t.base(kv, 1), 64);
  EXPECT_EQ(t.neu(kv, 1), 96);
  EXPECT_EQ(t.base_self(kv, 1), 0);
  EXPECT_EQ(t.base(legacy, 0), 12);  // only in BASE
  EXPECT_EQ(t.neu(legacy, 0), 0);
  EXPECT_EQ(t.new_self(prefix, 1), 20);  // only in NEW
  EXPECT_EQ(t.base_self(prefix, 1), 0);
  EXPECT_EQ(t.file(t.nodes()[kv].name), "serve.py");
}

TEST(DiffTreeTest, InlinedLinesAreFramesOutermostFirst) {
  pprof::Profile p = New();
  // malloc's location (the first: SerializePprof makes them leaf first)
  // gains KVCache > __init__ as a function inlined into malloc: pprof lists
  // a location's lines innermost first, so it goes before malloc's line.
  const uint64_t kv = p.location(1).line(0).function_id();
  auto* lines = p.mutable_location(0)->mutable_line();
  lines->Add()->set_function_id(kv);
  std::swap(*lines->Mutable(0), *lines->Mutable(1));
  DiffTree t = DiffTree::FromPprof(p);
  bool found = false;
  for (uint32_t n = 0; n < t.nodes().size(); n++)
    found = found ||
            t.Stack(n) == std::vector<std::string>{"<module>", "KVCache > __init__", "malloc", "KVCache > __init__"};
  EXPECT_TRUE(found);
}

TEST(DiffTreeTest, DeepStacksKeepTheirLeafwardFrames) {
  Profile p = Memory("a", 1, "b", 2);
  p.samples.resize(1);
  p.samples[0].frames.assign(DiffTree::kMaxDepth + 10, 1);
  p.samples[0].frames.back() = 3;
  DiffTree t = DiffTree::FromPprof(Pprof(p));
  uint32_t deepest = 0;
  for (uint32_t n = 0; n < t.nodes().size(); n++)
    if (t.Stack(n).size() > t.Stack(deepest).size()) deepest = n;
  const std::vector<std::string> stack = t.Stack(deepest);
  ASSERT_EQ(stack.size(), DiffTree::kMaxDepth);
  EXPECT_EQ(stack.front(), "[truncated: deeper than 512 frames]");
  EXPECT_EQ(stack.back(), "malloc");
  EXPECT_EQ(t.neu(deepest, 0), 1);
}

TEST(DiffSummaryTest, TotalsAndTheStacksThatChangedMost) {
  DiffTree t = DiffTree::FromPprof(*DiffPprof(Base(), New()));
  EXPECT_EQ(DiffSummary("torch_memory", t),
            "== torch_memory\n"
            "   alloc_space         76 B -> 116 B               +40 B (+52.6%)\n"
            "   inuse_space         76 B -> 116 B               +40 B (+52.6%)\n"
            "   grew most (inuse_space):\n"
            "            +32 B  <module> › KVCache > __init__ › malloc\n"
            "            +20 B  <module> › prefix › malloc\n"
            "   shrank most (inuse_space):\n"
            "            -12 B  <module> › legacy › malloc\n");
  TopChanges top = TopStackChanges(t, 1, 1);
  ASSERT_EQ(top.grew.size(), 1u);
  EXPECT_EQ(top.grew[0].delta, 32);
  ASSERT_EQ(top.shrank.size(), 1u);
  EXPECT_EQ(top.shrank[0].stack, (std::vector<std::string>{"<module>", "legacy", "malloc"}));
}

TEST(DiffSummaryTest, StacksAreNamedByTheirLeafwardFramesAndTheOneThatTellsThemApart) {
  const std::vector<std::string> stack = {"<module>", "main",  "EngineCore > __init__", "<interpreter trampoline>",
                                          "empty",    "malloc"};
  // Whole where it fits, without trampolines.
  EXPECT_EQ(LeafwardName(stack, 2, 200), "<module> › main › EngineCore > __init__ › empty › malloc");
  // Else from the frame that tells it apart (here EngineCore > __init__, the
  // fourth from the leaf) with the callers that fit...
  EXPECT_EQ(LeafwardName(stack, 4, 45), "… › EngineCore > __init__ › empty › malloc");
  EXPECT_EQ(LeafwardName(stack, 4, 52), "… › main › EngineCore > __init__ › empty › malloc");
  EXPECT_EQ(LeafwardName(stack, 1, 18), "… › empty › malloc");
  EXPECT_EQ(LeafwardName(stack, 1, 17), "… › malloc");
  // ...or that frame and the leaf-most frames that fit.
  EXPECT_EQ(LeafwardName(stack, 4, 40), "… › EngineCore > __init__ › … › malloc");
  EXPECT_EQ(LeafwardName(stack, 6, 40), "<module> › … › empty › malloc");
  EXPECT_EQ(LeafwardName(stack, 1, 3), "… › malloc");
  EXPECT_EQ(LeafwardName({}, 1, 10), "[no frames]");
  // Two stacks that end alike tell themselves apart by the frame before.
  Profile p = Memory("KVCache > __init__", 1, "legacy", 2);
  p.frames.push_back(Named("Tensor > __init__"));
  for (auto& s : p.samples) s.frames.insert(s.frames.end() - 1, 4);
  DiffTree t = DiffTree::FromPprof(*DiffPprof(Pprof(Memory("a", 0, "b", 0)), Pprof(p)));
  TopChanges top = TopStackChanges(t, 1, 5);
  ASSERT_EQ(top.grew.size(), 2u);
  EXPECT_EQ(top.grew[0].stack.back(), "malloc");
  EXPECT_EQ(top.grew[0].stack[1], "legacy");
  EXPECT_EQ(top.grew[0].distinct, 3u);  // legacy › Tensor > __init__ › malloc
  EXPECT_EQ(LeafwardName(top.grew[0].stack, top.grew[0].distinct, 10), "… › legacy › … › malloc");
}

TEST(DiffHtmlTest, NodesCarryBothSidesWidestFirst) {
  DiffTree t = DiffTree::FromPprof(*DiffPprof(Base(), New()));
  const std::string html = DiffFlameGraphHtml({{"torch_memory", &t}}, "run1", "run2 <new>", "diff");
  // [frame, new, children, base]: KVCache (96 + 64), then prefix (only in
  // NEW), then legacy (only in BASE, still drawn).
  EXPECT_NE(
      html.find("{\"type\":\"inuse_space\",\"unit\":\"bytes\",\"root\":"
                "[0,116,[[3,116,[[2,96,[[1,96,[],64]],64],[4,20,[[1,20,[],0]],0],[5,0,[[1,0,[],12]],12]],76]],76]}"),
      std::string::npos)
      << html.substr(html.find("gpuflame-data"), 900);
  EXPECT_NE(html.find("\"diff\":{\"base\":\"run1\",\"new\":\"run2 \\u003cnew\\u003e\"}"), std::string::npos);
  EXPECT_NE(html.find("[\"legacy\",\"\",\"serve.py\",0]"), std::string::npos);
  EXPECT_EQ(html.find("__DATA__"), std::string::npos);
  EXPECT_NE(html.find("\"notes\":[],\"diff\":"), std::string::npos);
  const std::string noted =
      DiffFlameGraphHtml({{"torch_memory", &t}}, "run1", "run2", "diff", {"torch_memory: only BASE has x/count"});
  EXPECT_NE(noted.find("\"notes\":[\"torch_memory: only BASE has x/count\"],\"diff\":"), std::string::npos);
}

TEST(HumanUnitsTest, SignedValuesInTheirUnits) {
  EXPECT_EQ(base::HumanDelta(32 << 20, "bytes"), "+32.00 MiB");
  EXPECT_EQ(base::HumanDelta(-(12 << 20), "bytes"), "-12.00 MiB");
  EXPECT_EQ(base::HumanDelta(0, "bytes"), "0 B");
  EXPECT_EQ(base::HumanDelta(-2'500'000, "nanoseconds"), "-2.5 ms");
  EXPECT_EQ(base::HumanDelta(1500, "count"), "+1.5 k");
  EXPECT_EQ(base::HumanValue(INT64_MIN, "count"), "-9223372036854.78 M");
  EXPECT_EQ(base::HumanValue(7, "samples"), "7 samples");
  EXPECT_EQ(base::HumanBytes(INT64_MIN), "-8388608.00 TiB");
}

// Files for the inputs' tests, in a folder of their own.
std::string Dir(const std::string& name) {
  std::string d = testing::ProcessTempDir() + "/diff-" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}
void Put(const std::string& path, const std::string& bytes) { ASSERT_TRUE(WriteFile(path, bytes).ok()); }
std::string Gz(const pprof::Profile& p) { return *Gzip(p.SerializeAsString()); }

TEST(DiffInputsTest, FilesGzippedOrNotAndGarbageNamed) {
  const std::string d = Dir("files");
  Put(d + "/a.pb.gz", Gz(New()));
  Put(d + "/b.pb", New().SerializeAsString());
  Put(d + "/junk.pb.gz", std::string("\x1f\x8b junk", 7));
  Put(d + "/empty.pb", "");
  Put(d + "/text.pb", "hello, this is not a profile");
  auto a = LoadDiffSide(d + "/a.pb.gz");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->profiles.size(), 1u);
  EXPECT_EQ(a->profiles[0].kind, "a");
  EXPECT_EQ(a->profiles[0].profile.sample_size(), 2);
  auto b = LoadDiffSide(d + "/b.pb");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->profiles[0].kind, "b");
  EXPECT_EQ(LoadDiffSide(d + "/junk.pb.gz").status().message(), d + "/junk.pb.gz: not valid gzip data");
  EXPECT_EQ(LoadDiffSide(d + "/empty.pb").status().message(), d + "/empty.pb: empty, not a profile");
  EXPECT_EQ(LoadDiffSide(d + "/text.pb").status().message(), d + "/text.pb: not a pprof profile (profile.proto)");
  EXPECT_EQ(LoadDiffSide(d + "/missing.pb.gz").status().message(),
            "no such file or directory: " + d + "/missing.pb.gz");
}

TEST(DiffInputsTest, DirectoriesPairByProfileName) {
  const std::string base = Dir("run1"), neu = Dir("run2");
  Put(base + "/torch_memory.pb.gz", Gz(Base()));
  Put(base + "/gpu_kernel.pb.gz", Gz(Base()));
  Put(base + "/torch_memory.diff.pb.gz", Gz(Base()));  // diff's own output: not an input
  Put(base + "/summary.json", "{}");
  Put(neu + "/torch_memory.pb.gz", Gz(New()));
  Put(neu + "/gpu_memory.pb.gz", Gz(New()));
  auto b = LoadDiffSide(base);
  auto n = LoadDiffSide(neu);
  ASSERT_TRUE(b.ok() && n.ok()) << b.status() << n.status();
  ASSERT_EQ(b->profiles.size(), 2u);
  EXPECT_EQ(b->profiles[0].kind, "gpu_kernel");  // by name
  Pairing p = PairProfiles(*b, *n);
  ASSERT_EQ(p.pairs.size(), 1u);
  EXPECT_EQ(p.pairs[0].name, "torch_memory");
  EXPECT_EQ(p.pairs[0].base->origin, base + "/torch_memory.pb.gz");
  EXPECT_EQ(p.only_in_base, (std::vector<std::string>{base + "/gpu_kernel.pb.gz"}));
  EXPECT_EQ(p.only_in_new, (std::vector<std::string>{neu + "/gpu_memory.pb.gz"}));
  EXPECT_EQ(LoadDiffSide(Dir("none")).status().message(),
            Dir("none") +
                " holds no profiles (*.pb.gz, *.pb): name a record output directory, a profile, or a "
                "spool file");
}

// A spool file as the agent writes it: one push request, a series per
// process and profile.
std::string SpoolFile(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& series) {
  push::v1::PushRequest r;
  for (const auto& [name, pid] : series) {
    auto* s = r.add_series();
    for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
             {"__name__", name}, {"service_name", "serve"}, {"pid", pid}}) {
      auto* l = s->add_labels();
      l->set_name(k);
      l->set_value(v);
    }
    s->add_samples()->set_raw_profile(Gz(pid == "1" ? Base() : New()));
  }
  auto spool = Spool::Open(dir, 1 << 20);
  EXPECT_TRUE(spool.ok());
  auto seq = spool->Put(r.SerializeAsString(), static_cast<uint32_t>(series.size()));
  EXPECT_TRUE(seq.ok());
  return absl::StrFormat("%s/%020d.push", dir, *seq);
}

TEST(DiffInputsTest, SpoolFilesGiveTheirSeriesPairedByLabels) {
  const std::string w1 = SpoolFile(Dir("spool1"), {{"torch_memory", "1"}, {"torch_memory", "2"}});
  const std::string w2 = SpoolFile(Dir("spool2"), {{"torch_memory", "2"}, {"gpu_memory", "2"}});
  auto b = LoadDiffSide(w1);
  auto n = LoadDiffSide(w2);
  ASSERT_TRUE(b.ok() && n.ok()) << b.status() << n.status();
  ASSERT_EQ(b->profiles.size(), 2u);
  EXPECT_EQ(b->profiles[1].DisplayName(), "torch_memory{service_name=serve, pid=2}");
  EXPECT_EQ(b->profiles[1].origin, w1 + ": torch_memory{service_name=serve, pid=2}");
  Pairing p = PairProfiles(*b, *n);
  ASSERT_EQ(p.pairs.size(), 1u);
  EXPECT_EQ(p.pairs[0].base, &b->profiles[1]);  // the same process, not the same kind alone
  EXPECT_EQ(p.only_in_base.size(), 1u);
  EXPECT_EQ(p.only_in_new.size(), 1u);
  // A record directory against one process's window pairs by kind.
  const std::string run = Dir("run-vs-window");
  Put(run + "/gpu_memory.pb.gz", Gz(Base()));
  Put(run + "/torch_memory.pb.gz", Gz(Base()));
  auto r = LoadDiffSide(run);
  ASSERT_TRUE(r.ok()) << r.status();
  Pairing q = PairProfiles(*r, *n);
  ASSERT_EQ(q.pairs.size(), 2u);
  EXPECT_EQ(q.pairs[0].base->kind, q.pairs[0].neu->kind);
  EXPECT_EQ(q.pairs[1].base->kind, q.pairs[1].neu->kind);
  // A damaged spool file is named, never replayed or removed.
  std::string bytes;
  {
    std::ifstream in(w1, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() / 2] ^= 0x55;
  Put(w1, bytes);
  auto damaged = LoadDiffSide(w1);
  EXPECT_TRUE(absl::StartsWith(damaged.status().message(), w1 + ": not a readable gpuflame spool file ("))
      << damaged.status();
  EXPECT_TRUE(std::filesystem::exists(w1));
}

TEST(DiffInputsTest, TwoLoneProfilesPairWhateverTheirNames) {
  const std::string d = Dir("lone");
  Put(d + "/before.pb.gz", Gz(Base()));
  Put(d + "/after.pb.gz", Gz(New()));
  DiffRun run = DiffSides(*LoadDiffSide(d + "/before.pb.gz"), *LoadDiffSide(d + "/after.pb.gz"));
  ASSERT_EQ(run.outcomes.size(), 1u);
  EXPECT_TRUE(run.outcomes[0].status.ok()) << run.outcomes[0].status;
  EXPECT_EQ(run.outcomes[0].name, "after");
  EXPECT_EQ(run.outcomes[0].stem, "after");
  ASSERT_TRUE(run.outcomes[0].tree.has_value());
  EXPECT_EQ(run.outcomes[0].tree->neu(0, 1) - run.outcomes[0].tree->base(0, 1), 40);
}

TEST(DiffRunTest, FileStemsAreSafeAndUnique) {
  std::vector<std::string> taken;
  InputProfile p;
  p.kind = "torch_memory";
  EXPECT_EQ(FileStem(p, taken), "torch_memory");
  EXPECT_EQ(FileStem(p, taken), "torch_memory.2");
  p.labels = {{"service_name", "a/b"}, {"pid", "42"}};
  EXPECT_EQ(FileStem(p, taken), "torch_memory.pid42");
  p.kind = "../../etc/x";
  p.labels.clear();
  EXPECT_EQ(FileStem(p, taken), "_.._.._etc_x");
}

TEST(DiffCommandTest, ParsesItsArguments) {
  auto c = profiler::ParseCommandLine({"diff", "a.pb.gz", "b.pb.gz", "-o", "out", "-q"});
  ASSERT_TRUE(c.ok()) << c.status();
  const auto& o = std::get<profiler::DiffOptions>(*c);
  EXPECT_EQ(o.base, "a.pb.gz");
  EXPECT_EQ(o.neu, "b.pb.gz");
  EXPECT_EQ(o.output, "out");
  EXPECT_TRUE(o.quiet);
  EXPECT_EQ(profiler::ParseCommandLine({"diff", "a", "-o", "out"}).status().message(),
            "diff needs two inputs, BASE and NEW (see gpuflame diff --help)");
  EXPECT_EQ(profiler::ParseCommandLine({"diff", "a", "b"}).status().message(),
            "diff needs -o DIR (see gpuflame diff --help)");
  EXPECT_EQ(profiler::ParseCommandLine({"diff", "a", "b", "-o"}).status().message(),
            "-o needs a directory (see gpuflame diff --help)");
  EXPECT_EQ(profiler::ParseCommandLine({"diff", "a", "b", "--normalize", "-o", "x"}).status().message(),
            "unknown option '--normalize' (see gpuflame diff --help)");
  EXPECT_NE(profiler::UsageText().find("gpuflame diff BASE NEW -o DIR"), std::string::npos);
  EXPECT_NE(profiler::DiffUsageText().find("gpuflame diff BASE NEW -o DIR"), std::string::npos);
}

TEST(DiffCommandTest, WritesTheDiffAndTheFlameGraph) {
  const std::string base = Dir("cmd-base"), neu = Dir("cmd-new"), out = Dir("cmd-out") + "/sub";
  Put(base + "/torch_memory.pb.gz", Gz(Base()));
  Put(neu + "/torch_memory.pb.gz", Gz(New()));
  EXPECT_EQ(profiler::RunDiff({base, neu, out, /*quiet=*/true}), 0);
  pprof::Profile written;
  {
    std::ifstream in(out + "/torch_memory.diff.pb.gz", std::ios::binary);
    std::string gz((std::istreambuf_iterator<char>(in)), {});
    ASSERT_TRUE(written.ParseFromString(*Gunzip(gz)));
  }
  EXPECT_EQ(written.SerializeAsString(), DiffPprof(Base(), New())->SerializeAsString());
  EXPECT_TRUE(std::filesystem::exists(out + "/diff_flamegraph.html"));
  // Mismatched kinds, missing and garbage files: exit 2, nothing written.
  const std::string cpu = Dir("cmd-cpu");
  Profile p;
  p.sample_types = {{"cpu", "nanoseconds"}};
  p.frames = {Named("main")};
  p.samples.push_back({{0}, {10}, {}});
  Put(cpu + "/torch_memory.pb.gz", Gz(Pprof(p)));
  const std::string out2 = Dir("cmd-out2") + "/sub";
  EXPECT_EQ(profiler::RunDiff({base, cpu, out2, true}), 2);
  EXPECT_EQ(profiler::RunDiff({base + "/nope.pb.gz", neu, out2, true}), 2);
  EXPECT_FALSE(std::filesystem::exists(out2));
}

}  // namespace
}  // namespace gpuflame::exporters
