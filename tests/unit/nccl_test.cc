// profiler/collectives/: the NCCL tracker's accounting, communicators joined
// by unique ID, hangs found while stuck with the ranks that have not entered
// the matching call (collectives, send/recv, grouped calls, init), their end,
// the bounds on what the profiled process sends; GPU-side hangs (a
// synchronise call stuck after NCCL calls that returned once enqueued);
// calls whose thread ended; an agent's hangs past kMaxHangs; and the reports.
#include <gtest/gtest.h>

#include <string>

#include "bpf/gpuflame_abi.h"
#include "profiler/collectives/nccl_api.h"
#include "profiler/collectives/nccl_report.h"
#include "profiler/collectives/nccl_tracker.h"

namespace gpuflame::profiler {
namespace {

constexpr uint64_t kS = 1'000'000'000;
constexpr uint64_t kIdLo = 0x1111, kIdHi = 0x2222;
constexpr int kFloat32 = 7;

NcclCall Call(pid_t pid, uint64_t ts, uint16_t api, uint64_t comm = 0) {
  NcclCall c;
  c.pid = pid;
  c.tid = static_cast<uint32_t>(pid);
  c.ts_ns = ts;
  c.api = api;
  c.comm = comm;
  c.datatype = GF_NCCL_NO_OP;
  c.op = GF_NCCL_NO_OP;
  c.stack = static_cast<StackId>(api);  // one stack per API is enough here
  return c;
}

NcclCall Init(pid_t pid, uint64_t ts, int rank, int nranks) {
  NcclCall c = Call(pid, ts, GF_API_NCCL_COMM_INIT_RANK);
  c.count = static_cast<uint64_t>(nranks);
  c.peer = rank;
  c.id_lo = kIdLo;
  c.id_hi = kIdHi;
  return c;
}

NcclCall P2p(pid_t pid, uint64_t ts, uint16_t api, uint64_t comm, int peer, uint64_t count) {
  NcclCall c = Call(pid, ts, api, comm);
  c.peer = peer;
  c.count = count;
  c.datatype = kFloat32;
  return c;
}

// Two ranks (pids 10 and 20, communicators 0xa and 0xb) initialised.
void TwoRanks(NcclTracker& t) {
  t.OnCall(Init(10, 0, 0, 2));
  t.OnCall(Init(20, 0, 1, 2));
  t.OnReturn(10, 10, 1, 0xa, 0);
  t.OnReturn(20, 20, 1, 0xb, 0);
}

TEST(NcclApiTest, TypesAndNames) {
  EXPECT_EQ(NcclTypeSize(kFloat32), 4u);
  EXPECT_EQ(NcclTypeSize(9), 2u);  // bfloat16
  EXPECT_FALSE(NcclTypeSize(12).has_value());
  EXPECT_EQ(NcclTypeName(kFloat32), "float32");
  EXPECT_EQ(NcclTypeName(99), "type 99");
  EXPECT_EQ(NcclResultName(0), "ncclSuccess");
  EXPECT_EQ(NcclOpName(4), "avg");
  EXPECT_EQ(NcclOpName(5), "op 5");
  EXPECT_EQ(NcclResultName(42), "ncclResult 42");
  EXPECT_EQ(NcclMatchingCall(GF_API_NCCL_SEND), "ncclRecv");
  EXPECT_EQ(NcclMatchingCall(GF_API_NCCL_ALL_REDUCE), "ncclAllReduce");
}

TEST(NcclTrackerTest, JoinsRanksByUniqueId) {
  NcclTracker t;
  TwoRanks(t);
  ASSERT_EQ(t.communicators().size(), 1u);
  const NcclCommunicator& c = t.communicators().begin()->second;
  EXPECT_EQ(c.nranks, 2);
  EXPECT_EQ(c.ranks.at(0).pid, 10);
  EXPECT_EQ(c.ranks.at(1).comm, 0xbu);
  EXPECT_EQ(t.RankOf(20, 0xb), (std::pair<int, int>{1, 2}));
  EXPECT_EQ(t.RankOf(20, 0xa), (std::pair<int, int>{-1, 0}));
}

TEST(NcclTrackerTest, RetiredProcessesLeaveTheTable) {
  NcclTracker t;
  TwoRanks(t);
  const pid_t first[] = {10};
  t.ForgetProcesses(first);
  ASSERT_EQ(t.communicators().size(), 1u);
  EXPECT_FALSE(t.communicators().begin()->second.ranks.contains(0));
  EXPECT_EQ(t.RankOf(10, 0xa).first, -1);
  const pid_t second[] = {20};
  t.ForgetProcesses(second);
  EXPECT_TRUE(t.communicators().empty());
}

TEST(NcclTrackerTest, TimeAndBytesPerStackAndOperation) {
  NcclTracker t;
  TwoRanks(t);
  NcclCall ar = P2p(10, 2 * kS, GF_API_NCCL_ALL_REDUCE, 0xa, -1, 256);
  t.OnCall(ar);
  t.OnReturn(10, 10, 2 * kS + 500, 0, 0);
  const NcclStackTotals& s = t.totals().at(ar.stack);
  EXPECT_EQ(s.calls, 1u);
  EXPECT_EQ(s.nanos, 500u);
  EXPECT_EQ(s.bytes, 1024u);
  EXPECT_EQ(t.by_api()[GF_API_NCCL_ALL_REDUCE - GF_API_NCCL_ALL_REDUCE].bytes, 1024u);
  // A datatype NCCL does not have: counted, no bytes.
  NcclCall odd = P2p(10, 3 * kS, GF_API_NCCL_ALL_REDUCE, 0xa, -1, 256);
  odd.datatype = 77;
  t.OnCall(odd);
  t.OnReturn(10, 10, 3 * kS + 1, 0, 0);
  EXPECT_EQ(t.stats().unknown_datatypes, 1u);
  EXPECT_EQ(t.totals().at(ar.stack).bytes, 1024u);
  // A return without its call (attached mid-call).
  t.OnReturn(20, 20, 4 * kS, 0, 0);
  EXPECT_EQ(t.stats().returns_without_call, 1u);
  // A call whose return was lost: charged up to the thread's next call.
  t.OnCall(P2p(10, 5 * kS, GF_API_NCCL_ALL_REDUCE, 0xa, -1, 256));
  t.OnCall(P2p(10, 6 * kS, GF_API_NCCL_ALL_REDUCE, 0xa, -1, 256));
  EXPECT_EQ(t.stats().calls_without_return, 1u);
  EXPECT_EQ(t.totals().at(ar.stack).nanos, 500u + 1 + kS);
}

TEST(NcclTrackerTest, StuckSendWaitsForThePeersRecv) {
  NcclTracker t(kS);
  TwoRanks(t);
  // Step 1: both sides matched.
  t.OnCall(P2p(10, 2 * kS, GF_API_NCCL_SEND, 0xa, 1, 1 << 20));
  t.OnCall(P2p(20, 2 * kS, GF_API_NCCL_RECV, 0xb, 0, 1 << 20));
  t.OnReturn(10, 10, 2 * kS + 10, 0, 0);
  t.OnReturn(20, 20, 2 * kS + 10, 0, 0);
  // Step 2: rank 1 never posts its recv.
  t.OnCall(P2p(10, 3 * kS, GF_API_NCCL_SEND, 0xa, 1, 1 << 20));
  t.Tick(3 * kS + kS / 2);
  EXPECT_TRUE(t.TakeFound().empty());  // under the threshold
  t.Tick(4 * kS);
  std::vector<NcclHang> found = t.TakeFound();
  ASSERT_EQ(found.size(), 1u);
  const NcclHang& h = found[0];
  EXPECT_EQ(h.number, 1u);
  EXPECT_EQ(h.pid, 10);
  EXPECT_EQ(h.api, GF_API_NCCL_SEND);
  EXPECT_EQ(h.rank, 0);
  EXPECT_EQ(h.nranks, 2);
  EXPECT_EQ(h.peer, 1);
  EXPECT_EQ(h.bytes, 4u << 20);
  EXPECT_EQ(h.sequence, 2u);
  ASSERT_TRUE(h.comm_id.has_value());
  EXPECT_EQ(h.comm_id->lo, kIdLo);
  ASSERT_EQ(h.absent.size(), 1u);
  EXPECT_EQ(h.absent[0].rank, 1);
  EXPECT_EQ(h.absent[0].pid, 20);
  EXPECT_EQ(h.absent[0].entered, 1u);
  t.Tick(5 * kS);
  EXPECT_TRUE(t.TakeFound().empty());  // said once
  // The peer comes back: the hang is over, with how long it lasted.
  t.OnCall(P2p(20, 8 * kS, GF_API_NCCL_RECV, 0xb, 0, 1 << 20));
  t.OnReturn(10, 10, 8 * kS, 0, 0);
  std::vector<NcclHang> ended = t.TakeEnded();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].outcome, NcclHang::Outcome::kReturned);
  EXPECT_EQ(ended[0].end_ns - ended[0].start_ns, 5 * kS);
  EXPECT_EQ(NcclHangEndLine(ended[0]),
            "NCCL hang #1 over: ncclSend to peer 1 of pid 10 (rank 0 of 2) lasted 5.0 s, returned ncclSuccess");
}

