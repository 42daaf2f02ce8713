// `gpuflame diff` end to end: two `gpuflame record` runs of one workload
// (real BPF on the simulated CUDA runtime, a test fixture; real CPython) whose
// difference is known to the byte, then the diff read back with the schema and
// by `go tool pprof`, which must show for our diff file exactly what it shows
// for `-diff_base BASE NEW`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "e2e/e2e_support.h"

namespace gpuflame::e2e {
namespace {

constexpr int64_t MiB = 1 << 20;
const std::string kTensor = ";empty;Tensor > __init__;c10::cuda::CUDACachingAllocator::malloc";

RunResult Diff(const std::string& base, const std::string& neu, const std::string& out, const std::string& flags = "") {
  return Sh(std::string(GPUFLAME_BIN) + " diff " + base + " " + neu + " -o " + out + " " + flags);
}

// `go tool pprof -top` of our diff file and of pprof's own -diff_base, for
// every sample type: identical, headers included (File, Type, Time,
// Duration, "Showing nodes accounting for X, Y% of Z total" with BASE's
// total as 100%).
void ExpectPprofAgrees(const std::string& base, const std::string& neu, const std::string& ours) {
  pprof::Profile p;
  ASSERT_TRUE(LoadPprof(ours, &p)) << ours;
  ASSERT_GT(p.sample_type_size(), 0);
  for (const auto& t : p.sample_type()) {
    const std::string type = p.string_table(static_cast<int>(t.type()));
    RunResult theirs = Sh("go tool pprof -top -sample_index=" + type + " -diff_base " + base + " " + neu);
    RunResult mine = Sh("go tool pprof -top -sample_index=" + type + " " + ours);
    ASSERT_EQ(theirs.status, 0) << theirs.output;
    ASSERT_EQ(mine.status, 0) << mine.output;
    EXPECT_NE(mine.output.find("Showing nodes accounting for"), std::string::npos) << mine.output;
    EXPECT_EQ(mine.output, theirs.output) << ours << ", " << type;
  }
}

// The only sample whose stack ends with |suffix|' value, or -1.
int64_t Ending(const std::map<std::string, int64_t>& stacks, const std::string& suffix) {
  int64_t v = -1;
  int hits = 0;
  for (const auto& [stack, value] : stacks)
    if (stack.size() >= suffix.size() && stack.compare(stack.size() - suffix.size(), suffix.size(), suffix) == 0) {
      v = value;
      hits++;
    }
  return hits == 1 ? v : -1;
}

TEST(DiffTest, TwoRecordRunsOfAWorkloadDiffToTheByteAndPprofAgrees) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const std::string py = PyenvPython("3.12");
  const std::string dir = TempDir("diff-runs");
  for (const char* variant : {"base", "new"}) {
    RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN + " record -q -o " + dir + "/" + variant + " -- " + py + " " +
                     Workload("diff_runs.py") + " " + variant);
    ASSERT_EQ(r.status, 0) << r.output;
  }
  const std::string base = dir + "/base", neu = dir + "/new", out = dir + "/diff";
  RunResult d = Diff(base, neu, out);
  ASSERT_EQ(d.status, 0) << d.output;

  // The pprof of the difference holds what changed, to the byte: NEW's
  // samples and BASE's negated sum to the change per stack.
  pprof::Profile diff;
  ASSERT_TRUE(LoadPprof(out + "/torch_memory.diff.pb.gz", &diff));
  auto inuse = Stacks(diff, "inuse_space");
  EXPECT_EQ(Ending(inuse, "<module>;KVCache > __init__" + kTensor), 32 * MiB) << Dump(inuse);
  EXPECT_EQ(Ending(inuse, "<module>;prefix_cache" + kTensor), 20 * MiB) << Dump(inuse);
  EXPECT_EQ(Ending(inuse, "<module>;legacy_buffers" + kTensor), -12 * MiB) << Dump(inuse);
  EXPECT_EQ(Ending(inuse, "<module>;activations" + kTensor), -8 * MiB) << Dump(inuse);
  EXPECT_EQ(Ending(inuse, "<module>;Weights > __init__" + kTensor), 0) << Dump(inuse);
  EXPECT_EQ(Total(diff, "inuse_space"), 32 * MiB);
  // Weights, KV blocks, prefix or legacy buffers, activations.
  EXPECT_EQ(Total(diff, "inuse_objects"), (1 + 6 + 1 + 1) - (1 + 4 + 3 + 1));
  int base_samples = 0;
  for (const auto& s : diff.sample())
    for (const auto& l : s.label())
      if (diff.string_table(static_cast<int>(l.key())) == "pprof::base") base_samples++;
  EXPECT_GT(base_samples, 0);

