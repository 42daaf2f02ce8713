#include "agent/delivery.h"

namespace gpuflame::profiler {

Delivery::Delivery(const AgentConfig& cfg) : client_(cfg.pyroscope) {
  if (cfg.protocol == "grpc") grpc_client_ = std::make_unique<exporters::PyroscopeGrpcClient>(cfg.pyroscope);
  if (cfg.protocol == "ingest") client_.set_legacy_ingest(true);
}

absl::StatusOr<std::unique_ptr<Delivery>> Delivery::Start(const AgentConfig& cfg) {
  std::unique_ptr<Delivery> d(new Delivery(cfg));
  exporters::PushQueueOptions opt;
  opt.max_requests = cfg.queue_requests;
  opt.spool_dir = cfg.spool_dir;
  opt.spool_max_bytes = cfg.spool_max_bytes;
  Delivery* raw = d.get();  // outlives the queue, which it owns
  auto q = exporters::PushQueue::Create(
      [raw](const std::string& body) -> exporters::PushOutcome {
        if (raw->grpc_client_) return raw->grpc_client_->PushEncoded(body);
        return raw->client_.PushEncoded(body);
      },
      opt);
  if (!q.ok()) return q.status();
  d->queue_ = std::move(*q);
  return d;
}

}  // namespace gpuflame::profiler
