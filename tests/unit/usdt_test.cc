// USDT probes read from ELF notes (profiler/probes/usdt_notes.h), their
// sites (profiler/process/usdt_sites.h) and the spec IDs the BPF programs
// read them by (profiler/probes/usdt_specs.h).
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/scoped_fd.h"
#include "profiler/probes/usdt_notes.h"
#include "profiler/probes/usdt_specs.h"
#include "profiler/process/usdt_sites.h"
#include "symbolizer/elf_file.h"

namespace gpuflame::profiler {
namespace {

// PyTorch's caching allocator without c10::reportMemoryUsageToProfiler:
// its pytorch:malloc/free notes, as GCC wrote them (sys/sdt.h).
const std::string kNoReportC10Cuda = GPUFLAME_SIM_DIR "/noreport/libc10_cuda.so";

gf_usdt_arg_spec Arg(gf_usdt_arg_type type, int16_t reg, uint64_t val, bool is_signed, int bytes) {
  gf_usdt_arg_spec a{};
  a.arg_type = type;
  a.reg_off = static_cast<uint16_t>(reg);
  a.val_off = val;
  a.arg_signed = is_signed;
  a.arg_bitshift = static_cast<uint8_t>(64 - 8 * bytes);
  return a;
}

void ExpectArg(const gf_usdt_arg_spec& got, const gf_usdt_arg_spec& want, const std::string& what) {
  EXPECT_EQ(got.arg_type, want.arg_type) << what;
  EXPECT_EQ(got.reg_off, want.reg_off) << what;
  EXPECT_EQ(got.val_off, want.val_off) << what;
  EXPECT_EQ(got.arg_signed, want.arg_signed) << what;
  EXPECT_EQ(got.arg_bitshift, want.arg_bitshift) << what;
}

TEST(UsdtArgsTest, ReadsEachOperandFormAsLibbpfDoes) {
  // struct pt_regs (x86-64): rax 80, rbp 32, rsp 152, r8 72, r13 16, rsi 104.
  auto spec = ParseUsdtArgs("-4@%eax 8@-16(%rbp) 8@(%rsp) 4@$71 -1@%r13b 2@%si 8@$-3 -8@1024(%r8)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->arg_cnt, 8);
  ExpectArg(spec->args[0], Arg(GF_USDT_ARG_REG, 80, 0, true, 4), "-4@%eax");
  ExpectArg(spec->args[1], Arg(GF_USDT_ARG_REG_DEREF, 32, static_cast<uint64_t>(-16), false, 8), "8@-16(%rbp)");
  ExpectArg(spec->args[2], Arg(GF_USDT_ARG_REG_DEREF, 152, 0, false, 8), "8@(%rsp)");
  ExpectArg(spec->args[3], Arg(GF_USDT_ARG_CONST, 0, 71, false, 4), "4@$71");
  ExpectArg(spec->args[4], Arg(GF_USDT_ARG_REG, 16, 0, true, 1), "-1@%r13b");
  ExpectArg(spec->args[5], Arg(GF_USDT_ARG_REG, 104, 0, false, 2), "2@%si");
  ExpectArg(spec->args[6], Arg(GF_USDT_ARG_CONST, 0, static_cast<uint64_t>(-3), false, 8), "8@$-3");
  ExpectArg(spec->args[7], Arg(GF_USDT_ARG_REG_DEREF, 72, 1024, true, 8), "-8@1024(%r8)");
  auto extremes = ParseUsdtArgs("8@$-9223372036854775808 8@$9223372036854775807");
  ASSERT_TRUE(extremes.ok()) << extremes.status();
  EXPECT_EQ(extremes->args[0].val_off, uint64_t{1} << 63);
  EXPECT_EQ(extremes->args[1].val_off, (uint64_t{1} << 63) - 1);
  auto none = ParseUsdtArgs("");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->arg_cnt, 0);
}

TEST(UsdtArgsTest, RefusesWhatItCannotReadRatherThanGuess) {
  for (const char* bad : {"8@8(%rax,%rbx,2)",  // an index register (libbpf 1.1 has no such spec)
                          "3@%eax", "16@%rax", "8@%xmm0", "8@%ah", "8@foo(%rip)", "8@", "@%rax", "8%rax", "8@$",
                          "8@$12x", "8@(%rax", "8@-(%rax)", "99999999999999999999@%rax", "9223372036854775808@%rax",
                          "-9223372036854775808@%rax", "8@$9223372036854775808", "8@99999999999999999999(%rax)"})
    EXPECT_FALSE(ParseUsdtArgs(bad).ok()) << bad;
  std::string thirteen;
  for (int i = 0; i < 13; i++) thirteen += "8@%rax ";
  EXPECT_FALSE(ParseUsdtArgs(thirteen).ok());
  EXPECT_TRUE(ParseUsdtArgs(thirteen.substr(0, 12 * 7)).ok());
}

// readelf's view of the notes: Provider, Name, Location, Base, Semaphore,
// Arguments, in its own words.
struct ReadelfNote {
  std::string provider, name, args;
  uint64_t pc = 0, base = 0, semaphore = 0;
};
std::vector<ReadelfNote> Readelf(const std::string& path) {
  std::vector<ReadelfNote> out;
  FILE* f = popen(("readelf -n --wide " + path + " 2>/dev/null").c_str(), "r");
  if (!f) return out;
  char buf[4096];
  while (fgets(buf, sizeof(buf), f)) {
    std::string line(buf);
    if (auto at = line.find("Provider: "); at != std::string::npos) {
      out.emplace_back();
      out.back().provider = line.substr(at + 10, line.find_last_not_of("\r\n") - at - 9);
    } else if (out.empty()) {
      continue;
    } else if (auto at = line.find("Name: "); at != std::string::npos) {
      out.back().name = line.substr(at + 6, line.find_last_not_of("\r\n") - at - 5);
    } else if (line.find("Location: ") != std::string::npos) {
      unsigned long long pc = 0, base = 0, sem = 0;
      sscanf(line.c_str(), " Location: %llx, Base: %llx, Semaphore: %llx", &pc, &base, &sem);
      out.back().pc = pc;
      out.back().base = base;
      out.back().semaphore = sem;
    } else if (auto at = line.find("Arguments: "); at != std::string::npos) {
      out.back().args = line.substr(at + 11, line.find_last_not_of("\r\n") - at - 10);
    }
  }
  pclose(f);
  return out;
}

TEST(UsdtNotesTest, ReadsWhatReadelfReads) {
  std::vector<std::string> files = {kNoReportC10Cuda};
#ifdef GPUFLAME_CUPTI_LIB
  files.push_back(GPUFLAME_CUPTI_LIB);  // the injection library's gpuflame:* probes
#endif
  for (const std::string& path : files) {
    auto elf = symbolizer::ElfFile::Open(path);
    ASSERT_TRUE(elf.ok()) << path;
    const std::vector<UsdtNote> ours = ParseUsdtNotes(elf->usdt_notes());
    const std::vector<ReadelfNote> theirs = Readelf(path);
    ASSERT_FALSE(theirs.empty()) << "readelf (binutils) lists no stapsdt note in " << path;
    ASSERT_EQ(ours.size(), theirs.size()) << path;
    for (size_t i = 0; i < ours.size(); i++) {
      EXPECT_EQ(ours[i].provider, theirs[i].provider) << path << " #" << i;
      EXPECT_EQ(ours[i].name, theirs[i].name) << path << " #" << i;
      EXPECT_EQ(ours[i].args, theirs[i].args) << path << " #" << i;
      EXPECT_EQ(ours[i].pc, theirs[i].pc) << path << " #" << i;
      EXPECT_EQ(ours[i].base, theirs[i].base) << path << " #" << i;
      EXPECT_EQ(ours[i].semaphore, theirs[i].semaphore) << path << " #" << i;
      EXPECT_TRUE(ParseUsdtArgs(ours[i].args).ok()) << ours[i].args;
    }
    EXPECT_NE(elf->usdt_base(), 0u) << path << ": has .stapsdt.base";
  }
}

// A note: owner, type, descriptor (pc, base, semaphore, strings).
std::string Note(std::string_view owner, uint32_t type, std::string desc) {
  std::string out(12, '\0');
  const uint32_t namesz = static_cast<uint32_t>(owner.size()), descsz = static_cast<uint32_t>(desc.size());
  std::memcpy(&out[0], &namesz, 4);
  std::memcpy(&out[4], &descsz, 4);
  std::memcpy(&out[8], &type, 4);
  out += owner;
  out.resize((out.size() + 3) & ~size_t{3}, '\0');
  out += desc;
  out.resize((out.size() + 3) & ~size_t{3}, '\0');
  return out;
}
std::string Desc(uint64_t pc, uint64_t base, uint64_t sem, std::string_view strings) {
  std::string d(24, '\0');
  std::memcpy(&d[0], &pc, 8);
  std::memcpy(&d[8], &base, 8);
  std::memcpy(&d[16], &sem, 8);
  d += strings;
  return d;
}

TEST(UsdtNotesTest, SkipsForeignAndBrokenNotesAndStopsAtATruncatedOne) {
  using namespace std::string_literals;
  const std::string owner("stapsdt\0", 8);
  std::string section = Note(owner, 3, Desc(0x1000, 0x5000, 0, "p\0one\08@%rax\0"s)) +
                        Note(std::string("GNU\0", 4), 3, Desc(1, 2, 3, "p\0gnu\0\0"s)) +  // another owner
                        Note(owner, 1, Desc(1, 2, 3, "p\0type1\0\0"s)) +                  // another type
                        Note(owner, 3, "short") +                                         // no addresses
                        Note(owner, 3, Desc(1, 2, 3, "p\0unterminated"s)) +               // strings cut
                        Note(owner, 3, Desc(0x2000, 0x5000, 0x7000, "p\0two\0\0"s));
  std::vector<UsdtNote> notes = ParseUsdtNotes(section);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0].name, "one");
  EXPECT_EQ(notes[0].args, "8@%rax");
  EXPECT_EQ(notes[1].name, "two");
  EXPECT_EQ(notes[1].semaphore, 0x7000u);
  EXPECT_EQ(notes[1].args, "");
  EXPECT_EQ(ParseUsdtNotes(section, 1).size(), 1u);
  // Cut anywhere: the whole notes before the cut, nothing made up after it.
  for (size_t cut = 0; cut < section.size(); cut++) EXPECT_LE(ParseUsdtNotes(section.substr(0, cut)).size(), 2u);
  // A descriptor size past the section's end ends the list.
  std::string lying = Note(owner, 3, Desc(1, 2, 3, "p\0x\0\0"s));
  const uint32_t huge = 0xfffffff0;
  std::memcpy(&lying[4], &huge, 4);
  EXPECT_TRUE(ParseUsdtNotes(lying).empty());
}

