// What a CLOCK_MONOTONIC read costs on this host, as the injection library
// sees it when it times itself (inprocess/self_timing.h): the interval two
// back-to-back reads measure (least, median) and the cost of one read
// (a million in a row). Built by scripts/gpu-bundle.sh for the GPU host.
//   clock_cost [KIB...]: then, for each KIB, what a pair around an empty call
//   costs with KIB touched between pairs (the step's work evicting the
//   clock's lines, which the least above, measured warm, does not see),
//   against an rdtscp pair, which touches no memory.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp(const void* a, const void* b) {
  const uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

static volatile int sink_calls;
__attribute__((noinline)) static void empty_call(void) { sink_calls++; }

static void polluted(size_t kib) {
  enum { kRounds = 20000 };
  const size_t bytes = kib * 1024;
  char* buf = malloc(bytes + 64);
  if (!buf) return;
  // The TSC's rate, against the clock, over 50 ms.
  const uint64_t m0 = now_ns(), t0 = __rdtsc();
  const struct timespec pause = {0, 50000000};
  nanosleep(&pause, NULL);
  const double ns_per_tick = (double)(now_ns() - m0) / (double)(__rdtsc() - t0);
  uint64_t clock_total = 0, tsc_total = 0;
  unsigned aux;
  for (int r = 0; r < kRounds; r++) {
    for (size_t i = 0; i < bytes; i += 64) buf[i]++;
    if (r & 1) {
      const uint64_t a = now_ns();
      empty_call();
      clock_total += now_ns() - a;
    } else {
      const uint64_t a = __rdtscp(&aux);
      empty_call();
      tsc_total += __rdtscp(&aux) - a;
    }
  }
  printf("clock_cost: %zu KiB touched between pairs: a clock pair %.1f ns, an rdtscp pair %.1f ns (means)\n", kib,
         (double)clock_total / (kRounds / 2), (double)tsc_total * ns_per_tick / (kRounds / 2));
  free(buf);
}

int main(int argc, char** argv) {
  enum { kPairs = 100001, kReads = 1000000 };
  static uint64_t gap[kPairs];
  for (int i = 0; i < kPairs; i++) {
    const uint64_t a = now_ns();
    gap[i] = now_ns() - a;
  }
  qsort(gap, kPairs, sizeof(gap[0]), cmp);
  const uint64_t start = now_ns();
  uint64_t sink = 0;
  for (int i = 0; i < kReads; i++) sink += now_ns();
  const double per_read = (double)(now_ns() - start) / kReads;
  printf("clock_cost: empty interval least %llu ns, median %llu ns, p99 %llu ns; one read %.1f ns (%llu)\n",
         (unsigned long long)gap[0], (unsigned long long)gap[kPairs / 2], (unsigned long long)gap[kPairs * 99 / 100],
         per_read, (unsigned long long)(sink & 1));
  for (int i = 1; i < argc; i++) polluted((size_t)strtoul(argv[i], NULL, 10));
  return 0;
}
