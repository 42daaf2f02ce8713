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

// Whether the thread of this /proc stat file has its memory still: not
// exiting (PF_EXITING: its memory goes early in its exit, while its state
// may still say running), not a zombie, and there at all.
bool HasMemory(const std::string& path) {
  const auto stat = ReadStatFile(path.c_str());
  if (!stat) return false;
  const auto st = StateAndParentFromStat(*stat);
  const auto flags = FlagsFromStat(*stat);
  return st && flags && st->state != 'Z' && st->state != 'X' && !(*flags & kPfExiting);
}

// The state letter of one /proc stat file, 0 if unreadable.
char StateOf(const std::string& path) {
  const auto stat = ReadStatFile(path.c_str());
  if (!stat) return 0;
  const auto st = StateAndParentFromStat(*stat);
  if (!st) return 0;
  return st->state;
}

}  // namespace

pid_t LiveThreadOf(pid_t pid) {
  const std::string dir = absl::StrCat("/proc/", pid, "/task");
  if (HasMemory(absl::StrCat(dir, "/", pid, "/stat"))) return pid;  // the leader, as long as it lives
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (!d) return 0;
  int looked = 0;
  while (const dirent* e = readdir(d.get())) {
    if (++looked > kMaxThreadsLooked) break;
    char* end = nullptr;
    const long tid = std::strtol(e->d_name, &end, 10);
    if (tid <= 0 || *end != '\0' || tid == pid) continue;
    if (HasMemory(absl::StrCat(dir, "/", tid, "/stat"))) return static_cast<pid_t>(tid);
  }
  return 0;
}

char GroupState(pid_t pid) {
  const char leader = StateOf(absl::StrCat("/proc/", pid, "/stat"));
  if (leader != 'Z') return leader;
  const pid_t live = LiveThreadOf(pid);
  if (live == 0) return 'Z';
  // It may end between the two reads: then the group is as good as ended.
  const char state = StateOf(absl::StrCat("/proc/", pid, "/task/", live, "/stat"));
  if (state == 0) return 'Z';
  return state;
}

}  // namespace gpuflame::inspect