TEST(NcclTrackerTest, CollectiveNamesTheRanksBehind) {
  NcclTracker t(kS);
  t.OnCall(Init(10, 0, 0, 3));
  t.OnCall(Init(20, 0, 1, 3));
  t.OnReturn(10, 10, 1, 0xa, 0);
  t.OnReturn(20, 20, 1, 0xb, 0);
  // Rank 2 runs on a process this gpuflame does not follow.
  t.OnCall(P2p(20, kS, GF_API_NCCL_ALL_REDUCE, 0xb, -1, 4));
  t.OnReturn(20, 20, kS + 1, 0, 0);
  NcclCall b = P2p(10, 2 * kS, GF_API_NCCL_BROADCAST, 0xa, 0, 4);
  t.OnCall(P2p(10, kS, GF_API_NCCL_ALL_REDUCE, 0xa, -1, 4));
  t.OnReturn(10, 10, kS + 1, 0, 0);
  t.OnCall(b);
  t.Tick(4 * kS);
  std::vector<NcclHang> found = t.TakeFound();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].api, GF_API_NCCL_BROADCAST);
  EXPECT_EQ(found[0].sequence, 2u);
  ASSERT_EQ(found[0].absent.size(), 2u);
  EXPECT_EQ(found[0].absent[0].rank, 1);
  EXPECT_EQ(found[0].absent[0].pid, 20);
  EXPECT_EQ(found[0].absent[1].rank, 2);
  EXPECT_EQ(found[0].absent[1].pid, 0);
  // Its process ends: so does the hang.
  t.OnProcessExit(10, 6 * kS);
  std::vector<NcclHang> ended = t.TakeEnded();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].outcome, NcclHang::Outcome::kProcessEnded);
  EXPECT_EQ(t.totals().at(b.stack).nanos, 4 * kS);
}