TEST(UsdtNotesTest, PrelinkMovesTheSiteWithTheBase) {
  UsdtNote note;
  note.pc = 0x1000;
  note.base = 0x5000;
  EXPECT_EQ(UsdtSiteAddress(note, 0x5000), 0x1000u);
  EXPECT_EQ(UsdtSiteAddress(note, 0x6000), 0x2000u);
  EXPECT_EQ(UsdtSiteAddress(note, 0), 0x1000u);  // no .stapsdt.base: as written
}

TEST(UsdtSitesTest, PointAtTheNopAndTheSemaphoreInTheFile) {
  auto elf = symbolizer::ElfFile::Open(kNoReportC10Cuda);
  ASSERT_TRUE(elf.ok());
  std::ifstream in(kNoReportC10Cuda, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* name : {"malloc", "free"}) {
    std::string why;
    std::vector<BpfProbes::UsdtSite> sites = UsdtSites(*elf, "pytorch", name, &why);
    ASSERT_EQ(sites.size(), 1u) << name << ": " << why;
    ASSERT_LT(sites[0].offset, bytes.size());
    EXPECT_EQ(static_cast<uint8_t>(bytes[sites[0].offset]), 0x90) << name << ": sys/sdt.h's nop";
    auto semaphore = elf->FindSymbol(std::string("pytorch_") + name + "_semaphore");
    ASSERT_TRUE(semaphore.has_value()) << name;
    EXPECT_EQ(sites[0].semaphore_offset, elf->VaddrToOffset(*semaphore)) << name;
  }
  EXPECT_EQ(UsdtSites(*elf, "pytorch", "malloc")[0].spec.arg_cnt, 4);
  EXPECT_TRUE(UsdtSites(*elf, "pytorch", "nothing").empty());
}

