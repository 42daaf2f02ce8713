// An out-of-memory capture (oom_capture.h) as the user reads it: a profile
// (pprof, Pyroscope), one line for the terminal, the log and the HTML page,
// and its entry in summary.json.
#ifndef GPUFLAME_PROFILER_FORENSICS_OOM_REPORT_H_
#define GPUFLAME_PROFILER_FORENSICS_OOM_REPORT_H_

#include <string>

#include "profiler/aggregate/profile.h"
#include "profiler/aggregate/profile_builder.h"
#include "profiler/forensics/oom_capture.h"

namespace gpuflame::profiler {

// The profile's name: `record` writes gpu_oom.pb.gz (gpu_oom.2.pb.gz, ... for
// later ones), the agent pushes it as __name__="gpu_oom".
inline constexpr const char* kOomProfile = "gpu_oom";

// Sample types: the live set at the first failure at device level
// (gpu_inuse_objects, gpu_inuse_space) and at tensor level
// (torch_inuse_objects, torch_inuse_space), and the failing request
// (requested_space: one sample, its stack ending in a frame
// "[out of memory: N requested]", labelled oom_request=<API>). Comments
// hold the summary line and what it is made of.
Profile BuildOomProfile(const OomCapture& capture, StackSource source, const std::string& name = kOomProfile);

// "OOM in pid 42 (python3) at 2026-12-01 16:40:03.123 UTC: 40.00 MiB requested
// by cudaMalloc under `… › Trainer > step › grow`; live 38.00 MiB, of which
// 6.00 MiB cached and unused; GPU 0 has 43.00 MiB; largest holders: ...;
// PyTorch freed its cache and the retry succeeded"
std::string OomSummaryLine(const OomCapture& capture, const FrameTable& frames);

// summary.json's entry for it (a JSON object); |profile_file| is where
// `record` wrote its profile.
std::string OomJson(const OomCapture& capture, const FrameTable& frames, const std::string& profile_file);

// What the outcome is called in summary.json: retry_succeeded, raised,
// process_exited, unresolved.
const char* OomOutcomeName(OomOutcome outcome);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_FORENSICS_OOM_REPORT_H_
