#include "e2e/e2e_support.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "exporters/pprof/gzip.h"
#include "symbolizer/native_symbolizer.h"

namespace gpuflame::e2e {

RunResult Sh(const std::string& cmd) {
  RunResult r;
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) r.output.append(buf, n);
  int status = pclose(f);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

static std::string PyenvRoot() {
  if (const char* r = getenv("PYENV_ROOT")) return r;
  const char* home = getenv("HOME");
  return std::string(home ? home : "/root") + "/.pyenv";
}

std::string PyenvPython(const std::string& minor) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(PyenvRoot() + "/versions", ec)) {
    std::string name = e.path().filename();
    if (name.rfind(minor + ".", 0) != 0) continue;
    std::string bin = e.path().string() + "/bin/python" + minor;
    if (access(bin.c_str(), X_OK) == 0) return bin;
  }
  return "";
}

constexpr const char* kDebianPython = "/usr/bin/python3.11";

std::vector<Interpreter> SupportedInterpreters() {
  std::vector<Interpreter> out;
  for (int minor = 10; minor <= 13; minor++) {
    std::string v = "3." + std::to_string(minor);
    out.push_back({v, PyenvPython(v), minor});
  }
  out.push_back({"3.11-static", access(kDebianPython, X_OK) == 0 ? kDebianPython : "", 11});
  return out;
}

std::string MissingPython(const std::string& minor) {
  if (!PyenvPython(minor).empty()) return "";
  return "needs pyenv's CPython " + minor + ", not installed here (looked for " + PyenvRoot() + "/versions/" +
         minor + ".*/bin/python" + minor + "; `pyenv install " + minor + "` builds it)";
}

std::string MissingInterpreter(const Interpreter& i) {
  if (!i.path.empty()) return "";
  if (i.label == "3.11-static") return std::string("needs Debian's python3.11 (") + kDebianPython + "; apt-get install python3.11)";
  return MissingPython(i.label);
}

std::string MissingKernelTime() {
  return GPUFLAME_HAVE_CUPTI ? ""
                             : "needs kernel time, which this build lacks (no CUPTI headers at configure time: "
                               "cupti/CMakeLists.txt)";
}

KernelLogOf::KernelLogOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    char hex[32];
    snprintf(hex, sizeof(hex), "inode: 0x%llx ", static_cast<unsigned long long>(st.st_ino));
    inode_hex_ = hex;
  }
  fd_ = base::ScopedFd(open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd_) lseek(fd_.get(), 0, SEEK_END);
}

std::vector<std::string> KernelLogOf::NewLines() {
  std::vector<std::string> out;
  if (!fd_ || inode_hex_.empty()) return out;
  char record[8192];
  for (int i = 0; i < 100000; i++) {  // one record per read
    ssize_t n = read(fd_.get(), record, sizeof(record) - 1);
    if (n < 0 && errno == EPIPE) continue;  // overwritten before we read it
    if (n <= 0) break;                      // EAGAIN: nothing more
    std::string line(record, static_cast<size_t>(n));
    if (line.find(inode_hex_) != std::string::npos) out.push_back(line);
  }
  return out;
}

std::string SimEnv() {
  return std::string("GPUFLAME_SIM_LIB_DIR=") + GPUFLAME_SIM_DIR + " PYTHONPATH=" + GPUFLAME_SIM_DIR +
         " PYTHONDONTWRITEBYTECODE=1";
}

std::string SimNvmlEnv() { return std::string("GPUFLAME_NVML_LIBRARY=") + GPUFLAME_SIM_DIR + "/libnvidia-ml.so.1"; }

