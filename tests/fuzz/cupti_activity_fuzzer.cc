// Fuzz target for the CUPTI record converter (cupti/activity_converter.cc,
// ActivityConverter::Convert): CUPTI activity records (kernels, memcpys,
// memsets, overhead, kinds we do not chart) to gf_kernel_record batches and
// interned kernel names, across duty-cycle windows and agents that attach
// late (SayNamesAgain); the driver's launch calls (the launch route) to
// gf_api_records on CLOCK_MONOTONIC, through clock pairs set meanwhile. It runs inside the workload, so a mistake here
// is a crash of the user's training job.
//
// The records come from CUPTI, not from the bytes of a file, so the input is
// a script of what CUPTI and the library do (the field values are the
// input's; name pointers point at names the script defined, as CUPTI's point
// at names it owns):
//
//   op* := u8 code, then by code % 12:
//     0 kernel (CONCURRENT_KERNEL), 1 kernel (KERNEL): u8 name | fields
//     2 memcpy: u8 copy kind | fields         3 memset: fields
//     4 overhead: u64 start | u64 end         5 a record of a kind not charted: u8 kind
//     6 a name: u8 length | bytes             7 kernels with N new names: u16 N
//     8 a window opens: u64 begin | u16 weight
//     9 an agent attaches (SayNamesAgain), then the records so far are converted
//     10 a driver API record: u32 thread | u64 start | u64 end | u32 correlation | u16 callback ID
//     11 a clock pair: u64 CUPTI's | u64 CLOCK_MONOTONIC's (SetClock)
//   fields := u64 start | u64 end | u32 correlation | u32 device | u32 stream | u32 graph
//
// Kernel name 0 is a null name; n > 0 the ((n - 1) % count)-th name defined.
// The records left at the end are converted too. Each record is a heap block
// of exactly its struct's size, so that a read past it is an ASan report.
//
// Checked, as the agent relies on it: every kernel in a batch names an ID
// announced since the last SayNamesAgain; one name, one ID, and one ID, one
// name; batches hold 1 to GF_KERNEL_BATCH_MAX records; every charted record
// comes out once, in order, with its fields; the counts add up. A driver
// record comes out once, in order, moved by the clock pair in force when it
// was converted, unless it has no thread or no pair was set (then counted
// unconverted); runs of 1 to GF_API_BATCH_MAX.
#include <cupti_activity.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bpf/gpuflame_abi.h"
#include "cupti/activity_converter.h"
#include "cupti/activity_windows.h"
#include "fuzz_check.h"

namespace {

using gpuflame::cupti::ActivityConverter;

// Records per input: room for one overflow of the interned names (65,536)
// and more, at ~0.2 s an input under ASan.
constexpr size_t kMaxRecords = 70000;

// The records of one buffer, walked by Next() as cuptiActivityGetNextRecord
// walks a buffer.
struct Record {
  std::unique_ptr<uint8_t[]> bytes;  // a block of its own, or null: in a shared block
  uint8_t* at = nullptr;             // what Next() hands the converter
  gf_kernel_record expected{};       // kind 0: not charted
  bool driver = false;               // a driver API record (the launch route)
};
std::vector<Record>* g_records = nullptr;
size_t g_next = 0;

CUptiResult Next(uint8_t*, size_t, CUpti_Activity** rec) {
  if (*rec == nullptr) g_next = 0;  // as CUPTI's: a walk from the buffer's first record
  if (g_next >= g_records->size()) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *rec = reinterpret_cast<CUpti_Activity*>((*g_records)[g_next++].at);
  return CUPTI_SUCCESS;
}

class Sink : public gpuflame::cupti::ActivitySink {
 public:
  void Name(uint32_t id, const char* name) override {
    FUZZ_CHECK(id != 0 && name != nullptr);
    auto [by_name, new_name] = ids_.try_emplace(name, id);
    FUZZ_CHECK(by_name->second == id);
    auto [by_id, new_id] = names_.try_emplace(id, name);
    FUZZ_CHECK(by_id->second == name);
    FUZZ_CHECK(names_.size() <= ActivityConverter::kMaxNames + 1);  // and the overflow name
    said_.insert(id);
  }
  void Batch(const gf_kernel_record* records, size_t count) override {
    FUZZ_CHECK(count >= 1 && count <= GF_KERNEL_BATCH_MAX);
    for (size_t i = 0; i < count; i++) {
      const gf_kernel_record& r = records[i];
      if (r.kind == GF_GPU_KERNEL) FUZZ_CHECK(said_.contains(r.name_id));
      out.push_back(r);
    }
  }
  void LaunchRecords(const gf_api_record* records, size_t count) override {
    FUZZ_CHECK(count >= 1 && count <= GF_API_BATCH_MAX);
    launches.insert(launches.end(), records, records + count);
  }
  void NewAgent() { said_.clear(); }

