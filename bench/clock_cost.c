// What a CLOCK_MONOTONIC read costs on this host, as the injection library
// sees it when it times itself (inprocess/self_timing.h): the interval two
// back-to-back reads measure (least, median) and the cost of one read
// (a million in a row). Built by scripts/gpu-bundle.sh for the GPU host.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp(const void* a, const void* b) {
  const uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

int main(void) {
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
  return 0;
}
