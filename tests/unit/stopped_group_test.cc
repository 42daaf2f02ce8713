// A process stopped at a gate, or left stopped by a gpuflame that died,
// whose leader thread has ended (main()'s pthread_exit) while the rest of it
// runs on: its pid's own /proc state says 'Z' whether the group runs or
// stops, so both the gate's wait and the guardian go by the group's.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "inspect/thread_group.h"
#include "profiler/process/guardian.h"
#include "profiler/process/process_registry.h"
#include "tests/support/ended_leader.h"

namespace gpuflame::profiler {
namespace {

bool StoppedWithin(pid_t pid, bool stopped) {
  const char state = testing::GroupStateWithin(pid, stopped);
  return stopped ? state == 'T' : (state == 'R' || state == 'S');
}

// A followed process whose main() ended with pthread_exit, stopped by a gate
// while its other thread runs on: its pid's own state says 'Z', and a
// guardian that took that for the process's would leave it stopped for ever
// once gpuflame is gone.
TEST(GuardianTest, ResumesAStoppedProcessWhoseLeaderEnded) {
  const pid_t child = testing::ForkWithEndedLeader();
  ASSERT_GT(child, 0) << "no child whose leader ended";
  testing::ChildGuard guard(child);
  ASSERT_TRUE(StoppedWithin(child, false));
  kill(child, SIGSTOP);
  ASSERT_TRUE(StoppedWithin(child, true));
  EXPECT_EQ(ResumeHeldProcesses({child}), 1);
  EXPECT_TRUE(StoppedWithin(child, false)) << "still stopped";
}

// The gate's wait for its stop to land (before the process's probes are
// attached) sees it land; it used to give up at once on the zombie.
TEST(GateTest, WaitStoppedSeesTheStopOfAProcessWhoseLeaderEnded) {
  const pid_t child = testing::ForkWithEndedLeader();
  ASSERT_GT(child, 0) << "no child whose leader ended";
  testing::ChildGuard guard(child);
  kill(child, SIGSTOP);
  EXPECT_TRUE(WaitStopped(child, 2000));
  guard.Reap();
  EXPECT_FALSE(WaitStopped(child, 2000)) << "a process gone";
}

// One it does not follow stays as it is.
TEST(GuardianTest, LeavesAStoppedProcessItDoesNotFollow) {
  const pid_t child = testing::ForkWithEndedLeader();
  ASSERT_GT(child, 0) << "no child whose leader ended";
  testing::ChildGuard guard(child);
  kill(child, SIGSTOP);
  ASSERT_TRUE(StoppedWithin(child, true));
  // A pid above any pid_max (4194304 at most): no process anywhere is it or
  // descends from it, so nothing on the machine is resumed.
  EXPECT_EQ(ResumeHeldProcesses({0x7fffffff}), 0);
  EXPECT_EQ(inspect::GroupState(child), 'T');
}

}  // namespace
}  // namespace gpuflame::profiler
