// A stand-in for libFuzzer's driver, so that every build runs the fuzz
// targets (ctest RecordFuzzerSmoke) with the ordinary compiler: each file of
// the seed corpus once, then --runs deterministic mutations of them (bit
// flips, byte and word sets, truncation, erased and repeated ranges, splices
// of two seeds) from a fixed --seed. Not coverage-guided: it finds what is
// near the seeds; scripts/fuzz.sh runs the real thing.
//
//   NAME_fuzzer [--runs=N] [--seed=S] [--max-len=N] [--max-seconds=T]
//               [--rss-limit-mb=M] [--timeout=S] [--crash-file=PATH] CORPUS_DIR_OR_FILE...
//
// The same arguments give the same inputs in the same order. When an input
// crashes the target (a signal, or a sanitizer's report in a sanitizer
// build), it is written to --crash-file (default ./fuzz-crash) and its
// origin printed; `NAME_fuzzer --runs=0 FILE` replays it alone.
//
// Bounds, as libFuzzer's -rss_limit_mb and -timeout: an input that takes
// longer than --timeout seconds (default 10) or leaves the process's peak
// RSS above --rss-limit-mb (default 2048) fails like a crash, because a
// parser of untrusted bytes must answer every input in bounded time and
// memory. Without a sanitizer the address space is also capped at the
// limit (above what the process holds at start), so that one huge
// allocation fails (std::bad_alloc, uncaught: a crash) instead of taking the
// machine's memory; ASan reserves terabytes of shadow, so its builds only
// get the peak RSS check.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Present in sanitizer builds: called before a sanitizer ends the process.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace {

using Input = std::vector<uint8_t>;

// SplitMix64: fully specified, so the inputs do not depend on the C++
// library's distributions.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return n ? static_cast<size_t>(Next() % n) : 0; }

 private:
  uint64_t state_;
};

// Values at the edges of the ABI's counts and sizes, and of integer types.
constexpr uint64_t kInteresting[] = {
    0,     1,     2,     7,      8,      23,     24,         63,         64,         65,         71,
    72,    127,   128,   129,    255,    256,    1023,       1024,       1025,       4096,       16383,
    16384, 16385, 19552, 0x7fff, 0x8000, 0xffff, 0x7fffffff, 0x80000000, 0xffffffff, ~0ull >> 1, ~0ull};

void Mutate(Input& in, const std::vector<Input>& seeds, Rng& rng, size_t max_len) {
  const int steps = 1 + static_cast<int>(rng.Below(4));
  for (int s = 0; s < steps; s++) {
    switch (rng.Below(7)) {
      case 0:  // flip a bit
        if (!in.empty()) in[rng.Below(in.size())] ^= static_cast<uint8_t>(1u << rng.Below(8));
        break;
      case 1:  // set a byte
        if (!in.empty()) in[rng.Below(in.size())] = static_cast<uint8_t>(rng.Next());
        break;
      case 2: {  // set a 1, 2, 4 or 8-byte little-endian word to an interesting value
        size_t width = size_t{1} << rng.Below(4);
        if (in.size() < width) break;
        uint64_t v = kInteresting[rng.Below(std::size(kInteresting))];
        size_t at = rng.Below(in.size() - width + 1);
        for (size_t i = 0; i < width; i++) in[at + i] = static_cast<uint8_t>(v >> (8 * i));
        break;
      }
      case 3:  // truncate
        in.resize(rng.Below(in.size() + 1));
        break;
      case 4: {  // erase a range
        if (in.empty()) break;
        size_t at = rng.Below(in.size());
        size_t n = 1 + rng.Below(std::min<size_t>(in.size() - at, 64));
        in.erase(in.begin() + static_cast<ptrdiff_t>(at), in.begin() + static_cast<ptrdiff_t>(at + n));
        break;
      }
      case 5: {  // repeat a range in place
        if (in.empty()) break;
        size_t at = rng.Below(in.size());
        size_t n = 1 + rng.Below(std::min<size_t>(in.size() - at, 256));
        Input copy(in.begin() + static_cast<ptrdiff_t>(at), in.begin() + static_cast<ptrdiff_t>(at + n));
        in.insert(in.begin() + static_cast<ptrdiff_t>(at), copy.begin(), copy.end());
        break;
      }
      case 6: {  // splice: a prefix of this input, then the tail of a seed
        if (seeds.empty()) break;
        const Input& other = seeds[rng.Below(seeds.size())];
        size_t keep = rng.Below(in.size() + 1);
        size_t from = rng.Below(other.size() + 1);
        in.resize(keep);
        in.insert(in.end(), other.begin() + static_cast<ptrdiff_t>(from), other.end());
        break;
      }
    }
  }
  if (in.size() > max_len) in.resize(max_len);
}

// What is running now, for the crash report (read by the handlers).
const Input* g_current = nullptr;
char g_origin[512] = "";
const char* g_crash_file = "fuzz-crash";

// Async-signal-safe: write() only. The descriptor is left to the exit.
void WriteCurrent() {
  static volatile sig_atomic_t written = 0;
  if (written || !g_current) return;
  written = 1;
  auto say = [](const char* s) { (void)!write(2, s, strlen(s)); };
  say("fuzz_main: crashed on ");
  say(g_origin);
  int fd = open(g_crash_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0 && write(fd, g_current->data(), g_current->size()) == static_cast<ssize_t>(g_current->size())) {
    say("; input written to ");
    say(g_crash_file);
  }
  say("\n");
}