RunResult RecordAttached(const std::string& command, const std::string& go) {
  RunResult r;
  FILE* f = popen((command + " 2>&1").c_str(), "r");
  if (!f) return r;
  char line[1024];
  bool told = false;
  while (fgets(line, sizeof(line), f)) {
    r.output += line;
    if (!told && r.output.find("gpuflame: recording") != std::string::npos) {
      std::ofstream(go) << "go";
      told = true;
    }
  }
  const int status = pclose(f);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

pid_t StartSteadyWorkload(const std::string& python, const std::string& pidfile, const std::string& go,
                          const std::string& args) {
  Sh(SimEnv() + " timeout 60 " + python + " " + Workload("steady.py") + " " + pidfile + " " + go + " " + args +
     " > /dev/null 2>&1 &");
  for (int i = 0; i < 3000 && !std::filesystem::exists(pidfile); i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return std::filesystem::exists(pidfile) ? std::stoi(ReadFile(pidfile)) : -1;
}

int64_t WaitForNumber(const std::string& path) {
  for (int i = 0; i < 1000 && !std::filesystem::exists(path); i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const std::string text = ReadFile(path);
  return text.empty() ? -1 : std::stoll(text);
}

std::string Workload(const std::string& name) { return std::string(GPUFLAME_WORKLOADS) + "/" + name; }

std::string TempDir(const std::string& name) {
  std::string base = (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  std::string dir = base + "/gpuflame-e2e-" + std::to_string(getpid()) + "-" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool LoadPprof(const std::string& gz_path, pprof::Profile* out) {
  auto raw = exporters::Gunzip(ReadFile(gz_path));
  return raw.ok() && out->ParseFromString(*raw);
}

static int TypeIndex(const pprof::Profile& p, const std::string& type) {
  for (int i = 0; i < p.sample_type_size(); i++)
    if (p.string_table(p.sample_type(i).type()) == type) return i;
  return -1;
}

// A location's functions, outermost first: frames inlined at one address
// are one location with a line each, innermost first (pprof's order).
static std::vector<std::string> FunctionsOf(const pprof::Profile& p, uint64_t location_id) {
  std::vector<std::string> names;
  for (const auto& l : p.location()) {
    if (l.id() != location_id) continue;
    for (int i = l.line_size() - 1; i >= 0; i--) {
      std::string name = "?";
      for (const auto& f : p.function())
        if (f.id() == l.line(i).function_id()) name = p.string_table(f.name());
      names.push_back(std::move(name));
    }
  }
  if (names.empty()) names.push_back("?");
  return names;
}

static bool IsNative(const pprof::Profile& p, uint64_t location_id) {
  for (const auto& l : p.location())
    if (l.id() == location_id) return l.mapping_id() != 0;
  return false;
}

std::string Dump(const std::map<std::string, int64_t>& stacks) {
  std::string s;
  for (const auto& [k, v] : stacks) s += "  " + std::to_string(v) + "  " + k + "\n";
  return s;
}

std::map<std::string, int64_t> Stacks(const pprof::Profile& p, const std::string& type, bool drop_trampolines,
                                      bool drop_native) {
  std::map<std::string, int64_t> out;
  int idx = TypeIndex(p, type);
  if (idx < 0) return out;
  for (const auto& s : p.sample()) {
    int64_t v = s.value(idx);
    if (v == 0) continue;
    std::string key;
    for (int i = s.location_id_size() - 1; i >= 0; i--) {
      for (const std::string& name : FunctionsOf(p, s.location_id(i))) {
        if (drop_trampolines && name == "<interpreter trampoline>") continue;
        if (drop_native && (IsNative(p, s.location_id(i)) || name.rfind("0x", 0) == 0 ||
                            name == symbolizer::kUnknownMappingFrame || name == symbolizer::kAnonymousMemoryFrame ||
                            name.rfind("[vdso]", 0) == 0))
          continue;
        if (!key.empty()) key += ";";
        key += name;
      }
    }
    out[key] += v;
  }
  return out;
}

int64_t Total(const pprof::Profile& p, const std::string& type) {
  int idx = TypeIndex(p, type);
  int64_t t = 0;
  if (idx < 0) return -1;
  for (const auto& s : p.sample()) t += s.value(idx);
  return t;
}

int64_t LineOf(const pprof::Profile& p, const std::string& name) {
  for (const auto& l : p.location())
    for (const auto& line : l.line())
      for (const auto& f : p.function())
        if (f.id() == line.function_id() && p.string_table(f.name()) == name) return line.line();
  return -1;
}

int SourceLine(const std::string& file, const std::string& needle) {
  std::ifstream f(file);
  std::string line;
  for (int n = 1; std::getline(f, line); n++)
    if (line.find(needle) != std::string::npos) return n;
  return -1;
}

}  // namespace gpuflame::e2e
