#include "inspect/bounded_read.h"

#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_set.h"

namespace gpuflame::inspect {
namespace {

bool Readv(pid_t pid, uint64_t addr, void* out, size_t len) {
  iovec local{out, len};
  iovec remote{reinterpret_cast<void*>(addr), len};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(len);
}

// What a caller and one worker share. The worker holds it too, so that a
// worker abandoned mid-read writes into its own buffer, never the caller's.
struct Slot {
  std::mutex mu;
  std::condition_variable cv;
  bool has_job = false;
  bool done = false;
  bool ok = false;
  bool abandoned = false;
  pid_t pid = 0;
  uint64_t addr = 0;
  std::vector<uint8_t> buf;
};

void LetGoOfStuckWorker();

void Work(std::shared_ptr<Slot> slot) {
  std::unique_lock<std::mutex> lock(slot->mu);
  for (;;) {
    slot->cv.wait(lock, [&] { return slot->has_job || slot->abandoned; });
    if (!slot->has_job) return;
    const pid_t pid = slot->pid;
    const uint64_t addr = slot->addr;
    lock.unlock();
    const bool ok = Readv(pid, addr, slot->buf.data(), slot->buf.size());  // may block for good
    lock.lock();
    slot->has_job = false;
    slot->done = true;
    slot->ok = ok;
    if (slot->abandoned) {  // the caller gave up on us long ago
      lock.unlock();
      LetGoOfStuckWorker();
      return;
    }
    slot->cv.notify_all();
  }
}

// At most this many poisoned pids are remembered (each exited one is
// forgotten; beyond it, a flood of them, the oldest are not told apart).
constexpr size_t kMaxPoisoned = 4096;

struct Reader {
  std::mutex mu;  // one worker read at a time; guards |worker|, |stats|
  std::shared_ptr<Slot> worker;
  BoundedReadStats stats;
  std::mutex poison_mu;  // guards the two below
  absl::flat_hash_set<pid_t> poisoned;
  std::vector<pid_t> newly;
  std::atomic<int> poisoned_count{0};       // lets ReadDirect skip poison_mu when none
  std::atomic<uint64_t> refused_direct{0};  // not under |mu|: a worker read may hold it
  // Abandoned workers still blocked in the kernel. Not under |mu|: one that
  // returns lowers it while a caller may hold |mu| waiting on another.
  std::atomic<int> stuck_workers{0};
};

// Never destroyed: abandoned workers may still touch what they hold after
// main returns, and static destructors must not race them.
Reader& R() {
  static Reader* reader = new Reader;
  return *reader;
}

// An abandoned worker's read came back (its server answered, or its target
// died): it no longer counts against kMaxStuckWorkers, so a long-lived agent
// that met a few stuck reads over its life keeps its worker reads.
void LetGoOfStuckWorker() { R().stuck_workers.fetch_sub(1, std::memory_order_relaxed); }

void Poison(Reader& r, pid_t pid) {
  std::lock_guard<std::mutex> lock(r.poison_mu);
  if (r.poisoned.size() >= kMaxPoisoned) r.poisoned.clear();
  if (r.poisoned.insert(pid).second && r.newly.size() < kMaxPoisoned) r.newly.push_back(pid);
  r.poisoned_count.store(static_cast<int>(r.poisoned.size()), std::memory_order_release);
}

}  // namespace

bool Poisoned(pid_t pid) {
  Reader& r = R();
  if (r.poisoned_count.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(r.poison_mu);
  return r.poisoned.contains(pid);
}

bool ReadDirect(pid_t pid, uint64_t addr, void* out, size_t len) {
  if (len == 0) return true;
  if (Poisoned(pid)) {
    R().refused_direct.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  return Readv(pid, addr, out, len);
}

bool ReadWithDeadline(pid_t pid, uint64_t addr, void* out, size_t len) {
  if (len == 0) return true;
  Reader& r = R();
  const bool poisoned = Poisoned(pid);
  std::lock_guard<std::mutex> one_at_a_time(r.mu);
  if (poisoned || len > kMaxWorkerRead || r.stuck_workers.load(std::memory_order_relaxed) >= kMaxStuckWorkers) {
    r.stats.refused++;
    return false;
  }
  if (!r.worker) {
    auto slot = std::make_shared<Slot>();
    try {
      std::thread(Work, slot).detach();
    } catch (const std::system_error&) {
      r.stats.refused++;  // no thread to spare: fail the read, not the agent
      return false;
    }
    r.worker = std::move(slot);
  }
  Slot& s = *r.worker;
  r.stats.worker_reads++;
  std::unique_lock<std::mutex> lock(s.mu);
  s.pid = pid;
  s.addr = addr;
  s.buf.resize(len);
  s.done = false;
  s.has_job = true;
  s.cv.notify_all();
  if (!s.cv.wait_for(lock, kReadDeadline, [&] { return s.done; })) {
    s.abandoned = true;  // it exits once its read returns, if ever
    r.stuck_workers.fetch_add(1, std::memory_order_relaxed);  // before it can see |abandoned|
    lock.unlock();
    r.worker.reset();
    r.stats.overran++;
    Poison(r, pid);
    return false;
  }
  if (s.ok) std::memcpy(out, s.buf.data(), len);
  return s.ok;
}

std::vector<pid_t> TakeNewlyPoisoned() {
  Reader& r = R();
  std::lock_guard<std::mutex> lock(r.poison_mu);
  return std::exchange(r.newly, {});
}

void ForgetPoisoned(pid_t pid) {
  Reader& r = R();
  if (r.poisoned_count.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(r.poison_mu);
  r.poisoned.erase(pid);
  r.poisoned_count.store(static_cast<int>(r.poisoned.size()), std::memory_order_release);
}

BoundedReadStats ReadStats() {
  Reader& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  BoundedReadStats out = r.stats;
  out.refused += r.refused_direct.load(std::memory_order_relaxed);
  out.stuck_workers = r.stuck_workers.load(std::memory_order_relaxed);
  return out;
}

}  // namespace gpuflame::inspect