  // What the terminal says: totals, then the stacks that grew and shrank,
  // named by the frames that tell them apart.
  const size_t torch = d.output.find("== torch_memory\n");
  ASSERT_NE(torch, std::string::npos) << d.output;
  const std::string leaf = " › empty › Tensor > __init__ › c10::cuda::CUDACachingAllocator::malloc\n";
  // The last profile (by name) before the files written are said.
  EXPECT_EQ(d.output.substr(torch, d.output.find("gpuflame: wrote", torch) - torch),
            "== torch_memory\n"
            "   alloc_objects            9 -> 9                       0 (+0.0%)\n"
            "   alloc_space      94.00 MiB -> 126.00 MiB     +32.00 MiB (+34.0%)\n"
            "   inuse_objects            9 -> 9                       0 (+0.0%)\n"
            "   inuse_space      94.00 MiB -> 126.00 MiB     +32.00 MiB (+34.0%)\n"
            "   peak_objects             9 -> 9                       0 (+0.0%)\n"
            "   peak_space       94.00 MiB -> 126.00 MiB     +32.00 MiB (+34.0%)\n"
            "   grew most (inuse_space):\n"
            "       +32.00 MiB  <module> › KVCache > __init__" +
                leaf + "       +20.00 MiB  <module> › prefix_cache" + leaf +
                "   shrank most (inuse_space):\n"
                "       -12.00 MiB  <module> › legacy_buffers" +
                leaf + "        -8.00 MiB  <module> › activations" + leaf)
      << d.output;
  // Device level: the same changes, told apart by the Python frame above the
  // native ones that all its stacks share.
  EXPECT_NE(d.output.find("+32.00 MiB  … › KVCache > __init__ › … › "), std::string::npos) << d.output;
  EXPECT_NE(d.output.find("-12.00 MiB  … › legacy_buffers › … › "), std::string::npos) << d.output;
  EXPECT_NE(d.output.find("gpuflame: wrote " + out + "/"), std::string::npos) << d.output;

  // Every profile both runs wrote is diffed, and pprof reads each diff as
  // it reads -diff_base.
  std::vector<std::string> kinds;
  for (const auto& e : std::filesystem::directory_iterator(base)) {
    const std::string name = e.path().filename();
    if (!name.ends_with(".pb.gz") || !std::filesystem::exists(neu + "/" + name)) continue;
    const std::string kind = name.substr(0, name.size() - 6);
    kinds.push_back(kind);
    SCOPED_TRACE(kind);
    ASSERT_TRUE(std::filesystem::exists(out + "/" + kind + ".diff.pb.gz"));
    ExpectPprofAgrees(base + "/" + name, neu + "/" + name, out + "/" + kind + ".diff.pb.gz");
  }
  EXPECT_GE(kinds.size(), 3u) << "torch_memory, gpu_memory and process_cpu at least";

  // The flame graph carries both sides, the frame only in BASE included.
  const std::string html = ReadFile(out + "/diff_flamegraph.html");
  EXPECT_NE(html.find("\"diff\":{\"base\":"), std::string::npos);
  EXPECT_NE(html.find("\"legacy_buffers\""), std::string::npos);
  EXPECT_NE(html.find("\"prefix_cache\""), std::string::npos);

  // Two single files diff too, whatever their names; the pprof is the same.
  const std::string single = dir + "/single";
  ASSERT_EQ(Diff(base + "/torch_memory.pb.gz", neu + "/torch_memory.pb.gz", single, "-q").status, 0);
  EXPECT_EQ(ReadFile(single + "/torch_memory.diff.pb.gz").size() > 0, true);
  pprof::Profile again;
  ASSERT_TRUE(LoadPprof(single + "/torch_memory.diff.pb.gz", &again));
  EXPECT_EQ(Stacks(again, "inuse_space"), inuse);

