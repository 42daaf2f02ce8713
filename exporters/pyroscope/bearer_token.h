// A bearer token read from its file, as Kubernetes mounts service-account and
// projected tokens: read again at each use so that a rotated token is picked
// up, and checked before it goes into an Authorization header.
// Any thread: no state.
#ifndef GPUFLAME_EXPORTERS_PYROSCOPE_BEARER_TOKEN_H_
#define GPUFLAME_EXPORTERS_PYROSCOPE_BEARER_TOKEN_H_

#include <string>

#include "absl/status/statusor.h"

namespace gpuflame::exporters {

// The token in |path| without trailing line breaks and spaces. An error (that
// never holds the token) when the file cannot be read, is empty, is larger
// than a token can be, or holds control characters, which would end the
// header and start another.
absl::StatusOr<std::string> ReadBearerToken(const std::string& path);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_PYROSCOPE_BEARER_TOKEN_H_