void OnSignal(int sig) {
  WriteCurrent();
  signal(sig, SIG_DFL);
  raise(sig);
}

void OnTimeout(int) {
  (void)!write(2, "fuzz_main: input ran past --timeout\n", 36);
  WriteCurrent();
  _exit(70);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

// The process's virtual size now, in bytes (0 if unknown).
uint64_t VirtualBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  statm >> pages;
  return pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

uint64_t PeakRssMb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_maxrss) / 1024;  // ru_maxrss is in KiB
}

bool ReadFile(const std::filesystem::path& path, Input& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  out.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

unsigned g_timeout_s = 10;
uint64_t g_rss_limit_mb = 2048;

void Run(const Input& in) {
  g_current = &in;
  // A copy of exactly the input's size: reads past it are caught.
  std::vector<uint8_t> copy(in);
  alarm(g_timeout_s);
  LLVMFuzzerTestOneInput(copy.empty() ? nullptr : copy.data(), copy.size());
  alarm(0);
  if (const uint64_t peak = PeakRssMb(); g_rss_limit_mb && peak > g_rss_limit_mb) {
    std::fprintf(stderr, "fuzz_main: peak RSS %llu MB is past --rss-limit-mb=%llu\n",
                 static_cast<unsigned long long>(peak), static_cast<unsigned long long>(g_rss_limit_mb));
    WriteCurrent();
    _exit(71);
  }
  g_current = nullptr;
}

bool Flag(std::string_view arg, std::string_view name, std::string_view& value) {
  if (arg.substr(0, name.size()) != name) return false;
  value = arg.substr(name.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t runs = 2000;
  uint64_t seed = 0x9f0f1a3e;
  size_t max_len = 1 << 16;
  double max_seconds = 0;  // 0: no limit
  std::vector<std::filesystem::path> paths;
  for (int i = 1; i < argc; i++) {
    std::string_view arg = argv[i], v;
    if (Flag(arg, "--runs=", v)) runs = std::strtoull(v.data(), nullptr, 0);
    else if (Flag(arg, "--seed=", v)) seed = std::strtoull(v.data(), nullptr, 0);
    else if (Flag(arg, "--max-len=", v)) max_len = std::strtoull(v.data(), nullptr, 0);
    else if (Flag(arg, "--max-seconds=", v)) max_seconds = std::strtod(v.data(), nullptr);
    else if (Flag(arg, "--crash-file=", v)) g_crash_file = v.data();
    else if (Flag(arg, "--rss-limit-mb=", v)) g_rss_limit_mb = std::strtoull(v.data(), nullptr, 0);
    else if (Flag(arg, "--timeout=", v)) g_timeout_s = static_cast<unsigned>(std::strtoul(v.data(), nullptr, 0));
    else if (arg.starts_with("-")) {
      std::fprintf(stderr,
                   "usage: %s [--runs=N] [--seed=S] [--max-len=N] [--max-seconds=T] [--rss-limit-mb=M] "
                   "[--timeout=S] [--crash-file=PATH] CORPUS_DIR_OR_FILE...\n",
                   argv[0]);
      return 2;
    } else {
      paths.emplace_back(arg);
    }
  }

  // Every file under the given paths, in name order (directory order is not
  // stable), so that the same corpus gives the same runs.
  std::vector<std::filesystem::path> files;
  for (const auto& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      for (const auto& e : std::filesystem::directory_iterator(p, ec))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (std::filesystem::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "fuzz_main: %s: not a file or directory\n", p.c_str());
      return 2;
    }
  }
  std::sort(files.begin(), files.end());

  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) signal(sig, OnSignal);
  signal(SIGALRM, OnTimeout);
  if (!kAsan && g_rss_limit_mb) {
    const uint64_t cap = VirtualBytes() + (g_rss_limit_mb << 20);
    const rlimit lim{cap, cap};
    setrlimit(RLIMIT_AS, &lim);
  }
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(WriteCurrent);

  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::vector<Input> seeds;
  for (const auto& f : files) {
    Input in;
    if (!ReadFile(f, in)) {
      std::fprintf(stderr, "fuzz_main: cannot read %s\n", f.c_str());
      return 2;
    }
    if (in.size() > max_len) in.resize(max_len);
    std::snprintf(g_origin, sizeof(g_origin), "%s", f.c_str());
    Run(in);
    seeds.push_back(std::move(in));
  }

  Rng rng(seed);
  uint64_t done = 0;
  for (; done < runs; done++) {
    if (max_seconds > 0 && elapsed() > max_seconds) break;
    size_t base = rng.Below(seeds.size());
    Input in = seeds.empty() ? Input{} : seeds[base];
    Mutate(in, seeds, rng, max_len);
    std::snprintf(g_origin, sizeof(g_origin), "mutation %llu (--seed=%llu) of %s",
                  static_cast<unsigned long long>(done), static_cast<unsigned long long>(seed),
                  seeds.empty() ? "the empty input" : files[base].c_str());
    Run(in);
  }
  std::printf("fuzz_main: %zu seed inputs and %llu mutations in %.2f s, no crash\n", seeds.size(),
              static_cast<unsigned long long>(done), elapsed());
  return 0;
}
