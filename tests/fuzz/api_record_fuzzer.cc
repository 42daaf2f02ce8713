// Fuzz target for the timeline's CUDA API records (GF_EV_API_BATCH,
// gf_api_record): the injection library writes them inside the workload,
// so the workload controls every byte (count, times, thread IDs, callback
// IDs, domains). Through the decoder (EventProcessor::OnRecord), the
// timeline, and the trace writer that names their spans and draws their
// arrows.
//
//   input := gf_event (72 bytes; kind forced to GF_EV_API_BATCH, pid fixed)
//            + the body (any length: the decoder must refuse a size that
//            does not match) + the rest, split as a GPU activity batch with
//            the same correlation IDs (so arrows are drawn)
//
// Checked: a batch is taken only when its size matches its count, and then
// whole; the trace is JSON that parses, with one span per record taken.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bpf/gpuflame_abi.h"
#include "exporters/trace/chrome_trace.h"
#include "fuzz_check.h"
#include "profiler/pipeline/event_processor.h"
#include "profiler/resolve/stack_resolver.h"
#include "profiler/timeline/timeline.h"
#include "symbolizer/elf_cache.h"
#include "symbolizer/native_symbolizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuflame;
  if (size < sizeof(gf_event) + 2) return 0;
  // The first two bytes: how much of the rest is the API batch's body.
  const size_t body_len = std::min<size_t>(size - sizeof(gf_event) - 2, data[0] | data[1] << 8);
  data += 2;
  size -= 2;
  gf_event ev;
  std::memcpy(&ev, data, sizeof(ev));
  ev.kind = GF_EV_API_BATCH;
  ev.pid = 4242;  // no such process here: nothing is read from /proc for it
  ev.flags = 0;
  std::vector<uint8_t> record(sizeof(ev) + body_len);  // exactly its size: a read past it is an ASan report
  std::memcpy(record.data(), &ev, sizeof(ev));
  std::memcpy(record.data() + sizeof(ev), data + sizeof(ev), body_len);

  symbolizer::ElfCache elves;
  symbolizer::NativeSymbolizer native(elves);
  profiler::StackResolver resolver(nullptr, native, {});
  profiler::EventProcessor events(nullptr, resolver);
  profiler::timeline::Timeline tl(events.stacks(), events.frames(), {});
  events.SetTimeline(&tl);
  // The library's ABI said first, as it does before any record.
  gf_event status{};
  status.kind = GF_EV_CUPTI_STATUS;
  status.pid = ev.pid;
  status.tid = ev.pid;
  status.arg0 = GF_CUPTI_ACTIVE;
  status.arg1 = GF_ABI_VERSION;
  events.OnRecord(std::span(reinterpret_cast<const uint8_t*>(&status), sizeof(status)));
  const uint64_t before = events.stats().malformed;
  events.OnRecord(record);
  const bool taken = events.stats().malformed == before;
  FUZZ_CHECK(taken == (ev.size <= GF_API_BATCH_MAX && body_len == ev.size * sizeof(gf_api_record)));

  // GPU work with whatever correlation IDs the rest of the input names.
  const size_t rest = size - sizeof(gf_event) - body_len;
  const size_t n = std::min<size_t>(rest / sizeof(gf_kernel_record), GF_KERNEL_BATCH_MAX);
  if (n) {
    gf_event kb{};
    kb.kind = GF_EV_KERNEL_BATCH;
    kb.pid = ev.pid;
    kb.size = n;
    std::vector<uint8_t> batch(sizeof(kb) + n * sizeof(gf_kernel_record));
    std::memcpy(batch.data(), &kb, sizeof(kb));
    std::memcpy(batch.data() + sizeof(kb), data + sizeof(gf_event) + body_len, n * sizeof(gf_kernel_record));
    events.OnRecord(batch);
  }
  tl.OnClock(ev.pid, 1'000, 999, 1'001);
  tl.Finish(UINT64_MAX / 2);
  exporters::ChromeTraceStats stats;
  const std::string json = exporters::ChromeTraceJson(tl, {}, &stats);
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(!doc.is_discarded());
  size_t spans = 0;
  for (const auto& e : doc["traceEvents"])
    if (e.value("cat", "") == "cuda") spans++;
  FUZZ_CHECK(spans == (taken ? ev.size : 0));
  return 0;
}
