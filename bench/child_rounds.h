// What the in-workload benchmarks share (tensor_hook_benchmark.cc,
// launch_callback_benchmark.cc): each mode runs in a process of its own, so
// that one mode's state (a hook installed, CUPTI callbacks enabled for good)
// cannot leak into another's; the step's own work between two events is
// stood in for by touching a buffer, which evicts what the hot path keeps
// in cache, as PyTorch's dispatch and the interpreter do on a real step.
#ifndef GPUFLAME_BENCH_CHILD_ROUNDS_H_
#define GPUFLAME_BENCH_CHILD_ROUNDS_H_

#include <errno.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "base/scoped_fd.h"

namespace gpuflame::bench {

#ifdef GPUFLAME_SIM_DIR
// The simulated CUDA libraries: the build's, or GPUFLAME_SIM_DIR's where the
// benchmark runs on another machine (tests/gpu/run_host_benchmarks.sh: the
// GPU host's CPU, with the libraries carried beside it).
inline std::string SimDir() {
  const char* dir = std::getenv("GPUFLAME_SIM_DIR");
  return dir && *dir ? dir : GPUFLAME_SIM_DIR;
}
#endif

inline uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A mode's figures over rounds: the median and the range.
struct Spread {
  double median = 0, lo = 0, hi = 0;
};
inline Spread SpreadOf(const std::vector<double>& v) {
  if (v.empty()) return {};
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return {Median(v), *lo, *hi};
}

// Touches |kib| KiB of a 64 MiB buffer per call, a line at a time, moving
// on each time: what the event's neighbours in a step leave in cache.
class Pollution {
 public:
  explicit Pollution(uint64_t kib) : touch_(kib << 10), buffer_(64 << 20, 1) {}
  ~Pollution() { asm volatile("" : : "r"(sink_)); }  // keeps the reads

  void Touch() {
    for (size_t b = 0; b < touch_; b += 64) {
      buffer_[cursor_] += static_cast<uint8_t>(b);
      sink_ += buffer_[cursor_];
      cursor_ = (cursor_ + 64) & (buffer_.size() - 1);
    }
  }

 private:
  size_t touch_;
  std::vector<uint8_t> buffer_;
  size_t cursor_ = 0;
  uint64_t sink_ = 0;
};

// Runs |child| in a forked process and brings its result (plain data) back
// through a pipe. False if the child failed or died.
template <typename Result, typename Child>
bool RunInChild(Child&& child, Result* out) {
  static_assert(std::is_trivially_copyable_v<Result>);
  int fds[2];
  if (pipe(fds) != 0) return false;
  base::ScopedFd from_child(fds[0]), to_parent(fds[1]);
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    from_child.reset();
    const Result r = child();
    const ssize_t n = write(to_parent.get(), &r, sizeof(r));
    _exit(n == sizeof(r) ? 0 : 3);
  }
  to_parent.reset();  // the child's end: a child that dies unheard reads as end of file
  ssize_t n;
  do {
    n = read(from_child.get(), out, sizeof(*out));
  } while (n < 0 && errno == EINTR);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return n == sizeof(*out) && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The flags every such benchmark takes, and their defaults.
struct RoundOptions {
  int rounds = 5;
  uint64_t pollute_kib = 64;
};

// Parses "--flag value" pairs: --rounds (1-1000) and --pollute-kib (at most
// 65536) into |o|, any other by |own(flag, value)|, which says whether it
// took it. False on a flag nobody takes, a value out of range, or a flag
// without a value.
template <typename Own>
bool ParseFlags(int argc, char** argv, RoundOptions* o, Own&& own) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    const uint64_t v = std::strtoull(value, nullptr, 10);
    if (flag == "--rounds" && v >= 1 && v <= 1000) {
      o->rounds = static_cast<int>(v);
    } else if (flag == "--pollute-kib" && v <= 65536) {
      o->pollute_kib = v;
    } else if (!own(flag, value)) {
      return false;
    }
  }
  return argc % 2 == 1;
}

// |rounds| rounds of modes 0 .. |modes|-1, each in a process of its own
// (RunInChild running |run(mode)|), in an order that alternates between
// rounds, so that drift lands on every mode alike; |got(results)| after each
// round, with every mode's Result by mode. False, said on stderr with the
// mode's name from |names|, if a child failed.
template <typename Result, typename Run, typename Got>
bool RunAlternatingRounds(int rounds, int modes, const char* const* names, Run&& run, Got&& got) {
  for (int round = 0; round < rounds; round++) {
    std::vector<Result> r(static_cast<size_t>(modes));
    for (int k = 0; k < modes; k++) {
      const int m = round % 2 ? modes - 1 - k : k;
      if (!RunInChild([&] { return run(m); }, &r[static_cast<size_t>(m)])) {
        std::fprintf(stderr, "round %d: mode %s failed\n", round, names[m]);
        return false;
      }
    }
    got(r);
  }
  return true;
}

}  // namespace gpuflame::bench

#endif  // GPUFLAME_BENCH_CHILD_ROUNDS_H_
