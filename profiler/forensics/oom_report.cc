#include "profiler/forensics/oom_report.h"

#include <time.h>

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/human_units.h"
#include "base/json_string.h"
#include "bpf/gpuflame_abi.h"
#include "profiler/forensics/oom_episodes.h"
#include "profiler/forensics/stack_names.h"
#include "profiler/probes/probe_table.h"

namespace gpuflame::profiler {
namespace {

using base::HumanBytes;

constexpr size_t kLineHolders = 3;  // holders named in it
constexpr size_t kJsonHolders = 5;  // per level in summary.json

int64_t Bytes(uint64_t b) { return static_cast<int64_t>(std::min<uint64_t>(b, INT64_MAX)); }

// "2026-12-01 16:40:03.123 UTC"
std::string WallTime(int64_t wall_ns) {
  const time_t s = static_cast<time_t>(wall_ns / 1'000'000'000);
  tm t{};
  gmtime_r(&s, &t);
  char buf[64];
  strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &t);
  return absl::StrFormat("%s.%03d UTC", buf, static_cast<int>(wall_ns / 1'000'000 % 1000));
}

std::string ApiOf(const OomCapture& c) {
  return c.request ? std::string(ApiName(c.request->api)) : std::string(ApiName(GF_API_TORCH_REPORT));
}

const std::vector<FrameId>* RequestFrames(const OomCapture& c) {
  if (c.request) return &c.request->frames;
  if (c.torch) return &c.torch->frames;
  return nullptr;
}

std::optional<int64_t> CachedUnused(const OomCapture& c) {
  if (!c.totals || c.totals->reserved < c.totals->allocated) return std::nullopt;
  return Bytes(c.totals->reserved - c.totals->allocated);
}

std::string Outcome(const OomCapture& c) {
  switch (c.outcome) {
    case OomOutcome::kRetrySucceeded:
      return c.context.tensors_expected ? "PyTorch freed its cache and the retry succeeded"
                                        : "a retry on the same thread succeeded";
    case OomOutcome::kRaised:
      return absl::StrCat("the process raised OutOfMemoryError (PyTorch: ", HumanBytes(Bytes(c.torch->allocated)),
                          " allocated, ", HumanBytes(Bytes(c.torch->reserved)), " reserved after freeing its cache)");
    case OomOutcome::kProcessExited: return "the process exited before any retry succeeded";
    case OomOutcome::kUnresolved: break;
  }
  return absl::StrCat("no retry succeeded and PyTorch reported nothing within ", OomEpisodes::kSettleNs / 1'000'000'000,
                      " s");
}

// The level whose holders say most: tensors where PyTorch is observed.
const OomLiveSet& HolderLevel(const OomCapture& c) {
  return c.tensors && !c.tensors->holders.empty() ? *c.tensors : c.device;
}

std::string DeviceText(const OomCapture& c) {
  const OomDeviceMemory& d = c.context.device;
  if (d.gpus.empty()) return absl::StrCat("device memory unknown (", d.unknown.empty() ? "not read" : d.unknown, ")");
  // Its free memory is not said here: it is read once the failure's record
  // is handled, by when PyTorch may have freed its cache.
  std::string out;
  for (const OomGpu& g : d.gpus)
    absl::StrAppend(&out, out.empty() ? "" : ", ", "GPU ", g.index, " has ", HumanBytes(Bytes(g.total)));
  return out;
}

std::string HoldersJson(const OomLiveSet& set, const FrameTable& frames) {
  std::string out = "[";
  for (size_t i = 0; i < set.holders.size() && i < kJsonHolders; i++) {
    const OomHolder& h = set.holders[i];
    absl::StrAppend(&out, i ? ", " : "", "{\"bytes\": ", h.bytes, ", \"objects\": ", h.objects,
                    ", \"stack\": ", base::JsonString(FoldedStack(h.frames, frames)), "}");
  }
  return out + "]";
}

template <typename T>
std::string OrNull(const std::optional<T>& v) {
  return v ? absl::StrCat(*v) : "null";
}

}  // namespace

const char* OomOutcomeName(OomOutcome outcome) {
  switch (outcome) {
    case OomOutcome::kRetrySucceeded: return "retry_succeeded";
    case OomOutcome::kRaised: return "raised";
    case OomOutcome::kProcessExited: return "process_exited";
    case OomOutcome::kUnresolved: return "unresolved";
  }
  return "unresolved";
}

std::string OomSummaryLine(const OomCapture& c, const FrameTable& frames) {
  std::string who = c.context.process.empty() ? absl::StrCat("pid ", c.pid)
                                              : absl::StrCat("pid ", c.pid, " (", Printable(c.context.process), ")");
  const uint64_t bytes = c.requested_bytes();
  std::string request = bytes ? absl::StrCat(HumanBytes(Bytes(bytes)), " requested") : "a request of unknown size";
  absl::StrAppend(&request, c.request ? absl::StrCat(" by ", ApiOf(c))
                                      : " from PyTorch's caching allocator (no device call failed)");
  if (const std::vector<FrameId>* stack = RequestFrames(c); stack && !stack->empty())
    absl::StrAppend(&request, " under `", ShortStack(*stack, frames), "`");
  std::string live = absl::StrCat("live ", HumanBytes(c.device.bytes));
  if (auto cached = CachedUnused(c)) absl::StrAppend(&live, ", of which ", HumanBytes(*cached), " cached and unused");
  if (c.tensors)
    absl::StrAppend(&live, " (tensors ", c.tensors->estimated ? "about " : "", HumanBytes(c.tensors->bytes),
                    c.tensors->estimated ? ", from sampled allocations)" : ")");
  std::string holders;
  const OomLiveSet& level = HolderLevel(c);
  for (size_t i = 0; i < level.holders.size() && i < kLineHolders; i++)
    absl::StrAppend(&holders, i ? ", " : "; largest holders: ", HumanBytes(level.holders[i].bytes), " `",
                    ShortStack(level.holders[i].frames, frames), "`");
  return absl::StrCat("OOM in ", who, " at ", WallTime(c.wall_ns), ": ", request, "; ", live, "; ", DeviceText(c),
                      holders, "; ", Outcome(c));
}

Profile BuildOomProfile(const OomCapture& c, StackSource source, const std::string& name) {
  Profile p;
  p.name = name;
  p.sample_types = {{"gpu_inuse_objects", "count"},
                    {"gpu_inuse_space", "bytes"},
                    {"torch_inuse_objects", "count"},
                    {"torch_inuse_space", "bytes"},
                    {"requested_space", "bytes"}};
  p.default_sample_type = "gpu_inuse_space";
  p.period_type = {"space", "bytes"};
  p.period = 1;  // every allocation of the live set: no sampling
  p.time_nanos = c.wall_ns;
  const absl::flat_hash_map<pid_t, std::string> comm = {{c.pid, c.context.process}};
  SampleMaker make(source, comm, p);
  auto add = [&](const std::vector<FrameId>& frames, uint8_t domain, std::vector<int64_t> values) -> Sample& {
    p.samples.push_back(make.Make(StackInfo{c.pid, domain, frames}));
    p.samples.back().values = std::move(values);
    return p.samples.back();
  };
  for (const OomHolder& h : c.device.holders) add(h.frames, GF_DOMAIN_GPU, {h.objects, h.bytes, 0, 0, 0});
  if (c.tensors)
    for (const OomHolder& h : c.tensors->holders) add(h.frames, GF_DOMAIN_TORCH, {0, 0, h.objects, h.bytes, 0});
  // The failing request: its stack, then a frame of its own.
  static const std::vector<FrameId> kNoFrames;
  const std::vector<FrameId>* stack = RequestFrames(c);
  Sample& request = add(stack ? *stack : kNoFrames, c.request ? GF_DOMAIN_GPU : GF_DOMAIN_TORCH,
                        {0, 0, 0, 0, Bytes(c.requested_bytes())});
  symbolizer::Frame marker;
  marker.kind = symbolizer::FrameKind::kMarker;
  marker.name = c.requested_bytes()
                    ? absl::StrCat("[out of memory: ", HumanBytes(Bytes(c.requested_bytes())), " requested]")
                    : std::string("[out of memory: request of unknown size]");
  request.frames.push_back(static_cast<uint32_t>(p.frames.size()));
  p.frames.push_back(std::move(marker));
  request.labels.push_back({"oom_request", ApiOf(c), 0});
  p.comments.push_back(absl::StrCat("gpuflame: ", OomSummaryLine(c, source.frames)));
  p.comments.push_back(absl::StrCat("gpuflame: outcome ", OomOutcomeName(c.outcome), "; ", c.failed_calls,
                                    " device allocation calls failed in the episode; live sets as at the first "
                                    "failure (gpu_* device level, torch_* tensor level)"));
  return p;
}

std::string OomJson(const OomCapture& c, const FrameTable& frames, const std::string& profile_file) {
  const std::vector<FrameId>* stack = RequestFrames(c);
  std::string out = absl::StrCat(
      "{\"pid\": ", c.pid, ", \"process\": ", base::JsonString(c.context.process), ", \"episode\": ", c.number,
      ", \"time\": ", base::JsonString(WallTime(c.wall_ns)), ", \"time_unix_ns\": ", c.wall_ns,
      ", \"api\": ", base::JsonString(ApiOf(c)), ", \"requested_bytes\": ", c.requested_bytes(),
      ", \"error\": ", c.request ? absl::StrCat(c.request->error) : "null", ", \"failed_calls\": ", c.failed_calls,
      ", \"stack\": ", stack ? base::JsonString(FoldedStack(*stack, frames)) : "null", ", \"outcome\": \"",
      OomOutcomeName(c.outcome), "\"");
  const uint64_t first = c.request ? c.request->ts_ns : c.torch ? c.torch->ts_ns : 0;
  absl::StrAppend(&out, ", \"outcome_after_ns\": ",
                  c.outcome_ns >= first && c.outcome_ns != 0 ? absl::StrCat(c.outcome_ns - first) : "null");
  if (c.torch)
    absl::StrAppend(&out, ", \"torch_report\": {\"bytes\": ", c.torch->bytes, ", \"device\": ", c.torch->device,
                    ", \"allocated_bytes\": ", c.torch->allocated, ", \"reserved_bytes\": ", c.torch->reserved,
                    ", \"stack\": ", base::JsonString(FoldedStack(c.torch->frames, frames)), "}");
  else out += ", \"torch_report\": null";
  absl::StrAppend(&out, ", \"device_live_bytes\": ", c.device.bytes, ", \"device_live_objects\": ", c.device.objects,
                  ", \"tensor_live_bytes\": ", c.tensors ? absl::StrCat(c.tensors->bytes) : "null",
                  ", \"tensor_live_objects\": ", c.tensors ? absl::StrCat(c.tensors->objects) : "null",
                  ", \"tensor_live_estimated\": ", c.tensors && c.tensors->estimated ? "true" : "false");
  absl::StrAppend(&out, ", \"allocator_allocated_bytes\": ", c.totals ? absl::StrCat(c.totals->allocated) : "null",
                  ", \"allocator_reserved_bytes\": ", c.totals ? absl::StrCat(c.totals->reserved) : "null",
                  ", \"cached_unused_bytes\": ", OrNull(CachedUnused(c)), ", \"gpus\": [");
  for (size_t i = 0; i < c.context.device.gpus.size(); i++) {
    const OomGpu& g = c.context.device.gpus[i];
    absl::StrAppend(&out, i ? ", " : "", "{\"index\": ", g.index, ", \"total_bytes\": ", g.total,
                    ", \"free_bytes_when_read\": ", g.free, "}");
  }
  absl::StrAppend(&out, "], \"gpu_memory_unknown\": ",
                  c.context.device.gpus.empty() ? base::JsonString(c.context.device.unknown) : "null",
                  ", \"largest_holders\": {\"device\": ", HoldersJson(c.device, frames),
                  ", \"tensor\": ", c.tensors ? HoldersJson(*c.tensors, frames) : "null",
                  "}, \"profile\": ", base::JsonString(profile_file),
                  ", \"summary\": ", base::JsonString(OomSummaryLine(c, frames)), "}");
  return out;
}

}  // namespace gpuflame::profiler
