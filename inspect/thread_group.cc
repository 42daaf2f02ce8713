#include "inspect/thread_group.h"

#include <dirent.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "inspect/proc_stat.h"

namespace gpuflame::inspect {
namespace {

constexpr int kMaxThreadsLooked = 4096;

// The state of the thread of this /proc stat file if it has its memory
// still: not exiting (PF_EXITING: its memory goes early in its exit, while
// its state may still say running), not a zombie, and there at all; else 0.
char LiveState(const std::string& path) {
  const auto stat = ReadStatFile(path.c_str());
  if (!stat) return 0;
  const auto st = StateAndParentFromStat(*stat);
  const auto flags = FlagsFromStat(*stat);
  if (!st || !flags || st->state == 'Z' || st->state == 'X' || (*flags & kPfExiting)) return 0;
  return st->state;
}

struct LiveThread {
  pid_t tid = 0;  // 0: none
  char state = 0;
};

// The leader while it lives, else the first other thread that does.
LiveThread FindLiveThread(pid_t pid) {
  const std::string dir = absl::StrCat("/proc/", pid, "/task");
  if (const char state = LiveState(absl::StrCat(dir, "/", pid, "/stat"))) return {pid, state};
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (!d) return {};
  int looked = 0;
  while (const dirent* e = readdir(d.get())) {
    if (++looked > kMaxThreadsLooked) break;
    char* end = nullptr;
    const long tid = std::strtol(e->d_name, &end, 10);
    if (tid <= 0 || *end != '\0' || tid == pid) continue;
    if (const char state = LiveState(absl::StrCat(dir, "/", tid, "/stat"))) return {static_cast<pid_t>(tid), state};
  }
  return {};
}

}  // namespace

pid_t LiveThreadOf(pid_t pid) { return FindLiveThread(pid).tid; }

char GroupState(pid_t pid, char leader_state) {
  if (leader_state != 'Z') return leader_state;
  const LiveThread live = FindLiveThread(pid);
  return live.tid ? live.state : 'Z';
}

char GroupState(pid_t pid) {
  const auto stat = ReadStatFile(absl::StrCat("/proc/", pid, "/stat").c_str());
  const auto st = stat ? StateAndParentFromStat(*stat) : std::nullopt;
  if (!st) return 0;
  return GroupState(pid, st->state);
}

}  // namespace gpuflame::inspect
