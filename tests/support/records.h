// Ring-buffer records as the BPF programs write them (bpf/gpuflame_abi.h),
// for the unit tests and benchmarks that feed the pipeline without a
// kernel. Python frames are synthetic: distinct |stack| numbers give
// distinct code addresses (never readable: they resolve to markers when no
// process registry is attached), so stacks intern apart.
#ifndef GPUFLAME_TESTS_SUPPORT_RECORDS_H_
#define GPUFLAME_TESTS_SUPPORT_RECORDS_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "bpf/gpuflame_abi.h"

namespace gpuflame::testing {

using Record = std::vector<uint8_t>;

// A zeroed header; tid is the pid unless given, ts 1 ns.
inline gf_event Header(uint8_t kind, uint8_t domain, uint16_t api, uint32_t pid, uint32_t tid = 0) {
  gf_event ev{};
  ev.kind = kind;
  ev.domain = domain;
  ev.api = api;
  ev.pid = pid;
  ev.tid = tid ? tid : pid;
  ev.ts_ns = 1;
  return ev;
}

// |depth| synthetic frames of stack number |stack|, written at |at|.
inline void PutPythonFrames(Record& rec, size_t at, int depth, uint64_t stack) {
  for (int i = 0; i < depth; i++) {
    gf_py_frame f{};
    f.code = 0x7f0000000000ull + static_cast<uint64_t>(i) * 4096 + stack * 64;
    f.instr = static_cast<uint32_t>(i * 3);
    std::memcpy(rec.data() + at + static_cast<size_t>(i) * sizeof(f), &f, sizeof(f));
  }
}

// The header followed by |bytes| of |payload| (zeros when null).
inline Record MakeRecord(const gf_event& ev, const void* payload = nullptr, size_t bytes = 0) {
  Record rec(sizeof(ev) + bytes);
  std::memcpy(rec.data(), &ev, sizeof(ev));
  if (payload && bytes) std::memcpy(rec.data() + sizeof(ev), payload, bytes);
  return rec;
}

// The header (py_count set) followed by |depth| synthetic Python frames.
inline Record PythonRecord(gf_event ev, int depth, uint64_t stack) {
  ev.py_count = static_cast<uint16_t>(depth);
  Record rec = MakeRecord(ev, nullptr, static_cast<size_t>(depth) * sizeof(gf_py_frame));
  PutPythonFrames(rec, sizeof(ev), depth, stack);
  return rec;
}

// A record with |depth| frames of |stack| and their ID after them, as BPF
// sends a stack the first time (GF_EVF_STACK_NEW, struct gf_stack_id).
inline Record NewStackRecord(gf_event ev, int depth, uint64_t stack, gf_stack_id id) {
  ev.flags |= GF_EVF_STACK_NEW;
  ev.py_count = static_cast<uint16_t>(depth);
  const size_t frames = static_cast<size_t>(depth) * sizeof(gf_py_frame);
  Record rec = MakeRecord(ev, nullptr, frames + sizeof(id));
  PutPythonFrames(rec, sizeof(ev), depth, stack);
  std::memcpy(rec.data() + sizeof(ev) + frames, &id, sizeof(id));
  return rec;
}

// A record naming |depth| frames sent before by their ID (GF_EVF_STACK_ID).
inline Record StackIdRecord(gf_event ev, int depth, gf_stack_id id) {
  ev.flags |= GF_EVF_STACK_ID;
  ev.py_count = static_cast<uint16_t>(depth);
  return MakeRecord(ev, &id, sizeof(id));
}

// Records of n elements of T after the header (activity batches).
template <typename T>
Record ArrayRecord(gf_event ev, const std::vector<T>& items) {
  ev.size = items.size();
  return MakeRecord(ev, items.data(), items.size() * sizeof(T));
}

// A gpuflame:tensor_batch as libgpuflame_cupti.so writes it: whole inner
// records, each 8-byte aligned (bpf/gpuflame_abi.h).
class TensorBatch {
 public:
  explicit TensorBatch(uint32_t pid) : pid_(pid) {}
  TensorBatch& Hook(uint64_t ts_ns, uint32_t status = GF_TENSOR_HOOK_LIVE, uint32_t abi = GF_ABI_VERSION) {
    gf_event ev = Inner(GF_EV_TENSOR_HOOK, ts_ns);
    ev.arg0 = status;
    ev.arg2 = abi;
    return Put(ev, nullptr, 0);
  }
  TensorBatch& Stack(uint64_t id, int depth, uint64_t stack) {
    gf_event ev = Inner(GF_EV_PY_STACK, 1);
    ev.arg0 = id;
    ev.py_count = static_cast<uint16_t>(depth);
    Record frames(static_cast<size_t>(depth) * sizeof(gf_py_frame));
    PutPythonFrames(frames, 0, depth, stack);
    return Put(ev, frames.data(), frames.size());
  }
  // |allocated|/|reserved|: the allocator's totals the event reports.
  TensorBatch& Alloc(uint64_t ts_ns, uint64_t addr, uint64_t size, uint64_t stack_id, uint64_t allocated = 0,
                     uint64_t reserved = 0) {
    gf_event ev = Inner(GF_EV_ALLOC, ts_ns);
    ev.flags = GF_EVF_STACK_REF;
    ev.addr = addr;
    ev.size = size;
    ev.arg1 = allocated;
    ev.arg2 = reserved;
    return Put(ev, &stack_id, sizeof(stack_id));
  }
  // PyTorch's out-of-memory report (c10::reportOutOfMemoryToProfiler).
  TensorBatch& OomReport(uint64_t ts_ns, uint64_t bytes, uint64_t stack_id, uint64_t allocated, uint64_t reserved) {
    gf_event ev = Inner(GF_EV_OOM_REPORT, ts_ns);
    ev.flags = GF_EVF_STACK_REF;
    ev.size = bytes;
    ev.arg1 = allocated;
    ev.arg2 = reserved;
    return Put(ev, &stack_id, sizeof(stack_id));
  }
  // Taken by sampling: it stands for |stands_for| bytes.
  TensorBatch& SampledAlloc(uint64_t ts_ns, uint64_t addr, uint64_t size, uint64_t stack_id, uint64_t stands_for) {
    gf_event ev = Inner(GF_EV_ALLOC, ts_ns);
    ev.flags = GF_EVF_STACK_REF | GF_EVF_SAMPLED;
    ev.addr = addr;
    ev.size = size;
    const uint64_t payload[2] = {stack_id, stands_for};
    return Put(ev, payload, sizeof(payload));
  }
  // An engine thread's allocation during a backward() call: |ref| is the
  // caller's stack ID, or with |ambiguous| the number of calls running.
  TensorBatch& AutogradAlloc(uint64_t ts_ns, uint64_t addr, uint64_t size, uint64_t ref, bool ambiguous = false) {
    gf_event ev = Inner(GF_EV_ALLOC, ts_ns);
    ev.flags = GF_EVF_STACK_REF | GF_EVF_PY_NO_THREAD | GF_EVF_AUTOGRAD | (ambiguous ? GF_EVF_AUTOGRAD_AMBIGUOUS : 0);
    ev.addr = addr;
    ev.size = size;
    return Put(ev, &ref, sizeof(ref));
  }
  TensorBatch& Free(uint64_t ts_ns, uint64_t addr) {
    gf_event ev = Inner(GF_EV_FREE, ts_ns);
    ev.addr = addr;
    return Put(ev, nullptr, 0);
  }
  // The allocator's totals after an event that was not sent (sampled).
  TensorBatch& Totals(uint64_t ts_ns, uint64_t device, uint64_t allocated, uint64_t reserved) {
    gf_event ev = Inner(GF_EV_TENSOR_TOTALS, ts_ns);
    ev.arg0 = device;
    ev.arg1 = allocated;
    ev.arg2 = reserved;
    return Put(ev, nullptr, 0);
  }
  // The ring-buffer record the BPF program makes of it.
  Record Build() const {
    gf_event ev = Header(GF_EV_TENSOR_BATCH, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, pid_);
    ev.size = bytes_.size();
    return MakeRecord(ev, bytes_.data(), bytes_.size());
  }

 private:
  gf_event Inner(uint8_t kind, uint64_t ts_ns) const {
    gf_event ev = Header(kind, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, 77);  // the library's own pid view
    ev.ts_ns = ts_ns;
    return ev;
  }
  TensorBatch& Put(const gf_event& ev, const void* payload, size_t bytes) {
    size_t at = bytes_.size();
    bytes_.resize(at + ((sizeof(ev) + bytes + 7) & ~size_t{7}));
    std::memcpy(bytes_.data() + at, &ev, sizeof(ev));
    if (bytes) std::memcpy(bytes_.data() + at + sizeof(ev), payload, bytes);
    return *this;
  }
  uint32_t pid_;
  Record bytes_;
};

}  // namespace gpuflame::testing

#endif  // GPUFLAME_TESTS_SUPPORT_RECORDS_H_
