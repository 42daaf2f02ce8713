#include "profiler/run_control.h"

#include <signal.h>

namespace gpuflame::profiler {
namespace {

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

}  // namespace

void InstallStopHandlers(bool sigint) {
  struct sigaction sa{};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  if (sigint) {
    sigaction(SIGINT, &sa, nullptr);
  } else {
    signal(SIGINT, SIG_IGN);
  }
}

bool StopRequested() { return g_stop != 0; }

}  // namespace gpuflame::profiler
