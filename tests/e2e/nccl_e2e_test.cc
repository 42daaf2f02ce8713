// NCCL calls and hangs end to end (issue 17): `gpuflame record` with real
// BPF probes on the simulated libnccl.so.2 (a test fixture: neither NCCL
// nor a GPU; tests/fixtures/cuda_sim/README.md) and real CPython. Two ranks
// (tests/workloads/nccl_ranks.py, separate processes) call it from class
// methods; the launcher stops rank 1 with SIGSTOP for 3 s before one of its
// calls, so rank 0 sits in the matching call: the hang is said on the
// terminal while stuck (who, what, how many bytes, from which stack, and
// which rank it waits for) and when over, and written in summary.json; the
// nccl profile has every call by stack.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "bpf/gpuflame_abi.h"
#include "e2e/e2e_support.h"
#include "exporters/pprof/gzip.h"
#include "tests/support/trace_schema.h"

namespace gpuflame::e2e {
namespace {

constexpr int64_t MiB = 1 << 20;
constexpr double kStopSeconds = 3.0;
const std::string kStepFrames = "run_rank;Trainer > step;";

struct Recorded {
  RunResult run;
  std::string out;
  nlohmann::json summary;
  nlohmann::json nccl;
  pprof::Profile profile;  // nccl.pb.gz
  std::string id_hex;      // the workload's ncclUniqueId, as it printed it
  int rank_pid[2] = {0, 0};
};

// The communicator ID's hash as gpuflame computes it in BPF
// (GF_NCCL_ID_HASH in bpf/gpuflame_abi.h), from the bytes the workload printed.
std::string IdHash(const std::string& hex) {
  if (hex.size() != 2 * GF_NCCL_UNIQUE_ID_BYTES) return "";
  uint64_t lo = GF_NCCL_FNV_BASIS, hi = GF_NCCL_FNV_BASIS ^ GF_NCCL_ID_HASH_HI_SEED;
  for (int w = 0; w < GF_NCCL_UNIQUE_ID_BYTES / 8; w++) {
    uint64_t word = 0;
    for (int b = 7; b >= 0; b--) word = (word << 8) | std::stoul(hex.substr(2 * (8 * w + b), 2), nullptr, 16);
    lo = (lo ^ word) * GF_NCCL_FNV_PRIME;
    hi = (hi ^ word) * GF_NCCL_FNV_PRIME;
  }
  char out[33];
  std::snprintf(out, sizeof(out), "%016llx%016llx", static_cast<unsigned long long>(hi),
                static_cast<unsigned long long>(lo));
  return out;
}

Recorded RecordRanks(const std::string& mode, const std::string& flags = "", double stop_s = kStopSeconds,
                     const std::string& env = "") {
  Recorded r;
  r.out = TempDir("nccl-" + mode);
  const std::string shared = TempDir("nccl-shared-" + mode);
  r.run = Sh(SimEnv() + " " + env + " GF_SIM_NCCL_DIR=" + shared + " GF_SIM_NCCL_TIMEOUT_S=60 " + GPUFLAME_BIN +
             " record -o " + r.out + " --no-progress --nccl-hang-s 1 " + flags + " -- " + PyenvPython("3.12") + " " +
             Workload("nccl_ranks.py") + " " + mode + " " + std::to_string(stop_s) + " 2>&1");
  std::smatch m;
  if (std::regex_search(r.run.output, m, std::regex("unique id ([0-9a-f]+)"))) r.id_hex = m[1];
  for (int rank : {0, 1})
    if (std::regex_search(r.run.output, m, std::regex("rank " + std::to_string(rank) + " pid ([0-9]+)")))
      r.rank_pid[rank] = std::stoi(m[1]);
  r.summary = nlohmann::json::parse(ReadFile(r.out + "/summary.json"), nullptr, /*allow_exceptions=*/false);
  if (r.summary.is_object()) r.nccl = r.summary["nccl"];
  LoadPprof(r.out + "/nccl.pb.gz", &r.profile);
  return r;
}

// What every run has: the calls by operation, to the call and the byte; the
// communicator joined across both processes by its unique ID; every call's
// stack in the nccl profile; the BPF side's counts.
void ExpectEveryCall(const Recorded& r) {
  ASSERT_EQ(r.run.status, 0) << r.run.output;
  ASSERT_TRUE(r.nccl.is_object()) << ReadFile(r.out + "/summary.json");
  ASSERT_NE(r.rank_pid[0], 0) << r.run.output;
  ASSERT_NE(r.rank_pid[1], 0) << r.run.output;
  EXPECT_EQ(r.nccl["profile"], "nccl.pb.gz");
  EXPECT_EQ(r.nccl["hang_threshold_seconds"], 1.0);
  EXPECT_EQ(r.nccl["calls"], 23);  // 1 unique ID, 2 x (init, 3 x 3 calls, destroy)
  EXPECT_EQ(r.nccl["returns"], 23);
  EXPECT_EQ(r.nccl["returns_without_call"], 0);
  EXPECT_EQ(r.nccl["failed_calls"], 0);
  EXPECT_EQ(r.nccl["calls_on_unknown_communicators"], 0);
  EXPECT_EQ(r.summary["bpf"]["nccl_calls"], 23);
  EXPECT_EQ(r.summary["bpf"]["nccl_nested_calls"], 0);
  EXPECT_EQ(r.summary["bpf"]["nccl_unique_ids_unreadable"], 0);
  std::map<std::string, std::pair<int64_t, int64_t>> ops;  // calls, bytes
  for (const auto& o : r.nccl["by_operation"]) ops[o["operation"]] = {o["calls"], o["bytes"]};
  EXPECT_EQ(ops, (std::map<std::string, std::pair<int64_t, int64_t>>{
                     {"ncclAllReduce", {6, 6 * MiB}},         // 1 MiB of float32 per rank and step
                     {"ncclBroadcast", {6, 6 * 256 * 1024}},  // 256 KiB
                     {"ncclSend", {3, 12 * MiB}},             // 4 MiB, rank 0
                     {"ncclRecv", {3, 12 * MiB}},             // rank 1
                     {"ncclCommInitRank", {2, 0}},
                     {"ncclCommDestroy", {2, 0}},
                     {"ncclGetUniqueId", {1, 0}}}))
      << r.nccl["by_operation"].dump(2);
  ASSERT_EQ(r.nccl["communicators"].size(), 1u) << r.nccl.dump(2);
  const nlohmann::json& c = r.nccl["communicators"][0];
  EXPECT_EQ(c["id"], IdHash(r.id_hex)) << r.id_hex;
  EXPECT_EQ(c["nranks"], 2);
  ASSERT_EQ(c["ranks"].size(), 2u);
  for (int rank : {0, 1}) {
    const nlohmann::json& k = c["ranks"][rank];
    EXPECT_EQ(k["rank"], rank);
    EXPECT_EQ(k["pid"], r.rank_pid[rank]);
    EXPECT_EQ(k["initialized"], true);
    EXPECT_EQ(k["collectives"], 6);
    EXPECT_EQ(k["sends"], rank == 0 ? 3 : 0);
    EXPECT_EQ(k["recvs"], rank == 0 ? 0 : 3);
  }
  // The profile: each call under its Python stack, the API as the leaf.
  auto calls = Stacks(r.profile, "calls", true, /*drop_native=*/true);
  auto ending = [&](const std::string& tail) {
    int64_t sum = 0;
    for (const auto& [stack, n] : calls)
      if (stack.size() >= tail.size() && stack.compare(stack.size() - tail.size(), tail.size(), tail) == 0) sum += n;
    return sum;
  };
  EXPECT_EQ(ending(kStepFrames + "Comm > all_reduce;ncclAllReduce"), 6) << Dump(calls);
  EXPECT_EQ(ending(kStepFrames + "Comm > broadcast;ncclBroadcast"), 6) << Dump(calls);
  EXPECT_EQ(ending(kStepFrames + "Comm > exchange;Comm > send;ncclSend"), 3) << Dump(calls);
  EXPECT_EQ(ending(kStepFrames + "Comm > exchange;Comm > recv;ncclRecv"), 3) << Dump(calls);
  EXPECT_EQ(ending("Comm > __init__;ncclCommInitRank"), 2) << Dump(calls);
  EXPECT_EQ(ending("launch;ncclGetUniqueId"), 1) << Dump(calls);
  EXPECT_EQ(Total(r.profile, "bytes"), 6 * MiB + 6 * 256 * 1024 + 24 * MiB);
}

// The one hang: |operation| of rank 0, stuck for about kStopSeconds, waiting
// for rank 1 (stopped) that had entered |entered| matching calls.
const nlohmann::json& ExpectOneHang(const Recorded& r, const std::string& operation, int64_t bytes, int64_t sequence,
                                    int64_t entered, const std::string& stack_tail) {
  static const nlohmann::json kNone;
  EXPECT_EQ(r.nccl["hangs"].size(), 1u) << r.nccl.dump(2);
  if (r.nccl["hangs"].size() != 1) return kNone;
  const nlohmann::json& h = r.nccl["hangs"][0];
  EXPECT_EQ(h["number"], 1);
  EXPECT_EQ(h["pid"], r.rank_pid[0]);
  EXPECT_EQ(h["operation"], operation);
  EXPECT_EQ(h["rank"], 0);
  EXPECT_EQ(h["nranks"], 2);
  EXPECT_EQ(h["bytes"], bytes);
  EXPECT_EQ(h["datatype"], "float32");
  EXPECT_EQ(h["communicator_id"], IdHash(r.id_hex));
  EXPECT_EQ(h["sequence"], sequence);
  EXPECT_EQ(h["waiting_for"], nlohmann::json::parse("[{\"rank\": 1, \"pid\": " + std::to_string(r.rank_pid[1]) +
                                                    ", \"matching_calls_entered\": " + std::to_string(entered) + "}]"));
  const std::string stack = h["stack"].is_string() ? h["stack"].get<std::string>() : "";
  EXPECT_TRUE(stack.ends_with(stack_tail)) << stack;
  EXPECT_EQ(h["outcome"], "returned");
  EXPECT_EQ(h["result"], "ncclSuccess");
  // Found 1 s after the call, over when rank 1 went on: about the stop.
  const double found = h["found_seconds"].get<double>() - h["started_seconds"].get<double>();
  EXPECT_GE(found, 1.0);
  EXPECT_LT(found, 2.0);
  EXPECT_GE(h["lasted_seconds"].get<double>(), kStopSeconds - 0.5);
  EXPECT_LT(h["lasted_seconds"].get<double>(), kStopSeconds + 5);
  return h;
}

TEST(NcclTest, StuckSendIsSaidWhileStuckAndWhenOver) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const Recorded r = RecordRanks("send");
  ExpectEveryCall(r);
  const nlohmann::json& h =
      ExpectOneHang(r, "ncclSend", 4 * MiB, 3, 2, kStepFrames + "Comm > exchange;Comm > send;ncclSend");
  if (!h.is_object()) return;
  EXPECT_EQ(h["peer"], 1);
  EXPECT_EQ(h["count"], MiB);
  // ncclSend's 6th argument (r9): rank 0's stream, a fixed handle of the workload.
  EXPECT_EQ(h["stream"], "0x5000");
  EXPECT_EQ(h["reduction"], nullptr);
  // On the terminal while stuck, every field; then its end.
  const std::string comm = h["communicator"];
  const std::string live = "gpuflame: warning: NCCL hang #1: pid " + std::to_string(r.rank_pid[0]) +
                           " rank 0 of 2 stuck for 1\\.[0-9] s in ncclSend to peer 1 \\(4\\.00 MiB, float32 x "
                           "1048576\\) on communicator " +
                           comm + " \\(id " + IdHash(r.id_hex).substr(0, 16) +
                           "\\), called from … › run_rank › Trainer > step › Comm > exchange › Comm > send; "
                           "waiting for rank 1 \\(pid " +
                           std::to_string(r.rank_pid[1]) +
                           ", stopped\\): it has not entered the matching ncclRecv \\(the 3rd from rank 0\\)\n";
  EXPECT_TRUE(std::regex_search(r.run.output, std::regex(live))) << live << "\n" << r.run.output;
  const std::string over = "gpuflame: NCCL hang #1 over: ncclSend to peer 1 of pid " + std::to_string(r.rank_pid[0]) +
                           " \\(rank 0 of 2\\) lasted [0-9.]+ s, returned ncclSuccess\n";
  EXPECT_TRUE(std::regex_search(r.run.output, std::regex(over))) << r.run.output;
  // And at the head of the HTML page.
  EXPECT_NE(ReadFile(r.out + "/flamegraph.html")
                .find("NCCL hang #1 over: ncclSend to peer 1 of pid " + std::to_string(r.rank_pid[0]) +
                      " (rank 0 of 2) lasted "),
            std::string::npos);
  // Said live: before rank 1 went on (its recv returned after the stop).
  EXPECT_LT(r.run.output.find("NCCL hang #1:"), r.run.output.find("rank 1 done")) << r.run.output;
  // The profile has the send's time, the stop included.
  auto time = Stacks(r.profile, "time", true, true);
  int64_t send_ns = 0;
  for (const auto& [stack, ns] : time)
    if (stack.ends_with("Comm > send;ncclSend")) send_ns += ns;
  EXPECT_GE(send_ns, static_cast<int64_t>((kStopSeconds - 0.5) * 1e9)) << Dump(time);
}

TEST(NcclTest, StuckBroadcastNamesTheRankBehind) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const Recorded r = RecordRanks("broadcast");
  ExpectEveryCall(r);
  // Rank 0's 6th collective (3 steps of all-reduce + broadcast); rank 1 had entered 5.
  const nlohmann::json& h =
      ExpectOneHang(r, "ncclBroadcast", 256 * 1024, 6, 5, kStepFrames + "Comm > broadcast;ncclBroadcast");
  if (!h.is_object()) return;
  EXPECT_EQ(h["root"], 0);
  EXPECT_EQ(h["peer"], nullptr);
  // ncclBroadcast's 7th argument, on the stack above the return address.
  EXPECT_EQ(h["stream"], "0x5000");
  const std::string live =
      "NCCL hang #1: pid " + std::to_string(r.rank_pid[0]) +
      " rank 0 of 2 stuck for 1\\.[0-9] s in ncclBroadcast from root 0 \\(256\\.00 KiB, float32 "
      "x 65536\\).*, called from <module> › run_rank › Trainer > step › Comm > broadcast; waiting for "
      "rank 1 \\(pid " +
      std::to_string(r.rank_pid[1]) +
      ", stopped\\): it has not entered the matching ncclBroadcast \\(collective #6 on the "
      "communicator\\)\n";
  EXPECT_TRUE(std::regex_search(r.run.output, std::regex(live))) << live << "\n" << r.run.output;
}

