// Kernel time in a gpuflame built without CUPTI's headers (no CUDA toolkit
// at build time; cupti/CMakeLists.txt): there is none. The library says so
// to the agent at start and every flush period while one listens (an agent
// may attach at any time), as gpuflame:status GF_CUPTI_NOT_BUILT, and the
// agent says it once per process in its warnings; memory and CPU profiles
// are unaffected. Nothing is said on the workload's stderr: the build, not
// the workload, lacks it.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cupti/kernel_time.h"
#include "cupti/library_util.h"
#include "cupti/probes.h"

namespace gpuflame::cupti {
namespace {

bool wanted = false;  // set once, before the flusher starts

// The agent attaches the kernel-time probes before it takes the library's
// status or tensor events, and refuses a library that lacks a site: the
// sites are here, never reached.
__attribute__((used, noinline)) void KernelTimeProbeSites() {
  FireLaunch(0, 0);
  FireBatch(nullptr, 0);
  FireName(0, "");
}

}  // namespace

bool StartKernelTime(uint64_t, uint64_t) {
  const char* kernel_time = std::getenv("GPUFLAME_KERNEL_TIME");
  if (kernel_time && std::strcmp(kernel_time, "0") == 0) return false;
  wanted = true;
  FireStatus(GF_CUPTI_NOT_BUILT);
  Trace("kernel time not built in (no CUPTI headers at build time)");
  return false;
}

void KernelTimeTick(uint64_t) {}

void KernelTimeFlush() {
  if (wanted) FireStatus(GF_CUPTI_NOT_BUILT);
}

void KernelTimeSayNamesAgain() {}
KernelTimeCost KernelTimeCostSoFar() { return {}; }
void KernelTimeCallOffDetach(bool) {}
bool KernelTimeNeedsFinalFlush() { return false; }
void KernelTimeFinalFlush() {}
void KernelTimeLastApiSpans() {}
void KernelTimeTraceCosts() {}

}  // namespace gpuflame::cupti
