#include "exporters/diff/pprof_diff.h"

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/saturating.h"

namespace gpuflame::exporters {
namespace {

bool InTable(const pprof::Profile& p, int64_t index) { return index >= 0 && index < p.string_table_size(); }

const std::string& Str(const pprof::Profile& p, int64_t index) {
  static const std::string kEmpty;
  return InTable(p, index) ? p.string_table(static_cast<int>(index)) : kEmpty;
}

std::string TypeName(const pprof::Profile& p, const pprof::ValueType& t) {
  return absl::StrCat(Str(p, t.type()), "/", Str(p, t.unit()));
}

// Copies one source profile's entities into the output, interning strings
// and storing each distinct function, mapping and location once. Ids of the
// output are 1-based positions.
class Merger {
 public:
  explicit Merger(pprof::Profile& out) : out_(out) { Intern(""); }

  int64_t Intern(const std::string& s) {
    auto [it, inserted] = strings_.try_emplace(s, out_.string_table_size());
    if (inserted) out_.add_string_table(s);
    return it->second;
  }

  // Starts a source: its ids are looked up in its own tables from here on.
  void Begin(const pprof::Profile& src) {
    src_ = &src;
    mappings_.clear();
    functions_.clear();
    locations_.clear();
    for (const auto& m : src.mapping()) mappings_[m.id()] = {&m, 0};
    for (const auto& f : src.function()) functions_[f.id()] = {&f, 0};
    for (const auto& l : src.location()) locations_[l.id()] = {&l, 0};
    // pprof's driver gives a profile without mappings one empty mapping for
    // all its locations as it reads it (fetch.go, locateBinaries), before
    // the two are merged; gpuflame's profiles of Python code alone have none.
    no_mappings_ = src.mapping_size() == 0;
    // pprof's Merge adds the first source mapping first ("the main binary":
    // what `go tool pprof` prints as File:), then the rest as used.
    if (out_.mapping_size() == 0) MappingFor(no_mappings_ ? 0 : src.mapping(0).id());
  }

  // Output id of the source's mapping |id|; 0 for none (pprof reads a
  // location whose mapping is absent as having none).
  uint64_t MappingFor(uint64_t id) {
    if (no_mappings_) {
      pprof::Mapping empty;
      return Dedup(empty, mapping_ids_, [&] { return out_.add_mapping(); });
    }
    if (id == 0) return 0;
    return Translate(
        mappings_, id, mapping_ids_, [&] { return out_.add_mapping(); },
        [&](const pprof::Mapping& m) {
          pprof::Mapping copy = m;
          copy.set_id(0);
          copy.set_filename(Intern(Str(*src_, m.filename())));
          copy.set_build_id(Intern(Str(*src_, m.build_id())));
          return copy;
        });
  }

  uint64_t FunctionFor(uint64_t id) {
    return Translate(
        functions_, id, function_ids_, [&] { return out_.add_function(); },
        [&](const pprof::Function& f) {
          pprof::Function copy;
          copy.set_name(Intern(Str(*src_, f.name())));
          copy.set_system_name(Intern(Str(*src_, f.system_name())));
          copy.set_filename(Intern(Str(*src_, f.filename())));
          copy.set_start_line(f.start_line());
          return copy;
        });
  }

  uint64_t LocationFor(uint64_t id) {
    return Translate(
        locations_, id, location_ids_, [&] { return out_.add_location(); },
        [&](const pprof::Location& l) {
          pprof::Location copy;
          copy.set_mapping_id(MappingFor(l.mapping_id()));
          copy.set_address(l.address());
          copy.set_is_folded(l.is_folded());
          for (const auto& line : l.line()) {
            auto* c = copy.add_line();
            c->set_function_id(FunctionFor(line.function_id()));
            c->set_line(line.line());
          }
          return copy;
        });
  }