// A rank that has not joined: rank 0 waits in ncclCommInitRank for rank 1,
// stopped before its init, so no process is known to be rank 1 yet.
TEST(NcclTest, StuckInitNamesTheRankNotJoined) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const Recorded r = RecordRanks("init");
  ExpectEveryCall(r);
  ASSERT_EQ(r.nccl["hangs"].size(), 1u) << r.nccl.dump(2);
  const nlohmann::json& h = r.nccl["hangs"][0];
  EXPECT_EQ(h["pid"], r.rank_pid[0]);
  EXPECT_EQ(h["operation"], "ncclCommInitRank");
  EXPECT_EQ(h["rank"], 0);
  EXPECT_EQ(h["nranks"], 2);
  EXPECT_EQ(h["communicator_id"], IdHash(r.id_hex));
  EXPECT_EQ(h["waiting_for"], nlohmann::json::parse(R"([{"rank": 1, "pid": null, "matching_calls_entered": 0}])"));
  const std::string stack = h["stack"].is_string() ? h["stack"].get<std::string>() : "";
  // Python calls __init__ through C: an interpreter trampoline between them.
  EXPECT_TRUE(stack.ends_with("run_rank;<interpreter trampoline>;Comm > __init__;ncclCommInitRank")) << stack;
  EXPECT_EQ(h["outcome"], "returned");
  EXPECT_GE(h["lasted_seconds"].get<double>(), kStopSeconds - 0.5);
  const std::string live = "NCCL hang #1: pid " + std::to_string(r.rank_pid[0]) +
                           " rank 0 of 2 stuck for 1\\.[0-9] s in ncclCommInitRank \\(id " +
                           IdHash(r.id_hex).substr(0, 16) +
                           "\\), called from .* › run_rank › Comm > __init__; waiting for rank 1 \\(no process "
                           "followed here has joined as that rank: another node, not started, or not in its init "
                           "yet\\): it has not entered ncclCommInitRank\n";
  EXPECT_TRUE(std::regex_search(r.run.output, std::regex(live))) << live << "\n" << r.run.output;
}

