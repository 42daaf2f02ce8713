// Kernel time through CUPTI (kernel_time.h), loaded by the CUDA driver with
// the rest of libgpuflame_cupti.so. It turns CUPTI's view of the GPU into
// the USDT probes the gpuflame agent listens to:
//  - at kernel launches (graphs included), the launch's correlation ID, at
//    gpuflame:launch, on the launching thread, so the agent's BPF program
//    takes that thread's stack there. Taken in the driver's launch call,
//    which every launch reaches (a runtime launch's own, cuBLAS's
//    cuLaunchKernelEx, NCCL's, Triton's): the driver call inside a runtime
//    launch carries the runtime call's correlation ID, the one its kernel's
//    record carries (an H100, CUDA 13, driver 580:
//    tests/gpu/run_cupti_correlation.sh). So the runtime's launch callbacks
//    stay off, half the callbacks a runtime launch would cost, unless an
//    agent asks for API spans (their names are the runtime's); copies and
//    memsets are taken at the runtime's call;
//  - kernel, memcpy and memset activity (GPU start/end, device, stream,
//    correlation ID), flushed every GPUFLAME_FLUSH_MS (default 1000) and at
//    exit, at gpuflame:kernel_batch, with kernel names once each. CUPTI's
//    synchronisation and overhead records only where asked for by name
//    (activity_tuning.h: they cost a launch-bound step more than they tell).
//    With them, each CUDA device's UUID (device_uuids.h), so that the agent
//    ties a lane to NVML's GPU whatever CUDA_VISIBLE_DEVICES says.
// Both cost the workload on every launch (CUPTI's callback dispatch, and its
// timestamp instrumentation), so both are duty-cycled (duty_cycle.h), on the
// flusher's 100 ms ticks:
//  - launch stacks are taken one tick in GPUFLAME_LAUNCH_ONE_IN (default 10)
//    of those activity is on in, and within those each launch is taken with
//    the probability that makes GPUFLAME_LAUNCH_STACKS_PER_S per thread
//    (launch_sampler.h; default 1000; 0: every launch). Kernels launched
//    unsampled are charged to the sampled stacks of the same kernel
//    (profiler/aggregate/kernel_joiner.h). NCCL's kernels (bpf/nccl_kernel_name.h) are
//    the exception: each is taken whenever activity is on, so that its GPU
//    time goes back to its NCCL call. The launch callbacks themselves
//    are enabled once, when an agent first listens, and never switched
//    again: the cycle is a flag our callback reads. Switching them while
//    other threads launch crashes CUPTI (CUDA 13, H200: 12 of 126 runs of
//    a kernel loop died inside libcupti, SIGSEGV or bad_function_call, under
//    a client that did nothing else; tests/gpu/cupti_toggle.c), and the
//    duty cycle switched them a few times a second for the process's life;
//  - activity is on all the time while an agent asks for exact kernel time
//    (it attaches gpuflame:kernel_time_exact: `record`), else for
//    GPUFLAME_ACTIVITY_ON_S (default 1) out of every GPUFLAME_ACTIVITY_ONE_IN
//    (default 10) such spans, at a random phase, each record weighted by
//    that N (gf_kernel_record.weight) so sums stay unbiased;
//  - the first GPUFLAME_STARTUP_S (default 5) of the process are seen whole.
// With no agent attached the probes' semaphores are down: callbacks and
// activity are off, so the library costs the workload nothing until an agent
// first attaches, but for the launch route's priming (CUPTI's records of
// the first launch calls, State::route_prime). After it leaves, activity
// goes off at once; launch callbacks, where an agent had them on (not the
// launch route's, below), stay on, and CUPTI's dispatch to a callback that
// returns at once costs each launch 0.4-0.6 us (an H100:
// tests/gpu/run_cupti_callback_cost.sh). With
// GPUFLAME_CUPTI_DETACH_S=N, CUPTI itself is detached (cuptiFinalize) N s
// after the last agent left, at the exit of the next call whose callback is
// on, as CUPTI's documentation asks (Detach), and a later agent subscribes
// again. Default 0, never: the detach has run
// on a GPU five times (no crash, launches went on), and a second
// subscription there numbered its correlation IDs from 1 again (an H100:
// cupti_toggle.c TOGGLE_RESUBSCRIBE), so IDs held across it would meet new
// ones, which nothing here keeps apart yet.
// An agent that attaches gpuflame:launch_route (--launch-stacks uprobes)
// takes launch stacks itself, by uprobes on libcuda's launch entry points:
// then the launch callbacks are never enabled, and a launch window instead
// has CUPTI record the driver's launch calls (their correlation IDs, by
// thread and time), switched on and off at will, which the callbacks cannot
// be (bpf/gpuflame_abi.h, "Launch stacks without CUPTI's callbacks";
// SetLaunchWindow), once primed: on from our start until the first comes
// (State::route_prime), until the process runs an NCCL kernel: NCCL's
// launches are then taken by the callbacks again (RouteOn).
// If another CUPTI subscriber (torch.profiler, Nsight) got there first, it
// steps aside, says so once on stderr and to the agent (gpuflame:status).
// CUPTI is found at run time (cupti_api.cc); only its headers are needed
// to build this file.
#include "cupti/kernel_time.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "bpf/nccl_kernel_name.h"
#include "cupti/activity_converter.h"
#include "cupti/activity_tuning.h"
#include "cupti/activity_windows.h"
#include "cupti/api_spans.h"
#include "cupti/correlation_check.h"
#include "cupti/cupti_api.h"
#include "cupti/device_uuids.h"
#include "cupti/duty_cycle.h"
#include "cupti/launch_sampler.h"
#include "cupti/library_util.h"
#include "cupti/probes.h"
#include "inprocess/autograd_origin.h"
#include "inprocess/self_timing.h"
#include "inprocess/tensor_events.h"
#include "inprocess/thrift.h"

