// A copy of the calling thread's registers and stack, taken the way the BPF
// program takes a profiled thread's at a probe (registers, then up to
// GF_USER_STACK_BYTES from sp, less at the stack's top): for unwinder tests
// and benchmarks that need a real stack without a probe.
#ifndef GPUFLAME_TESTS_SUPPORT_CAPTURE_STACK_H_
#define GPUFLAME_TESTS_SUPPORT_CAPTURE_STACK_H_

#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "bpf/gpuflame_abi.h"

namespace gpuflame::testing {

struct Captured {
  gf_user_regs regs{};
  std::vector<uint8_t> stack;
};

__attribute__((noinline)) inline Captured CaptureHere() {
  ucontext_t uc;
  getcontext(&uc);
  Captured c;
  c.regs.ip = static_cast<uint64_t>(uc.uc_mcontext.gregs[REG_RIP]);
  c.regs.sp = static_cast<uint64_t>(uc.uc_mcontext.gregs[REG_RSP]);
  c.regs.bp = static_cast<uint64_t>(uc.uc_mcontext.gregs[REG_RBP]);
  c.stack.resize(GF_USER_STACK_BYTES);
  iovec local{c.stack.data(), c.stack.size()};
  iovec remote{reinterpret_cast<void*>(c.regs.sp), c.stack.size()};
  ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  c.stack.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return c;
}

}  // namespace gpuflame::testing

#endif  // GPUFLAME_TESTS_SUPPORT_CAPTURE_STACK_H_
