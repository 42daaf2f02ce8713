// The agent's flight recorder around its ring: GET /timeline's query
// (hostile input), the hand-over from the server's threads to the event
// loop, the incident directory's bounds, and its settings.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "agent/agent_config.h"
#include "agent/incident_traces.h"
#include "agent/trace_requests.h"
#include "exporters/pprof/gzip.h"
#include "tests/support/temp_dir.h"

namespace gpuflame::profiler {
namespace {

std::string QueryError(const std::multimap<std::string, std::string>& params) {
  auto q = ParseTraceQuery(params);
  return q.ok() ? "ok" : std::string(q.status().message());
}

TEST(AgentFlightTest, TheTimelineQueryIsCheckedValueByValue) {
  auto q =
      ParseTraceQuery({{"pid", "12"}, {"pid", "13"}, {"namespace", "ml"}, {"pod", "trainer-0"}, {"seconds", "2.5"}});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->pids, (std::vector<pid_t>{12, 13}));
  EXPECT_EQ(q->namespace_name, "ml");
  EXPECT_EQ(q->pod, "trainer-0");
  EXPECT_EQ(q->seconds, 2.5);
  EXPECT_EQ(QueryError({}), "ok");  // every process
  EXPECT_EQ(QueryError({{"pid", "12x"}}), "pid wants a process id, not \"12x\"");
  EXPECT_EQ(QueryError({{"pid", "0"}}), "pid wants a process id, not \"0\"");
  EXPECT_EQ(QueryError({{"pid", "99999999999999999999"}}), "pid wants a process id, not \"99999999999999999999\"");
  EXPECT_EQ(QueryError({{"seconds", "nan"}}), "seconds wants a number above 0, not \"nan\"");
  EXPECT_EQ(QueryError({{"seconds", "-1"}}), "seconds wants a number above 0, not \"-1\"");
  EXPECT_EQ(QueryError({{"pod", "a/b"}}).rfind("pod wants a Kubernetes name", 0), 0u);
  EXPECT_EQ(QueryError({{"namespace", std::string(254, 'a')}}).rfind("namespace wants a Kubernetes name", 0), 0u);
  EXPECT_EQ(QueryError({{"pid\"x", "1"}}), "unknown parameter \"pid\\\"x\" (pid, namespace, pod, seconds)");
  std::multimap<std::string, std::string> many;
  for (int i = 1; i <= 65; i++) many.emplace("pid", std::to_string(i));
  EXPECT_EQ(QueryError(many), "at most 64 pids in one trace");
}

TEST(AgentFlightTest, RequestsCrossToTheLoopAndBackBounded) {
  TraceRequests requests;
  std::atomic<bool> stop{false};
  std::thread loop([&] {
    while (!stop) {
      requests.Serve([](const TraceQuery& q) { return TraceReply{200, "trace of " + std::to_string(q.pids[0]), "f"}; });
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  TraceReply r = requests.Ask(TraceQuery::Of({42}), std::chrono::seconds(10));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "trace of 42");
  stop = true;
  loop.join();
  // Nobody serves: the asker gives up in time, and the waiting ones fill the queue.
  EXPECT_EQ(requests.Ask(TraceQuery::Of({1}), std::chrono::milliseconds(10)).status, 504);
  for (size_t i = 1; i < TraceRequests::kMaxPending; i++) requests.Ask(TraceQuery::Of({1}), std::chrono::milliseconds(1));
  TraceReply busy = requests.Ask(TraceQuery::Of({1}), std::chrono::milliseconds(1));
  EXPECT_EQ(busy.status, 503) << busy.body;
  requests.Close();
  EXPECT_EQ(requests.Ask(TraceQuery::Of({1}), std::chrono::seconds(10)).status, 503);
}

TEST(AgentFlightTest, TheIncidentDirectoryKeepsTheNewestOfOursWithinItsBounds) {
  const std::string dir = testing::ProcessTempDir() + "/incident_traces";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/notes.txt") << "not ours";
  FlightRecorderOptions o;
  o.incident_dir = dir;
  o.incident_max_files = 2;
  uint64_t removed = 0;
  std::vector<std::string> paths;
  for (int i = 0; i < 3; i++) {
    auto path = IncidentTraces::WriteOne(o, "oom-pid" + std::to_string(i), "{\"traceEvents\":[]}", &removed);
    ASSERT_TRUE(path.ok()) << path.status();
    paths.push_back(*path);
  }
  EXPECT_EQ(removed, 1u);
  EXPECT_FALSE(std::filesystem::exists(paths[0]));  // the oldest went
  EXPECT_TRUE(std::filesystem::exists(paths[1]));
  EXPECT_TRUE(std::filesystem::exists(paths[2]));
  EXPECT_TRUE(std::filesystem::exists(dir + "/notes.txt"));
  EXPECT_NE(paths[2].find("/gpuflame-timeline-"), std::string::npos);
  EXPECT_TRUE(paths[2].ends_with("-oom-pid2.json.gz")) << paths[2];
  std::ifstream f(paths[2]);
  const std::string gz((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(*exporters::Gunzip(gz), "{\"traceEvents\":[]}");
  // One over the byte bound alone is not written.
  o.incident_max_bytes = 10;
  EXPECT_FALSE(IncidentTraces::WriteOne(o, "big", std::string(1000, 'x'), &removed).ok());
}

TEST(AgentFlightTest, ItsSettingsComeFromFlagsEnvironmentAndFileAndAreChecked) {
  auto c = LoadAgentConfig({"--pyroscope-url", "http://p", "--flight-seconds", "2", "--flight-max-mb", "32"},
                           {{"GPUFLAME_FLIGHT_RECORDER_PROCESS_MAX_MB", "8"}, {"GPUFLAME_INCIDENT_TRACE_DIR", "/t"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->flight.seconds, 2);
  EXPECT_EQ(c->flight.max_bytes, 32u << 20);
  EXPECT_EQ(c->flight.process_max_bytes, 8u << 20);
  EXPECT_EQ(c->flight.incident_dir, "/t");
  auto off = LoadAgentConfig({"--pyroscope-url", "http://p", "--flight-seconds", "0"}, {});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->flight.seconds, 0);
  auto error = [](std::vector<std::string> args) {
    args.insert(args.begin(), {"--pyroscope-url", "http://p"});
    auto c = LoadAgentConfig(args, {});
    return c.ok() ? std::string("ok") : std::string(c.status().message());
  };
  EXPECT_EQ(error({"--flight-seconds", "61"}), "flight_recorder_seconds wants 0 (off) to 60 seconds, not 61");
  EXPECT_EQ(error({"--flight-max-mb", "8", "--flight-process-max-mb", "16"}),
            "flight_recorder_process_max_mb must not be more than flight_recorder_max_mb");
  EXPECT_EQ(error({"--flight-max-mb", "0"}), "--flight-max-mb: flight_recorder_max_mb wants 1 to 65536 MiB, not 0");
  EXPECT_EQ(error({"--incident-trace-max-files", "0"}), "incident_trace_max_files wants 1 to 10000, not 0");
}

}  // namespace
}  // namespace gpuflame::profiler
