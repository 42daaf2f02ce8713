#include "logging/log.h"

#include <time.h>

#include <memory>
#include <mutex>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "base/json_string.h"
#include "logging/repeat_limiter.h"
#include "spdlog/logger.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace gpuflame::logging {
namespace {

spdlog::level::level_enum SpdLevel(Level l) {
  switch (l) {
    case Level::kDebug: return spdlog::level::debug;
    case Level::kInfo: return spdlog::level::info;
    case Level::kWarning: return spdlog::level::warn;
    case Level::kError: return spdlog::level::err;
  }
  return spdlog::level::err;
}

// logfmt as Go's logfmt and Loki read it: bare when the value has no space,
// quote, '=' or control character, otherwise quoted with \" \\ \n \t \r and
// \u00XX for other control bytes (a hostile process name stays one line).
void AppendLogfmtValue(std::string& out, absl::string_view v) {
  bool bare = !v.empty();
  for (unsigned char c : v) bare &= c > ' ' && c != '"' && c != '=' && c != '\\' && c != 0x7f;
  if (bare) {
    out.append(v.data(), v.size());
    return;
  }
  out += '"';
  for (unsigned char c : v) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < ' ' || c == 0x7f) absl::StrAppend(&out, "\\u00", absl::Hex(c, absl::kZeroPad2));
        else out += static_cast<char>(c);
    }
  }
  out += '"';
}

// A line without its end: the repeat count (if any) and the closing brace
// come after, so that the same line is the same key however often it came.
std::string Render(Format format, Level level, absl::string_view message, const std::vector<Field>& fields) {
  std::string out;
  switch (format) {
    case Format::kText:
      if (level == Level::kWarning) out = "warning: ";
      if (level == Level::kDebug) out = "debug: ";
      out.append(message.data(), message.size());
      for (const Field& f : fields) {
        absl::StrAppend(&out, " ", f.key, "=");
        AppendLogfmtValue(out, f.value);
      }
      break;
    case Format::kLogfmt:
      absl::StrAppend(&out, "level=", LevelName(level), " msg=");
      AppendLogfmtValue(out, message);
      for (const Field& f : fields) {
        absl::StrAppend(&out, " ", f.key, "=");
        AppendLogfmtValue(out, f.value);
      }
      break;
    case Format::kJson:
      absl::StrAppend(&out, "\"level\":\"", LevelName(level),
                      "\",\"msg\":", base::JsonString(std::string_view(message.data(), message.size())));
      for (const Field& f : fields)
        absl::StrAppend(&out, ",", base::JsonString(f.key), ":", f.bare ? f.value : base::JsonString(f.value));
      break;
  }
  return out;
}

std::string Finish(Format format, std::string line, uint64_t repeated) {
  switch (format) {
    case Format::kText:
      if (repeated) absl::StrAppend(&line, " (repeated ", repeated, " times)");
      break;
    case Format::kLogfmt:
      if (repeated) absl::StrAppend(&line, " repeated=", repeated);
      break;
    case Format::kJson:
      if (repeated) absl::StrAppend(&line, ",\"repeated\":", repeated);
      line += '}';
      break;
  }
  return line;
}

// The timestamp and framing around a rendered line, by spdlog (UTC).
const char* Pattern(Format format) {
  switch (format) {
    case Format::kText: return "gpuflame: %v";
    case Format::kLogfmt: return "ts=%Y-%m-%dT%H:%M:%S.%eZ %v";
    case Format::kJson: return "{\"ts\":\"%Y-%m-%dT%H:%M:%S.%eZ\",%v";
  }
  return "%v";
}

int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

class Log {
 public:
  Log() { Apply(Options{}); }

  void Configure(Options options) {
    std::lock_guard<std::mutex> lock(mu_);
    FlushLocked();
    Apply(std::move(options));
  }

  void Write(Level level, absl::string_view message, const std::vector<Field>& fields) {
    std::lock_guard<std::mutex> lock(mu_);
    if (level < options_.level) return;  // below the level: neither written nor counted
    std::string line = Render(options_.format, level, message, fields);
    std::string key = absl::StrCat(static_cast<int>(level), line);
    std::optional<uint64_t> held_before = limiter_->Admit(key, options_.now_ns());
    if (!held_before) return;
    logger_->log(SpdLevel(level), "{}", Finish(options_.format, std::move(line), *held_before));
  }

  void Flush() {
    std::lock_guard<std::mutex> lock(mu_);
    FlushLocked();
  }

 private:
  void FlushLocked() {
    if (!limiter_) return;
    for (auto& [key, held] : limiter_->TakeHeld()) {
      const auto level = static_cast<Level>(key[0] - '0');
      logger_->log(SpdLevel(level), "{}", Finish(options_.format, key.substr(1), held));
    }
    logger_->flush();
  }

  void Apply(Options options) {
    options_ = std::move(options);
    if (!options_.now_ns) options_.now_ns = MonotonicNs;
    spdlog::sink_ptr sink;
    if (options_.out) sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*options_.out, /*force_flush=*/true);
    else sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    logger_ = std::make_shared<spdlog::logger>("gpuflame", std::move(sink));
    logger_->set_formatter(
        std::make_unique<spdlog::pattern_formatter>(Pattern(options_.format), spdlog::pattern_time_type::utc));
    logger_->set_level(SpdLevel(options_.level));
    logger_->flush_on(spdlog::level::debug);  // a daemon's log is read while it runs
    limiter_ = std::make_unique<RepeatLimiter>(static_cast<int64_t>(options_.repeat_interval_s * 1e9));
  }

  std::mutex mu_;
  Options options_;
  std::shared_ptr<spdlog::logger> logger_;
  std::unique_ptr<RepeatLimiter> limiter_;
};

Log& TheLog() {
  static Log* log = new Log();  // never destroyed: threads may log during exit
  return *log;
}

}  // namespace

absl::StatusOr<Format> ParseFormat(absl::string_view name) {
  if (name == "text") return Format::kText;
  if (name == "logfmt") return Format::kLogfmt;
  if (name == "json") return Format::kJson;
  return absl::InvalidArgumentError(absl::StrCat("log format wants text, logfmt or json, not '", name, "'"));
}

absl::StatusOr<Level> ParseLevel(absl::string_view name) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warning" || name == "warn") return Level::kWarning;
  if (name == "error") return Level::kError;
  return absl::InvalidArgumentError(absl::StrCat("log level wants debug, info, warning or error, not '", name, "'"));
}

const char* FormatName(Format f) {
  switch (f) {
    case Format::kText: return "text";
    case Format::kLogfmt: return "logfmt";
    case Format::kJson: return "json";
  }
  return "?";
}

const char* LevelName(Level l) {
  switch (l) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarning: return "warning";
    case Level::kError: return "error";
  }
  return "?";
}

void Configure(Options options) { TheLog().Configure(std::move(options)); }
void Log(Level level, absl::string_view message, const std::vector<Field>& fields) {
  TheLog().Write(level, message, fields);
}
void Flush() { TheLog().Flush(); }

}  // namespace gpuflame::logging