namespace gpuflame::cupti {
namespace {

struct State {
  CuptiApi api;
  ActivityTuning tuning;  // set once, before activity is first enabled
  CUpti_SubscriberHandle subscriber = nullptr;
  ActivityConverter converter;
  ActivityWindows windows;
  ApiSpans api_spans;  // the timeline's: launch, copy and memset calls, entry to return
  double launch_rate = 1000;
  std::atomic<bool> activity_registered{false};
  bool on = false;  // set once, before the flusher starts
  uint64_t start_ns = 0;
  uint64_t startup_ns = 5'000'000'000;
  // Wanted at all (diagnostics: GPUFLAME_LAUNCH_CALLBACKS=0, GPUFLAME_ACTIVITY=0).
  bool callbacks_wanted = true, activity_wanted = true;
  // The flusher's alone, after start:
  std::unique_ptr<DutyCycle> launch_cycle, activity_cycle;
  // The activity cycle's share as configured, and the thrift level last
  // asked of it (ThriftActivity): one in activity_one_in << level.
  uint32_t activity_one_in = 1, activity_thrift = 0;
  bool callbacks_enabled = false;         // with CUPTI: once on, for good
  bool memory_callbacks_enabled = false;  // the same, for the memory calls' spans
  bool runtime_launches_enabled = false;  // the same, for the runtime launches' spans
  // The runtime's launches take the stacks (CheckCorrelation's verdict):
  // enabled again after CUPTI's detach, as the verdict stands.
  bool runtime_launches_for_stacks = false;
  bool activity_on = false;
  uint16_t activity_weight = 0;  // of the open window
  uint64_t window_open_ns = 0;   // CUPTI's clock; 0: none open (or its time unread)
  bool tracing = false;          // an agent listens
  bool ever_traced = false;      // ... or did once (the flusher's; read at exit after it stopped)
  // CUPTI's detach after the last agent left (Detach): how long after (0:
  // never), since when none listens, and what was said of it.
  uint64_t detach_after_ns = 0;
  uint64_t gone_since_ns = 0;
  uint64_t resubscribe_at_ns = 0;  // a failed subscription's retry
  uint32_t detaches = 0;
  // What switching costs (GPUFLAME_CUPTI_DEBUG prints it at exit): the
  // workload's launches may wait on CUPTI's locks meanwhile.
  uint64_t toggles = 0, toggle_ns = 0, toggle_max_ns = 0;
  std::atomic<uint64_t> cupti_overhead_ns{0};  // CUPTI's OVERHEAD records
  // Our callbacks' time (one in inprocess::kTimedOneIn timed, scaled), by
  // the path taken (CallbackPath: GPUFLAME_CUPTI_DEBUG says each), and
  // activity buffers converted on CUPTI's threads (the flusher's own CPU
  // time covers those converted on it).
  std::atomic<uint64_t> path_timed_ticks[3] = {}, path_timed[3] = {};
  uint64_t empty_interval_ticks = 0;  // inprocess/self_timing.h, measured at start
  inprocess::TickRate tick_rate;
  std::atomic<uint64_t> buffer_ns{0};
  // NCCL's kernel launches taken outside the sampler (bpf/nccl_kernel_name.h).
  std::atomic<uint64_t> nccl_launches{0};
  // Whether the driver's launch callbacks carry their kernels' IDs here
  // (correlation_check.h): until it says not, launch stacks are taken there.
  CorrelationCheck correlation_check;
  bool correlation_decided = false;  // the flusher's
  // Which GPU each CUDA device is (device_uuids.h): read by the flusher
  // once a launch has been seen (Gate::launched), said at each flush.
  DeviceUuids devices;
  // The launch route (bpf/gpuflame_abi.h): while an agent asks for it, a
  // launch window has CUPTI record the driver's launch calls instead of our
  // callbacks taking stacks. Usable where CUPTI has both entry points and
  // names threads as the kernel does (SetThreadIdType). The flusher's.
  bool route_usable = false;
  // CUPTI's records of the launch calls come only where they were on from
  // the process's start through its first launches: switched on later (an
  // agent finding the process running), none came; on from the start, then
  // off, they came again in every window switched on (an H100: README,
  // Measured, sessions 38 and 39). So they go on at our start, inside
  // cuInit and before any context, and stay on until the first has come
  // (the priming, UpdatePrime): from then on the route's windows switch
  // them at will. Failed: kernels were recorded and no launch call was
  // (kPrimeFailKernels), or CUPTI was subscribed again after a detach.
  // Launch stacks come by the callbacks wherever the route is not primed.
  enum class Prime : uint8_t { kNone, kPriming, kPrimed, kFailed };
  Prime route_prime = Prime::kNone;
  bool prime_wanted = true;  // GPUFLAME_LAUNCH_ROUTE_PRIME (1)
  bool route_refusal_said = false;
  bool launch_records_on = false;  // CUPTI records the route's calls
  bool launch_window = false;      // ... and the agent was told to take their stacks
  uint64_t launch_windows = 0;
  std::atomic<uint64_t> launch_records{0}, launch_records_unconverted{0};
  std::atomic<uint64_t> kernel_records{0};  // all converted, for the priming's verdict
  // NCCL's kernels recorded: the route gives way to the callbacks (RouteOn).
  std::atomic<uint64_t> nccl_kernel_records{0};
};

// What a callback did: returned at once (the gate closed), looked and
// took nothing, or took a launch stack (the probe's trap and BPF included).
enum class CallbackPath : uint8_t { kClosed, kOpen, kStack };

// Times one switch of callbacks or activity.
class ToggleTimer {
 public:
  ToggleTimer();
  ~ToggleTimer();

