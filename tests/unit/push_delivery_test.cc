// Exactly-once delivery to Pyroscope: the real clients (Connect, gRPC, legacy
// /ingest) behind the push queue, against the test receiver failing every
// Nth call or a fixed-seed random share of them. Every profile carries a
// unique value: the receiver must hold each exactly once, and the queue's
// counters must account for every profile and every failure.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zstd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/metrics_server.h"
#include "agent/self_metrics.h"
#include "e2e/pyroscope_receiver.h"
#include "exporters/pprof/gzip.h"
#include "exporters/pyroscope/push_outcome.h"
#include "exporters/pyroscope/push_queue.h"
#include "exporters/pyroscope/pyroscope_client.h"
#include "exporters/pyroscope/pyroscope_grpc_client.h"
#include "exporters/pyroscope/spool.h"
#include "profile.pb.h"
#include "push.pb.h"

namespace gpuflame {
namespace {

using exporters::PushOutcome;
using exporters::PushQueue;
using exporters::PushQueueOptions;
using exporters::PushStats;
using exporters::Series;

// A valid gzipped pprof with one sample of |value| bytes.
std::string ProfileOf(int64_t value) {
  pprof::Profile p;
  for (const char* s : {"", "alloc_space", "bytes", "f"}) p.add_string_table(s);
  auto* type = p.add_sample_type();
  type->set_type(1);
  type->set_unit(2);
  auto* fn = p.add_function();
  fn->set_id(1);
  fn->set_name(3);
  auto* loc = p.add_location();
  loc->set_id(1);
  loc->add_line()->set_function_id(1);
  auto* sample = p.add_sample();
  sample->add_location_id(1);
  sample->add_value(value);
  return *exporters::Gzip(p.SerializeAsString());
}

// Request |r| of |n| profiles, valued r * 1000 + k + 1.
std::vector<Series> RequestOf(int r, int n) {
  std::vector<Series> out;
  for (int k = 0; k < n; k++)
    out.push_back(
        {{{"__name__", "gpu_memory"}, {"service_name", "svc"}, {"req", std::to_string(r)}, {"k", std::to_string(k)}},
         ProfileOf(r * 1000 + k + 1)});
  return out;
}

PushQueueOptions Fast(std::string spool_dir = "") {
  PushQueueOptions o;
  o.initial_backoff_ms = 1;
  o.max_backoff_ms = 4;
  o.spool_dir = std::move(spool_dir);
  return o;
}

std::string FreshDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/" + name + "-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  return dir;
}

enum class Protocol { kConnect, kGrpc, kIngest, kConnectFallingBackToIngest };

// As agent/delivery.cc builds it.
PushQueue::Sender SenderFor(Protocol protocol, int port) {
  exporters::PyroscopeEndpoint endpoint;
  endpoint.url = "http://127.0.0.1:" + std::to_string(port);
  if (protocol == Protocol::kGrpc) {
    auto client = std::make_shared<exporters::PyroscopeGrpcClient>(endpoint);
    return [client](const std::string& body) -> PushOutcome { return client->PushEncoded(body); };
  }
  auto client = std::make_shared<exporters::PyroscopeClient>(endpoint);
  client->set_legacy_ingest(protocol == Protocol::kIngest);
  return [client](const std::string& body) { return client->PushEncoded(body); };
}

struct Case {
  const char* name;
  Protocol protocol;
  int fail_every;
  double fail_share;
  bool spool;
};

class ExactlyOnceTest : public ::testing::TestWithParam<Case> {};

TEST_P(ExactlyOnceTest, EveryProfileArrivesOnceWhateverFails) {
  const Case& c = GetParam();
  e2e::PyroscopeReceiver receiver;
  if (c.protocol == Protocol::kGrpc) {
    ASSERT_TRUE(receiver.StartGrpc(0));
  } else {
    ASSERT_TRUE(receiver.Start(0, /*legacy_only=*/c.protocol == Protocol::kConnectFallingBackToIngest));
  }
  receiver.FailEvery(c.fail_every);
  receiver.FailShare(c.fail_share, /*seed=*/7);
  constexpr int kRequests = 12, kProfiles = 4;  // more than the every-third failure lets through at once
  int64_t sent_bytes = 0;
  std::map<int64_t, int> expected;
  auto q = PushQueue::Create(SenderFor(c.protocol, receiver.port()), Fast(c.spool ? FreshDir(c.name) : ""));
  ASSERT_TRUE(q.ok()) << q.status();
  for (int r = 0; r < kRequests; r++) {
    (*q)->Enqueue(RequestOf(r, kProfiles));
    for (int k = 0; k < kProfiles; k++) {
      expected[r * 1000 + k + 1] = 1;
      sent_bytes += r * 1000 + k + 1;
    }
  }
  ASSERT_TRUE((*q)->Flush(60000)) << (*q)->Stats().last_error;
  PushStats s = (*q)->Stats();

  std::map<int64_t, int> received;
  int64_t received_bytes = 0;
  for (const e2e::ReceivedSeries& series : receiver.Accepted()) {
    for (const auto& sample : series.profile.sample()) {
      received[sample.value(0)]++;
      received_bytes += sample.value(0);
    }
  }
  EXPECT_EQ(received, expected) << "each profile exactly once";
  EXPECT_EQ(received_bytes, sent_bytes);
  EXPECT_TRUE(receiver.Rejections().empty());
  EXPECT_GT(receiver.failed(), 0) << "the receiver failed nothing: the test tests nothing";
  EXPECT_EQ(s.series_pushed, uint64_t{kRequests * kProfiles});
  EXPECT_EQ(s.pushed, uint64_t{kRequests});
  EXPECT_EQ(s.failed_attempts, uint64_t(receiver.failed())) << "one retried attempt per failed call";
  EXPECT_EQ(s.dropped_queue_full + s.dropped_rejected + s.dropped_undeliverable + s.dropped_spool_full +
                s.dropped_spool_write + s.series_rejected + s.series_undeliverable + s.spool_corrupt,
            0u);
  if (c.protocol == Protocol::kIngest && c.fail_every == 3) {
    EXPECT_GT(s.partial_attempts, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(FailingReceiver, ExactlyOnceTest,
                         ::testing::Values(Case{"ConnectEvery3rd", Protocol::kConnect, 3, 0, false},
                                           Case{"ConnectRandom20", Protocol::kConnect, 0, 0.2, true},
                                           Case{"GrpcEvery3rd", Protocol::kGrpc, 3, 0, false},
                                           Case{"GrpcRandom20", Protocol::kGrpc, 0, 0.2, true},
                                           Case{"IngestEvery3rd", Protocol::kIngest, 3, 0, false},
                                           Case{"IngestEvery3rdSpooled", Protocol::kIngest, 3, 0, true},
                                           Case{"IngestRandom20", Protocol::kIngest, 0, 0.2, false},
                                           Case{"IngestRandom20Spooled", Protocol::kIngest, 0, 0.2, true},
                                           Case{"ConnectFallbackEvery3rd", Protocol::kConnectFallingBackToIngest, 3, 0,
                                                true}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(PushOutcomeTest, DropLeadingProfilesKeepsTheRestInOrder) {
  push::v1::PushRequest req;
  for (int s = 0; s < 3; s++) {
    auto* series = req.add_series();
    auto* l = series->add_labels();
    l->set_name("s");
    l->set_value(std::to_string(s));
    for (int k = 0; k < 2; k++) series->add_samples()->set_raw_profile(std::to_string(s) + "." + std::to_string(k));
  }
  const std::string body = req.SerializeAsString();
  EXPECT_EQ(*exporters::CountProfiles(body), 6u);
  push::v1::PushRequest rest;
  ASSERT_TRUE(rest.ParseFromString(*exporters::DropLeadingProfiles(body, 3)));  // mid-series
  ASSERT_EQ(rest.series_size(), 2);
  EXPECT_EQ(rest.series(0).labels(0).value(), "1");
  ASSERT_EQ(rest.series(0).samples_size(), 1);
  EXPECT_EQ(rest.series(0).samples(0).raw_profile(), "1.1");
  EXPECT_EQ(rest.series(1).samples(1).raw_profile(), "2.1");
  EXPECT_EQ(*exporters::CountProfiles(*exporters::DropLeadingProfiles(body, 0)), 6u);
  EXPECT_EQ(*exporters::CountProfiles(*exporters::DropLeadingProfiles(body, 6)), 0u);
  EXPECT_FALSE(exporters::DropLeadingProfiles(body, 7).ok());
  EXPECT_FALSE(exporters::CountProfiles("\xff\xff").ok());
}

// One request that never gets through while the others do: it does not hold
// them up, and after max_strikes it is given up and counted.
TEST(PushQueueStrikesTest, ARequestThatCannotGetThroughIsGivenUpNotBlocking) {
  std::mutex mu;
  std::vector<std::string> attempts;
  PushQueueOptions o = Fast();
  o.max_strikes = 3;
  std::atomic<bool> go{false};
  auto q = PushQueue::Create(
      [&](const std::string& body) -> absl::Status {
        while (!go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        push::v1::PushRequest req;
        req.ParseFromString(body);
        std::string name = req.series(0).labels(0).value();
        std::lock_guard<std::mutex> lock(mu);
        attempts.push_back(name);
        return name == "poison" ? absl::UnavailableError("503") : absl::OkStatus();
      },
      o);
  ASSERT_TRUE(q.ok());
  (*q)->Enqueue({{{{"__name__", "poison"}}, "x"}});
  for (int i = 0; i < 8; i++) (*q)->Enqueue({{{{"__name__", "ok" + std::to_string(i)}}, "x"}});
  go = true;
  ASSERT_TRUE((*q)->Flush(10000));
  PushStats s = (*q)->Stats();
  EXPECT_EQ(s.pushed, 8u);
  EXPECT_EQ(s.dropped_undeliverable, 1u);
  EXPECT_EQ(s.series_undeliverable, 1u);
  EXPECT_NE(s.last_error.find("given up after 4 failed attempts while others got through"), std::string::npos)
      << s.last_error;
  std::lock_guard<std::mutex> lock(mu);
  // poison, ok0, poison (strike 1), ok1, poison (2), ok2, poison (3: given up), ok3..ok7
  EXPECT_EQ(attempts, (std::vector<std::string>{"poison", "ok0", "poison", "ok1", "poison", "ok2", "poison", "ok3",
                                                "ok4", "ok5", "ok6", "ok7"}));
}

// An outage fails everything: however long it lasts, nothing is given up.
TEST(PushQueueStrikesTest, AnOutageGivesNothingUp) {
  std::atomic<int> calls{0};
  std::mutex mu;
  std::vector<std::string> delivered;
  PushQueueOptions o = Fast(FreshDir("outage"));
  o.max_strikes = 2;
  auto q = PushQueue::Create(
      [&](const std::string& body) -> absl::Status {
        if (calls++ < 40) return absl::UnavailableError("down");
        push::v1::PushRequest req;
        req.ParseFromString(body);
        std::lock_guard<std::mutex> lock(mu);
        delivered.push_back(req.series(0).labels(0).value());
        return absl::OkStatus();
      },
      o);
  ASSERT_TRUE(q.ok());
  for (int i = 0; i < 5; i++) (*q)->Enqueue({{{{"__name__", "w" + std::to_string(i)}}, "x"}});
  ASSERT_TRUE((*q)->Flush(20000));
  PushStats s = (*q)->Stats();
  EXPECT_EQ(s.pushed, 5u);
  EXPECT_EQ(s.dropped_undeliverable, 0u);
  EXPECT_EQ(s.failed_attempts, 40u);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(delivered.size(), 5u);
  // The two oldest take turns during the outage; the rest keep their order.
  EXPECT_EQ(std::vector<std::string>(delivered.begin() + 2, delivered.end()),
            (std::vector<std::string>{"w2", "w3", "w4"}));
}

// What /ingest took before a failure is cut from the spooled request: after
// a restart only the rest is sent.
TEST(PushQueueStrikesTest, PartProgressIsKeptOnDiskAcrossARestart) {
  std::string dir = FreshDir("partial");
  {
    std::atomic<int> calls{0};
    auto q = PushQueue::Create(
        [&](const std::string&) -> PushOutcome {
          // First attempt: two of four taken, then a 503; then Pyroscope is away.
          if (calls++ == 0) return PushOutcome::Partial(2, 0, absl::UnavailableError("503"));
          return absl::UnavailableError("down");
        },
        Fast(dir));
    ASSERT_TRUE(q.ok());
    (*q)->Enqueue(RequestOf(5, 4));
    for (int i = 0; i < 2000 && calls < 3; i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ((*q)->Stats().series_pushed, 2u);
    EXPECT_EQ((*q)->Stats().partial_attempts, 1u);
  }
  auto spool = exporters::Spool::Open(dir, 1 << 20);
  ASSERT_TRUE(spool.ok());
  ASSERT_EQ(spool->count(), 1u);
  auto left = spool->Oldest();
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->series, 2u);
  push::v1::PushRequest req;
  ASSERT_TRUE(req.ParseFromString(left->body));
  ASSERT_EQ(req.series_size(), 2);
  EXPECT_EQ(req.series(0).labels(3).value(), "2");  // k=2 and k=3 are left
  EXPECT_EQ(req.series(1).labels(3).value(), "3");
}

// A damaged spool file is said once, counted and removed; the next read does
// not see it again.
TEST(SpoolFormatTest, ADamagedFileIsLoggedOnceCountedAndRemoved) {
  std::string dir = FreshDir("spool-damaged");
  auto spool = exporters::Spool::Open(dir, 1 << 20);
  ASSERT_TRUE(spool.ok());
  ASSERT_TRUE(spool->Put("first", 1).ok());
  ASSERT_TRUE(spool->Put("second", 1).ok());
  const std::string path = dir + "/00000000000000000000.push";
  std::string raw;
  {
    std::ifstream in(path, std::ios::binary);
    raw.assign(std::istreambuf_iterator<char>(in), {});
  }
  raw[raw.size() - 5] ^= 0x01;  // inside the frame: the count and body are both covered
  std::ofstream(path, std::ios::binary | std::ios::trunc) << raw;
  ::testing::internal::CaptureStderr();
  auto next = spool->Oldest();
  auto again = spool->Oldest();
  std::string said = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->body, "second");
  EXPECT_EQ(again->body, "second");
  EXPECT_EQ(spool->corrupt(), 1u);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(said, "gpuflame: warning: spool file " + path +
                      " is damaged (Restored data doesn't match checksum): dropped, not replayed\n");
}

// Files an earlier release spooled ("GFSPOOL1", the count outside the
// frame) are still replayed; a rewrite a crash interrupted is cleaned up.
TEST(SpoolFormatTest, VersionOneFilesAreReadAndStaleRewritesRemoved) {
  std::string dir = FreshDir("spool-v1");
  std::filesystem::create_directories(dir);
  const std::string body = "a request of version 1";
  std::string v1 = "GFSPOOL1";
  const uint32_t series = 3;
  v1.append(reinterpret_cast<const char*>(&series), 4);
  std::string frame(ZSTD_compressBound(body.size()), '\0');
  frame.resize(ZSTD_compress(frame.data(), frame.size(), body.data(), body.size(), 3));
  v1 += frame;
  std::ofstream(dir + "/00000000000000000007.push", std::ios::binary) << v1;
  std::ofstream(dir + "/00000000000000000007.push.tmp", std::ios::binary) << "half a rewrite";
  auto spool = exporters::Spool::Open(dir, 1 << 20);
  ASSERT_TRUE(spool.ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/00000000000000000007.push.tmp"));
  auto r = spool->Oldest();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->sequence, 7u);
  EXPECT_EQ(r->series, 3u);
  EXPECT_EQ(r->body, body);
  // New files continue the sequence, in the current format.
  auto seq = spool->Put("next", 1);
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(*seq, 8u);
  ASSERT_TRUE(spool->Replace(7, "rest", 1).ok());
  auto replaced = spool->Read(7);
  ASSERT_TRUE(replaced.has_value());
  EXPECT_EQ(replaced->body, "rest");
  EXPECT_EQ(replaced->series, 1u);
}

// Every way a profile can fail to arrive is a counter on /metrics.
TEST(PushMetricsTest, EveryDropIsVisibleInTheSelfMetrics) {
  profiler::AgentStats s;
  s.push.series_pushed = 11;
  s.push.series_rejected = 12;
  s.push.partial_attempts = 13;
  s.push.dropped_undeliverable = 14;
  s.push.series_undeliverable = 15;
  s.push.dropped_spool_write = 16;
  s.push.spool_corrupt = 17;
  std::string t = profiler::PrometheusText(profiler::SelfMetrics(s));
  for (const char* line : {"\ngpuflame_push_series_pushed_total 11\n", "\ngpuflame_push_series_rejected_total 12\n",
                           "\ngpuflame_push_partial_attempts_total 13\n", "\ngpuflame_push_given_up_total 14\n",
                           "\ngpuflame_push_series_given_up_total 15\n", "\ngpuflame_spool_write_failures_total 16\n",
                           "\ngpuflame_spool_corrupt_total 17\n"})
    EXPECT_NE(t.find(line), std::string::npos) << line;
}

}  // namespace
}  // namespace gpuflame
