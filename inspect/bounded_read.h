// Reading another process's memory in bounded time. process_vm_readv faults
// the target's pages in on our behalf, and a page of a file whose server does
// not answer (FUSE, which an unprivileged user may mount in a user namespace;
// a hung NFS or CIFS share) makes that fault, and so our read, wait without
// bound: no signal short of SIGKILL ends it. The event loop must not be the
// thread that waits.
//
// So reads that could need a file go through a worker thread, and the caller
// waits for at most kReadDeadline. A read that overruns abandons its worker
// (it stays blocked in the kernel until the server answers or the target
// dies; it then exits), poisons the pid (nothing more is read from it in user
// space: the stuck fault may hold its mmap lock), and the next read starts a
// fresh worker. While kMaxStuckWorkers abandoned workers are still blocked,
// no more reads go through a worker at all (a thread each is what a stuck
// read costs); one whose read comes back no longer counts. Memory with no
// file behind it (anonymous: the heap, Python's arenas, the stack) cannot
// wait on a server and is read directly by the caller (RemoteProcessMemory's
// fast path), unless its pid is poisoned.
//
// Thread-safe; one worker read at a time.
#ifndef GPUFLAME_INSPECT_BOUNDED_READ_H_
#define GPUFLAME_INSPECT_BOUNDED_READ_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpuflame::inspect {

inline constexpr std::chrono::milliseconds kReadDeadline{200};
inline constexpr int kMaxStuckWorkers = 8;
// The largest read handed to a worker (it copies into a buffer of its own,
// which it may write long after the caller gave up).
inline constexpr size_t kMaxWorkerRead = 1 << 20;

struct BoundedReadStats {
  uint64_t worker_reads = 0;  // reads that went through a worker
  uint64_t overran = 0;       // of those, not back within kReadDeadline
  uint64_t refused = 0;       // not attempted: a poisoned pid, or no worker left to use
  int stuck_workers = 0;      // abandoned workers still blocked in the kernel
};

// Copies |len| bytes at |addr| of |pid| into |out| through a worker, within
// kReadDeadline; false if unreadable, late, or refused.
bool ReadWithDeadline(pid_t pid, uint64_t addr, void* out, size_t len);
// process_vm_readv by the caller itself: for memory known to have no file
// behind it. Refused (false) for a poisoned pid.
bool ReadDirect(pid_t pid, uint64_t addr, void* out, size_t len);
// Whether a read of |pid| overran: nothing more should be read from it,
// /proc/PID/maps included (reading it takes the same lock).
bool Poisoned(pid_t pid);
// The pids poisoned since the last call, for one warning each.
std::vector<pid_t> TakeNewlyPoisoned();
// Forgets |pid| (it has exited: its pid may be reused by a process that
// deserves reading).
void ForgetPoisoned(pid_t pid);
BoundedReadStats ReadStats();

}  // namespace gpuflame::inspect

#endif  // GPUFLAME_INSPECT_BOUNDED_READ_H_
