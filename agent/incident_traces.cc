#include "agent/incident_traces.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/scoped_fd.h"
#include "exporters/pprof/gzip.h"
#include "logging/log.h"

namespace gpuflame::profiler {
namespace {

constexpr char kSuffix[] = ".json.gz";

absl::Status WriteAll(const std::string& path, const std::string& data) {
  // O_EXCL | O_NOFOLLOW: the directory may be shared; never write through
  // a link someone left at our name.
  base::ScopedFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640));
  if (fd.get() < 0) return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// "20261204T073812Z": file names sort in time order.
std::string UtcStamp() {
  const time_t now = time(nullptr);
  struct tm tm {};
  gmtime_r(&now, &tm);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

}  // namespace

IncidentTraces::IncidentTraces(const FlightRecorderOptions& options) : options_(options) {
  if (options_.seconds <= 0 || options_.incident_dir.empty()) return;
  thread_ = std::thread([this] { Run(); });
}

IncidentTraces::~IncidentTraces() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

bool IncidentTraces::Submit(std::string name, std::string json,
                            std::vector<std::pair<std::string, std::string>> fields) {
  if (!on()) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= kMaxQueued) {
      stats_.dropped++;
      logging::Warning(
          absl::StrCat("incident trace ", name, " not written: ", kMaxQueued, " are being written already"));
      return false;
    }
    queue_.push_back({std::move(name), std::move(json), std::move(fields)});
  }
  cv_.notify_one();
  return true;
}

IncidentTraceStats IncidentTraces::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void IncidentTraces::Run() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and all written
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    uint64_t removed = 0;
    absl::StatusOr<std::string> path = WriteOne(options_, job.name, job.json, &removed);
    std::vector<logging::Field> fields;
    for (auto& [k, v] : job.fields) fields.emplace_back(k, v);
    {
      std::lock_guard<std::mutex> lock(mu_);
      (path.ok() ? stats_.written : stats_.failed)++;
      stats_.removed += removed;
    }
    if (path.ok()) {
      fields.emplace_back("path", *path);
      logging::Warning(
          absl::StrCat("incident trace written: ", *path, " (open it in ui.perfetto.dev or chrome://tracing)"), fields);
    } else {
      logging::Warning(absl::StrCat("incident trace ", job.name, " not written: ", path.status().message()), fields);
    }
  }
}

absl::StatusOr<std::string> IncidentTraces::WriteOne(const FlightRecorderOptions& options, const std::string& name,
                                                     const std::string& json, uint64_t* removed) {
  namespace fs = std::filesystem;
  absl::StatusOr<std::string> gz = exporters::Gzip(json);
  if (!gz.ok()) return gz.status();
  if (gz->size() > options.incident_max_bytes)
    return absl::ResourceExhaustedError(absl::StrCat("its ", gz->size(), " bytes are over incident_trace_max_mb"));
  std::error_code ec;
  fs::create_directories(options.incident_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", options.incident_dir, ": ", ec.message()));
  // Ours, oldest first; the bounds make room for the new one.
  struct Old {
    std::string path;
    uint64_t bytes;
  };
  std::vector<Old> old;
  uint64_t bytes = 0;
  for (fs::directory_iterator it(options.incident_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    if (!absl::StartsWith(file, kIncidentTracePrefix) || !absl::EndsWith(file, kSuffix)) continue;
    if (!it->is_regular_file(ec) || ec) continue;
    const uint64_t size = it->file_size(ec);
    if (ec) continue;
    old.push_back({it->path().string(), size});
    bytes += size;
  }
  std::sort(old.begin(), old.end(), [](const Old& a, const Old& b) { return a.path < b.path; });
  size_t first = 0;
  while (first < old.size() && (old.size() - first + 1 > static_cast<size_t>(options.incident_max_files) ||
                                bytes + gz->size() > options.incident_max_bytes)) {
    if (fs::remove(old[first].path, ec); !ec && removed) (*removed)++;
    bytes -= old[first].bytes;
    first++;
  }
  static std::atomic<uint64_t> sequence{0};  // two in one second still sort in order
  const std::string stem = absl::StrCat(options.incident_dir, "/", kIncidentTracePrefix, UtcStamp(), "-",
                                        absl::StrFormat("%06u", sequence++ % 1000000), "-", name);
  const std::string tmp = stem + ".tmp";
  if (auto s = WriteAll(tmp, *gz); !s.ok()) {
    fs::remove(tmp, ec);
    return s;
  }
  const std::string path = stem + kSuffix;
  if (fs::rename(tmp, path, ec); ec) {
    fs::remove(tmp, ec);
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, ": ", ec.message()));
  }
  return path;
}

}  // namespace gpuflame::profiler
