#include "base/redact.h"

#include "absl/strings/str_cat.h"

namespace gpuflame::base {
namespace {

struct Authority {
  size_t begin = 0;         // after "scheme://"
  size_t userinfo_end = 0;  // the '@' ending user:password, or begin when none
  bool has_userinfo = false;
};

// Where user:password@ sits. The '@' taken is the last one before the query
// or fragment, not the last one before the first '/': a password with an
// unescaped '/' ("http://u:pa/ss@host") would otherwise be printed whole.
// A path holding '@' is redacted too; a log loses a little of the path, never
// a password.
Authority FindAuthority(absl::string_view url) {
  Authority a;
  size_t scheme = url.find("://");
  a.begin = scheme == absl::string_view::npos ? 0 : scheme + 3;
  size_t query = url.find_first_of("?#", a.begin);
  absl::string_view before_query = url.substr(0, query);
  size_t at = before_query.rfind('@');
  a.has_userinfo = at != absl::string_view::npos && at >= a.begin;
  a.userinfo_end = a.has_userinfo ? at : a.begin;
  return a;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    int hi = 0, lo = 0;
    if (s[i] == '%' && i + 2 < s.size() && (hi = HexValue(s[i + 1])) >= 0 && (lo = HexValue(s[i + 2])) >= 0) {
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

std::string RedactUrl(absl::string_view url) {
  Authority a = FindAuthority(url);
  std::string out(url.substr(0, a.begin));
  absl::string_view rest = url.substr(a.userinfo_end + (a.has_userinfo ? 1 : 0));
  if (a.has_userinfo) absl::StrAppend(&out, "***@");
  size_t query = rest.find_first_of("?#");
  absl::StrAppend(&out, rest.substr(0, query));
  if (query != absl::string_view::npos && rest[query] == '?') absl::StrAppend(&out, "?***");
  return out;
}

UrlCredentials SplitUrlCredentials(absl::string_view url) {
  UrlCredentials c;
  Authority a = FindAuthority(url);
  if (!a.has_userinfo) {
    c.url = std::string(url);
    return c;
  }
  c.had_credentials = true;
  absl::string_view userinfo = url.substr(a.begin, a.userinfo_end - a.begin);
  size_t colon = userinfo.find(':');
  c.user = PercentDecode(userinfo.substr(0, colon));
  if (colon != absl::string_view::npos) c.password = PercentDecode(userinfo.substr(colon + 1));
  c.url = absl::StrCat(url.substr(0, a.begin), url.substr(a.userinfo_end + 1));
  return c;
}

bool HasControlCharacters(absl::string_view value) {
  for (unsigned char c : value)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

}  // namespace gpuflame::base
