#include "inprocess/last_thread.h"

#include <cstdio>
#include <memory>
#include <string_view>

#include "inspect/proc_stat.h"

namespace gpuflame::inprocess {

bool OnlyThisThreadLeft() {
  // The leader's stat line: its state is the process's first field after
  // the name, which the workload chose (prctl) and may be anything: the
  // parser counts from the last ')'. 1 KiB holds any line (the name is at
  // most 16 bytes and the 50-odd numbers are under 1 KiB).
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen("/proc/self/stat", "re"), std::fclose);
  if (!f) return false;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof(buf), f.get());
  const std::string_view stat(buf, n);
  const auto state = inspect::StateAndParentFromStat(stat);
  const auto threads = inspect::ThreadsFromStat(stat);
  return state && state->state == 'Z' && threads && *threads == 2;
}

}  // namespace gpuflame::inprocess