TEST(UsdtSpecTableTest, OneIdPerSpecCountedAndFreedWhenTheLastLinkGoes) {
  if (geteuid() != 0) GTEST_SKIP() << "a BPF array map needs root";
  base::ScopedFd map(
      bpf_map_create(BPF_MAP_TYPE_ARRAY, "gf_test_specs", sizeof(uint32_t), sizeof(gf_usdt_spec), 2, nullptr));
  ASSERT_TRUE(map) << std::strerror(errno);
  auto table = std::make_shared<UsdtSpecTable>(map.get(), 2);
  gf_usdt_spec a = *ParseUsdtArgs("8@%rdi"), b = *ParseUsdtArgs("8@%rsi 4@$1"), c = *ParseUsdtArgs("");
  auto id_a = table->Acquire(a), again = table->Acquire(a), id_b = table->Acquire(b);
  ASSERT_TRUE(id_a.ok() && again.ok() && id_b.ok());
  EXPECT_EQ(*id_a, *again) << "the same spec, the same ID";
  EXPECT_NE(*id_a, *id_b);
  gf_usdt_spec in_map{};
  ASSERT_EQ(bpf_map_lookup_elem(map.get(), &*id_b, &in_map), 0);
  EXPECT_EQ(in_map.arg_cnt, 2);
  EXPECT_EQ(in_map.args[1].val_off, 1u);
  EXPECT_FALSE(table->Acquire(c).ok()) << "both IDs in use";
  {
    UsdtSpecRefs link(table, {*id_b});  // a link's own reference
    table->Release(*id_b);              // the attach's
    EXPECT_FALSE(table->Acquire(c).ok()) << "the link still holds b";
  }
  auto id_c = table->Acquire(c);  // b's ID, free once its last link went
  ASSERT_TRUE(id_c.ok());
  EXPECT_EQ(*id_c, *id_b);
  ASSERT_EQ(bpf_map_lookup_elem(map.get(), &*id_c, &in_map), 0);
  EXPECT_EQ(in_map.arg_cnt, 0);
  table->Release(*id_a);
  EXPECT_EQ(table->in_use(), 2u) << "a is held twice";
  UsdtSpecRefs kept(table, {*id_a});
  table->Release(*id_a);
  kept.Keep();  // a link left open at exit keeps its spec
  EXPECT_EQ(table->in_use(), 2u);
}

}  // namespace
}  // namespace gpuflame::profiler
