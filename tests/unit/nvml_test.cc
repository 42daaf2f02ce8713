// NVML, read at run time (profiler/devices/nvml.h), against a fake function
// table (the driver's answers we cannot provoke: growing lists, errors, MIG's
// "not available") and against the simulated libnvidia-ml.so.1, which
// answers from the simulated driver's bookkeeping; and the device-level
// "held before gpuflame attached" charge (profiler/pipeline/driver_held.h).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "profiler/devices/nvml.h"
#include "profiler/pipeline/driver_held.h"
#include "profiler/pipeline/oom_device_memory.h"
#include "profiler/pipeline/event_processor.h"
#include "symbolizer/elf_cache.h"
#include "symbolizer/native_symbolizer.h"
#include "tests/fixtures/cuda_sim/gpu_state_sim.h"
#include "tests/support/records.h"

namespace gpuflame::profiler {
namespace {

constexpr uint64_t MiB = 1 << 20;

// One fake driver at a time: the table's entries are plain functions.
struct FakeDriver {
  int init_result = kNvmlSuccess;
  int inits = 0, shutdowns = 0;
  unsigned int devices = 1;
  int failing_device = -1;                 // nvmlDeviceGetHandleByIndex_v2 fails for it
  std::vector<NvmlProcessInfo> processes;  // on every device
  bool tripling = false;  // the list triples before each call answers (a GPU filling faster than we read)
  int calls = 0;
};
FakeDriver* fake = nullptr;

NvmlApi FakeApi() {
  NvmlApi api;
  api.init = [] {
    fake->inits++;
    return fake->init_result;
  };
  api.shutdown = [] {
    if (fake) fake->shutdowns++;  // an owner may outlive the test's driver (a fixture's member)
    return kNvmlSuccess;
  };
  api.device_count = [](unsigned int* n) {
    *n = fake->devices;
    return kNvmlSuccess;
  };
  api.device_by_index = [](unsigned int i, NvmlDevice* d) {
    if (static_cast<int>(i) == fake->failing_device) return 15;  // NVML_ERROR_GPU_IS_LOST
    *d = reinterpret_cast<NvmlDevice>(uintptr_t{i} + 1);
    return kNvmlSuccess;
  };
  api.compute_processes = [](NvmlDevice, unsigned int* count, NvmlProcessInfo* infos) {
    fake->calls++;
    if (fake->tripling) fake->processes.resize(std::max<size_t>(100, fake->processes.size() * 3), {1, MiB, ~0u, ~0u});
    const auto n = static_cast<unsigned int>(fake->processes.size());
    if (*count < n) {
      *count = n;
      return kNvmlErrorInsufficientSize;
    }
    for (unsigned int i = 0; i < n; i++) infos[i] = fake->processes[i];
    *count = n;
    return kNvmlSuccess;
  };
  api.error_string = [](int r) { return r == 15 ? "GPU is lost" : "Unknown Error"; };
  // GPU i has (i + 1) x 80 GiB, 1 GiB of it free.
  api.memory_info = [](NvmlDevice d, NvmlMemory* m) {
    const uint64_t total = (reinterpret_cast<uintptr_t>(d)) * 80 * 1024 * MiB;
    *m = {total, 1024 * MiB, total - 1024 * MiB};
    return kNvmlSuccess;
  };
  return api;
}

class NvmlFakeTest : public ::testing::Test {
 protected:
  void SetUp() override { fake = &driver_; }
  void TearDown() override { fake = nullptr; }
  FakeDriver driver_;
};

TEST_F(NvmlFakeTest, GrowsItsBufferToWhatTheDriverAsksForAndSumsNothing) {
  for (uint32_t pid = 1; pid <= 100; pid++) driver_.processes.push_back({pid, pid * MiB, ~0u, ~0u});
  driver_.devices = 2;
  {
    auto nvml = Nvml::FromApi(FakeApi());
    ASSERT_TRUE(nvml.ok()) << nvml.status();
    auto list = (*nvml)->ComputeProcesses();
    ASSERT_TRUE(list.ok()) << list.status();
    EXPECT_TRUE(list->unreadable.empty());
    ASSERT_EQ(list->processes.size(), 200u) << "one row per process and GPU";
    EXPECT_EQ(list->processes[0].device, 0u);
    EXPECT_EQ(list->processes[199].device, 1u);
    EXPECT_EQ(list->processes[41].pid, 42u);
    EXPECT_EQ(list->processes[41].bytes, 42 * MiB);
    EXPECT_EQ(driver_.calls, 3) << "64 slots first, then what it asked for, then the second GPU in that buffer";
  }
  EXPECT_EQ(driver_.inits, 1);
  EXPECT_EQ(driver_.shutdowns, 1) << "nvmlShutdown when the owner goes";
}

TEST_F(NvmlFakeTest, AFigureTheDriverDoesNotGiveIsNoneNotAHugeNumber) {
  driver_.processes = {{7, kNvmlValueNotAvailable, 1, 0}, {8, 5 * MiB, ~0u, ~0u}};
  auto nvml = Nvml::FromApi(FakeApi());
  ASSERT_TRUE(nvml.ok());
  auto list = (*nvml)->ComputeProcesses();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->processes.size(), 2u);
  EXPECT_FALSE(list->processes[0].bytes.has_value());
  EXPECT_EQ(list->processes[1].bytes, 5 * MiB);
}

TEST_F(NvmlFakeTest, AGpuThatFailsIsSaidAndTheOthersAreStillRead) {
  driver_.devices = 3;
  driver_.failing_device = 1;
  driver_.processes = {{9, MiB, ~0u, ~0u}};
  auto nvml = Nvml::FromApi(FakeApi(), "fake NVML");
  ASSERT_TRUE(nvml.ok());
  auto list = (*nvml)->ComputeProcesses();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->processes.size(), 2u);
  ASSERT_EQ(list->unreadable.size(), 1u);
  EXPECT_EQ(list->unreadable[0], "GPU 1: nvmlDeviceGetHandleByIndex_v2: GPU is lost (15)");
}

