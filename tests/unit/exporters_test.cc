#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/utf8.h"

#include "exporters/files/folded_writer.h"
#include "exporters/pprof/gzip.h"
#include "exporters/files/html_writer.h"
#include "exporters/pprof/pprof_writer.h"
#include "exporters/pprof/stored_profile.h"
#include "profile.pb.h"

namespace gpuflame::exporters {
namespace {

using profiler::Label;
using profiler::Profile;
using profiler::Sample;
using symbolizer::Frame;
using symbolizer::FrameKind;

Frame Py(std::string name, std::string file, int line) {
  Frame f;
  f.kind = FrameKind::kPython;
  f.name = std::move(name);
  f.file = std::move(file);
  f.line = line;
  return f;
}

Profile TwoStacks() {
  Profile p;
  p.name = "gpu_memory";
  p.sample_types = {{"alloc_space", "bytes"}, {"inuse_space", "bytes"}};
  p.default_sample_type = "inuse_space";
  p.period_type = {"space", "bytes"};
  p.period = 1;
  Frame api;
  api.kind = FrameKind::kApi;
  api.name = "cudaMalloc";
  Frame native;
  native.kind = FrameKind::kNative;
  native.name = "at::empty";
  native.file = "/lib/libtorch.so";
  native.build_id = "abcd";
  native.address = 0x1234;
  p.frames = {Py("<module>", "m.py", 1), Py("Model > forward", "m.py", 9), api, native};
  p.samples.push_back({{0, 1, 2}, {100, 50}, {{"pid", "", 42}}});
  p.samples.push_back({{0, 3, 2}, {7, 0}, {{"process", "python3", 0}}});
  return p;
}

TEST(PprofWriterTest, FollowsTheFormatRules) {
  pprof::Profile out;
  ASSERT_TRUE(out.ParseFromString(SerializePprof(TwoStacks())));
  ASSERT_GT(out.string_table_size(), 0);
  EXPECT_EQ(out.string_table(0), "");
  ASSERT_EQ(out.sample_type_size(), 2);
  EXPECT_EQ(out.string_table(out.sample_type(1).type()), "inuse_space");
  EXPECT_EQ(out.string_table(out.default_sample_type()), "inuse_space");
  ASSERT_EQ(out.sample_size(), 2);
  // Leaf first: the first location of a sample is the API frame.
  const auto& s = out.sample(0);
  ASSERT_EQ(s.location_id_size(), 3);
  auto function_name = [&](uint64_t location_id) {
    for (const auto& l : out.location())
      if (l.id() == location_id)
        for (const auto& f : out.function())
          if (f.id() == l.line(0).function_id()) return out.string_table(f.name());
    return std::string("?");
  };
  EXPECT_EQ(function_name(s.location_id(0)), "cudaMalloc");
  EXPECT_EQ(function_name(s.location_id(2)), "<module>");
  EXPECT_EQ(s.value(0), 100);
  for (const auto& l : out.location()) EXPECT_NE(l.id(), 0u);
  for (const auto& f : out.function()) EXPECT_NE(f.id(), 0u);
  // Only the native frame has a mapping, carrying its build ID.
  ASSERT_EQ(out.mapping_size(), 1);
  EXPECT_EQ(out.string_table(out.mapping(0).build_id()), "abcd");
  EXPECT_EQ(out.string_table(out.sample(1).label(0).str()), "python3");
  EXPECT_EQ(out.sample(0).label(0).num(), 42);
}

TEST(PprofWriterTest, SharedFramesShareLocations) {
  pprof::Profile out;
  ASSERT_TRUE(out.ParseFromString(SerializePprof(TwoStacks())));
  EXPECT_EQ(out.location_size(), 4);  // <module> and cudaMalloc appear in both stacks once
}

TEST(PprofWriterTest, InlinedFramesShareOneLocationInnermostFirst) {
  Profile p = TwoStacks();
  Frame outer;
  outer.kind = FrameKind::kNative;
  outer.name = "NewSegment";
  outer.file = "/lib/libsim.so";
  outer.address = 0x40;
  Frame inner = outer;
  inner.name = "gf_sim_alloc";
  inner.line = 17;
  inner.inlined = true;
  Frame recursion = outer;  // the same address again, not inlined: a frame of its own
  const auto base = static_cast<uint32_t>(p.frames.size());
  p.frames.push_back(outer);
  p.frames.push_back(inner);
  p.frames.push_back(recursion);
  p.samples = {{{0, base, base + 1, base + 2, 2}, {1, 1}, {}}};
  pprof::Profile out;
  ASSERT_TRUE(out.ParseFromString(SerializePprof(p)));
  ASSERT_EQ(out.sample(0).location_id_size(), 4);  // cudaMalloc, NewSegment (recursion), the inlined pair, <module>
  auto location = [&](uint64_t id) -> const pprof::Location& {
    for (const auto& l : out.location())
      if (l.id() == id) return l;
    return out.location(0);
  };
  auto name = [&](uint64_t function_id) {
    for (const auto& f : out.function())
      if (f.id() == function_id) return out.string_table(f.name());
    return std::string("?");
  };
  const pprof::Location& pair = location(out.sample(0).location_id(2));
  ASSERT_EQ(pair.line_size(), 2);
  EXPECT_EQ(name(pair.line(0).function_id()), "gf_sim_alloc");
  EXPECT_EQ(pair.line(0).line(), 17);
  EXPECT_EQ(name(pair.line(1).function_id()), "NewSegment");
  EXPECT_EQ(pair.address(), 0x40u);
  EXPECT_EQ(location(out.sample(0).location_id(1)).line_size(), 1);
  for (const auto& m : out.mapping()) {
    if (out.string_table(m.filename()) == "/lib/libsim.so") {
      EXPECT_TRUE(m.has_line_numbers());
    }
  }
}

TEST(GzipTest, RoundTripsAndRejectsGarbage) {
  std::string data(100000, 'x');
  auto gz = Gzip(data);
  ASSERT_TRUE(gz.ok());
  EXPECT_LT(gz->size(), data.size() / 10);
  auto back = Gunzip(*gz);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, data);
  EXPECT_FALSE(Gunzip("not gzip at all").ok());
  EXPECT_FALSE(Gunzip(gz->substr(0, gz->size() / 2)).ok());
  EXPECT_FALSE(Gunzip(*gz, 1000).ok());  // expansion bound
}

TEST(FoldedWriterTest, OneLinePerStackWithoutZeroes) {
  Profile p = TwoStacks();
  EXPECT_EQ(FoldedStacks(p, 0),
            "<module>;Model > forward;cudaMalloc 100\n<module>;at::empty;cudaMalloc 7\n");
  EXPECT_EQ(FoldedStacks(p, 1), "<module>;Model > forward;cudaMalloc 50\n");
  EXPECT_EQ(FoldedStacks(p, 5), "");
  p.frames[1].name = "weird;name";
  EXPECT_NE(FoldedStacks(p, 0).find("weird name"), std::string::npos);
}

TEST(HtmlWriterTest, SelfContainedAndEscaped) {
  Profile p = TwoStacks();
  p.frames[1].name = "</script><b>x";
  std::string html = FlameGraphHtml({&p}, "demo <run>");
  EXPECT_EQ(html.find("</script><b>"), std::string::npos);
  EXPECT_NE(html.find("\\u003c/script\\u003e"), std::string::npos);
  EXPECT_NE(html.find("demo &lt;run&gt;"), std::string::npos);
  // Nothing fetched: the one address is the SVG export's XML namespace, a name.
  const auto count = [&](std::string_view what) {
    size_t n = 0;
    for (size_t at = html.find(what); at != std::string::npos; at = html.find(what, at + 1)) n++;
    return n;
  };
  EXPECT_EQ(count("http://"), count("\"http://www.w3.org/2000/svg\""));
  EXPECT_EQ(count("https://"), 0u);
  EXPECT_NE(html.find("\"gpu_memory\""), std::string::npos);
}

// The page's data block, as its script reads it.
nlohmann::json PageData(const std::string& html) {
  const std::string open = R"(<script id="gpuflame-data" type="application/json">)";
  const size_t at = html.find(open) + open.size();
  return nlohmann::json::parse(html.substr(at, html.find("</script>", at) - at));
}
// The child of node |n| whose frame is named |name| (and of |file|, if given).
const nlohmann::json* ChildNamed(const nlohmann::json& data, const nlohmann::json& n, const std::string& name,
                                 const std::string& file = "") {
  for (const auto& c : n[2]) {
    const auto& f = data["frames"][c[0].get<size_t>()];
    if (f[0] == name && (file.empty() || f[2] == file)) return &c;
  }
  return nullptr;
}

TEST(HtmlWriterTest, FunctionsByIdentityWithTheirLines) {
  Profile p = TwoStacks();
  p.sample_types = {{"cpu", "nanoseconds"}};
  Frame bash_main;
  bash_main.kind = FrameKind::kNative;
  bash_main.name = "main";
  bash_main.file = "/usr/bin/bash";
  // main of m.py allocates from lines 3 and 5 (through `work` on 5), bash's
  // main is another function of the same name.
  p.frames = {Py("main", "m.py", 3), Py("main", "m.py", 5), Py("work", "m.py", 12), bash_main};
  p.samples = {{{0}, {30}, {{"pid", "", 7}}}, {{1, 2}, {10}, {{"pid", "", 7}}}, {{3}, {4}, {{"pid", "", 7}}}};
  const nlohmann::json data = PageData(FlameGraphHtml({&p}, "t"));
  const nlohmann::json& root = data["profiles"][0]["types"][0]["root"];
  EXPECT_EQ(root[1], 44);
  const nlohmann::json* py = ChildNamed(data, root, "main", "m.py");
  const nlohmann::json* sh = ChildNamed(data, root, "main", "/usr/bin/bash");
  ASSERT_TRUE(py && sh);
  EXPECT_NE((*py)[0], (*sh)[0]);  // two functions in the frame table
  EXPECT_EQ((*py)[1], 40);
  // [line, total, self]: line 3 holds 30 itself, line 5 passes 10 on to work.
  EXPECT_EQ((*py)[4], nlohmann::json::parse("[3,30,30,5,10,0]"));
  EXPECT_EQ((*sh)[1], 4);
  EXPECT_EQ(sh->size(), 3u);  // no line known: none written
  const nlohmann::json* work = ChildNamed(data, *py, "work");
  ASSERT_TRUE(work);
  EXPECT_EQ((*work)[4], 12);  // one line for the whole frame: the number alone
  EXPECT_EQ(data["profiles"][0]["processes"], 1);
  EXPECT_EQ(data["profiles"][0]["samples"], 3);
}

TEST(HtmlWriterTest, OneTreePerProcessWhereThereAreSeveral) {
  Profile p = TwoStacks();
  p.samples[1].labels = {{"pid", "", 43}, {"process", "bash", 0}};
  p.samples.push_back({{0, 1, 2}, {5, 5}, {{"pid", "", 42}, {"process", "python3", 0}}});
  const nlohmann::json data = PageData(FlameGraphHtml({&p}, "t"));
  const nlohmann::json& root = data["profiles"][0]["types"][0]["root"];
  EXPECT_EQ(data["profiles"][0]["processes"], 2);
  EXPECT_EQ(root[1], 112);
  // The process level: named by the process label where a sample has one.
  const nlohmann::json* python = ChildNamed(data, root, "python3 (pid 42)");
  const nlohmann::json* bash = ChildNamed(data, root, "bash (pid 43)");
  ASSERT_TRUE(python && bash) << root.dump();
  EXPECT_EQ(root[2].size(), 2u);
  EXPECT_EQ((*python)[1], 105);
  EXPECT_EQ((*bash)[1], 7);
  EXPECT_EQ(data["frames"][(*bash)[0].get<size_t>()][1], "process");
  ASSERT_TRUE(ChildNamed(data, *bash, "<module>"));
  // One process: no process level.
  Profile single = TwoStacks();
  const nlohmann::json s = PageData(FlameGraphHtml({&single}, "t"));
  EXPECT_TRUE(ChildNamed(s, s["profiles"][0]["types"][0]["root"], "<module>"));
}

TEST(HtmlWriterTest, SaysWhatAnEmptyProfileKnows) {
  Profile p = TwoStacks();
  p.samples.clear();
  p.duration_nanos = 2'000'000'000;
  p.comments = {"gpuflame: a comment"};
  const nlohmann::json data = PageData(FlameGraphHtml({&p}, "t"));
  const nlohmann::json& prof = data["profiles"][0];
  EXPECT_EQ(prof["samples"], 0);
  EXPECT_EQ(prof["duration_ns"], 2'000'000'000);
  EXPECT_EQ(prof["period"], 1);
  EXPECT_EQ(prof["comments"][0], "gpuflame: a comment");
  EXPECT_EQ(prof["types"][0]["root"][1], 0);
}

TEST(StoredProfileTest, ElementsAreCountedOnTheWireBeforeParsing) {
  // A sample type, the empty string, then 1000 empty samples (2 bytes each).
  std::string tiny = std::string("\x0a\x00\x32\x00", 4);
  for (int i = 0; i < 1000; i++) tiny += std::string("\x12\x00", 2);
  EXPECT_EQ(CountPprofElements(tiny).value(), 1002u);
  // A real profile: at least its samples, locations, functions and strings,
  // and the messages and arrays inside them.
  const std::string bytes = SerializePprof(TwoStacks());
  pprof::Profile p;
  ASSERT_TRUE(p.ParseFromString(bytes));
  const uint64_t parts = p.sample_size() + p.location_size() + p.function_size() + p.mapping_size() +
                         p.string_table_size() + p.sample_type_size();
  const uint64_t count = CountPprofElements(bytes).value();
  EXPECT_GE(count, parts + 2 * p.sample_size() + p.location_size());  // + arrays, labels, lines
  EXPECT_LE(count, 2 * parts + 4 * p.sample_size());
  // Not wire format: a group, a field 0, a length past the end.
  EXPECT_EQ(CountPprofElements(std::string("\x0b\x0c", 2)).status().message(),
            "not a pprof profile");
  EXPECT_FALSE(CountPprofElements(std::string("\x00\x01", 2)).ok());
  EXPECT_FALSE(CountPprofElements(std::string("\x12\x05\x00", 3)).ok());
  EXPECT_EQ(CountPprofElements("").value(), 0u);
}

}  // namespace
}  // namespace gpuflame::exporters