 private:
  uint64_t start_;
};

// Whether activity is on: NCCL's launches are taken only then, when their
// kernels' records will come. Written by the flusher, read by launches
// while the gate is open.
std::atomic<bool> activity_now{false};
// Whether activity's kinds are enabled (set after they are, cleared before
// they are not): only a launch made meanwhile can have a record, which the
// correlation check counts on.
std::atomic<bool> activity_kinds_on{false};

// What every callback reads first, on one line of its own. Most of an
// agent's time nothing is asked of a launch (no launch window, activity
// off, no API spans: 89 ticks in 100 at the defaults, the gate opening a
// tick before activity), and the callback then reads this line alone and
// returns: no thread-local state (in a dlopen'ed library each thread_local
// is a call into the dynamic linker and three or four more lines), no
// semaphores, no State. On an H100's launch-bound step, with the step's
// own work evicting our lines between launches, the full path cost about
// 54 ns a callback, four callbacks a launch (session 30).
struct alignas(64) Gate {
  // Something for a callback to do: the flusher's alone to write, once a
  // tick (Control).
  std::atomic<bool> open{false};
  // A launch has been seen, so the driver is initialised (ReadDevices).
  // Written once; a load on every later launch, no shared write.
  std::atomic<bool> launched{false};
  // Runtime calls (copies; launches where API spans are asked or the
  // correlation check moved launch stacks there) call the driver inside
  // them: only the outermost call fires. The depth is counted per thread
  // only while the gate is open, and callbacks may go on between a call's
  // entry and its exit: a count from an earlier epoch is stale. The epoch
  // advances each time the gate opens and when CUPTI is subscribed again
  // after a detach (whose exits never came). Not when a set of callbacks
  // first goes on: a call whose entry went unseen leaves its thread's count
  // at 0 and its exit finds nothing to undo (runtime calls do not nest),
  // while a new epoch would drop the count a runtime launch under way had
  // just made, and its driver call would fire its stack a second time.
  std::atomic<uint32_t> epoch{0};
  // The runtime's launch callbacks are on, for API spans: until then the
  // outermost call of a runtime launch is the driver's, whose span would
  // bear the driver's name. Set once, by the flusher.
  std::atomic<bool> spans_ready{false};
  // CUPTI's detach (Detach): the flusher asks, the exit of the next call
  // whose callback is on carries it out, and the flusher subscribes again
  // for a later agent.
  std::atomic<uint8_t> detach{0};
};
Gate gate;

// Gate::detach's states. Only the flusher moves kAttached to kAsked and back
// (a new agent before any callback took it), and kDetached or kFailed to
// kAttached; only a callback moves kAsked through kDetaching to kDetached or
// kFailed. Nothing calls CUPTI but that callback from kAsked on.
enum DetachState : uint8_t { kAttached, kAsked, kDetaching, kDetached, kFailed };

// CUPTI's detach, asked by the flusher once the last agent has been gone
// GPUFLAME_CUPTI_DETACH_S: at an API call's exit, as cuptiFinalize's
// documentation asks (elsewhere the client must see that no CUDA call and
// no buffer flush runs meanwhile, which a library inside another program
// cannot). Activity went off when the agent left, and the flusher flushed
// what it had recorded before asking (AskDetach). On the calling thread,
// once: the workload's call waits for it.
__attribute__((noinline, cold)) void Detach();

bool CuptiAttached() { return gate.detach.load(std::memory_order_acquire) == kAttached; }

State& S() {
  static State* s = new State();  // never destroyed: CUPTI may call back during exit
  return *s;
}

// GF_CUPTI_ACTIVE with a clock pair: CUPTI's time between two reads of
// CLOCK_MONOTONIC (the BPF clock), so that the agent can put GPU records on
// the host's time axis (CUPTI's clock is CLOCK_REALTIME by default on
// Linux x86-64, cupti_activity.h). Once a flush period, only while traced.
// The same pair converts the launch route's records to CLOCK_MONOTONIC
// (ActivityConverter::SetClock), read while its records are on even when
// no agent asks for the status.
void FireActiveWithClock() {
  State& s = S();
  if (!StatusProbeOn() && !s.launch_records_on) return;
  uint64_t before = NowNs(), cupti_ns = 0, after = 0;
  // No call into CUPTI while it detaches: the clock pair comes with a later flush.
  bool read = CuptiAttached() && s.api.GetTimestamp && s.api.GetTimestamp(&cupti_ns) == CUPTI_SUCCESS;
  after = NowNs();
  // The launch route joins records to stacks microseconds apart: of three
  // pairs, the narrowest, and none wider than kMaxPairNs (a preempted read).
  constexpr uint64_t kMaxPairNs = 20'000;
  for (int i = 0; read && s.launch_records_on && i < 2 && after - before > 1'000; i++) {
    uint64_t b = NowNs(), c = 0;
    if (s.api.GetTimestamp(&c) != CUPTI_SUCCESS) break;
    const uint64_t a = NowNs();
    if (a - b < after - before) before = b, cupti_ns = c, after = a;
  }
  if (read && after - before <= kMaxPairNs) s.converter.SetClock(cupti_ns, before + (after - before) / 2);
  if (read) FireStatus(GF_CUPTI_ACTIVE, cupti_ns, before, after);
  else FireStatus(GF_CUPTI_ACTIVE);
}

class ProbeSink : public ActivitySink {
 public:
  void Name(uint32_t id, const char* name) override { FireName(id, name); }
  void Batch(const gf_kernel_record* records, size_t count) override {
    S().correlation_check.Seen(records, count);
    FireBatch(records, count);
  }
  void LaunchRecords(const gf_api_record* records, size_t count) override {
    FireLaunchRecords(records, count, S().launch_records_unconverted.load(std::memory_order_relaxed));
  }
};

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  const ActivityTuning& t = S().tuning;
  // Zeroed by us when CUPTI was told not to zero them itself (on the
  // launching thread, its documentation says).
  *buffer =
      static_cast<uint8_t*>(t.zeroed_buffers ? std::calloc(1, t.buffer_bytes) : std::aligned_alloc(8, t.buffer_bytes));
  *size = *buffer ? t.buffer_bytes : 0;
  *max_records = 0;
}

ToggleTimer::ToggleTimer() : start_(NowNs()) {}
ToggleTimer::~ToggleTimer() {
  State& s = S();
  const uint64_t ns = NowNs() - start_;
  s.toggles++;
  s.toggle_ns += ns;
  s.toggle_max_ns = std::max(s.toggle_max_ns, ns);
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  const uint64_t start = on_flusher ? 0 : NowNs();
  if (buffer && valid) {
    ProbeSink sink;
    ConvertStats st = S().converter.Convert(buffer, valid, S().api.ActivityGetNextRecord, sink, &S().windows);
    S().cupti_overhead_ns.fetch_add(st.overhead_ns, std::memory_order_relaxed);
    S().launch_records.fetch_add(st.launch_records, std::memory_order_relaxed);
    S().launch_records_unconverted.fetch_add(st.launch_records_unconverted, std::memory_order_relaxed);
    S().kernel_records.fetch_add(st.kernels, std::memory_order_relaxed);
    if (st.nccl_kernels) S().nccl_kernel_records.fetch_add(st.nccl_kernels, std::memory_order_relaxed);
  }
  if (!on_flusher) S().buffer_ns.fetch_add(NowNs() - start, std::memory_order_relaxed);
  std::free(buffer);
}

bool SwitchLaunchRecords(bool on);

// CUPTI's buffering attributes, where the environment sets them
// (activity_tuning.h). Before the buffer callbacks are registered: CUPTI
// reads the per-thread choice there. At start-up, inside cuInit, before
// any context: the device buffer's size applies to contexts made after it.
void ApplyTuning() {
  State& s = S();
  const ActivityTuning& t = s.tuning;
  if (!t.error.empty()) Say(t.error.c_str());
  auto set = [&](CUpti_ActivityAttribute attr, auto value) {
    size_t size = sizeof(value);
    if (!s.api.ActivitySetAttribute || s.api.ActivitySetAttribute(attr, &size, &value) != CUPTI_SUCCESS)
      Say(("CUPTI did not take activity attribute " + std::to_string(attr)).c_str());
  };
  if (t.device_buffer_bytes) set(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, t.device_buffer_bytes);
  if (t.pinned >= 0) set(CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED, static_cast<uint8_t>(t.pinned));
  if (t.per_thread >= 0) set(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, static_cast<uint8_t>(t.per_thread));
  if (t.zeroed_buffers) set(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, static_cast<uint8_t>(1));
  if (t.flush_period_ms && s.api.ActivityFlushPeriod) s.api.ActivityFlushPeriod(t.flush_period_ms);
  Trace(("activity: " + t.Describe()).c_str());
  // The launch route's records name their threads as the kernel does, as
  // the agent's uprobes see them (CUPTI's default is pthread_self's value).
  // Set at start: CUPTI's documentation says not to change the type during
  // a session. (Session 37 blamed a mid-run change for an agent that joined
  // none; session 38 found the cause elsewhere: records switched on mid-run
  // never come, State::route_prime.)
  s.route_usable = s.api.ActivityEnableDriverApi && s.api.SetThreadIdType &&
                   s.api.SetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) == CUPTI_SUCCESS;
  if (!s.route_usable) Trace("no launch route: CUPTI lacks driver API records or system thread IDs");
  // At our start only, not after a detach (Reattach): the priming, with or
  // without an agent, since one that finds us running later can have the
  // route only so. It costs the workload the records of its first launch
  // calls (or copies), until the flusher sees the first.
  if (s.route_usable && s.prime_wanted && !s.on && s.route_prime == State::Prime::kNone) {
    if (SwitchLaunchRecords(true)) {
      s.route_prime = State::Prime::kPriming;
      Trace("launch records primed: on until the first comes");
    } else {
      s.route_prime = State::Prime::kFailed;
    }
  }
}

// GF_GPU_ACTIVITY_WINDOW: activity has been on from the open window's
// start to |end_ns| (CUPTI's clock; 0: unread, then nothing is said: the
// agent judges no time it is not told was observed). Flusher thread, or the
// exit's final flush once the flusher has stopped.
void SendWindow(uint64_t end_ns) {
  const State& s = S();
  if (!s.window_open_ns || end_ns < s.window_open_ns) return;
  gf_kernel_record r{};
  r.start_ns = s.window_open_ns;
  r.end_ns = end_ns;
  r.device = GF_DEVICE_UNKNOWN;
  r.kind = GF_GPU_ACTIVITY_WINDOW;
  r.weight = s.activity_weight;
  FireBatch(&r, 1);
}

// Activity on (each record then worth |weight|) or off. Flusher thread.
void SetActivity(bool on, uint16_t weight) {
  State& s = S();
  if (on && s.activity_on && weight == s.activity_weight) return;
  if (!on && !s.activity_on) return;
  if (!s.activity_registered.exchange(true)) s.api.ActivityRegisterCallbacks(BufferRequested, BufferCompleted);
  Trace(!on           ? "activity off"
        : weight == 1 ? "activity on, every record"
                      : ("activity on, records weighted x" + std::to_string(weight)).c_str());
  ToggleTimer timer;
  activity_now.store(on, std::memory_order_relaxed);
  if (on) {
    // The window opens before the kinds are enabled: no record can start
    // earlier than its window.
    uint64_t now = 0;
    const bool read = s.api.GetTimestamp(&now) == CUPTI_SUCCESS;
    if (read) s.windows.Open(now, weight);
    // A new weight while on: the span so far is said with its own weight.
    if (s.activity_on) SendWindow(read ? now : 0);
    s.window_open_ns = read ? now : 0;
    s.activity_weight = weight;
    if (!s.activity_on)
      for (CUpti_ActivityKind k : s.tuning.Kinds()) s.api.ActivityEnable(k);
    activity_kinds_on.store(true, std::memory_order_release);
  } else {
    activity_kinds_on.store(false, std::memory_order_relaxed);
    for (CUpti_ActivityKind k : s.tuning.Kinds()) s.api.ActivityDisable(k);
    // Closed after the kinds are off: no record of it starts after its end
    // unless launched before (the launch-ahead queue, windowed_lane.h).
    uint64_t now = 0;
    SendWindow(s.api.GetTimestamp(&now) == CUPTI_SUCCESS ? now : 0);
    s.window_open_ns = 0;
  }
  s.activity_on = on;
}

// The runtime's kernel launches (graphs' aside).
bool IsRuntimeKernelLaunch(CUpti_CallbackId cbid) {
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000: return true;
    default: return false;
  }
}

// The runtime's graph launches, copies and memsets, whose stacks are taken at
// the runtime's call (a graph launch is one call for many kernels; only a
// kernel launch's driver call is known to carry its runtime call's ID).
bool IsRuntimeStackSite(CUpti_CallbackId cbid) {
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000: return true;
    default: return false;
  }
}

bool IsLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) return IsRuntimeKernelLaunch(cbid) || IsRuntimeStackSite(cbid);
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    switch (cbid) {
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
      case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz: return true;
      default: return false;
    }
  }
  return false;
}