TEST(NcclTrackerTest, GroupEndCarriesItsGroupsCalls) {
  NcclTracker t(kS);
  TwoRanks(t);
  t.OnCall(Call(10, kS, GF_API_NCCL_GROUP_START));
  t.OnReturn(10, 10, kS, 0, 0);
  t.OnCall(P2p(10, kS, GF_API_NCCL_SEND, 0xa, 1, 8));
  t.OnReturn(10, 10, kS, 0, 0);
  t.OnCall(P2p(10, kS, GF_API_NCCL_RECV, 0xa, 1, 8));
  t.OnReturn(10, 10, kS, 0, 0);
  t.OnCall(Call(10, kS, GF_API_NCCL_GROUP_END));
  // Rank 1 posted its recv, not its send.
  t.OnCall(P2p(20, kS, GF_API_NCCL_RECV, 0xb, 0, 8));
  t.Tick(3 * kS);
  std::vector<NcclHang> found = t.TakeFound();
  ASSERT_EQ(found.size(), 2u);  // rank 0's group end, and rank 1's recv (stuck too, in this test)
  const NcclHang* g = found[0].api == GF_API_NCCL_GROUP_END ? &found[0] : &found[1];
  EXPECT_EQ(g->grouped, (std::vector<uint16_t>{GF_API_NCCL_SEND, GF_API_NCCL_RECV}));
  EXPECT_EQ(g->bytes, 64u);
  EXPECT_EQ(g->rank, 0);
  ASSERT_EQ(g->absent.size(), 1u);  // rank 1 has not sent
  EXPECT_EQ(g->absent[0].rank, 1);
  // Rank 1's recv from rank 0 is matched by rank 0's grouped send: it waits
  // for nobody (NCCL runs the group at its end: it is rank 0 that waits).
  const NcclHang* r = found[0].api == GF_API_NCCL_GROUP_END ? &found[1] : &found[0];
  EXPECT_TRUE(r->absent.empty());
}

