#include <gtest/gtest.h>

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
  EXPECT_EQ(html.find("http://"), std::string::npos);  // nothing fetched
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_NE(html.find("\"gpu_memory\""), std::string::npos);
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
