#include "base/redact.h"

#include "absl/strings/str_cat.h"

namespace gpuflame::base {

std::string RedactUrl(absl::string_view url) {
  // scheme://[userinfo@]host[:port][/path][?query][#fragment]
  size_t scheme = url.find("://");
  size_t authority = scheme == absl::string_view::npos ? 0 : scheme + 3;
  size_t end = url.find_first_of("/?#", authority);
  absl::string_view host_part = url.substr(authority, end == absl::string_view::npos ? url.size() - authority : end - authority);
  std::string out(url.substr(0, authority));
  if (size_t at = host_part.rfind('@'); at != absl::string_view::npos) {
    absl::StrAppend(&out, "***@", host_part.substr(at + 1));
  } else {
    absl::StrAppend(&out, host_part);
  }
  if (end != absl::string_view::npos) {
    absl::string_view rest = url.substr(end);
    size_t query = rest.find_first_of("?#");
    absl::StrAppend(&out, rest.substr(0, query));
    if (query != absl::string_view::npos && rest[query] == '?') absl::StrAppend(&out, "?***");
  }
  return out;
}

bool HasControlCharacters(absl::string_view value) {
  for (unsigned char c : value)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

}  // namespace gpuflame::base
