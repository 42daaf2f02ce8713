// push.v1.PusherService/Push over gRPC (HTTP/2), for Pyroscope deployments
// reached through gRPC-only ingress. Same request bytes and retry semantics
// as the Connect client.
#ifndef GPUFLAME_EXPORTERS_PYROSCOPE_PYROSCOPE_GRPC_CLIENT_H_
#define GPUFLAME_EXPORTERS_PYROSCOPE_PYROSCOPE_GRPC_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "exporters/pyroscope/pyroscope_client.h"

namespace grpc {
class Channel;
}

namespace gpuflame::exporters {

class PyroscopeGrpcClient {
 public:
  explicit PyroscopeGrpcClient(PyroscopeEndpoint endpoint);
  ~PyroscopeGrpcClient();
  // |body| is a serialized push.v1.PushRequest. Status as PyroscopeClient's.
  absl::Status PushEncoded(const std::string& body) const;

 private:
  PyroscopeEndpoint endpoint_;
  std::shared_ptr<grpc::Channel> channel_;
};

// "host:port" from an http(s):// URL (the gRPC target).
std::string GrpcTarget(const std::string& url);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_PYROSCOPE_PYROSCOPE_GRPC_CLIENT_H_
