#include "profiler/process/run_control.h"

#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>

namespace gpuflame::profiler {
namespace {

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

volatile sig_atomic_t g_forward_to = 0;  // pid_t; 0: none
volatile sig_atomic_t g_forwarded = 0;   // the last signal passed on
// kill() is async-signal-safe. A signal the kernel raised itself (SIGINT
// from the terminal's Ctrl-C, si_code SI_KERNEL) went to the whole
// foreground process group, the command included: not sent twice.
void OnForwardedSignal(int sig, siginfo_t* info, void*) {
  if (info && info->si_code > 0) return;
  const int saved = errno;
  if (g_forward_to > 0) kill(static_cast<pid_t>(g_forward_to), sig);
  g_forwarded = sig;
  errno = saved;
}

// Lock-free, so the crash handler can read it: slots are claimed once. In
// memory shared with the guardian (profiler/process/guardian.h), which
// reads it after we are gone.
constexpr int kMaxTargets = 4096;
struct Targets {
  std::atomic<int> count{0};
  std::atomic<pid_t> pids[kMaxTargets];
};
std::atomic<Targets*> g_targets{nullptr};
std::atomic<bool> g_guardian_resumes{false};

Targets* SharedTargets() {
  if (Targets* t = g_targets.load()) return t;
  void* m = mmap(nullptr, sizeof(Targets), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  static Targets private_copy;  // no shared memory: the crash handler still works
  Targets* t = m == MAP_FAILED ? &private_copy : new (m) Targets();
  Targets* expected = nullptr;
  if (g_targets.compare_exchange_strong(expected, t)) return t;
  if (m != MAP_FAILED) munmap(m, sizeof(Targets));
  return expected;
}

void OnCrash(int sig) {
  static const char kMsg[] = "gpuflame: crashed; resuming the processes it may have held stopped. Backtrace:\n";
  ssize_t ignored = write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
  (void)ignored;
  void* frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  if (Targets* t = g_targets.load(); t && !g_guardian_resumes.load()) {
    const int count = t->count.load();
    for (int i = 0; i < count && i < kMaxTargets; i++)
      if (pid_t p = t->pids[i].load(); p > 0) kill(p, SIGCONT);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void RememberTarget(pid_t pid) {
  Targets* t = SharedTargets();
  const int count = t->count.load();
  for (int i = 0; i < count && i < kMaxTargets; i++)
    if (t->pids[i].load() == pid) return;
  const int slot = t->count.fetch_add(1);
  if (slot < kMaxTargets) t->pids[slot].store(pid);
}

std::vector<pid_t> RememberedTargets() {
  Targets* t = SharedTargets();
  std::vector<pid_t> out;
  const int count = std::min(t->count.load(), kMaxTargets);
  for (int i = 0; i < count; i++)
    if (pid_t p = t->pids[i].load(); p > 0) out.push_back(p);
  return out;
}

void LeaveResumingToGuardian() { g_guardian_resumes.store(true); }

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

void ForwardStopSignalsTo(pid_t child) {
  g_forward_to = child;
  struct sigaction sa {};
  sa.sa_sigaction = OnForwardedSignal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

int TakeForwardedSignal() {
  const int sig = g_forwarded;
  g_forwarded = 0;
  return sig;
}

}  // namespace gpuflame::profiler
