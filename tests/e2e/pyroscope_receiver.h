// A Pyroscope push receiver for tests: serves push.v1.PusherService/Push over
// Connect (HTTP/1.1, application/proto), validates every request as
// Pyroscope's distributor does (non-empty label names and values, at most 30
// labels per series, names 1024 / values 2048 bytes, a 4 MiB uncompressed
// profile, 16000 samples, a well-formed pprof), answers like Pyroscope,
// and keeps what it accepted. It can fail calls on purpose, to test retries.
#ifndef GPUFLAME_TESTS_E2E_PYROSCOPE_RECEIVER_H_
#define GPUFLAME_TESTS_E2E_PYROSCOPE_RECEIVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "profile.pb.h"

namespace httplib {
class Server;
}
namespace grpc {
class Server;
}

namespace gpuflame::e2e {

struct ReceivedSeries {
  std::map<std::string, std::string> labels;
  pprof::Profile profile;
};

// Why Pyroscope would reject |labels| + |raw_profile|, or "" if it accepts.
std::string ValidateSeries(const std::map<std::string, std::string>& labels, const std::string& raw_profile,
                           pprof::Profile* out);

class PyroscopeReceiver {
 public:
  PyroscopeReceiver();
  ~PyroscopeReceiver();
  // Listens on 127.0.0.1:|port| (0: any free port). False if it cannot.
  // |legacy_only|: only the old /ingest API, as Pyroscope before push.v1.
  bool Start(int port = 0, bool legacy_only = false);
  // The same, as a gRPC server (HTTP/2) for push.v1.PusherService.
  bool StartGrpc(int port);
  void Stop();
  int port() const { return port_; }

  // Fails calls as an overloaded Pyroscope does (HTTP 503, gRPC
  // UNAVAILABLE), before looking at them: every |n|th call (0: none), and a
  // share of the rest drawn from a generator seeded with |seed|.
  void FailEvery(int n);
  void FailShare(double share, uint32_t seed);

  std::vector<ReceivedSeries> Accepted() const;
  std::vector<std::string> Rejections() const;
  int requests() const;
  int failed() const;  // calls failed on purpose

 private:
  // Validates and stores one request; "" or why it was rejected.
  std::string Accept(const std::string& body);
  // Counts a call; true when it is to fail (FailEvery, FailShare).
  bool FailThisCallLocked();

  std::unique_ptr<httplib::Server> server_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<class GrpcPusher> grpc_service_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<ReceivedSeries> accepted_;
  std::vector<std::string> rejections_;
  int requests_ = 0;
  int port_ = 0;
  int fail_every_ = 0;
  double fail_share_ = 0;
  std::mt19937 fail_random_;
  int failed_ = 0;
};

}  // namespace gpuflame::e2e

#endif  // GPUFLAME_TESTS_E2E_PYROSCOPE_RECEIVER_H_
