#include "profiler/process/guardian.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "bpf/gpuflame_abi.h"
#include "inspect/proc_stat.h"
#include "inspect/thread_group.h"
#include "profiler/probes/held_map.h"
#include "profiler/process/run_control.h"

namespace gpuflame::profiler {
namespace {

// Words on the socket, one byte a message (SOCK_SEQPACKET keeps them apart).
constexpr char kClean = 'c';    // gpuflame -> guardian: ending cleanly, leave
constexpr char kHeldMap = 'm';  // gpuflame -> guardian: the gates' map, as SCM_RIGHTS
constexpr char kTaken = 'k';    // guardian -> gpuflame: it holds the map now
constexpr int kShareTimeoutMs = 2000;
constexpr int kMaxScan = 1 << 16;  // processes looked at per pass
constexpr int kMaxDepth = 32;      // generations walked up from a stopped process
constexpr int kPasses = 20;        // x kPassMs: the window in which a dying gpuflame's gates may still fire
constexpr int kPassMs = 150;

// gpuflame's end of the running guardian's socket, for
// ShareHeldMapWithGuardian, which Session::Start calls without the Guardian.
std::atomic<int> g_socket{-1};

struct ProcState {
  pid_t ppid = 0;
  char state = 0;
};

// /proc/PID/stat, or "" (gone, unreadable).
std::string ReadStat(long pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
  base::ScopedFd fd(open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return "";
  char buf[1024];
  const ssize_t n = read(fd.get(), buf, sizeof(buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// This time namespace's offset of CLOCK_BOOTTIME ("boottime SECS NSECS" in
// /proc/self/timens_offsets), which the kernel adds to every starttime it
// shows; 0 where there is none (the initial namespace, older kernels).
int64_t BoottimeOffsetNs() {
  base::ScopedFd fd(open("/proc/self/timens_offsets", O_RDONLY | O_CLOEXEC));
  char buf[256];
  const ssize_t n = fd ? read(fd.get(), buf, sizeof(buf) - 1) : -1;
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* line = std::strstr(buf, "boottime");
  long long sec = 0, nsec = 0;
  if (!line || std::sscanf(line, "boottime %lld %lld", &sec, &nsec) != 2) return 0;
  return sec * 1'000'000'000 + nsec;
}

// One byte, and a descriptor with it when |fd| >= 0.
bool SendWord(int sock, char word, int fd = -1) {
  iovec iov{&word, 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  ssize_t n;
  while ((n = sendmsg(sock, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  return n == 1;
}

// One message: its byte (or 0 at end of stream, -1 on error) and the first
// descriptor that came with it, owned; any others are closed.
struct Message {
  int word = -1;
  base::ScopedFd fd;
};
Message ReceiveWord(int sock) {
  Message m;
  char word = 0;
  iovec iov{&word, 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  while ((n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); n >= 0 && c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count && i < 4; i++) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      base::ScopedFd owned(fd);
      if (!m.fd) m.fd = std::move(owned);
    }
  }
  m.word = n < 0 ? -1 : n == 0 ? 0 : static_cast<unsigned char>(word);
  return m;
}

// Every process's parent and state, from /proc/<pid>/stat (bounded). A
// zombie leader's state is its group's: a process whose main() ended with
// pthread_exit lives on in threads that a gate's stop stops as any other.
absl::flat_hash_map<pid_t, ProcState> ScanProcesses() {
  absl::flat_hash_map<pid_t, ProcState> out;
  DIR* dir = opendir("/proc");
  if (!dir) return out;
  int seen = 0;
  while (dirent* e = readdir(dir)) {
    if (++seen > kMaxScan) break;
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (!end || *end != '\0' || pid <= 0) continue;
    if (auto st = inspect::StateAndParentFromStat(ReadStat(pid)))
      out[static_cast<pid_t>(pid)] = ProcState{st->ppid, inspect::GroupState(pid, st->state)};
  }
  closedir(dir);
  return out;
}

[[noreturn]] void GuardianMain(int sock) {
  prctl(PR_SET_NAME, "gpuflame-guard");
  // Not stopped by the terminal's Ctrl-C or by what stops gpuflame: only the
  // socket ends it. A crash here dies plainly (not gpuflame's handler).
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU}) signal(sig, SIG_IGN);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) signal(sig, SIG_DFL);
  // Only the socket and stderr stay open: an inherited descriptor (a BPF
  // link, an output file, the terminal's stdout) must not outlive gpuflame.
  {
    base::ScopedFd null(open("/dev/null", O_RDWR | O_CLOEXEC));
    if (null) {
      dup2(null.get(), STDIN_FILENO);
      dup2(null.get(), STDOUT_FILENO);
    }
  }
  constexpr int kSocketFd = 3;
  if (sock != kSocketFd) {
    dup2(sock, kSocketFd);
    sock = kSocketFd;
  }
  close_range(kSocketFd + 1, ~0u, 0);
  base::ScopedFd held;  // the gates' map, once gpuflame hands it over
  // Until gpuflame's clean word or the end of the stream (gpuflame gone):
  // a loop as long as gpuflame lives, one message a turn, each turn blocked
  // in recvmsg.
  for (;;) {
    Message m = ReceiveWord(sock);
    if (m.word == kClean) _exit(0);
    if (m.word <= 0) break;
    if (m.word == kHeldMap && m.fd) {
      held = std::move(m.fd);
      SendWord(sock, kTaken);
    }
  }
  const int64_t offset_ns = BoottimeOffsetNs();
  ResumedStops done;
  for (int pass = 0; pass < kPasses; pass++) {
    // Every stop gpuflame makes is a gate's, and every gate's stop is in the
    // map: with it, exactly those. Without it (gpuflame could not hand it
    // over, and then gated only its own command), the stopped processes
    // among those it followed and their children: a process someone else
    // stopped may be among them.
    const int resumed = held ? ResumeGateHeld(held.get(), offset_ns, done) : ResumeHeldProcesses(RememberedTargets());
    // Said at once: whoever watches the log sees it when the workload moves.
    if (resumed > 0)
      std::fprintf(stderr, "gpuflame: ended without resuming the processes it held; its guardian resumed %d\n",
                   resumed);
    usleep(kPassMs * 1000);
  }
  _exit(0);
}

}  // namespace

int ResumeHeldProcesses(const std::vector<pid_t>& targets) {
  if (targets.empty()) return 0;
  const absl::flat_hash_set<pid_t> wanted(targets.begin(), targets.end());
  const auto procs = ScanProcesses();
  int resumed = 0;
  for (const auto& [pid, st] : procs) {
    if (st.state != 'T') continue;  // stopped by a signal ('t', a tracer's stop, is not ours)
    pid_t p = pid;
    for (int depth = 0; depth < kMaxDepth && p > 1; depth++) {
      if (wanted.contains(p)) {
        if (kill(pid, SIGCONT) == 0) resumed++;
        break;
      }
      auto it = procs.find(p);
      if (it == procs.end()) break;
      p = it->second.ppid;
    }
  }
  return resumed;
}

int ResumeGateHeld(int held_map_fd, int64_t boottime_offset_ns, ResumedStops& done) {
  if (held_map_fd < 0) return 0;
  static const long ticks_per_s = sysconf(_SC_CLK_TCK);
  if (ticks_per_s <= 0) return 0;
  const int64_t ns_per_tick = 1'000'000'000 / ticks_per_s;
  int resumed = 0;
  for (const HeldProcess& h : ReadHeld(held_map_fd, GF_HELD_MAX)) {
    // Not stopped yet (its stop is being sent: a later pass), or resumed by
    // us already from this very stop (the kernel's SIGCONT hook, which would
    // have deleted the entry, may be detached by now).
    if (h.stop_ns == 0 || done.contains({h.pid, h.stop_ns})) continue;
    // The pidfd first, then the checks: if the process behind the pid is
    // still the one the gate stopped when we look, the pidfd names it, and
    // the signal cannot reach another that took the pid meanwhile.
    base::ScopedFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, h.pid, 0)));
    if (!pidfd) continue;  // gone
    const std::string stat = ReadStat(h.pid);
    const auto state = inspect::StateAndParentFromStat(stat);
    const auto start = inspect::StartTicksFromStat(stat);
    const auto gate_start =
        static_cast<uint64_t>((static_cast<int64_t>(h.start_ns) + boottime_offset_ns) / ns_per_tick);
    // Another process has its pid now; or it runs (or its stop has not
    // landed yet: a later pass). A leader that ended is a zombie while the
    // rest of its group stops: their state is the one that counts.
    if (!state || !start || *start != gate_start) continue;
    if (inspect::GroupState(h.pid, state->state) != 'T') continue;
    if (syscall(SYS_pidfd_send_signal, pidfd.get(), SIGCONT, nullptr, 0) == 0) {
      done.insert({h.pid, h.stop_ns});
      resumed++;
    }
  }
  return resumed;
}

absl::Status ShareHeldMapWithGuardian(int held_map_fd) {
  const int sock = g_socket.load();
  if (sock < 0) return absl::FailedPreconditionError("no guardian runs");
  if (!SendWord(sock, kHeldMap, held_map_fd))
    return absl::UnavailableError(absl::StrCat("handing the map to the guardian: ", std::strerror(errno)));
  // Its answer, or nothing within the time: only then may a gate stop anyone.
  const int64_t deadline = NowNs(CLOCK_MONOTONIC) + int64_t{kShareTimeoutMs} * 1'000'000;
  for (int64_t now = NowNs(CLOCK_MONOTONIC); now < deadline; now = NowNs(CLOCK_MONOTONIC)) {
    pollfd p{sock, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>((deadline - now) / 1'000'000) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    const Message m = ReceiveWord(sock);
    if (m.word == kTaken) {
      LeaveResumingToGuardian();
      return absl::OkStatus();
    }
    if (m.word <= 0) return absl::UnavailableError("the guardian is gone");
  }
  return absl::DeadlineExceededError("the guardian did not take the map within 2 s");
}

Guardian Guardian::Start() {
  Guardian g;
  int fds[2];
  // SEQPACKET: one word a message, and the end of the stream when gpuflame's
  // end closes, however it dies. Close-on-exec: no command we run holds it open.
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) return g;
  base::ScopedFd ours(fds[0]), theirs(fds[1]);
  RememberedTargets();  // maps the shared list now, before the fork
  const pid_t pid = fork();
  if (pid == 0) {
    ours.reset();
    GuardianMain(theirs.release());
  }
  if (pid < 0) return g;
  g.pid_ = pid;
  g.socket_ = std::move(ours);
  g_socket.store(g.socket_.get());
  return g;
}

void Guardian::Release() {
  if (!socket_) return;
  g_socket.store(-1);
  SendWord(socket_.get(), kClean);
  socket_.reset();
  // It leaves at once; reaped here (for up to a second), not left a zombie.
  for (int i = 0; i < 100 && pid_ > 0; i++) {
    if (waitpid(pid_, nullptr, WNOHANG) != 0) break;
    usleep(10'000);
  }
  pid_ = -1;
}

}  // namespace gpuflame::profiler
