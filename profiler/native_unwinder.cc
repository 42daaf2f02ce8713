#include "profiler/native_unwinder.h"

#include <elfutils/libdwfl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>

namespace gpuflame::profiler {

struct NativeUnwinder::Context {
  pid_t pid = 0;
  gf_user_regs regs{};
  std::span<const uint8_t> stack;
  bool served = false;  // the thread has been handed out once
};

struct NativeUnwinder::Process {
  Dwfl* dwfl = nullptr;
  Context ctx;
  ~Process() {
    if (dwfl) dwfl_end(dwfl);
  }
};

namespace {

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

bool MemoryRead(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* arg) {
  auto* ctx = static_cast<NativeUnwinder::Context*>(arg);
  uint64_t sp = ctx->regs.sp;
  if (addr >= sp && addr + sizeof(Dwarf_Word) <= sp + ctx->stack.size()) {
    std::memcpy(result, ctx->stack.data() + (addr - sp), sizeof(Dwarf_Word));
    return true;
  }
  // Outside the copy: the live process (its memory may have moved on; a
  // mismatch ends the unwind early rather than inventing frames).
  iovec local{result, sizeof(Dwarf_Word)};
  iovec remote{reinterpret_cast<void*>(addr), sizeof(Dwarf_Word)};
  return process_vm_readv(ctx->pid, &local, 1, &remote, 1, 0) == sizeof(Dwarf_Word);
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

const Dwfl_Callbacks kDwflCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
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
  if (!dwfl_frame_pc(frame, &pc, &activation) || pc == 0) return DWARF_CB_ABORT;
  c->pcs->push_back(pc);
  return c->pcs->size() >= c->max ? DWARF_CB_ABORT : DWARF_CB_OK;
}

}  // namespace

NativeUnwinder::NativeUnwinder(symbolizer::NativeSymbolizer& symbols) : symbols_(symbols) {}
NativeUnwinder::~NativeUnwinder() = default;

void NativeUnwinder::Invalidate(pid_t pid) { processes_.erase(pid); }

NativeUnwinder::Process* NativeUnwinder::Get(pid_t pid) {
  auto it = processes_.find(pid);
  if (it != processes_.end()) return it->second.get();
  auto p = std::make_unique<Process>();
  p->ctx.pid = pid;
  p->dwfl = dwfl_begin(&kDwflCallbacks);
  const std::vector<symbolizer::Mapping>* maps = symbols_.Maps(pid);
  if (!p->dwfl || !maps) {
    stats_.failures++;
    return nullptr;
  }
  // Each mapped ELF file once, at its load bias, opened as the symbolizer
  // opened it (through the process's root, or its own path once it is gone).
  absl::flat_hash_map<symbolizer::FileKey, bool> reported;
  dwfl_report_begin(p->dwfl);
  for (const symbolizer::Mapping& m : *maps) {
    if (!m.executable || m.inode == 0 || reported.contains(symbolizer::FileKey::Of(m))) continue;
    reported[symbolizer::FileKey::Of(m)] = true;
    const symbolizer::ElfFile* elf = symbols_.elves().Get(pid, m);
    if (!elf) continue;
    auto bias = elf->LoadBias(m.start, m.offset);
    if (!bias) continue;
    // An fd of this very file (inode checked), whoever opened it first: the
    // path the cache used may belong to a process that has gone.
    symbolizer::PinnedFile file = symbolizer::PinnedFile::Open(pid, m);
    if (!file.ok()) continue;
    int fd = dup(file.fd());
    std::string name(m.Basename());
    if (!dwfl_report_elf(p->dwfl, name.c_str(), m.path.c_str(), fd, *bias, false) && fd >= 0) close(fd);
  }
  if (dwfl_report_end(p->dwfl, nullptr, nullptr) != 0 ||
      !dwfl_attach_state(p->dwfl, nullptr, pid, &kCallbacks, &p->ctx)) {
    stats_.failures++;
    return nullptr;
  }
  return processes_.emplace(pid, std::move(p)).first->second.get();
}

std::vector<uint64_t> NativeUnwinder::Unwind(pid_t pid, const gf_user_regs& regs, std::span<const uint8_t> stack,
                                             size_t max_frames) {
  std::vector<uint64_t> pcs;
  Process* p = Get(pid);
  if (!p) return pcs;
  p->ctx.regs = regs;
  p->ctx.stack = stack;
  Collect c{&pcs, max_frames};
  stats_.unwinds++;
  // Unwinding stops at the outermost frame or the first frame it cannot
  // unwind through; either way what it found is kept.
  dwfl_getthread_frames(p->dwfl, pid, OnFrame, &c);
  stats_.frames += pcs.size();
  return pcs;
}

}  // namespace gpuflame::profiler