TEST(NcclTrackerTest, InitWaitsForTheRanksNotJoined) {
  NcclTracker t(kS);
  t.OnCall(Init(10, 0, 0, 4));
  t.OnCall(Init(20, 0, 2, 4));
  t.Tick(2 * kS);
  std::vector<NcclHang> found = t.TakeFound();
  ASSERT_EQ(found.size(), 2u);
  for (const NcclHang& h : found) {
    EXPECT_EQ(h.nranks, 4);
    ASSERT_EQ(h.absent.size(), 2u);
    EXPECT_EQ(h.absent[0].rank, 1);
    EXPECT_EQ(h.absent[1].rank, 3);
    EXPECT_EQ(h.absent[0].pid, 0);
  }
  // Recording ends with them still stuck: charged up to the end.
  t.Finish(5 * kS);
  EXPECT_EQ(t.stats().unfinished, 2u);
  EXPECT_EQ(t.hangs().begin()->second.outcome, NcclHang::Outcome::kStuck);
  EXPECT_EQ(t.hangs().begin()->second.end_ns, 5 * kS);
}

TEST(NcclTrackerTest, HostileValuesAreBounded) {
  NcclTracker t(kS);
  NcclCall bad = Init(10, 0, 5, 2);  // rank past nranks
  t.OnCall(bad);
  NcclCall huge = Init(11, 0, 0, 1 << 30);
  t.OnCall(huge);
  EXPECT_EQ(t.stats().dropped_ranks, 2u);
  EXPECT_TRUE(t.communicators().empty());
  // A call on a communicator whose init was not seen: counted, no ranks named.
  t.OnCall(P2p(30, 0, GF_API_NCCL_SEND, 0xdead, 1, UINT64_MAX));
  EXPECT_EQ(t.stats().unknown_communicator_calls, 1u);
  t.Tick(2 * kS);
  std::vector<NcclHang> found = t.TakeFound();
  ASSERT_EQ(found.size(), 3u);
  for (const NcclHang& h : found) {
    EXPECT_TRUE(h.absent.empty());
  }
  for (const NcclHang& h : found) {
    if (h.api == GF_API_NCCL_SEND) {
      EXPECT_EQ(h.bytes, UINT64_MAX);  // saturated, not wrapped
    }
  }
}

TEST(NcclReportTest, HangLineSaysWhoWaitsForWhom) {
  NcclTracker t(kS);
  TwoRanks(t);
  t.OnCall(P2p(10, 2 * kS, GF_API_NCCL_SEND, 0xa, 1, 1 << 20));
  t.Tick(3 * kS);
  std::vector<NcclHang> found = t.TakeFound();
  ASSERT_EQ(found.size(), 1u);
  StackTable stacks;
  FrameTable frames;
  const std::string line = NcclHangLine(
      found[0], StackSource{stacks, frames}, [](pid_t) { return std::string("stopped"); }, 4 * kS);
  EXPECT_EQ(line,
            "NCCL hang #1: pid 10 rank 0 of 2 stuck for 2.0 s in ncclSend to peer 1 (4.00 MiB, float32 x 1048576) on "
            "communicator 0xa (id 0000000000002222); waiting for rank 1 (pid 20, stopped): it has not entered the "
            "matching ncclRecv (the 1st from rank 0)");
  const std::string json = NcclJson(t, StackSource{stacks, frames}, {}, 0);
  EXPECT_NE(json.find("\"operation\": \"ncclSend\", \"rank\": 0, \"nranks\": 2, \"peer\": 1"), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"waiting_for\": [{\"rank\": 1, \"pid\": 20, \"matching_calls_entered\": 0}]"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"communicator_id\": \"00000000000022220000000000001111\""), std::string::npos) << json;
}

