// The gates' list of the processes they stopped (`held`, struct gf_held in
// bpf/gpuflame_abi.h), read through a descriptor of the map that the caller
// owns: gpuflame's guardian (profiler/process/guardian.h) reads it after
// gpuflame is gone, through its own reference, since gpuflame's skeleton
// went with it. Plain bpf() calls on that descriptor, no libbpf object: safe
// in a forked process. Only the kernel writes the map.
#ifndef GPUFLAME_PROFILER_PROBES_HELD_MAP_H_
#define GPUFLAME_PROFILER_PROBES_HELD_MAP_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpuflame::profiler {

struct HeldProcess {
  pid_t pid = 0;
  uint64_t start_ns = 0;  // its leader's start_boottime
  uint64_t stop_ns = 0;   // when the gate's SIGSTOP was sent (0: not yet); no SIGCONT has reached it since
};

// Up to |max| entries of the map behind |map_fd|.
std::vector<HeldProcess> ReadHeld(int map_fd, size_t max);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROBES_HELD_MAP_H_
