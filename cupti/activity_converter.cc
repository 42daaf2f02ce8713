#include "cupti/activity_converter.h"

namespace gpuflame::cupti {
namespace {

// The fields every charted CUPTI record has, under the same names.
template <typename Record>
void CopyCommon(const Record& r, gf_kernel_record& out) {
  out.start_ns = r.start;
  out.end_ns = r.end;
  out.correlation = r.correlationId;
  out.device = r.deviceId;
  out.stream = r.streamId;
  out.graph_id = r.graphId;
}

}  // namespace

uint32_t ActivityConverter::NameId(const char* name, ActivitySink& sink) {
  std::string key = name ? name : "[unnamed kernel]";
  if (ids_.size() >= kMaxNames && !ids_.contains(key)) key = "[kernel names overflow]";
  auto [it, inserted] = ids_.try_emplace(key, Name{static_cast<uint32_t>(ids_.size() + 1), generation_});
  if (inserted || it->second.said_in != generation_) {
    sink.Name(it->second.id, it->first.c_str());
    it->second.said_in = generation_;
  }
  return it->second.id;
}

void ActivityConverter::SayNamesAgain() {
  std::lock_guard<std::mutex> lock(mu_);
  generation_++;
}

size_t ActivityConverter::names() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ids_.size();
}

ConvertStats ActivityConverter::Convert(uint8_t* buffer, size_t valid, NextRecordFn next, ActivitySink& sink,
                                        const ActivityWindows* windows) {
  std::lock_guard<std::mutex> lock(mu_);
  ConvertStats st;
  gf_kernel_record batch[GF_KERNEL_BATCH_MAX];
  size_t n = 0;
  auto flush = [&] {
    if (n == 0) return;
    sink.Batch(batch, n);
    st.batches++;
    n = 0;
  };
  CUpti_Activity* rec = nullptr;
  while (next(buffer, valid, &rec) == CUPTI_SUCCESS) {
    gf_kernel_record out{};
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        CopyCommon(*k, out);
        out.kind = GF_GPU_KERNEL;
        out.name_id = NameId(k->name, sink);  // announced before the batch that uses it
        st.kernels++;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        CopyCommon(*m, out);
        out.kind = GF_GPU_MEMCPY;
        out.copy_kind = m->copyKind;
        out.bytes = m->bytes;
        st.memcpys++;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        CopyCommon(*m, out);
        out.kind = GF_GPU_MEMSET;
        out.bytes = m->bytes;
        st.memsets++;
        break;
      }
      case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        // A CPU thread waiting in a synchronise call. Stream-wait-event is
        // the GPU waiting, not the CPU: left out.
        const auto* y = reinterpret_cast<const CUpti_ActivitySynchronization2*>(rec);
        if (y->type != CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE &&
            y->type != CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE &&
            y->type != CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE) {
          st.other++;
          continue;
        }
        out.start_ns = y->start;
        out.end_ns = y->end;
        out.correlation = y->correlationId;
        out.device = GF_DEVICE_UNKNOWN;
        out.stream = y->streamId;
        out.kind = GF_GPU_SYNC;
        out.copy_kind = static_cast<uint8_t>(y->type);
        st.syncs++;
        break;
      }
      case CUPTI_ACTIVITY_KIND_OVERHEAD: {
        const auto* o = reinterpret_cast<const CUpti_ActivityOverhead3*>(rec);
        if (o->end > o->start) st.overhead_ns += o->end - o->start;
        continue;
      }
      default: st.other++; continue;
    }
    out.weight = windows ? windows->WeightAt(out.start_ns) : 1;
    batch[n++] = out;
    if (n == GF_KERNEL_BATCH_MAX) flush();
  }
  flush();
  return st;
}

}  // namespace gpuflame::cupti