// The launch route's calls (GF_LAUNCH_ROUTE_ENTRIES: launches, copies,
// memsets), whose records the agent's uprobes at their entry points wait
// for. Their IDs are the agent's too, written out: checked here against CUPTI's.
#define GF_CHECK_ENTRY(name, cbid, kind) \
  static_assert(CUPTI_DRIVER_TRACE_CBID_##name == (cbid), "GF_LAUNCH_ROUTE_ENTRIES: " #name);
GF_LAUNCH_ROUTE_ENTRIES(GF_CHECK_ENTRY)
#undef GF_CHECK_ENTRY

bool IsRouteCall(CUpti_CallbackId cbid) {
  switch (cbid) {
#define GF_ROUTE_CASE(name, cbid, kind) case cbid:
    GF_LAUNCH_ROUTE_ENTRIES(GF_ROUTE_CASE)
#undef GF_ROUTE_CASE
    return true;
    default: return false;
  }
}

// Device memory calls the application makes (allocations, frees, host
// allocations, virtual memory): their callbacks go on only for API spans
// (an agent with a timeline), since the eBPF probes see each allocation
// already; what the spans add is how long each call took (cudaFree waits
// for the device) and the calls that failed. Rare next to launches: the
// caching allocator calls cudaMalloc for segments, not tensors.
bool IsMemoryCall(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020: return true;
      default: return false;
    }
  }
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    switch (cbid) {
      case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2:
      case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2:
      case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
      case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2:
      case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
      case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc:
      case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged:
      case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
      case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
      case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
      case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuMemCreate:
      case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
      case CUPTI_DRIVER_TRACE_CBID_cuMemMap:
      case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap:
      case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve:
      case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree: return true;
      default: return false;
    }
  }
  return false;
}

// The kernel's name where the callback is a kernel launch's (CUPTI fills
// symbolName for those alone), else null.
const char* KernelSymbol(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) return IsRuntimeKernelLaunch(cbid) ? cb->symbolName : nullptr;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: return cb->symbolName;
    default: return nullptr;
  }
}

// Whether this tick takes launch stacks: the duty cycle, written by the
// flusher, read by every launch callback.
std::atomic<bool> launch_window{false};
thread_local int runtime_depth = 0;
thread_local uint32_t depth_epoch = 0;
// The outermost call's entry, for its API span (api_spans.h), until its
// exit: matched by domain, callback ID and correlation ID, so an exit whose
// entry came before the callbacks went on finds nothing.
thread_local gf_api_record api_entry{};
thread_local bool api_open = false;

uint32_t Tid() {
  thread_local uint32_t tid = 0;
  if (!tid) tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return tid;
}

// The open span's exit (the caller has checked that one is open).
void CloseApiSpan(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  if (api_entry.correlation != cb->correlationId || api_entry.cbid != cbid ||
      api_entry.domain != static_cast<uint8_t>(domain))
    return;
  api_open = false;
  api_entry.end_ns = NowNs();
  // CUPTI points at the call's return value (cudaError_t or CUresult, both
  // an int's size) at exit.
  api_entry.result = cb->functionReturnValue ? *static_cast<const uint32_t*>(cb->functionReturnValue) : 0;
  S().api_spans.Add(api_entry);
}

__attribute__((noinline)) CallbackPath Callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                                const CUpti_CallbackData* cb);

// Counts one timed callback of |ticks| (OnCallback): out of line, the
// timed ones' alone.
__attribute__((noinline)) void CountTimed(uint64_t ticks, CallbackPath path) {
  State& s = S();
  ticks = inprocess::TimedPart(ticks, s.empty_interval_ticks);
  const auto p = static_cast<size_t>(path);
  s.path_timed_ticks[p].fetch_add(ticks, std::memory_order_relaxed);
  s.path_timed[p].fetch_add(1, std::memory_order_relaxed);
}

// Most callbacks find the gate closed (Gate) and return at once: one line
// of code (aligned to one) and the gate's one line of data. The step's own
// work evicts both between launches, and each line more a callback touches
// is another miss. One call in inprocess::kTimedOneIn is timed (our part
// only: CUPTI's dispatch to us is not ours to time), chosen by its
// correlation ID, which both of a call's callbacks share; it runs the very
// lines the others do, between two reads of the cycle counter, so that its
// time is theirs (a timed path of its own would be cold every time).
__attribute__((aligned(64))) void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                                      const void* data) {
  // Only the API domains' callbacks are enabled; their data is this.
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  const bool timed = inprocess::TimedById(cb->correlationId);
  const uint64_t start = __builtin_expect(timed, 0) ? inprocess::Ticks() : 0;
  CallbackPath path = CallbackPath::kClosed;
  if (__builtin_expect(gate.open.load(std::memory_order_acquire) || !gate.launched.load(std::memory_order_relaxed), 0))
    path = Callback(domain, cbid, cb);
  if (__builtin_expect(timed, 0)) CountTimed(inprocess::Ticks() - start, path);
}

// GPUFLAME_CUPTI_DEBUG: the first few of NCCL's launches taken, with the
// correlation IDs they go out with (the agent joins each kernel's record to
// its call by that ID alone).
__attribute__((noinline, cold)) void TraceNcclLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                                     uint32_t correlation) {
  char line[128];
  std::snprintf(line, sizeof(line), "NCCL launch taken: %s callback %u, correlation ID %u",
                domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime" : "driver", static_cast<unsigned>(cbid),
                static_cast<unsigned>(correlation));
  Trace(line);
}

CallbackPath Callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  // Closed, once a launch has been seen: the gate's line alone, not the
  // callback ID's tables.
  if (!gate.open.load(std::memory_order_acquire)) {
    // The driver is initialised: the flusher may ask it for the devices' UUIDs.
    if (!gate.launched.load(std::memory_order_relaxed) && IsLaunch(domain, cbid))
      gate.launched.store(true, std::memory_order_relaxed);
    return CallbackPath::kClosed;
  }
  const bool launch = IsLaunch(domain, cbid);
  if (launch && !gate.launched.load(std::memory_order_relaxed)) gate.launched.store(true, std::memory_order_relaxed);
  const bool counted = launch || IsMemoryCall(domain, cbid);
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  const bool exit = cb->callbackSite == CUPTI_API_EXIT;
  if (counted) {
    const uint32_t epoch = gate.epoch.load(std::memory_order_relaxed);
    if (depth_epoch != epoch) {
      // A count from before the gate last opened is stale. The thread may be
      // inside a runtime call whose entry came while it was closed, and a
      // driver call in it would then be taken for the outermost; so the gate
      // opens a tick before activity does (Control), and whatever was under
      // way then has ended before a launch is taken. (Skipping driver calls
      // until the thread's depth is known instead would lose the first of
      // NCCL's launches, which are the driver's own, each time.)
      depth_epoch = epoch;
      runtime_depth = 0;
    }
    // Counted before the detach's turn below: a detach called off (or a
    // cuptiFinalize that failed) leaves the counts as they would be.
    if (runtime && !exit) runtime_depth++;
    else if (runtime && runtime_depth > 0) runtime_depth--;
  }
  if (__builtin_expect(gate.detach.load(std::memory_order_acquire) != kAttached, 0)) {
    if (exit) Detach();
    return CallbackPath::kOpen;
  }
  if (!counted) return CallbackPath::kOpen;
  if (exit) {
    if (api_open) CloseApiSpan(domain, cbid, cb);
    return CallbackPath::kOpen;
  }
  if (!runtime && runtime_depth > 0) return CallbackPath::kOpen;
  // The outermost call: its span, if an agent asks for spans (one load when
  // not) and the runtime's launches are traced. The flusher opens the gate
  // for spans after making room for them (Control). A call under way when
  // the gate closes (its agent gone) has no exit seen: its span is not
  // recorded, as no agent is there to read it.
  if (ApiProbeOn() && gate.spans_ready.load(std::memory_order_relaxed)) {
    api_entry = {.start_ns = NowNs(),
                 .end_ns = 0,
                 .correlation = cb->correlationId,
                 .tid = Tid(),
                 .cbid = static_cast<uint16_t>(cbid),
                 .domain = static_cast<uint8_t>(domain),
                 .pad = 0,
                 .result = 0};
    api_open = true;
  }
  if (!launch || !LaunchProbeOn()) return CallbackPath::kOpen;
  // NCCL's kernels: every launch taken while activity is on, outside the
  // launch window and the sampler's budget, so that each kernel's GPU time
  // goes back to the NCCL call that launched it (bpf/nccl_kernel_name.h says
  // why it is worth a test per launch).
  if (activity_now.load(std::memory_order_relaxed) && IsNcclKernelName(KernelSymbol(domain, cbid, cb))) {
    if (__builtin_expect(S().nccl_launches.fetch_add(1, std::memory_order_relaxed) < 4, 0) && Tracing())
      TraceNcclLaunch(domain, cbid, cb->correlationId);
    const inprocess::BackwardOrigin origin = inprocess::BackwardOriginForThisThread();
    FireLaunch(cb->correlationId, GF_LAUNCH_API(domain, cbid), origin.stack_id, origin.active);
    return CallbackPath::kStack;
  }
  if (!launch_window.load(std::memory_order_relaxed)) return CallbackPath::kOpen;
  thread_local LaunchSampler sampler(S().launch_rate, NowNs() ^ reinterpret_cast<uintptr_t>(&runtime_depth));
  if (!sampler.Take(NowNs())) return CallbackPath::kOpen;
  const inprocess::BackwardOrigin origin = inprocess::BackwardOriginForThisThread();
  if (!runtime && activity_kinds_on.load(std::memory_order_relaxed)) S().correlation_check.Fired(cb->correlationId);
  FireLaunch(cb->correlationId, GF_LAUNCH_API(domain, cbid), origin.stack_id, origin.active);
  return CallbackPath::kStack;
}

