// Where the agent's profiles go: the Pyroscope client for the configured
// protocol (connect or legacy ingest over HTTP/1.1, or gRPC) behind a
// PushQueue, which owns the sender thread, retries and the disk spool.
// Thread-safe as PushQueue is: queue() is fed by the export thread, read for
// metrics by the event loop; Stop from the thread that started it.
#ifndef GPUFLAME_AGENT_DELIVERY_H_
#define GPUFLAME_AGENT_DELIVERY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "agent/agent_config.h"
#include "exporters/pyroscope/push_queue.h"
#include "exporters/pyroscope/pyroscope_client.h"
#include "exporters/pyroscope/pyroscope_grpc_client.h"

namespace gpuflame::profiler {

class Delivery {
 public:
  // Builds the client and starts the queue's sender (replaying the spool).
  static absl::StatusOr<std::unique_ptr<Delivery>> Start(const AgentConfig& cfg);
  Delivery(const Delivery&) = delete;
  Delivery& operator=(const Delivery&) = delete;

  exporters::PushQueue& queue() { return *queue_; }
  // Stops the sender: undelivered requests move to the spool (if any).
  // queue() is gone afterwards.
  void Stop() { queue_.reset(); }

 private:
  explicit Delivery(const AgentConfig& cfg);

  exporters::PyroscopeClient client_;
  std::unique_ptr<exporters::PyroscopeGrpcClient> grpc_client_;
  // Last: its sender thread uses the clients above, so it goes first.
  std::unique_ptr<exporters::PushQueue> queue_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_DELIVERY_H_
