// The structured log (logging/): each format's lines as their readers parse
// them, the level filter, and repeats held back and counted.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "logging/log.h"
#include "logging/repeat_limiter.h"

namespace gpuflame::logging {
namespace {

// The log writes to |out| with a clock the test moves; restored to stderr after.
class LogTest : public ::testing::Test {
 protected:
  void Use(Format format, Level level = Level::kInfo, double repeat_s = 60) {
    Options o;
    o.format = format;
    o.level = level;
    o.repeat_interval_s = repeat_s;
    o.out = &out_;
    o.now_ns = [this] { return now_ns_; };
    Configure(std::move(o));
  }
  void TearDown() override { Configure(Options{}); }
  std::vector<std::string> Lines() {
    std::vector<std::string> lines = absl::StrSplit(out_.str(), '\n', absl::SkipEmpty());
    return lines;
  }
  std::ostringstream out_;
  int64_t now_ns_ = 1'000'000'000;
};

TEST_F(LogTest, TextIsOneLinePrefixedOnce) {
  Use(Format::kText);
  Error("cannot write to output directory /x");
  Warning("3 events were dropped", {{"pid", 42}, {"process", "python 3"}});
  Info("recording python3");
  EXPECT_EQ(Lines(), (std::vector<std::string>{"gpuflame: cannot write to output directory /x",
                                               "gpuflame: warning: 3 events were dropped pid=42 process=\"python 3\"",
                                               "gpuflame: recording python3"}));
}

TEST_F(LogTest, LogfmtQuotesWhatWouldSplitTheLine) {
  Use(Format::kLogfmt);
  Warning("ring \"full\"", {{"comm", "a=b\nc"}, {"pid", 7}, {"ok", true}, {"empty", ""}});
  auto lines = Lines();
  ASSERT_EQ(lines.size(), 1u) << out_.str();
  // ts=2026-12-01T19:53:24.123Z level=warning msg=...
  ASSERT_EQ(lines[0].rfind("ts=", 0), 0u) << lines[0];
  EXPECT_EQ(lines[0][26], 'Z') << lines[0];
  EXPECT_EQ(lines[0].substr(28), "level=warning msg=\"ring \\\"full\\\"\" comm=\"a=b\\nc\" pid=7 ok=true empty=\"\"")
      << lines[0];
}

TEST_F(LogTest, JsonIsOneObjectPerLineWithTypedValues) {
  Use(Format::kJson);
  Info("agent stopped", {{"processes", uint64_t{10}}, {"url", "http://p:4040"}, {"ratio", 0.5}, {"odd", "\x01</"}});
  auto lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  auto j = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["msg"], "agent stopped");
  EXPECT_EQ(j["processes"], 10);
  EXPECT_EQ(j["url"], "http://p:4040");
  EXPECT_DOUBLE_EQ(j["ratio"].get<double>(), 0.5);
  EXPECT_EQ(j["odd"], "\x01</");
  EXPECT_TRUE(j["ts"].get<std::string>().ends_with("Z")) << lines[0];
}

TEST_F(LogTest, BelowTheLevelNothingIsWritten) {
  Use(Format::kLogfmt, Level::kWarning);
  Debug("d");
  Info("i");
  Warning("w");
  Error("e");
  auto lines = Lines();
  ASSERT_EQ(lines.size(), 2u) << out_.str();
  EXPECT_NE(lines[0].find("level=warning msg=w"), std::string::npos);
  EXPECT_NE(lines[1].find("level=error msg=e"), std::string::npos);
  Use(Format::kText, Level::kDebug);
  Debug("d");
  EXPECT_EQ(Lines().back(), "gpuflame: debug: d");
}

TEST_F(LogTest, RepeatsAreHeldBackAndCounted) {
  Use(Format::kLogfmt, Level::kInfo, /*repeat_s=*/10);
  for (int i = 0; i < 5; i++) Warning("attach failed", {{"file", "libcuda.so"}});
  Warning("attach failed", {{"file", "libcudart.so"}});  // another line: its own
  now_ns_ += 11'000'000'000;
  Warning("attach failed", {{"file", "libcuda.so"}});  // the interval passed: said, with the count
  Warning("attach failed", {{"file", "libcuda.so"}});  // held again
  Flush();                                             // what is held is said at exit
  auto lines = Lines();
  ASSERT_EQ(lines.size(), 4u) << out_.str();
  EXPECT_TRUE(lines[0].ends_with("msg=\"attach failed\" file=libcuda.so")) << lines[0];
  EXPECT_TRUE(lines[1].ends_with("msg=\"attach failed\" file=libcudart.so")) << lines[1];
  EXPECT_TRUE(lines[2].ends_with("msg=\"attach failed\" file=libcuda.so repeated=4")) << lines[2];
  EXPECT_TRUE(lines[3].ends_with("msg=\"attach failed\" file=libcuda.so repeated=1")) << lines[3];
}

TEST_F(LogTest, RepeatCountsInTextAndJson) {
  Use(Format::kText, Level::kInfo, 10);
  Warning("x");
  Warning("x");
  Warning("x");
  Flush();
  EXPECT_EQ(Lines().back(), "gpuflame: warning: x (repeated 2 times)");
  Use(Format::kJson, Level::kInfo, 10);
  Warning("y");
  Warning("y");
  Flush();
  EXPECT_EQ(nlohmann::json::parse(Lines().back())["repeated"], 1);
}

TEST_F(LogTest, ZeroIntervalWritesEveryRepeat) {
  Use(Format::kText, Level::kInfo, 0);
  for (int i = 0; i < 3; i++) Info("same");
  EXPECT_EQ(Lines().size(), 3u);
}

TEST(RepeatLimiterTest, BoundedKeysNeverHoldBackUntrackedLines) {
  RepeatLimiter limiter(/*interval_ns=*/100, /*max_keys=*/2);
  EXPECT_EQ(limiter.Admit("a", 0), 0u);
  EXPECT_EQ(limiter.Admit("b", 0), 0u);
  EXPECT_EQ(limiter.Admit("c", 0), 0u);  // full: let through, not tracked
  EXPECT_EQ(limiter.Admit("c", 1), 0u);
  EXPECT_EQ(limiter.tracked(), 2u);
  EXPECT_FALSE(limiter.Admit("a", 1).has_value());
  // Quiet keys past their interval make room; a key with a count stays.
  EXPECT_EQ(limiter.Admit("d", 200), 0u);
  EXPECT_EQ(limiter.tracked(), 2u);
  auto held = limiter.TakeHeld();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0], (std::pair<std::string, uint64_t>{"a", 1}));
}

TEST(LogOptionsTest, ParsesNamesAndSaysWhatItWants) {
  EXPECT_EQ(*ParseFormat("json"), Format::kJson);
  EXPECT_EQ(*ParseLevel("warn"), Level::kWarning);
  EXPECT_EQ(ParseFormat("xml").status().message(), "log format wants text, logfmt or json, not 'xml'");
  EXPECT_EQ(ParseLevel("loud").status().message(), "log level wants debug, info, warning or error, not 'loud'");
}

}  // namespace
}  // namespace gpuflame::logging
