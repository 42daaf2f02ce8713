// libgpuflame_cupti.so: loaded into a CUDA process by the driver through
// CUDA_INJECTION64_PATH (no code change). Two halves, both handing their
// records to the gpuflame agent at USDT probes:
//  - kernel time (kernel_time.h): CUPTI's launch callbacks and activity,
//    duty-cycled; absent from a gpuflame built without CUPTI's headers;
//  - in-process tensor events (inprocess/), which need no CUPTI: with
//    GPUFLAME_KERNEL_TIME=0 (gpuflame record --no-kernel-time) CUPTI is left
//    alone and only they run.
// A flusher thread ticks every 100 ms for both.
// gpuflame:status also carries the GF_ABI_VERSION this library was built
// with, at start and again every flush period while an agent listens: the
// agent checks it, since the library cannot know the agent's (probes.h).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>

#include "cupti/kernel_time.h"
#include "cupti/library_util.h"
#include "cupti/listeners.h"
#include "cupti/probes.h"
#include "inprocess/last_thread.h"
#include "inprocess/tensor_events.h"

extern "C" {
__extension__ unsigned short gpuflame_launch_semaphore __attribute__((section(".probes"), used));
__extension__ unsigned short gpuflame_kernel_batch_semaphore __attribute__((section(".probes"), used));
__extension__ unsigned short gpuflame_kernel_name_semaphore __attribute__((section(".probes"), used));
__extension__ unsigned short gpuflame_status_semaphore __attribute__((section(".probes"), used));
__extension__ unsigned short gpuflame_kernel_time_exact_semaphore __attribute__((section(".probes"), used));
__extension__ unsigned short gpuflame_lib_cost_semaphore __attribute__((section(".probes"), used));
__extension__ unsigned short gpuflame_api_batch_semaphore __attribute__((section(".probes"), used));
__extension__ unsigned short gpuflame_launch_route_semaphore __attribute__((section(".probes"), used));
__extension__ unsigned short gpuflame_launch_records_semaphore __attribute__((section(".probes"), used));
__extension__ unsigned short gpuflame_launch_window_semaphore __attribute__((section(".probes"), used));
__extension__ unsigned short gpuflame_flushed_semaphore __attribute__((section(".probes"), used));
}

