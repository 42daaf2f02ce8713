#include "exporters/pyroscope/spool.h"

#include <cstdio>
#include <memory>

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "exporters/pprof/pprof_writer.h"

namespace gpuflame::exporters {
namespace {

constexpr char kMagic[8] = {'G', 'F', 'S', 'P', 'O', 'O', 'L', '1'};
constexpr size_t kHeader = sizeof(kMagic) + 4;
constexpr size_t kMaxRequest = 512u << 20;  // bound what we inflate from disk

}  // namespace

absl::StatusOr<Spool> Spool::Open(const std::string& dir, uint64_t max_bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrFormat("cannot create spool directory %s: %s", dir, ec.message()));
  Spool s;
  s.dir_ = dir;
  s.max_bytes_ = max_bytes;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = e.path().filename();
    if (name.size() != 25 || name.substr(20) != ".push") continue;
    uint64_t seq = 0;
    if (!absl::SimpleAtoi(name.substr(0, 20), &seq)) continue;
    s.files_.push_back({seq, static_cast<uint64_t>(e.file_size(ec))});
    s.bytes_ += s.files_.back().size;
  }
  std::sort(s.files_.begin(), s.files_.end(), [](const File& a, const File& b) { return a.sequence < b.sequence; });
  s.next_ = s.files_.empty() ? 0 : s.files_.back().sequence + 1;
  return s;
}

std::string Spool::PathOf(uint64_t sequence) const { return absl::StrFormat("%s/%020d.push", dir_, sequence); }

absl::Status Spool::Put(const std::string& body, uint32_t series) {
  std::string out(kHeader + ZSTD_compressBound(body.size()), '\0');
  std::memcpy(out.data(), kMagic, sizeof(kMagic));
  std::memcpy(out.data() + sizeof(kMagic), &series, 4);
  // With a content checksum, a byte changed on disk fails decompression
  // instead of replaying a different profile as if it were the one spooled.
  // zstd's own (XXH64 of the content, verified by ZSTD_decompress as it
  // inflates) rather than a CRC of ours in the header: no second pass over
  // the body and no checksum code of our own to get wrong.
  std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  if (!cctx) return absl::ResourceExhaustedError("zstd: no compression context");
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, 3);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
  size_t n = ZSTD_compress2(cctx.get(), out.data() + kHeader, out.size() - kHeader, body.data(), body.size());
  if (ZSTD_isError(n)) return absl::InternalError(ZSTD_getErrorName(n));
  out.resize(kHeader + n);
  // Make room: the oldest windows matter least.
  while (!files_.empty() && bytes_ + out.size() > max_bytes_) {
    Remove(files_.front().sequence);
    dropped_full_++;
  }
  if (out.size() > max_bytes_) {
    dropped_full_++;
    return absl::ResourceExhaustedError("request larger than the whole spool");
  }
  uint64_t seq = next_++;
  if (auto s = WriteFile(PathOf(seq), out); !s.ok()) return s;
  files_.push_back({seq, out.size()});
  bytes_ += out.size();
  return absl::OkStatus();
}

std::optional<SpooledRequest> Spool::Oldest() {
  while (!files_.empty()) {
    const File f = files_.front();
    std::ifstream in(PathOf(f.sequence), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string raw = ss.str();
    SpooledRequest r;
    r.sequence = f.sequence;
    const char* why = "not a gpuflame spool file";
    if (in && raw.size() >= kHeader && std::memcmp(raw.data(), kMagic, sizeof(kMagic)) == 0) {
      std::memcpy(&r.series, raw.data() + sizeof(kMagic), 4);
      unsigned long long size = ZSTD_getFrameContentSize(raw.data() + kHeader, raw.size() - kHeader);
      why = "unreadable size";
      if (size != ZSTD_CONTENTSIZE_ERROR && size != ZSTD_CONTENTSIZE_UNKNOWN && size <= kMaxRequest) {
        r.body.resize(size);
        // Checks the content checksum that Put wrote.
        size_t n = ZSTD_decompress(r.body.data(), r.body.size(), raw.data() + kHeader, raw.size() - kHeader);
        if (!ZSTD_isError(n) && n == size) return r;
        why = ZSTD_isError(n) ? ZSTD_getErrorName(n) : "truncated";
      }
    }
    // Each damaged file is said once: it is removed right after.
    std::fprintf(stderr, "gpuflame: warning: spool file %s is damaged (%s): dropped, not replayed\n",
                 PathOf(f.sequence).c_str(), why);
    corrupt_++;
    Remove(f.sequence);
  }
  return std::nullopt;
}

void Spool::Remove(uint64_t sequence) {
  auto it = std::find_if(files_.begin(), files_.end(), [&](const File& f) { return f.sequence == sequence; });
  if (it == files_.end()) return;
  std::error_code ec;
  std::filesystem::remove(PathOf(sequence), ec);
  bytes_ -= it->size;
  files_.erase(it);
}

}  // namespace gpuflame::exporters
