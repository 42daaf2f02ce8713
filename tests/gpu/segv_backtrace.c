/* A crash reporter for GPU runs (LD_PRELOAD=libsegv_backtrace.so): on
 * SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT it writes the crashing thread's
 * native frames (module + offset, with the symbol where dladdr finds one)
 * and its name to stderr, then lets the signal kill the process as it would
 * have. For rare crashes on the device machine, which keeps no core files
 * and has no debugger: the offsets are resolved here against the unstripped
 * build (addr2line -e build/libgpuflame_cupti.so 0x...).
 * Async-signal-safety: backtrace() is primed at load (its first call
 * dlopens libgcc_s); dladdr and snprintf are not strictly safe, acceptable
 * for a process that is dying anyway. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static void report(int sig, siginfo_t *info, void *uctx) {
  (void)uctx;
  char line[512];
  char name[17] = {0};
  prctl(PR_GET_NAME, name, 0, 0, 0);
  int n = snprintf(line, sizeof(line), "segv_backtrace: signal %d at address %p in thread %d (%s)\n", sig,
                   info ? info->si_addr : NULL, (int)gettid(), name);
  write(2, line, n > 0 && n < (int)sizeof(line) ? (size_t)n : sizeof(line) - 1);
  void *frames[64];
  int count = backtrace(frames, 64);
  for (int i = 0; i < count; i++) {
    Dl_info d;
    memset(&d, 0, sizeof(d));
    if (dladdr(frames[i], &d) && d.dli_fname) {
      n = snprintf(line, sizeof(line), "  #%d %s+0x%lx %s\n", i, d.dli_fname,
                   (unsigned long)((char *)frames[i] - (char *)d.dli_fbase), d.dli_sname ? d.dli_sname : "");
    } else {
      n = snprintf(line, sizeof(line), "  #%d %p\n", i, frames[i]);
    }
    write(2, line, n > 0 && n < (int)sizeof(line) ? (size_t)n : sizeof(line) - 1);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  void *prime[2];
  backtrace(prime, 2);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = report;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  for (unsigned i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) sigaction(sigs[i], &sa, NULL);
}