  // Memory against CPU time: one line, the user's mistake said.
  RunResult mismatch = Diff(base + "/torch_memory.pb.gz", neu + "/process_cpu.pb.gz", dir + "/bad");
  EXPECT_EQ(mismatch.status, 2);
  EXPECT_EQ(mismatch.output,
            "gpuflame: cannot diff " + base + "/torch_memory.pb.gz against " + neu +
                "/process_cpu.pb.gz: they measure different things: BASE has alloc_objects/count, "
                "alloc_space/bytes, inuse_objects/count, inuse_space/bytes, peak_objects/count, peak_space/bytes; NEW "
                "has cpu/nanoseconds\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad"));

  // Device memory against tensor memory: the same sample types, refused by kind.
  RunResult levels = Diff(base + "/gpu_memory.pb.gz", neu + "/torch_memory.pb.gz", dir + "/bad");
  EXPECT_EQ(levels.status, 2);
  EXPECT_EQ(levels.output, "gpuflame: cannot diff " + base + "/gpu_memory.pb.gz against " + neu +
                               "/torch_memory.pb.gz: they are different profiles: BASE is gpu_memory, NEW is "
                               "torch_memory (gpu_memory is device memory, torch_memory PyTorch's tensors)\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad"));

  // A device-memory profile of an older gpuflame (no peak_*, unused_*)
  // against this run's: diffed in the four types both have, the rest said
  // on the terminal, the page and in the file, which pprof reads.
  const std::string older = std::string(GPUFLAME_FUZZ_CORPUS) + "/pprof_symbolize/othersig-gpu_memory.pb.gz";
  RunResult partial = Diff(older, neu + "/gpu_memory.pb.gz", dir + "/partial", "-q");
  ASSERT_EQ(partial.status, 0) << partial.output;
  const std::string said =
      "gpu_memory: diffed the 4 sample types both have; only NEW has peak_objects/count (each process's live set "
      "at its peak, which an older gpuflame's profiles lack), peak_space/bytes (each process's live set at its "
      "peak, which an older gpuflame's profiles lack), unused_objects/count (the caching allocator's slack, which "
      "an older gpuflame's profiles lack), unused_space/bytes (the caching allocator's slack, which an older "
      "gpuflame's profiles lack): left out";
  EXPECT_NE(partial.output.find("gpuflame: " + said + "\n"), std::string::npos) << partial.output;
  pprof::Profile partial_diff, older_p, new_p;
  ASSERT_TRUE(LoadPprof(dir + "/partial/gpu_memory.diff.pb.gz", &partial_diff));
  ASSERT_TRUE(LoadPprof(older, &older_p));
  ASSERT_TRUE(LoadPprof(neu + "/gpu_memory.pb.gz", &new_p));
  ASSERT_EQ(partial_diff.sample_type_size(), 4);
  for (const char* type : {"alloc_objects", "alloc_space", "inuse_objects", "inuse_space"})
    EXPECT_EQ(Total(partial_diff, type), Total(new_p, type) - Total(older_p, type)) << type;
  RunResult top = Sh("go tool pprof -top -sample_index=inuse_space " + dir + "/partial/gpu_memory.diff.pb.gz");
  ASSERT_EQ(top.status, 0) << top.output;
  EXPECT_NE(top.output.find("gpuflame diff: diffed the 4 sample types both have; only NEW has peak_objects/count"),
            std::string::npos)
      << top.output;
  EXPECT_NE(ReadFile(dir + "/partial/diff_flamegraph.html").find("\"notes\":[\"gpu_memory: diffed the 4 sample types"),
            std::string::npos);
  // The same types: no note anywhere.
  EXPECT_EQ(d.output.find("sample types both have"), std::string::npos) << d.output;
  EXPECT_NE(html.find("\"notes\":[],"), std::string::npos);
}

