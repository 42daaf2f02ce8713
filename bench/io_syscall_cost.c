/* The cost per syscall of the timeline's I/O hooks (bpf/io_calls.bpf.h):
 * times N calls of each kind in this process and prints ns per call.
 * bench/io_syscall_cost.sh runs it bare, under `gpuflame record` without
 * and with --timeline, and beside a recording it is not part of.
 *
 *   io_syscall_cost FILE N
 *
 * pread64 of 4 KiB (under the default 64 KiB filter: the hooks' full path,
 * counted, no record), pread64 of 128 KiB (a record per call, from the page
 * cache), openat then its close (a record per openat, with its path), getppid (a
 * syscall the hooks reject by its number: what every other syscall of the
 * machine pays). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s FILE N\n", argv[0]);
    return 2;
  }
  const char *path = argv[1];
  const long n = atol(argv[2]);
  static char buf[128 << 10];
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    perror(path);
    return 1;
  }
  double t0 = now_ns();
  for (long i = 0; i < n; i++) (void)!pread(fd, buf, 4096, 0);
  double t1 = now_ns();
  for (long i = 0; i < n; i++) (void)!pread(fd, buf, sizeof(buf), 0);
  double t2 = now_ns();
  for (long i = 0; i < n; i++) close(open(path, O_RDONLY));
  double t3 = now_ns();
  for (long i = 0; i < n; i++) (void)getppid();
  double t4 = now_ns();
  printf("pread_4k_ns %.0f pread_128k_ns %.0f openat_close_ns %.0f getppid_ns %.0f\n", (t1 - t0) / n, (t2 - t1) / n,
         (t3 - t2) / n, (t4 - t3) / n);
  return 0;
}
