#include "inprocess/tensor_events.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

#include "bpf/gpuflame_abi.h"
#include "inprocess/autograd_origin.h"
#include "inprocess/block_set.h"
#include "inprocess/byte_sampler.h"
#include "inprocess/got_hook.h"
#include "inprocess/hook_budget.h"
#include "inprocess/oom_report.h"
#include "inprocess/python_walker.h"
#include "inprocess/spin_lock.h"
#include "inprocess/thrift.h"
#include "inprocess/torch_report.h"

extern "C" {
__extension__ unsigned short gpuflame_tensor_batch_semaphore __attribute__((section(".probes"), used));
__extension__ unsigned short gpuflame_tensor_exact_semaphore __attribute__((section(".probes"), used));
}

namespace gpuflame::inprocess {
namespace {

constexpr size_t kSentSlots = 4096;  // stack IDs remembered (a power of two)
constexpr int kForgetPolls = 100;    // polls (100 ms apart) between re-sending every stack

constexpr size_t kBlockSlots = 1 << 16;    // blocks the agent was told of (512 KiB)
constexpr int kTotalsDevices = 32;         // devices whose totals are kept apart (more: sent at each switch)
constexpr uint64_t kMaxInterval = 1ull << 50;  // sampling interval in bytes: past any device's memory

bool Listening() { return __builtin_expect(gpuflame_tensor_batch_semaphore != 0, 1); }
// gpuflame:tensor_exact is a switch (`record`'s): every allocation, not a
// sample by bytes. Only its semaphore is read; nothing calls the site.
bool ExactSwitch() { return gpuflame_tensor_exact_semaphore != 0; }
__attribute__((used, noinline)) void TensorExactSite() { DTRACE_PROBE(gpuflame, tensor_exact); }

uint64_t ProcessCpuNs() {
  timespec ts;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct State {
  // What every allocator event reads or writes, on one cache line. The hook
  // runs amid PyTorch's own work, which evicts our lines between events, so
  // each line it touches is a likely cache miss: a sampled run's event
  // touches this one, the semaphores' and, for a free, the head line of
  // |blocks| (its filter rules most unsent blocks out there) and, unless
  // ruled out, one slot's.
  struct alignas(64) Hot {
    std::atomic<TorchReportFn> original{nullptr};
    std::atomic<uint64_t> hook_calls{0};  // events recorded, counted under |lock|
    // Guarded by |lock|:
    ByteSampler sampler{0, 1};
    // The allocator's totals as its latest event reported them, on |device|:
    // a sampled run sends few events, so the flusher sends these when the
    // latest went in no record (GF_EV_TENSOR_TOTALS).
    uint64_t allocated = 0, reserved = 0;
    SpinLock lock;
    // The current agent has been told we are live (an agent ignores our
    // events until it is: that record carries the ABI version and the
    // hand-over time).
    std::atomic<bool> announced{false};
    // kStarting until the flusher sees start-up over; kThrifty while an
    // agent over its budget asks for less (thrift.h): the exact switch is
    // then not honoured. Written by the flusher only, read by every event.
    std::atomic<uint8_t> mode{0};
    // Guarded by |lock|:
    bool announce_pending = false;  // the next record goes after a LIVE announcement
    bool every_free = false;        // |blocks| overflowed: every free goes out (until the next agent)
    int8_t device = 0;
    bool totals_seen = false;    // |allocated|, |reserved| and |device| hold an event's
    bool totals_unsent = false;  // ... and no record the agent will read carried them
  };
  // The hot line and, next to it, the block set's head line (its filter):
  // the two lines a free reads, on one 128-byte-aligned pair, which the
  // CPU's adjacent-line prefetcher (Intel's L2 "spatial" prefetcher) fetches
  // together on a miss of either.
  alignas(128) Hot hot;
  // Guarded by |hot.lock|: the blocks whose allocation the agent was told
  // of; only their frees go out.
  BlockSet<kBlockSlots> blocks;
  // The time of about one event in kTimedOneIn, in ticks, and how many
  // those were; self_timing.h's parts of the counter and the clock, measured
  // at start.
  std::atomic<uint64_t> hook_timed_ticks{0}, hook_timed{0};
  std::atomic<uint64_t> taken_ns{0}, taken{0};  // all taken allocations' time (their walks, mostly), and count
  uint64_t empty_interval_ns = 0, empty_interval_ticks = 0;
  TickRate tick_rate;
  uint64_t sample_bytes = 0;  // the configured interval, which the budget scales
  HookBudget budget{0};       // flusher thread only
  std::atomic<bool> hooked{false};
  GotHookResult patch;         // flusher thread only, once hooked
  bool said_no_torch = false;  // flusher thread only
  uint32_t said_python = 0;    // flusher thread only: the walker's state last said
  int polls = 0;               // flusher thread only
  bool greet = false;          // flusher thread only: an agent has just attached
  PythonWalker walker;
  BackwardOrigins backward;
  uint32_t pid = 0;             // our own view; the agent uses the probe's host pid
  bool said_exact = false;      // flusher thread only: the mode last said
  uint64_t exact_until_ns = 0;  // the process's start-up: every allocation
  // Guarded by |hot.lock|:
  // Other devices' latest totals that went in no record (|hot| holds the
  // current device's): a process allocating on several GPUs in turn writes
  // here on each switch, and the flusher sends them.
  struct DeviceTotals {
    uint64_t allocated = 0, reserved = 0;
  };
  DeviceTotals other_devices[kTotalsDevices];
  uint32_t other_devices_unsent = 0;  // a bit per device index
  alignas(8) uint8_t batch[GF_TENSOR_BATCH_MAX];
  size_t used = 0;
  uint64_t recorded = 0;  // events Record decided (HookRoutingSoFar)
  uint64_t sent[kSentSlots] = {};
  size_t sent_count = 0;
};
static_assert(sizeof(State::Hot) <= 64, "one cache line");
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
static_assert(offsetof(State, hot) == 0 && offsetof(State, blocks) == 64 && alignof(State) == 128,
              "the hot line and the block set's head line, one 128-byte pair");
#pragma GCC diagnostic pop

// At a fixed address in our .bss, built when the library is loaded (its
// constructors run before the hook can go in, at the flusher's first tick
// at the soonest): every event finds it PC-relative, with no guard byte and
// pointer to load first, a line the step's own work may have evicted.
// Never destroyed: the allocator may call us during exit.
alignas(State) unsigned char state_storage[sizeof(State)];
__attribute__((constructor)) void BuildState() { new (state_storage) State(); }

State& S() { return *std::launder(reinterpret_cast<State*>(state_storage)); }

// State::Hot::mode's bits. kListening and kExactSwitch mirror the two
// semaphores above, read by the flusher every tick (UpdateMode): an event then
// reads the hot line alone, not the semaphores' line too, which the step's
// own work evicts between events as it does ours (a line fewer an event, on
// every allocator event of the process). An agent's attaching or leaving,
// and `record`'s switch, are seen a tick late at most.
// A forked child has no flusher (AtForkChild): kNoFlusher, and it reads the
// semaphores themselves. kQuick: the rest of the bits allow Hook's quick
// path (QuickMode, UpdateMode), so that Hook tests one bit of them.
constexpr uint8_t kStarting = 1, kThrifty = 2, kListening = 4, kExactSwitch = 8, kNoFlusher = 16, kQuick = 32;

bool Listening(uint8_t mode) { return (mode & kNoFlusher) ? Listening() : (mode & kListening) != 0; }

bool Exact(uint8_t mode) {
  const bool exact_switch = (mode & kNoFlusher) ? ExactSwitch() : (mode & kExactSwitch) != 0;
  return (exact_switch && !(mode & kThrifty)) || (mode & kStarting);
}

// Every allocation goes out: still starting up, or asked for (and no agent
// over its budget asks for less). |mode| sits on the hot line the event's
// lock brings in anyway.
bool Exact() { return Exact(S().hot.mode.load(std::memory_order_relaxed)); }

// GF_THRIFT_SAMPLE_FACTOR to the |level|.
uint64_t ThriftFactor(uint32_t level) {
  uint64_t f = 1;
  for (uint32_t i = 0; i < level && i < GF_THRIFT_SITES; i++) f *= GF_THRIFT_SAMPLE_FACTOR;
  return f;
}

uint32_t Tid() {
  thread_local uint32_t tid = 0;
  if (!tid) tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return tid;
}

// Hands the batch to the agent. Under |lock|.
void SendLocked(State& s) {
  if (s.used == 0) return;
  if (Listening()) DTRACE_PROBE2(gpuflame, tensor_batch, s.batch, static_cast<unsigned long>(s.used));
  s.used = 0;
}

// Appends one record (header + payload) to the batch. Under |lock|.
void AppendLocked(State& s, const gf_event& ev, const void* payload, size_t payload_bytes) {
  const size_t bytes = (sizeof(ev) + payload_bytes + 7) & ~size_t{7};
  if (s.used + bytes > sizeof(s.batch)) SendLocked(s);
  std::memcpy(s.batch + s.used, &ev, sizeof(ev));
  if (payload_bytes) std::memcpy(s.batch + s.used + sizeof(ev), payload, payload_bytes);
  s.used += bytes;
}

gf_event Header(uint8_t kind, uint64_t addr, uint64_t size) {
  gf_event ev;
  std::memset(&ev, 0, sizeof(ev));
  ev.kind = kind;
  ev.domain = GF_DOMAIN_TORCH;
  ev.api = GF_API_TORCH_REPORT;
  ev.pid = S().pid;
  ev.tid = Tid();
  ev.ts_ns = MonotonicNs();
  ev.addr = addr;
  ev.size = size;
  return ev;
}

// The 64x64 -> 128-bit product folded to 64 bits (wyhash's "mum"): every
// bit of both inputs reaches every bit of the result in one multiply.
inline uint64_t Mum(uint64_t a, uint64_t b) {
  const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}

// A stack's ID. Once per taken allocation, over up to 128 frames: one
// multiply a frame on the dependency chain (the frame's own words are mixed
// off it, in parallel), where a multiply and a shift per word made it about
// half of a warm walk's cost (session 30: 6 of 14 ns a frame). Each frame's
// words all go through its own multiply: no word of one frame can cancel a
// word of the next.
uint64_t HashFrames(const gf_py_frame* frames, uint32_t n) {
  static_assert(sizeof(gf_py_frame) == 3 * sizeof(uint64_t));
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t w[3];
    std::memcpy(w, &frames[i], sizeof(w));
    // Neither factor can be 0: the code pointer is a user address and the
    // constant is not one, and the third word's top byte (padding) is 0.
    const uint64_t m = Mum(w[0] ^ 0xa0761d6478bd642full, w[2] ^ 0xe7037ed1a0b428dbull) ^ w[1];
    h = Mum(h ^ m, 0x8ebc6af09c88c6e3ull);
  }
  return Mum(h, 0x589965cc75374cc3ull) | 1;  // 0 means "no Python frames"
}

// True if |id| was already sent this period; else remembers it. Under |lock|.
bool SentLocked(State& s, uint64_t id) {
  if (s.sent_count >= kSentSlots * 3 / 4) {
    std::memset(s.sent, 0, sizeof(s.sent));
    s.sent_count = 0;
  }
  for (size_t i = id & (kSentSlots - 1), probes = 0; probes < kSentSlots; i = (i + 1) & (kSentSlots - 1), probes++) {
    if (s.sent[i] == id) return true;
    if (s.sent[i] == 0) {
      s.sent[i] = id;
      s.sent_count++;
      return false;
    }
  }
  return false;
}

void AppendTotalsLocked(State& s, int8_t device, uint64_t allocated, uint64_t reserved) {
  gf_event ev = Header(GF_EV_TENSOR_TOTALS, 0, 0);
  ev.arg0 = static_cast<uint64_t>(static_cast<uint8_t>(device));
  ev.arg1 = allocated;
  ev.arg2 = reserved;
  AppendLocked(s, ev, nullptr, 0);
}

// Every device's latest totals that no record carried. Under |lock|.
void AppendTotalsIfUnsentLocked(State& s) {
  for (uint32_t unsent = std::exchange(s.other_devices_unsent, 0); unsent; unsent &= unsent - 1) {
    const int d = __builtin_ctz(unsent);
    AppendTotalsLocked(s, static_cast<int8_t>(d), s.other_devices[d].allocated, s.other_devices[d].reserved);
  }
  if (!s.hot.totals_unsent) return;
  s.hot.totals_unsent = false;
  AppendTotalsLocked(s, s.hot.device, s.hot.allocated, s.hot.reserved);
}

// Keeps an event's totals, sent or not: three stores to the line the lock
// has already brought in. On a switch of device, the last one's, if they
// went in no record, are set aside for the flusher (a process allocating on
// several GPUs in turn; the agent keeps each device's). Under |lock|.
//
// The agent ends with a device's latest totals because the allocator
// reports each device's events under that device's own lock: of two
// events on one device, one is over before the other begins. Only a taken
// allocation's record is appended after its walk, and it knows whether
// another event came meanwhile (Record's |seq|).
void KeepTotalsLocked(State& s, TorchDevice device, size_t allocated, size_t reserved) {
  if (s.hot.device != device.index && s.hot.totals_unsent) {
    const auto d = static_cast<uint8_t>(s.hot.device);
    if (d < kTotalsDevices) {
      s.other_devices[d] = {s.hot.allocated, s.hot.reserved};
      s.other_devices_unsent |= 1u << d;
    } else {
      AppendTotalsLocked(s, s.hot.device, s.hot.allocated, s.hot.reserved);
    }
    s.hot.totals_unsent = false;
  }
  s.hot.device = device.index;
  s.hot.allocated = allocated;
  s.hot.reserved = reserved;
  s.hot.totals_seen = true;
}

// Says we are live, first in the batch, and forgets which stacks were sent:
// the agent hearing it may be a new one (it is owed the current device's
// totals too). Under |lock|.
void AnnounceLocked(State& s, uint32_t python) {
  gf_event ev = Header(GF_EV_TENSOR_HOOK, 0, 0);
  ev.arg0 = GF_TENSOR_HOOK_LIVE;
  ev.arg1 = python;
  ev.arg2 = GF_ABI_VERSION;  // the agent's check: nothing else says it when CUPTI is off
  ev.size = Exact() ? 0 : s.hot.sampler.interval();  // the sampling interval in bytes, 0: every allocation
  std::memset(s.sent, 0, sizeof(s.sent));
  s.sent_count = 0;
  s.hot.totals_unsent = s.hot.totals_seen;
  AppendLocked(s, ev, nullptr, 0);
}

// The announcement an agent is owed after a time nobody listened, if any,
// goes first. It knows none of our blocks: their frees are not its business.
// Under |lock|.
bool AnnounceIfPendingLocked(State& s) {
  if (!s.hot.announce_pending) return false;
  s.hot.announce_pending = false;
  s.blocks.Clear();
  s.hot.every_free = false;
  AnnounceLocked(s, s.walker.failure());
  return true;
}

// An allocator event's record, as GF_API_TORCH_REPORT carries it.
gf_event TensorEvent(uint8_t kind, uint64_t addr, uint64_t size, TorchDevice device, size_t allocated,
                     size_t reserved) {
  gf_event ev = Header(kind, addr, size);
  ev.arg0 = static_cast<uint64_t>(static_cast<uint8_t>(device.index));
  ev.arg1 = allocated;
  ev.arg2 = reserved;
  return ev;
}

// A thread that runs no Python while backward() calls run (an engine
// thread) works for them: its event names the one call's caller stack
// (GF_EVF_AUTOGRAD, |ref|: sent when the call began), or how many ran
// (ambiguous). Returns the flags to add; 0 leaves |ref| alone.
uint32_t LendBackwardCaller(State& s, uint64_t& ref) {
  const BackwardOrigin origin = s.backward.Current();
  if (origin.active == 0 || !s.walker.ThreadRunsNoPython()) return 0;
  if (origin.active == 1 && origin.stack_id) {
    ref = origin.stack_id;
    return GF_EVF_AUTOGRAD;
  }
  if (origin.active > 1) {
    ref = origin.active;
    return GF_EVF_AUTOGRAD | GF_EVF_AUTOGRAD_AMBIGUOUS;
  }
  return 0;
}

__attribute__((noinline)) void Record(void* ptr, int64_t delta, size_t allocated, size_t reserved, TorchDevice device) {
  State& s = S();
  const uint64_t addr = reinterpret_cast<uint64_t>(ptr);
  const uint64_t size = static_cast<uint64_t>(delta >= 0 ? delta : -delta);
  const bool exact = Exact();
  // Decided before anything costly: most events of a sampled run end here.
  s.hot.lock.lock();
  // Counted under the lock, so no atomic write of its own (see Hook).
  const uint64_t seq = s.hot.hook_calls.load(std::memory_order_relaxed);
  s.hot.hook_calls.store(seq + 1, std::memory_order_relaxed);
  s.recorded++;
  AnnounceIfPendingLocked(s);
  KeepTotalsLocked(s, device, allocated, reserved);
  if (delta < 0) {
    const bool send = s.blocks.Erase(addr) || s.hot.every_free;
    if (send) AppendLocked(s, TensorEvent(GF_EV_FREE, addr, size, device, allocated, reserved), nullptr, 0);
    s.hot.totals_unsent = !send;
    s.hot.lock.unlock();
    return;
  }
  const uint64_t stands_for = exact ? size : s.hot.sampler.Sample(size);
  // Exact blocks are remembered too: a sampled run after an exact one must
  // still send their frees.
  if (stands_for && !s.blocks.Insert(addr)) s.hot.every_free = true;
  // Not sent; a taken one's record goes out below, with these totals.
  if (!stands_for) s.hot.totals_unsent = true;
  s.hot.lock.unlock();
  if (!stands_for) return;
  // A taken allocation's own cost, timed every time (its walk dwarfs the two
  // clock reads): what the sampling interval controls (hook_budget.h).
  const uint64_t taken_at = MonotonicNs();
  gf_event ev = TensorEvent(GF_EV_ALLOC, addr, size, device, allocated, reserved);
  // Walked outside the lock: it reads only this thread's frames. On the
  // stack (3 KB), not thread_local: a dlopen'ed library's first TLS access
  // on a thread may allocate, and we run under the allocator's lock.
  gf_py_frame frames[GF_MAX_PY_FRAMES];
  uint32_t flags = 0;
  const uint32_t n = s.walker.Walk(frames, &flags);
  const uint64_t id = n ? HashFrames(frames, n) : 0;
  ev.flags = flags | GF_EVF_STACK_REF | (exact ? 0 : GF_EVF_SAMPLED);
  // A thread that runs no Python (not a failed walk) while a backward()
  // call runs: an engine thread, working for that call's caller.
  uint64_t payload[2] = {id, stands_for};  // the stack, and with GF_EVF_SAMPLED the bytes it stands for
  uint64_t& ref = payload[0];
  if (n == 0 && !(flags & (GF_EVF_PY_READ_FAILED | GF_EVF_PY_KEY_UNSET))) ev.flags |= LendBackwardCaller(s, ref);
  s.hot.lock.lock();
  // A new agent, announced while we walked, forgot every block: this one's
  // record goes to it, so its free must too.
  if (AnnounceIfPendingLocked(s) && !s.blocks.Insert(addr)) s.hot.every_free = true;
  const bool new_stack = id && !SentLocked(s, id);
  if (new_stack) {
    gf_event def = ev;
    def.kind = GF_EV_PY_STACK;
    def.flags = flags;
    def.arg0 = id;
    def.py_count = static_cast<uint16_t>(n);
    AppendLocked(s, def, frames, n * sizeof(gf_py_frame));
  }
  AppendLocked(s, ev, payload, exact ? sizeof(uint64_t) : sizeof(payload));
  // Its totals are the latest unless events came while it walked (then the
  // latest's are kept, and the flusher sends them).
  s.hot.totals_unsent = s.hot.hook_calls.load(std::memory_order_relaxed) != seq + 1;
  // A new stack goes out at once: the agent names its frames from our code
  // objects, which must still exist (a module body's may be freed soon after).
  if (new_stack) SendLocked(s);
  s.hot.lock.unlock();
  s.taken_ns.fetch_add(TimedPart(MonotonicNs() - taken_at, s.empty_interval_ns), std::memory_order_relaxed);
  s.taken.fetch_add(1, std::memory_order_relaxed);
}

// Whether an event may take Hook's quick path: an agent listens, the
// flusher mirrors the semaphores into |mode| (not a forked child), start-up
// is over, and allocations are sampled (no exact switch, or one that an
// agent over its budget overrules). Listening(mode) && !Exact(mode).
inline bool QuickMode(uint8_t mode) {
  return (mode & (kListening | kStarting | kNoFlusher)) == kListening && (!(mode & kExactSwitch) || (mode & kThrifty));
}

// Most of a sampled run's events, decided on the hot line and, for a
// free, the block set's filter line: an allocation the sampler passes over,
// a free of a block never sent. Counted, and their totals kept, as Record
// would. Inlined into Hook: Record is 3 KB (its stack walk's frames on its
// stack), and the step's work evicts whatever lines an event runs through.
// False, and nothing changed: Record decides it. Only while an agent
// listens and allocations are sampled.
inline bool RecordQuickly(State& s, void* ptr, int64_t delta, size_t allocated, size_t reserved, TorchDevice device) {
  const uint64_t addr = reinterpret_cast<uint64_t>(ptr);
  s.hot.lock.lock();
  const bool quick = !s.hot.announce_pending && s.hot.totals_seen && s.hot.device == device.index &&
                     (delta < 0 ? !s.hot.every_free && !s.blocks.MayContain(addr)
                                : s.hot.sampler.SkipIfNotTaken(static_cast<uint64_t>(delta)));
  if (quick) {
    s.hot.hook_calls.store(s.hot.hook_calls.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    s.hot.allocated = allocated;
    s.hot.reserved = reserved;
    s.hot.totals_unsent = true;
  }
  s.hot.lock.unlock();
  return quick;
}

// One timed event's interval, counted (HookCostSoFar scales them up).
void CountTimed(State& s, uint64_t ticks) {
  s.hook_timed_ticks.fetch_add(TimedPart(ticks, s.empty_interval_ticks), std::memory_order_relaxed);
  s.hook_timed.fetch_add(1, std::memory_order_relaxed);
}

TorchReportFn Original() { return S().hot.original.load(std::memory_order_acquire); }

void SayHook(uint32_t status, uint32_t python);

// Hook's ways out, each out of line, each ending in PyTorch's own call as
// Hook's quick path does: their lines are fetched only when they run.
//
// A taken allocation, a sent block's free, or what else the quick path
// left to Record. |start|: the counter at the timed interval's start, 0
// if not timed (no counter reads 0 after boot).
__attribute__((noinline)) void HookRecord(void* ptr, int64_t delta, size_t allocated, size_t reserved,
                                          TorchDevice device, uint64_t start) {
  Record(ptr, delta, allocated, reserved, device);
  if (__builtin_expect(start != 0, 0)) CountTimed(S(), Ticks() - start);
  return Original()(ptr, delta, allocated, reserved, device);
}

// A timed quick event: its interval was read in Hook, on the quick path's
// own lines (here it would hold this function's first fetch).
__attribute__((noinline)) void HookTimed(void* ptr, int64_t delta, size_t allocated, size_t reserved,
                                         TorchDevice device, uint64_t ticks) {
  CountTimed(S(), ticks);
  return Original()(ptr, delta, allocated, reserved, device);
}

// Every event Hook's quick path does not take on sight: no agent, an agent
// not yet told we are live, `record`'s exact mode (every event: these are
// its warm lines), the process's start-up, a forked child.
__attribute__((noinline)) void HookOtherwise(void* ptr, int64_t delta, size_t allocated, size_t reserved,
                                             TorchDevice device) {
  State& s = S();
  const uint8_t mode = s.hot.mode.load(std::memory_order_relaxed);
  if (delta == 0) return Original()(ptr, delta, allocated, reserved, device);
  if (!Listening(mode)) {
    // No agent: the next one to attach is told first that we are live.
    if (s.hot.announced.load(std::memory_order_relaxed)) s.hot.announced.store(false, std::memory_order_relaxed);
    return Original()(ptr, delta, allocated, reserved, device);
  }
  // Read before it is exchanged: a write on every event would take the line
  // from the other allocating threads' caches.
  if (!s.hot.announced.load(std::memory_order_relaxed) && !s.hot.announced.exchange(true, std::memory_order_relaxed)) {
    // Whichever thread records next puts the announcement first in the
    // batch, in the same critical section as its event: no event of ours
    // reaches the agent before it.
    s.hot.lock.lock();
    s.hot.announce_pending = true;
    s.hot.lock.unlock();
  }
  const bool timed = TimedById(s.hot.hook_calls.load(std::memory_order_relaxed));
  const uint64_t start = __builtin_expect(timed, 0) ? Ticks() : 0;
  // Listening: sampled unless Exact (a forked child's too, whose mode lacks
  // kQuick).
  if (Exact(mode) || !RecordQuickly(s, ptr, delta, allocated, reserved, device))
    Record(ptr, delta, allocated, reserved, device);
  if (__builtin_expect(timed, 0)) CountTimed(s, Ticks() - start);
  return Original()(ptr, delta, allocated, reserved, device);
}

// Every allocator event of the process comes here, in PyTorch's place,
// and ends in PyTorch's own call. Laid out for the events of a sampled run
// (nearly all of them: an allocation the sampler passes over, a free of a
// block never sent): straight through on the hot line, with no stack frame
// and one register saved, and PyTorch's call as a jump, in a few lines of
// code. The step's work evicts those lines between events, so each is a
// likely miss (before, PyTorch's call came first: six registers saved
// around it, and the quick path spread over ten lines). The rest leaves by
// a jump out of line.
//
// About one event in kTimedOneIn is timed: two counter reads on each would
// cost more than the rest of some events. The count is read, not bumped,
// here (it is counted under the lock, with no second atomic write), so two
// threads may both time one: the timed ones are counted apart, and the
// estimate stays theirs times calls over timed. Chosen by the count's hash
// (TimedById), not |count % 64|: allocations and frees often alternate,
// and every timed event would then be of one kind (an allocation taken and
// walked, say, charged to every free too). A timed event runs the very
// lines the others do between its two reads: a timed path of its own would
// be cold every time, and read high (session 33). Not in the interval: the
// lines before the first read (the hot line's miss among them: the count
// that picks the timed events is there), and PyTorch's call.
__attribute__((aligned(64))) void Hook(void* ptr, int64_t delta, size_t allocated, size_t reserved,
                                       TorchDevice device) {
  State& s = S();
  // |announced|, beside |mode|, is not folded into it: an event that saw no
  // agent may clear it at any time after the flusher's tick, which would
  // then leave a new agent's events unannounced for a tick.
  if (__builtin_expect(delta == 0 || !(s.hot.mode.load(std::memory_order_relaxed) & kQuick) ||
                           !s.hot.announced.load(std::memory_order_relaxed),
                       0))
    return HookOtherwise(ptr, delta, allocated, reserved, device);
  const uint64_t start = __builtin_expect(TimedById(s.hot.hook_calls.load(std::memory_order_relaxed)), 0) ? Ticks() : 0;
  if (__builtin_expect(!RecordQuickly(s, ptr, delta, allocated, reserved, device), 0))
    return HookRecord(ptr, delta, allocated, reserved, device, start);
  if (__builtin_expect(start != 0, 0)) return HookTimed(ptr, delta, allocated, reserved, device, Ticks() - start);
  return s.hot.original.load(std::memory_order_acquire)(ptr, delta, allocated, reserved, device);
}

void SayHook(uint32_t status, uint32_t python) {
  State& s = S();
  s.hot.lock.lock();
  if (status == GF_TENSOR_HOOK_LIVE) {
    AnnounceLocked(s, python);
    s.hot.announce_pending = false;
  } else {
    gf_event ev = Header(GF_EV_TENSOR_HOOK, 0, 0);
    ev.arg0 = status;
    ev.arg2 = GF_ABI_VERSION;
    AppendLocked(s, ev, nullptr, 0);
  }
  SendLocked(s);  // at once: the agent learns from when our events count
  s.hot.lock.unlock();
}

void AtForkChild() {
  // The child's events are its own: nothing of the parent's batch, a fresh
  // pid, and the lock free whoever held it.
  State& s = S();
  s.used = 0;
  s.hot.announce_pending = false;
  s.blocks.Clear();
  s.hot.every_free = false;
  s.hot.totals_seen = s.hot.totals_unsent = false;
  s.other_devices_unsent = 0;
  s.sent_count = 0;
  std::memset(s.sent, 0, sizeof(s.sent));
  s.pid = static_cast<uint32_t>(getpid());
  // The agent knows the child by its own pid: it is told we are live there
  // too, at the child's first event. (The flusher thread is not forked: the
  // child's batches go out when full, after a new stack, and at exit.)
  s.hot.announced.store(false, std::memory_order_relaxed);
  // The sampler keeps its interval, the budget's scaling included, with no
  // flusher to change it: announced as it is at the child's first event.
  // (A CUDA-using fork is rare: CUDA does not survive fork.)
  s.backward.ResetAfterFork();
  s.hot.lock.reset();
  s.hot.mode.store((s.hot.mode.load(std::memory_order_relaxed) | kNoFlusher) & ~kQuick, std::memory_order_relaxed);
}

void TryHook() {
  State& s = S();
  if (s.hooked.load() || !Listening()) return;
  const uint32_t python = s.walker.Init();
  GotHookResult r = HookGot(kTorchCudaLibrary, kTorchReportSymbol, reinterpret_cast<void*>(&Hook), [](void* original) {
    S().hot.original.store(reinterpret_cast<TorchReportFn>(original), std::memory_order_release);
  });
  if (r.slots == 0) {
    // Not a PyTorch process (yet): said once, tried again every period.
    if (!s.said_no_torch) SayHook(r.original ? GF_TENSOR_HOOK_PATCH_FAILED : GF_TENSOR_HOOK_NO_TORCH, 0);
    s.said_no_torch = true;
    return;
  }
  s.patch = r;
  s.hooked.store(true);
  s.said_python = python;
  s.hot.announced.store(true);
  SayHook(GF_TENSOR_HOOK_LIVE, python);
  PollAutogradOrigin();
  PollOomReport();
}

}  // namespace

// The hot line's mode for this tick (kStarting ... kExactSwitch). Stored
// only on a change: a write would take the hot line from every allocating
// thread's cache, every tick. Flusher thread (and start, before the hook).
void UpdateMode(State& s, uint32_t thrift) {
  const uint8_t was = s.hot.mode.load(std::memory_order_relaxed);
  uint8_t mode = was & kStarting;
  if ((mode & kStarting) && MonotonicNs() >= s.exact_until_ns) mode = 0;
  if (thrift) mode |= kThrifty;
  if (Listening()) mode |= kListening;
  if (ExactSwitch()) mode |= kExactSwitch;
  if (QuickMode(mode)) mode |= kQuick;
  if (mode != was) s.hot.mode.store(mode, std::memory_order_relaxed);
}

void StartTensorEvents(uint64_t sample_bytes, uint64_t exact_until_ns, double budget_share) {
  State& s = S();
  s.budget = HookBudget(budget_share);
  s.pid = static_cast<uint32_t>(getpid());
  s.sample_bytes = sample_bytes;
  s.hot.sampler = ByteSampler(sample_bytes, MonotonicNs() ^ (uint64_t{s.pid} << 32));
  s.empty_interval_ns = MeasureEmptyIntervalNs();
  s.empty_interval_ticks = MeasureEmptyIntervalTicks();
  s.tick_rate.Start();
  s.exact_until_ns = exact_until_ns;
  s.hot.mode.store(MonotonicNs() < exact_until_ns ? kStarting : 0, std::memory_order_relaxed);
  UpdateMode(s, ThriftLevel());
  s.said_exact = Exact();
  // Only a child handler: holding the lock across fork() would stall every
  // allocating thread for the whole page-table copy, and the child drops
  // the batch and resets the lock anyway.
  pthread_atfork(nullptr, nullptr, AtForkChild);
  TryHook();
}

void PollTensorEvents() {
  State& s = S();
  // What the agent's thrift asks for (thrift.h): a coarser interval, by
  // GF_THRIFT_SAMPLE_FACTOR a level, on top of the process's own budget's.
  const uint32_t thrift = ThriftLevel();
  // Before the hook can go in: its first events see whether an agent listens.
  UpdateMode(s, thrift);
  TryHook();
  if (!s.hooked.load()) return;
  // With lazy binding, the loader resolving the slot's first call while we
  // patched it may have written the original back: patch it again.
  for (int i = 0; i < s.patch.slots && i < kMaxGotSlots; i++)
    RestoreGotSlot(s.patch.slot[i], reinterpret_cast<void*>(&Hook));
  // Its stacks and events go through our batches: only once we are live.
  PollAutogradOrigin();
  PollOomReport();
  // The taken allocations' cost against the budget, while sampled: a
  // coarser interval when over. Exact or unheard, it is not governed, and
  // no window may reach back across that time (exact, every allocation is
  // taken).
  const uint32_t budget_was = s.budget.scale();
  const bool governed = !Exact() && Listening();
  if (!governed) s.budget.Pause();
  const uint32_t budget_scale =
      governed ? s.budget.Tick(MonotonicNs(), s.taken_ns.load(std::memory_order_relaxed), ProcessCpuNs()) : budget_was;
  // Bounded: the configured interval comes from the workload's environment.
  const unsigned __int128 product =
      static_cast<unsigned __int128>(s.sample_bytes) * budget_scale * ThriftFactor(thrift);
  const uint64_t interval = product > kMaxInterval ? kMaxInterval : static_cast<uint64_t>(product);
  s.hot.lock.lock();
  const bool interval_changed = interval != s.hot.sampler.interval();
  if (interval_changed) s.hot.sampler.SetInterval(interval);
  AppendTotalsIfUnsentLocked(s);
  SendLocked(s);
  // Say again that we are live and forget which stacks were sent when an
  // agent has just attached (maybe while another kept the semaphore up, so
  // the hook never saw it drop), and now and then in case that went unseen;
  // also when `record` has switched sampling off or back on.
  const bool exact = Exact();
  // The new interval is said too: the agent shows what each process samples.
  const bool again =
      ++s.polls % kForgetPolls == 0 || std::exchange(s.greet, false) || exact != s.said_exact || interval_changed;
  s.said_exact = exact;
  s.hot.lock.unlock();
  // Also when the walker's first checks have turned it off since.
  if (uint32_t python = s.walker.failure(); again || python != s.said_python) {
    s.said_python = python;
    SayHook(GF_TENSOR_HOOK_LIVE, python);
  }
}

void GreetNewListener() { S().greet = true; }

HookCost HookCostSoFar() {
  State& s = S();
  const uint64_t calls = s.hot.hook_calls.load(std::memory_order_relaxed);
  const uint64_t timed = s.hook_timed.load(std::memory_order_relaxed);
  const double ns_per_tick = s.tick_rate.NsPerTick();
  const uint64_t taken = s.taken.load(std::memory_order_relaxed), taken_ns = s.taken_ns.load(std::memory_order_relaxed);
  if (!timed || ns_per_tick <= 0) return {calls, 0, taken, taken_ns};
  // The timed ones stand for all (in 128 bits: hours of a busy process put
  // ticks * calls past 2^64); their own counter reads, two each, only for
  // themselves.
  const uint64_t ticks = s.hook_timed_ticks.load(std::memory_order_relaxed);
  const auto scaled = static_cast<double>(static_cast<unsigned __int128>(ticks) * calls / timed) +
                      2.0 * static_cast<double>(timed) * static_cast<double>(s.empty_interval_ticks);
  return {calls, static_cast<uint64_t>(scaled * ns_per_tick), taken, taken_ns};
}

HookRouting HookRoutingSoFar() {
  State& s = S();
  HookRouting r;
  // Read at exit: nothing (filter_of 0) if the lock stays taken.
  if (!s.hot.lock.try_lock_for_spins(1000)) return r;
  r.recorded = s.recorded;
  r.blocks = s.blocks.size();
  r.slots = s.blocks.capacity();
  r.filter_bits = s.blocks.FilterBitsSet();
  r.filter_of = decltype(s.blocks)::kFilterBits;
  s.hot.lock.unlock();
  return r;
}

bool TensorEventsListening() { return Listening(); }

uint64_t SendThisThreadsStack() {
  State& s = S();
  gf_py_frame frames[GF_MAX_PY_FRAMES];
  uint32_t flags = 0;
  const uint32_t n = s.walker.Walk(frames, &flags);
  if (n == 0) return 0;
  const uint64_t id = HashFrames(frames, n);
  s.hot.lock.lock();
  AnnounceIfPendingLocked(s);
  if (!SentLocked(s, id)) {
    gf_event def = Header(GF_EV_PY_STACK, 0, 0);
    def.flags = flags;
    def.arg0 = id;
    def.py_count = static_cast<uint16_t>(n);
    AppendLocked(s, def, frames, n * sizeof(gf_py_frame));
    // At once: the engine threads' events and launches that name it may
    // reach the agent before the next flush.
    SendLocked(s);
  }
  s.hot.lock.unlock();
  return id;
}

bool ThisThreadRunsNoPython() { return S().walker.ThreadRunsNoPython(); }

void SayAutogradHook(uint32_t status) {
  State& s = S();
  s.hot.lock.lock();
  AnnounceIfPendingLocked(s);
  gf_event ev = Header(GF_EV_AUTOGRAD_HOOK, 0, 0);
  ev.arg0 = status;
  AppendLocked(s, ev, nullptr, 0);
  SendLocked(s);
  s.hot.lock.unlock();
}

BackwardOrigins& RunningBackwardCalls() { return S().backward; }

bool TensorHookLive() { return S().hooked.load(); }

void SendOomReport(uint64_t bytes, size_t allocated, size_t reserved, TorchDevice device) {
  if (!Listening()) return;
  State& s = S();
  gf_event ev = TensorEvent(GF_EV_OOM_REPORT, 0, bytes, device, allocated, reserved);
  ev.flags = GF_EVF_STACK_REF;
  uint64_t ref = SendThisThreadsStack();
  // An engine thread failing for a backward() call: charged as its allocations are.
  if (ref == 0) ev.flags |= LendBackwardCaller(s, ref);
  s.hot.lock.lock();
  AnnounceIfPendingLocked(s);
  AppendLocked(s, ev, &ref, sizeof(ref));
  SendLocked(s);
  s.hot.lock.unlock();
}

void FlushTensorEvents() {
  State& s = S();
  // exit() may run on a thread that holds the lock: try for a while.
  if (!s.hot.lock.try_lock_for_spins(1000)) return;
  AppendTotalsIfUnsentLocked(s);
  SendLocked(s);
  s.hot.lock.unlock();
}

}  // namespace gpuflame::inprocess
