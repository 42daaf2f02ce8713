// gpuflame's diagnostics: one levelled, structured log for every front end
// (the agent's daemon log, record's warnings), written through spdlog (its
// stderr sink, level filter and UTC timestamps) in one of three formats:
//
//   text    gpuflame: warning: MESSAGE key=value      (a terminal; the default for record)
//   logfmt  ts=... level=warning msg="MESSAGE" key=value   (the agent's default: Loki, Grafana)
//   json    {"ts":"...","level":"warning","msg":"MESSAGE","key":"value"}
//
// Repeats are rate-limited: the same line (message and fields) is written
// once per interval; what was held back is counted and said on the next one
// let through, or at Flush(): "repeated N times" (field `repeated` in logfmt
// and JSON). spdlog's own dup_filter_sink was not used: it only catches
// repeats that follow each other, and its count is an unstructured line.
//
// The user-facing output of record (its progress line and summary) is not a
// log and does not come here. Thread-safe: any thread may log.
#ifndef GPUFLAME_LOGGING_LOG_H_
#define GPUFLAME_LOGGING_LOG_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gpuflame::logging {

enum class Level { kDebug, kInfo, kWarning, kError };
enum class Format { kText, kLogfmt, kJson };

// One key=value of a line. Numbers and booleans stay bare in JSON; every
// other value is a string.
struct Field {
  Field(absl::string_view k, absl::string_view v) : key(k), value(v) {}
  Field(absl::string_view k, const std::string& v) : key(k), value(v) {}
  Field(absl::string_view k, const char* v) : key(k), value(v ? v : "") {}
  Field(absl::string_view k, bool v) : key(k), value(v ? "true" : "false"), bare(true) {}
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  Field(absl::string_view k, T v) : key(k), value(absl::StrCat(v)), bare(true) {}
  std::string key;
  std::string value;
  bool bare = false;  // a number or boolean
};

struct Options {
  Format format = Format::kText;
  Level level = Level::kInfo;
  // The same line is written at most once per this many seconds; 0: every time.
  double repeat_interval_s = 60;
  // Lines go here instead of stderr (tests); not owned, must outlive the log.
  std::ostream* out = nullptr;
  // The clock the repeat limit reads (tests); default CLOCK_MONOTONIC.
  std::function<int64_t()> now_ns;
};

absl::StatusOr<Format> ParseFormat(absl::string_view name);  // text, logfmt, json
absl::StatusOr<Level> ParseLevel(absl::string_view name);    // debug, info, warning (warn), error
const char* FormatName(Format f);
const char* LevelName(Level l);

// Replaces the log's settings (held-back repeats are said first). Before the
// first call the log is text at info to stderr.
void Configure(Options options);
void Log(Level level, absl::string_view message, const std::vector<Field>& fields = {});
inline void Debug(absl::string_view m, const std::vector<Field>& f = {}) { Log(Level::kDebug, m, f); }
inline void Info(absl::string_view m, const std::vector<Field>& f = {}) { Log(Level::kInfo, m, f); }
inline void Warning(absl::string_view m, const std::vector<Field>& f = {}) { Log(Level::kWarning, m, f); }
inline void Error(absl::string_view m, const std::vector<Field>& f = {}) { Log(Level::kError, m, f); }
// Says every repeat still held back (at exit: nothing is lost silently).
void Flush();

}  // namespace gpuflame::logging

#endif  // GPUFLAME_LOGGING_LOG_H_
