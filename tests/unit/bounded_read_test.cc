#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "base/scoped_fd.h"
#include "inspect/bounded_read.h"
#include "inspect/process_memory.h"
#include "inspect/thread_group.h"
#include "tests/support/ended_leader.h"

namespace gpuflame::inspect {
namespace {

TEST(BoundedReadTest, AnonymousMemoryIsReadDirectlyAndFileBackedThroughAWorker) {
  static const char kHeap[] = "anonymous bytes";
  std::string heap(kHeap);  // on the heap: no file behind it
  heap.reserve(4096);
  // A page of a regular file, mapped: read through the worker.
  char path[] = "/tmp/gpuflame-bounded-XXXXXX";
  base::ScopedFd fd(mkstemp(path));
  ASSERT_TRUE(fd) << std::strerror(errno);
  unlink(path);
  const std::string content = "file-backed bytes";
  ASSERT_EQ(pwrite(fd.get(), content.data(), content.size(), 0), static_cast<ssize_t>(content.size()));
  void* mapped = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  ASSERT_NE(mapped, MAP_FAILED);

  RemoteProcessMemory self(getpid());
  std::string got(heap.size(), '\0');
  ASSERT_TRUE(self.Read(reinterpret_cast<uint64_t>(heap.data()), got.data(), got.size()));
  EXPECT_EQ(got, heap);
  EXPECT_EQ(self.direct_reads(), 1u);
  got.assign(content.size(), '\0');
  ASSERT_TRUE(self.Read(reinterpret_cast<uint64_t>(mapped), got.data(), got.size()));
  EXPECT_EQ(got, content);
  EXPECT_EQ(self.worker_reads(), 1u);
  // Unmapped memory fails either way, at once.
  munmap(mapped, 4096);
  EXPECT_FALSE(self.Read(reinterpret_cast<uint64_t>(mapped), got.data(), got.size()));
  EXPECT_FALSE(Poisoned(getpid()));
}

// A child whose page never arrives: a userfaultfd-registered page of a memfd
// that nobody serves, as a FUSE file whose server never answers behaves.
// Registering for the kernel's own faults takes CAP_SYS_PTRACE.
struct StuckChild {
  pid_t pid = -1;
  uint64_t addr = 0;
  ~StuckChild() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

bool StartStuckChild(StuckChild& child, std::string* why) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return false;
  base::ScopedFd rd(pipefd[0]), wr(pipefd[1]);
  child.pid = fork();
  if (child.pid == 0) {
    uint64_t addr = 0;
    int memfd = static_cast<int>(syscall(SYS_memfd_create, "stuck", 0));
    int uffd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC));
    void* page = MAP_FAILED;
    if (memfd >= 0 && ftruncate(memfd, 4096) == 0) page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    uffdio_api api{};
    api.api = UFFD_API;
    uffdio_register reg{};
    reg.range.start = reinterpret_cast<uint64_t>(page);
    reg.range.len = 4096;
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    if (uffd >= 0 && page != MAP_FAILED && ioctl(uffd, UFFDIO_API, &api) == 0 && ioctl(uffd, UFFDIO_REGISTER, &reg) == 0)
      addr = reinterpret_cast<uint64_t>(page);
    (void)!write(pipefd[1], &addr, sizeof(addr));
    for (;;) pause();  // holds the userfaultfd open and never serves it
  }
  if (child.pid < 0) return false;
  wr.reset();
  if (read(rd.get(), &child.addr, sizeof(child.addr)) != sizeof(child.addr)) return false;
  if (child.addr == 0) *why = "no userfaultfd for kernel faults here (needs CAP_SYS_PTRACE)";
  return child.addr != 0;
}

