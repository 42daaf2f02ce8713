// Fuzz target for the timeline's I/O records (GF_EV_IO, bpf/io_calls.bpf.h):
// the decoder (profiler/pipeline/io_record.h) and the trace writer that
// names its spans (exporters/trace). The name after the header is the
// profiled process's bytes (openat's path as it passed it): any length the
// ring allows, any content, UTF-8 or not.
//
//   input := gf_event (72 bytes; kind forced to GF_EV_IO) + the body
//
// Checked: a decoded name ends before the body's NUL and is under
// GF_IO_NAME_MAX; the trace with that span (and a second event that shares
// its name) is JSON that parses, with the span in it.
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
#include "profiler/pipeline/io_record.h"
#include "profiler/timeline/timeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuflame;
  if (size < sizeof(gf_event)) return 0;
  gf_event ev;
  std::memcpy(&ev, data, sizeof(ev));
  ev.kind = GF_EV_IO;
  // Exactly its size on the heap: a read past the body is an ASan report.
  std::vector<uint8_t> body(data + sizeof(ev), data + size);
  const auto r = profiler::DecodeIo(ev, body);
  if (!r) return 0;
  FUZZ_CHECK(r->name.size() < GF_IO_NAME_MAX);
  FUZZ_CHECK(r->name.size() < body.size() && body[r->name.size()] == 0);
  FUZZ_CHECK(r->start_ns <= r->end_ns);

  profiler::StackTable stacks;
  profiler::FrameTable frames;
  profiler::timeline::Timeline tl(stacks, frames, {});
  for (int i = 0; i < 2; i++)
    tl.OnIo(static_cast<pid_t>(r->pid), r->tid, r->start_ns, r->end_ns, r->call, r->fd, r->bytes, r->result, r->arg,
            r->name, r->truncated);
  tl.Finish(r->end_ns);
  exporters::ChromeTraceStats stats;
  const std::string json = exporters::ChromeTraceJson(tl, {}, &stats);
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(!doc.is_discarded());
  size_t spans = 0;
  for (const auto& e : doc["traceEvents"])
    if (e.value("cat", "") == "io") spans++;
  FUZZ_CHECK(spans == 2);
  return 0;
}
