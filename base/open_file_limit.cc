#include "base/open_file_limit.h"

#include <sys/resource.h>

namespace gpuflame::base {
namespace {

// Set once by RaiseOpenFileLimit before any thread starts; read after fork.
rlimit original{};
bool raised = false;

}  // namespace

void RaiseOpenFileLimit() {
  rlimit now{};
  if (getrlimit(RLIMIT_NOFILE, &now) != 0 || now.rlim_cur >= now.rlim_max) return;
  rlimit wanted = now;
  wanted.rlim_cur = now.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &wanted) != 0) return;  // left as it was: nothing to put back
  original = now;
  raised = true;
}

void RestoreOpenFileLimit() {
  if (raised) setrlimit(RLIMIT_NOFILE, &original);
}

}  // namespace gpuflame::base