// Needs no root: stored profiles of the fuzz corpus, written by record.
TEST(DiffTest, BrokenInputsAndMismatchesAreOneLineAndNothingIsWritten) {
  const std::string dir = TempDir("diff-inputs");
  const std::string corpus = std::string(GPUFLAME_FUZZ_CORPUS) + "/pprof_symbolize";
  const std::string memory = corpus + "/othersig-gpu_memory.pb.gz", cpu = corpus + "/native-process_cpu.pb.gz";
  std::ofstream(dir + "/garbage.pb.gz") << "this is no profile";
  struct Case {
    std::string base, neu, message;
  } cases[] = {
      {dir + "/missing.pb.gz", memory, "gpuflame: no such file or directory: " + dir + "/missing.pb.gz\n"},
      {memory, dir + "/garbage.pb.gz", "gpuflame: " + dir + "/garbage.pb.gz: not a pprof profile (profile.proto)\n"},
      {cpu, memory,
       "gpuflame: cannot diff " + cpu + " against " + memory +
           ": they measure different things: BASE has cpu/nanoseconds; NEW has alloc_objects/count, "
           "alloc_space/bytes, inuse_objects/count, inuse_space/bytes\n"},
  };
  for (const Case& c : cases) {
    RunResult r = Diff(c.base, c.neu, dir + "/out");
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_EQ(r.output, c.message);
    EXPECT_FALSE(std::filesystem::exists(dir + "/out"));
  }
  // A profile against itself: zero everywhere, as pprof says too.
  RunResult same = Diff(memory, memory, dir + "/same", "-q");
  ASSERT_EQ(same.status, 0) << same.output;
  ExpectPprofAgrees(memory, memory, dir + "/same/othersig-gpu_memory.diff.pb.gz");
}

// A pprof of |n| samples of one value each, the smallest a sample can be (5
// bytes): what bounds a parsed profile's memory is how many things it holds,
// not its bytes (40 MB of empty samples took 2.4 GB before it was counted).
std::string WriteSmallSamples(const std::string& path, size_t n) {
  // A sample type (count/bytes), then the strings "", "count", "bytes".
  std::string p =
      std::string("\x0a\x04\x08\x01\x10\x02\x32\x00\x32\x05", 10) + "count" + std::string("\x32\x05", 2) + "bytes";
  for (size_t i = 0; i < n; i++) p += std::string("\x12\x03\x12\x01\x01", 5);
  std::ofstream(path, std::ios::binary) << p;
  return path;
}

TEST(DiffTest, ProfilesOfManySmallSamplesAreDiffedOrRefusedInBoundedMemory) {
  const std::string dir = TempDir("diff-small-samples");
  // Two arrays and a message per sample: 995 000 samples are just under the
  // 2 M things diff parses per side, 1 100 000 over.
  const std::string under = WriteSmallSamples(dir + "/under.pb", 995'000);
  const std::string over = WriteSmallSamples(dir + "/over.pb", 1'100'000);
  auto diff = [&](const std::string& base, const std::string& neu) {
    return Sh("ulimit -v 1048576; " + std::string(GPUFLAME_BIN) + " diff -q " + base + " " + neu + " -o " + dir +
              "/out");
  };
  RunResult ok = diff(under, under);
  ASSERT_EQ(ok.status, 0) << ok.output;
  pprof::Profile p;
  ASSERT_TRUE(LoadPprof(dir + "/out/under.diff.pb.gz", &p));
  EXPECT_EQ(p.sample_size(), 2 * 995'000);
  EXPECT_EQ(Total(p, "count"), 0);
  RunResult refused = diff(under, over);
  EXPECT_EQ(refused.status, 2);
  EXPECT_EQ(refused.output,
            "gpuflame: " + over +
                ": more than the 2000000 samples, locations, strings and the like diff reads for one side\n");
  // symbolize parses one profile, up to twice as many.
  const std::string huge = WriteSmallSamples(dir + "/huge.pb", 2'100'000);
  RunResult symbolize =
      Sh("ulimit -v 1048576; " + std::string(GPUFLAME_BIN) + " symbolize " + huge + " -o " + dir + "/sym.pb.gz");
  EXPECT_EQ(symbolize.status, 2);
  EXPECT_EQ(symbolize.output,
            "gpuflame: " + huge + ": more than the 4000000 samples, locations, strings and the like symbolize reads\n");
}

}  // namespace
}  // namespace gpuflame::e2e