TEST_F(NvmlFakeTest, EveryLoopAndBufferIsBounded) {
  // A list that grows faster than we read it: given up after a few calls.
  driver_.tripling = true;
  {
    auto nvml = Nvml::FromApi(FakeApi());
    ASSERT_TRUE(nvml.ok());
    auto list = (*nvml)->ComputeProcesses();
    ASSERT_TRUE(list.ok());
    EXPECT_TRUE(list->processes.empty());
    ASSERT_EQ(list->unreadable.size(), 1u);
    EXPECT_NE(list->unreadable[0].find("kept growing"), std::string::npos) << list->unreadable[0];
    EXPECT_EQ(driver_.calls, Nvml::kMaxAttempts);
  }
  // More processes than gpuflame reads on one GPU; more GPUs than it reads.
  driver_ = FakeDriver{};
  driver_.devices = Nvml::kMaxDevices + 2;
  driver_.processes.resize(Nvml::kMaxProcessesPerDevice + 1, NvmlProcessInfo{1, MiB, ~0u, ~0u});
  auto nvml = Nvml::FromApi(FakeApi());
  ASSERT_TRUE(nvml.ok());
  auto list = (*nvml)->ComputeProcesses();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->processes.empty());
  ASSERT_EQ(list->unreadable.size(), Nvml::kMaxDevices + 1);
  EXPECT_NE(list->unreadable[0].find("over the 4096 gpuflame reads"), std::string::npos) << list->unreadable[0];
  EXPECT_EQ(list->unreadable.back(), "GPUs 64 to 65: not read (gpuflame reads 64 at most)");
}

TEST_F(NvmlFakeTest, ErrorsSayWhichStepAndWhy) {
  driver_.init_result = 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  auto failed = Nvml::FromApi(FakeApi(), "fake NVML");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "fake NVML: nvmlInit_v2: Unknown Error (9)");
  EXPECT_EQ(driver_.shutdowns, 0) << "never initialized: no shutdown";
  NvmlApi partial = FakeApi();
  partial.compute_processes = nullptr;
  auto old = Nvml::FromApi(partial, "old NVML");
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("old NVML has no nvmlDeviceGetComputeRunningProcesses_v3"), std::string::npos)
      << old.status();
  auto absent = Nvml::Open("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.status().message().find("cannot load /nonexistent/libnvidia-ml.so.1"), std::string::npos)
      << absent.status();
}

// An out-of-memory capture's device: the GPUs the driver lists the process on.
TEST_F(NvmlFakeTest, TheDeviceMemoryOfAnOutOfMemoryProcessIsThatOfTheGpusItUses) {
  driver_.devices = 2;
  driver_.processes = {{7, 5 * MiB, ~0u, ~0u}};  // on both GPUs (the fake lists it on every one)
  OomDeviceMemoryReader reader([] { return Nvml::FromApi(FakeApi()); });
  OomDeviceMemory m = reader.Read(7);
  ASSERT_EQ(m.gpus.size(), 2u) << m.unknown;
  EXPECT_EQ(m.gpus[0].index, 0u);
  EXPECT_EQ(m.gpus[0].total, 80 * 1024 * MiB);
  EXPECT_EQ(m.gpus[0].free, 1024 * MiB);
  EXPECT_EQ(m.gpus[1].index, 1u);
  EXPECT_EQ(m.gpus[1].total, 160 * 1024 * MiB);
  // Not listed on a machine of two GPUs: which one is not guessed.
  OomDeviceMemory other = reader.Read(8);
  EXPECT_TRUE(other.gpus.empty());
  EXPECT_EQ(other.unknown, "the driver lists no context of pid 8 on any of 2 GPUs");
  // Of one GPU: that one (a process in another pid namespace, or gone since).
  driver_.devices = 1;
  OomDeviceMemory only = reader.Read(8);
  ASSERT_EQ(only.gpus.size(), 1u) << only.unknown;
  EXPECT_EQ(only.gpus[0].total, 80 * 1024 * MiB);
}

