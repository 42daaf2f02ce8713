// libgpuflame_cupti.so: loaded into a CUDA process by the driver through
// CUDA_INJECTION64_PATH (no code change), it turns CUPTI's view of the GPU
// into the USDT probes the gpuflame agent listens to:
//  - at each kernel launch (runtime or driver API, graphs included), the
//    launch's correlation ID, at gpuflame:launch, on the launching thread,
//    so the agent's BPF program takes that thread's stack there. Sampled per
//    thread by a token bucket (GPUFLAME_LAUNCH_STACKS_PER_S, default 1000;
//    0: every launch);
//  - kernel, memcpy and memset activity (GPU start/end, device, stream,
//    correlation ID), flushed every GPUFLAME_FLUSH_MS (default 1000) and at
//    exit, at gpuflame:kernel_batch, with kernel names once each.
// With no agent attached the probes' semaphores are down: neither launch
// callbacks nor activity are enabled, so the library costs the workload
// nothing until an agent attaches (checked at start and once per flush period).
// If another CUPTI subscriber (torch.profiler, Nsight) got there first, it
// steps aside, says so once on stderr and to the agent (gpuflame:status).
// gpuflame:status also carries the GF_ABI_VERSION this library was built
// with, at start and again every flush period while an agent listens: the
// agent checks it, since the library cannot know the agent's (probes.h).
// It also carries the in-process tensor events (inprocess/), which need no
// CUPTI: with GPUFLAME_KERNEL_TIME=0 (gpuflame record --no-kernel-time)
// CUPTI is left alone and only they run.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "cupti/activity_converter.h"
#include "cupti/cupti_api.h"
#include "cupti/probes.h"
#include "cupti/token_bucket.h"
#include "inprocess/autograd_origin.h"
#include "inprocess/tensor_events.h"

extern "C" {
__extension__ unsigned short gpuflame_launch_semaphore __attribute__((section(".probes"), used));
__extension__ unsigned short gpuflame_kernel_batch_semaphore __attribute__((section(".probes"), used));
__extension__ unsigned short gpuflame_kernel_name_semaphore __attribute__((section(".probes"), used));
__extension__ unsigned short gpuflame_status_semaphore __attribute__((section(".probes"), used));
}

namespace gpuflame::cupti {
namespace {

constexpr size_t kBufferBytes = 1 << 20;

struct State {
  CuptiApi api;
  CUpti_SubscriberHandle subscriber = nullptr;
  ActivityConverter converter;
  double launch_rate = 1000;
  std::atomic<bool> activity_on{false};
  std::atomic<bool> tracing_on{false};
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  bool cupti_on = false;  // set once, before the flusher starts
  std::thread flusher;
  int flush_ms = 1000;
};

State& S() {
  static State* s = new State();  // never destroyed: CUPTI may call back during exit
  return *s;
}

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void Trace(const char* what) {
  static const bool on = std::getenv("GPUFLAME_CUPTI_DEBUG") != nullptr;
  if (on) std::fprintf(stderr, "gpuflame_cupti: %s\n", what);
}

double EnvNumber(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  double d = std::strtod(v, &end);
  return end && *end == '\0' && d >= 0 ? d : fallback;
}

class ProbeSink : public ActivitySink {
 public:
  void Name(uint32_t id, const char* name) override { FireName(id, name); }
  void Batch(const gf_kernel_record* records, size_t count) override { FireBatch(records, count); }
};

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  if (buffer && valid) {
    ProbeSink sink;
    S().converter.Convert(buffer, valid, S().api.ActivityGetNextRecord, sink);
  }
  std::free(buffer);
}

void EnableActivity() {
  State& s = S();
  if (s.activity_on.exchange(true)) return;
  s.api.ActivityRegisterCallbacks(BufferRequested, BufferCompleted);
  for (CUpti_ActivityKind k :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET})
    s.api.ActivityEnable(k);
}

bool IsLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000:
        return true;
      default:
        return false;
    }
  }
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    switch (cbid) {
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
      case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
        return true;
      default:
        return false;
    }
  }
  return false;
}

// Runtime launches call the driver's launch inside them: only the outermost
// call's correlation ID is the one kernel records carry, so only it fires.
thread_local int runtime_depth = 0;

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (!IsLaunch(domain, cbid)) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  if (cb->callbackSite == CUPTI_API_EXIT) {
    if (runtime && runtime_depth > 0) runtime_depth--;
    return;
  }
  if (runtime) runtime_depth++;
  else if (runtime_depth > 0) return;
  if (!LaunchProbeOn()) return;
  thread_local TokenBucket bucket(S().launch_rate, S().launch_rate > 0 ? S().launch_rate / 10 + 1 : 1);
  if (!bucket.Take(NowNs())) return;
  const inprocess::BackwardOrigin origin = inprocess::BackwardOriginForThisThread();
  FireLaunch(cb->correlationId, cbid, origin.stack_id, origin.active);
}

void EnableCallbacks();

// Callbacks and activity, once, when an agent is there to listen.
void EnableTracing() {
  State& s = S();
  if (s.tracing_on.exchange(true)) return;
  Trace("agent attached: tracing launches and activity");
  // Diagnostics, to measure what each part costs a workload:
  // GPUFLAME_LAUNCH_CALLBACKS=0 (no launch stacks: every kernel is charged
  // to [launch stack not sampled]) and GPUFLAME_ACTIVITY=0 (no kernel time).
  if (EnvNumber("GPUFLAME_LAUNCH_CALLBACKS", 1) != 0) EnableCallbacks();
  if (EnvNumber("GPUFLAME_ACTIVITY", 1) != 0) EnableActivity();
}

