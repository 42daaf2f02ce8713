// The agent's Pyroscope series labels: bounded cardinality by default (no
// pid, no thread names unless asked for), and a service_name outside
// Kubernetes from the systemd service or the script a process runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "agent/agent_config.h"
#include "agent/labels.h"
#include "profiler/process/service_hints.h"

namespace gpuflame {
namespace {

using profiler::ScriptFromCmdline;
using profiler::SystemdServiceFromCgroup;

std::string Argv(std::initializer_list<std::string> args) {
  std::string out;
  for (const std::string& a : args) out += a + '\0';
  return out;
}

TEST(ServiceHintsTest, SystemdServiceIsTheInnermostServiceUnit) {
  EXPECT_EQ(SystemdServiceFromCgroup("0::/system.slice/gpu-train.service\n"), "gpu-train");
  // cgroup v1: the name=systemd hierarchy; the others say nothing of units.
  EXPECT_EQ(SystemdServiceFromCgroup("4:memory:/system.slice/other.service\n1:name=systemd:/system.slice/"
                                     "inference@2.service\n0::/\n"),
            "inference@2");
  // A user's own services, inside the user's manager.
  EXPECT_EQ(SystemdServiceFromCgroup("0::/user.slice/user-1000.slice/user@1000.service/app.slice/jupyter.service\n"),
            "jupyter");
  // Login sessions, terminals, containers and pods are scopes: no service.
  EXPECT_EQ(SystemdServiceFromCgroup("0::/user.slice/user-1000.slice/session-3.scope\n"), std::nullopt);
  EXPECT_EQ(SystemdServiceFromCgroup("0::/user.slice/user-1000.slice/user@1000.service/app.slice/"
                                     "app-org.gnome.Terminal.slice/vte-spawn-1.scope\n"),
            std::nullopt);
  EXPECT_EQ(SystemdServiceFromCgroup("0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-" +
                                     std::string(64, 'a') + ".scope\n"),
            std::nullopt);
  EXPECT_EQ(SystemdServiceFromCgroup("0::/\n"), std::nullopt);
  EXPECT_EQ(SystemdServiceFromCgroup(""), std::nullopt);
  EXPECT_EQ(SystemdServiceFromCgroup("0::/system.slice/we ird.service\n"), std::nullopt) << "not a unit name";
  EXPECT_EQ(SystemdServiceFromCgroup("0::/system.slice/.service\n"), std::nullopt);
}

TEST(ServiceHintsTest, ScriptIsWhatThePythonInterpreterRuns) {
  EXPECT_EQ(ScriptFromCmdline(Argv({"python3", "train.py", "--epochs", "3"})), "train.py");
  EXPECT_EQ(ScriptFromCmdline(Argv({"/usr/bin/python3.12", "-u", "/srv/jobs/train.py"})), "train.py");
  EXPECT_EQ(ScriptFromCmdline(Argv({"python", "-X", "faulthandler", "-W", "ignore", "-uO", "serve.py"})), "serve.py");
  EXPECT_EQ(ScriptFromCmdline(Argv({"python3", "-Wignore", "-Ximporttime", "a.py"})), "a.py");
  EXPECT_EQ(ScriptFromCmdline(Argv({"python3.13t", "-m", "vllm.entrypoints.openai.api_server"})),
            "vllm.entrypoints.openai.api_server");
  EXPECT_EQ(ScriptFromCmdline(Argv({"python3", "-um", "torch.distributed.run", "train.py"})), "torch.distributed.run");
  EXPECT_EQ(ScriptFromCmdline(Argv({"python3", "--check-hash-based-pycs", "never", "b.py"})), "b.py");
  // Inline code and stdin name no script.
  EXPECT_EQ(ScriptFromCmdline(Argv({"python3", "-c", "import torch"})), std::nullopt);
  EXPECT_EQ(ScriptFromCmdline(Argv({"python3", "-"})), std::nullopt);
  EXPECT_EQ(ScriptFromCmdline(Argv({"python3"})), std::nullopt);
  // Anything else: its program's base name (a console script's interpreter
  // comes first, so `vllm serve` reads python3 /usr/local/bin/vllm serve).
  EXPECT_EQ(ScriptFromCmdline(Argv({"/usr/bin/python3", "/usr/local/bin/vllm", "serve"})), "vllm");
  EXPECT_EQ(ScriptFromCmdline(Argv({"/opt/app/bin/inference-server", "--port", "80"})), "inference-server");
  // setproctitle() writes over argv with spaces.
  EXPECT_EQ(ScriptFromCmdline(std::string("VLLM::EngineCore worker 3") + '\0'), "VLLM::EngineCore");
  EXPECT_EQ(ScriptFromCmdline(""), std::nullopt);
  // Hostile bytes stay a valid, bounded label value.
  std::optional<std::string> odd = ScriptFromCmdline(Argv({"python3", std::string("a\nb\xff.py")}));
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->find('\n'), std::string::npos);
  EXPECT_EQ(ScriptFromCmdline(Argv({std::string(5000, 'x')}))->size(), 256u);
}

TEST(ServiceHintsTest, ReadsCgroupAndCmdlineFromProc) {
  const std::string proc = testing::TempDir() + "/service-hints-proc";
  std::filesystem::create_directories(proc + "/90");
  std::ofstream(proc + "/90/cgroup") << "0::/system.slice/gpu-train.service\n";
  std::ofstream(proc + "/90/cmdline") << Argv({"python3", "train.py"});
  profiler::ServiceHints hints = profiler::ReadServiceHints(90, proc);
  EXPECT_EQ(hints.systemd_service, "gpu-train");
  EXPECT_EQ(hints.script, "train.py");
  EXPECT_EQ(profiler::ReadServiceHints(91, proc).script, "") << "a process gone: nothing, no error";
}

std::map<std::string, std::string> ByName(const profiler::SeriesLabels& labels) {
  return {labels.begin(), labels.end()};
}

TEST(SeriesLabelerTest, ThePidIsASeriesLabelOnlyWhenAskedFor) {
  profiler::SeriesLabeler plain("", "node-1", {});
  auto labels = ByName(plain.Labels("gpu_memory", 4242, "python3", {}, {"", "train.py"}));
  EXPECT_FALSE(labels.contains("pid")) << "every process and DataLoader worker would be a series";
  EXPECT_EQ(labels["service_name"], "train.py");
  EXPECT_EQ(labels["process"], "python3");
  EXPECT_EQ(labels["node"], "node-1");
  profiler::SeriesLabelOptions with_pid;
  with_pid.pid = true;
  profiler::SeriesLabeler pids("", "node-1", {}, with_pid);
  EXPECT_EQ(ByName(pids.Labels("gpu_memory", 4242, "python3", {}, {}))["pid"], "4242");
}

TEST(SeriesLabelerTest, ServiceNameComesFromTheFirstSourceTheProcessHas) {
  profiler::PodInfo pod;
  pod.pod_uid = "0b9ad8e1-7c4e-4c8e-9a3e-3f5d2a1b6c7d";
  pod.namespace_name = "ml";
  pod.container = "trainer";
  const profiler::ServiceHints hints{"gpu-train", "train.py"};
  profiler::SeriesLabeler labeler("", "", {});
  auto service = [&](profiler::SeriesLabeler& l, const profiler::PodInfo& p, const profiler::ServiceHints& h) {
    return ByName(l.Labels("gpu_memory", 1, "python3", p, h))["service_name"];
  };
  EXPECT_EQ(service(labeler, pod, hints), "ml/trainer");
  EXPECT_EQ(service(labeler, {}, hints), "gpu-train");
  EXPECT_EQ(service(labeler, {}, {"", "train.py"}), "train.py");
  EXPECT_EQ(service(labeler, {}, {}), "python3");
  profiler::SeriesLabelOptions scripts;
  scripts.service_from = {profiler::ServiceSource::kScript, profiler::ServiceSource::kProcess};
  profiler::SeriesLabeler by_script("", "", {}, scripts);
  EXPECT_EQ(service(by_script, pod, hints), "train.py");
  profiler::SeriesLabeler fixed("team-a/batch", "", {});
  EXPECT_EQ(service(fixed, pod, hints), "team-a/batch");
}

// Pyroscope rejects a whole push for one empty label value: a process that
// exited before its name could be read still gets a valid series.
TEST(SeriesLabelerTest, NoEmptyLabelValueEvenForANamelessProcess) {
  profiler::SeriesLabeler labeler("", "", {});
  auto labels = labeler.Labels("gpu_memory", 4242, "", profiler::PodInfo{});
  auto by_name = ByName(labels);
  for (const auto& [name, value] : labels) EXPECT_FALSE(value.empty()) << name;
  EXPECT_EQ(by_name["process"], "unknown_process");
  EXPECT_EQ(by_name["service_name"], "unknown_service");
  EXPECT_FALSE(by_name.contains("node")) << "no node name: no node label";
}

TEST(SeriesLabelerTest, ConfigurationChoosesSourcesAndOptInLabels) {
  auto c = profiler::LoadAgentConfig(
      {"--pyroscope-url", "http://p", "--series-labels", "pid,thread_name", "--service-name-from", "script,process"},
      {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->labels.pid);
  EXPECT_TRUE(c->profiling.thread_names);
  EXPECT_EQ(c->labels.service_from, (std::vector<profiler::ServiceSource>{profiler::ServiceSource::kScript,
                                                                          profiler::ServiceSource::kProcess}));
  EXPECT_NE(profiler::DescribeConfig(*c).find("service_name: from script,process"), std::string::npos)
      << profiler::DescribeConfig(*c);
  auto plain = profiler::LoadAgentConfig({"--pyroscope-url", "http://p"}, {});
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->labels.pid);
  EXPECT_FALSE(plain->profiling.thread_names);
  auto env = profiler::LoadAgentConfig({"--pyroscope-url", "http://p"}, {{"GPUFLAME_SERIES_LABELS", "pid"}});
  ASSERT_TRUE(env.ok());
  EXPECT_TRUE(env->labels.pid);
  auto bad = profiler::LoadAgentConfig({"--pyroscope-url", "http://p", "--series-labels", "tid"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("series_labels wants pid or thread_name, not 'tid'"), std::string::npos);
  bad = profiler::LoadAgentConfig({"--pyroscope-url", "http://p", "--service-name-from", "k8s"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("kubernetes, systemd, script or process, not 'k8s'"), std::string::npos);
}

}  // namespace
}  // namespace gpuflame