// Send and receive both ways in a group (Comm > exchange_grouped): NCCL runs
// them at ncclGroupEnd, where rank 0 waits for the stopped rank 1; the hang
// is that ncclGroupEnd, carrying its group's calls and their bytes.
TEST(NcclTest, StuckGroupEndCarriesItsGroupsCalls) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const Recorded r = RecordRanks("group");
  ASSERT_EQ(r.run.status, 0) << r.run.output;
  ASSERT_TRUE(r.nccl.is_object()) << ReadFile(r.out + "/summary.json");
  // 1 unique ID, 2 x (init, 3 x (all-reduce, broadcast, group start, send, recv, group end), destroy).
  EXPECT_EQ(r.nccl["calls"], 41);
  EXPECT_EQ(r.summary["bpf"]["nccl_calls"], 41);
  std::map<std::string, std::pair<int64_t, int64_t>> ops;
  for (const auto& o : r.nccl["by_operation"]) ops[o["operation"]] = {o["calls"], o["bytes"]};
  EXPECT_EQ(ops["ncclSend"], (std::pair<int64_t, int64_t>{6, 24 * MiB}));
  EXPECT_EQ(ops["ncclRecv"], (std::pair<int64_t, int64_t>{6, 24 * MiB}));
  EXPECT_EQ(ops["ncclGroupStart"], (std::pair<int64_t, int64_t>{6, 0}));
  EXPECT_EQ(ops["ncclGroupEnd"], (std::pair<int64_t, int64_t>{6, 0}));
  ASSERT_EQ(r.nccl["hangs"].size(), 1u) << r.nccl.dump(2);
  const nlohmann::json& h = r.nccl["hangs"][0];
  EXPECT_EQ(h["pid"], r.rank_pid[0]);
  EXPECT_EQ(h["operation"], "ncclGroupEnd");
  EXPECT_EQ(h["grouped"], nlohmann::json::parse(R"(["ncclSend", "ncclRecv"])"));
  EXPECT_EQ(h["rank"], 0);
  EXPECT_EQ(h["nranks"], 2);
  EXPECT_EQ(h["bytes"], 8 * MiB);
  EXPECT_EQ(h["communicator_id"], IdHash(r.id_hex));
  // Rank 1 had entered 2 of each: its sends to rank 0 and receives from it.
  EXPECT_EQ(h["waiting_for"], nlohmann::json::parse("[{\"rank\": 1, \"pid\": " + std::to_string(r.rank_pid[1]) +
                                                    ", \"matching_calls_entered\": 2}]"));
  const std::string stack = h["stack"].is_string() ? h["stack"].get<std::string>() : "";
  EXPECT_TRUE(stack.ends_with(kStepFrames + "Comm > exchange;Comm > exchange_grouped;ncclGroupEnd")) << stack;
  EXPECT_EQ(h["outcome"], "returned");
  EXPECT_GE(h["lasted_seconds"].get<double>(), kStopSeconds - 0.5);
  const std::string live =
      "NCCL hang #1: pid " + std::to_string(r.rank_pid[0]) +
      " rank 0 of 2 stuck for 1\\.[0-9] s in ncclGroupEnd of ncclSend, ncclRecv \\(8\\.00 MiB\\) "
      "on communicator 0x[0-9a-f]+ \\(id " +
      IdHash(r.id_hex).substr(0, 16) +
      "\\), called from … › run_rank › Trainer > step › Comm > exchange › Comm > exchange_grouped; waiting "
      "for rank 1 \\(pid " +
      std::to_string(r.rank_pid[1]) + ", stopped\\): it has not entered the matching calls\n";
  EXPECT_TRUE(std::regex_search(r.run.output, std::regex(live))) << live << "\n" << r.run.output;
}