void SetCallbacks(bool on);
void EnableCallbacks();
void EnableRuntimeLaunchCallbacks();
void EnableMemoryCallbacks();

void Detach() {
  uint8_t asked = kAsked;
  if (!gate.detach.compare_exchange_strong(asked, kDetaching, std::memory_order_acq_rel)) return;
  const CUptiResult r = S().api.Finalize();
  gate.detach.store(r == CUPTI_SUCCESS ? kDetached : kFailed, std::memory_order_release);
}

// While no agent listens: asks for CUPTI's detach once the last one has
// been gone long enough, if anything of CUPTI's is on. Flusher thread,
// after activity went off.
void AskDetach(uint64_t now_ns) {
  State& s = S();
  if (!s.detach_after_ns || !s.api.Finalize || !CuptiAttached()) return;
  // No callback on: none would carry the detach out (activity alone
  // costs nothing once off: README, Measured, session 35).
  if (!s.callbacks_enabled && !s.memory_callbacks_enabled && !s.runtime_launches_enabled) return;
  if (now_ns - s.gone_since_ns < s.detach_after_ns) return;
  // What activity recorded before it went off goes out here, on the
  // flusher, not in the workload's call (no agent takes it).
  if (s.activity_registered.load(std::memory_order_relaxed)) s.api.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  Trace("no agent for GPUFLAME_CUPTI_DETACH_S: CUPTI detaches at the next call's exit");
  gate.detach.store(kAsked, std::memory_order_release);
}

// What a detach leaves: said once it is done. Flusher thread.
void SayDetached() {
  State& s = S();
  const uint8_t d = gate.detach.load(std::memory_order_acquire);
  if (d == kFailed) {
    Say("cuptiFinalize failed: CUPTI stays attached, its callbacks' dispatch with it");
    s.detach_after_ns = 0;  // not asked again
    gate.detach.store(kAttached, std::memory_order_release);
  } else if (d == kDetached && s.subscriber) {
    s.subscriber = nullptr;
    s.detaches++;
    Trace("CUPTI detached");
  }
}

// CUPTI for a new agent: a detach asked and not yet taken is called off; one
// done is undone by subscribing again, with nothing enabled (the callbacks
// and activity go on as the agent's ticks ask). False while CUPTI is not
// there (a detach under way, or another client subscribed meanwhile: tried
// again every 10 s). Flusher thread.
bool Reattach(uint64_t now_ns) {
  State& s = S();
  uint8_t d = kAsked;
  if (gate.detach.compare_exchange_strong(d, kAttached, std::memory_order_acq_rel) || d == kAttached) return true;
  SayDetached();
  d = gate.detach.load(std::memory_order_acquire);
  if (d == kAttached) return true;
  if (d != kDetached || now_ns < s.resubscribe_at_ns) return false;
  s.callbacks_enabled = s.memory_callbacks_enabled = s.runtime_launches_enabled = false;
  s.activity_registered.store(false, std::memory_order_relaxed);
  // cuptiFinalize took the launch records with it, and records switched on
  // now would not come (State::route_prime).
  s.launch_records_on = s.launch_window = false;
  if (s.route_prime != State::Prime::kNone) s.route_prime = State::Prime::kFailed;
  s.window_open_ns = 0;
  gate.spans_ready.store(false, std::memory_order_relaxed);
  const CUptiResult r = s.api.Subscribe(&s.subscriber, reinterpret_cast<CUpti_CallbackFunc>(OnCallback), nullptr);
  if (r != CUPTI_SUCCESS) {
    s.subscriber = nullptr;
    FireStatus(r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? GF_CUPTI_OTHER_SUBSCRIBER : GF_CUPTI_FAILED);
    if (!s.resubscribe_at_ns) {  // said once
      const char* msg = nullptr;
      s.api.GetResultString(r, &msg);
      Say((std::string("kernel time off until CUPTI can be subscribed to again (tried every 10 s): cuptiSubscribe: ") +
           (msg ? msg : "error"))
              .c_str());
    }
    s.resubscribe_at_ns = now_ns + 10'000'000'000;
    return false;
  }
  ApplyTuning();
  // A thread inside a runtime call when cuptiFinalize ran never saw its
  // exit, and the gate may have stayed open since (spans asked throughout).
  gate.epoch.fetch_add(1, std::memory_order_relaxed);
  gate.detach.store(kAttached, std::memory_order_release);
  Trace("CUPTI subscribed again for a new agent");
  if (s.runtime_launches_for_stacks) EnableRuntimeLaunchCallbacks();
  return true;
}

// Once a tick, on the flusher, while an agent asks: the calls since the
// last tick go out (their records wait at most a tick, and a tick's fill
// stays far under ApiSpans::kCapacity). The callbacks must be on for any:
// an agent that asks only for spans still gets them.
void DrainApiSpans() {
  State& s = S();
  if (!ApiProbeOn()) return;
  s.api_spans.Enable();
  s.api_spans.Drain([](const gf_api_record* r, size_t n, uint64_t dropped) { FireApiBatch(r, n, dropped); });
}

bool ExactProbeOn() { return gpuflame_kernel_time_exact_semaphore != 0; }

// The devices' UUIDs, once the process has launched (device_uuids.h says
// why not sooner): a launch callback saw one, or CUPTI recorded a kernel
// or a launch call. Under the launch route no launch callback is ever on,
// so the records alone say it there. Flusher thread, while an agent listens.
void ReadDevices() {
  State& s = S();
  if (s.devices.done() || s.devices.attempts() >= DeviceUuids::kMaxAttempts) return;
  if (!gate.launched.load(std::memory_order_relaxed) && s.kernel_records.load(std::memory_order_relaxed) == 0 &&
      s.launch_records.load(std::memory_order_relaxed) == 0)
    return;
  const std::string err = s.devices.Read();
  if (!err.empty() && s.devices.attempts() >= DeviceUuids::kMaxAttempts)
    Trace(("devices' UUIDs not read, GPU lanes are tied by NVML's process lists only: " + err).c_str());
  else if (s.devices.done()) Trace(("devices' UUIDs read: " + std::to_string(s.devices.records().size())).c_str());
}

// Every device's UUID, at each flush: an agent may have attached since the
// last (nothing in the process says when). One probe hit a flush.
void SayDevices() {
  const std::vector<gf_kernel_record>& r = S().devices.records();
  if (!r.empty()) FireBatch(r.data(), r.size());
}

