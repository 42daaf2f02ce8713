/* A CUPTI client with none of gpuflame in it, for the launch-stack route
 * that needs no callbacks (tests/gpu/run_launch_route.sh): loaded by the
 * CUDA driver through CUDA_INJECTION64_PATH, it subscribes to nothing and
 * turns on, for the life of the process, kernel activity and, by
 * API_RECORDS:
 *   none     nothing more: kernel activity alone, the control;
 *   driver   (default) API activity records of the driver's launch calls
 *            alone (cuptiActivityEnableDriverApi, per call ID): each says
 *            its thread, start, end and correlation ID, so a uprobe's hit
 *            in the same call (bench/launch_uprobes.cc) can be joined to
 *            the kernel the call launched;
 *   runtime  the same for the runtime's launch calls;
 *   both     both.
 * Thread IDs are the system's (gettid), as BPF sees them. At exit it says
 * how many records of each came. With API_RECORDS_OUT=FILE it also writes
 * every record, one line each, for tests/gpu/join_launches.py:
 *   p <process ID>
 *   c <monotonic ns before> <CUPTI ns> <monotonic ns after>   (at start and at exit)
 *   a <D|R> <cbid> <tid> <start> <end> <correlation>
 *   k <correlation>
 * Its callbacks only count and write: what the records cost is CUPTI's. */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cupti_open.h"

/* Written by CUPTI's buffer threads and, at exit, closed: under |out_mu|. */
static FILE *out;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long kernels, driver_records, runtime_records, dropped;
static CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
static CUptiResult (*flush_all)(uint32_t);
static CUptiResult (*get_timestamp)(uint64_t *);
static CUptiResult (*get_dropped)(CUcontext, uint32_t, size_t *);

static uint64_t mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Where CUPTI's clock is against CLOCK_MONOTONIC (BPF's): five reads, each
 * between two of the monotonic clock; the join takes the tightest. */
static void say_clock(void) {
  for (int i = 0; i < 5 && out && get_timestamp; i++) {
    uint64_t cupti = 0;
    const uint64_t before = mono_ns();
    get_timestamp(&cupti);
    const uint64_t after = mono_ns();
    fprintf(out, "c %llu %llu %llu\n", (unsigned long long)before, (unsigned long long)cupti,
            (unsigned long long)after);
  }
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, 4 << 20);
  *size = *buffer ? 4 << 20 : 0;
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  (void)size;
  CUpti_Activity *r = NULL;
  pthread_mutex_lock(&out_mu);
  while (next_record(buffer, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      __atomic_add_fetch(&kernels, 1, __ATOMIC_RELAXED);
      if (out) fprintf(out, "k %u\n", ((const CUpti_ActivityKernel10 *)r)->correlationId);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_DRIVER || r->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)r;
      const int driver = r->kind == CUPTI_ACTIVITY_KIND_DRIVER;
      __atomic_add_fetch(driver ? &driver_records : &runtime_records, 1, __ATOMIC_RELAXED);
      if (out)
        fprintf(out, "a %c %u %u %llu %llu %u\n", driver ? 'D' : 'R', a->cbid, a->threadId,
                (unsigned long long)a->start, (unsigned long long)a->end, a->correlationId);
    }
  }
  pthread_mutex_unlock(&out_mu);
  size_t lost = 0;
  if (get_dropped && get_dropped(ctx, stream, &lost) == CUPTI_SUCCESS)
    __atomic_add_fetch(&dropped, lost, __ATOMIC_RELAXED);
  free(buffer);
}

static void report(void) {
  if (flush_all) flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  pthread_mutex_lock(&out_mu);
  say_clock();
  if (out) fclose(out);
  out = NULL;
  pthread_mutex_unlock(&out_mu);
  fprintf(stderr, "api_records: %lu kernel records, %lu driver API records, %lu runtime API records, %lu dropped\n",
          kernels, driver_records, runtime_records, dropped);
}

__attribute__((visibility("default"))) int InitializeInjection(void) {
  void *lib = open_cupti("api_records");
  if (!lib) return 1;
  CUptiResult (*reg)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) =
      dlsym(lib, "cuptiActivityRegisterCallbacks");
  CUptiResult (*enable)(CUpti_ActivityKind) = dlsym(lib, "cuptiActivityEnable");
  CUptiResult (*enable_driver)(CUpti_CallbackId, uint8_t) = dlsym(lib, "cuptiActivityEnableDriverApi");
  CUptiResult (*enable_runtime)(CUpti_CallbackId, uint8_t) = dlsym(lib, "cuptiActivityEnableRuntimeApi");
  CUptiResult (*thread_ids)(CUpti_ActivityThreadIdType) = dlsym(lib, "cuptiSetThreadIdType");
  next_record = dlsym(lib, "cuptiActivityGetNextRecord");
  flush_all = dlsym(lib, "cuptiActivityFlushAll");
  get_timestamp = dlsym(lib, "cuptiGetTimestamp");
  get_dropped = dlsym(lib, "cuptiActivityGetNumDroppedRecords");
  if (!reg || !enable || !enable_driver || !enable_runtime || !thread_ids || !next_record ||
      reg(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
    fprintf(stderr, "api_records: no activity API\n");
    return 1;
  }
  if (thread_ids(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) != CUPTI_SUCCESS)
    fprintf(stderr, "api_records: cuptiSetThreadIdType(SYSTEM) failed\n");
  const char *what = getenv("API_RECORDS") ? getenv("API_RECORDS") : "driver";
  const int driver = !strcmp(what, "driver") || !strcmp(what, "both");
  const int runtime = !strcmp(what, "runtime") || !strcmp(what, "both");
  const char *path = getenv("API_RECORDS_OUT");
  if (path && !(out = fopen(path, "w"))) fprintf(stderr, "api_records: cannot write %s\n", path);
  if (out) fprintf(out, "p %d\n", (int)getpid());
  say_clock();
  unsigned failed = enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS;
  for (size_t i = 0; driver && i < DRIVER_LAUNCH_IDS; i++) failed += enable_driver(driver_launch_ids[i], 1) != 0;
  for (size_t i = 0; runtime && i < RUNTIME_LAUNCH_IDS; i++) failed += enable_runtime(runtime_launch_ids[i], 1) != 0;
  atexit(report);
  fprintf(stderr, "api_records: kernel activity and %s launch records on (%u enables failed)%s%s\n", what, failed,
          out ? ", written to " : "", out ? path : "");
  return 1;
}