// A process found running in a tight loop of NCCL and synchronise calls
// (an agent's visit to a training job): every call gpuflame sees entering,
// it sees return, and none is folded into another. With the entry probes
// attached before the return probes, a call that entered between the two
// never returned for gpuflame: every later call of its thread was folded
// into it (BPF's nesting), and it became a hang (on an H100, the agent on
// one rank of torch.distributed found running: one call seen in 15 s, and a
// hang in ncclGroupStart).
TEST(NcclTest, AProcessFoundMidLoopHasEachCallItSeesReturn) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const std::string dir = TempDir("nccl-loop");
  const std::string pidfile = dir + "/pid";
  Sh(SimEnv() + " timeout 60 " + PyenvPython("3.12") + " " + Workload("nccl_ranks.py") + " loop 60 " + pidfile + " > " +
     dir + "/workload.out 2>&1 &");
  for (int i = 0; i < 3000 && !std::filesystem::exists(pidfile); i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::filesystem::exists(pidfile)) << ReadFile(dir + "/workload.out");
  const pid_t pid = std::stoi(ReadFile(pidfile));
  // Several attaches, each a chance for a call to enter between two links.
  for (int round = 0; round < 3; round++) {
    const std::string out = dir + "/out" + std::to_string(round);
    RunResult r = Sh(std::string(GPUFLAME_BIN) + " record -q -d 1.5 --nccl-hang-s 1 -o " + out + " --pid " +
                     std::to_string(pid) + " 2>&1");
    ASSERT_EQ(r.status, 0) << r.output;
    const nlohmann::json summary = nlohmann::json::parse(ReadFile(out + "/summary.json"), nullptr, false);
    ASSERT_TRUE(summary.is_object()) << r.output;
    const nlohmann::json& n = summary["nccl"];
    EXPECT_EQ(summary["bpf"]["nccl_nested_calls"], 0) << n;
    // The runtime's synchronise calls the driver's: one nested in each.
    const nlohmann::json& bpf = summary["bpf"];
    EXPECT_GT(bpf["cuda_sync_calls"].get<int64_t>(), 1000) << bpf;
    EXPECT_LE(bpf["cuda_sync_nested_calls"].get<int64_t>(), bpf["cuda_sync_calls"].get<int64_t>() + 1) << bpf;
    EXPECT_GT(n["calls"].get<int64_t>(), 1000) << n;
    EXPECT_EQ(n["calls_without_return"], 0) << n;
    EXPECT_EQ(n["hangs"].size(), 0u) << n;
    // Those in flight when the return probes went in return without an
    // entry (BPF drops them: bpf.return_without_entry); the one in flight
    // at the end has no return.
    EXPECT_GE(n["returns"].get<int64_t>(), n["calls"].get<int64_t>() - 1) << n;
  }
  kill(pid, SIGKILL);
}

// NCCL's kernels' GPU time, back to the call that launched them. The
// simulated NCCL launches one kernel per call, named as NCCL's, through the
// simulated driver, 256 us per MiB the call names; the simulated CUPTI
// reports it with the launch's correlation ID. The launch sampler gets a
// budget of one stack (GPUFLAME_LAUNCH_STACKS_PER_S=0.001): every NCCL
// launch must be taken outside it, or the join misses them.
constexpr char kNcclKernels[] = "GF_SIM_NCCL_KERNEL_US_PER_MIB=256 GPUFLAME_LAUNCH_STACKS_PER_S=0.001";

// Per operation: {gpu calls, gpu ns, bytes, bus bandwidth GB/s} from summary.json.
struct GpuOp {
  int64_t calls = 0, nanos = 0, bytes = 0;
  double bandwidth = 0;
  bool operator==(const GpuOp&) const = default;
};
std::map<std::string, GpuOp> GpuByOperation(const Recorded& r) {
  std::map<std::string, GpuOp> out;
  for (const auto& o : r.nccl["by_operation"]) {
    if (o["gpu"].is_null()) continue;
    const nlohmann::json& g = o["gpu"];
    out[o["operation"]] = {g["calls"], std::llround(g["seconds"].get<double>() * 1e9), g["bytes"],
                           g["bus_bandwidth_gb_per_s"].is_null() ? -1 : g["bus_bandwidth_gb_per_s"].get<double>()};
  }
  return out;
}

std::string PrintGpu(const std::map<std::string, GpuOp>& m) {
  std::string out;
  for (const auto& [op, g] : m)
    out += op + ": " + std::to_string(g.calls) + " calls " + std::to_string(g.nanos) + " ns " +
           std::to_string(g.bytes) + " B " + std::to_string(g.bandwidth) + " GB/s\n";
  return out;
}

int64_t GpuTimeEnding(const Recorded& r, const std::string& tail) {
  int64_t sum = 0;
  for (const auto& [stack, n] : Stacks(r.profile, "gpu_time", true, /*drop_native=*/true))
    if (stack.ends_with(tail)) sum += n;
  return sum;
}

