// `record`'s out-of-memory captures (profiler/forensics/): each said on the
// terminal as it ends, then written with the rest: one gpu_oom profile per
// capture (gpu_oom.pb.gz, gpu_oom.2.pb.gz, ...), its line in the HTML page,
// and summary.json's "oom".
#ifndef GPUFLAME_APP_RECORD_OOM_H_
#define GPUFLAME_APP_RECORD_OOM_H_

#include <string>
#include <vector>

#include "profiler/aggregate/profile.h"
#include "profiler/forensics/oom_capture.h"
#include "profiler/pipeline/session.h"

namespace gpuflame::profiler {

class RecordOom {
 public:
  explicit RecordOom(bool quiet) : quiet_(quiet) {}
  // Takes the captures that ended (each line said on stderr at once).
  void Collect(Session& session);
  // The end of the recording: every episode still open ends now.
  void Finish(Session& session);

  // After the frames' last refresh: one profile per capture, in order.
  std::vector<Profile> Profiles(const Session& session) const;
  // The summary lines, for the HTML page.
  std::vector<std::string> Lines(const Session& session) const;
  // summary.json's "oom" value.
  std::string Json(const Session& session) const;

 private:
  static std::string ProfileName(size_t index);
  bool quiet_;
  std::vector<OomCapture> captures_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_APP_RECORD_OOM_H_
