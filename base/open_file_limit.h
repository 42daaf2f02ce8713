// gpuflame's own limit on open descriptors, raised to what the system
// allows. It holds descriptors that grow with what it follows, not with
// its own work: BPF links and programs, a pinned libcuda per file, and
// the native unwinder's libdwfl modules, one per ELF file a process maps
// for each process whose stacks need it (hundreds for a PyTorch process).
// The soft limit a service or container starts with (1024, often) is met
// by an agent on a node of many processes. Raising the soft limit to the
// hard one is safe for gpuflame itself: nothing in it calls select(2)
// (cpp-httplib polls), the one API that breaks on descriptors past
// FD_SETSIZE. A program gpuflame starts (`record -- COMMAND`) gets the
// limit gpuflame started with, as Go's runtime does for its children.
#ifndef GPUFLAME_BASE_OPEN_FILE_LIMIT_H_
#define GPUFLAME_BASE_OPEN_FILE_LIMIT_H_

namespace gpuflame::base {

// Raises the soft RLIMIT_NOFILE to the hard limit and keeps the original
// for RestoreOpenFileLimit. Once, at start, before any thread.
void RaiseOpenFileLimit();
// Puts back the limit gpuflame started with: in a forked child before it
// execs the user's command. Async-signal-safe (setrlimit alone).
void RestoreOpenFileLimit();

}  // namespace gpuflame::base

#endif  // GPUFLAME_BASE_OPEN_FILE_LIMIT_H_