TEST(NcclTest, KernelsGpuTimeGoesToTheCallThatLaunchedThem) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  const Recorded r = RecordRanks("none", "", kStopSeconds, kNcclKernels);
  ExpectEveryCall(r);
  // 3 steps x 2 ranks: all-reduce 1 MiB (256 us), broadcast 256 KiB (64 us);
  // 3 sends and 3 receives of 4 MiB (1024 us). Bus bandwidth on GPU time:
  // 1 MiB per 256 us (all-reduce's factor 2(n-1)/n is 1 for 2 ranks).
  EXPECT_EQ(GpuByOperation(r), (std::map<std::string, GpuOp>{{"ncclAllReduce", {6, 6 * 256'000, 6 * MiB, 4.096}},
                                                             {"ncclBroadcast", {6, 6 * 64'000, 6 * MiB / 4, 4.096}},
                                                             {"ncclSend", {3, 3 * 1'024'000, 12 * MiB, 4.096}},
                                                             {"ncclRecv", {3, 3 * 1'024'000, 12 * MiB, 4.096}}}))
      << PrintGpu(GpuByOperation(r));
  const nlohmann::json& g = r.nccl["gpu_time"];
  EXPECT_EQ(g["launches"], 18) << g;
  EXPECT_EQ(g["records"], 18) << g;
  EXPECT_EQ(g["records_not_joined"], 0) << g;
  EXPECT_EQ(g["launches_without_record"], 0) << g;
  EXPECT_EQ(g["launches_in_other_calls"], 0) << g;
  // The nccl profile's gpu_time, on each call's own stack.
  EXPECT_EQ(GpuTimeEnding(r, kStepFrames + "Comm > all_reduce;ncclAllReduce"), 6 * 256'000);
  EXPECT_EQ(GpuTimeEnding(r, kStepFrames + "Comm > broadcast;ncclBroadcast"), 6 * 64'000);
  EXPECT_EQ(GpuTimeEnding(r, kStepFrames + "Comm > exchange;Comm > send;ncclSend"), 3 * 1'024'000);
  EXPECT_EQ(GpuTimeEnding(r, kStepFrames + "Comm > exchange;Comm > recv;ncclRecv"), 3 * 1'024'000);
  EXPECT_EQ(Total(r.profile, "gpu_time"), 6 * 256'000 + 6 * 64'000 + 6 * 1'024'000);
  // gpu_kernel has the kernels too, named as NCCL's, on the same calls
  // (native frames left out: ncclAllReduce is one there).
  pprof::Profile k;
  ASSERT_TRUE(LoadPprof(r.out + "/gpu_kernel.pb.gz", &k)) << r.run.output;
  int64_t all_reduce = 0;
  for (const auto& [stack, ns] : Stacks(k, "time", true, /*drop_native=*/true))
    if (stack.ends_with("Comm > all_reduce;ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"))
      all_reduce += ns;
  EXPECT_EQ(all_reduce, 6 * 256'000) << Dump(Stacks(k, "time", true, true));
  // The terminal's line per operation.
  EXPECT_TRUE(std::regex_search(
      r.run.output, std::regex("ncclAllReduce: 6 calls, [0-9.]+ s, 6\\.00 MiB; GPU 1\\.536 ms in 6 calls, bus "
                               "4\\.10 GB/s\n")))
      << r.run.output;
}

// The same by the launch route (--launch-stacks uprobes, the agent's
// default): its hits join their records a flush after the NCCL call has
// returned, so the call is taken at the hit; and once the library has seen
// an NCCL kernel it hands the launch stacks back to its callbacks, which
// take every NCCL launch while activity is on (the route's windows would
// not). Either way, every kernel goes to its call.
TEST(NcclTest, KernelsGpuTimeGoesToTheCallThatLaunchedThemByTheLaunchRouteToo) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  const Recorded r = RecordRanks("none", "--launch-stacks uprobes", kStopSeconds, kNcclKernels);
  ExpectEveryCall(r);
  EXPECT_GT(r.summary["gpu_kernels"]["launch_route"]["joined"].get<int64_t>(), 0) << r.summary["gpu_kernels"];
  EXPECT_EQ(GpuByOperation(r), (std::map<std::string, GpuOp>{{"ncclAllReduce", {6, 6 * 256'000, 6 * MiB, 4.096}},
                                                             {"ncclBroadcast", {6, 6 * 64'000, 6 * MiB / 4, 4.096}},
                                                             {"ncclSend", {3, 3 * 1'024'000, 12 * MiB, 4.096}},
                                                             {"ncclRecv", {3, 3 * 1'024'000, 12 * MiB, 4.096}}}))
      << PrintGpu(GpuByOperation(r)) << r.run.output;
  const nlohmann::json& g = r.nccl["gpu_time"];
  EXPECT_EQ(g["launches"], 18) << g;
  EXPECT_EQ(g["records_not_joined"], 0) << g;
  EXPECT_EQ(g["launches_without_record"], 0) << g;
  EXPECT_EQ(Total(r.profile, "gpu_time"), 6 * 256'000 + 6 * 64'000 + 6 * 1'024'000);
}

// A group's kernels launch at its ncclGroupEnd: its GPU time goes there,
// with the bytes of the group's calls; its sends and receives get none.
TEST(NcclTest, GroupKernelsGpuTimeGoesToItsGroupEnd) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  const Recorded r = RecordRanks("group", "", kStopSeconds, kNcclKernels);
  ASSERT_EQ(r.run.status, 0) << r.run.output;
  ASSERT_TRUE(r.nccl.is_object()) << ReadFile(r.out + "/summary.json");
  // 6 groups of a 4 MiB send and a 4 MiB receive: 8 MiB, 2048 us each.
  EXPECT_EQ(GpuByOperation(r), (std::map<std::string, GpuOp>{{"ncclAllReduce", {6, 6 * 256'000, 6 * MiB, 4.096}},
                                                             {"ncclBroadcast", {6, 6 * 64'000, 6 * MiB / 4, 4.096}},
                                                             {"ncclGroupEnd", {6, 6 * 2'048'000, 48 * MiB, 4.096}}}))
      << PrintGpu(GpuByOperation(r));
  EXPECT_EQ(GpuTimeEnding(r, kStepFrames + "Comm > exchange;Comm > exchange_grouped;ncclGroupEnd"), 6 * 2'048'000);
  EXPECT_EQ(GpuTimeEnding(r, "ncclSend"), 0);
  EXPECT_EQ(r.nccl["gpu_time"]["records"], 18) << r.nccl["gpu_time"];
  EXPECT_EQ(r.nccl["gpu_time"]["records_not_joined"], 0) << r.nccl["gpu_time"];
}

// The hung job is killed, as its controller or NCCL's watchdog would: rank
// 0 dies inside its ncclSend. The hang ends with its process, said on the
// terminal and in summary.json; the call that never returned is counted
// where the BPF side forgot it at the thread's exit (so that a later thread
// given the same ID is not taken for one nested in a call that never ends).
TEST(NcclTest, KilledRankEndsItsHangWithItsProcess) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const Recorded r = RecordRanks("kill", "--timeline");
  ASSERT_EQ(r.run.status, 0) << r.run.output;
  ASSERT_TRUE(r.nccl.is_object()) << ReadFile(r.out + "/summary.json");
  ASSERT_EQ(r.nccl["hangs"].size(), 1u) << r.nccl.dump(2);
  const nlohmann::json& h = r.nccl["hangs"][0];
  EXPECT_EQ(h["pid"], r.rank_pid[0]);
  EXPECT_EQ(h["operation"], "ncclSend");
  EXPECT_EQ(h["peer"], 1);
  EXPECT_EQ(h["outcome"], "process ended");
  EXPECT_GE(h["lasted_seconds"].get<double>(), kStopSeconds - 0.5);
  EXPECT_EQ(r.summary["bpf"]["threads_ended_inside_calls"], 1) << r.summary["bpf"].dump();
  const std::string over = "NCCL hang #1 over: ncclSend to peer 1 of pid " + std::to_string(r.rank_pid[0]) +
                           " \\(rank 0 of 2\\) ended with its process after [0-9]+\\.[0-9] s\n";
  EXPECT_TRUE(std::regex_search(r.run.output, std::regex(over))) << over << "\n" << r.run.output;

  // On the timeline: each rank's calls as exact spans on its thread's call
  // track; rank 0's last send unfinished, ended with its process.
  auto text = exporters::Gunzip(ReadFile(r.out + "/timeline.json.gz"));
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json doc = nlohmann::json::parse(*text, nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  CheckTraceSchema(doc);
  std::map<std::pair<uint64_t, std::string>, int> calls;  // (pid, name) -> spans
  const TraceSpan* stuck = nullptr;
  const std::vector<TraceSpan> spans = TraceSpans(doc, "nccl");
  for (const TraceSpan& s : spans) {
    calls[{s.pid, s.name}]++;
    if (s.begin["args"].contains("unfinished")) {
      EXPECT_EQ(stuck, nullptr) << "one call without a return: " << s.begin;
      stuck = &s;
    }
  }
  // Each rank: init, 3 all-reduces and broadcasts; rank 0 sends 3 times
  // (the last never returns), rank 1 received twice before it was stopped.
  const uint64_t pid0 = static_cast<uint64_t>(r.rank_pid[0]), pid1 = static_cast<uint64_t>(r.rank_pid[1]);
  for (uint64_t pid : {pid0, pid1}) {
    EXPECT_EQ((calls[{pid, "ncclCommInitRank"}]), 1) << pid;
    EXPECT_EQ((calls[{pid, "ncclAllReduce"}]), 3) << pid;
    EXPECT_EQ((calls[{pid, "ncclBroadcast"}]), 3) << pid;
  }
  EXPECT_EQ((calls[{pid0, "ncclSend"}]), 3);
  EXPECT_EQ((calls[{pid1, "ncclRecv"}]), 2);
  ASSERT_NE(stuck, nullptr);
  EXPECT_EQ(stuck->pid, pid0);
  EXPECT_EQ(stuck->name, "ncclSend");
  EXPECT_EQ(stuck->begin["args"]["peer"], 1);
  EXPECT_EQ(stuck->begin["args"]["bytes"], 4 * MiB);
  EXPECT_EQ(stuck->begin["args"]["datatype"], "float32");
  EXPECT_GE(stuck->dur, (kStopSeconds - 0.5) * 1e6);
  EXPECT_TRUE(stuck->begin["args"]["stack"].get<std::string>().ends_with(kStepFrames +
                                                                         "Comm > exchange;Comm > send;ncclSend"))
      << stuck->begin;
  for (const TraceSpan& s : spans) {
    if (&s != stuck) {
      EXPECT_EQ(s.begin["args"]["result"], "ncclSuccess") << s.begin;
    }
  }
}

// A straggler: rank 1 spends 50 ms of CPU in its data loader before each
// all-reduce, rank 0 none, so rank 0 waits for it every step. The report
// names rank 1, how long the other waited, and what rank 1 ran meanwhile,
// from its CPU samples; rank 0's wait is its own.
TEST(NcclTest, AStragglerIsNamedWithWhatItRanWhileTheOthersWaited) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const Recorded r = RecordRanks("straggler");
  ASSERT_EQ(r.run.status, 0) << r.run.output;
  ASSERT_TRUE(r.nccl.is_object()) << ReadFile(r.out + "/summary.json");
  const nlohmann::json& st = r.nccl["stragglers"];
  ASSERT_EQ(st["communicators"].size(), 1u) << st.dump(2);
  const nlohmann::json& c = st["communicators"][0];
  EXPECT_EQ(c["id"], IdHash(r.id_hex));
  EXPECT_EQ(c["ranks_seen"], 2);
  EXPECT_EQ(c["collectives_judged"], 20) << c.dump(2);  // 10 steps: an all-reduce and a broadcast each
  EXPECT_EQ(c["collectives_unjudged"], 0);
  EXPECT_EQ(c["straggler"], 1) << c.dump(2);
  ASSERT_EQ(c["ranks"].size(), 2u);
  const nlohmann::json& late = c["ranks"][1];
  EXPECT_EQ(late["pid"], r.rank_pid[1]);
  EXPECT_GE(late["entered_last"].get<int>(), 10) << late.dump(2);  // every all-reduce, at least
  // 10 x 50 ms of loader: what rank 0 waited, all of it for rank 1.
  EXPECT_GE(late["others_waited_seconds"].get<double>(), 0.45) << late.dump(2);
  EXPECT_GE(c["ranks"][0]["waited_seconds"].get<double>(), 0.45) << c.dump(2);
  EXPECT_LT(c["ranks"][0]["others_waited_seconds"].get<double>(), late["others_waited_seconds"].get<double>() / 4);
  double loading = 0;
  for (const auto& m : late["meanwhile"])
    if (m["stack"].get<std::string>().find("Trainer > step;<interpreter trampoline>;DataLoader > __next__") !=
        std::string::npos)
      loading += m["share"].get<double>();
  // Of the time it was on a CPU: a loaded machine leaves it runnable but
  // not running for part of the wait (seen: 29% in CI), which the record
  // says apart.
  const double on_cpu = 1 - late["meanwhile_not_on_cpu_share"].get<double>();
  ASSERT_GT(on_cpu, 0.3) << late.dump(2);
  EXPECT_GT(loading / on_cpu, 0.8) << late.dump(2);
  ASSERT_FALSE(late["entered_late_from"].empty());
  EXPECT_TRUE(late["entered_late_from"][0]["stack"].get<std::string>().ends_with(kStepFrames +
                                                                                   "Comm > all_reduce;ncclAllReduce"))
      << late.dump(2);
  const std::string line = "NCCL straggler: rank 1 \\(pid " + std::to_string(r.rank_pid[1]) +
                           "\\) of communicator " + IdHash(r.id_hex).substr(0, 16) +
                           " entered last in [0-9]+ of 20 collectives; the others waited [0-9.]+ s for it; meanwhile it "
                           "was on the CPU in .*DataLoader > __next__ \\([0-9]+%\\)\n";
  EXPECT_TRUE(std::regex_search(r.run.output, std::regex(line))) << line << "\n" << r.run.output;
  // Per step, by collective cadence: each step runs from one all-reduce (the
  // first call site that comes round again) to the next: 10 all-reduces, 9
  // steps. Rank 1 computes 50 ms more in each, so it is the straggler of
  // each (give or take a step on a loaded machine) and rank 0 waits about
  // 50 ms a step; rank 0's compute is what Python takes between the calls.
  const nlohmann::json& steps = r.nccl["steps"];
  ASSERT_TRUE(steps.is_object()) << r.nccl.dump(2);
  ASSERT_EQ(steps["communicators"].size(), 1u) << steps.dump(2);
  const nlohmann::json& sc = steps["communicators"][0];
  EXPECT_EQ(sc["id"], IdHash(r.id_hex));
  ASSERT_TRUE(sc["anchor"].is_string()) << sc.dump(2);
  EXPECT_TRUE(sc["anchor"].get<std::string>().ends_with(kStepFrames + "Comm > all_reduce;ncclAllReduce"))
      << sc["anchor"];
  EXPECT_EQ(sc["steps"], 9) << sc.dump(2);
  ASSERT_EQ(sc["per_step"].size(), 9u) << sc.dump(2);
  ASSERT_EQ(sc["ranks"].size(), 2u) << sc.dump(2);
  const nlohmann::json &s0 = sc["ranks"][0], &s1 = sc["ranks"][1];
  EXPECT_EQ(s0["rank"], 0);
  EXPECT_EQ(s0["pid"], r.rank_pid[0]);
  EXPECT_GE(s1["straggler_steps"].get<int>(), 8) << sc.dump(2);
  EXPECT_EQ(s0["straggler_steps"], 0) << sc.dump(2);
  EXPECT_GE(s0["waiting_seconds"].get<double>(), 0.40) << sc.dump(2);
  EXPECT_LT(s0["waiting_seconds"].get<double>(), 0.70) << sc.dump(2);
  EXPECT_GE(s1["compute_seconds"].get<double>(), 0.40) << sc.dump(2);
  EXPECT_LT(s0["compute_seconds"].get<double>(), s1["compute_seconds"].get<double>() / 2) << sc.dump(2);
  EXPECT_LT(s1["waiting_seconds"].get<double>(), s0["waiting_seconds"].get<double>() / 4) << sc.dump(2);
  const std::string steps_line = "NCCL steps of communicator " + IdHash(r.id_hex).substr(0, 16) +
                                 " \\(by collective cadence, from one .* to the next\\): 9 steps; rank 1 the "
                                 "straggler in [89]; a step, on average: rank 0 compute [0-9.]+ ms, waiting [0-9.]+ "
                                 "ms; rank 1 compute [0-9.]+ ms, waiting [0-9.]+ ms\n";
  EXPECT_TRUE(std::regex_search(r.run.output, std::regex(steps_line))) << steps_line << "\n" << r.run.output;
}

// On a GPU (the simulated libnccl's GPU mode: calls return once enqueued,
// the stream's synchronise call waits for the peers), rank 0's last ncclSend
// returns at once and rank 0 waits in cudaStreamSynchronize on its stream
// while rank 1 is stopped before its receive: a GPU-side hang, said while
// stuck with the synchronise call's stack, the send it waits behind (its
// stack, bytes, communicator) and the rank that has not entered the matching
// receive; and again when over.
TEST(NcclTest, GpuSideHangNamesTheSendBehindTheStuckSynchronize) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const Recorded r = RecordRanks("gpu");
  ExpectEveryCall(r);  // the NCCL calls are the same; none of them is stuck
  const std::string pid0 = std::to_string(r.rank_pid[0]), pid1 = std::to_string(r.rank_pid[1]);
  // Each rank synchronises once a step, every time after its first collective.
  EXPECT_EQ(r.summary["bpf"]["cuda_sync_entries_sent"], 6) << r.summary["bpf"].dump();
  EXPECT_EQ(r.nccl["synchronise_calls_entered"], 6);
  EXPECT_EQ(r.nccl["gpu_hangs"], 1);
  ASSERT_EQ(r.nccl["hangs"].size(), 1u) << r.nccl.dump(2);
  const nlohmann::json& h = r.nccl["hangs"][0];
  EXPECT_EQ(h["number"], 1);
  EXPECT_EQ(h["side"], "gpu");
  EXPECT_EQ(h["pid"], r.rank_pid[0]);
  EXPECT_EQ(h["tid"], r.rank_pid[0]);  // the main thread waits
  EXPECT_EQ(h["call_tid"], r.rank_pid[0]);
  EXPECT_EQ(h["operation"], "ncclSend");
  EXPECT_EQ(h["rank"], 0);
  EXPECT_EQ(h["nranks"], 2);
  EXPECT_EQ(h["peer"], 1);
  EXPECT_EQ(h["bytes"], 4 * MiB);
  EXPECT_EQ(h["count"], MiB);
  EXPECT_EQ(h["datatype"], "float32");
  EXPECT_EQ(h["stream"], "0x5000");
  EXPECT_EQ(h["communicator_id"], IdHash(r.id_hex));
  EXPECT_EQ(h["sequence"], 3);
  EXPECT_EQ(h["same_stream"], true);
  EXPECT_EQ(h["unmatched_calls"], 1);
  EXPECT_EQ(h["waiting_for"],
            nlohmann::json::parse("[{\"rank\": 1, \"pid\": " + pid1 + ", \"matching_calls_entered\": 2}]"));
  const std::string stack = h["stack"].is_string() ? h["stack"].get<std::string>() : "";
  EXPECT_TRUE(stack.ends_with(kStepFrames + "Comm > exchange;Comm > send;ncclSend")) << stack;
  EXPECT_EQ(h["sync"]["operation"], "cudaStreamSynchronize");
  EXPECT_EQ(h["sync"]["tid"], r.rank_pid[0]);
  EXPECT_EQ(h["sync"]["waits_on"], "stream 0x5000");
  const std::string sync_stack = h["sync"]["stack"].is_string() ? h["sync"]["stack"].get<std::string>() : "";
  EXPECT_TRUE(sync_stack.ends_with(kStepFrames + "Comm > synchronize;cudaStreamSynchronize")) << sync_stack;
  EXPECT_EQ(h["outcome"], "returned");
  EXPECT_EQ(h["result"], "cudaSuccess");
  // The send returned at once; the wait began right after it.
  EXPECT_GE(h["started_seconds"].get<double>(), h["call_started_seconds"].get<double>());
  EXPECT_LT(h["started_seconds"].get<double>() - h["call_started_seconds"].get<double>(), 1.0);
  const double found = h["found_seconds"].get<double>() - h["started_seconds"].get<double>();
  EXPECT_GE(found, 1.0);
  EXPECT_LT(found, 2.0);
  EXPECT_GE(h["lasted_seconds"].get<double>(), kStopSeconds - 0.5);
  EXPECT_LT(h["lasted_seconds"].get<double>(), kStopSeconds + 5);
  // The send's time in the nccl profile is the enqueue's, not the stop.
  auto time = Stacks(r.profile, "time", true, true);
  for (const auto& [st, ns] : time)
    if (st.ends_with("Comm > send;ncclSend")) {
      EXPECT_LT(ns, 1'000'000'000) << st;
    }
  const std::string live =
      "gpuflame: warning: NCCL hang #1 \\(GPU side\\): pid " + pid0 +
      " rank 0 of 2 stuck for 1\\.[0-9] s in cudaStreamSynchronize on stream 0x5000, called from <module> › "
      "run_rank › Trainer > step › Comm > synchronize; the first of its NCCL calls on that stream \\(they return "
      "once enqueued\\) that a rank has not matched: ncclSend to peer 1 \\(4\\.00 MiB, float32 x 1048576\\) on "
      "communicator " +
      h["communicator"].get<std::string>() + " \\(id " + IdHash(r.id_hex).substr(0, 16) +
      "\\), called from … › run_rank › Trainer > step › Comm > exchange › Comm > send, 0\\.[0-9] s before the "
      "wait; waiting for rank 1 \\(pid " +
      pid1 + ", stopped\\): it has not entered the matching ncclRecv \\(the 3rd from rank 0\\)\n";
  EXPECT_TRUE(std::regex_search(r.run.output, std::regex(live))) << live << "\n" << r.run.output;
  const std::string over =
      "gpuflame: NCCL hang #1 over: cudaStreamSynchronize \\(GPU side, after ncclSend to peer "
      "1\\) of pid " +
      pid0 + " \\(rank 0 of 2\\) lasted [0-9.]+ s, returned cudaSuccess\n";
  EXPECT_TRUE(std::regex_search(r.run.output, std::regex(over))) << over << "\n" << r.run.output;
  EXPECT_LT(r.run.output.find("NCCL hang #1 (GPU side):"), r.run.output.find("rank 1 done")) << r.run.output;
  EXPECT_NE(ReadFile(r.out + "/flamegraph.html")
                .find("NCCL hang #1 over: cudaStreamSynchronize (GPU side, after ncclSend to peer 1) of pid " + pid0 +
                      " (rank 0 of 2) lasted "),
            std::string::npos);
}

// A thread of rank 0 that ends inside its ncclSend (the simulated NCCL ends
// it with pthread_exit 2 s into the wait) while the process lives on: the
// hang ends there, said "ended with its thread", not left stuck until the
// process ends; its span on the timeline ends there, unfinished.
TEST(NcclTest, ThreadEndedInsideItsCallEndsItsHang) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const Recorded r = RecordRanks("thread", "--timeline", 4.0);
  ASSERT_EQ(r.run.status, 0) << r.run.output;
  ASSERT_TRUE(r.nccl.is_object()) << ReadFile(r.out + "/summary.json");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.run.output, m, std::regex("rank 0 thread ([0-9]+) ended inside ncclSend")))
      << r.run.output;
  const int tid = std::stoi(m[1]);
  const std::string pid0 = std::to_string(r.rank_pid[0]);
  EXPECT_EQ(r.nccl["calls"], 23);
  EXPECT_EQ(r.nccl["returns"], 22);  // the send whose thread ended never returned
  EXPECT_EQ(r.nccl["calls_ended_with_thread"], 1);
  EXPECT_EQ(r.nccl["unfinished_calls"], 0);
  EXPECT_EQ(r.summary["bpf"]["threads_ended_inside_calls"], 1) << r.summary["bpf"].dump();
  EXPECT_EQ(r.summary["bpf"]["thread_ended_records"], 1) << r.summary["bpf"].dump();
  ASSERT_EQ(r.nccl["hangs"].size(), 1u) << r.nccl.dump(2);
  const nlohmann::json& h = r.nccl["hangs"][0];
  EXPECT_EQ(h["side"], "call");
  EXPECT_EQ(h["pid"], r.rank_pid[0]);
  EXPECT_EQ(h["tid"], tid);
  EXPECT_EQ(h["operation"], "ncclSend");
  EXPECT_EQ(h["peer"], 1);
  EXPECT_EQ(h["waiting_for"], nlohmann::json::parse("[{\"rank\": 1, \"pid\": " + std::to_string(r.rank_pid[1]) +
                                                    ", \"matching_calls_entered\": 2}]"));
  const std::string stack = h["stack"].is_string() ? h["stack"].get<std::string>() : "";
  EXPECT_TRUE(stack.ends_with("Comm > send;ncclSend")) << stack;
  EXPECT_EQ(h["outcome"], "thread ended");
  EXPECT_EQ(h["result"], nullptr);
  EXPECT_GE(h["lasted_seconds"].get<double>(), 1.9);
  EXPECT_LT(h["lasted_seconds"].get<double>(), 3.0);
  const std::string over = "gpuflame: NCCL hang #1 over: ncclSend to peer 1 of pid " + pid0 +
                           " \\(rank 0 of 2\\) ended with its thread " + std::to_string(tid) +
                           " after 2\\.[0-9] s; the process lives on\n";
  EXPECT_TRUE(std::regex_search(r.run.output, std::regex(over))) << over << "\n" << r.run.output;
  // Said when the thread ended, before rank 1 went on.
  EXPECT_LT(r.run.output.find("NCCL hang #1 over:"), r.run.output.find("rank 1 done")) << r.run.output;

  auto text = exporters::Gunzip(ReadFile(r.out + "/timeline.json.gz"));
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json doc = nlohmann::json::parse(*text, nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  CheckTraceSchema(doc);
  int unfinished = 0, sends = 0;
  for (const TraceSpan& s : TraceSpans(doc, "nccl")) {
    if (s.pid == static_cast<uint64_t>(r.rank_pid[0]) && s.name == "ncclSend") sends++;
    if (!s.begin["args"].contains("unfinished")) continue;
    unfinished++;
    EXPECT_EQ(s.pid, static_cast<uint64_t>(r.rank_pid[0]));
    EXPECT_EQ(s.name, "ncclSend");
    EXPECT_GE(s.dur, 1.9e6);  // ended at its thread's end, not the process's
    EXPECT_LT(s.dur, 3.0e6);
  }
  EXPECT_EQ(unfinished, 1);
  EXPECT_EQ(sends, 3);
}

}  // namespace
}  // namespace gpuflame::e2e
