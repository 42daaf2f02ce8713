/* A CUPTI client with none of gpuflame in it, for the crash hunt: loaded by
 * the CUDA driver through CUDA_INJECTION64_PATH, it subscribes to CUPTI and,
 * from a thread of its own every TOGGLE_US microseconds (default 1000) while
 * the workload launches, switches what TOGGLE_WHAT names:
 *   callbacks  (default) the launch callbacks gpuflame once switched
 *              (cupti/kernel_time_cupti.cc's IsLaunch);
 *   activity   kernel, memcpy and memset activity (cuptiActivityEnable and
 *              cuptiActivityDisable), callbacks left off: what the agent's
 *              activity duty cycle does;
 *   none       nothing: the launch callbacks enabled once and left on, the
 *              control;
 *   stack-sites nothing either: on once, only the callbacks gpuflame itself
 *              enables for good (its stack sites: the driver's launches, the
 *              runtime's graph launches, copies and memsets; not the
 *              runtime's kernel launches),
 *              for what CUPTI's dispatch to them costs a workload
 *              (run_cupti_callback_cost.sh);
 *   driver-launches the driver's kernel and graph launches alone, on
 *              once: whether the dispatch's cost is per enabled call or per
 *              domain;
 *   api-activity the driver's launch calls' API activity records
 *              (cuptiActivityEnableDriverApi, per call ID), kernel activity
 *              on once, no callbacks: whether launch records can come in
 *              windows (tests/gpu/run_launch_route.sh), since CUPTI makes
 *              them from the very dispatch whose switching crashed
 *              (subscribed too, as every mode here: run_launch_route.sh's
 *              api_records.c measures the records' cost without that);
 *   activity-once kernel, memcpy and memset activity on from the start and
 *              off, once, TOGGLE_OFF_AFTER_MS (default 3000) later, no
 *              callbacks: whether activity leaves a cost behind it;
 *   subscribe  subscribed and nothing enabled: what a subscriber alone
 *              costs (run_cupti_callback_cost.sh);
 *   correlation nothing switched either: the launch callbacks and kernel
 *              activity on once, and at exit which correlation IDs the
 *              nested callbacks and the kernels' records carried, and how
 *              many launches reached the driver with no runtime call
 *              around them (cuBLAS's, Triton's, NCCL's): what launch
 *              stacks taken in the driver domain alone would join.
 * With TOGGLE_OFF_AFTER_CALLS=N (stack-sites only) the toggler undoes it
 * once, when the callback has run N times, by TOGGLE_OFF_HOW: disable (the
 * callbacks switched off), unsubscribe (cuptiUnsubscribe) or finalize
 * (cuptiFinalize, CUPTI's detach, from a callback at an API call's exit): whether what the callbacks cost leaves
 * with them, which decides whether an agent's leaving can end it. With
 * TOGGLE_RESUBSCRIBE=1 after a finalize it subscribes again and enables
 * the same callbacks, as the library does for a new agent, and says at
 * exit the last correlation ID before the detach and the first after:
 * whether IDs held across it could meet new ones.
 * Its callback only counts (and, for correlation, keeps the first few). If the workload crashes under this alone, the
 * crash is CUPTI's switching while launches run, not gpuflame's code. */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cupti_open.h"

static CUptiResult (*enable_cb)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
static CUpti_SubscriberHandle sub;
static unsigned long calls, exits_without_enter, toggles;
static __thread int depth;

/* correlation: the first kSeen callbacks and kernel records, and the
 * driver launches by whether a runtime call was around them. */
enum { kSeen = 48 };
static struct {
  int domain, site, depth;
  CUpti_CallbackId cbid;
  uint32_t correlation;
} seen[kSeen];
static unsigned long seen_n, driver_outermost, driver_nested, kernel_n;
static uint32_t kernels[kSeen];
static int correlation_mode;

/* TOGGLE_OFF_HOW=finalize: 1 asked, 2 under way, 3 done, 4 failed. */
static int detach;
static CUptiResult (*finalize)(void);
static CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
/* TOGGLE_RESUBSCRIBE: the last correlation ID before the detach, the first
 * after the second subscription. */
