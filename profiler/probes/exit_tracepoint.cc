#include "profiler/probes/exit_tracepoint.h"

#include <bpf/btf.h>

#include <memory>

namespace gpuflame::profiler {
namespace {

bool ReadFromBtf() {
  std::unique_ptr<btf, decltype(&btf__free)> vmlinux(btf__load_vmlinux_btf(), btf__free);
  if (!vmlinux) return false;
  // A raw tracepoint's BTF is typedef btf_trace_<name>: a pointer to its
  // prototype, whose first parameter is the tracepoint's own data.
  const int id = btf__find_by_name_kind(vmlinux.get(), "btf_trace_sched_process_exit", BTF_KIND_TYPEDEF);
  if (id <= 0) return false;
  const btf_type* t = btf__type_by_id(vmlinux.get(), btf__type_by_id(vmlinux.get(), id)->type);
  if (!t || !btf_is_ptr(t)) return false;
  t = btf__type_by_id(vmlinux.get(), t->type);
  return t && btf_is_func_proto(t) && btf_vlen(t) >= 3;
}

}  // namespace

bool ExitTracepointPassesGroupDead() {
  static const bool passes = ReadFromBtf();
  return passes;
}

}  // namespace gpuflame::profiler