// Ticks every 100 ms for the tensor events (so that at most that much of
// them waits in the process when an agent stops), flushes CUPTI every
// flush period.
void FlushLoop() {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mu);
  auto next_flush = std::chrono::steady_clock::now() + std::chrono::milliseconds(s.flush_ms);
  while (!s.stop) {
    s.cv.wait_for(lock, std::chrono::milliseconds(std::min(s.flush_ms, 100)));
    if (s.stop) break;
    lock.unlock();
    inprocess::PollTensorEvents();
    const auto now = std::chrono::steady_clock::now();
    if (!s.cupti_on || now < next_flush) {
      lock.lock();
      continue;
    }
    next_flush = now + std::chrono::milliseconds(s.flush_ms);
    // Which ABI we speak, said again before each flush's records: an agent
    // may attach at any time, also while another one already holds the
    // semaphores, and nothing in the process tells the two apart (a
    // semaphore counts probe sites, not tracers). One probe hit a period.
    FireStatus(GF_CUPTI_ACTIVE);
    // An agent that attaches after start-up raises the semaphores: start then.
    if (!s.tracing_on && (BatchProbeOn() || LaunchProbeOn())) EnableTracing();
    if (s.activity_on) {
      Trace("flush");
      s.api.ActivityFlushAll(0);
    }
    lock.lock();
  }
}

// At exit, what completed since the last flush goes out, but the workload's
// exit must never wait on us: CUDA may be half torn down by now (its own
// exit handlers can run before ours), so the last flush runs on a helper
// thread and is abandoned after a bounded wait.
void AtExit() {
  State& s = S();
  Trace("exit: stopping the flusher");
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.stop = true;
  }
  s.cv.notify_all();
  inprocess::FlushTensorEvents();
  if (!s.activity_on) {
    if (s.flusher.joinable()) s.flusher.detach();
    return;
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread last([done] {
    State& st = S();
    if (st.flusher.joinable()) st.flusher.join();
    Trace("exit: final flush");
    st.api.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    done->store(true);
  });
  for (int i = 0; i < 200 && !done->load(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  Trace(done->load() ? "exit: flushed" : "exit: final flush did not finish in 2 s, abandoned");
  if (done->load()) last.join();
  else last.detach();
}

// Only the launch APIs: every other callback would cost the workload a call
// into us for nothing.
void EnableCallbacks() {
  State& s = S();
  for (CUpti_CallbackId id = 0; id < CUPTI_RUNTIME_TRACE_CBID_SIZE; id++)
    if (IsLaunch(CUPTI_CB_DOMAIN_RUNTIME_API, id)) s.api.EnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id);
  for (CUpti_CallbackId id = 0; id < CUPTI_DRIVER_TRACE_CBID_SIZE; id++)
    if (IsLaunch(CUPTI_CB_DOMAIN_DRIVER_API, id)) s.api.EnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
}

void Say(const char* what) { std::fprintf(stderr, "gpuflame: %s\n", what); }

// CUPTI's part: kernel launches and activity. Returns false if it is off.
bool StartCupti() {
  State& s = S();
  const char* kernel_time = std::getenv("GPUFLAME_KERNEL_TIME");
  if (kernel_time && std::strcmp(kernel_time, "0") == 0) return false;
  std::string err = s.api.Load();
  if (!err.empty()) {
    FireStatus(GF_CUPTI_FAILED);
    Say(("kernel time off for this process: " + err).c_str());
    return false;  // the workload runs on, without kernel time
  }
  s.launch_rate = EnvNumber("GPUFLAME_LAUNCH_STACKS_PER_S", 1000);
  CUptiResult r = s.api.Subscribe(&s.subscriber, reinterpret_cast<CUpti_CallbackFunc>(OnCallback), nullptr);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    FireStatus(GF_CUPTI_OTHER_SUBSCRIBER);
    Say("another CUPTI client (torch.profiler, Nsight) is active: kernel time off for this process");
    return false;
  }
  if (r != CUPTI_SUCCESS) {
    const char* msg = nullptr;
    s.api.GetResultString(r, &msg);
    FireStatus(GF_CUPTI_FAILED);
    Say((std::string("kernel time off for this process: cuptiSubscribe: ") + (msg ? msg : "error")).c_str());
    return false;
  }
  // Said before tracing starts, so that the agent knows our ABI version
  // before our first launch or activity record reaches it.
  FireStatus(GF_CUPTI_ACTIVE);
  if (BatchProbeOn() || LaunchProbeOn()) EnableTracing();
  Trace(BatchProbeOn() ? "active, agent attached" : "active, no agent yet");
  return true;
}

int Initialize() {
  State& s = S();
  s.flush_ms = static_cast<int>(EnvNumber("GPUFLAME_FLUSH_MS", 1000));
  if (s.flush_ms < 10) s.flush_ms = 10;
  // Before CUPTI: at cuInit no tensor has been allocated yet.
  inprocess::StartTensorEvents();
  s.cupti_on = StartCupti();
  s.flusher = std::thread(FlushLoop);
  std::atexit(AtExit);
  return 1;
}

}  // namespace
}  // namespace gpuflame::cupti

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::once_flag once;
  static int result = 0;
  std::call_once(once, [] { result = gpuflame::cupti::Initialize(); });
  return result;
}