// gpuflame:kernel_time_exact is a switch, not an event: only its semaphore
// is read. The site exists so that an agent can attach to it; nothing calls it.
__attribute__((used, noinline)) void KernelTimeExactSite() { DTRACE_PROBE(gpuflame, kernel_time_exact); }

// Opens or closes the gate (Gate): open while a callback may have anything
// to do, spans, a launch window or NCCL's launches while activity is on,
// and the tick before activity goes on (|activity_next|), so that each
// thread's depth is counted from a call's start by then (Callback). After
// the switches it follows, so that what the callbacks find behind it is set
// up. Flusher thread (and start-up, before it runs).
void SetGate(bool activity_next) {
  const bool open = gate.detach.load(std::memory_order_relaxed) == kAsked || ApiProbeOn() ||
                    (LaunchProbeOn() && (launch_window.load(std::memory_order_relaxed) ||
                                         activity_now.load(std::memory_order_relaxed) || activity_next));
  if (open == gate.open.load(std::memory_order_relaxed)) return;
  // Depths counted before it closed are stale: a call may have ended since.
  if (open) gate.epoch.fetch_add(1, std::memory_order_relaxed);
  gate.open.store(open, std::memory_order_release);
}

// Thrift asked by an agent over its overhead budget (inprocess/thrift.h):
// activity on half as often a level, its records weighted twice as much.
// The new share starts with the cycle's next period (DutyCycle::SetOneIn:
// every tick keeps its period's chance, so the estimate stays unbiased),
// asked for after the coming tick is decided and before the gate looks a
// tick ahead (Control). Flusher thread.
void ThriftActivity() {
  State& s = S();
  const uint32_t thrift = inprocess::ThriftLevel();
  if (thrift == s.activity_thrift || s.activity_one_in <= 1) return;
  s.activity_thrift = thrift;
  const uint32_t one_in = std::min<uint32_t>(s.activity_one_in << thrift, GF_KERNEL_WEIGHT_MAX);
  Trace(("thrift level " + std::to_string(thrift) + ": activity one tick in " + std::to_string(one_in) +
         " from the next period")
            .c_str());
  s.activity_cycle->SetOneIn(one_in);
}

// gpuflame:launch_route is a switch, as kernel_time_exact is.
__attribute__((used, noinline)) void LaunchRouteSite() { DTRACE_PROBE(gpuflame, launch_route); }

// Whether launch stacks come by the launch route: an agent asks, CUPTI can
// record the launch calls by the kernel's thread IDs, its records of them
// were primed (State::route_prime), and the process has run no NCCL kernel.
// NCCL's kernels go back to the NCCL call that launched them only where
// each launch is taken while activity is on (Callback), which the route's
// windows, a tick in ten of activity's, do not do: a process that uses
// NCCL has its launch stacks by the callbacks from its first NCCL kernel's
// record on (those the route took before it go to their calls too, the
// agent taking the call at the hit; those outside its windows, by share).
bool RouteOn() {
  const State& s = S();
  return LaunchRouteOn() && s.route_usable &&
         (s.route_prime == State::Prime::kPriming || s.route_prime == State::Prime::kPrimed) &&
         s.nccl_kernel_records.load(std::memory_order_relaxed) == 0;
}

// Kernels recorded, with the launch records on from the start and none of
// them come, after which the priming has failed: a few steps of any
// workload, and far more than a buffer's worth of lag between the two
// kinds (they come in the same buffers).
constexpr uint64_t kPrimeFailKernels = 1000;
// How long after our start the priming flushes every tick.
constexpr uint64_t kPrimeFlushEachTickNs = 10'000'000'000;

// CUPTI's records of the driver's launch, copy and memset calls alone
// (IsRouteCall) on or off, which, unlike the callbacks, may be switched
// while other threads launch (0 of 74 runs failed switching them every
// 500 us on an H100: README, Measured, session 36). Flusher thread (or
// cuInit's, priming), never while CUPTI detaches.
// False if CUPTI refused one of them (then none is on).
bool SwitchLaunchRecords(bool on) {
  State& s = S();
  if (on == s.launch_records_on) return true;
  if (on && !s.route_usable) return false;
  if (on) s.converter.SetRoute();
  if (!s.activity_registered.exchange(true)) s.api.ActivityRegisterCallbacks(BufferRequested, BufferCompleted);
  bool taken = true;
  {
    ToggleTimer timer;
    for (CUpti_CallbackId id = 0; id < CUPTI_DRIVER_TRACE_CBID_SIZE; id++)
      if (IsRouteCall(id)) taken = s.api.ActivityEnableDriverApi(id, on ? 1 : 0) == CUPTI_SUCCESS && taken;
    if (on && !taken)
      for (CUpti_CallbackId id = 0; id < CUPTI_DRIVER_TRACE_CBID_SIZE; id++)
        if (IsRouteCall(id)) s.api.ActivityEnableDriverApi(id, 0);
  }
  s.launch_records_on = on && taken;
  Trace(!taken ? "CUPTI refused the driver's launch records"
        : on   ? "the driver's launch records on"
               : "the driver's launch records off");
  return taken;
}

// The priming's end (State::route_prime): its first record came, or enough
// kernels did without one. Flusher thread, every tick.
void UpdatePrime(uint64_t now_ns) {
  State& s = S();
  if (s.route_prime != State::Prime::kPriming) return;
  if (s.launch_records.load(std::memory_order_relaxed) + s.launch_records_unconverted.load(std::memory_order_relaxed)) {
    s.route_prime = State::Prime::kPrimed;
    Trace("launch records primed: the first came; windows switch them from here");
  } else if (s.kernel_records.load(std::memory_order_relaxed) >= kPrimeFailKernels) {
    s.route_prime = State::Prime::kFailed;
    Trace("launch records never came: no launch route");  // said if an agent asks for it (Switch)
  } else if (CuptiAttached() && now_ns - s.start_ns < kPrimeFlushEachTickNs) {
    // Each tick, not each flush period: the records stay on, at a cost to
    // every launch, until their first is seen. Past the start (a process
    // that has not launched yet), each flush period's flush will see it.
    s.api.ActivityFlushAll(0);
  }
}

// Opens or closes a launch window of the launch route: the agent's uprobes
// take launch stacks while its records are on. Said at
// gpuflame:launch_window, after the records go on and before they go off,
// so that the agent's uprobes never look for records that cannot come.
// While priming, the records stay on whatever the window. Flusher thread,
// never while CUPTI detaches.
void SetLaunchWindow(bool open) {
  State& s = S();
  open = open && s.route_usable;
  if (open && s.launch_window) {
    // Said again each tick it stays open: the agent closes a window it has
    // not heard of for a while itself (launch_route_sites.h), should a
    // close be lost.
    FireLaunchWindow(1);
    return;
  }
  bool closing = false;
  if (!open && s.launch_window) {
    FireLaunchWindow(0);
    s.launch_window = false;
    closing = true;
    Trace("route window closed");
  }
  // The agent lets go of its uprobes some milliseconds after it hears the
  // close, and the calls it takes meanwhile would have no record (an H200
  // visit of two windows: 748 of 2,403 hits without one; another, 38 of
  // 3,228): the records stay on a tick more, so that those calls have theirs.
  const bool records = SwitchLaunchRecords(open || closing || s.route_prime == State::Prime::kPriming);
  if (open && records && !s.launch_window) {
    s.launch_window = true;
    s.launch_windows++;
    FireActiveWithClock();  // a fresh clock pair for the window's records
    FireLaunchWindow(1);
    Trace("route window open");
  }
}

