// In-process tensor events: PyTorch's caching allocator, observed from inside
// the workload instead of through a uprobe per event.
//
// Every caching-allocator alloc and free calls
// c10::reportMemoryUsageToProfiler (libc10.so) from libc10_cuda.so, through
// its GOT. Once an agent listens (the gpuflame:tensor_batch semaphore is
// up), that slot is pointed at our hook: it calls the original, walks the
// calling thread's Python stack in-process, and appends a record to a batch
// that goes to the agent at gpuflame:tensor_batch, one trap per batch
// instead of one per event. Each distinct stack is sent once (as
// GF_EV_PY_STACK, again every 10 s for agents that attach late)
// and events carry its ID. Layout of the records:
// bpf/gpuflame_abi.h.
//
// Bytes are the allocator's block sizes (what memory_allocated() counts),
// with its allocated/reserved totals on every record; when the latest event
// was not sent (a sampled run), its totals follow within a flush period
// (GF_EV_TENSOR_TOTALS).
//
// Allocations made on a thread that runs no Python while a backward() call
// runs (autograd's engine threads) carry that call's caller stack instead,
// flagged GF_EVF_AUTOGRAD (inprocess/autograd_origin.h).
#ifndef GPUFLAME_INPROCESS_TENSOR_EVENTS_H_
#define GPUFLAME_INPROCESS_TENSOR_EVENTS_H_

#include <cstddef>
#include <cstdint>

#include "inprocess/backward_origins.h"
#include "inprocess/self_timing.h"
#include "inprocess/torch_report.h"

namespace gpuflame::inprocess {

// Hooks the allocator if an agent listens for tensor batches, else does
// nothing (and Poll tries again). Called once, at injection. Allocations
// are sampled by bytes (mean |sample_bytes|; 0: none is) unless an agent
// asks for every one (gpuflame:tensor_exact), and until |exact_until_ns|
// (CLOCK_MONOTONIC), the process's start-up. While sampled, the interval
// grows to keep the hook under |budget_share| of the process's CPU time
// (hook_budget.h; 0: never).
void StartTensorEvents(uint64_t sample_bytes, uint64_t exact_until_ns, double budget_share);
// Every 100 ms: installs the hook if an agent has started to listen and
// sends what is batched.
void PollTensorEvents();
// An agent has just attached (cupti/listeners.h): the next poll says we are
// live and sends each stack again at its next use. Flusher thread.
void GreetNewListener();
// At exit: sends what is batched.
void FlushTensorEvents();

// What the hook has cost the workload so far: events recorded and their
// time, estimated from about one event in kTimedOneIn (self_timing.h).
struct HookCost {
  uint64_t calls = 0;
  uint64_t ns = 0;
  // Of those, the taken allocations (each timed: their walks), for
  // GPUFLAME_CUPTI_DEBUG's exit line: the rest is the per-event floor.
  uint64_t taken = 0, taken_ns = 0;
};
HookCost HookCostSoFar();
// Where the hook's events went, for GPUFLAME_CUPTI_DEBUG's exit line: how
// many the quick path left to Record (taken allocations, sent blocks'
// frees, frees the block set's filter could not rule out, every event of
// an exact run), and that set's fill: blocks held, slots in use, and its
// filter's bits set (of BlockSet's kFilterBits). Takes the hook's lock if
// it can soon; else all 0.
struct HookRouting {
  uint64_t recorded = 0;
  uint64_t blocks = 0, slots = 0, filter_bits = 0, filter_of = 0;
};
HookRouting HookRoutingSoFar();
// For the backward-origin hook, on the calling thread:
// whether an agent listens for tensor batches (the hook does nothing without);
bool TensorEventsListening();
// walks this thread's Python stack, sends it (once) as GF_EV_PY_STACK, and
// returns its ID, or 0 without frames;
uint64_t SendThisThreadsStack();
// whether this thread certainly runs no Python (PythonWalker::ThreadRunsNoPython);
bool ThisThreadRunsNoPython();
// says the backward-origin hook's state (enum gf_autograd_hook) to the agent.
void SayAutogradHook(uint32_t status);
// For the out-of-memory hook (oom_report.h), on the thread whose allocation
// failed: PyTorch's report (GF_EV_OOM_REPORT) with this thread's stack (or,
// on an engine thread, its backward() caller's), sent at once: the
// OutOfMemoryError that follows may end the process.
void SendOomReport(uint64_t bytes, size_t allocated, size_t reserved, TorchDevice device);
// whether the tensor hook is live (the out-of-memory hook goes in after it).
bool TensorHookLive();
// The backward() calls running now (the tensor hook and launches read it).
BackwardOrigins& RunningBackwardCalls();

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_TENSOR_EVENTS_H_
