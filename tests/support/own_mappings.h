#pragma once

// This process's own mappings of a file, for tests of what gpuflame maps.

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

namespace gpuflame::testing {

struct OwnMappings {
  int total = 0;
  // Private and not writable: where the kernel writes a file-wide uprobe's
  // breakpoint (and counts it in the file's semaphores) -- see
  // symbolizer/elf_begin.h.
  int breakpoint_targets = 0;
};

inline OwnMappings OwnMappingsOf(const std::string& path) {
  OwnMappings out;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms, offset, dev;
    unsigned long long inode = 0;
    if (!(fields >> range >> perms >> offset >> dev >> inode) || inode != st.st_ino || perms.size() < 4) continue;
    out.total++;
    if (perms[1] != 'w' && perms[3] == 'p') out.breakpoint_targets++;
  }
  return out;
}

}  // namespace gpuflame::testing
