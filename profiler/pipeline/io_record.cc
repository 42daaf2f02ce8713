#include "profiler/pipeline/io_record.h"

#include <algorithm>

namespace gpuflame::profiler {

std::optional<IoRecord> DecodeIo(const gf_event& ev, std::span<const uint8_t> body) {
  if (ev.kind != GF_EV_IO || ev.api < GF_IO_OPENAT || ev.api > GF_IO_IOCTL || ev.arg2 > ev.ts_ns) return std::nullopt;
  if (body.empty() || body.size() > GF_IO_NAME_MAX) return std::nullopt;
  // The probe sends the copy's length, NUL included: the NUL ends the record.
  const auto nul = std::find(body.begin(), body.end(), uint8_t{0});
  if (nul == body.end()) return std::nullopt;
  IoRecord r;
  r.pid = ev.pid;
  r.tid = ev.tid;
  r.start_ns = ev.arg2;
  r.end_ns = ev.ts_ns;
  r.call = ev.api;
  r.fd = ev.addr;
  // A size the kernel took as a count fits in 63 bits; anything past is the
  // process's nonsense (mmap's length as asked), kept in range.
  r.bytes = static_cast<int64_t>(std::min<uint64_t>(ev.size, INT64_MAX));
  r.result = static_cast<int64_t>(ev.arg0);
  r.arg = ev.arg1;
  r.name = std::string_view(reinterpret_cast<const char*>(body.data()), static_cast<size_t>(nul - body.begin()));
  r.truncated = ev.flags & GF_EVF_IO_NAME_TRUNCATED;
  return r;
}

}  // namespace gpuflame::profiler
