#include "inprocess/last_thread.h"

#include "inspect/proc_stat.h"

namespace gpuflame::inprocess {

bool OnlyThisThreadLeft() {
  // The leader's state and the thread count, after the name, which the
  // workload chose (prctl) and may be anything: the parsers count from
  // its last ')'.
  const auto stat = inspect::ReadStatFile("/proc/self/stat");
  if (!stat) return false;
  const auto state = inspect::StateAndParentFromStat(*stat);
  const auto threads = inspect::ThreadsFromStat(*stat);
  return state && state->state == 'Z' && threads && *threads == 2;
}

}  // namespace gpuflame::inprocess