NcclSyncCall Sync(pid_t pid, uint64_t ts, uint16_t api, uint64_t object) {
  NcclSyncCall c;
  c.pid = pid;
  c.tid = static_cast<uint32_t>(pid) + 1;  // another thread than the NCCL calls'
  c.ts_ns = ts;
  c.api = api;
  c.object = object;
  c.stack = 99;
  return c;
}

// On a GPU the send returns once enqueued; rank 0 then waits in
// cudaStreamSynchronize on the send's stream, which never ends while rank 1
// has not posted its receive: a GPU-side hang that blames the send, not the
// all-reduce both ranks entered before it.
TEST(NcclTrackerTest, GpuSideHangBlamesTheFirstUnmatchedCallOnTheStream) {
  NcclTracker t(kS);
  TwoRanks(t);
  NcclCall ar = P2p(10, 2 * kS, GF_API_NCCL_ALL_REDUCE, 0xa, -1, 256);
  ar.stream = 0x5000;
  NcclCall ar1 = ar;
  ar1.pid = 20;
  ar1.tid = 20;
  ar1.comm = 0xb;
  NcclCall send = P2p(10, 2 * kS + 100, GF_API_NCCL_SEND, 0xa, 1, 1 << 20);
  send.stream = 0x5000;
  NcclCall other = P2p(10, 2 * kS + 200, GF_API_NCCL_ALL_REDUCE, 0xa, -1, 256);
  other.stream = 0x6000;  // another stream: not what the wait is for
  for (const NcclCall& c : {ar, ar1, send, other}) {
    t.OnCall(c);
    t.OnReturn(c.pid, c.tid, c.ts_ns + 10, 0, 0);  // enqueued: back at once
  }
  // A synchronise call in a process with no NCCL work is nobody's hang.
  t.OnSyncEnter(Sync(30, 2 * kS, GF_API_CUDA_DEVICE_SYNC, 0));
  t.OnSyncEnter(Sync(10, 3 * kS, GF_API_CUDA_STREAM_SYNC, 0x5000));
  t.Tick(3 * kS + kS / 2);
  EXPECT_TRUE(t.TakeFound().empty());
  t.Tick(4 * kS);
  std::vector<NcclHang> found = t.TakeFound();
  ASSERT_EQ(found.size(), 1u);
  const NcclHang& h = found[0];
  EXPECT_EQ(h.side, NcclHang::Side::kGpu);
  EXPECT_EQ(h.pid, 10);
  EXPECT_EQ(h.tid, 11u);
  EXPECT_EQ(h.sync_api, GF_API_CUDA_STREAM_SYNC);
  EXPECT_EQ(h.sync_stack, 99u);
  EXPECT_EQ(h.api, GF_API_NCCL_SEND);
  EXPECT_EQ(h.stack, send.stack);
  EXPECT_EQ(h.call_ns, send.ts_ns);
  EXPECT_TRUE(h.same_stream);
  EXPECT_EQ(h.unmatched_calls, 1u);
  EXPECT_EQ(h.rank, 0);
  EXPECT_EQ(h.sequence, 1u);
  ASSERT_EQ(h.absent.size(), 1u);
  EXPECT_EQ(h.absent[0].rank, 1);
  EXPECT_EQ(h.absent[0].pid, 20);
  EXPECT_EQ(t.stats().gpu_hangs, 1u);
  EXPECT_EQ(t.stats().sync_entries, 2u);
  StackTable stacks;
  FrameTable frames;
  EXPECT_EQ(NcclHangLine(
                h, StackSource{stacks, frames}, [](pid_t) { return std::string("stopped"); }, 5 * kS),
            "NCCL hang #1 (GPU side): pid 10 rank 0 of 2 stuck for 2.0 s in cudaStreamSynchronize on stream 0x5000 "
            "(thread 11); the first of its NCCL calls on that stream (they return once enqueued) that a rank has not "
            "matched: ncclSend to peer 1 (4.00 MiB, float32 x 1048576) on communicator 0xa (id 0000000000002222), "
            "1.0 s before the wait; waiting for rank 1 (pid 20, stopped): it has not entered the matching ncclRecv "
            "(the 1st from rank 0)");
  // Rank 1 posts its receive: the stream runs on, the wait returns.
  t.OnSyncReturn(10, 11, 6 * kS, 0);
  t.OnSyncReturn(30, 31, 6 * kS, 0);  // never a hang: nothing said
  std::vector<NcclHang> ended = t.TakeEnded();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(NcclHangEndLine(ended[0]),
            "NCCL hang #1 over: cudaStreamSynchronize (GPU side, after ncclSend to peer 1) of pid 10 (rank 0 of 2) "
            "lasted 3.0 s, returned cudaSuccess");
  const std::string json = NcclJson(t, StackSource{stacks, frames}, {}, 0);
  EXPECT_NE(json.find("{\"number\": 1, \"side\": \"gpu\", \"pid\": 10, \"tid\": 11, "), std::string::npos) << json;
  EXPECT_NE(json.find("\"sync\": {\"operation\": \"cudaStreamSynchronize\", \"tid\": 11, \"waits_on\": \"stream "
                      "0x5000\", \"stack\": null}, \"call_tid\": 10, \"call_started_seconds\": 2.000, "
                      "\"same_stream\": true, \"unmatched_calls\": 1"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"outcome\": \"returned\", \"lasted_seconds\": 3.000, \"result\": \"cudaSuccess\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"gpu_hangs\": 1"), std::string::npos) << json;
}

