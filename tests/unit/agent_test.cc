#include <gtest/gtest.h>

#include <unistd.h>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include <httplib.h>

#include "agent/agent_config.h"
#include "agent/gpu_metrics.h"
#include "agent/kubelet_pods.h"
#include "agent/labels.h"
#include "agent/metrics_server.h"
#include "exporters/pprof/pprof_writer.h"
#include "exporters/pprof/profile_limits.h"
#include "exporters/pyroscope/push_queue.h"
#include "exporters/pyroscope/pyroscope_client.h"
#include "exporters/pyroscope/spool.h"
#include "profiler/aggregate/window.h"
#include "profiler/process/k8s_metadata.h"
#include "tests/support/temp_dir.h"

namespace gpuflame {
namespace {

using profiler::LoadAgentConfig;

std::string Message(const absl::StatusOr<profiler::AgentConfig>& c) {
  return c.ok() ? "ok" : std::string(c.status().message());
}

TEST(AgentConfigTest, FlagsOverEnvironmentOverFile) {
  std::string path = testing::ProcessTempDir() + "/agent.yaml";
  std::ofstream(path) << "pyroscope_url: http://file:4040\nwindow: 30\ntenant: from-file\n"
                         "namespaces: [ml, serving]\nnative_stacks: all\nbinaries: [/opt/debug, /srv/syms]\n";
  auto c = LoadAgentConfig({"--config", path, "--window", "5"},
                           {{"GPUFLAME_TENANT", "from-env"}, {"NODE_NAME", "gpu-node-7"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->pyroscope.url, "http://file:4040");
  EXPECT_EQ(c->window_seconds, 5);
  EXPECT_EQ(c->pyroscope.tenant, "from-env");
  EXPECT_EQ(c->node, "gpu-node-7");
  EXPECT_EQ(c->select.namespaces, (std::vector<std::string>{"ml", "serving"}));
  EXPECT_EQ(c->profiling.native_stacks, profiler::NativeStacks::kAll);
  EXPECT_EQ(c->profiling.binary_dirs, (std::vector<std::string>{"/opt/debug", "/srv/syms"}));
  auto d = LoadAgentConfig({"--pyroscope-url", "http://p"}, {});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->profiling.native_stacks, profiler::NativeStacks::kDevice);
  EXPECT_EQ(d->profiling.binary_dirs, (std::vector<std::string>{"/usr/lib/debug"}));
}

TEST(AgentConfigTest, OneClearMessagePerMistake) {
  EXPECT_NE(Message(LoadAgentConfig({}, {})).find("no Pyroscope URL"), std::string::npos);
  EXPECT_NE(Message(LoadAgentConfig({"--pyroscope-url", "pyroscope:4040"}, {})).find("must start with http://"),
            std::string::npos);
  EXPECT_NE(Message(LoadAgentConfig({"--pyroscope-url", "http://p", "--window", "0"}, {})).find("between 1 and 3600"),
            std::string::npos);
  EXPECT_NE(Message(LoadAgentConfig({"--pyroscope-url", "http://p", "--window", "soon"}, {})).find("wants a number"),
            std::string::npos);
  EXPECT_NE(Message(LoadAgentConfig({"--pyroscope-url", "http://p", "--metrics-port", "70000"}, {})).find("0-65535"),
            std::string::npos);
  EXPECT_NE(Message(LoadAgentConfig({"--pyroscope-url", "http://p", "--frobnicate", "1"}, {})).find("unknown option"),
            std::string::npos);
  EXPECT_NE(Message(LoadAgentConfig({"--pyroscope-url", "http://p", "--bearer-token-file", "/nonexistent"}, {}))
                .find("cannot read the bearer token file /nonexistent"),
            std::string::npos);
  EXPECT_NE(Message(LoadAgentConfig({"--pyroscope-url", "http://p", "--basic-auth-user", "u"}, {}))
                .find("both a user and a password"),
            std::string::npos);
  EXPECT_NE(
      Message(LoadAgentConfig({"--pyroscope-url", "http://p", "--native-stacks", "some"}, {})).find("off, gpu or all"),
      std::string::npos);
  std::string bad = testing::ProcessTempDir() + "/bad.yaml";
  std::ofstream(bad) << "pyroscope_url: http://p\nwindwo: 5\n";
  EXPECT_NE(Message(LoadAgentConfig({"--config", bad}, {})).find("bad.yaml:2: unknown setting 'windwo'"),
            std::string::npos)
      << Message(LoadAgentConfig({"--config", bad}, {}));
  std::string broken = testing::ProcessTempDir() + "/broken.yaml";
  std::ofstream(broken) << "pyroscope_url: [unclosed\n";
  EXPECT_NE(Message(LoadAgentConfig({"--config", broken}, {})).find("broken.yaml"), std::string::npos);
  EXPECT_NE(Message(LoadAgentConfig({"--config", "/nonexistent.yaml"}, {})).find("cannot read config file"),
            std::string::npos);
}

TEST(AgentConfigTest, CredentialsAreNeverPrinted) {
  auto c = LoadAgentConfig({"--pyroscope-url", "http://alice:s3cret@pyroscope:4040"}, {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(profiler::DescribeConfig(*c).find("s3cret"), std::string::npos) << profiler::DescribeConfig(*c);
  std::string bad = Message(LoadAgentConfig({"--pyroscope-url", "ftp://alice:s3cret@p"}, {}));
  EXPECT_EQ(bad.find("s3cret"), std::string::npos) << bad;
  EXPECT_NE(Message(LoadAgentConfig({"--pyroscope-url", "http://p", "--tenant", "a\r\nX-Evil: 1"}, {}))
                .find("tenant must not contain control characters"),
            std::string::npos);
}

TEST(K8sMetadataTest, ContainerAndPodFromEveryCgroupShape) {
  const std::string id(64, 'a');
  const std::string id2 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  // cgroup v2, systemd driver, containerd
  std::string v2 =
      "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b3c4d_1111_2222_3333_444455556666.slice/"
      "cri-containerd-" +
      id2 + ".scope\n";
  EXPECT_EQ(profiler::ContainerIdFromCgroup(v2), id2);
  EXPECT_EQ(profiler::PodUidFromCgroup(v2), "1a2b3c4d-1111-2222-3333-444455556666");
  // cgroup v1, cgroupfs driver
  std::string v1 = "12:memory:/kubepods/besteffort/pod1a2b3c4d-1111-2222-3333-444455556666/" + id + "\n11:cpu:/\n";
  EXPECT_EQ(profiler::ContainerIdFromCgroup(v1), id);
  EXPECT_EQ(profiler::PodUidFromCgroup(v1), "1a2b3c4d-1111-2222-3333-444455556666");
  // CRI-O and plain Docker
  EXPECT_EQ(profiler::ContainerIdFromCgroup("0::/kubepods.slice/x/crio-" + id2 + ".scope"), id2);
  EXPECT_EQ(profiler::ContainerIdFromCgroup("3:cpuset:/docker/" + id2), id2);
  EXPECT_FALSE(profiler::PodUidFromCgroup("3:cpuset:/docker/" + id2).has_value());
  // Not in a container; a 65-hex run is not an ID.
  EXPECT_FALSE(profiler::ContainerIdFromCgroup("0::/user.slice/user-0.slice/session-1.scope").has_value());
  EXPECT_FALSE(profiler::ContainerIdFromCgroup("0::/x/" + id + "a").has_value());
}

TEST(KubeletPodsTest, ParsesThePodListKeepingOnlyChosenLabels) {
  std::string json = R"({"kind":"PodList","items":[
    {"metadata":{"uid":"u1","name":"vllm-0","labels":{"app":"vllm","team":"serving","pod-template-hash":"abc"}}},
    {"metadata":{"uid":"u2","name":"train-0"}},
    {"metadata":{"name":"no-uid"}}, 7]})";
  auto pods = profiler::ParsePodList(json, {"app", "team", "missing"});
  ASSERT_TRUE(pods.ok()) << pods.status();
  EXPECT_EQ(pods->size(), 2u);
  EXPECT_EQ(pods->at("u1"), (std::map<std::string, std::string>{{"app", "vllm"}, {"team", "serving"}}));
  EXPECT_TRUE(pods->at("u2").empty());
  EXPECT_FALSE(profiler::ParsePodList("{not json", {"app"}).ok());
  EXPECT_FALSE(profiler::ParsePodList("[]", {"app"}).ok());
}

TEST(KubeletPodsTest, AsksTheKubeletWithTheTokenAndCaches) {
  httplib::Server kubelet;
  std::atomic<int> calls{0};
  std::string auth;
  kubelet.Get("/pods", [&](const httplib::Request& req, httplib::Response& res) {
    calls++;
    auth = req.get_header_value("Authorization");
    res.set_content(R"({"items":[{"metadata":{"uid":"u1","labels":{"app":"vllm"}}}]})", "application/json");
  });
  int port = kubelet.bind_to_any_port("127.0.0.1");
  std::thread t([&] { kubelet.listen_after_bind(); });
  std::string token = testing::ProcessTempDir() + "/token";
  std::ofstream(token) << "sa-token\n";
  profiler::KubeletOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(port);
  o.token_file = token;
  o.labels = {"app"};
  profiler::KubeletPods pods(o);
  EXPECT_EQ(pods.LabelsOf("u1").at("app"), "vllm");
  EXPECT_EQ(pods.LabelsOf("u1").at("app"), "vllm");
  EXPECT_TRUE(pods.LabelsOf("unknown").empty());  // within the refresh period: no new call
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(auth, "Bearer sa-token");
  kubelet.stop();
  t.join();
}

TEST(K8sMetadataTest, ContainerNameFromKubeletBindMounts) {
  const std::string uid = "1a2b3c4d-1111-2222-3333-444455556666";
  std::string mountinfo =
      "1290 1272 0:26 / / rw,relatime - overlay overlay rw\n"
      "1301 1290 253:1 /var/lib/kubelet/pods/" +
      uid +
      "/etc-hosts /etc/hosts rw - ext4 /dev/vda1 rw\n"
      "1302 1290 253:1 /var/lib/kubelet/pods/" +
      uid + "/containers/vllm-server/5f2c1a7e /dev/termination-log rw - ext4 /dev/vda1 rw\n";
  EXPECT_EQ(profiler::ContainerNameFromMountinfo(mountinfo, uid), "vllm-server");
  EXPECT_FALSE(profiler::ContainerNameFromMountinfo(mountinfo, "ffffffff-1111-2222-3333-444455556666").has_value());
  EXPECT_FALSE(profiler::ContainerNameFromMountinfo("garbage\n\n", uid).has_value());
}

TEST(K8sMetadataTest, ReadsHostnameAndNamespaceThroughProcRoot) {
  std::string proc = testing::ProcessTempDir() + "/fakeproc";
  std::string base = proc + "/77";
  std::filesystem::create_directories(base + "/root/etc");
  std::filesystem::create_directories(base + "/root/var/run/secrets/kubernetes.io/serviceaccount");
  std::ofstream(base + "/cgroup") << "0::/kubepods/pod1a2b3c4d-1111-2222-3333-444455556666/" << std::string(64, 'b')
                                  << "\n";
  std::ofstream(base + "/root/etc/hostname") << "vllm-0\n";
  std::ofstream(base + "/root/var/run/secrets/kubernetes.io/serviceaccount/namespace") << "serving";
  profiler::PodInfo info = profiler::ReadPodInfo(77, proc);
  EXPECT_TRUE(info.in_kubernetes());
  EXPECT_EQ(info.pod, "vllm-0");
  EXPECT_EQ(info.namespace_name, "serving");
  EXPECT_EQ(info.container_id, std::string(64, 'b'));
  EXPECT_FALSE(profiler::ReadPodInfo(78, proc).in_kubernetes());
}

TEST(K8sMetadataTest, ContainerSymlinksCannotReachNodeFiles) {
  // A hostile container points /etc/hostname at a node file: the read must
  // resolve inside the container's root, where that file does not exist.
  std::string proc = testing::ProcessTempDir() + "/fakeproc2";
  std::string base = proc + "/79";
  std::filesystem::remove_all(proc);
  std::filesystem::create_directories(base + "/root/etc");
  std::ofstream(base + "/cgroup") << "0::/kubepods/pod1a2b3c4d-1111-2222-3333-444455556666/" << std::string(64, 'c')
                                  << "\n";
  std::string secret = testing::ProcessTempDir() + "/node-secret";
  std::ofstream(secret) << "node-only-data";
  std::filesystem::create_symlink(secret, base + "/root/etc/hostname");
  profiler::PodInfo info = profiler::ReadPodInfo(79, proc);
  EXPECT_TRUE(info.in_kubernetes());
  EXPECT_EQ(info.pod, "");
}

profiler::Profile ManySamples(int n) {
  profiler::Profile p;
  p.name = "gpu_memory";
  p.sample_types = {{"alloc_space", "bytes"}, {"inuse_space", "bytes"}};
  for (int i = 0; i < n; i++) {
    symbolizer::Frame f;
    f.kind = symbolizer::FrameKind::kPython;
    f.name = "f" + std::to_string(i);
    p.frames.push_back(f);
    p.samples.push_back({{static_cast<uint32_t>(i)}, {i + 1, (i % 3) * 10}, {}});
  }
  return p;
}

TEST(ProfileLimitsTest, FoldsTheLeastSignificantIntoOtherKeepingTotals) {
  profiler::Profile p = ManySamples(20000);
  int64_t alloc = 0, inuse = 0;
  for (const auto& s : p.samples) alloc += s.values[0], inuse += s.values[1];
  exporters::LimitReport r = exporters::EnforceLimits(p);
  EXPECT_EQ(p.samples.size(), 16000u);
  EXPECT_EQ(r.folded_samples, 4001u);
  int64_t alloc2 = 0, inuse2 = 0;
  for (const auto& s : p.samples) alloc2 += s.values[0], inuse2 += s.values[1];
  EXPECT_EQ(alloc2, alloc);
  EXPECT_EQ(inuse2, inuse);
  EXPECT_EQ(p.frames[p.samples.back().frames[0]].name, "[other]");
  // The biggest stack survives.
  bool kept_biggest = false;
  for (const auto& s : p.samples) kept_biggest |= p.frames[s.frames[0]].name == "f19999";
  EXPECT_TRUE(kept_biggest);
}

TEST(ProfileLimitsTest, CutsDeepStacksAndOversizedProfiles) {
  profiler::Profile p = ManySamples(3);
  for (int i = 0; i < 1500; i++) p.samples[0].frames.push_back(1);
  exporters::ProfileLimits small;
  small.max_bytes = 200;
  exporters::LimitReport r = exporters::EnforceLimits(p, small);
  EXPECT_EQ(r.truncated_stacks, 1u);
  EXPECT_LE(exporters::SerializePprof(p).size(), 200u);
  EXPECT_TRUE(r.changed());
}

TEST(WindowTest, AllocatedDuringTheWindowInUseAtItsEnd) {
  profiler::WindowAccumulator w;
  std::vector<profiler::StackCounters> c(1);
  c[0] = {2, 200, 2, 200};
  auto first = w.Close(c);
  EXPECT_EQ(first[0].alloc_bytes, 200);
  c[0] = {3, 300, 1, 100};  // one more allocated, two freed
  auto second = w.Close(c);
  EXPECT_EQ(second[0].alloc_objects, 1);
  EXPECT_EQ(second[0].alloc_bytes, 100);
  EXPECT_EQ(second[0].inuse_bytes, 100);
  c.push_back({5, 50, 5, 50});  // a stack first seen in this window
  auto third = w.Close(c);
  EXPECT_EQ(third[0].alloc_bytes, 0);
  EXPECT_EQ(third[1].alloc_bytes, 50);
}

TEST(IngestNameTest, ServiceAndLabelsInTheLegacyNameSyntax) {
  EXPECT_EQ(exporters::IngestName({{"__name__", "gpu_memory"}, {"service_name", "ml/train"}, {"pod", "a,b{c}=d"}}),
            "ml/train{gpuflame_profile=gpu_memory,pod=a_b_c__d}");
  EXPECT_EQ(exporters::IngestName({}), "unknown_service{}");
}

TEST(MetricsTest, PrometheusTextFormat) {
  std::string t = profiler::PrometheusText({{"gpuflame_events_total", "Events.", "counter", 42}});
  EXPECT_EQ(t,
            "# HELP gpuflame_events_total Events.\n# TYPE gpuflame_events_total counter\ngpuflame_events_total 42\n");
}

exporters::PushQueueOptions FastRetries(size_t max_requests, std::string spool_dir = "") {
  exporters::PushQueueOptions o;
  o.max_requests = max_requests;
  o.initial_backoff_ms = 1;
  o.max_backoff_ms = 4;
  o.spool_dir = std::move(spool_dir);
  return o;
}

std::vector<exporters::Series> Request(const std::string& payload) { return {{{{"__name__", "gpu_memory"}}, payload}}; }

// The payload of a serialized one-series request, for checking order.
std::string Payload(const std::string& body) { return body.substr(body.size() - 8); }

TEST(PushQueueTest, RetriesWhatCanBeRetriedAndCountsTheRest) {
  std::atomic<int> calls{0};
  auto q = exporters::PushQueue::Create(
      [&](const std::string& body) -> absl::Status {
        int n = calls++;
        if (body.find("bad") != std::string::npos) return absl::InvalidArgumentError("rejected");
        if (n < 2) return absl::UnavailableError("down");
        return absl::OkStatus();
      },
      FastRetries(4));
  ASSERT_TRUE(q.ok());
  (*q)->Enqueue(Request("good"));
  ASSERT_TRUE((*q)->Flush(5000));
  (*q)->Enqueue(Request("bad"));
  ASSERT_TRUE((*q)->Flush(5000));
  exporters::PushStats s = (*q)->Stats();
  EXPECT_EQ(s.pushed, 1u);
  EXPECT_EQ(s.failed_attempts, 2u);
  EXPECT_EQ(s.dropped_rejected, 1u);
  EXPECT_EQ(s.queued, 0u);
}

TEST(PushQueueTest, TheRequestBeingSentIsNeverAlsoCountedAsDropped) {
  // The sender holds the oldest request while the queue overflows behind it:
  // the next oldest are dropped instead, and every request is counted once.
  std::atomic<bool> sending{false}, release{false};
  std::mutex mu;
  std::vector<std::string> sent;
  auto q = exporters::PushQueue::Create(
      [&](const std::string& body) -> absl::Status {
        sending = true;
        while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::lock_guard<std::mutex> lock(mu);
        sent.push_back(body);
        return absl::OkStatus();
      },
      FastRetries(2));
  ASSERT_TRUE(q.ok());
  (*q)->Enqueue(Request("first"));
  for (int i = 0; i < 500 && !sending; i++) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE(sending);
  for (int i = 0; i < 5; i++) (*q)->Enqueue(Request("later" + std::to_string(i)));
  release = true;
  ASSERT_TRUE((*q)->Flush(5000));
  exporters::PushStats s = (*q)->Stats();
  EXPECT_EQ(s.pushed + s.dropped_queue_full, 6u);
  EXPECT_EQ(s.pushed, 2u);  // the one in flight and the newest
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_NE(sent[0].find("first"), std::string::npos);
  EXPECT_NE(sent[1].find("later4"), std::string::npos);
}

TEST(PushQueueTest, DropsTheOldestWhenFullAndSaysSo) {
  std::atomic<bool> release{false};
  auto q = exporters::PushQueue::Create(
      [&](const std::string&) -> absl::Status {
        while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return absl::OkStatus();
      },
      FastRetries(2));
  ASSERT_TRUE(q.ok());
  for (int i = 0; i < 6; i++) (*q)->Enqueue(Request(std::to_string(i)));
  release = true;
  ASSERT_TRUE((*q)->Flush(5000));
  exporters::PushStats s = (*q)->Stats();
  EXPECT_EQ(s.pushed + s.dropped_queue_full, 6u);
  EXPECT_GE(s.dropped_queue_full, 3u);
}

TEST(PushQueueTest, OutageAndRestartLoseNothingAndKeepOrder) {
  std::string dir = testing::ProcessTempDir() + "/spool-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  {
    // Pyroscope is down for this whole run: everything ends up on disk.
    auto q = exporters::PushQueue::Create([](const std::string&) { return absl::UnavailableError("down"); },
                                          FastRetries(8, dir));
    ASSERT_TRUE(q.ok());
    for (int i = 0; i < 5; i++) (*q)->Enqueue(Request("window-" + std::to_string(i)));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<std::string> seen;
  std::mutex mu;
  auto q = exporters::PushQueue::Create(
      [&](const std::string& body) {
        std::lock_guard<std::mutex> lock(mu);
        seen.push_back(Payload(body));
        return absl::OkStatus();
      },
      FastRetries(8, dir));
  ASSERT_TRUE(q.ok());
  (*q)->Enqueue(Request("window-5"));
  ASSERT_TRUE((*q)->Flush(5000));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(seen, (std::vector<std::string>{"window-0", "window-1", "window-2", "window-3", "window-4", "window-5"}));
  EXPECT_EQ((*q)->Stats().spooled, 0u);
  EXPECT_EQ((*q)->Stats().series_pushed, 6u);
}

TEST(SpoolTest, BoundedOldestFirstAndSurvivesCorruption) {
  std::string dir = testing::ProcessTempDir() + "/spool2-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  auto spool = exporters::Spool::Open(dir, 200);
  ASSERT_TRUE(spool.ok());
  std::string big(150, 'x');  // zstd shrinks this: each file is small
  for (int i = 0; i < 3; i++) ASSERT_TRUE(spool->Put(big + std::to_string(i), 1).ok());
  auto first = spool->Oldest();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->body, big + "0");
  EXPECT_EQ(first->series, 1u);
  std::string incompressible;
  for (int i = 0; i < 150; i++) incompressible += static_cast<char>((i * 7919) % 251);
  ASSERT_TRUE(spool->Put(incompressible, 2).ok());  // needs room: the oldest go
  EXPECT_GT(spool->dropped_full(), 0u);
  EXPECT_LE(spool->bytes(), 200u);
  // A damaged file is skipped and counted, not fatal.
  std::ofstream(dir + "/00000000000000000000.push") << "garbage";
  auto reopened = exporters::Spool::Open(dir, 200);
  ASSERT_TRUE(reopened.ok());
  auto next = reopened->Oldest();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(reopened->corrupt(), 1u);
  EXPECT_EQ(next->body, incompressible);
}

// One byte changed inside a spooled request (an incompressible body, which
// zstd stores as is) must not replay a different profile: the checksum fails,
// the file is dropped and counted.
TEST(SpoolTest, AChangedByteIsCaughtNotReplayed) {
  std::string dir = testing::ProcessTempDir() + "/spool3-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  auto spool = exporters::Spool::Open(dir, 1 << 20);
  ASSERT_TRUE(spool.ok());
  std::string body;
  std::mt19937 random(42);
  for (int i = 0; i < 4096; i++) body += static_cast<char>(random());
  ASSERT_TRUE(spool->Put(body, 1).ok());
  std::string path;
  for (const auto& e : std::filesystem::directory_iterator(dir)) path = e.path();
  ASSERT_FALSE(path.empty());
  std::string raw;
  {
    std::ifstream in(path, std::ios::binary);
    raw.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(raw.size(), 3000u);
  raw[raw.size() / 2] ^= 0x20;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << raw;
  auto reopened = exporters::Spool::Open(dir, 1 << 20);
  ASSERT_TRUE(reopened.ok());
  EXPECT_FALSE(reopened->Oldest().has_value());
  EXPECT_EQ(reopened->corrupt(), 1u);
}

TEST(MetricsServerTest, HealthzFailsWhileAThreadIsStalled) {
  std::atomic<bool> stalled{false};
  profiler::MetricsServer server;
  ASSERT_TRUE(server
                  .Start("127.0.0.1", 0,
                         [&] { return stalled.load() ? std::string("event loop stalled for 31 s") : std::string(); })
                  .ok());
  httplib::Client client("127.0.0.1", server.port());
  auto ok = client.Get("/healthz");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  stalled = true;
  auto bad = client.Get("/healthz");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 503);
  EXPECT_EQ(bad->body, "event loop stalled for 31 s\n");
}

TEST(GpuMetricsTest, GaugesPerGpuAndPerFollowedProcessBoundedAndMissingFiguresSaid) {
  using profiler::utilization::GpuNow;
  GpuNow g;
  g.id.index = 1;
  g.id.uuid = "GPU-1";
  g.stats.util_gpu.Add(40);
  g.stats.util_gpu.Add(60);
  g.stats.gpm_dram.Add(12.5);
  g.stats.sm_clock_mhz.Add(1980);
  for (uint32_t pid = 1; pid <= 300; pid++) g.stats.process_sm[pid].Add(50);
  g.stats.process_sm[9999].Add(99);  // not followed: no series
  profiler::PodInfo pod;
  pod.pod_uid = "uid";
  pod.pod = "trainer-0";
  pod.namespace_name = "ml";
  pod.container = "main";
  profiler::PodOf pod_of = [&](pid_t pid) -> const profiler::PodInfo* { return pid == 9999 ? nullptr : &pod; };
  std::vector<profiler::Metric> m =
      profiler::GpuMetrics({g}, {{"GPU 1 power", "Not Supported (3)"}}, "n1", pod_of, 0.25, 7);
  const std::string text = profiler::PrometheusText(m);
  EXPECT_NE(text.find("gpuflame_gpu_utilization_ratio{gpu=\"1\",uuid=\"GPU-1\",node=\"n1\"} 0.5\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("gpuflame_gpu_dram_bandwidth_ratio{gpu=\"1\",uuid=\"GPU-1\",node=\"n1\"} 0.125\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpuflame_gpu_sm_clock_hertz{gpu=\"1\",uuid=\"GPU-1\",node=\"n1\"} 1980000000\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("gpuflame_gpu_power_watts"), std::string::npos) << "a missing figure is not a zero";
  EXPECT_NE(text.find("gpuflame_gpu_figure_missing{figure=\"GPU 1 power\",reason=\"Not Supported (3)\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(",pid=\"7\",namespace=\"ml\",pod=\"trainer-0\",container=\"main\"} 0.5\n"), std::string::npos)
      << text;
  size_t series = 0;
  for (const profiler::Metric& x : m) series += x.name == "gpuflame_gpu_process_sm_utilization_ratio";
  EXPECT_EQ(series, profiler::kMaxProcessSeries);
  EXPECT_NE(text.find("gpuflame_gpu_process_series_not_exported 44\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("pid=\"9999\""), std::string::npos);
  EXPECT_NE(text.find("gpuflame_gpu_readings_cpu_seconds_total 0.25\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace gpuflame
