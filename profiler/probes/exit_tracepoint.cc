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
  if (!t || !btf_is_func_proto(t) || btf_vlen(t) < 3) return false;
  // The third is group_dead only if it is a bool (through its typedef):
  // a kernel that added some other argument there must not get watch_exit.
  const int arg = btf__resolve_type(vmlinux.get(), btf_params(t)[2].type);
  const btf_type* bool_type = arg > 0 ? btf__type_by_id(vmlinux.get(), arg) : nullptr;
  return bool_type && btf_is_int(bool_type) && bool_type->size == 1;
}

}  // namespace

bool ExitTracepointPassesGroupDead() {
  static const bool passes = ReadFromBtf();
  return passes;
}

}  // namespace gpuflame::profiler