static int resubscribe, resubscribed;
static uint32_t last_before, first_after;

static void CUPTIAPI on_cb(void *u, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data) {
  (void)u;
  const CUpti_CallbackData *c = data;
  __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
  int asked = 1;
  if (c->callbackSite == CUPTI_API_EXIT && __atomic_load_n(&detach, __ATOMIC_ACQUIRE) == 1 &&
      __atomic_compare_exchange_n(&detach, &asked, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    __atomic_store_n(&detach, finalize() == CUPTI_SUCCESS ? 3 : 4, __ATOMIC_RELEASE);
    return;
  }
  if (resubscribe && c->correlationId) {
    uint32_t none = 0;
    if (!__atomic_load_n(&resubscribed, __ATOMIC_ACQUIRE))
      __atomic_store_n(&last_before, c->correlationId, __ATOMIC_RELAXED);
    else __atomic_compare_exchange_n(&first_after, &none, c->correlationId, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  }
  if (correlation_mode) {
    const unsigned long i = __atomic_fetch_add(&seen_n, 1, __ATOMIC_RELAXED);
    if (i < kSeen) {
      seen[i].domain = d, seen[i].site = c->callbackSite, seen[i].depth = depth;
      seen[i].cbid = id, seen[i].correlation = c->correlationId;
    }
    if (d == CUPTI_CB_DOMAIN_DRIVER_API && c->callbackSite == CUPTI_API_ENTER)
      __atomic_add_fetch(depth > 0 ? &driver_nested : &driver_outermost, 1, __ATOMIC_RELAXED);
    /* The driver's calls are not counted in |depth|: a runtime call's. */
    if (d == CUPTI_CB_DOMAIN_DRIVER_API) return;
  }
  if (c->callbackSite == CUPTI_API_ENTER) {
    depth++;
    (void)*(volatile uint32_t *)&c->correlationId;
  } else if (depth > 0) {
    depth--;
  } else {
    __atomic_add_fetch(&exits_without_enter, 1, __ATOMIC_RELAXED);
  }
}

/* The runtime's copies and memsets, after its launches (runtime_launch_ids). */
static const CUpti_CallbackId runtime_copy_ids[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020,      CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000};

static int stack_sites_only, driver_only;

/* gpuflame's stack sites leave out the runtime's kernel launches (it takes
 * their graph launches, copies and memsets). */
static void set_all(uint32_t on) {
  for (size_t i = stack_sites_only ? RUNTIME_KERNEL_LAUNCH_IDS : 0; !driver_only && i < RUNTIME_LAUNCH_IDS; i++)
    enable_cb(on, sub, CUPTI_CB_DOMAIN_RUNTIME_API, runtime_launch_ids[i]);
  for (size_t i = 0; !driver_only && i < sizeof(runtime_copy_ids) / sizeof(runtime_copy_ids[0]); i++)
    enable_cb(on, sub, CUPTI_CB_DOMAIN_RUNTIME_API, runtime_copy_ids[i]);
  for (size_t i = 0; i < DRIVER_LAUNCH_IDS; i++)
    enable_cb(on, sub, CUPTI_CB_DOMAIN_DRIVER_API, driver_launch_ids[i]);
  toggles++;
}

static CUptiResult (*activity_enable)(CUpti_ActivityKind), (*activity_disable)(CUpti_ActivityKind);
static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                           CUPTI_ACTIVITY_KIND_MEMSET};

static void set_activity(uint32_t on) {
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) (on ? activity_enable : activity_disable)(kinds[i]);
  toggles++;
}

static CUptiResult (*enable_driver_api)(CUpti_CallbackId, uint8_t);

static void set_api_activity(uint32_t on) {
  for (size_t i = 0; i < DRIVER_LAUNCH_IDS; i++) enable_driver_api(driver_launch_ids[i], (uint8_t)on);
  toggles++;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, 1 << 20);
  *size = *buffer ? 1 << 20 : 0;
  *max_records = 0;
}

static CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  (void)ctx, (void)stream, (void)size;
  CUpti_Activity *r = NULL;
  while (correlation_mode && next_record && next_record(buffer, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    if (kernel_n < kSeen) kernels[kernel_n] = ((const CUpti_ActivityKernel10 *)r)->correlationId;
    kernel_n++;
  }
  free(buffer);
}

/* Set at exit, before CUPTI's teardown: a switch during it crashes inside
 * CUPTI (a first version of this client died in every run that way), which
 * is an exit race of the client's, not the crash hunted here. */
static int stopping;
static pthread_t toggler_thread;

static CUptiResult (*flush_all)(uint32_t);
static CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
static const char *undone = "";

/* One switch, once the workload is well into its launches. */
static void undo_after(unsigned long n) {
  while (!__atomic_load_n(&stopping, __ATOMIC_ACQUIRE) && __atomic_load_n(&calls, __ATOMIC_RELAXED) < n) usleep(10000);
  if (__atomic_load_n(&stopping, __ATOMIC_ACQUIRE)) return;
  const char *how = getenv("TOGGLE_OFF_HOW") ? getenv("TOGGLE_OFF_HOW") : "disable";
  CUptiResult r = CUPTI_SUCCESS;
  if ((strcmp(how, "unsubscribe") == 0 && !unsubscribe) || (strcmp(how, "finalize") == 0 && !finalize)) {
    undone = "failed (no such entry point)";
    return;
  }
  if (strcmp(how, "unsubscribe") == 0) {
    set_all(0);
    r = unsubscribe(sub);
  } else if (strcmp(how, "finalize") == 0) {
    /* The way cuptiFinalize's documentation asks: from a callback, at an
     * API call's exit (on_cb). */
    __atomic_store_n(&detach, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&stopping, __ATOMIC_ACQUIRE) && __atomic_load_n(&detach, __ATOMIC_ACQUIRE) < 3)
      usleep(1000);
    r = __atomic_load_n(&detach, __ATOMIC_ACQUIRE) == 3 ? CUPTI_SUCCESS : CUPTI_ERROR_UNKNOWN;
    if (r == CUPTI_SUCCESS && resubscribe) {
      __atomic_store_n(&resubscribed, 1, __ATOMIC_RELEASE);
      r = subscribe(&sub, on_cb, NULL);
      if (r == CUPTI_SUCCESS) set_all(1);
      how = r == CUPTI_SUCCESS ? "finalize, then subscribed again" : "finalize; the second cuptiSubscribe failed";
    }
  } else {
    set_all(0);
  }
  undone = r == CUPTI_SUCCESS || resubscribed ? how : "failed";
}

static const char *what(void) { return getenv("TOGGLE_WHAT") ? getenv("TOGGLE_WHAT") : "callbacks"; }

static void *toggler(void *arg) {
  (void)arg;
  const char *v = getenv("TOGGLE_US");
  const useconds_t us = v ? (useconds_t)atoi(v) : 1000;
  void (*set)(uint32_t) = strcmp(what(), "activity") == 0       ? set_activity
                          : strcmp(what(), "api-activity") == 0 ? set_api_activity
                                                                : set_all;
  if (strcmp(what(), "subscribe") == 0) return NULL;
  if (strcmp(what(), "activity-once") == 0) {
    const char *ms = getenv("TOGGLE_OFF_AFTER_MS");
    set_activity(1);
    for (long left = ms ? atol(ms) : 3000; left > 0 && !__atomic_load_n(&stopping, __ATOMIC_ACQUIRE); left -= 10)
      usleep(10000);
    set_activity(0);
    undone = "disable";
    return NULL;
  }
  if (strcmp(what(), "none") == 0 || stack_sites_only || driver_only || correlation_mode) {
    set_all(1);
    const char *off = getenv("TOGGLE_OFF_AFTER_CALLS");
    if (off && stack_sites_only) undo_after(strtoul(off, NULL, 10));
    return NULL;
  }
  while (!__atomic_load_n(&stopping, __ATOMIC_ACQUIRE)) {
    set(1);
    usleep(us);
    set(0);
    usleep(us);
  }
  return NULL;
}

