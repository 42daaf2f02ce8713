/* The cost per NCCL call of record's NCCL probes (bpf/nccl_calls.bpf.h: a
 * uprobe and a return probe on each API): times N calls of the simulated
 * libnccl.so.2 (a test fixture; one rank, so no call waits) in this
 * process and prints ns per call. bench/nccl_call_cost.sh runs it bare and
 * under `gpuflame record` without and with --timeline.
 *
 *   nccl_call_cost LIBNCCL N
 *
 * ncclAllReduce of 1 MiB (a call and its return: two traps, one record at
 * the return), and ncclGroupStart + ncclGroupEnd (two calls). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
  char internal[128];
} ncclUniqueId;
typedef struct ncclComm *ncclComm_t;

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s LIBNCCL N\n", argv[0]);
    return 2;
  }
  void *nccl = dlopen(argv[1], RTLD_NOW);
  if (!nccl) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  int (*get_id)(ncclUniqueId *) = (int (*)(ncclUniqueId *))dlsym(nccl, "ncclGetUniqueId");
  int (*init)(ncclComm_t *, int, ncclUniqueId, int) =
      (int (*)(ncclComm_t *, int, ncclUniqueId, int))dlsym(nccl, "ncclCommInitRank");
  int (*all_reduce)(const void *, void *, size_t, int, int, ncclComm_t, void *) =
      (int (*)(const void *, void *, size_t, int, int, ncclComm_t, void *))dlsym(nccl, "ncclAllReduce");
  int (*group_start)(void) = (int (*)(void))dlsym(nccl, "ncclGroupStart");
  int (*group_end)(void) = (int (*)(void))dlsym(nccl, "ncclGroupEnd");
  int (*destroy)(ncclComm_t) = (int (*)(ncclComm_t))dlsym(nccl, "ncclCommDestroy");
  if (!get_id || !init || !all_reduce || !group_start || !group_end || !destroy) {
    fprintf(stderr, "%s lacks an NCCL API\n", argv[1]);
    return 1;
  }
  const long n = atol(argv[2]);
  ncclUniqueId id;
  ncclComm_t comm;
  if (get_id(&id) != 0 || init(&comm, 1, id, 0) != 0) {
    fprintf(stderr, "no communicator\n");
    return 1;
  }
  static float buf[1 << 18];
  double t0 = now_ns();
  for (long i = 0; i < n; i++) all_reduce(buf, buf, 1 << 18, 7 /* ncclFloat32 */, 0 /* ncclSum */, comm, NULL);
  double t1 = now_ns();
  for (long i = 0; i < n; i++) {
    group_start();
    group_end();
  }
  double t2 = now_ns();
  printf("allreduce_ns %.0f group_start_end_ns %.0f\n", (t1 - t0) / n, (t2 - t1) / n);
  destroy(comm);
  return 0;
}
