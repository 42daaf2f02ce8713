#include <gtest/gtest.h>

#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <filesystem>
#include <span>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "base/scoped_fd.h"
#include "bpf/gpuflame_abi.h"
#include "inspect/proc_maps.h"
#include "inspect/process_memory.h"
#include "inspect/python_layout.h"
#include "symbolizer/build_id_index.h"
#include "symbolizer/demangle.h"
#include "symbolizer/dwarf_inlines.h"
#include "symbolizer/elf_cache.h"
#include "symbolizer/elf_file.h"
#include "symbolizer/native_symbolizer.h"
#include "symbolizer/python_code.h"
#include "tests/support/own_mappings.h"
#include "tests/support/temp_dir.h"

namespace gpuflame::symbolizer {
namespace {

using inspect::BufferMemory;
using inspect::LayoutFor;
using inspect::Mapping;
using inspect::OpenablePath;
using inspect::ParseProcMaps;
using inspect::ProcessMemory;
using inspect::PythonVersion;

TEST(DisplayNameTest, FollowsAzureConvention) {
  EXPECT_EQ(DisplayName("GPUModelRunner._allocate_kv_cache_tensors"),
            "GPUModelRunner > _allocate_kv_cache_tensors");
  EXPECT_EQ(DisplayName("LlamaMLP.__init__"), "LlamaMLP > __init__");
  EXPECT_EQ(DisplayName("outer.<locals>.inner"), "outer > inner");
  EXPECT_EQ(DisplayName("f.<locals>.<lambda>"), "f > <lambda>");
  EXPECT_EQ(DisplayName("<module>"), "<module>");
  EXPECT_EQ(DisplayName("_compile_fx_inner"), "_compile_fx_inner");
  EXPECT_EQ(DisplayName("A.B.method"), "A > B > method");
  EXPECT_EQ(DisplayName(""), "");
}

TEST(LineTableTest, Python310PairsMapInstructionsToLines) {
  // (byte delta, line delta): bytes [0,4) line 10, [4,10) line 12, [10,12) no line.
  const char table[] = {4, 0, 0, 0, 6, 2, 2, -128};
  std::string_view t(table, sizeof(table));
  PythonVersion v{3, 10, 0};
  // Instructions are code units: 2 bytes each.
  EXPECT_EQ(LineForInstruction(v, t, 10, 0), 10);
  EXPECT_EQ(LineForInstruction(v, t, 10, 1), 10);
  EXPECT_EQ(LineForInstruction(v, t, 10, 2), 12);
  EXPECT_EQ(LineForInstruction(v, t, 10, 4), 12);
  EXPECT_EQ(LineForInstruction(v, t, 10, 5), 0);
  EXPECT_EQ(LineForInstruction(v, t, 10, 6), 0);
}

TEST(LineTableTest, Python311LocationEntries) {
  std::string t;
  t += static_cast<char>(0x80 | (13 << 3) | 1);  // no-column form, 2 code units
  t += static_cast<char>(0);                     // line delta 0 (svarint)
  t += static_cast<char>(0x80 | (11 << 3) | 0);  // one-line form delta +1, 1 unit
  t += static_cast<char>(1);
  t += static_cast<char>(5);
  t += static_cast<char>(0x80 | (14 << 3) | 2);  // long form: delta +4 (svarint 8), 3 units
  t += static_cast<char>(8);
  t += static_cast<char>(0);
  t += static_cast<char>(0);
  t += static_cast<char>(0);
  t += static_cast<char>(0x80 | (15 << 3) | 0);  // no location, 1 unit
  PythonVersion v{3, 12, 0};
  EXPECT_EQ(LineForInstruction(v, t, 20, 0), 20);
  EXPECT_EQ(LineForInstruction(v, t, 20, 1), 20);
  EXPECT_EQ(LineForInstruction(v, t, 20, 2), 21);
  EXPECT_EQ(LineForInstruction(v, t, 20, 5), 25);
  EXPECT_EQ(LineForInstruction(v, t, 20, 6), 0);
  EXPECT_EQ(LineForInstruction(v, t, 20, 99), 0);
}

TEST(LineTableTest, TruncatedTablesDoNotOverrun) {
  std::string t(1, static_cast<char>(0x80 | (14 << 3)));  // long form with no operands
  EXPECT_EQ(LineForInstruction(PythonVersion{3, 11, 0}, t, 5, 0), 5);
  EXPECT_EQ(LineForInstruction(PythonVersion{3, 10, 0}, std::string(1, '\x04'), 5, 0), 0);  // half a pair
}

TEST(ProcMapsTest, ParsesPathsWithSpacesDeletedAndAnonymous) {
  auto maps = ParseProcMaps(
      "7f0000000000-7f0000001000 r-xp 00001000 fd:01 1234 /opt/my lib/libcudart.so.13\n"
      "7f0000002000-7f0000003000 rw-p 00000000 00:00 0 \n"
      "garbage line\n"
      "7f0000004000-7f0000005000 r-xp 00000000 08:02 99 /tmp/libx.so (deleted)\n");
  ASSERT_EQ(maps.size(), 3u);
  EXPECT_EQ(maps[0].path, "/opt/my lib/libcudart.so.13");
  EXPECT_EQ(maps[0].Basename(), "libcudart.so.13");
  EXPECT_TRUE(maps[0].executable);
  EXPECT_EQ(maps[0].offset, 0x1000u);
  EXPECT_EQ(maps[0].dev_major, 0xfdu);
  EXPECT_EQ(maps[0].inode, 1234u);
  EXPECT_FALSE(maps[1].executable);
  EXPECT_TRUE(maps[1].path.empty());
  EXPECT_TRUE(maps[2].deleted);
  EXPECT_EQ(maps[2].path, "/tmp/libx.so");
  EXPECT_EQ(OpenablePath(42, maps[2]), "/proc/42/map_files/7f0000004000-7f0000005000");
  EXPECT_EQ(OpenablePath(42, maps[0]), "/proc/42/root/opt/my lib/libcudart.so.13");
}

TEST(ProcMapsTest, BoundsTheNumberOfMappings) {
  std::string text;
  for (int i = 0; i < 100; i++) text += "1000-2000 r-xp 00000000 00:00 0 \n";
  EXPECT_EQ(ParseProcMaps(text, 10).size(), 10u);
}

TEST(ProcMapsTest, AnExitedProcessHasNoMapsRatherThanAnEmptyList) {
  // A zombie's /proc/PID/maps reads empty. Taken as a list, it replaced a
  // process's last maps and its last records lost their native frames.
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);  // a zombie, not reaped
  EXPECT_FALSE(inspect::ReadProcMaps(child).ok());
  waitpid(child, nullptr, 0);
  auto self = inspect::ReadProcMaps(getpid());
  ASSERT_TRUE(self.ok());
  EXPECT_FALSE(self->empty());
}

TEST(ElfFileTest, ReadsTheFixtureRuntime) {
  auto elf = ElfFile::Open(GPUFLAME_SIM_DIR "/libcudart.so.13");
  ASSERT_TRUE(elf.ok()) << elf.status();
  EXPECT_TRUE(elf->Exports("cudaMalloc"));
  EXPECT_FALSE(elf->Exports("cuMemAlloc_v2"));  // imported, not defined
  auto addr = elf->FindSymbol("cudaMalloc");
  ASSERT_TRUE(addr.has_value());
  auto hit = elf->Lookup(*addr + 1);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->name, "cudaMalloc");
  EXPECT_TRUE(elf->VaddrToOffset(*addr).has_value());
  EXPECT_FALSE(elf->build_id().empty());
  EXPECT_FALSE(elf->is_executable_type());
}