TEST_F(NvmlFakeTest, WithoutMemoryInfoOrNvmlTheDeviceMemoryIsUnknownAndSaysWhy) {
  driver_.processes = {{7, 5 * MiB, ~0u, ~0u}};
  OomDeviceMemoryReader old([] {
    NvmlApi api = FakeApi();
    api.memory_info = nullptr;
    return Nvml::FromApi(api, "old NVML");
  });
  OomDeviceMemory m = old.Read(7);
  EXPECT_TRUE(m.gpus.empty());
  EXPECT_EQ(m.unknown, "old NVML has no nvmlDeviceGetMemoryInfo");
  int opens = 0;
  OomDeviceMemoryReader absent([&opens]() -> absl::StatusOr<std::unique_ptr<Nvml>> {
    opens++;
    return absl::NotFoundError("cannot load libnvidia-ml.so.1");
  });
  EXPECT_EQ(absent.Read(7).unknown, "NVML unavailable: cannot load libnvidia-ml.so.1");
  EXPECT_EQ(absent.Read(7).unknown, "NVML unavailable: cannot load libnvidia-ml.so.1");
  EXPECT_EQ(opens, 1) << "tried once";
}

// The simulated NVML lists a process once it has a simulated context, with
// what its simulated driver holds: the context and its live allocations.
TEST(NvmlSimTest, TheSimulatedLibraryAnswersFromTheSimulatedDriver) {
  const std::string sim = GPUFLAME_SIM_DIR;
  const std::string dir = ::testing::TempDir() + "nvml-sim-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string go = dir + "/go", done = dir + "/done";
  // native_alloc: a cudaMalloc of 12 MiB once |go| exists, held until |done|.
  const pid_t child = fork();
  if (child == 0) {
    const std::string exe = sim + "/native_alloc";
    execl(exe.c_str(), exe.c_str(), go.c_str(), done.c_str(), nullptr);
    _exit(127);
  }
  ASSERT_GT(child, 0);
  // Found as gpuflame finds it: by the variable naming the library.
  setenv(Nvml::kLibraryVariable, (sim + "/libnvidia-ml.so.1").c_str(), 1);
  auto nvml = Nvml::Open();
  unsetenv(Nvml::kLibraryVariable);
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  EXPECT_EQ((*nvml)->name(), sim + "/libnvidia-ml.so.1");
  auto held_by = [&](pid_t pid) -> std::optional<uint64_t> {
    auto list = (*nvml)->ComputeProcesses();
    if (!list.ok()) return std::nullopt;
    for (const DeviceProcess& p : list->processes)
      if (p.pid == static_cast<uint32_t>(pid) && p.device == 0) return p.bytes;
    return std::nullopt;
  };
  EXPECT_FALSE(held_by(child).has_value()) << "no context yet: not listed";
  std::ofstream(go) << "go";
  // Listed from its context on, before its allocation lands (a loaded
  // machine widens that window: seen at 3 MiB in CI): polled until the
  // allocation shows, or 5 s.
  std::optional<uint64_t> held;
  for (int i = 0; i < 500 && held != GF_SIM_CONTEXT_BYTES + 12 * MiB; i++) {
    held = held_by(child);
    if (held != GF_SIM_CONTEXT_BYTES + 12 * MiB) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(held, GF_SIM_CONTEXT_BYTES + 12 * MiB);
  EXPECT_FALSE(held_by(getpid()).has_value()) << "this process has no simulated context";
  // Its GPU: 1 TiB unless GF_SIM_GPU_MEMORY_BYTES says (read at nvmlInit_v2),
  // what the processes with a context hold in use.
  auto memory = (*nvml)->MemoryInfo(0);
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->total, uint64_t{1} << 40);
  EXPECT_GE(memory->used, GF_SIM_CONTEXT_BYTES + 12 * MiB);
  EXPECT_EQ(memory->free, memory->total - memory->used);
  std::ofstream(done) << "done";
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_FALSE(held_by(child).has_value()) << "gone with its process";
  std::filesystem::remove_all(dir);
}