// A device-wide wait after calls every rank has matched: still said (the
// wait is long), but blaming no peer; a kernel may be what runs long.
TEST(NcclTrackerTest, GpuSideHangWithEveryCallMatchedBlamesNoPeer) {
  NcclTracker t(kS);
  TwoRanks(t);
  for (pid_t pid : {10, 20}) {
    NcclCall ar = P2p(pid, 2 * kS, GF_API_NCCL_ALL_REDUCE, pid == 10 ? 0xa : 0xb, -1, 256);
    t.OnCall(ar);
    t.OnReturn(pid, ar.tid, 2 * kS + 10, 0, 0);
  }
  t.OnSyncEnter(Sync(10, 3 * kS, GF_API_CUDA_DEVICE_SYNC, 0));
  t.Tick(5 * kS);
  std::vector<NcclHang> found = t.TakeFound();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_TRUE(found[0].absent.empty());
  EXPECT_EQ(found[0].api, GF_API_NCCL_ALL_REDUCE);
  StackTable stacks;
  FrameTable frames;
  EXPECT_EQ(NcclHangLine(found[0], StackSource{stacks, frames}, nullptr, 5 * kS),
            "NCCL hang #1 (GPU side): pid 10 rank 0 of 2 stuck for 2.0 s in cudaDeviceSynchronize (thread 11); every "
            "rank seen has entered the matching call of each of its recent NCCL calls on any stream (they return "
            "once enqueued), the last: ncclAllReduce (1.00 KiB, float32 x 256) on communicator 0xa (id "
            "0000000000002222), 1.0 s before the wait: the wait may be the GPU's own work, not a peer");
  // Its process is killed: the hang ends with it.
  t.OnProcessExit(10, 7 * kS);
  std::vector<NcclHang> ended = t.TakeEnded();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(NcclHangEndLine(ended[0]),
            "NCCL hang #1 over: cudaDeviceSynchronize (GPU side, after ncclAllReduce) of pid 10 (rank 0 of 2) ended "
            "with its process after 4.0 s");
}

