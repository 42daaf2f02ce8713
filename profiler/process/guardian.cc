#include "profiler/process/guardian.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "inspect/proc_stat.h"
#include "profiler/process/run_control.h"

namespace gpuflame::profiler {
namespace {

constexpr char kClean = 'c';
constexpr int kMaxScan = 1 << 16;   // processes looked at per pass
constexpr int kMaxDepth = 32;       // generations walked up from a stopped process
constexpr int kPasses = 20;         // x kPassMs: the window in which a dying gpuflame's gates may still fire
constexpr int kPassMs = 150;

struct ProcState {
  pid_t ppid = 0;
  char state = 0;
};

// Every process's parent and state, from /proc/<pid>/stat (bounded).
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
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    base::ScopedFd fd(open(path, O_RDONLY | O_CLOEXEC));
    if (!fd) continue;
    char buf[1024];
    const ssize_t n = read(fd.get(), buf, sizeof(buf) - 1);
    if (n <= 0) continue;
    if (auto st = inspect::StateAndParentFromStat(std::string_view(buf, static_cast<size_t>(n))))
      out[static_cast<pid_t>(pid)] = ProcState{st->ppid, st->state};
  }
  closedir(dir);
  return out;
}

[[noreturn]] void GuardianMain(int from_parent) {
  prctl(PR_SET_NAME, "gpuflame-guard");
  // Not stopped by the terminal's Ctrl-C or by what stops gpuflame: only the
  // pipe ends it. A crash here dies plainly (not gpuflame's handler).
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU}) signal(sig, SIG_IGN);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) signal(sig, SIG_DFL);
  // Only the pipe and stderr stay open: an inherited descriptor (a BPF
  // link, an output file, the terminal's stdout) must not outlive gpuflame.
  {
    base::ScopedFd null(open("/dev/null", O_RDWR | O_CLOEXEC));
    if (null) {
      dup2(null.get(), STDIN_FILENO);
      dup2(null.get(), STDOUT_FILENO);
    }
  }
  constexpr int kPipeFd = 3;
  if (from_parent != kPipeFd) {
    dup2(from_parent, kPipeFd);
    from_parent = kPipeFd;
  }
  close_range(kPipeFd + 1, ~0u, 0);
  char word = 0;
  ssize_t n;
  while ((n = read(from_parent, &word, 1)) < 0 && errno == EINTR) {
  }
  if (n == 1 && word == kClean) _exit(0);
  for (int pass = 0; pass < kPasses; pass++) {
    // Said at once: whoever watches the log sees it when the workload moves.
    if (const int resumed = ResumeHeldProcesses(RememberedTargets()); resumed > 0)
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

Guardian Guardian::Start() {
  Guardian g;
  std::optional<base::Pipe> pipe = base::Pipe::Open();
  if (!pipe) return g;
  RememberedTargets();  // maps the shared list now, before the fork
  const pid_t pid = fork();
  if (pid == 0) {
    pipe->write_end.reset();
    GuardianMain(pipe->read_end.release());
  }
  if (pid < 0) return g;
  g.pid_ = pid;
  g.to_guardian_ = std::move(pipe->write_end);
  return g;
}

void Guardian::Release() {
  if (!to_guardian_) return;
  const char word = kClean;
  (void)!write(to_guardian_.get(), &word, 1);
  to_guardian_.reset();
  // It leaves at once; reaped here (for up to a second), not left a zombie.
  for (int i = 0; i < 100 && pid_ > 0; i++) {
    if (waitpid(pid_, nullptr, WNOHANG) != 0) break;
    usleep(10'000);
  }
  pid_ = -1;
}

}  // namespace gpuflame::profiler