extern "C" __attribute__((noinline)) int gf_test_symbol_target(int x) {
  asm volatile("" ::: "memory");
  return x + 1;
}

// This test binary's mapping of gf_test_symbol_target.
Mapping OwnCodeMapping() {
  auto maps = inspect::ReadProcMaps(getpid());
  const auto addr = reinterpret_cast<uint64_t>(&gf_test_symbol_target);
  if (maps.ok())
    for (const Mapping& m : *maps)
      if (m.Contains(addr)) return m;
  return {};
}

// A file stays while any process that looked it up runs, and for the keep
// time after the last has gone; then it goes (the caller told first), and a
// later lookup parses it anew. A user that comes back in time keeps it.
TEST(ElfCacheTest, AFileGoesOnceEveryUserHasBeenGoneForTheKeepTime) {
  const Mapping m = OwnCodeMapping();
  ASSERT_NE(m.inode, 0u);
  ElfCache elves;
  const ElfFile* first = elves.Get(getpid(), m);
  ASSERT_NE(first, nullptr);
  const std::string build_id = first->build_id();
  const pid_t other = getpid() + 1'000'000;  // any number: |alive| decides
  EXPECT_EQ(elves.Get(other, m), first);
  absl::flat_hash_set<pid_t> alive = {getpid(), other};
  std::vector<const ElfFile*> told;
  auto sweep = [&](int64_t now) {
    return elves.Sweep(
        now, 100, [&](pid_t pid) { return alive.contains(pid); },
        [&](std::span<const ElfFile* const> files) { told.assign(files.begin(), files.end()); });
  };
  alive.erase(getpid());
  EXPECT_EQ(sweep(0), 0u);  // |other| still runs
  alive.clear();
  EXPECT_EQ(sweep(10), 0u);  // unused from 10
  EXPECT_EQ(sweep(109), 0u);
  EXPECT_EQ(sweep(110), 1u);
  EXPECT_EQ(told, std::vector<const ElfFile*>{first});
  EXPECT_EQ(elves.size(), 0u);
  EXPECT_EQ(elves.evicted(), 1u);
  EXPECT_EQ(elves.MemoryUsage(), 0u);

  const ElfFile* again = elves.Get(getpid(), m);  // parsed anew
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->build_id(), build_id);
  EXPECT_EQ(sweep(200), 0u);  // its user gone: unused from 200
  EXPECT_EQ(elves.Get(getpid(), m), again);
  alive.insert(getpid());
  EXPECT_EQ(sweep(400), 0u);  // came back: the clock restarts
  alive.clear();
  EXPECT_EQ(sweep(450), 0u);
  EXPECT_EQ(sweep(549), 0u);
  EXPECT_EQ(sweep(550), 1u);

  // A lookup restarts the clock, whoever asked and whether or not it still
  // runs at the next sweep (a job shorter than the sweeps' interval).
  ASSERT_NE(elves.Get(other, m), nullptr);
  EXPECT_EQ(sweep(600), 0u);  // unused from 600
  ASSERT_NE(elves.Get(other, m), nullptr);
  EXPECT_EQ(sweep(700), 0u);  // looked up since: unused from 700
  EXPECT_EQ(sweep(799), 0u);
  // A process that called exec holds nothing it mapped before.
  ASSERT_NE(elves.Get(getpid(), m), nullptr);
  alive.insert(getpid());
  elves.ForgetUser(getpid());
  EXPECT_EQ(sweep(800), 0u);  // looked up just before: unused from 800
  EXPECT_EQ(sweep(900), 1u);
  EXPECT_EQ(elves.failures(), 0u);
}

