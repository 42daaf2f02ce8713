#include "exporters/pyroscope/bearer_token.h"

#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/redact.h"

namespace gpuflame::exporters {
namespace {

// Kubernetes' projected tokens are JWTs of one to two KiB; 64 KiB leaves room
// for any token and keeps a wrong path (a log file, /dev/zero) from being
// read whole.
constexpr size_t kMaxTokenBytes = 64u << 10;

}  // namespace

absl::StatusOr<std::string> ReadBearerToken(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::PermissionDeniedError(absl::StrCat("cannot read the bearer token file ", path));
  std::string token(kMaxTokenBytes + 1, '\0');
  f.read(token.data(), static_cast<std::streamsize>(token.size()));
  if (f.bad()) return absl::PermissionDeniedError(absl::StrCat("cannot read the bearer token file ", path));
  token.resize(static_cast<size_t>(f.gcount()));
  if (token.size() > kMaxTokenBytes)
    return absl::InvalidArgumentError(absl::StrCat("the bearer token file ", path, " is larger than 64 KiB"));
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("the bearer token file ", path, " is empty"));
  if (base::HasControlCharacters(token))
    return absl::InvalidArgumentError(
        absl::StrCat("the bearer token in ", path, " holds control characters (a line break inside it?)"));
  return token;
}

}  // namespace gpuflame::exporters