namespace gpuflame::cupti {
namespace {

struct State {
  std::mutex mu;
  std::condition_variable cv;  // the flusher's ticks and its stop; AtExit waits on it for |stopped|
  bool stop = false;           // under |mu|
  bool stopped = false;        // under |mu|: the flusher has left its loop and calls nothing any more
  std::thread flusher;
  pid_t flusher_pid = 0;  // the process the flusher runs in: a forked child has none
  int flush_ms = 1000;
  uint64_t start_ns = 0;
  uint64_t startup_ns = 5'000'000'000;
  ListenerWatch listeners;
  std::atomic<uint64_t> flusher_cpu_ns{0};  // read on the flusher: ReportCost may run on another thread
};

State& S() {
  static State* s = new State();  // never destroyed: CUDA may call us during exit
  return *s;
}

// What we have cost the process so far, for the agent's overhead budget.
void ReportCost() {
  State& s = S();
  const inprocess::HookCost hook = inprocess::HookCostSoFar();
  const KernelTimeCost kernel = KernelTimeCostSoFar();
  if (on_flusher) s.flusher_cpu_ns.store(ThreadCpuNs(), std::memory_order_relaxed);
  FireLibCost(hook.calls, hook.ns, kernel.callback_ns,
              s.flusher_cpu_ns.load(std::memory_order_relaxed) + kernel.buffer_ns, kernel.overhead_ns);
}

void FinalKernelTimeFlush();

// Ticks every 100 ms: the tensor events (so that at most that much of them
// waits in the process when an agent stops), kernel time's duty cycles, and
// its flush every flush period.
void FlushLoop() {
  State& s = S();
  on_flusher = true;
  std::unique_lock<std::mutex> lock(s.mu);
  auto next_flush = std::chrono::steady_clock::now() + std::chrono::milliseconds(s.flush_ms);
  while (!s.stop) {
    s.cv.wait_for(lock, std::chrono::milliseconds(std::min(s.flush_ms, kTickMs)));
    if (s.stop) break;
    lock.unlock();
    // main() ended with pthread_exit and every other thread has ended
    // since: the process would have ended with the last of them, and only
    // we keep it. End it as that thread would have (glibc's exit(0)); our
    // exit handler sees it called on the flusher.
    if (inprocess::OnlyThisThreadLeft()) {
      Trace("flusher: the workload's threads have all ended, exiting as the last thread would");
      // What AtExit does on any other thread, here, before exit's teardown
      // (AtExit on the flusher only flushes the tensor events).
      FinalKernelTimeFlush();
      inprocess::FlushTensorEvents();
      ReportCost();
      std::exit(0);
    }
    // A newcomer has heard nothing we said once: our stacks and names go
    // again, each at its next use.
    if (s.listeners.NewListener(BatchProbeOn() || StatusProbeOn() || inprocess::TensorEventsListening())) {
      inprocess::GreetNewListener();
      KernelTimeSayNamesAgain();
    }
    inprocess::PollTensorEvents();
    KernelTimeTick(NowNs());
    const auto now = std::chrono::steady_clock::now();
    // An agent whose recording ends holds gpuflame:flushed while it waits
    // for our answer (bpf/gpuflame_abi.h): every tick then flushes.
    const bool asked = FlushAsked();
    if (now < next_flush && !asked) {
      lock.lock();
      continue;
    }
    next_flush = now + std::chrono::milliseconds(s.flush_ms);
    KernelTimeFlush();
    if (asked) inprocess::FlushTensorEvents();
    ReportCost();
    // After the flush's records, on this thread: the agent that asked reads
    // this once they are in its ring.
    if (asked) {
      Trace("flush: asked by an agent, done");
      FireFlushed();
    }
    lock.lock();
  }
  s.stopped = true;
  s.cv.notify_all();
}

// Stops the flusher and waits, at most |limit|, until it has left its loop:
// true once it has. Its tick calls into CUPTI (callbacks switched, activity
// flushed) and exit() goes on from our handler to CUDA's and CUPTI's own
// teardown (their destructors run after it): a tick still running then
// calls into freed state (seen as a SIGSEGV at exit). Bounded all the same:
// the workload's exit must never hang on a flusher stuck in CUPTI.
bool StopFlusher(State& s, std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(s.mu);
  s.stop = true;
  s.cv.notify_all();
  return s.cv.wait_for(lock, limit, [&] { return s.stopped; });
}

// At exit, what completed since the last flush goes out, but the workload's
// exit must never wait on us: CUDA may be half torn down by now (its own
// exit handlers can run before ours), so the last flush runs on a helper
// thread and is abandoned after a bounded wait. First the flusher stops,
// whatever the mode: nothing of ours may call CUPTI once this handler has
// returned.
void AtExit() {
  State& s = S();
  Trace("exit: stopping the flusher");
  // A forked child has the parent's State but no flusher (threads are not
  // forked): nothing to stop, and the std::thread names a thread of the
  // parent's, which must be neither joined nor detached here.
  // exit() on the flusher itself (from inside a tick) would wait for itself.
  if (s.flusher_pid != getpid() || s.flusher.get_id() == std::this_thread::get_id()) {
    KernelTimeCallOffDetach(s.flusher_pid == getpid());
    inprocess::FlushTensorEvents();
    return;
  }
  const bool stopped = StopFlusher(s, std::chrono::seconds(1));
  inprocess::FlushTensorEvents();
  ReportCost();  // the last word on what we cost, after the last events
  if (!stopped) {
    // Stuck in CUPTI: a final flush beside it would be a second caller.
    Trace("exit: the flusher did not stop in 1 s, abandoned without a final flush");
    KernelTimeCallOffDetach(true);
    s.flusher.detach();
    return;
  }
  s.flusher.join();  // it has left its loop: this returns at once
  FinalKernelTimeFlush();
}

// What kernel time still holds at the process's end: the API spans, then
// CUPTI's incomplete buffers, forced out on a helper thread abandoned after
// 2 s (CUDA may be half torn down by now). With the flusher stopped, or on it.
// GPUFLAME_CUPTI_DEBUG: the tensor hook's own figure, and the part of it
// its taken allocations were.
void TraceHookCosts() {
  const inprocess::HookCost h = inprocess::HookCostSoFar();
  if (!h.calls) return;
  const uint64_t rest_ns = h.ns > h.taken_ns ? h.ns - h.taken_ns : 0;
  const uint64_t rest_calls = h.calls - std::min(h.calls, h.taken);
  char line[256];
  std::snprintf(line, sizeof(line),
                "tensor hook: %llu events, %.1f ms; taken allocations %llu, %.1f ms (%.0f ns each); the rest %.0f ns "
                "an event",
                static_cast<unsigned long long>(h.calls), static_cast<double>(h.ns) / 1e6,
                static_cast<unsigned long long>(h.taken), static_cast<double>(h.taken_ns) / 1e6,
                h.taken ? static_cast<double>(h.taken_ns) / static_cast<double>(h.taken) : 0.0,
                rest_calls ? static_cast<double>(rest_ns) / static_cast<double>(rest_calls) : 0.0);
  Trace(line);
  const inprocess::HookRouting r = inprocess::HookRoutingSoFar();
  if (!r.filter_of) return;
  std::snprintf(line, sizeof(line),
                "tensor hook: %llu events left to Record (%.1f%%); blocks sent and live %llu in %llu slots, filter "
                "bits set %llu of %llu",
                static_cast<unsigned long long>(r.recorded),
                100.0 * static_cast<double>(r.recorded) / static_cast<double>(h.calls),
                static_cast<unsigned long long>(r.blocks), static_cast<unsigned long long>(r.slots),
                static_cast<unsigned long long>(r.filter_bits), static_cast<unsigned long long>(r.filter_of));
  Trace(line);
}

void FinalKernelTimeFlush() {
  TraceHookCosts();
  KernelTimeLastApiSpans();  // no CUPTI call: safe whatever CUDA's state
  // Read only now: the flusher's last tick may have registered activity.
  if (!KernelTimeNeedsFinalFlush()) {
    KernelTimeTraceCosts();
    return;
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread last([done] {
    Trace("exit: final flush");
    KernelTimeFinalFlush();
    done->store(true);
  });
  for (int i = 0; i < 200 && !done->load(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  Trace(done->load() ? "exit: flushed" : "exit: final flush did not finish in 2 s, abandoned");
  KernelTimeTraceCosts();
  if (done->load()) last.join();
  else last.detach();
}

int Initialize() {
  State& s = S();
  s.start_ns = NowNs();
  s.flush_ms = static_cast<int>(EnvNumber("GPUFLAME_FLUSH_MS", 1000));
  if (s.flush_ms < 10) s.flush_ms = 10;
  // A process's start (model load, KV cache) is seen whole, every kernel
  // and every tensor.
  s.startup_ns = static_cast<uint64_t>(EnvNumber("GPUFLAME_STARTUP_S", 5) * 1e9);
  // Before CUPTI: at cuInit no tensor has been allocated yet.
  // Sampled, the tensor hook keeps itself under 0.5% of the process's CPU
  // by default: half the agent's 1%, the rest for its probes and callbacks.
  inprocess::StartTensorEvents(static_cast<uint64_t>(EnvNumber("GPUFLAME_TENSOR_SAMPLE_BYTES", 4 << 20)),
                               s.start_ns + s.startup_ns, EnvNumber("GPUFLAME_TENSOR_HOOK_BUDGET", 0.5) / 100);
  StartKernelTime(s.start_ns, s.startup_ns);
  s.flusher_pid = getpid();
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
