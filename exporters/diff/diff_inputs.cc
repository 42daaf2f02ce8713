#include "exporters/diff/diff_inputs.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "exporters/diff/pprof_diff.h"
#include "exporters/pprof/stored_profile.h"
#include "exporters/pyroscope/spool.h"
#include "google/protobuf/stubs/logging.h"
#include "push.pb.h"  // generated from exporters/proto/push.proto

namespace gpuflame::exporters {
namespace {

constexpr const char* kReader = "diff";

// Limits shared by one side's files: the profiles parsed so far, the bytes
// inflated so far.
struct Budget {
  size_t profiles = kMaxSideProfiles;
  size_t bytes = kMaxSideBytes;
  uint64_t elements = kMaxSideElements;
};

absl::Status TakeFromBudget(Budget& budget, size_t bytes, const std::string& origin) {
  if (budget.profiles == 0)
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s: more than the %d profiles diff reads for one side", origin, kMaxSideProfiles));
  if (bytes > budget.bytes)
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s: more than the %d MiB of profiles diff reads for one side", origin, kMaxSideBytes >> 20));
  budget.profiles--;
  budget.bytes -= bytes;
  return absl::OkStatus();
}

// One stored pprof (gzipped or not), parsed and checked.
absl::StatusOr<InputProfile> ParseOne(std::string bytes, const std::string& origin, Budget& budget) {
  absl::StatusOr<std::string> raw = InflateStoredProfile(std::move(bytes), origin, kReader);
  if (!raw.ok()) return raw.status();
  if (auto s = TakeFromBudget(budget, raw->size(), origin); !s.ok()) return s;
  InputProfile in;
  in.origin = origin;
  if (raw->empty()) return absl::InvalidArgumentError(absl::StrCat(origin, ": empty, not a profile"));
  absl::StatusOr<uint64_t> elements = CountPprofElements(*raw);
  if (!elements.ok()) return absl::InvalidArgumentError(absl::StrCat(origin, ": not a pprof profile (profile.proto)"));
  if (*elements > budget.elements)
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s: more than the %d samples, locations, strings and the like diff reads for one side", origin,
                        kMaxSideElements));
  budget.elements -= *elements;
  // Silenced: protobuf logs a line of its own for a string that is not
  // UTF-8, and the user gets one line, ours.
  google::protobuf::LogSilencer quiet;
  if (!in.profile.ParseFromString(*raw))
    return absl::InvalidArgumentError(absl::StrCat(origin, ": not a pprof profile (profile.proto)"));
  if (auto s = ValidatePprof(in.profile); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat(origin, ": not a valid pprof profile: ", s.message()));
  return in;
}

absl::StatusOr<std::vector<InputProfile>> FromSpool(const std::string& bytes, const std::string& origin,
                                                    Budget& budget) {
  absl::StatusOr<SpooledRequest> spooled = DecodeSpoolFile(bytes);
  if (!spooled.ok()) return absl::InvalidArgumentError(absl::StrCat(origin, ": ", spooled.status().message()));
  if (auto s = TakeFromBudget(budget, spooled->body.size(), origin); !s.ok()) return s;
  push::v1::PushRequest request;
  if (!request.ParseFromString(spooled->body))
    return absl::InvalidArgumentError(absl::StrCat(origin, ": the spooled request is not a push.v1.PushRequest"));
  std::string().swap(spooled->body);
  std::vector<InputProfile> out;
  for (const auto& series : request.series()) {
    std::string kind;
    std::vector<std::pair<std::string, std::string>> labels;
    for (const auto& l : series.labels()) {
      if (l.name() == "__name__") kind = l.value();
      else labels.emplace_back(l.name(), l.value());
    }
    for (int i = 0; i < series.samples_size(); i++) {
      // gpuflame pushes one profile per series; another sample of one is
      // told apart by its position.
      auto sample_labels = labels;
      if (series.samples_size() > 1) sample_labels.emplace_back("sample", absl::StrCat(i + 1));
      InputProfile named;
      named.kind = kind;
      named.labels = std::move(sample_labels);
      const std::string where = absl::StrCat(origin, ": ", named.DisplayName());
      absl::StatusOr<InputProfile> parsed = ParseOne(series.samples(i).raw_profile(), where, budget);
      if (!parsed.ok()) return parsed.status();
      parsed->kind = std::move(named.kind);
      parsed->labels = std::move(named.labels);
      out.push_back(std::move(*parsed));
    }
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(origin, ": a spool file without profiles"));
  return out;
}

absl::StatusOr<std::vector<InputProfile>> FromBytes(std::string bytes, const std::string& origin,
                                                    const std::string& kind, Budget& budget) {
  if (IsSpoolFile(bytes)) return FromSpool(bytes, origin, budget);
  absl::StatusOr<InputProfile> one = ParseOne(std::move(bytes), origin, budget);
  if (!one.ok()) return one.status();
  one->kind = kind;
  std::vector<InputProfile> out;
  out.push_back(std::move(*one));
  return out;
}