TEST(BoundedReadTest, AReadThatNeverReturnsCostsTheDeadlineOnceAndPoisonsOnlyItsProcess) {
  StuckChild child;
  std::string why;
  if (!StartStuckChild(child, &why)) GTEST_SKIP() << why;
  RemoteProcessMemory stuck(child.pid);
  char buf[16];
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(stuck.Read(child.addr, buf, sizeof(buf)));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, kReadDeadline);
  EXPECT_LT(waited, kReadDeadline * 5);
  EXPECT_TRUE(Poisoned(child.pid));
  const BoundedReadStats after_one = ReadStats();
  EXPECT_GE(after_one.overran, 1u);
  EXPECT_GE(after_one.stuck_workers, 1);
  // Nothing more is read from it, not even its anonymous memory, and at once.
  const auto again = std::chrono::steady_clock::now();
  EXPECT_FALSE(ReadDirect(child.pid, child.addr, buf, sizeof(buf)));
  EXPECT_FALSE(ReadWithDeadline(child.pid, child.addr, buf, sizeof(buf)));
  EXPECT_LT(std::chrono::steady_clock::now() - again, kReadDeadline);
  EXPECT_EQ(ReadStats().overran, after_one.overran);
  // Other processes read as before, through a fresh worker.
  static const char kMine[] = "still readable";
  char mine[sizeof(kMine)] = {};
  EXPECT_TRUE(ReadWithDeadline(getpid(), reinterpret_cast<uint64_t>(kMine), mine, sizeof(mine)));
  EXPECT_STREQ(mine, kMine);
  const std::vector<pid_t> told = TakeNewlyPoisoned();
  EXPECT_NE(std::find(told.begin(), told.end(), child.pid), told.end());
  EXPECT_TRUE(TakeNewlyPoisoned().empty());  // said once
  ForgetPoisoned(child.pid);
  EXPECT_FALSE(Poisoned(child.pid));
  // Once its target dies the stuck read returns, and its worker no longer
  // counts against kMaxStuckWorkers: a long-lived agent that met a few stuck
  // reads keeps its worker reads.
  kill(child.pid, SIGKILL);
  waitpid(child.pid, nullptr, 0);
  child.pid = -1;
  const auto killed = std::chrono::steady_clock::now();
  while (ReadStats().stuck_workers >= after_one.stuck_workers &&
         std::chrono::steady_clock::now() - killed < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(ReadStats().stuck_workers, after_one.stuck_workers - 1);
}

// A child whose main thread has ended (as with pthread_exit) while another runs on:
// its pid serves neither maps nor process_vm_readv any more, and its memory
// is read through the thread that lives.
uint64_t marker = 0;

TEST(BoundedReadTest, AProcessWhoseLeaderEndedIsReadThroughAThreadThatLives) {
  marker = 0x600df1a9;
  // A heap block, read directly (anonymous), and the global (file-backed
  // .bss next to the binary's data: read through the worker).
  auto* heap = new uint64_t(0x5eed);
  const pid_t child = testing::ForkWithEndedLeader();
  ASSERT_GT(child, 0) << "no child whose leader ended";
  testing::ChildGuard guard(child);
  uint64_t got = 0;
  EXPECT_FALSE(ReadDirect(child, reinterpret_cast<uint64_t>(heap), &got, sizeof(got))) << "the zombie leader's pid";
  const pid_t live = LiveThreadOf(child);
  EXPECT_NE(live, 0);
  EXPECT_NE(live, child);
  RemoteProcessMemory memory(child);
  EXPECT_EQ(memory.ReadValue<uint64_t>(reinterpret_cast<uint64_t>(heap)), 0x5eedu);
  EXPECT_EQ(memory.ReadValue<uint64_t>(reinterpret_cast<uint64_t>(&marker)), 0x600df1a9u);
  guard.Reap();
  delete heap;
  // Gone altogether: nothing to read through.
  EXPECT_EQ(LiveThreadOf(child), 0);
}

// The state a gate's stop is checked by, and its guardian resumes by: the
// leader's says 'Z' whether the rest of the group runs or stops.
TEST(ThreadGroupTest, AGroupWhoseLeaderEndedStopsAndRunsInTheThreadThatLives) {
  const pid_t child = testing::ForkWithEndedLeader();
  ASSERT_GT(child, 0) << "no child whose leader ended";
  testing::ChildGuard guard(child);
  const char running = testing::GroupStateWithin(child, false);
  EXPECT_TRUE(running == 'R' || running == 'S') << running;
  kill(child, SIGSTOP);
  EXPECT_EQ(testing::GroupStateWithin(child, true), 'T');
  kill(child, SIGCONT);
  const char resumed = testing::GroupStateWithin(child, false);
  EXPECT_TRUE(resumed == 'R' || resumed == 'S') << resumed;
  guard.Reap();
  EXPECT_EQ(GroupState(child), 0) << "a process reaped";
}

TEST(ThreadGroupTest, ALivingLeaderIsTheGroup) {
  EXPECT_NE(GroupState(getpid()), 'T');
  EXPECT_NE(GroupState(getpid()), 0);
  EXPECT_EQ(LiveThreadOf(getpid()), getpid());
}

}  // namespace
}  // namespace gpuflame::inspect