// What is on for the coming tick (Control).
void Switch(uint64_t now_ns) {
  State& s = S();
  const bool listening = BatchProbeOn() || LaunchProbeOn();
  if (listening != s.tracing) {
    s.tracing = listening;
    s.ever_traced = s.ever_traced || listening;
    s.gone_since_ns = now_ns;
    Trace(listening ? "agent attached: tracing launches and activity" : "agent gone: tracing off");
  }
  UpdatePrime(now_ns);
  if (LaunchRouteOn() && !RouteOn() && !std::exchange(s.route_refusal_said, true))
    Say(s.route_prime == State::Prime::kNone
            ? "the agent asks for launch stacks by the launch route, but CUPTI's launch records were not primed at "
              "this process's start (GPUFLAME_LAUNCH_ROUTE_PRIME=0, or CUPTI lacks them): launch stacks by CUPTI's "
              "callbacks"
        : s.route_prime == State::Prime::kFailed
            ? "the agent asks for launch stacks by the launch route, but CUPTI did not record this process's launch "
              "calls (none came with its first kernels, or CUPTI was detached since): launch stacks by CUPTI's "
              "callbacks"
            : "this process runs NCCL's kernels, which go back to their NCCL calls only by CUPTI's callbacks: launch "
              "stacks by the callbacks from here, not by the launch route");
  if (!listening) {
    SetCallbacks(false);
    if (CuptiAttached()) SetLaunchWindow(false);
    if (CuptiAttached()) SetActivity(false, 0);
    SayDetached();
    AskDetach(now_ns);
    return;
  }
  if (!Reattach(now_ns)) {
    SetCallbacks(false);
    return;
  }
  DrainApiSpans();
  ReadDevices();
  const bool startup = now_ns - s.start_ns < s.startup_ns;
  // The activity cycle advances every tick an agent listens, used or not,
  // so its phase stays uniform.
  const bool activity_tick = s.activity_cycle->Next();
  const bool exact = startup || ExactProbeOn();
  const bool activity = s.activity_wanted && (exact || activity_tick);
  // A launch stack is of use only if its kernels' records come: launch
  // callbacks are on only while activity is (GPUFLAME_ACTIVITY=0, a
  // diagnostic, aside), one such tick in GPUFLAME_LAUNCH_ONE_IN. Two
  // independent cycles would meet one tick in a hundred, and most stacks
  // would join nothing.
  const bool launch_window = activity || !s.activity_wanted;
  const bool launch_tick = launch_window && s.launch_cycle->Next();
  // Stacks by the launch route where the agent takes them (its uprobes
  // follow the window), else by our callbacks; an agent that stops asking
  // for the route gets the callbacks' from the next tick.
  const bool stacks = s.callbacks_wanted && (startup || launch_tick);
  const bool route = RouteOn() && s.activity_wanted;
  // Handed back to the callbacks for NCCL (RouteOn): on at once, for NCCL's
  // launches while activity is on (Callback), not at the next launch tick.
  if (!route && LaunchRouteOn() && s.callbacks_wanted && s.nccl_kernel_records.load(std::memory_order_relaxed))
    EnableCallbacks();
  SetCallbacks(stacks && !route);
  SetLaunchWindow(stacks && route);
  // API spans need every call's callbacks, whatever the stacks' window.
  if (ApiProbeOn()) {
    EnableCallbacks();
    EnableRuntimeLaunchCallbacks();
    EnableMemoryCallbacks();
    gate.spans_ready.store(true, std::memory_order_relaxed);
  }
  if (!s.activity_wanted) return;
  if (exact) SetActivity(true, 1);
  else SetActivity(activity, static_cast<uint16_t>(s.activity_cycle->weight()));
}

// Where the driver's launch callback does not carry its kernels' ID
// (correlation_check.h), launch stacks are taken in the runtime's launch
// calls too, for good: two more callbacks a runtime launch, against kernel
// time under [launch stack not sampled]. Flusher thread.
void CheckCorrelation(uint64_t now_ns) {
  State& s = S();
  if (s.correlation_decided) return;
  CorrelationCheck& check = s.correlation_check;
  if (s.runtime_launches_enabled) {
    // Taken there already (API spans): no verdict is wanted.
    check.Abandon();
    s.correlation_decided = true;
    return;
  }
  const CorrelationCheck::Verdict verdict = check.Decide(now_ns);
  if (verdict == CorrelationCheck::Verdict::kPending) return;
  s.correlation_decided = true;
  const std::string counts = std::to_string(check.held() - check.missed()) + " of " + std::to_string(check.held());
  if (verdict == CorrelationCheck::Verdict::kJoins) {
    Trace(("launch stacks taken in the driver's launch calls join their work: " + counts +
           (check.first_round_missed() ? " (an earlier round missed " + std::to_string(check.first_round_missed()) + ")"
                                       : std::string()))
              .c_str());
    return;
  }
  Say(("the driver's launch callbacks do not carry their kernels' correlation IDs here (twice, " +
       std::to_string(check.first_round_missed()) + " and " + std::to_string(check.missed()) + " of " +
       std::to_string(check.held()) +
       " launch stacks joined no GPU record): launch stacks are taken in the runtime's launch calls from now on")
          .c_str());
  s.runtime_launches_for_stacks = true;
  EnableRuntimeLaunchCallbacks();
}

// Once a tick, on the flusher.
void Control(uint64_t now_ns) {
  if (CuptiAttached()) CheckCorrelation(now_ns);
  Switch(now_ns);
  ThriftActivity();
  const State& s = S();
  // Activity's cycle has answered for this tick: whether it is on at the next.
  SetGate(s.activity_wanted && s.activity_cycle->Peek());
}

// Opens or closes the launch window. The callbacks (the launch APIs only:
// every other one would cost the workload a call into us for nothing) are
// enabled the first time it opens and stay enabled: CUPTI does not survive
// their switching while launches run (the file's comment). Flusher thread
// (and start-up, before it runs).
void SetCallbacks(bool on) {
  if (on != launch_window.load(std::memory_order_relaxed)) Trace(on ? "launch window open" : "launch window closed");
  launch_window.store(on, std::memory_order_relaxed);
  if (on) EnableCallbacks();
}

// Enables every callback of a set, once and for good (|enabled| says it
// was done): CUPTI does not survive their switching (SetCallbacks). Calls
// already inside one when they go on see an exit without its entry, which
// the depth count ignores (Gate::epoch says why it does not start again).
// Flusher thread (and start-up).
void EnableForGood(bool& enabled, const char* what, bool (*in_set)(CUpti_CallbackDomain, CUpti_CallbackId)) {
  State& s = S();
  if (enabled) return;
  enabled = true;
  Trace(what);
  ToggleTimer timer;
  for (CUpti_CallbackId id = 0; id < CUPTI_RUNTIME_TRACE_CBID_SIZE; id++)
    if (in_set(CUPTI_CB_DOMAIN_RUNTIME_API, id)) s.api.EnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id);
  for (CUpti_CallbackId id = 0; id < CUPTI_DRIVER_TRACE_CBID_SIZE; id++)
    if (in_set(CUPTI_CB_DOMAIN_DRIVER_API, id)) s.api.EnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
}

// Where launch stacks are taken (the file's comment): the driver's launches,
// the runtime's copies and memsets.
bool IsStackSite(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  return domain == CUPTI_CB_DOMAIN_DRIVER_API ? IsLaunch(domain, cbid) : IsRuntimeStackSite(cbid);
}

// The runtime's kernel launches: their callbacks only for spans.
bool IsRuntimeLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  return domain == CUPTI_CB_DOMAIN_RUNTIME_API && IsRuntimeKernelLaunch(cbid);
}

// The launch stacks' callbacks (see SetCallbacks).
void EnableCallbacks() { EnableForGood(S().callbacks_enabled, "launch callbacks enabled, for good", IsStackSite); }

// The runtime's launches too, for their spans: once an agent first asks.
void EnableRuntimeLaunchCallbacks() {
  EnableForGood(S().runtime_launches_enabled, "runtime launch callbacks enabled, for good", IsRuntimeLaunch);
}

// The memory calls' callbacks, for their spans only: once an agent first
// asks for spans.
void EnableMemoryCallbacks() {
  EnableForGood(S().memory_callbacks_enabled, "memory call callbacks enabled, for good", IsMemoryCall);
}

// The open span so far, at each flush: after the records the flush
// brought, so that the agent hears of an on-span that never closes
// (record's exact mode beside the agent, the start-up) as it grows.
void SayOpenWindow() {
  State& s = S();
  if (!s.activity_on) return;
  uint64_t now = 0;
  if (s.api.GetTimestamp && s.api.GetTimestamp(&now) == CUPTI_SUCCESS) SendWindow(now);
}

}  // namespace