// "torch_memory" for "torch_memory.pb.gz"; the name as it is for others.
std::string KindOf(const std::string& file_name) {
  for (const char* ext : {".pb.gz", ".pb", ".gz"})
    if (file_name.size() > std::string_view(ext).size() && file_name.ends_with(ext))
      return file_name.substr(0, file_name.size() - std::string_view(ext).size());
  return file_name;
}

std::string Key(const InputProfile& p) { return p.DisplayName(); }

}  // namespace

std::string InputProfile::DisplayName() const {
  if (labels.empty()) return kind;
  std::string out = absl::StrCat(kind, "{");
  for (size_t i = 0; i < labels.size(); i++)
    absl::StrAppend(&out, i ? ", " : "", labels[i].first, "=", labels[i].second);
  return out + "}";
}

absl::StatusOr<std::vector<InputProfile>> ProfilesFromBytes(std::string bytes, const std::string& origin,
                                                            const std::string& kind) {
  Budget budget;
  return FromBytes(std::move(bytes), origin, kind, budget);
}

absl::StatusOr<DiffSide> LoadDiffSide(const std::string& path) {
  DiffSide side;
  side.path = path;
  Budget budget;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    return absl::NotFoundError(absl::StrCat("no such file or directory: ", path));
  if (!std::filesystem::is_directory(status)) {
    absl::StatusOr<std::string> bytes = ReadStoredFile(path, kReader);
    if (!bytes.ok()) return bytes.status();
    auto profiles = FromBytes(std::move(*bytes), path, KindOf(std::filesystem::path(path).filename()), budget);
    if (!profiles.ok()) return profiles.status();
    side.profiles = std::move(*profiles);
    return side;
  }
  // By name, so that the output's order does not depend on the file system.
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename();
    if (name.ends_with(".diff.pb.gz")) continue;
    if (!name.ends_with(".pb.gz") && !name.ends_with(".pb")) continue;
    std::error_code type_ec;
    if (!entry.is_regular_file(type_ec)) continue;
    names.insert(name);
  }
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot list ", path, ": ", ec.message()));
  for (const std::string& name : names) {
    const std::string file = (std::filesystem::path(path) / name).string();
    absl::StatusOr<std::string> bytes = ReadStoredFile(file, kReader);
    if (!bytes.ok()) return bytes.status();
    auto profiles = FromBytes(std::move(*bytes), file, KindOf(name), budget);
    if (!profiles.ok()) return profiles.status();
    for (InputProfile& p : *profiles) side.profiles.push_back(std::move(p));
  }
  if (side.profiles.empty())
    return absl::NotFoundError(absl::StrCat(
        path, " holds no profiles (*.pb.gz, *.pb): name a record output directory, a profile, or a spool file"));
  return side;
}

Pairing PairProfiles(const DiffSide& base, const DiffSide& neu) {
  Pairing out;
  if (base.profiles.size() == 1 && neu.profiles.size() == 1) {
    out.pairs.push_back({&base.profiles[0], &neu.profiles[0], neu.profiles[0].DisplayName()});
    return out;
  }
  std::vector<bool> base_used(base.profiles.size());
  std::vector<std::optional<size_t>> base_of(neu.profiles.size());  // NEW's index -> BASE's
  std::map<std::string, size_t> base_by_key;
  for (size_t i = 0; i < base.profiles.size(); i++) base_by_key.try_emplace(Key(base.profiles[i]), i);
  for (size_t j = 0; j < neu.profiles.size(); j++) {
    auto it = base_by_key.find(Key(neu.profiles[j]));
    if (it == base_by_key.end() || base_used[it->second]) continue;
    base_used[it->second] = true;
    base_of[j] = it->second;
  }
  // By kind alone, where that leaves no choice.
  std::map<std::string, std::vector<size_t>> base_left, new_left;
  for (size_t i = 0; i < base.profiles.size(); i++)
    if (!base_used[i]) base_left[base.profiles[i].kind].push_back(i);
  for (size_t j = 0; j < neu.profiles.size(); j++)
    if (!base_of[j]) new_left[neu.profiles[j].kind].push_back(j);
  for (const auto& [kind, js] : new_left) {
    auto it = base_left.find(kind);
    if (js.size() != 1 || it == base_left.end() || it->second.size() != 1) continue;
    base_used[it->second[0]] = true;
    base_of[js[0]] = it->second[0];
  }
  // In NEW's order.
  for (size_t j = 0; j < neu.profiles.size(); j++) {
    if (base_of[j]) out.pairs.push_back({&base.profiles[*base_of[j]], &neu.profiles[j], neu.profiles[j].DisplayName()});
    else out.only_in_new.push_back(neu.profiles[j].origin);
  }
  for (size_t i = 0; i < base.profiles.size(); i++)
    if (!base_used[i]) out.only_in_base.push_back(base.profiles[i].origin);
  return out;
}

}  // namespace gpuflame::exporters
