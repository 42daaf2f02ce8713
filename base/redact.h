// Credentials never reach a log line, an error message, a metric or
// `--check-config`: URLs are printed through RedactUrl, credentials written
// into a URL are taken out of it once (SplitUrlCredentials) so that no client
// or message downstream holds them, and values that go into HTTP headers are
// checked for control characters before use.
#ifndef GPUFLAME_BASE_REDACT_H_
#define GPUFLAME_BASE_REDACT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace gpuflame::base {

// |url| with any user:password@ replaced by ***@ ("http://***@pyroscope:4040/"),
// and the query string dropped (it may hold a token).
std::string RedactUrl(absl::string_view url);

struct UrlCredentials {
  std::string url;   // without user:password@
  std::string user;  // percent-decoded; empty when the URL had none
  std::string password;
  bool had_credentials = false;
};
// "http://u%40x:p@h/" -> {"http://h/", "u@x", "p"}.
UrlCredentials SplitUrlCredentials(absl::string_view url);

// True when |value| has a byte below 0x20 or 0x7f: it could end one HTTP
// header and start another (CR/LF injection).
bool HasControlCharacters(absl::string_view value);

}  // namespace gpuflame::base

#endif  // GPUFLAME_BASE_REDACT_H_