// The charge itself: what the driver says beyond what we count live.
class DriverHeldTest : public NvmlFakeTest {
 protected:
  void Alloc(uint64_t addr, uint64_t size) {
    gf_event ev = testing::Header(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, kPid);
    ev.addr = addr;
    ev.size = size;
    events_.OnRecord(testing::PythonRecord(ev, 2, addr));
  }
  void Free(uint64_t addr) {
    gf_event ev = testing::Header(GF_EV_FREE, GF_DOMAIN_GPU, GF_API_CUDA_FREE, kPid);
    ev.addr = addr;
    events_.OnRecord(testing::MakeRecord(ev));
  }
  void SetDriver(uint64_t bytes) { driver_.processes = {{kPid, bytes, ~0u, ~0u}, {kPid + 1, 99 * MiB, ~0u, ~0u}}; }
  int64_t InUse() {
    const pid_t pids[] = {kPid};
    return events_.InUse(GF_DOMAIN_GPU, pids).at(kPid);
  }
  static constexpr pid_t kPid = 4343;
  symbolizer::ElfCache elves_;
  symbolizer::NativeSymbolizer native_{elves_};
  StackResolver resolver_{nullptr, native_, {}};
  EventProcessor events_{nullptr, resolver_};
  DriverHeld held_{[] { return Nvml::FromApi(FakeApi()); }};
};

TEST_F(DriverHeldTest, InUseMatchesTheDriverAndOnlyTheRestIsFromBefore) {
  Alloc(0x1000, 4 * MiB);  // seen: between its probes and the reading
  SetDriver(4 * MiB + 9 * MiB);
  const pid_t late[] = {kPid};
  int drains = 0;
  held_.OnAttached(late, events_, [&] { drains++; });
  EXPECT_EQ(drains, 2) << "before and after the reading";
  EXPECT_EQ(events_.HeldBeforeAttach(kPid), 9 * MiB);
  EXPECT_EQ(InUse(), 13 * MiB) << "what the driver says";
  EXPECT_TRUE(held_.TakeWarnings().empty());

  // Later: it allocates 2 MiB (seen) and frees 3 MiB from before (its free
  // matches nothing); the driver then holds 13 + 2 - 3 MiB.
  Alloc(0x2000, 2 * MiB);
  Free(0x777000);
  SetDriver(12 * MiB);
  auto alive = [](pid_t) { return false; };
  held_.Refresh(events_, alive, nullptr);
  EXPECT_EQ(events_.HeldBeforeAttach(kPid), 6 * MiB) << "lowered by what was freed";
  EXPECT_EQ(InUse(), 12 * MiB);
  // The driver grows beyond what we see (its context): never raised.
  SetDriver(20 * MiB);
  held_.Refresh(events_, alive, nullptr);
  EXPECT_EQ(events_.HeldBeforeAttach(kPid), 6 * MiB);
  // Once gone, what it held at the end stays as it was.
  SetDriver(0);
  held_.Refresh(
      events_, [](pid_t) { return true; }, nullptr);
  EXPECT_EQ(events_.HeldBeforeAttach(kPid), 6 * MiB);
  driver_.calls = 0;
  held_.Refresh(events_, alive, nullptr);
  EXPECT_EQ(driver_.calls, 0) << "forgotten: not read again";
}

TEST_F(DriverHeldTest, NothingFromBeforeMeansNoFrame) {
  Alloc(0x1000, 4 * MiB);
  SetDriver(4 * MiB);
  const pid_t late[] = {kPid};
  held_.OnAttached(late, events_, nullptr);
  EXPECT_EQ(events_.HeldBeforeAttach(kPid), 0);
  EXPECT_EQ(events_.stacks().size(), 1u) << "no marker stack";
}

TEST_F(DriverHeldTest, WhatTheDriverDoesNotSayIsSaidOnceAndNotGuessed) {
  driver_.processes = {{kPid, kNvmlValueNotAvailable, 1, 0}};
  const pid_t late[] = {kPid};
  held_.OnAttached(late, events_, nullptr);
  held_.OnAttached(late, events_, nullptr);
  EXPECT_EQ(events_.HeldBeforeAttach(kPid), 0);
  auto warnings = held_.TakeWarnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("NVML_VALUE_NOT_AVAILABLE"), std::string::npos) << warnings[0];
}

TEST(DriverHeldUnavailableTest, WithoutNvmlItIsSaidOnceAndNothingElseChanges) {
  symbolizer::ElfCache elves;
  symbolizer::NativeSymbolizer native{elves};
  StackResolver resolver{nullptr, native, {}};
  EventProcessor events{nullptr, resolver};
  DriverHeld held([] { return Nvml::Open("/nonexistent/libnvidia-ml.so.1"); });
  const pid_t late[] = {1, 2};
  held.OnAttached(late, events, nullptr);
  held.OnAttached(late, events, nullptr);
  auto warnings = held.TakeWarnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], held.unavailable());
  EXPECT_NE(warnings[0].find("NVML is unavailable (cannot load /nonexistent/libnvidia-ml.so.1"), std::string::npos)
      << warnings[0];
  EXPECT_EQ(events.stacks().size(), 0u);
}

}  // namespace
}  // namespace gpuflame::profiler
