#include "exporters/pyroscope/spool.h"

#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "exporters/pprof/pprof_writer.h"
#include "logging/log.h"

namespace gpuflame::exporters {
namespace {

constexpr char kMagicV1[8] = {'G', 'F', 'S', 'P', 'O', 'O', 'L', '1'};
constexpr char kMagic[8] = {'G', 'F', 'S', 'P', 'O', 'O', 'L', '2'};
constexpr size_t kMaxRequest = 512u << 20;  // bound what we inflate from disk
constexpr const char* kTmpSuffix = ".tmp";

// The file's bytes for |body|. The profile count goes inside the frame:
// zstd's content checksum then covers it as well as the request, so a byte
// changed anywhere after the magic fails decompression instead of replaying
// a different profile, or the right one with the wrong count.
// zstd's own checksum (XXH64 of the content, verified by ZSTD_decompress as
// it inflates) rather than a CRC of ours in the header: no second pass over
// the body and no checksum code of our own to get wrong.
absl::StatusOr<std::string> Encode(const std::string& body, uint32_t series) {
  std::string content(4 + body.size(), '\0');
  std::memcpy(content.data(), &series, 4);
  std::memcpy(content.data() + 4, body.data(), body.size());
  std::string out(sizeof(kMagic) + ZSTD_compressBound(content.size()), '\0');
  std::memcpy(out.data(), kMagic, sizeof(kMagic));
  std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  if (!cctx) return absl::ResourceExhaustedError("zstd: no compression context");
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, 3);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
  size_t n = ZSTD_compress2(cctx.get(), out.data() + sizeof(kMagic), out.size() - sizeof(kMagic), content.data(),
                            content.size());
  if (ZSTD_isError(n)) return absl::InternalError(ZSTD_getErrorName(n));
  out.resize(sizeof(kMagic) + n);
  return out;
}

// One zstd frame inflated, within kMaxRequest + 4; nullptr and |why| if not.
std::optional<std::string> Inflate(const char* data, size_t size, const char** why) {
  unsigned long long content = ZSTD_getFrameContentSize(data, size);
  *why = "unreadable size";
  if (content == ZSTD_CONTENTSIZE_ERROR || content == ZSTD_CONTENTSIZE_UNKNOWN || content > kMaxRequest + 4)
    return std::nullopt;
  // Grown as the frame really decompresses, never to the size its header
  // declares: a 25-byte file may declare 512 MiB (found by the spool fuzzer:
  // 531 MB resident before it was refused). The frame's checksum is checked
  // as its end is read.
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> dctx(ZSTD_createDCtx(), &ZSTD_freeDCtx);
  if (!dctx) {
    *why = "out of memory";
    return std::nullopt;
  }
  std::string out;
  ZSTD_inBuffer in{data, size, 0};
  for (size_t left = 1; left != 0;) {
    const size_t old = out.size();
    // One byte past the declared size: a frame longer than it says fails below.
    const size_t grow = std::min<size_t>(content + 1 - old, 1u << 20);
    if (grow == 0) break;
    out.resize(old + grow);
    ZSTD_outBuffer o{out.data() + old, grow, 0};
    const size_t consumed_before = in.pos;
    left = ZSTD_decompressStream(dctx.get(), &o, &in);
    out.resize(old + o.pos);
    if (ZSTD_isError(left)) {
      *why = ZSTD_getErrorName(left);
      return std::nullopt;
    }
    if (left != 0 && o.pos == 0 && in.pos == consumed_before) break;  // no progress: cut short
  }
  if (out.size() != content) {
    *why = "truncated";
    return std::nullopt;
  }
  return out;
}

// |raw| as a request, or nullopt and |why|.
std::optional<SpooledRequest> Decode(const std::string& raw, const char** why) {
  *why = "not a gpuflame spool file";
  SpooledRequest r;
  if (raw.size() >= sizeof(kMagic) && std::memcmp(raw.data(), kMagic, sizeof(kMagic)) == 0) {
    auto content = Inflate(raw.data() + sizeof(kMagic), raw.size() - sizeof(kMagic), why);
    if (!content) return std::nullopt;
    if (content->size() < 4) {
      *why = "truncated";
      return std::nullopt;
    }
    std::memcpy(&r.series, content->data(), 4);
    r.body = content->substr(4);
    return r;
  }
  // Version 1, written before the count moved inside the frame.
  constexpr size_t kHeaderV1 = sizeof(kMagicV1) + 4;
  if (raw.size() >= kHeaderV1 && std::memcmp(raw.data(), kMagicV1, sizeof(kMagicV1)) == 0) {
    auto body = Inflate(raw.data() + kHeaderV1, raw.size() - kHeaderV1, why);
    if (!body) return std::nullopt;
    std::memcpy(&r.series, raw.data() + sizeof(kMagicV1), 4);
    r.body = std::move(*body);
    return r;
  }
  return std::nullopt;
}

}  // namespace