  std::vector<gf_kernel_record> out;
  std::vector<gf_api_record> launches;

 private:
  std::unordered_map<std::string, uint32_t> ids_;
  std::unordered_map<uint32_t, std::string> names_;
  std::unordered_set<uint32_t> said_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool empty() const { return in_.empty(); }
  template <typename T>
  T Take() {
    T v{};
    const size_t n = std::min(sizeof(T), in_.size());
    std::memcpy(&v, in_.data(), n);
    in_.remove_prefix(n);
    return v;
  }
  std::string_view Bytes(size_t n) {
    std::string_view b = in_.substr(0, n);
    in_.remove_prefix(b.size());
    return b;
  }

 private:
  std::string_view in_;
};

template <typename Struct>
Record Make(CUpti_ActivityKind kind) {
  Record r;
  r.bytes = std::make_unique<uint8_t[]>(sizeof(Struct));
  r.at = r.bytes.get();
  Struct s{};
  s.kind = kind;
  std::memcpy(r.bytes.get(), &s, sizeof(s));
  return r;
}

template <typename Struct>
void Fields(Reader& in, Record& r, uint8_t gf_kind) {
  Struct s;
  std::memcpy(&s, r.bytes.get(), sizeof(s));
  s.start = in.Take<uint64_t>();
  s.end = in.Take<uint64_t>();
  s.correlationId = in.Take<uint32_t>();
  s.deviceId = in.Take<uint32_t>();
  s.streamId = in.Take<uint32_t>();
  s.graphId = in.Take<uint32_t>();
  std::memcpy(r.bytes.get(), &s, sizeof(s));
  r.expected.start_ns = s.start;
  r.expected.end_ns = s.end;
  r.expected.correlation = s.correlationId;
  r.expected.device = s.deviceId;
  r.expected.stream = s.streamId;
  r.expected.graph_id = s.graphId;
  r.expected.kind = gf_kind;
}

struct Totals {
  uint64_t kernels = 0, memcpys = 0, memsets = 0, other = 0, overhead_ns = 0, launches = 0, unconverted = 0;
};

// CUPTI's clock less CLOCK_MONOTONIC as the converter keeps it (0: no pair).
struct Clock {
  int64_t cupti_minus_mono = 0;
};

void Convert(ActivityConverter& conv, std::vector<Record>& records, Sink& sink,
             const gpuflame::cupti::ActivityWindows& windows, const Clock& clock, Totals& want, Totals& got) {
  g_records = &records;
  g_next = 0;
  const size_t before = sink.out.size();
  const size_t launches_before = sink.launches.size();
  // The driver records as they must come out, with this conversion's clock.
  std::vector<gf_api_record> expected_launches;
  for (const Record& r : records) {
    if (!r.driver) continue;
    CUpti_ActivityAPI a;
    std::memcpy(&a, r.at, sizeof(a));
    if (clock.cupti_minus_mono == 0 || a.threadId == 0) {
      want.unconverted++;
      continue;
    }
    want.launches++;
    expected_launches.push_back({.start_ns = a.start - static_cast<uint64_t>(clock.cupti_minus_mono),
                                 .end_ns = a.end - static_cast<uint64_t>(clock.cupti_minus_mono),
                                 .correlation = a.correlationId,
                                 .tid = a.threadId,
                                 .cbid = static_cast<uint16_t>(a.cbid),
                                 .domain = 1,
                                 .pad = 0,
                                 .result = a.returnValue});
  }
  uint8_t dummy[8] = {};
  const auto st = conv.Convert(dummy, sizeof(dummy), Next, sink, &windows);
  FUZZ_CHECK(g_next == records.size());  // every record was walked
  got.kernels += st.kernels;
  got.memcpys += st.memcpys;
  got.memsets += st.memsets;
  got.other += st.other;
  got.overhead_ns += st.overhead_ns;
  got.launches += st.launch_records;
  got.unconverted += st.launch_records_unconverted;
  FUZZ_CHECK(sink.launches.size() - launches_before == expected_launches.size());
  for (size_t i = 0; i < expected_launches.size(); i++)
    FUZZ_CHECK(std::memcmp(&sink.launches[launches_before + i], &expected_launches[i], sizeof(gf_api_record)) == 0);
  // Charted records come out once each, in order, with their fields.
  size_t at = before;
  for (const Record& r : records) {
    if (r.expected.kind == 0) continue;
    FUZZ_CHECK(at < sink.out.size());
    const gf_kernel_record& o = sink.out[at++];
    const gf_kernel_record& e = r.expected;
    FUZZ_CHECK(o.kind == e.kind && o.start_ns == e.start_ns && o.end_ns == e.end_ns && o.correlation == e.correlation &&
               o.device == e.device && o.stream == e.stream && o.graph_id == e.graph_id);
    FUZZ_CHECK(o.weight >= 1 && o.weight == windows.WeightAt(o.start_ns));
    if (e.kind == GF_GPU_MEMCPY) FUZZ_CHECK(o.copy_kind == e.copy_kind);
    if (e.kind != GF_GPU_KERNEL) FUZZ_CHECK(o.name_id == 0);
  }
  FUZZ_CHECK(at == sink.out.size());
  FUZZ_CHECK(got.kernels == want.kernels && got.memcpys == want.memcpys && got.memsets == want.memsets &&
             got.other == want.other && got.overhead_ns == want.overhead_ns && got.launches == want.launches &&
             got.unconverted == want.unconverted);
  records.clear();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in(std::string_view(reinterpret_cast<const char*>(data), size));
  ActivityConverter conv;
  gpuflame::cupti::ActivityWindows windows;
  Sink sink;
  std::deque<std::string> names;  // records point at them: push_back keeps them in place
  std::vector<Record> records;
  std::vector<std::unique_ptr<CUpti_ActivityKernel10[]>> blocks;
  Totals want, got;
  Clock clock;
  size_t total = 0;
  auto kernel_name = [&](uint8_t n) -> const char* {
    return n == 0 || names.empty() ? nullptr : names[(n - 1u) % names.size()].c_str();
  };

  while (!in.empty() && total < kMaxRecords) {
    const uint8_t op = in.Take<uint8_t>() % 12;
    switch (op) {
      case 0:
      case 1: {
        const bool concurrent = op == 0;
        Record r = Make<CUpti_ActivityKernel10>(concurrent ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                                                           : CUPTI_ACTIVITY_KIND_KERNEL);
        const char* name = kernel_name(in.Take<uint8_t>());
        Fields<CUpti_ActivityKernel10>(in, r, GF_GPU_KERNEL);
        reinterpret_cast<CUpti_ActivityKernel10*>(r.bytes.get())->name = name;
        records.push_back(std::move(r));
        want.kernels++;
        break;
      }
      case 2: {
        Record r = Make<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
        const uint8_t copy_kind = in.Take<uint8_t>();
        Fields<CUpti_ActivityMemcpy6>(in, r, GF_GPU_MEMCPY);
        reinterpret_cast<CUpti_ActivityMemcpy6*>(r.bytes.get())->copyKind = copy_kind;
        r.expected.copy_kind = copy_kind;
        records.push_back(std::move(r));
        want.memcpys++;
        break;
      }
      case 3: {
        Record r = Make<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
        Fields<CUpti_ActivityMemset4>(in, r, GF_GPU_MEMSET);
        records.push_back(std::move(r));
        want.memsets++;
        break;
      }
      case 4: {
        Record r = Make<CUpti_ActivityOverhead3>(CUPTI_ACTIVITY_KIND_OVERHEAD);
        auto* o = reinterpret_cast<CUpti_ActivityOverhead3*>(r.bytes.get());
        o->start = in.Take<uint64_t>();
        o->end = in.Take<uint64_t>();
        if (o->end > o->start) want.overhead_ns += o->end - o->start;
        records.push_back(std::move(r));
        break;
      }
      case 5: {
        // Only the kind is read of a record not charted: a block of just
        // the common header shows a read of more.
        static constexpr CUpti_ActivityKind kOther[] = {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_MEMORY,
                                                        CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                                        CUPTI_ACTIVITY_KIND_INVALID};
        Record r;
        r.bytes = std::make_unique<uint8_t[]>(sizeof(CUpti_Activity));
        r.at = r.bytes.get();
        CUpti_Activity a{};
        a.kind = kOther[in.Take<uint8_t>() % std::size(kOther)];
        std::memcpy(r.bytes.get(), &a, sizeof(a));
        records.push_back(std::move(r));
        want.other++;
        break;
      }
      case 6: {
        const std::string_view bytes = in.Bytes(in.Take<uint8_t>());
        names.emplace_back(bytes.substr(0, bytes.find('\0')));
        break;
      }
      case 7: {
        // Many distinct names at once: the converter's cap on interned names.
        // One block for them all: the converter's interning of 65,536 names
        // is already most of such an input's time.
        const size_t n = std::min<size_t>(in.Take<uint16_t>(), kMaxRecords - total);
        blocks.push_back(std::make_unique<CUpti_ActivityKernel10[]>(n));
        for (size_t i = 0; i < n; i++) {
          names.push_back("kernel_" + std::to_string(names.size()));
          CUpti_ActivityKernel10* k = &blocks.back()[i];
          *k = CUpti_ActivityKernel10{};
          k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
          Record r;
          r.at = reinterpret_cast<uint8_t*>(k);
          k->name = names.back().c_str();
          k->start = k->end = i;
          r.expected.kind = GF_GPU_KERNEL;
          r.expected.start_ns = r.expected.end_ns = i;
          records.push_back(std::move(r));
          want.kernels++;
        }
        total += n;
        break;
      }
      case 8: {
        const uint64_t begin = in.Take<uint64_t>();
        windows.Open(begin, in.Take<uint16_t>());
        break;
      }
      case 9:
        Convert(conv, records, sink, windows, clock, want, got);
        conv.SayNamesAgain();
        sink.NewAgent();
        break;
      case 10: {
        Record r = Make<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER);
        r.driver = true;
        auto* a = reinterpret_cast<CUpti_ActivityAPI*>(r.bytes.get());
        a->threadId = in.Take<uint32_t>();
        a->start = in.Take<uint64_t>();
        a->end = in.Take<uint64_t>();
        a->correlationId = in.Take<uint32_t>();
        a->cbid = in.Take<uint16_t>();
        records.push_back(std::move(r));
        break;
      }
      case 11: {
        // The records so far go with the pair before: the library converts
        // each flush's buffers after setting that flush's pair.
        Convert(conv, records, sink, windows, clock, want, got);
        const uint64_t cupti = in.Take<uint64_t>();
        const uint64_t mono = in.Take<uint64_t>();
        conv.SetClock(cupti, mono);
        conv.SetRoute();
        const auto d = static_cast<int64_t>(cupti - mono);
        clock.cupti_minus_mono = d == 0 ? 1 : d;
        break;
      }
    }
    total++;
  }
  Convert(conv, records, sink, windows, clock, want, got);
  FUZZ_CHECK(conv.names() <= ActivityConverter::kMaxNames + 1);
  return 0;
}
