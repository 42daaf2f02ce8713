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

// Records of n elements of T after the header (activity batches).
template <typename T>
Record ArrayRecord(gf_event ev, const std::vector<T>& items) {
  ev.size = items.size();
  return MakeRecord(ev, items.data(), items.size() * sizeof(T));
}

}  // namespace gpuflame::testing

#endif  // GPUFLAME_TESTS_SUPPORT_RECORDS_H_
