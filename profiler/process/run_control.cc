#include "profiler/process/run_control.h"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace gpuflame::profiler {
namespace {

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

// Lock-free, so the crash handler can read it: slots are claimed once.
constexpr int kMaxTargets = 4096;
std::atomic<pid_t> g_targets[kMaxTargets];
std::atomic<int> g_target_count{0};

void OnCrash(int sig) {
  static const char kMsg[] = "gpuflame: crashed; resuming the processes it may have held stopped. Backtrace:\n";
  ssize_t ignored = write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
  (void)ignored;
  void* frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  int count = g_target_count.load();
  for (int i = 0; i < count && i < kMaxTargets; i++)
    if (pid_t p = g_targets[i].load(); p > 0) kill(p, SIGCONT);
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void RememberTarget(pid_t pid) {
  int count = g_target_count.load();
  for (int i = 0; i < count && i < kMaxTargets; i++)
    if (g_targets[i].load() == pid) return;
  int slot = g_target_count.fetch_add(1);
  if (slot < kMaxTargets) g_targets[slot].store(pid);
}

void InstallCrashHandler() {
  void* warm[1];
  backtrace(warm, 1);  // loads libgcc now: not from inside the handler
  struct sigaction sa{};
  sa.sa_handler = OnCrash;
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) sigaction(sig, &sa, nullptr);
}

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