// A thread ended inside its calls while the process lives on (BPF's
// GF_EV_THREAD_ENDED): they end there, said so; nothing stays stuck.
TEST(NcclTrackerTest, ThreadEndedInsideItsCallsEndsThem) {
  NcclTracker t(kS);
  TwoRanks(t);
  NcclCall send = P2p(10, 2 * kS, GF_API_NCCL_SEND, 0xa, 1, 1 << 20);
  send.tid = 12;
  t.OnCall(send);
  t.OnSyncEnter(Sync(10, 2 * kS, GF_API_CU_STREAM_SYNC, 0x5000));
  t.Tick(4 * kS);
  ASSERT_EQ(t.TakeFound().size(), 2u);
  t.OnThreadEnded(10, 12, 5 * kS, GF_ENDED_NCCL_CALL);
  t.OnThreadEnded(10, 11, 6 * kS, GF_ENDED_SYNC_CALL);
  t.OnThreadEnded(10, 13, 6 * kS, GF_ENDED_NCCL_CALL | GF_ENDED_SYNC_CALL);  // in no call we knew of
  std::vector<NcclHang> ended = t.TakeEnded();
  ASSERT_EQ(ended.size(), 2u);
  EXPECT_EQ(ended[0].outcome, NcclHang::Outcome::kThreadEnded);
  EXPECT_EQ(NcclHangEndLine(ended[0]),
            "NCCL hang #1 over: ncclSend to peer 1 of pid 10 (rank 0 of 2) ended with its thread 12 after 3.0 s; the "
            "process lives on");
  EXPECT_EQ(NcclHangEndLine(ended[1]),
            "NCCL hang #2 over: cuStreamSynchronize (GPU side, after ncclSend to peer 1) of pid 10 (rank 0 of 2) "
            "ended with its thread 11 after 4.0 s; the process lives on");
  EXPECT_EQ(t.stats().ended_with_thread, 2u);
  // The send was charged up to its thread's end.
  EXPECT_EQ(t.by_api()[GF_API_NCCL_SEND - GF_API_NCCL_ALL_REDUCE].nanos, 3 * kS);
  t.Finish(7 * kS);
  EXPECT_EQ(t.stats().unfinished, 0u);
}

// The agent forgets each hang once said over, so it keeps saying new ones
// past kMaxHangs for as long as it runs; record keeps every one up to the
// bound and counts the rest.
TEST(NcclTrackerTest, AgentKeepsSayingHangsPastTheBound) {
  NcclTracker agent(kS);
  agent.ForgetEndedHangs();
  NcclTracker record(kS);
  const uint64_t n = NcclTracker::kMaxHangs + 100;
  for (NcclTracker* t : {&agent, &record}) {
    TwoRanks(*t);
    for (uint64_t i = 0; i < n; i++) {
      const uint64_t at = (i + 2) * 10 * kS;
      t->OnCall(P2p(10, at, GF_API_NCCL_SEND, 0xa, 1, 1));
      t->Tick(at + 2 * kS);
      std::vector<NcclHang> found = t->TakeFound();
      t->OnReturn(10, 10, at + 3 * kS, 0, 0);
      std::vector<NcclHang> ended = t->TakeEnded();
      if (t == &agent || i < NcclTracker::kMaxHangs) {
        ASSERT_EQ(found.size(), 1u) << i;
        EXPECT_EQ(found[0].number, i + 1);
        ASSERT_EQ(ended.size(), 1u) << i;
        EXPECT_EQ(ended[0].number, i + 1);
      } else {
        EXPECT_TRUE(found.empty()) << i;
        EXPECT_TRUE(ended.empty()) << i;
      }
    }
    EXPECT_EQ(t->stats().hangs, n);
  }
  EXPECT_TRUE(agent.hangs().empty());
  EXPECT_EQ(agent.stats().hangs_not_kept, 0u);
  EXPECT_EQ(record.hangs().size(), NcclTracker::kMaxHangs);
  EXPECT_EQ(record.stats().hangs_not_kept, 100u);
  EXPECT_EQ(record.hangs().rbegin()->first, NcclTracker::kMaxHangs);
}

}  // namespace
}  // namespace gpuflame::profiler
