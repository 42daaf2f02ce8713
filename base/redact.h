// Credentials never reach a log line, an error message, a metric or
// `--check-config`: URLs are printed through RedactUrl, and values that go
// into HTTP headers are checked for control characters before use.
#ifndef GPUFLAME_BASE_REDACT_H_
#define GPUFLAME_BASE_REDACT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace gpuflame::base {

// |url| with any user:password@ replaced by ***@ ("http://***@pyroscope:4040/"),
// and the query string dropped (it may hold a token).
std::string RedactUrl(absl::string_view url);

// True when |value| has a byte below 0x20 or 0x7f: it could end one HTTP
// header and start another (CR/LF injection).
bool HasControlCharacters(absl::string_view value);

}  // namespace gpuflame::base

#endif  // GPUFLAME_BASE_REDACT_H_