bool StartKernelTime(uint64_t start_ns, uint64_t startup_ns) {
  State& s = S();
  s.empty_interval_ticks = inprocess::MeasureEmptyIntervalTicks();
  s.tick_rate.Start();
  const char* kernel_time = std::getenv("GPUFLAME_KERNEL_TIME");
  if (kernel_time && std::strcmp(kernel_time, "0") == 0) return false;
  s.start_ns = start_ns;
  s.startup_ns = startup_ns;
  std::string err = s.api.Load();
  if (!err.empty()) {
    FireStatus(GF_CUPTI_FAILED);
    Say(("kernel time off for this process: " + err).c_str());
    return false;  // the workload runs on, without kernel time
  }
  s.launch_rate = EnvNumber("GPUFLAME_LAUNCH_STACKS_PER_S", 1000);
  s.correlation_check.set_retry_ns(static_cast<uint64_t>(
      std::clamp(EnvNumber("GPUFLAME_CORRELATION_RETRY_S", CorrelationCheck::kRetryNs / 1e9), 0.0, 86400.0) * 1e9));
  s.tuning = TuningFromEnv([](const char* name) -> const char* { return std::getenv(name); });
  // Diagnostics, to measure what each part costs a workload:
  // GPUFLAME_LAUNCH_CALLBACKS=0 (no launch stacks: every kernel is charged
  // to [launch stack not sampled]) and GPUFLAME_ACTIVITY=0 (no kernel time).
  s.callbacks_wanted = EnvNumber("GPUFLAME_LAUNCH_CALLBACKS", 1) != 0;
  s.activity_wanted = EnvNumber("GPUFLAME_ACTIVITY", 1) != 0;
  s.detach_after_ns =
      static_cast<uint64_t>(std::clamp(EnvNumber("GPUFLAME_CUPTI_DETACH_S", 0), 0.0, 30.0 * 86400) * 1e9);
  s.prime_wanted = EnvNumber("GPUFLAME_LAUNCH_ROUTE_PRIME", 1) != 0;
  const uint64_t seed = NowNs() ^ (static_cast<uint64_t>(getpid()) << 32);
  // Every launch wanted: callbacks always on.
  const auto launch_one_in = s.launch_rate == 0 ? 1u : static_cast<uint32_t>(EnvNumber("GPUFLAME_LAUNCH_ONE_IN", 10));
  s.launch_cycle = std::make_unique<DutyCycle>(1, launch_one_in, seed);
  const auto on_ticks = static_cast<uint32_t>(EnvNumber("GPUFLAME_ACTIVITY_ON_S", 1) * 1000 / kTickMs);
  const auto one_in =
      std::min<uint32_t>(static_cast<uint32_t>(EnvNumber("GPUFLAME_ACTIVITY_ONE_IN", 10)), GF_KERNEL_WEIGHT_MAX);
  s.activity_cycle = std::make_unique<DutyCycle>(on_ticks, one_in, seed * 31 + 7);
  s.activity_one_in = one_in;
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
  ApplyTuning();
  // A thread of the parent's may have held the spans' lock at fork(): the
  // child's own launches would spin on it for ever. (Only a child handler:
  // holding the lock across fork() would stall every launch of the parent.)
  pthread_atfork(nullptr, nullptr, [] { S().api_spans.ResetLock(); });
  // Said before tracing starts, so that the agent knows our ABI version
  // before our first launch or activity record reaches it.
  FireActiveWithClock();
  s.on = true;
  Control(NowNs());  // an agent already listening sees the first launch
  Trace(BatchProbeOn() ? "active, agent attached" : "active, no agent yet");
  return true;
}

void KernelTimeTick(uint64_t now_ns) {
  if (S().on) Control(now_ns);
}

void KernelTimeFlush() {
  State& s = S();
  if (!s.on) return;
  // Which ABI we speak, said again before each flush's records: an agent
  // may attach at any time, also while another one already holds the
  // semaphores, and nothing in the process tells the two apart (a
  // semaphore counts probe sites, not tracers). One probe hit a period.
  // With it, where CUPTI's clock is now, for the records this flush brings.
  FireActiveWithClock();
  if (s.activity_registered && CuptiAttached()) {
    Trace("flush");
    s.api.ActivityFlushAll(0);
  }
  SayDevices();
  SayOpenWindow();
}

void KernelTimeSayNamesAgain() { S().converter.SayNamesAgain(); }

KernelTimeCost KernelTimeCostSoFar() {
  const State& s = S();
  // One call in kTimedOneIn is timed (by its correlation ID); the timed
  // ones' counter reads are a cost too (inprocess/self_timing.h).
  uint64_t timed_ticks = 0, timed = 0;
  for (size_t p = 0; p < std::size(s.path_timed); p++) {
    timed_ticks += s.path_timed_ticks[p].load(std::memory_order_relaxed);
    timed += s.path_timed[p].load(std::memory_order_relaxed);
  }
  const double ticks = static_cast<double>(timed_ticks * inprocess::kTimedOneIn) +
                       2.0 * static_cast<double>(timed * s.empty_interval_ticks);
  return {static_cast<uint64_t>(ticks * s.tick_rate.NsPerTick()), s.buffer_ns.load(std::memory_order_relaxed),
          s.cupti_overhead_ns.load(std::memory_order_relaxed)};
}

void KernelTimeCallOffDetach(bool wait) {
  // A detach asked and not yet taken is called off: CUDA's own teardown may
  // make calls whose callbacks are on. One under way is waited for, 1 s at
  // most, so that exit does not tear CUPTI down beside it.
  uint8_t asked = kAsked;
  gate.detach.compare_exchange_strong(asked, kAttached, std::memory_order_acq_rel);
  for (int i = 0; wait && i < 1000 && gate.detach.load(std::memory_order_acquire) == kDetaching; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

bool KernelTimeNeedsFinalFlush() {
  KernelTimeCallOffDetach(true);
  // Detached: nothing to flush. Nor where no agent ever listened (the
  // priming alone registered the buffers): nobody would take it.
  return S().activity_registered && S().ever_traced && CuptiAttached();
}

void KernelTimeLastApiSpans() {
  if (S().on) DrainApiSpans();
}

void KernelTimeFinalFlush() {
  S().api.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  SayDevices();  // as read: the driver is not asked at exit
  SayOpenWindow();
}

void KernelTimeTraceCosts() {
  const State& s = S();
  static constexpr const char* kPrimeNames[] = {"not primed", "priming", "primed", "priming failed"};
  static_assert(std::size(kPrimeNames) == static_cast<size_t>(State::Prime::kFailed) + 1, "a name per state");
  char costs[512];
  std::snprintf(
      costs, sizeof(costs),
      "%llu switches of callbacks/activity, %.1f us in all, longest %.1f us; CUPTI's own overhead records: %.1f ms; "
      "NCCL kernel launches taken: %llu; CUPTI detached %u times; launch route (%s): %llu windows, %llu records, "
      "%llu not converted",
      static_cast<unsigned long long>(s.toggles), static_cast<double>(s.toggle_ns) / 1e3,
      static_cast<double>(s.toggle_max_ns) / 1e3, static_cast<double>(s.cupti_overhead_ns.load()) / 1e6,
      static_cast<unsigned long long>(s.nccl_launches.load()), s.detaches, kPrimeNames[static_cast<int>(s.route_prime)],
      static_cast<unsigned long long>(s.launch_windows), static_cast<unsigned long long>(s.launch_records.load()),
      static_cast<unsigned long long>(s.launch_records_unconverted.load()));
  Trace(costs);
  // Where the callbacks' time went, of the timed ones (one in kTimedOneIn).
  const char* kPaths[] = {"closed", "open", "stack"};
  std::string paths = "callbacks timed, by path:";
  const double ns_per_tick = s.tick_rate.NsPerTick();
  for (size_t p = 0; p < std::size(s.path_timed); p++) {
    const uint64_t n = s.path_timed[p].load();
    const double ns = static_cast<double>(s.path_timed_ticks[p].load()) * ns_per_tick;
    std::snprintf(costs, sizeof(costs), " %s %llu (%.0f ns each, %.1f ms scaled)", kPaths[p],
                  static_cast<unsigned long long>(n), n ? ns / static_cast<double>(n) : 0.0,
                  ns * inprocess::kTimedOneIn / 1e6);
    paths += costs;
  }
  Trace(paths.c_str());
}

}  // namespace gpuflame::cupti
