// The agent's configuration file: every shape a hand-written or hostile YAML
// file can take gives one message naming the key and what it wants, never an
// abort (yaml-cpp throws on conversions it cannot make).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/support/temp_dir.h"
#include "agent/agent_config.h"
#include "exporters/pyroscope/bearer_token.h"
#include "exporters/pyroscope/pyroscope_grpc_client.h"

namespace gpuflame {
namespace {

using profiler::LoadAgentConfig;

std::string LoadText(const std::string& text) {
  std::string path = testing::ProcessTempDir() + "/agent_config_test.yaml";
  std::ofstream(path, std::ios::trunc) << text;
  auto c = LoadAgentConfig({"--config", path, "--pyroscope-url", "http://p"}, {});
  return c.ok() ? "ok" : std::string(c.status().message());
}

TEST(AgentConfigFileTest, MisshapenValuesNameTheKeyAndWhatItWants) {
  const std::pair<const char*, const char*> kCases[] = {
      // The shapes that aborted the agent (uncaught YAML::TypedBadConversion).
      {"namespaces: [[a]]\n", ":1: 'namespaces' wants a list of namespace names: item 1 is a list"},
      {"window: [[1]]\n", ":1: 'window' wants a number of seconds, not a list"},
      {"namespaces: [{a: b}]\n", ":1: 'namespaces' wants a list of namespace names: item 1 is a map"},
      {"pods: &x [*x]\n", ":1: 'pods' wants a list of pod names: item 1 is a list"},
      {"pods: [a, &x [*x]]\n", ":1: 'pods' wants a list of pod names: item 2 is a list"},
      // Other wrong shapes.
      {"window: {a: 1}\n", ":1: 'window' wants a number of seconds, not a map"},
      {"window:\n", ":1: 'window' wants a number of seconds, not an empty value"},
      {"pyroscope_url: [http://a, http://b]\n", ":1: 'pyroscope_url' wants a URL, not a list"},
      {"cpu_hz: [1]\n", ":1: 'cpu_hz' wants a single value, not a list"},
      {"pids: [1, ~]\n", ":1: 'pids' wants a list of process ids: item 2 is empty"},
      {"namespaces: ['a,b']\n", ":1: 'namespaces' wants a list of namespace names: item 1 has a comma"},
      {"tenant: t\nwindow: 5\nwindow: 6\n", ":3: 'window' is already set on line 2"},
      {"[a]: 1\n", ":1: a setting's name must be a plain word"},
      {"? {a: b}\n: 1\n", ":1: a setting's name must be a plain word"},
      {"- a\n- b\n", "expected key: value settings"},
      {"windwo: 5\n", ":1: unknown setting 'windwo'"},
      {"<<: {window: 3}\n", ":1: unknown setting '<<'"},
      // Right shape, wrong value.
      {"window: soon\n", ":1: window wants a number, not 'soon'"},
      {"pids: [12, x]\n", ":1: pids wants a whole number, not 'x'"},
      {"pids: [0]\n", ":1: pids wants a process id (1 or more), not '0'"},
      {"thread_names: perhaps\n", "thread_names wants true or false"},
      {"kubelet_insecure_skip_verify: perhaps\n", "kubelet_insecure_skip_verify wants true or false, not 'perhaps'"},
      {"pyroscope_url: [unclosed\n", "not valid YAML"},
  };
  for (const auto& [text, want] : kCases) {
    std::string msg = LoadText(text);
    EXPECT_NE(msg.find(want), std::string::npos) << text << " -> " << msg;
  }
}

// yaml-cpp's own limits turn hostile nesting and alias bombs into messages
// before our code sees a node; a list's items are never followed further.
TEST(AgentConfigFileTest, DeepNestingAndAliasBombsAreMessages) {
  std::string deep = "namespaces: " + std::string(100000, '[') + std::string(100000, ']') + "\n";
  EXPECT_NE(LoadText(deep).find("agent_config_test.yaml:1:"), std::string::npos) << LoadText(deep);
  std::string bomb = "pods: &a0 [x]\n";
  for (int i = 1; i < 40; i++)
    bomb +=
        "processes: &a" + std::to_string(i) + " [*a" + std::to_string(i - 1) + ", *a" + std::to_string(i - 1) + "]\n";
  EXPECT_NE(LoadText(bomb).find("'processes' wants a list of process names: item 1 is a list"), std::string::npos)
      << LoadText(bomb);
}

// Paths that are not a config file: one message, not yaml-cpp's uncaught
// std::ios_base::failure (a directory aborted the agent).
TEST(AgentConfigFileTest, ADirectoryOrADeviceIsAMessage) {
  for (const std::string& path : {::testing::TempDir(), std::string("/dev/zero")}) {
    auto c = LoadAgentConfig({"--config", path, "--pyroscope-url", "http://p"}, {});
    ASSERT_FALSE(c.ok()) << path;
    EXPECT_EQ(c.status().message(), "cannot read config file " + path + ": not a readable file");
  }
  EXPECT_EQ(LoadText(std::string("# ") + std::string(2 << 20, 'x') + "\n"),
            "config file " + testing::ProcessTempDir() + "/agent_config_test.yaml is larger than 1 MiB");
}

TEST(AgentConfigFileTest, WellShapedFileLoads) {
  std::string path = testing::ProcessTempDir() + "/agent_config_good.yaml";
  std::ofstream(path, std::ios::trunc) << "pyroscope_url: http://p:4040\nwindow: 30\nnamespaces: ml\n"
                                          "pods: [a, b]\npids: [12, 13]\nbinaries: [/opt/x]\n"
                                          "kubelet_insecure_skip_verify: no\nspool_dir: ''\n";
  auto c = LoadAgentConfig({"--config", path}, {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->window_seconds, 30);
  EXPECT_EQ(c->select.namespaces, (std::vector<std::string>{"ml"}));
  EXPECT_EQ(c->select.pods, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(c->select.pids, (std::vector<int>{12, 13}));
  EXPECT_EQ(c->profiling.binary_dirs, (std::vector<std::string>{"/opt/x"}));
  EXPECT_FALSE(c->kubelet.insecure_skip_verify);
  EXPECT_EQ(c->spool_dir, "");
}

std::string Message(const absl::StatusOr<profiler::AgentConfig>& c) {
  return c.ok() ? "ok" : std::string(c.status().message());
}

// The NCCL hang threshold: from a flag, the environment or the file; a
// threshold of nothing (or of days) is a start-up error, not a flood of
// hangs (or none ever).
TEST(AgentConfigTest, NcclHangThresholdComesFromAnySourceAndIsBounded) {
  auto d = LoadAgentConfig({"--pyroscope-url", "http://p"}, {});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->nccl_hang_seconds, profiler::kDefaultNcclHangSeconds);
  auto flag = LoadAgentConfig({"--pyroscope-url", "http://p", "--nccl-hang-s", "2.5"}, {});
  ASSERT_TRUE(flag.ok()) << flag.status();
  EXPECT_EQ(flag->nccl_hang_seconds, 2.5);
  auto env = LoadAgentConfig({"--pyroscope-url", "http://p"}, {{"GPUFLAME_NCCL_HANG_SECONDS", "30"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->nccl_hang_seconds, 30);
  EXPECT_EQ(Message(LoadAgentConfig({"--pyroscope-url", "http://p", "--nccl-hang-s", "0"}, {})),
            "nccl_hang_seconds wants 0.1 to 86400 seconds, not 0");
  EXPECT_EQ(Message(LoadAgentConfig({"--pyroscope-url", "http://p", "--nccl-hang-s", "100000"}, {})),
            "nccl_hang_seconds wants 0.1 to 86400 seconds, not 100000");
}

// How long a library's tables outlive its last process: from any source,
// and neither negative nor past a day.
TEST(AgentConfigTest, SymbolKeepTimeComesFromAnySourceAndIsBounded) {
  auto d = LoadAgentConfig({"--pyroscope-url", "http://p"}, {});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->symbol_cache_keep_seconds, 120);
  auto flag = LoadAgentConfig({"--pyroscope-url", "http://p", "--symbol-keep-s", "0"}, {});
  ASSERT_TRUE(flag.ok()) << flag.status();
  EXPECT_EQ(flag->symbol_cache_keep_seconds, 0);
  auto env = LoadAgentConfig({"--pyroscope-url", "http://p"}, {{"GPUFLAME_SYMBOL_CACHE_KEEP_SECONDS", "600"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->symbol_cache_keep_seconds, 600);
  EXPECT_NE(DescribeConfig(*env).find("symbol_cache_keep_seconds: 600"), std::string::npos) << DescribeConfig(*env);
  EXPECT_EQ(Message(LoadAgentConfig({"--pyroscope-url", "http://p", "--symbol-keep-s", "-1"}, {})),
            "symbol_cache_keep_seconds wants 0 to 86400 seconds, not -1");
}

// The agent samples tensor events by default, its probes after a start-up
// that any source may set; record's defaults are exact.
TEST(AgentConfigTest, TensorSamplingIsTheDefaultWithAStartUpFromAnySource) {
  auto d = LoadAgentConfig({"--pyroscope-url", "http://p"}, {});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->profiling.tensor_exact);
  EXPECT_EQ(d->profiling.tensor_startup_s, 30u);
  EXPECT_TRUE(profiler::ProfilingOptions{}.tensor_exact);
  auto flag = LoadAgentConfig({"--pyroscope-url", "http://p", "--tensor-startup-s", "120"}, {});
  ASSERT_TRUE(flag.ok()) << flag.status();
  EXPECT_EQ(flag->profiling.tensor_startup_s, 120u);
  EXPECT_NE(profiler::DescribeConfig(*flag).find(
                "tensor_sampling: sampled (the probes from 120 s after a process's first tensor)"),
            std::string::npos)
      << profiler::DescribeConfig(*flag);
  auto env = LoadAgentConfig({"--pyroscope-url", "http://p"},
                             {{"GPUFLAME_TENSOR_STARTUP_S", "0"}, {"GPUFLAME_TENSOR_SAMPLING", "exact"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->profiling.tensor_startup_s, 0u);
  EXPECT_TRUE(env->profiling.tensor_exact);
  EXPECT_EQ(Message(LoadAgentConfig({"--pyroscope-url", "http://p", "--tensor-startup-s", "-1"}, {})),
            "--tensor-startup-s: tensor_startup_s wants seconds from 0 to 86400, not '-1'");
  EXPECT_EQ(Message(LoadAgentConfig({"--pyroscope-url", "http://p"}, {{"GPUFLAME_TENSOR_STARTUP_S", "1.5"}})),
            "GPUFLAME_TENSOR_STARTUP_S: tensor_startup_s wants seconds from 0 to 86400, not '1.5'");
}

// The agent takes launch stacks by the launch route by default, record by
// CUPTI's callbacks; any source may choose either.
TEST(AgentConfigTest, LaunchStacksByTheRouteAreTheAgentsDefault) {
  auto d = LoadAgentConfig({"--pyroscope-url", "http://p"}, {});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->profiling.launch_uprobes);
  EXPECT_NE(profiler::DescribeConfig(*d).find("launch_stacks: uprobes"), std::string::npos);
  EXPECT_FALSE(profiler::ProfilingOptions{}.launch_uprobes);
  auto flag = LoadAgentConfig({"--pyroscope-url", "http://p", "--launch-stacks", "callbacks"}, {});
  ASSERT_TRUE(flag.ok()) << flag.status();
  EXPECT_FALSE(flag->profiling.launch_uprobes);
  auto env = LoadAgentConfig({"--pyroscope-url", "http://p"}, {{"GPUFLAME_LAUNCH_STACKS", "callbacks"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_FALSE(env->profiling.launch_uprobes);
  EXPECT_EQ(Message(LoadAgentConfig({"--pyroscope-url", "http://p"}, {{"GPUFLAME_LAUNCH_STACKS", "both"}})),
            "GPUFLAME_LAUNCH_STACKS: launch_stacks wants callbacks or uprobes, not 'both'");
}

// Credentials in the URL become basic auth at load time: nothing downstream
// (clients, gRPC's own messages, the start line, --check-config) holds them.
TEST(AgentSecretsTest, UrlCredentialsBecomeBasicAuthAndAreNeverPrinted) {
  auto c = LoadAgentConfig({"--pyroscope-url", "http://alice:s3%2Fcret@pyroscope:4040", "--check-config"}, {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->pyroscope.url, "http://pyroscope:4040");
  EXPECT_EQ(c->pyroscope.basic_user, "alice");
  EXPECT_EQ(c->pyroscope.basic_password, "s3/cret");
  std::string described = profiler::DescribeConfig(*c);
  EXPECT_EQ(described.find("s3"), std::string::npos) << described;
  EXPECT_NE(described.find("auth: basic"), std::string::npos) << described;
  EXPECT_EQ(exporters::GrpcTarget("http://alice:s3cret@pyroscope:4040/x"), "pyroscope:4040");
  EXPECT_EQ(Message(LoadAgentConfig({"--pyroscope-url", "http://a:b@p", "--basic-auth-user", "c"},
                                    {{"GPUFLAME_BASIC_AUTH_PASSWORD", "d"}})),
            "credentials are in both the Pyroscope URL and basic_auth_user: give them once");
  for (const char* url : {"ftp://alice:s3cret@p", "http://alice:s3cret@p\r\nX: 1", "http://alice:s3/cret@p x"}) {
    std::string msg = Message(LoadAgentConfig({"--pyroscope-url", url}, {}));
    EXPECT_EQ(msg.find("s3"), std::string::npos) << msg;
  }
}

TEST(AgentSecretsTest, HeaderValuesWithControlCharactersAreRefusedAtLoad) {
  for (const char* flag : {"--tenant", "--service-name"}) {
    for (const char* value : {"a\r\nX-Evil: 1", "a\nb", "a\x7f", "a\tb"}) {
      std::string msg = Message(LoadAgentConfig({"--pyroscope-url", "http://p", flag, value}, {}));
      EXPECT_NE(msg.find("must not contain control characters"), std::string::npos) << flag << " " << msg;
    }
  }
  std::string nul = Message(LoadAgentConfig({"--pyroscope-url", std::string("http://p\0q", 10)}, {}));
  EXPECT_EQ(nul, "the Pyroscope URL must not contain control characters");
  EXPECT_NE(Message(LoadAgentConfig({"--pyroscope-url", "http://p", "--basic-auth-user", "u\r\n"},
                                    {{"GPUFLAME_BASIC_AUTH_PASSWORD", "p"}}))
                .find("basic_auth_user must not contain control characters"),
            std::string::npos);
  std::string token = testing::ProcessTempDir() + "/agent_config_token";
  std::ofstream(token, std::ios::trunc) << "abc\r\nX-Evil: 1\n";
  std::string msg = Message(LoadAgentConfig({"--pyroscope-url", "http://p", "--bearer-token-file", token}, {}));
  EXPECT_NE(msg.find("holds control characters"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("abc"), std::string::npos) << "the token itself is never printed: " << msg;
  EXPECT_NE(Message(LoadAgentConfig({"--pyroscope-url", "http://p", "--kubelet-url", "https://k:10250",
                                     "--kubelet-token-file", token},
                                    {}))
                .find("holds control characters"),
            std::string::npos);
}

TEST(AgentSecretsTest, BearerTokenFileIsBoundedAndTrimmed) {
  std::string path = testing::ProcessTempDir() + "/agent_config_token2";
  std::ofstream(path, std::ios::trunc) << "eyJhbGciOi.x.y\n";
  auto t = exporters::ReadBearerToken(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, "eyJhbGciOi.x.y");
  std::ofstream(path, std::ios::trunc) << std::string(65 << 10, 'a');
  EXPECT_NE(std::string(exporters::ReadBearerToken(path).status().message()).find("larger than 64 KiB"),
            std::string::npos);
  std::ofstream(path, std::ios::trunc) << "\n";
  EXPECT_NE(std::string(exporters::ReadBearerToken(path).status().message()).find("is empty"), std::string::npos);
  EXPECT_NE(std::string(exporters::ReadBearerToken("/nonexistent/token").status().message())
                .find("cannot read the bearer token file /nonexistent/token"),
            std::string::npos);
}

}  // namespace
}  // namespace gpuflame