// What the symbolizer read from a file it lets go goes with it: its cached
// names, its DWARF reader and that reader's mapping of the file (which would
// keep a deleted container layer's file on disk), and the maps of processes
// gone. The same address is named the same afterwards.
TEST(NativeSymbolizerTest, SweepLetsGoOfNamesDwarfAndMappingsWithTheFile) {
  ElfCache elves;
  NativeSymbolizer symbols(elves);
  const uint64_t addr = reinterpret_cast<uint64_t>(&gf_test_symbol_target) + 1;
  ASSERT_NE(symbols.Maps(getpid()), nullptr);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  const int mappings = testing::OwnMappingsOf(self).total;
  EXPECT_EQ(symbols.Symbolize(getpid(), addr).name, "gf_test_symbol_target");
  ASSERT_EQ(symbols.dwarf_files(), 1u);  // this binary has DWARF
  EXPECT_EQ(symbols.cached_names(), 1u);
  EXPECT_GT(testing::OwnMappingsOf(self).total, mappings);
  EXPECT_EQ(symbols.Sweep(0, 0, [](pid_t) { return true; }), 0u);
  EXPECT_EQ(symbols.dwarf_files(), 1u);
  EXPECT_EQ(symbols.Sweep(1, 0, [](pid_t) { return false; }), 1u);
  EXPECT_EQ(symbols.dwarf_files(), 0u);
  EXPECT_EQ(symbols.cached_names(), 0u);
  EXPECT_EQ(elves.size(), 0u);
  EXPECT_EQ(testing::OwnMappingsOf(self).total, mappings);
  EXPECT_EQ(symbols.Symbolize(getpid(), addr).name, "gf_test_symbol_target");
  EXPECT_EQ(symbols.dwarf_files(), 1u);
}