  // The source's sample |s|, its values at |types| (the shared sample
  // types); for BASE (|base|), with its values negated and pprof's base label
  // in place of any it had.
  void AddSample(const pprof::Sample& s, const std::vector<int>& types, bool base) {
    bool zero = true;
    for (int t : types) zero = zero && s.value(t) == 0;
    if (zero) return;  // pprof's Merge keeps no all-zero sample
    auto* o = out_.add_sample();
    for (uint64_t id : s.location_id()) o->add_location_id(LocationFor(id));
    // -INT64_MIN saturates: pprof scales by -1.0 in floating point, which no
    // real profile's values come near either way.
    for (int t : types) o->add_value(base ? base::SaturatingSub(0, s.value(t)) : s.value(t));
    for (const auto& l : s.label()) {
      const std::string& key = Str(*src_, l.key());
      if (base && key == kDiffBaseLabel) continue;
      auto* c = o->add_label();
      c->set_key(Intern(key));
      if (l.str()) c->set_str(Intern(Str(*src_, l.str())));
      c->set_num(l.num());
      if (l.num_unit()) c->set_num_unit(Intern(Str(*src_, l.num_unit())));
    }
    if (base) {
      auto* c = o->add_label();
      c->set_key(Intern(kDiffBaseLabel));
      c->set_str(Intern("true"));
    }
  }

 private:
  template <typename T>
  struct Entry {
    const T* in;
    uint64_t out;
  };

  // The output id of the source's entity |id| (0 when it has none: a
  // profile ValidatePprof refused), translated by |copy| (the output's
  // strings and ids, no id of its own) the first time.
  template <typename T, typename Add, typename Copy>
  uint64_t Translate(absl::flat_hash_map<uint64_t, Entry<T>>& index, uint64_t id,
                     absl::flat_hash_map<std::string, uint64_t>& ids, Add add, Copy copy) {
    auto it = index.find(id);
    if (it == index.end()) return 0;
    if (!it->second.out) {
      T out = copy(*it->second.in);
      it->second.out = Dedup(out, ids, add);
    }
    return it->second.out;
  }

  // The id of an entity equal to |copy| (id not set), adding it if new. The
  // serialized message is the key: every field counts, nothing is forgotten.
  template <typename T, typename Add>
  uint64_t Dedup(T& copy, absl::flat_hash_map<std::string, uint64_t>& ids, Add add) {
    auto [it, inserted] = ids.try_emplace(copy.SerializeAsString(), ids.size() + 1);
    if (inserted) {
      copy.set_id(it->second);
      *add() = std::move(copy);
    }
    return it->second;
  }

