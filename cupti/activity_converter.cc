#include "cupti/activity_converter.h"

#include "bpf/nccl_kernel_name.h"

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

// A driver API record (CUPTI_ACTIVITY_KIND_DRIVER) as the launch route's
// gf_api_record, its times moved by |cupti_minus_mono|. False: not one to
// send (no thread ID: cuptiSetThreadIdType did not take).
bool ToLaunchRecord(const CUpti_ActivityAPI& a, int64_t cupti_minus_mono, gf_api_record& out) {
  if (a.threadId == 0) return false;
  // Modulo 2^64: CUPTI's clock may be anything, its records too.
  auto mono = [&](uint64_t t) { return t - static_cast<uint64_t>(cupti_minus_mono); };
  out = {.start_ns = mono(a.start),
         .end_ns = mono(a.end),
         .correlation = a.correlationId,
         .tid = a.threadId,
         .cbid = static_cast<uint16_t>(a.cbid),
         .domain = 1,  // CUPTI_CB_DOMAIN_DRIVER_API
         .pad = 0,
         .result = a.returnValue};
  return true;
}

}  // namespace

void ActivityConverter::SetClock(uint64_t cupti_ns, uint64_t mono_ns) {
  const int64_t d = static_cast<int64_t>(cupti_ns - mono_ns);
  cupti_minus_mono_.store(d == 0 ? 1 : d, std::memory_order_relaxed);  // 0 means none
}

const ActivityConverter::Name& ActivityConverter::NameOf(const char* name, ActivitySink& sink) {
  std::string key = name ? name : "[unnamed kernel]";
  if (ids_.size() >= kMaxNames && !ids_.contains(key)) key = "[kernel names overflow]";
  auto [it, inserted] = ids_.try_emplace(key, Name{static_cast<uint32_t>(ids_.size() + 1), generation_, false});
  if (inserted) it->second.nccl = IsNcclKernelName(it->first.c_str(), it->first.size());
  if (inserted || it->second.said_in != generation_) {
    sink.Name(it->second.id, it->first.c_str());
    it->second.said_in = generation_;
  }
  return it->second;
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
  gf_api_record launches[GF_API_BATCH_MAX];
  size_t m = 0;
  auto flush_launches = [&] {
    if (m) sink.LaunchRecords(launches, m);
    m = 0;
  };
  const int64_t cupti_minus_mono = cupti_minus_mono_.load(std::memory_order_relaxed);
  const bool route = route_.load(std::memory_order_relaxed) && cupti_minus_mono != 0;
  CUpti_Activity* rec = nullptr;
  // The launch route's records go out first, in a pass of their own: the
  // agent gives their stacks the calls' correlation IDs, which the kernels'
  // records of this buffer (written before them, as often as not) then find.
  // Only where the route has been used, and with a clock pair.
  if (route) {
    while (next(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec->kind != CUPTI_ACTIVITY_KIND_DRIVER) continue;
      // Only the launch route's calls are enabled (IsRouteCall).
      if (!ToLaunchRecord(*reinterpret_cast<const CUpti_ActivityAPI*>(rec), cupti_minus_mono, launches[m])) {
        st.launch_records_unconverted++;
        continue;
      }
      st.launch_records++;
      if (++m == GF_API_BATCH_MAX) flush_launches();
    }
    flush_launches();
    rec = nullptr;  // the next walk starts again from the buffer's first record
  }
  while (next(buffer, valid, &rec) == CUPTI_SUCCESS) {
    gf_kernel_record out{};
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        CopyCommon(*k, out);
        out.kind = GF_GPU_KERNEL;
        const Name& name = NameOf(k->name, sink);  // announced before the batch that uses it
        out.name_id = name.id;
        st.kernels++;
        st.nccl_kernels += name.nccl;
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
      case CUPTI_ACTIVITY_KIND_DRIVER:
        // Sent in the first pass; without it, not on the agent's clock.
        if (!route) st.launch_records_unconverted++;
        continue;
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