TEST(ElfFileTest, FindsOneExportedFunctionWithoutIndexing) {
  const std::string path = GPUFLAME_SIM_DIR "/libtorch_cpu.so";
  auto elf = ElfFile::Open(path);
  ASSERT_TRUE(elf.ok()) << elf.status();
  auto addr = elf->FindSymbol(GF_TORCH_ENGINE_EXECUTE_SYMBOL);
  ASSERT_TRUE(addr.has_value());
  EXPECT_EQ(ElfFile::ExportedFunctionOffset(path, GF_TORCH_ENGINE_EXECUTE_SYMBOL), elf->VaddrToOffset(*addr));
  // A prefix, an import, a missing file and a non-ELF file find nothing.
  EXPECT_FALSE(ElfFile::ExportedFunctionOffset(path, "_ZN5torch8autograd6Engine7executeE").has_value());
  EXPECT_FALSE(ElfFile::ExportedFunctionOffset(GPUFLAME_SIM_DIR "/libcudart.so.13", "cuMemAlloc_v2").has_value());
  EXPECT_FALSE(ElfFile::ExportedFunctionOffset("/nonexistent/libtorch_cpu.so", "f").has_value());
  EXPECT_FALSE(ElfFile::ExportedFunctionOffset("/proc/self/status", "f").has_value());
}

TEST(ElfFileTest, RejectsNonElfAndMissingFiles) {
  EXPECT_FALSE(ElfFile::Open("/proc/self/status").ok());
  EXPECT_FALSE(ElfFile::Open("/nonexistent/libcuda.so.1").ok());
}

TEST(BuildIdIndexTest, FindsDebugFilesByTheBuildIdLayoutAndByScanning) {
  auto stripped = ElfFile::Open(GPUFLAME_SIM_DIR "/stripped/native_alloc_stripped");
  ASSERT_TRUE(stripped.ok());
  const std::string id = stripped->build_id();
  ASSERT_GT(id.size(), 4u);
  std::string root = ::testing::TempDir() + "/gf_buildid_" + std::to_string(getpid());
  std::filesystem::remove_all(root);
  std::string layout = root + "/layout/.build-id/" + id.substr(0, 2);
  std::filesystem::create_directories(layout);
  std::filesystem::create_directories(root + "/flat/sub");
  BuildIdIndex index({root + "/layout", root + "/flat"});
  EXPECT_EQ(index.Find(id), nullptr);  // nothing there yet
  // Stripped copies do not count: they have no symbols to give.
  std::filesystem::copy_file(GPUFLAME_SIM_DIR "/stripped/native_alloc_stripped", root + "/flat/sub/a");
  index.Rescan();
  EXPECT_EQ(index.Find(id), nullptr);
  std::filesystem::copy_file(GPUFLAME_SIM_DIR "/native_alloc", layout + "/" + id.substr(2) + ".debug");
  EXPECT_EQ(index.Find(id), nullptr) << "a miss is remembered until Rescan";
  index.Rescan();
  const ElfFile* found = index.Find(id);
  ASSERT_NE(found, nullptr);
  EXPECT_TRUE(found->FindSymbol("main").has_value());
  // Rescans parse only what is new or changed since the last walk.
  index.Rescan();
  EXPECT_EQ(index.Find("00ff00ff"), nullptr);  // a miss walks the tree
  size_t opened = index.files_opened();
  EXPECT_EQ(opened, 2u);  // the stripped copy once, the debug file once
  index.Rescan();
  EXPECT_EQ(index.Find("00ff00ff"), nullptr);
  EXPECT_EQ(index.files_opened(), opened);
  EXPECT_EQ(index.Find("zz"), nullptr);
  std::filesystem::remove_all(root);
}

