#include "exporters/pprof/pprof_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <span>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "exporters/pprof/gzip.h"
#include "profile.pb.h"  // generated from exporters/proto/profile.proto

#include "base/scoped_fd.h"
#include "base/utf8.h"

namespace gpuflame::exporters {
namespace {

class StringTable {
 public:
  explicit StringTable(pprof::Profile& p) : p_(p) { Intern(""); }
  int64_t Intern(const std::string& s) {
    auto [it, inserted] = index_.try_emplace(s, static_cast<int64_t>(index_.size()));
    if (inserted) p_.add_string_table(base::ValidUtf8(s));  // proto3 strings must be UTF-8
    return it->second;
  }

 private:
  pprof::Profile& p_;
  absl::flat_hash_map<std::string, int64_t> index_;
};

}  // namespace

std::string SerializePprof(const profiler::Profile& profile) {
  pprof::Profile p;
  StringTable strings(p);
  for (const profiler::ValueType& vt : profile.sample_types) {
    auto* t = p.add_sample_type();
    t->set_type(strings.Intern(vt.type));
    t->set_unit(strings.Intern(vt.unit));
  }
  if (!profile.period_type.type.empty()) {
    p.mutable_period_type()->set_type(strings.Intern(profile.period_type.type));
    p.mutable_period_type()->set_unit(strings.Intern(profile.period_type.unit));
  }
  p.set_period(profile.period);
  p.set_time_nanos(profile.time_nanos);
  p.set_duration_nanos(profile.duration_nanos);
  if (!profile.default_sample_type.empty())
    p.set_default_sample_type(strings.Intern(profile.default_sample_type));
  for (const std::string& c : profile.comments) p.add_comment(strings.Intern(c));

  // Mappings per native module, functions per (name, file, start line),
  // locations per profile frame, or per run of frames inlined into one
  // another at one address (one Location with a Line each, innermost first,
  // as pprof wants); created lazily so only referenced ones exist.
  absl::flat_hash_map<std::pair<std::string, std::string>, uint64_t> mappings;
  absl::flat_hash_map<std::tuple<std::string, std::string, std::string, int64_t>, uint64_t> functions;
  std::vector<uint64_t> location_of(profile.frames.size(), 0);
  absl::flat_hash_map<std::vector<uint32_t>, uint64_t> inlined_location_of;

  auto function_for = [&](const symbolizer::Frame& f) -> uint64_t {
    auto fkey = std::make_tuple(f.name, f.system_name, f.file, f.start_line);
    auto [fit, fnew] = functions.try_emplace(fkey, functions.size() + 1);
    if (fnew) {
      auto* fn = p.add_function();
      fn->set_id(fit->second);
      fn->set_name(strings.Intern(f.name));
      // A Python or marker frame's system name is never its name: with one
      // equal to it, pprof takes `<module>` for a demangled C++ name and
      // strips its "template arguments", printing <unknown>.
      const bool native = f.kind == symbolizer::FrameKind::kNative;
      const std::string& system = f.system_name.empty() ? f.name : f.system_name;
      fn->set_system_name(strings.Intern(native || system != f.name ? system : std::string()));
      fn->set_filename(strings.Intern(f.file));
      fn->set_start_line(f.start_line);
    }
    return fit->second;
  };

  // |run|: frame indices, outermost first (the frames after the first were
  // inlined into the one before).
  auto new_location = [&](std::span<const uint32_t> run) -> uint64_t {
    const symbolizer::Frame& f = profile.frames[run[0]];
    auto* l = p.add_location();
    const auto loc = static_cast<uint64_t>(p.location_size());
    l->set_id(loc);
    pprof::Mapping* mapping = nullptr;
    if (f.kind == symbolizer::FrameKind::kNative && !f.file.empty()) {
      auto [mit, mnew] = mappings.try_emplace(std::make_pair(f.file, f.build_id), mappings.size() + 1);
      if (mnew) {
        auto* m = p.add_mapping();
        m->set_id(mit->second);
        m->set_filename(strings.Intern(f.file));
        m->set_build_id(strings.Intern(f.build_id));
        m->set_has_functions(true);
      }
      mapping = p.mutable_mapping(static_cast<int>(mit->second - 1));
      l->set_mapping_id(mit->second);
      l->set_address(f.address);
    }
    for (size_t i = run.size(); i-- > 0;) {
      const symbolizer::Frame& g = profile.frames[run[i]];
      auto* line = l->add_line();
      line->set_function_id(function_for(g));
      line->set_line(g.line);
      if (mapping && g.line > 0) mapping->set_has_line_numbers(true);
    }
    return loc;
  };

  auto location_for = [&](std::span<const uint32_t> run) -> uint64_t {
    if (run.size() == 1) {
      uint64_t& loc = location_of[run[0]];
      if (!loc) loc = new_location(run);
      return loc;
    }
    std::vector<uint32_t> key(run.begin(), run.end());
    auto it = inlined_location_of.find(key);
    if (it != inlined_location_of.end()) return it->second;
    const uint64_t loc = new_location(run);
    inlined_location_of.emplace(std::move(key), loc);
    return loc;
  };

  std::vector<std::pair<size_t, size_t>> runs;  // [begin, end) in a sample's frames
  for (const profiler::Sample& s : profile.samples) {
    auto* out = p.add_sample();
    // Frames are outermost first; a frame inlined into the previous one (the
    // same native address in the same module) joins its run.
    runs.clear();
    for (size_t i = 0; i < s.frames.size(); i++) {
      const symbolizer::Frame& f = profile.frames[s.frames[i]];
      const symbolizer::Frame* prev = i ? &profile.frames[s.frames[i - 1]] : nullptr;
      if (prev && f.inlined && prev->kind == symbolizer::FrameKind::kNative && prev->address == f.address &&
          prev->file == f.file)
        runs.back().second = i + 1;
      else
        runs.push_back({i, i + 1});
    }
    for (size_t r = runs.size(); r-- > 0;)
      out->add_location_id(location_for(std::span<const uint32_t>(s.frames).subspan(
          runs[r].first, runs[r].second - runs[r].first)));
    for (int64_t v : s.values) out->add_value(v);
    for (const profiler::Label& lb : s.labels) {
      auto* l = out->add_label();
      l->set_key(strings.Intern(lb.key));
      if (!lb.str.empty()) {
        l->set_str(strings.Intern(lb.str));
      } else {
        l->set_num(lb.num);
      }
    }
  }
  return p.SerializeAsString();
}

absl::StatusOr<std::string> EncodePprofGz(const profiler::Profile& profile) {
  return Gzip(SerializePprof(profile));
}

absl::Status WriteFile(const std::string& path, std::string_view bytes) {
  // Write then rename: a reader never sees half a profile.
  std::string tmp = path + ".tmp";
  base::ScopedFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n <= 0) {
      int err = errno;
      fd.reset();
      unlink(tmp.c_str());
      return absl::InternalError(absl::StrCat("writing ", path, ": ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  // Checked: on NFS or a full quota, close can be the first to report lost data.
  if (fd.Close() != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("writing ", path, ": ", std::strerror(err)));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0)
    return absl::InternalError(absl::StrCat("renaming ", tmp, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

}  // namespace gpuflame::exporters
