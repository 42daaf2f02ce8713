#include "profiler/probes/held_map.h"

#include <bpf/bpf.h>

#include "bpf/gpuflame_abi.h"

namespace gpuflame::profiler {

std::vector<HeldProcess> ReadHeld(int map_fd, size_t max) {
  std::vector<HeldProcess> out;
  uint32_t key = 0, next = 0;
  const uint32_t* prev = nullptr;
  // At most GF_HELD_MAX keys; an entry deleted under the walk restarts it
  // from the first key, hence the bound on the calls themselves.
  for (size_t calls = 0; out.size() < max && calls < 4 * GF_HELD_MAX; calls++) {
    if (bpf_map_get_next_key(map_fd, prev, &next)) break;
    gf_held value{};
    if (!bpf_map_lookup_elem(map_fd, &next, &value))
      out.push_back({static_cast<pid_t>(next), value.start_ns, value.stop_ns});
    key = next;
    prev = &key;
  }
  return out;
}

}  // namespace gpuflame::profiler
