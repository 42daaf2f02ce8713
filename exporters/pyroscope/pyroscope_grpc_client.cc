#include "exporters/pyroscope/pyroscope_grpc_client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/redact.h"
#include "exporters/pyroscope/bearer_token.h"
#include "push.grpc.pb.h"  // generated from exporters/proto/push.proto

namespace gpuflame::exporters {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::string GrpcTarget(const std::string& url) {
  std::string t = url;
  for (const char* scheme : {"http://", "https://"})
    if (t.rfind(scheme, 0) == 0) t = t.substr(std::string(scheme).size());
  auto slash = t.find('/');
  if (slash != std::string::npos) t.resize(slash);
  // user:password@ is not part of a gRPC target, and a target is printed in
  // gRPC's own error messages.
  if (auto at = t.rfind('@'); at != std::string::npos) t.erase(0, at + 1);
  return t;
}

PyroscopeGrpcClient::PyroscopeGrpcClient(PyroscopeEndpoint endpoint) : endpoint_(std::move(endpoint)) {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (endpoint_.url.rfind("https://", 0) == 0) {
    grpc::SslCredentialsOptions ssl;
    if (!endpoint_.ca_file.empty()) ssl.pem_root_certs = ReadAll(endpoint_.ca_file);
    creds = grpc::SslCredentials(ssl);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  channel_ = grpc::CreateChannel(GrpcTarget(endpoint_.url), creds);
}

PyroscopeGrpcClient::~PyroscopeGrpcClient() = default;

absl::Status PyroscopeGrpcClient::PushEncoded(const std::string& body) const {
  push::v1::PushRequest req;
  if (!req.ParseFromString(body)) return absl::InvalidArgumentError("not a push request");
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(endpoint_.timeout_ms));
  if (!endpoint_.tenant.empty()) ctx.AddMetadata("x-scope-orgid", endpoint_.tenant);
  if (!endpoint_.bearer_token_file.empty()) {
    auto token = ReadBearerToken(endpoint_.bearer_token_file);
    if (!token.ok()) return absl::PermissionDeniedError(token.status().message());
    ctx.AddMetadata("authorization", "Bearer " + *token);
  } else if (!endpoint_.basic_user.empty()) {
    // gRPC has no basic-auth helper; the header is the same as over HTTP/1.1.
    static const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string in = endpoint_.basic_user + ":" + endpoint_.basic_password, out;
    for (size_t i = 0; i < in.size(); i += 3) {
      uint32_t v = static_cast<uint8_t>(in[i]) << 16;
      if (i + 1 < in.size()) v |= static_cast<uint8_t>(in[i + 1]) << 8;
      if (i + 2 < in.size()) v |= static_cast<uint8_t>(in[i + 2]);
      out += kB64[(v >> 18) & 63];
      out += kB64[(v >> 12) & 63];
      out += i + 1 < in.size() ? kB64[(v >> 6) & 63] : '=';
      out += i + 2 < in.size() ? kB64[v & 63] : '=';
    }
    ctx.AddMetadata("authorization", "Basic " + out);
  }
  push::v1::PushResponse resp;
  auto stub = push::v1::PusherService::NewStub(channel_);
  grpc::Status s = stub->Push(&ctx, req, &resp);
  if (s.ok()) return absl::OkStatus();
  std::string msg = absl::StrCat("gRPC push to ", base::RedactUrl(endpoint_.url), ": ", s.error_message());
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::INTERNAL:
      return absl::UnavailableError(msg);
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return absl::ResourceExhaustedError(msg);
    case grpc::StatusCode::UNAUTHENTICATED:
      return absl::UnauthenticatedError(msg);
    case grpc::StatusCode::PERMISSION_DENIED:
      return absl::PermissionDeniedError(msg);
    default:
      return absl::InvalidArgumentError(msg);
  }
}

}  // namespace gpuflame::exporters
