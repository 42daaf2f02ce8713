#include "agent/selection.h"

#include <algorithm>
#include <vector>

namespace gpuflame::profiler {
namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

bool Selected(const Selectors& s, pid_t pid, const std::string& process, const PodInfo& pod) {
  if (s.Empty()) return true;
  if (std::find(s.pids.begin(), s.pids.end(), pid) != s.pids.end()) return true;
  if (Contains(s.processes, process)) return true;
  if (!pod.namespace_name.empty() && Contains(s.namespaces, pod.namespace_name)) return true;
  if (!pod.pod.empty() && Contains(s.pods, pod.pod)) return true;
  return false;
}

}  // namespace gpuflame::profiler