TEST(DwarfInlinesTest, NamesInlinedCallsWithTheirLines) {
  // The fixture's gf_sim_empty has NewSegment forced inline (always_inline).
  auto elf = ElfFile::Open(GPUFLAME_SIM_DIR "/libc10_cuda.so");
  ASSERT_TRUE(elf.ok());
  auto fn = elf->FindSymbol("gf_sim_empty");
  ASSERT_TRUE(fn.has_value());
  auto dw = DwarfInlines::Open(base::ScopedFd(open(GPUFLAME_SIM_DIR "/libc10_cuda.so", O_RDONLY | O_CLOEXEC)));
  ASSERT_NE(dw, nullptr);
  bool saw_inline = false;
  // Somewhere in the function's first few hundred bytes is NewSegment's call.
  for (uint64_t a = *fn; a < *fn + 1024 && !saw_inline; a++) {
    std::vector<SourceFrame> frames = dw->At(a);
    if (frames.empty()) continue;
    EXPECT_EQ(frames[0].system_name, "gf_sim_empty");
    for (size_t i = 1; i < frames.size(); i++)
      if (frames[i].system_name.find("NewSegment") != std::string::npos) {
        saw_inline = true;
        EXPECT_GT(frames[i - 1].line, 0);
      }
  }
  EXPECT_TRUE(saw_inline);
  EXPECT_EQ(DwarfInlines::Open(base::ScopedFd(open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC))), nullptr);
  EXPECT_EQ(DwarfInlines::Open(base::ScopedFd()), nullptr);
}

// A file whose .gnu_debugaltlink (dwz's shared DWARF) names a FIFO: libdw
// would open() it, blocking, on the first name that lives there. It is
// opened the safe way, and a file whose link opens to nothing has its DWARF
// declined at once; one whose link is a readable ELF file with DWARF is used.
TEST(DwarfInlinesTest, ADebugAltLinkIsOpenedSafelyOrTheFileDeclined) {
  const std::string dir = testing::ProcessTempDir() + "/altlink";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto with_link = [&](const std::string& out, const std::string& target) {
    std::string blob = target;
    blob.push_back('\0');
    blob.append(20, '\x5a');  // a build ID no /usr/lib/debug has
    const std::string blob_path = out + ".link";
    FILE* f = fopen(blob_path.c_str(), "wb");
    fwrite(blob.data(), 1, blob.size(), f);
    fclose(f);
    const std::string cmd =
        "objcopy --add-section .gnu_debugaltlink=" + blob_path + " " GPUFLAME_SIM_DIR "/libc10_cuda.so " + out;
    return std::system(cmd.c_str()) == 0;
  };
  const std::string fifo = dir + "/alt.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_TRUE(with_link(dir + "/to_fifo.so", fifo));
  EXPECT_EQ(DwarfInlines::Open(base::ScopedFd(open((dir + "/to_fifo.so").c_str(), O_RDONLY | O_CLOEXEC))), nullptr);
  ASSERT_TRUE(with_link(dir + "/to_missing.so", "relative/alt.debug"));
  EXPECT_EQ(DwarfInlines::Open(base::ScopedFd(open((dir + "/to_missing.so").c_str(), O_RDONLY | O_CLOEXEC))), nullptr);
  ASSERT_TRUE(with_link(dir + "/to_elf.so", GPUFLAME_SIM_DIR "/libc10_cuda.so"));
  auto dw = DwarfInlines::Open(base::ScopedFd(open((dir + "/to_elf.so").c_str(), O_RDONLY | O_CLOEXEC)));
  ASSERT_NE(dw, nullptr);
  auto elf = ElfFile::Open(dir + "/to_elf.so");
  ASSERT_TRUE(elf.ok());
  auto fn = elf->FindSymbol("gf_sim_empty");
  ASSERT_TRUE(fn.has_value());
  bool named = false;
  for (uint64_t a = *fn; a < *fn + 64 && !named; a++) {
    std::vector<SourceFrame> frames = dw->At(a);
    named = !frames.empty() && frames[0].system_name == "gf_sim_empty";
  }
  EXPECT_TRUE(named);
  std::filesystem::remove_all(dir);
}