  pprof::Profile& out_;
  const pprof::Profile* src_ = nullptr;
  bool no_mappings_ = false;
  absl::flat_hash_map<std::string, int64_t> strings_;
  absl::flat_hash_map<std::string, uint64_t> mapping_ids_, function_ids_, location_ids_;
  absl::flat_hash_map<uint64_t, Entry<pprof::Mapping>> mappings_;
  absl::flat_hash_map<uint64_t, Entry<pprof::Function>> functions_;
  absl::flat_hash_map<uint64_t, Entry<pprof::Location>> locations_;
};

}  // namespace

std::string DescribeSampleTypes(const pprof::Profile& p) {
  std::string out;
  for (const auto& t : p.sample_type()) absl::StrAppend(&out, out.empty() ? "" : ", ", TypeName(p, t));
  return out.empty() ? "no sample types" : out;
}

absl::Status ValidatePprof(const pprof::Profile& p) {
  auto bad = [](const std::string& why) { return absl::InvalidArgumentError(why); };
  if (p.string_table_size() == 0 || !p.string_table(0).empty())
    return bad("its string table does not start with the empty string");
  if (p.sample_type_size() == 0) return bad("it has no sample types");
  auto check = [&](int64_t index, std::string_view what) -> absl::Status {
    if (InTable(p, index)) return absl::OkStatus();
    return bad(absl::StrFormat("%s names string %d of a table of %d", what, index, p.string_table_size()));
  };
  for (const auto& t : p.sample_type()) {
    if (auto s = check(t.type(), "a sample type"); !s.ok()) return s;
    if (auto s = check(t.unit(), "a sample type's unit"); !s.ok()) return s;
  }
  if (p.has_period_type()) {
    if (auto s = check(p.period_type().type(), "the period type"); !s.ok()) return s;
    if (auto s = check(p.period_type().unit(), "the period type's unit"); !s.ok()) return s;
  }
  for (int64_t c : p.comment())
    if (auto s = check(c, "a comment"); !s.ok()) return s;
  for (auto [index, what] : {std::pair{p.default_sample_type(), "the default sample type"},
                             std::pair{p.drop_frames(), "drop_frames"}, std::pair{p.keep_frames(), "keep_frames"}})
    if (auto s = check(index, what); !s.ok()) return s;

  absl::flat_hash_set<uint64_t> mappings, functions, locations;
  for (const auto& m : p.mapping()) {
    if (m.id() == 0) return bad("a mapping has id 0");
    if (!mappings.insert(m.id()).second) return bad(absl::StrFormat("two mappings have id %d", m.id()));
    if (auto s = check(m.filename(), "a mapping's file name"); !s.ok()) return s;
    if (auto s = check(m.build_id(), "a mapping's build ID"); !s.ok()) return s;
  }
  for (const auto& f : p.function()) {
    if (f.id() == 0) return bad("a function has id 0");
    if (!functions.insert(f.id()).second) return bad(absl::StrFormat("two functions have id %d", f.id()));
    if (auto s = check(f.name(), "a function's name"); !s.ok()) return s;
    if (auto s = check(f.system_name(), "a function's system name"); !s.ok()) return s;
    if (auto s = check(f.filename(), "a function's file name"); !s.ok()) return s;
  }
  for (const auto& l : p.location()) {
    if (l.id() == 0) return bad("a location has id 0");
    if (!locations.insert(l.id()).second) return bad(absl::StrFormat("two locations have id %d", l.id()));
    for (const auto& line : l.line())
      if (!functions.contains(line.function_id()))
        return bad(absl::StrFormat("location %d names function %d, which it lacks", l.id(), line.function_id()));
  }
  for (const auto& s : p.sample()) {
    if (s.value_size() != p.sample_type_size())
      return bad(absl::StrFormat("a sample has %d values for %d sample types", s.value_size(), p.sample_type_size()));
    for (uint64_t id : s.location_id())
      if (!locations.contains(id)) return bad(absl::StrFormat("a sample names location %d, which it lacks", id));
    for (const auto& l : s.label()) {
      if (auto st = check(l.key(), "a label's key"); !st.ok()) return st;
      if (auto st = check(l.str(), "a label's value"); !st.ok()) return st;
      if (auto st = check(l.num_unit(), "a label's unit"); !st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SampleTypeMatch> MatchSampleTypes(const pprof::Profile& base, const pprof::Profile& neu) {
  SampleTypeMatch match;
  absl::flat_hash_map<std::string, int> in_base;
  for (int i = 0; i < base.sample_type_size(); i++) in_base.try_emplace(TypeName(base, base.sample_type(i)), i);
  absl::flat_hash_set<int> base_used;
  for (int i = 0; i < neu.sample_type_size(); i++) {
    const std::string name = TypeName(neu, neu.sample_type(i));
    auto it = in_base.find(name);
    // A type a side names twice is matched once; its other column goes.
    if (it == in_base.end() || !base_used.insert(it->second).second) {
      match.only_in_new.push_back(name);
      continue;
    }
    match.neu.push_back(i);
    match.base.push_back(it->second);
  }
  for (int i = 0; i < base.sample_type_size(); i++)
    if (!base_used.contains(i)) match.only_in_base.push_back(TypeName(base, base.sample_type(i)));
  if (match.neu.empty())
    return absl::FailedPreconditionError(absl::StrFormat("they measure different things: BASE has %s; NEW has %s",
                                                         DescribeSampleTypes(base), DescribeSampleTypes(neu)));
  const std::string base_period = TypeName(base, base.period_type()), new_period = TypeName(neu, neu.period_type());
  if (base_period != new_period)
    return absl::FailedPreconditionError(
        absl::StrFormat("their periods differ: BASE's is %s, NEW's %s", base_period, new_period));
  return match;
}

namespace {

// Why a profile of gpuflame may have a sample type that another of the same
// kind lacks (profiler/aggregate/profile_builder.cc): what the user should
// know of the side that has it. Other tools' types get no reason.
std::string WhyOneSideHas(std::string_view type) {
  if (type == "alloc_samples/count") return "allocations seen, where tensor allocations were sampled by bytes";
  if (type == "observed_time/nanoseconds") return "kernel time seen, where CUPTI activity was duty-cycled";
  if (type.starts_with("peak_")) return "each process's live set at its peak, which an older gpuflame's profiles lack";
  if (type.starts_with("unused_")) return "the caching allocator's slack, which an older gpuflame's profiles lack";
  return "";
}

std::string DescribeSide(const char* side, const std::vector<std::string>& types) {
  std::string out = absl::StrCat("only ", side, " has ");
  for (size_t i = 0; i < types.size(); i++) {
    absl::StrAppend(&out, i ? ", " : "", types[i]);
    if (std::string why = WhyOneSideHas(types[i]); !why.empty()) absl::StrAppend(&out, " (", why, ")");
  }
  return out;
}

}  // namespace

std::string DescribeLeftOut(const SampleTypeMatch& match) {
  if (match.complete()) return "";
  std::string out =
      absl::StrFormat("diffed the %d sample type%s both have; ", match.neu.size(), match.neu.size() == 1 ? "" : "s");
  if (!match.only_in_base.empty()) absl::StrAppend(&out, DescribeSide("BASE", match.only_in_base));
  if (!match.only_in_new.empty())
    absl::StrAppend(&out, match.only_in_base.empty() ? "" : "; ", DescribeSide("NEW", match.only_in_new));
  return absl::StrCat(out, ": left out");
}

absl::StatusOr<pprof::Profile> DiffPprof(const pprof::Profile& base, const pprof::Profile& neu) {
  if (auto s = ValidatePprof(base); !s.ok()) return absl::InvalidArgumentError(absl::StrCat("BASE: ", s.message()));
  if (auto s = ValidatePprof(neu); !s.ok()) return absl::InvalidArgumentError(absl::StrCat("NEW: ", s.message()));
  absl::StatusOr<SampleTypeMatch> match = MatchSampleTypes(base, neu);
  if (!match.ok()) return match.status();

  pprof::Profile out;
  Merger m(out);
  absl::flat_hash_set<std::string> shared;
  for (int i : match->neu) {
    const pprof::ValueType& t = neu.sample_type(i);
    auto* o = out.add_sample_type();
    o->set_type(m.Intern(Str(neu, t.type())));
    o->set_unit(m.Intern(Str(neu, t.unit())));
    shared.insert(Str(neu, t.type()));
  }
  if (neu.has_period_type()) {
    out.mutable_period_type()->set_type(m.Intern(Str(neu, neu.period_type().type())));
    out.mutable_period_type()->set_unit(m.Intern(Str(neu, neu.period_type().unit())));
  }
  // Headers as pprof's combineHeaders takes them, NEW first: the earliest
  // time (a zero one wins once set), summed durations, the largest period,
  // each comment once, the first default sample type; NEW's frame filters.
  int64_t time = 0, duration = 0, period = 0;
  std::string default_type;
  absl::flat_hash_set<std::string> seen_comments;
  for (const pprof::Profile* p : {&neu, &base}) {
    if (time == 0 || p->time_nanos() < time) time = p->time_nanos();
    base::SaturatingAdd(duration, p->duration_nanos());
    if (period == 0 || period < p->period()) period = p->period();
    for (int64_t c : p->comment())
      if (seen_comments.insert(Str(*p, c)).second) out.add_comment(m.Intern(Str(*p, c)));
    // Not one that was left out, which pprof would pass over for the last type.
    if (default_type.empty() && (match->complete() || shared.contains(Str(*p, p->default_sample_type()))))
      default_type = Str(*p, p->default_sample_type());
  }
  if (const std::string left_out = DescribeLeftOut(*match); !left_out.empty())
    out.add_comment(m.Intern(absl::StrCat("gpuflame diff: ", left_out)));
  out.set_time_nanos(time);
  out.set_duration_nanos(duration);
  out.set_period(period);
  if (!default_type.empty()) out.set_default_sample_type(m.Intern(default_type));
  if (neu.drop_frames()) out.set_drop_frames(m.Intern(Str(neu, neu.drop_frames())));
  if (neu.keep_frames()) out.set_keep_frames(m.Intern(Str(neu, neu.keep_frames())));

  m.Begin(neu);
  for (const auto& s : neu.sample()) m.AddSample(s, match->neu, /*base=*/false);
  m.Begin(base);
  for (const auto& s : base.sample()) m.AddSample(s, match->base, /*base=*/true);
  return out;
}

}  // namespace gpuflame::exporters
