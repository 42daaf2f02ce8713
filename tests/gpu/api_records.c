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
 *   both     both;
 *   copies   copy and memset activity too, and API records of every driver
 *            call (CUPTI_ACTIVITY_KIND_DRIVER): which driver calls'
 *            correlation IDs a copy's or memset's record carries
 *            (tests/gpu/run_copy_correlation.sh); copies-both, of every
 *            runtime call too (CUPTI_ACTIVITY_KIND_RUNTIME). Costly: for
 *            that question only;
 *   driver-late, driver-windows, driver-primed   the driver's launch records
 *            switched by a thread of this client, as the launch route's
 *            windows switch them in a process found running: on from 2 s
 *            for good (late); on 0.5 s in every 1 s from 1 s (windows); the
 *            same after 0.2 s on at start (primed), or after 4 s on from the
 *            start, through the context's creation (cycle). At exit it says, per
 *            window, the kernels that started in it and the driver records
 *            that did: whether records switched on mid-run come at all.
 * Thread IDs are the system's (gettid), as BPF sees them. At exit it says
 * how many records of each came. With API_RECORDS_OUT=FILE it also writes
 * every record, one line each, for tests/gpu/join_launches.py:
 *   p <process ID>
 *   c <monotonic ns before> <CUPTI ns> <monotonic ns after>   (at start and at exit)
 *   a <D|R> <cbid> <tid> <start> <end> <correlation>
 *   k <correlation>
 *   m <correlation> <copy kind>   (copies mode: a copy)
 *   s <correlation>               (copies mode: a memset)
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
static unsigned long kernels, copies, driver_records, runtime_records, dropped;
static CUptiResult (*enable_driver)(CUpti_CallbackId, uint8_t);

/* The driver-* modes' windows, on CUPTI's clock: [on, off), and what
 * started in each. Written by the switching thread before it publishes
 * |windows|; counted under |out_mu|. */
#define MAX_WINDOWS 64
static struct {
  uint64_t on, off;
  unsigned long kernels, records;
} window[MAX_WINDOWS];
static int windows;

static void count_in_window(uint64_t start, int record) {
  const int n = __atomic_load_n(&windows, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++)
    if (start >= window[i].on && (!window[i].off || start < window[i].off)) {
      if (record) window[i].records++;
      else window[i].kernels++;
      return;
    }
}
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
      count_in_window(((const CUpti_ActivityKernel10 *)r)->start, 0);
      if (out) fprintf(out, "k %u\n", ((const CUpti_ActivityKernel10 *)r)->correlationId);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      __atomic_add_fetch(&copies, 1, __ATOMIC_RELAXED);
      const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
      if (out) fprintf(out, "m %u %u\n", m->correlationId, (unsigned)m->copyKind);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      __atomic_add_fetch(&copies, 1, __ATOMIC_RELAXED);
      if (out) fprintf(out, "s %u\n", ((const CUpti_ActivityMemset4 *)r)->correlationId);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_DRIVER || r->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)r;
      const int driver = r->kind == CUPTI_ACTIVITY_KIND_DRIVER;
      __atomic_add_fetch(driver ? &driver_records : &runtime_records, 1, __ATOMIC_RELAXED);
      if (driver) count_in_window(a->start, 1);
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
  fprintf(stderr,
          "api_records: %lu kernel records, %lu copy and memset records, %lu driver API records, %lu runtime API "
          "records, %lu dropped\n",
          kernels, copies, driver_records, runtime_records, dropped);
  for (int i = 0; i < windows; i++)
    fprintf(stderr, "api_records: window %d (%.3f s long): %lu kernels started in it, %lu driver launch records\n", i,
            window[i].off ? (double)(window[i].off - window[i].on) / 1e9 : -1.0, window[i].kernels, window[i].records);
}

static void set_launch_records(uint8_t on) {
  for (size_t i = 0; i < DRIVER_LAUNCH_IDS; i++) enable_driver(driver_launch_ids[i], on);
}

static void sleep_s(double s) {
  struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&t, NULL);
}

/* Opens window |i| now (records on) or closes it. */
static void window_edge(int i, int open) {
  uint64_t now = 0;
  if (get_timestamp) get_timestamp(&now);
  if (open) {
    window[i].on = now;
    window[i].off = 0;
    set_launch_records(1);
    __atomic_store_n(&windows, i + 1, __ATOMIC_RELEASE);
  } else {
    set_launch_records(0);
    window[i].off = now;
  }
}

static void *switcher(void *arg) {
  const char *what = arg;
  if (!strcmp(what, "driver-late")) {
    sleep_s(2);
    window_edge(0, 1);
    return NULL;
  }
  int i = 0;
  if (!strcmp(what, "driver-primed") || !strcmp(what, "driver-cycle")) {
    window_edge(i, 1);
    sleep_s(!strcmp(what, "driver-cycle") ? 4 : 0.2);
    window_edge(i++, 0);
  }
  sleep_s(1);
  for (; i < MAX_WINDOWS; i++) {
    window_edge(i, 1);
    sleep_s(0.5);
    window_edge(i, 0);
    sleep_s(0.5);
  }
  return NULL;
}

__attribute__((visibility("default"))) int InitializeInjection(void) {
  void *lib = open_cupti("api_records");
  if (!lib) return 1;
  CUptiResult (*reg)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) =
      dlsym(lib, "cuptiActivityRegisterCallbacks");
  CUptiResult (*enable)(CUpti_ActivityKind) = dlsym(lib, "cuptiActivityEnable");
  enable_driver = dlsym(lib, "cuptiActivityEnableDriverApi");
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
  const int switched = !strncmp(what, "driver-", 7);
  const int runtime = !strcmp(what, "runtime") || !strcmp(what, "both");
  const char *path = getenv("API_RECORDS_OUT");
  if (path && !(out = fopen(path, "w"))) fprintf(stderr, "api_records: cannot write %s\n", path);
  if (out) fprintf(out, "p %d\n", (int)getpid());
  say_clock();
  unsigned failed = enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS;
  if (!strncmp(what, "copies", 6)) {
    failed += enable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS;
    failed += enable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS;
    failed += enable(CUPTI_ACTIVITY_KIND_DRIVER) != CUPTI_SUCCESS;
    /* With the runtime's records on too, a runtime call's driver calls get
     * none of their own (an H100, session 38): its copies carry the
     * runtime call's ID, which says nothing of the route's driver-only case. */
    if (!strcmp(what, "copies-both")) failed += enable(CUPTI_ACTIVITY_KIND_RUNTIME) != CUPTI_SUCCESS;
  }
  pthread_t t;
  if (switched && pthread_create(&t, NULL, switcher, (void *)what) == 0) pthread_detach(t);
  for (size_t i = 0; driver && i < DRIVER_LAUNCH_IDS; i++) failed += enable_driver(driver_launch_ids[i], 1) != 0;
  for (size_t i = 0; runtime && i < RUNTIME_LAUNCH_IDS; i++) failed += enable_runtime(runtime_launch_ids[i], 1) != 0;
  atexit(report);
  fprintf(stderr, "api_records: kernel activity and %s launch records on (%u enables failed)%s%s\n", what, failed,
          out ? ", written to " : "", out ? path : "");
  return 1;
}