TEST(ElfFileTest, ReadsFilesWhereNoUprobeWritesABreakpoint) {
  // A file-wide uprobe's breakpoint goes into every private read-only
  // mapping of its file, gpuflame's own included, and is counted in the
  // file's semaphore in whatever writable mapping gpuflame holds then: the
  // count went negative and the kernel leaked the hello site's uprobe.
  const std::string path = GPUFLAME_SIM_DIR "/libc10_cuda.so";  // not loaded by this test
  ASSERT_EQ(testing::OwnMappingsOf(path).total, 0);
  auto elf = ElfFile::Open(path);
  ASSERT_TRUE(elf.ok());
  auto fn = elf->FindSymbol("gf_sim_empty");
  ASSERT_TRUE(fn.has_value());
  auto dw = DwarfInlines::Open(base::ScopedFd(open(path.c_str(), O_RDONLY | O_CLOEXEC)));
  ASSERT_NE(dw, nullptr);
  for (uint64_t a = *fn; a < *fn + 64; a++) (void)dw->At(a);
  const testing::OwnMappings own = testing::OwnMappingsOf(path);
  EXPECT_GE(own.total, 1) << "DwarfInlines reads it through a mapping (ElfFile's is gone once it is indexed)";
  EXPECT_EQ(own.breakpoint_targets, 0);
}

TEST(DemangleTest, CxxNamesAndPlainNames) {
  EXPECT_EQ(Demangle("_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE"),
            "c10::reportMemoryUsageToProfiler(void*, long, unsigned long, unsigned long, c10::Device)");
  EXPECT_EQ(Demangle("cudaMalloc"), "cudaMalloc");
  EXPECT_EQ(Demangle("_Znot a name"), "_Znot a name");
}

// A fake 3.12 code object in a buffer: strings, line table and bounds.
class FakeProcess {
 public:
  static constexpr uint64_t kBase = 0x10000;
  FakeProcess() : bytes_(1 << 16, '\0') {}
  void Put(uint64_t addr, const void* p, size_t n) { std::memcpy(&bytes_[addr - kBase], p, n); }
  template <typename T>
  void PutValue(uint64_t addr, T v) { Put(addr, &v, sizeof(v)); }
  // A compact string object at |addr| (ASCII when every char < 128, else UCS-2).
  void PutString(uint64_t addr, const std::u16string& s, bool ascii) {
    PutValue<int64_t>(addr + 16, static_cast<int64_t>(s.size()));
    uint32_t state = (ascii ? 1u : 2u) << 2 | 1u << 5 | (ascii ? 1u << 6 : 0u);
    PutValue<uint32_t>(addr + 32, state);
    for (size_t i = 0; i < s.size(); i++) {
      if (ascii) {
        PutValue<char>(addr + 40 + i, static_cast<char>(s[i]));
      } else {
        PutValue<char16_t>(addr + 56 + 2 * i, s[i]);
      }
    }
  }
  BufferMemory Memory() const { return BufferMemory(kBase, bytes_); }

 private:
  std::string bytes_;
};