static void report(void) {
  __atomic_store_n(&stopping, 1, __ATOMIC_RELEASE);
  pthread_join(toggler_thread, NULL);
  if (correlation_mode) {
    if (flush_all) flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (unsigned long i = 0; i < seen_n && i < kSeen; i++)
      fprintf(stderr, "cupti_toggle: callback %s %-5s cbid %u depth %d correlation %u\n",
              seen[i].domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime" : "driver ",
              seen[i].site == CUPTI_API_ENTER ? "enter" : "exit", seen[i].cbid, seen[i].depth, seen[i].correlation);
    fprintf(stderr, "cupti_toggle: kernels' correlation IDs:");
    for (unsigned long i = 0; i < kernel_n && i < kSeen; i++) fprintf(stderr, " %u", kernels[i]);
    fprintf(stderr, "\ncupti_toggle: %lu kernel records; driver launches: %lu outermost, %lu inside a runtime call\n",
            kernel_n, driver_outermost, driver_nested);
  }
  if (resubscribe)
    fprintf(stderr, "cupti_toggle: correlation IDs: last before the detach %u, first after subscribing again %u\n",
            last_before, first_after);
  fprintf(stderr, "cupti_toggle: %lu toggles, %lu callbacks, %lu exits without their enter%s%s\n", toggles, calls,
          exits_without_enter, *undone ? ", undone by " : "", undone);
}

__attribute__((visibility("default"))) int InitializeInjection(void) {
  void *lib = open_cupti("cupti_toggle");
  if (!lib) return 1;
  subscribe = dlsym(lib, "cuptiSubscribe");
  resubscribe = getenv("TOGGLE_RESUBSCRIBE") && atoi(getenv("TOGGLE_RESUBSCRIBE"));
  enable_cb = dlsym(lib, "cuptiEnableCallback");
  unsubscribe = dlsym(lib, "cuptiUnsubscribe");
  finalize = dlsym(lib, "cuptiFinalize");
  if (!subscribe || !enable_cb || subscribe(&sub, on_cb, NULL) != CUPTI_SUCCESS) {
    fprintf(stderr, "cupti_toggle: cuptiSubscribe failed\n");
    return 1;
  }
  correlation_mode = strcmp(what(), "correlation") == 0;
  stack_sites_only = strcmp(what(), "stack-sites") == 0;
  driver_only = strcmp(what(), "driver-launches") == 0;
  const int api_activity = strcmp(what(), "api-activity") == 0;
  if (strcmp(what(), "activity") == 0 || strcmp(what(), "activity-once") == 0 || correlation_mode || api_activity) {
    CUptiResult (*reg)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) =
        dlsym(lib, "cuptiActivityRegisterCallbacks");
    activity_enable = dlsym(lib, "cuptiActivityEnable");
    activity_disable = dlsym(lib, "cuptiActivityDisable");
    if (!reg || !activity_enable || !activity_disable || reg(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
      fprintf(stderr, "cupti_toggle: no activity API\n");
      return 1;
    }
    next_record = dlsym(lib, "cuptiActivityGetNextRecord");
    flush_all = dlsym(lib, "cuptiActivityFlushAll");
    enable_driver_api = dlsym(lib, "cuptiActivityEnableDriverApi");
    if (api_activity && !enable_driver_api) {
      fprintf(stderr, "cupti_toggle: no cuptiActivityEnableDriverApi\n");
      return 1;
    }
    if (correlation_mode || api_activity) activity_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  }
  pthread_create(&toggler_thread, NULL, toggler, NULL);
  atexit(report);
  fprintf(stderr, "cupti_toggle: switching %s every %s us\n", what(),
          getenv("TOGGLE_US") ? getenv("TOGGLE_US") : "1000");
  return 1;
}