bool IsSpoolFile(std::string_view raw) {
  return raw.size() >= sizeof(kMagic) && (std::memcmp(raw.data(), kMagic, sizeof(kMagic)) == 0 ||
                                          std::memcmp(raw.data(), kMagicV1, sizeof(kMagicV1)) == 0);
}

absl::StatusOr<SpooledRequest> DecodeSpoolFile(const std::string& raw) {
  const char* why = "unreadable";
  std::optional<SpooledRequest> r = Decode(raw, &why);
  if (!r) return absl::InvalidArgumentError(absl::StrFormat("not a readable gpuflame spool file (%s)", why));
  return std::move(*r);
}

absl::StatusOr<Spool> Spool::Open(const std::string& dir, uint64_t max_bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return absl::PermissionDeniedError(absl::StrFormat("cannot create spool directory %s: %s", dir, ec.message()));
  Spool s;
  s.dir_ = dir;
  s.max_bytes_ = max_bytes;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = e.path().filename();
    // A rewrite that a crash interrupted: the original is still in place.
    if (name.size() == 25 + std::strlen(kTmpSuffix) && name.ends_with(std::string(".push") + kTmpSuffix)) {
      std::error_code ignored;
      std::filesystem::remove(e.path(), ignored);
      continue;
    }
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

absl::StatusOr<uint64_t> Spool::Put(const std::string& body, uint32_t series) {
  absl::StatusOr<std::string> out = Encode(body, series);
  if (!out.ok()) return out.status();
  // Make room: the oldest windows matter least.
  while (bytes_ + out->size() > max_bytes_) {
    auto oldest = std::find_if(files_.begin(), files_.end(), [&](const File& f) { return f.sequence != pinned_; });
    if (oldest == files_.end()) break;
    Remove(oldest->sequence);
    dropped_full_++;
  }
  if (bytes_ + out->size() > max_bytes_) {
    dropped_full_++;
    return absl::ResourceExhaustedError("no room in the spool for this request");
  }
  uint64_t seq = next_++;
  if (auto s = WriteFile(PathOf(seq), *out); !s.ok()) return s;
  files_.push_back({seq, out->size()});
  bytes_ += out->size();
  return seq;
}

absl::Status Spool::Replace(uint64_t sequence, const std::string& body, uint32_t series) {
  auto it = std::find_if(files_.begin(), files_.end(), [&](const File& f) { return f.sequence == sequence; });
  if (it == files_.end()) return absl::NotFoundError("no such spooled request");
  absl::StatusOr<std::string> out = Encode(body, series);
  if (!out.ok()) return out.status();
  std::string tmp = PathOf(sequence) + kTmpSuffix;
  if (auto s = WriteFile(tmp, *out); !s.ok()) return s;
  std::error_code ec;
  std::filesystem::rename(tmp, PathOf(sequence), ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return absl::InternalError(absl::StrFormat("cannot replace spool file %s", PathOf(sequence)));
  }
  bytes_ = bytes_ - it->size + out->size();
  it->size = out->size();
  return absl::OkStatus();
}

bool Spool::contains(uint64_t sequence) const {
  return std::any_of(files_.begin(), files_.end(), [&](const File& f) { return f.sequence == sequence; });
}

std::optional<uint64_t> Spool::OldestExcept(uint64_t skip) const {
  for (const File& f : files_)
    if (f.sequence != skip) return f.sequence;
  return std::nullopt;
}

std::optional<SpooledRequest> Spool::Read(uint64_t sequence) {
  auto it = std::find_if(files_.begin(), files_.end(), [&](const File& f) { return f.sequence == sequence; });
  if (it == files_.end()) return std::nullopt;
  const char* why = "unreadable";
  std::string raw;
  std::error_code ec;
  uint64_t size = std::filesystem::file_size(PathOf(sequence), ec);
  // A file larger than the largest request zstd could write for it is not
  // ours: it is not read in.
  if (!ec && size <= ZSTD_compressBound(kMaxRequest + 4) + sizeof(kMagic)) {
    std::ifstream in(PathOf(sequence), std::ios::binary);
    raw.resize(size);
    in.read(raw.data(), static_cast<std::streamsize>(size));
    if (in.gcount() == static_cast<std::streamsize>(size)) {
      if (std::optional<SpooledRequest> r = Decode(raw, &why)) {
        r->sequence = sequence;
        return r;
      }
    }
  } else if (!ec) {
    why = "larger than any request";
  }
  // Each damaged file is said once: it is removed right after.
  logging::Warning(absl::StrCat("spool file ", PathOf(sequence), " is damaged (", why, "): dropped, not replayed"));
  corrupt_++;
  Remove(sequence);
  return std::nullopt;
}

std::optional<SpooledRequest> Spool::Oldest() {
  while (!files_.empty())
    if (std::optional<SpooledRequest> r = Read(files_.front().sequence)) return r;
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
