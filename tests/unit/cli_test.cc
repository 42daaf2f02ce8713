// The command line's help and messages: each command has its own help, every
// mistake points at it, and the agent's help lists everything it accepts.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "agent/agent_config.h"
#include "app/cli.h"
#include "app/record_nccl.h"
#include "app/record_output.h"

namespace gpuflame::profiler {
namespace {

std::string Message(const std::vector<std::string>& args) {
  auto c = ParseCommandLine(args);
  return c.ok() ? std::string("ok") : std::string(c.status().message());
}

std::string Help(const std::vector<std::string>& args) {
  auto c = ParseCommandLine(args);
  if (!c.ok()) return "error: " + std::string(c.status().message());
  auto* h = std::get_if<HelpRequest>(&*c);
  return h ? h->text : "not help";
}

TEST(CliHelpTest, EachCommandHasItsOwnHelp) {
  EXPECT_EQ(Help({"record", "--help"}), RecordUsageText());
  EXPECT_EQ(Help({"record", "-o", "x", "-h"}), RecordUsageText());
  EXPECT_EQ(Help({"symbolize", "--help"}), SymbolizeUsageText());
  EXPECT_EQ(Help({"diff", "-h"}), DiffUsageText());
  EXPECT_EQ(Help({"agent", "--help"}), AgentUsageText());
  EXPECT_EQ(Help({"--help"}), UsageText());
  std::set<std::string> texts = {RecordUsageText(), SymbolizeUsageText(), DiffUsageText(), AgentUsageText(),
                                 UsageText()};
  EXPECT_EQ(texts.size(), 5u);
  EXPECT_NE(RecordUsageText().find("--native-stacks"), std::string::npos);
  EXPECT_NE(RecordUsageText().find("--log-format"), std::string::npos);
  EXPECT_EQ(SymbolizeUsageText().find("--native-stacks"), std::string::npos);
  // After --, --help is the command's own argument.
  auto c = ParseCommandLine({"record", "-o", "x", "--", "python3", "--help"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(std::get<RecordOptions>(*c).command, (std::vector<std::string>{"python3", "--help"}));
}

TEST(CliHelpTest, MistakesPointAtTheirCommandsHelp) {
  EXPECT_EQ(Message({"record"}), "record needs -o DIR (see gpuflame record --help)");
  EXPECT_EQ(Message({"record", "-o", "x", "--frobnicate"}),
            "unknown option '--frobnicate' (see gpuflame record --help)");
  EXPECT_EQ(Message({"record", "-o", "x", "--cpu-hz", "fast"}),
            "--cpu-hz: cpu_hz wants 0 to 10000 samples per second, not 'fast' (see gpuflame record --help)");
  EXPECT_EQ(Message({"symbolize", "a.pb.gz"}), "symbolize needs -o OUT.pb.gz (see gpuflame symbolize --help)");
  EXPECT_EQ(Message({"symbolize", "--x"}), "unknown option '--x' (see gpuflame symbolize --help)");
  EXPECT_EQ(Message({"agent", "--window", "0", "--pyroscope-url", "http://p"}),
            "window must be between 1 and 3600 seconds, not 0 (see gpuflame agent --help)");
  EXPECT_EQ(Message({"recrod"}), "unknown command 'recrod' (see gpuflame --help)");
  // One "gpuflame" at most: main() puts "gpuflame: " before the message.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {}, {"record"}, {"diff"}, {"symbolize"}, {"agent"}, {"record", "-o", "x", "-p", "1", "--", "ls"}})
    EXPECT_NE(Message(args).rfind("gpuflame", 0), 0u) << Message(args);
}

TEST(CliHelpTest, RecordTakesLogSettings) {
  auto c = ParseCommandLine({"record", "-o", "x", "--log-format", "json", "--log-level", "warning", "--", "ls"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(std::get<RecordOptions>(*c).log.format, logging::Format::kJson);
  EXPECT_EQ(std::get<RecordOptions>(*c).log.level, logging::Level::kWarning);
  EXPECT_EQ(Message({"record", "-o", "x", "--log-format", "xml"}),
            "log format wants text, logfmt or json, not 'xml' (see gpuflame record --help)");
}

TEST(CliHelpTest, RecordTakesTimelineSettings) {
  auto off = ParseCommandLine({"record", "-o", "x", "--", "ls"});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(std::get<RecordOptions>(*off).timeline.on);
  // A mark or a limit asks for the timeline too.
  auto c = ParseCommandLine({"record", "-o", "x", "--mark", "Trainer > step", "--mark", "DataLoader > __next__",
                             "--timeline-max-events", "500", "--timeline-max-mb", "8", "--", "ls"});
  ASSERT_TRUE(c.ok()) << c.status();
  const TimelineRequest& t = std::get<RecordOptions>(*c).timeline;
  EXPECT_TRUE(t.on);
  EXPECT_EQ(t.marks, (std::vector<std::string>{"Trainer > step", "DataLoader > __next__"}));
  EXPECT_EQ(t.max_events, 500u);
  EXPECT_EQ(t.max_mb, 8u);
  EXPECT_EQ(Message({"record", "-o", "x", "--timeline-max-mb", "-1"}),
            "--timeline-max-mb wants a positive number, not '-1' (see gpuflame record --help)");
  EXPECT_EQ(Message({"record", "-o", "x", "--mark", ""}), "--mark wants a frame name, not '' (see gpuflame record --help)");
  EXPECT_EQ(Message({"record", "-o", "x", "--mark"}),
            "--mark needs a frame name ('Trainer > step') (see gpuflame record --help)");
}

TEST(CliHelpTest, RecordTakesTheNcclHangThreshold) {
  auto d = ParseCommandLine({"record", "-o", "x", "--", "ls"});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(std::get<RecordOptions>(*d).nccl_hang_s, kDefaultNcclHangSeconds);
  auto c = ParseCommandLine({"record", "-o", "x", "--nccl-hang-s", "1.5", "--", "ls"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(std::get<RecordOptions>(*c).nccl_hang_s, 1.5);
  EXPECT_EQ(Message({"record", "-o", "x", "--nccl-hang-s", "0"}),
            "--nccl-hang-s wants 0.1 to 86400 seconds, not '0' (see gpuflame record --help)");
  EXPECT_NE(Help({"record", "--help"}).find("--nccl-hang-s S"), std::string::npos);
}

// Every flag the agent's parser takes is in its help, and so is every
// profile type it pushes.
TEST(CliHelpTest, TimelineAsksARunningAgent) {
  EXPECT_EQ(Help({"timeline", "--help"}), TimelineUsageText());
  auto c = ParseCommandLine(
      {"timeline", "-o", "t.json.gz", "--agent", "10.0.0.7:9400", "--pid", "12", "-p", "13", "--seconds", "2.5"});
  ASSERT_TRUE(c.ok()) << c.status();
  const auto& o = std::get<TimelineFetchOptions>(*c);
  EXPECT_EQ(o.output, "t.json.gz");
  EXPECT_EQ(o.agent, "10.0.0.7:9400");
  EXPECT_EQ(TimelineRequestPath(o), "/timeline?pid=12&pid=13&seconds=2.5");
  TimelineFetchOptions pod;
  pod.namespace_name = "ml";
  pod.pod = "trainer-0";
  EXPECT_EQ(TimelineRequestPath(pod), "/timeline?namespace=ml&pod=trainer-0");
  EXPECT_EQ(Message({"timeline", "--pid", "1"}), "timeline needs -o FILE (see gpuflame timeline --help)");
  EXPECT_EQ(Message({"timeline", "-o", "f", "--pid", "x"}),
            "--pid wants a process id, not 'x' (see gpuflame timeline --help)");
  EXPECT_EQ(Message({"timeline", "-o", "f", "--seconds", "0"}),
            "--seconds wants a number of seconds above 0, not '0' (see gpuflame timeline --help)");
  EXPECT_EQ(Message({"timeline", "-o"}), "-o needs a value (see gpuflame timeline --help)");
  EXPECT_EQ(Message({"timeline", "-o", "f", "--frob", "1"}), "unknown option '--frob' (see gpuflame timeline --help)");
}

TEST(AgentHelpTest, ListsEveryFlagAndProfileType) {
  const std::string help = AgentUsageText();
  for (const AgentFlag& f : AgentFlags()) EXPECT_NE(help.find(std::string(f.flag) + " "), std::string::npos) << f.flag;
  for (const char* flag : {"--namespace",
                           "--pod",
                           "--process",
                           "--pid",
                           "--config",
                           "--check-config",
                           "--help",
                           "--native-stacks",
                           "--cpu-hz",
                           "--thread-names",
                           "--no-gate",
                           "--no-kernel-time",
                           "--kernel-activity",
                           "--tensor-sampling",
                           "--tensor-startup-s",
                           "--ring-buffer-kb",
                           "--tensor-events",
                           "--binaries",
                           "--max-cpu",
                           "--max-overhead",
                           "--max-memory-mb",
                           "--hide-trampolines",
                           "--keep-interpreter-frames",
                           "--metrics-address",
                           "--log-format",
                           "--log-level"})
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  for (const char* profile : {"gpu_memory", "torch_memory", "process_cpu", "gpu_kernel", "gpu_oom"})
    EXPECT_NE(help.find(profile), std::string::npos) << profile;
  // Each table flag is one the parser takes (with a value that may be wrong,
  // but never "unknown option").
  for (const AgentFlag& f : AgentFlags()) {
    auto c = LoadAgentConfig({"--pyroscope-url", "http://p:4040", f.flag, "x"}, {});
    if (!c.ok()) {
      EXPECT_EQ(c.status().message().find("unknown"), std::string::npos) << f.flag << ": " << c.status();
    }
  }
}

TEST(AgentHelpTest, LogSettingsFromFlagsEnvironmentAndFile) {
  auto c = LoadAgentConfig({"--pyroscope-url", "http://p:4040"}, {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->log.format, logging::Format::kLogfmt);  // a DaemonSet's default
  EXPECT_EQ(c->log.level, logging::Level::kInfo);
  c = LoadAgentConfig({"--pyroscope-url", "http://p:4040", "--log-level", "error", "--log-repeat-seconds", "5"},
                      {{"GPUFLAME_LOG_FORMAT", "json"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->log.format, logging::Format::kJson);
  EXPECT_EQ(c->log.level, logging::Level::kError);
  EXPECT_DOUBLE_EQ(c->log.repeat_interval_s, 5);
  const std::string file = ::testing::TempDir() + "/agent_log.yaml";
  std::ofstream(file) << "pyroscope_url: http://p:4040\nlog_format: text\nlog_level: debug\n";
  c = LoadAgentConfig({"--config", file}, {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->log.format, logging::Format::kText);
  EXPECT_EQ(c->log.level, logging::Level::kDebug);
  std::ofstream(file) << "pyroscope_url: http://p:4040\nlog_level: chatty\n";
  c = LoadAgentConfig({"--config", file}, {});
  EXPECT_EQ(c.status().message(), file + ":2: log level wants debug, info, warning or error, not 'chatty'");
}

// A record into a directory removes what the last record wrote there (its
// manifest's names) and nothing else.
TEST(RecordOutputTest, RemovesOnlyTheLastRunsOutputs) {
  const std::string dir = ::testing::TempDir() + "/record_output_stale";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/subdir");
  for (const char* f : {"torch_memory.pb.gz", "torch_memory.alloc_space.folded", "mine.pb.gz"})
    std::ofstream(dir + "/" + f) << "x";
  std::ofstream(dir + "/" + kOutputManifest)
      << "torch_memory.pb.gz\ntorch_memory.alloc_space.folded\n../escape\n/etc/passwd\nsubdir\n\nabsent.pb.gz\n";
  std::ofstream(::testing::TempDir() + "/escape") << "outside";
  std::vector<std::string> removed = RemoveStaleOutputs(dir);
  EXPECT_EQ(removed, (std::vector<std::string>{"torch_memory.pb.gz", "torch_memory.alloc_space.folded"}));
  EXPECT_TRUE(std::filesystem::exists(dir + "/mine.pb.gz"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/subdir"));
  EXPECT_TRUE(std::filesystem::exists(::testing::TempDir() + "/escape"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/" + kOutputManifest));
  // No manifest: nothing is touched.
  EXPECT_TRUE(RemoveStaleOutputs(dir).empty());
  EXPECT_TRUE(std::filesystem::exists(dir + "/mine.pb.gz"));
}

TEST(RecordOutputTest, WritesTheManifestOfWhatItWrote) {
  const std::string dir = ::testing::TempDir() + "/record_output_manifest";
  std::filesystem::remove_all(dir);
  Profile p;
  p.name = "gpu_memory";
  p.sample_types = {{"inuse_space", "bytes"}};
  auto written = WriteRecordOutput(dir, {&p}, "t", "{}");
  ASSERT_TRUE(written.ok()) << written.status();
  std::ifstream in(dir + "/" + kOutputManifest);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, "gpu_memory.pb.gz\ngpu_memory.inuse_space.folded\nflamegraph.html\nsummary.json\n");
}

}  // namespace
}  // namespace gpuflame::profiler
