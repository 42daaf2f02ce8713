// `gpuflame timeline -o FILE [--agent HOST:PORT] [--pid PID ...] [--pod POD]
// [--namespace NS] [--seconds S]`: asks a running agent's flight recorder
// (GET /timeline on its metrics port) for the trace of a process or a pod's
// last seconds and saves it, gzipped Chrome trace JSON as record writes.
#ifndef GPUFLAME_APP_TIMELINE_COMMAND_H_
#define GPUFLAME_APP_TIMELINE_COMMAND_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace gpuflame::profiler {

struct TimelineFetchOptions {
  std::string agent = "127.0.0.1:9400";  // HOST:PORT of the agent's metrics server
  std::vector<pid_t> pids;
  std::string namespace_name;
  std::string pod;
  double seconds = 0;  // 0: the agent's whole window
  std::string output;
};

// The request's path and query ("/timeline?pid=12&seconds=3").
std::string TimelineRequestPath(const TimelineFetchOptions& options);
int RunTimelineFetch(const TimelineFetchOptions& options);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_APP_TIMELINE_COMMAND_H_