TEST(PythonCodeReaderTest, ReadsQualnameFileAndLines) {
  auto layout = LayoutFor(PythonVersion{3, 12, 1});
  ASSERT_TRUE(layout.has_value());
  FakeProcess p;
  const uint64_t code = 0x11000, qual = 0x12000, file = 0x13000, table = 0x14000;
  p.PutValue<int32_t>(code + layout->code_firstlineno, 7);
  p.PutValue<int32_t>(code + layout->code_argcount, 1);
  p.PutValue<uint64_t>(code + layout->code_filename, file);
  p.PutValue<uint64_t>(code + layout->code_qualname, qual);
  p.PutValue<uint64_t>(code + layout->code_linetable, table);
  p.PutString(qual, u"Runner._alloc", true);
  p.PutString(file, u"/srv/m\u00e9t\u00e9o.py", false);
  p.PutValue<int64_t>(table + 16, 2);
  p.PutValue<uint8_t>(table + 32, 0x80 | (11 << 3) | 3);  // +1 line for 4 units
  p.PutValue<uint8_t>(table + 33, 0);
  BufferMemory mem = p.Memory();
  PythonCodeReader reader(mem, *layout);
  const CodeInfo* info = reader.Read(code);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->qualname, "Runner._alloc");
  EXPECT_EQ(info->filename, "/srv/m\xc3\xa9t\xc3\xa9o.py");
  EXPECT_EQ(info->first_line, 7);
  EXPECT_EQ(LineForInstruction(layout->version, info->linetable, info->first_line, 2), 8);
  // The cache answers the same address while the object is unchanged.
  EXPECT_EQ(reader.Read(code), info);
  EXPECT_EQ(reader.cached(), 1u);
  EXPECT_EQ(reader.reuse_detected(), 0u);
}

TEST(PythonCodeReaderTest, DetectsACodeAddressReusedByAnotherFunction) {
  auto layout = LayoutFor(PythonVersion{3, 12, 1});
  const uint64_t code = 0x11000, file = 0x13000, table = 0x14000;
  auto make = [&](uint64_t qual, const std::u16string& name, int first_line) {
    FakeProcess p;
    p.PutValue<int32_t>(code + layout->code_firstlineno, first_line);
    p.PutValue<int32_t>(code + layout->code_argcount, 0);
    p.PutValue<uint64_t>(code + layout->code_filename, file);
    p.PutValue<uint64_t>(code + layout->code_qualname, qual);
    p.PutValue<uint64_t>(code + layout->code_linetable, table);
    p.PutString(qual, name, true);
    p.PutString(file, u"m.py", true);
    return p;
  };
  FakeProcess before = make(0x12000, u"old_function", 3);
  FakeProcess after = make(0x12800, u"new_function", 3);  // same first line, new object
  BufferMemory mem_before = before.Memory(), mem_after = after.Memory();
  // One reader, its memory swapped underneath it as the process runs on.
  struct Switch : ProcessMemory {
    const ProcessMemory* current;
    bool Read(uint64_t a, void* o, size_t n) const override { return current->Read(a, o, n); }
  } live;
  live.current = &mem_before;
  PythonCodeReader reader(live, *layout);
  ASSERT_NE(reader.Read(code), nullptr);
  EXPECT_EQ(reader.Read(code)->qualname, "old_function");
  live.current = &mem_after;
  EXPECT_EQ(reader.Read(code)->qualname, "new_function");
  EXPECT_EQ(reader.reuse_detected(), 1u);
}

TEST(PythonCodeReaderTest, UnreadableMemoryIsNullNotACrash) {
  auto layout = LayoutFor(PythonVersion{3, 11, 0});
  FakeProcess p;
  BufferMemory mem = p.Memory();
  PythonCodeReader reader(mem, *layout);
  EXPECT_EQ(reader.Read(0xdead0000), nullptr);
  EXPECT_EQ(reader.Read(FakeProcess::kBase + 0x100), nullptr);  // zero pointers
  EXPECT_FALSE(reader.ReadString(0).has_value());
}

TEST(PythonLayoutTest, SupportsExactly310To313) {
  for (int minor = 10; minor <= 13; minor++)
    EXPECT_TRUE(LayoutFor(PythonVersion{3, minor, 0}).has_value()) << minor;
  EXPECT_FALSE(LayoutFor(PythonVersion{3, 9, 0}).has_value());
  EXPECT_FALSE(LayoutFor(PythonVersion{3, 14, 0}).has_value());
  EXPECT_FALSE(LayoutFor(PythonVersion{2, 7, 0}).has_value());
}

}  // namespace
}  // namespace gpuflame::symbolizer
