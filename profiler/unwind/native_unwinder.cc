#include "profiler/unwind/native_unwinder.h"

#include <elfutils/libdwfl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <ctime>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "inspect/bounded_read.h"

namespace gpuflame::profiler {

using inspect::FileKey;

bool ReadCopiedWord(std::span<const uint8_t> copy, uint64_t sp, uint64_t addr, uint64_t* out) {
  // Written without addr + 8 or sp + size, either of which wraps for the
  // garbage addresses a bad unwind produces (an rbp of 0xffff...).
  if (addr < sp || copy.size() < sizeof(uint64_t) || addr - sp > copy.size() - sizeof(uint64_t)) return false;
  std::memcpy(out, copy.data() + (addr - sp), sizeof(uint64_t));
  return true;
}

struct NativeUnwinder::Context {
  static constexpr uint64_t kPage = 4096;
  static constexpr size_t kMaxPages = 16;  // bounds live reads per unwind
  pid_t pid = 0;
  gf_user_regs regs{};
  std::span<const uint8_t> stack;
  // Pages of the live stack above the copy, read during this unwind (the
  // unwinder's one scratch buffer: unwinds never overlap).
  std::array<std::array<uint8_t, kPage>, kMaxPages>* pages = nullptr;
  std::array<uint64_t, kMaxPages> page_addr{};
  size_t pages_used = 0;
};

struct NativeUnwinder::Process {
  struct Module {
    uint64_t start = 0, end = 0;  // executable mapping
    uint64_t bias = 0;
    // nullptr: no readable CFI. Held, so that the cache keeps it while any
    // process's list does (CfiCache::Sweep).
    std::shared_ptr<CfiTable> cfi;
  };
  std::vector<Module> modules;  // sorted by start
  Dwfl* dwfl = nullptr;         // built on the first fallback
  bool dwfl_failed = false;
  Context ctx;
  ~Process() {
    if (dwfl) dwfl_end(dwfl);
  }
  const Module* Find(uint64_t pc) const {
    auto it =
        std::upper_bound(modules.begin(), modules.end(), pc, [](uint64_t a, const Module& m) { return a < m.start; });
    if (it == modules.begin()) return nullptr;
    --it;
    return pc < it->end ? &*it : nullptr;
  }
};

namespace {

// Linux never maps below mmap_min_addr (64 KiB by default).
constexpr uint64_t kMinCodeAddress = 0x10000;

// x86-64 DWARF register numbers: 6 rbp, 7 rsp, 16 return address (rip).
constexpr int kDwarfRbp = 6;
constexpr int kDwarfRsp = 7;

pid_t NextThread(Dwfl*, void* arg, void** thread_argp) {
  auto* ctx = static_cast<NativeUnwinder::Context*>(arg);
  if (*thread_argp != nullptr) return 0;  // one thread: the one that hit the probe
  *thread_argp = arg;
  return ctx->pid;
}

bool GetThread(Dwfl*, pid_t tid, void* arg, void** thread_argp) {
  auto* ctx = static_cast<NativeUnwinder::Context*>(arg);
  *thread_argp = arg;
  return tid == ctx->pid;
}

bool ReadWord(NativeUnwinder::Context* ctx, uint64_t addr, uint64_t* result) {
  if (ReadCopiedWord(ctx->stack, ctx->regs.sp, addr, result)) return true;
  // Outside the copy: the live process (its memory may have moved on; a
  // mismatch ends the unwind early rather than inventing frames). Read a
  // page at a time, since the next frames' words are usually next to this one.
  uint64_t page = addr & ~(NativeUnwinder::Context::kPage - 1);
  // Through a worker, in bounded time: the address is the process's word
  // for it, and a page with a stalled file behind it must not stall us.
  if (addr - page > NativeUnwinder::Context::kPage - sizeof(uint64_t))
    return inspect::ReadWithDeadline(ctx->pid, addr, result, sizeof(uint64_t));
  for (size_t i = 0; i < ctx->pages_used; i++) {
    if (ctx->page_addr[i] == page) {
      std::memcpy(result, (*ctx->pages)[i].data() + (addr - page), sizeof(uint64_t));
      return true;
    }
  }
  if (ctx->pages_used == NativeUnwinder::Context::kMaxPages) return false;
  auto& buf = (*ctx->pages)[ctx->pages_used];
  if (!inspect::ReadWithDeadline(ctx->pid, page, buf.data(), buf.size())) return false;
  ctx->page_addr[ctx->pages_used++] = page;
  std::memcpy(result, buf.data() + (addr - page), sizeof(uint64_t));
  return true;
}

bool MemoryRead(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* arg) {
  static_assert(sizeof(Dwarf_Word) == sizeof(uint64_t));
  return ReadWord(static_cast<NativeUnwinder::Context*>(arg), addr, reinterpret_cast<uint64_t*>(result));
}

bool SetInitialRegisters(Dwfl_Thread* thread, void* arg) {
  auto* ctx = static_cast<NativeUnwinder::Context*>(arg);
  Dwarf_Word bp = ctx->regs.bp, sp = ctx->regs.sp;
  if (!dwfl_thread_state_registers(thread, kDwarfRbp, 1, &bp)) return false;
  if (!dwfl_thread_state_registers(thread, kDwarfRsp, 1, &sp)) return false;
  dwfl_thread_state_register_pc(thread, ctx->regs.ip);
  return true;
}

const Dwfl_Thread_Callbacks kCallbacks = {
    .next_thread = NextThread,
    .get_thread = GetThread,
    .memory_read = MemoryRead,
    .set_initial_registers = SetInitialRegisters,
    .detach = nullptr,
    .thread_detach = nullptr,
};

// No separate debuginfo search: libdwfl's would open() candidates named
// after the target's paths in our mount namespace (its directory plus
// .debug/, the debuglink it chose), where a FIFO would hold this thread
// forever. The unwinder needs .eh_frame (or .debug_frame in the file itself,
// which libdwfl reads first), both in the file reported with its fd.
int NoSeparateDebuginfo(Dwfl_Module*, void**, const char*, Dwarf_Addr, const char*, const char*, GElf_Word,
                        char** debuginfo_file_name) {
  *debuginfo_file_name = nullptr;
  return -1;
}

// A module's file is the CfiTable's libelf handle of it (the module's
// userdata), shared: libdwfl opens nothing and holds no descriptor, and one
// mapping of each file serves every process. Called on a module's first use.
int SharedElf(Dwfl_Module*, void** userdata, const char*, Dwarf_Addr, char**, Elf** elfp) {
  const auto* table = static_cast<const CfiTable*>(*userdata);
  *elfp = table ? table->ElfReference() : nullptr;
  return -1;  // no descriptor; with no handle either, the module has no file
}

const Dwfl_Callbacks kDwflCallbacks = {
    .find_elf = SharedElf,
    .find_debuginfo = NoSeparateDebuginfo,
    .section_address = nullptr,
    .debuginfo_path = nullptr,
};

struct Collect {
  std::vector<uint64_t>* pcs;
  size_t max;
};

int OnFrame(Dwfl_Frame* frame, void* arg) {
  auto* c = static_cast<Collect*>(arg);
  Dwarf_Addr pc = 0;
  bool activation = false;
  if (!dwfl_frame_pc(frame, &pc, &activation) || pc < kMinCodeAddress) return DWARF_CB_ABORT;
  c->pcs->push_back(pc);
  return c->pcs->size() >= c->max ? DWARF_CB_ABORT : DWARF_CB_OK;
}

}  // namespace

struct NativeUnwinder::Scratch {
  std::array<std::array<uint8_t, Context::kPage>, Context::kMaxPages> pages;
};

NativeUnwinder::NativeUnwinder(symbolizer::NativeSymbolizer& symbols)
    : symbols_(symbols), scratch_(std::make_unique<Scratch>()) {}
NativeUnwinder::~NativeUnwinder() = default;

void NativeUnwinder::Invalidate(pid_t pid) {
  processes_.erase(pid);
  stale_checked_ns_.erase(pid);
}

size_t NativeUnwinder::Sweep(int64_t now_ns, int64_t keep_ns, absl::FunctionRef<bool(pid_t)> alive) {
  absl::erase_if(processes_, [&](const auto& kv) { return !alive(kv.first); });
  absl::erase_if(stale_checked_ns_, [&](const auto& kv) { return !processes_.contains(kv.first); });
  return cfi_.Sweep(now_ns, keep_ns);
}

bool NativeUnwinder::Stale(Process& p, uint64_t pc, bool leaf) {
  if (pc < kMinCodeAddress || p.Find(pc)) return false;
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t now = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
  uint64_t& last = stale_checked_ns_[p.ctx.pid];
  // Not for a leaf: a probe fired there, in a library file, so a module
  // list without it is older than the library's mapping, whatever another
  // unwind checked in the last 50 ms. Rate-limited, the first call of a
  // process (its unwind right after another) lost its whole stack.
  if (!leaf && last && now - last < kStaleCheckNs) return false;
  last = now;
  const inspect::Mapping* m = symbols_.FindMapping(p.ctx.pid, pc);
  return m && m->executable && m->inode != 0;
}

NativeUnwinder::Process* NativeUnwinder::Get(pid_t pid) {
  auto it = processes_.find(pid);
  if (it != processes_.end()) return it->second.get();
  const std::vector<inspect::Mapping>* maps = symbols_.Maps(pid);
  if (!maps) {
    stats_.failures++;
    return nullptr;
  }
  auto p = std::make_unique<Process>();
  p->ctx.pid = pid;
  for (const inspect::Mapping& m : *maps) {
    if (!m.executable || m.inode == 0) continue;
    const symbolizer::ElfFile* elf = symbols_.elves().Get(pid, m);
    if (!elf) continue;
    auto bias = elf->LoadBias(m.start, m.offset);
    if (!bias) continue;
    // Keyed by build ID, so one libcuda's rows serve every process; a file
    // without one is keyed by its identity on disk.
    FileKey key = FileKey::Of(m);
    std::string cache_key =
        !elf->build_id().empty() ? elf->build_id() : absl::StrFormat("file:%u:%u:%u", key.major, key.minor, key.inode);
    std::shared_ptr<CfiTable> cfi = cfi_.Get(cache_key, [&] {
      // An fd of this very file (inode checked), whoever opened it first.
      inspect::PinnedFile file = inspect::PinnedFile::Open(pid, m);
      return file.Dup();  // invalid if |file| is
    });
    p->modules.push_back({m.start, m.end, *bias, std::move(cfi)});
  }
  std::sort(p->modules.begin(), p->modules.end(),
            [](const Process::Module& a, const Process::Module& b) { return a.start < b.start; });
  return processes_.emplace(pid, std::move(p)).first->second.get();
}

Dwfl* NativeUnwinder::DwflFor(Process& p) {
  if (p.dwfl || p.dwfl_failed) return p.dwfl;
  pid_t pid = p.ctx.pid;
  const std::vector<inspect::Mapping>* maps = symbols_.Maps(pid);
  Dwfl* dwfl = dwfl_begin(&kDwflCallbacks);
  if (!dwfl || !maps) {
    if (dwfl) dwfl_end(dwfl);
    p.dwfl_failed = true;
    stats_.failures++;
    return nullptr;
  }
  // Each file once per load bias, from the module list (a file libelf could
  // not read has no CfiTable, and libdwfl could not have read it either).
  // Reported by span alone: the file is handed over on first use (SharedElf).
  // A span ends no later than this process's mappings of the file: the
  // table's file is whichever process's copy with that build ID came first,
  // and a copy with a segment more (patchelf adds one) must not claim the
  // next library's addresses here.
  absl::flat_hash_map<inspect::FileKey, uint64_t> mapped_end;
  for (const inspect::Mapping& m : *maps) {
    if (m.inode == 0) continue;
    uint64_t& end = mapped_end[inspect::FileKey::Of(m)];
    end = std::max(end, m.end);
  }
  absl::flat_hash_set<std::pair<const CfiTable*, uint64_t>> reported;
  dwfl_report_begin(dwfl);
  for (const inspect::Mapping& m : *maps) {
    if (!m.executable || m.inode == 0) continue;
    const Process::Module* mod = p.Find(m.start);
    if (!mod || !mod->cfi || !mod->cfi->load_span() || !reported.insert({mod->cfi.get(), mod->bias}).second) continue;
    const CfiTable::LoadSpan& span = *mod->cfi->load_span();
    uint64_t low = 0, high = 0;
    if (__builtin_add_overflow(mod->bias, span.low, &low) || __builtin_add_overflow(mod->bias, span.high, &high))
      continue;
    high = std::min(high, mapped_end[inspect::FileKey::Of(m)]);
    if (high <= low) continue;
    std::string name(m.Basename());
    Dwfl_Module* module = dwfl_report_module(dwfl, name.c_str(), low, high);
    if (!module) continue;
    void** userdata = nullptr;
    dwfl_module_info(module, &userdata, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    if (userdata) *userdata = mod->cfi.get();
  }
  if (dwfl_report_end(dwfl, nullptr, nullptr) != 0 || !dwfl_attach_state(dwfl, nullptr, pid, &kCallbacks, &p.ctx)) {
    dwfl_end(dwfl);
    p.dwfl_failed = true;
    stats_.failures++;
    return nullptr;
  }
  return p.dwfl = dwfl;
}

bool NativeUnwinder::FastUnwind(Process& p, size_t max_frames, std::vector<uint64_t>& pcs) {
  Context& ctx = p.ctx;
  uint64_t pc = ctx.regs.ip, sp = ctx.regs.sp, bp = ctx.regs.bp;
  bool bp_known = true;
  pcs.push_back(pc);
  while (pcs.size() < max_frames) {
    // Past the leaf, pc is a return address: its call is the byte before.
    uint64_t lookup = pcs.size() == 1 ? pc : pc - 1;
    const Process::Module* m = p.Find(lookup);
    if (!m) return true;  // JIT code or an anonymous mapping: libdwfl could not go on either
    if (!m->cfi) return false;
    const UnwindRow& row = m->cfi->Find(lookup - m->bias);
    if (row.kind == UnwindRow::Kind::kOutermost) return true;
    if (row.kind != UnwindRow::Kind::kFrame) return false;
    if (row.cfa == UnwindRow::Cfa::kRbp && !bp_known) return false;
    uint64_t cfa = (row.cfa == UnwindRow::Cfa::kRsp ? sp : bp) + static_cast<int64_t>(row.cfa_offset);
    uint64_t ra = 0;
    if (!ReadWord(&ctx, cfa + static_cast<int64_t>(row.ra_offset), &ra)) return true;
    if (row.rbp == UnwindRow::Rbp::kAtCfa) {
      bp_known = ReadWord(&ctx, cfa + static_cast<int64_t>(row.rbp_offset), &bp);
    } else if (row.rbp == UnwindRow::Rbp::kUndefined) {
      bp_known = false;
    }
    // The stack grows down: a caller's frame is above its callee's. Anything
    // else is a corrupt or misread stack; stop rather than loop. A return
    // address in the first 64 KiB (never mapped: mmap_min_addr) is a misread
    // too, not a frame to show.
    if (ra < kMinCodeAddress || cfa <= sp) return true;
    sp = cfa;
    pc = ra;
    pcs.push_back(pc);
  }
  return true;
}

void NativeUnwinder::DwflUnwind(Process& p, size_t max_frames, std::vector<uint64_t>& pcs) {
  Dwfl* dwfl = DwflFor(p);
  if (!dwfl) return;
  Collect c{&pcs, max_frames};
  // Unwinding stops at the outermost frame or the first frame it cannot
  // unwind through; either way what it found is kept.
  dwfl_getthread_frames(dwfl, p.ctx.pid, OnFrame, &c);
}

std::vector<uint64_t> NativeUnwinder::Unwind(pid_t pid, const gf_user_regs& regs, std::span<const uint8_t> stack,
                                             size_t max_frames) {
  std::vector<uint64_t> pcs;
  Process* p = Get(pid);
  if (!p) return pcs;
  p->ctx.regs = regs;
  p->ctx.stack = stack;
  p->ctx.pages_used = 0;
  p->ctx.pages = &scratch_->pages;
  stats_.unwinds++;
  for (int attempt = 0;; attempt++) {
    if (fast_path_ && FastUnwind(*p, max_frames, pcs)) {
      stats_.fast++;
    } else {
      pcs.clear();
      stats_.fallback++;
      DwflUnwind(*p, max_frames, pcs);
    }
    // Stopped in a library mapped since the modules were listed (dlopen()
    // of a file no probe watches, e.g. a C++ extension through ctypes):
    // list them again and unwind once more.
    if (attempt > 0 || pcs.empty() || !Stale(*p, pcs.back(), /*leaf=*/pcs.size() == 1)) break;
    stats_.relisted++;
    processes_.erase(pid);
    p = Get(pid);
    if (!p) return {};
    p->ctx.regs = regs;
    p->ctx.stack = stack;
    p->ctx.pages_used = 0;
    p->ctx.pages = &scratch_->pages;
    pcs.clear();
  }
  stats_.frames += pcs.size();
  return pcs;
}

}  // namespace gpuflame::profiler
