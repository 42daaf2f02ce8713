// GF_EV_IO (bpf/io_calls.bpf.h): one model-loading syscall, decoded and
// checked. The name that follows the header is the profiled process's bytes
// (openat's path as it passed it) or a kernel dentry name: any content,
// checked only for its bound and its NUL. fuzz/io_record_fuzzer.cc runs it.
#ifndef GPUFLAME_PROFILER_PIPELINE_IO_RECORD_H_
#define GPUFLAME_PROFILER_PIPELINE_IO_RECORD_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "bpf/gpuflame_abi.h"

namespace gpuflame::profiler {

struct IoRecord {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t start_ns = 0;  // entry, CLOCK_MONOTONIC
  uint64_t end_ns = 0;    // return
  uint16_t call = 0;      // enum gf_io_call
  uint64_t fd = 0;        // openat: its dirfd
  int64_t bytes = 0;      // read, pread64: returned; mmap: asked
  int64_t result = 0;     // the return value (-errno on failure)
  uint64_t arg = 0;       // openat: flags; pread64, mmap: offset; ioctl: request
  std::string_view name;  // into the record: openat's path, mmap's or ioctl's file name, read's ""
  bool truncated = false;
};

// |body|: the bytes after the header. Nothing when the record is not one
// (wrong kind, an unknown call, an end before its start, a name without its
// NUL or over GF_IO_NAME_MAX).
std::optional<IoRecord> DecodeIo(const gf_event& ev, std::span<const uint8_t> body);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PIPELINE_IO_RECORD_H_
