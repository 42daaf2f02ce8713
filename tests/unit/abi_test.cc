// The injection library's ABI check: libgpuflame_cupti.so says which
// GF_ABI_VERSION it was built with at gpuflame:status, and the agent ignores
// the kernel records of a process whose library speaks another version
// (records fed to the event loop as BPF would send them, no registry).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "bpf/gpuflame_abi.h"
#include "profiler/pipeline/event_processor.h"
#include "profiler/process/process_registry.h"
#include "tests/support/records.h"

namespace gpuflame::profiler {
namespace {

static_assert(GF_ABI_VERSION >= 1, "0 means a library from before ABI versions");

class AbiTest : public ::testing::Test {
 protected:
  static std::vector<uint8_t> Record(uint32_t pid, uint8_t kind, const void* payload = nullptr, size_t bytes = 0,
                                     uint64_t arg0 = 0, uint64_t arg1 = 0, uint64_t size = 0,
                                     uint16_t native_count = 0) {
    gf_event ev = testing::Header(kind, GF_DOMAIN_NONE, GF_API_NONE, pid);
    ev.ts_ns = 1000;
    ev.arg0 = arg0;
    ev.arg1 = arg1;
    ev.size = size;
    ev.native_count = native_count;
    return testing::MakeRecord(ev, payload, bytes);
  }
  // gpuflame:status(GF_CUPTI_ACTIVE, abi) as the BPF program reports it.
  void Status(uint32_t pid, uint32_t abi) {
    events_.OnRecord(Record(pid, GF_EV_CUPTI_STATUS, nullptr, 0, GF_CUPTI_ACTIVE, abi));
  }
  // One sampled launch, its kernel's name and its activity record.
  void KernelRecords(uint32_t pid, uint32_t correlation) {
    const uint64_t ips[2] = {0x1000, 0x2000};
    events_.OnRecord(Record(pid, GF_EV_KERNEL_LAUNCH, ips, sizeof(ips), correlation, 0, 0, 2));
    const char name[] = "gemm";
    events_.OnRecord(Record(pid, GF_EV_KERNEL_NAME, name, sizeof(name), /*name_id=*/1));
    gf_kernel_record k{};
    k.kind = GF_GPU_KERNEL;
    k.correlation = correlation;
    k.name_id = 1;
    k.start_ns = 100;
    k.end_ns = 400;
    events_.OnRecord(Record(pid, GF_EV_KERNEL_BATCH, &k, sizeof(k), 0, 0, /*count=*/1));
  }
  int64_t KernelNanos() {
    events_.joiner().Flush(2000);
    int64_t total = 0;
    for (const auto& [key, c] : events_.kernels().totals()) total += c.nanos;
    return total;
  }

  symbolizer::ElfCache elves_;
  symbolizer::NativeSymbolizer native_{elves_};
  StackResolver resolver_{nullptr, native_, {}};
  EventProcessor events_{nullptr, resolver_};
};

TEST_F(AbiTest, TheLibraryOfThisBuildIsHeard) {
  Status(42, GF_ABI_VERSION);
  KernelRecords(42, 7);
  EXPECT_FALSE(events_.ForeignAbi(42));
  EXPECT_EQ(events_.stats().foreign_abi_records, 0u);
  EXPECT_EQ(events_.joiner().stats().joined, 1u);
  EXPECT_EQ(KernelNanos(), 300);
}

TEST_F(AbiTest, AnotherVersionsKernelRecordsAreIgnoredOthersAreNot) {
  Status(42, GF_ABI_VERSION + 1);
  Status(43, GF_ABI_VERSION);
  KernelRecords(42, 7);
  KernelRecords(43, 8);
  EXPECT_TRUE(events_.ForeignAbi(42));
  EXPECT_FALSE(events_.ForeignAbi(43));
  EXPECT_EQ(events_.stats().foreign_abi_records, 3u);  // its launch, name and batch
  EXPECT_EQ(events_.stats().malformed, 0u);
  EXPECT_EQ(events_.joiner().stats().launches, 1u);  // pid 43's only
  EXPECT_EQ(events_.joiner().stats().records, 1u);
  EXPECT_EQ(KernelNanos(), 300);
  EXPECT_EQ(events_.kind_count(GF_EV_KERNEL_BATCH), 2u) << "still counted as received";
}

TEST_F(AbiTest, AnUnversionedLibraryIsAMismatchAndWhatItSentBeforeIsDropped) {
  // A launch already pending when the library's status arrives (a re-attach
  // in mid-run): dropped too, never joined with a later record.
  const uint64_t ips[1] = {0x1000};
  events_.OnRecord(Record(42, GF_EV_KERNEL_LAUNCH, ips, sizeof(ips), /*correlation=*/7, 0, 0, 1));
  ASSERT_EQ(events_.joiner().pending_launches(), 1u);
  Status(42, 0);  // one-argument gpuflame:status: BPF reads the version as 0
  EXPECT_TRUE(events_.ForeignAbi(42));
  EXPECT_EQ(events_.joiner().pending_launches(), 0u);
  KernelRecords(42, 7);
  EXPECT_EQ(KernelNanos(), 0);
}

TEST_F(AbiTest, AReusedPidOrANewImageStartsAfresh) {
  Status(42, GF_ABI_VERSION + 1);
  events_.OnRecord(Record(42, GF_EV_EXIT));
  EXPECT_FALSE(events_.ForeignAbi(42));
  Status(42, GF_ABI_VERSION + 1);
  events_.OnRecord(Record(42, GF_EV_EXEC));
  EXPECT_FALSE(events_.ForeignAbi(42));
  Status(42, GF_ABI_VERSION);
  KernelRecords(42, 9);
  EXPECT_EQ(KernelNanos(), 300);
}

TEST(AbiWarningTest, SaysWhoSpeaksWhatAndWhatToDo) {
  EXPECT_EQ(CuptiAbiMismatchWarning(4242, "python3", GF_ABI_VERSION + 1),
            "pid 4242 (python3): libgpuflame_cupti.so speaks ABI v" + std::to_string(GF_ABI_VERSION + 1) +
                ", this gpuflame v" + std::to_string(GF_ABI_VERSION) +
                ": kernel time off for it; use the library shipped with this gpuflame");
  EXPECT_NE(CuptiAbiMismatchWarning(1, "x", 0).find("ABI v0 (from before ABI versions)"), std::string::npos);
}

}  // namespace
}  // namespace gpuflame::profiler
