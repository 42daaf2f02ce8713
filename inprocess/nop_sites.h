// Never-run instruction sites an agent attaches uprobes to, with a shared
// semaphore counting them (bpf/gpuflame_abi.h: the hello and thrift sites).
// Written in assembly: each site must be one instruction at the fixed stride
// GF_SITE_BYTES, which no compiler promises for a C++ body.
#ifndef GPUFLAME_INPROCESS_NOP_SITES_H_
#define GPUFLAME_INPROCESS_NOP_SITES_H_

#include "bpf/gpuflame_abi.h"

#define GF_NOP_SITES_STR2(x) #x
#define GF_NOP_SITES_STR(x) GF_NOP_SITES_STR2(x)

// Defines the exported function |name|: |count| nops, then a return. At
// namespace scope, once per name.
#define GF_NOP_SITES(name, count) \
  asm(".pushsection .text." #name ",\"ax\",%progbits\n"   \
      ".globl " #name "\n"                                 \
      ".type " #name ", %function\n" #name ":\n"           \
      ".rept " GF_NOP_SITES_STR(count) "\n"                \
      "nop\n"                                              \
      ".endr\n"                                            \
      "ret\n"                                              \
      ".size " #name ", . - " #name "\n"                   \
      ".popsection\n")

#endif  // GPUFLAME_INPROCESS_NOP_SITES_H_
