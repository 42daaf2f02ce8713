#include "symbolizer/python_code.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>


namespace gpuflame::symbolizer {
namespace {

constexpr size_t kMaxStringChars = 1024;
constexpr size_t kMaxLineTable = 64 << 10;

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x110000) {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += "\xEF\xBF\xBD";  // U+FFFD
  }
}

// A line number out of int's range comes from a table CPython did not write
// (a hostile or stale one): its lines are unknown. Checked after every
// step, so that the running sum, in 64 bits, never overflows: one step adds
// at most 2^59 (a signed varint of 60 bits) to a value within int's range
// (the overflow was found by tests/fuzz/python_code_fuzzer.cc).
bool FitsInt(int64_t line) { return line >= INT_MIN && line <= INT_MAX; }

// 3.10 co_linetable: (byte delta, line delta) pairs, each a byte range with
// its line; -128 means no line. Mirrors 3.10's Objects/codeobject.c advance().
int Line310(std::string_view table, int first_line, uint32_t instr) {
  uint64_t target = static_cast<uint64_t>(instr) * 2;  // f_lasti counts code units
  int64_t line = first_line;
  uint64_t end = 0;
  for (size_t i = 0; i + 1 < table.size(); i += 2) {
    uint64_t start = end;
    end += static_cast<uint8_t>(table[i]);
    auto ldelta = static_cast<int8_t>(table[i + 1]);
    int current = 0;
    if (ldelta != -128) {
      line += ldelta;
      if (!FitsInt(line)) return 0;
      current = static_cast<int>(line);
    }
    if (target >= start && target < end) return current;
  }
  return 0;
}

// The 3.11+ location table (co_linetable): a sequence of entries, each a
// byte 1CCCCLLL (C: a code, L: length - 1 in code units) followed by
// varints of 6 bits per byte (bit 6: more follows) and signed varints
// (zig-zag in the low bit); the code says which line delta form follows.
class LocationReader {
 public:
  explicit LocationReader(std::string_view t) : t_(t) {}
  bool Done() const { return i_ >= t_.size(); }
  uint8_t Byte() { return i_ < t_.size() ? static_cast<uint8_t>(t_[i_++]) : 0; }
  uint64_t Varint() {
    uint8_t b = Byte();
    uint64_t v = b & 63;
    int shift = 6;
    while ((b & 64) && !Done() && shift < 60) {
      b = Byte();
      v |= static_cast<uint64_t>(b & 63) << shift;
      shift += 6;
    }
    return v;
  }
  int64_t Svarint() {
    uint64_t v = Varint();
    return (v & 1) ? -static_cast<int64_t>(v >> 1) : static_cast<int64_t>(v >> 1);
  }

 private:
  std::string_view t_;
  size_t i_ = 0;
};

int Line311(std::string_view table, int first_line, uint32_t instr) {
  LocationReader r(table);
  int64_t line = first_line;
  uint64_t addr = 0;
  while (!r.Done()) {
    uint8_t b = r.Byte();
    if (!(b & 0x80)) continue;  // resynchronise on an entry start
    int code = (b >> 3) & 15;
    uint64_t len = (b & 7) + 1;
    bool has_line = true;
    if (code == 15) {
      has_line = false;
    } else if (code == 14) {
      line += r.Svarint();
      r.Varint();
      r.Varint();
      r.Varint();
    } else if (code == 13) {
      line += r.Svarint();
    } else if (code >= 10) {
      line += code - 10;
      r.Byte();
      r.Byte();
    } else {
      r.Byte();
    }
    if (!FitsInt(line)) return 0;
    if (instr >= addr && instr < addr + len) return has_line ? static_cast<int>(line) : 0;
    addr += len;
  }
  return 0;
}

}  // namespace

int LineForInstruction(const inspect::PythonVersion& v, std::string_view linetable, int first_line,
                       uint32_t instr) {
  if (v.minor <= 10) return Line310(linetable, first_line, instr);
  return Line311(linetable, first_line, instr);
}

std::string DisplayName(std::string_view qualname) {
  // Split by hand: Debian's Abseil has its own string_view type.
  std::string out;
  size_t start = 0;
  while (start <= qualname.size()) {
    size_t dot = qualname.find('.', start);
    std::string_view part = qualname.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (!part.empty() && part != "<locals>") {
      if (!out.empty()) out += " > ";
      out += part;
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return out.empty() ? std::string(qualname) : out;
}

std::optional<std::string> PythonCodeReader::ReadString(uint64_t addr) const {
  if (addr == 0) return std::nullopt;
  auto length = memory_.ReadValue<int64_t>(addr + inspect::PythonLayout::kUnicodeLength);
  auto state = memory_.ReadValue<uint32_t>(addr + inspect::PythonLayout::kUnicodeState);
  if (!length || !state || *length < 0) return std::nullopt;
  size_t n = std::min<size_t>(static_cast<size_t>(*length), kMaxStringChars);
  unsigned kind = (*state >> 2) & 7;
  bool compact = (*state >> 5) & 1;
  bool ascii = (*state >> 6) & 1;
  uint64_t data = 0;
  if (compact && ascii) {
    data = addr + layout_.unicode_ascii_data;
  } else if (compact) {
    data = addr + layout_.unicode_compact_data;
  } else {
    // Legacy (non-compact) string: data.any pointer after the compact header.
    auto p = memory_.ReadValue<uint64_t>(addr + layout_.unicode_compact_data);
    if (!p) return std::nullopt;
    data = *p;
  }
  if (kind != 1 && kind != 2 && kind != 4) return std::nullopt;
  std::string raw(n * kind, '\0');
  if (!memory_.Read(data, raw.data(), raw.size())) return std::nullopt;
  if (kind == 1 && ascii) return raw;
  std::string out;
  out.reserve(n);
  for (size_t i = 0; i < n; i++) {
    uint32_t cp = 0;
    std::memcpy(&cp, raw.data() + i * kind, kind);
    AppendUtf8(out, cp);
  }
  return out;
}

std::optional<std::string> PythonCodeReader::TypeName(uint64_t type_addr) const {
  auto name_ptr = memory_.ReadValue<uint64_t>(type_addr + inspect::PythonLayout::kTypeName);
  if (!name_ptr || *name_ptr == 0) return std::nullopt;
  // tp_name is a C string; read it in small chunks so a short string near the
  // end of a mapping still reads.
  constexpr size_t kMaxTypeName = 256;
  std::string out;
  for (size_t off = 0; off < kMaxTypeName; off += 32) {
    char chunk[32];
    if (!memory_.Read(*name_ptr + off, chunk, sizeof(chunk))) {
      for (size_t i = 0; i < sizeof(chunk); i++) {
        if (!memory_.Read(*name_ptr + off + i, &chunk[i], 1)) return std::nullopt;
        if (chunk[i] == 0) break;
      }
    }
    for (char c : chunk) {
      if (c == 0) {
        // Heap types are named "module.Class"; keep the class.
        auto dot = out.rfind('.');
        return dot == std::string::npos ? out : out.substr(dot + 1);
      }
      out += c;
    }
  }
  return std::nullopt;
}

std::optional<CodeInfo> PythonCodeReader::Load(uint64_t code) const {
  const inspect::PythonLayout& l = layout_;
  CodeInfo info;
  auto first_line = memory_.ReadValue<int32_t>(code + l.code_firstlineno);
  auto argcount = memory_.ReadValue<int32_t>(code + l.code_argcount);
  auto filename = memory_.ReadValue<uint64_t>(code + l.code_filename);
  auto name = memory_.ReadValue<uint64_t>(code + (l.code_qualname ? l.code_qualname : l.code_name));
  auto table = memory_.ReadValue<uint64_t>(code + l.code_linetable);
  if (!first_line || !argcount || !filename || !name || !table) return std::nullopt;
  auto qualname = ReadString(*name);
  auto file = ReadString(*filename);
  if (!qualname || !file) return std::nullopt;
  info.qualname = std::move(*qualname);
  info.filename = std::move(*file);
  info.first_line = *first_line;
  info.argcount = *argcount;
  info.name_ptr = *name;
  if (auto size = memory_.ReadValue<int64_t>(*table + inspect::PythonLayout::kVarSize);
      size && *size > 0 && static_cast<size_t>(*size) <= kMaxLineTable) {
    info.linetable.resize(static_cast<size_t>(*size));
    if (!memory_.Read(*table + inspect::PythonLayout::kBytesData, info.linetable.data(), info.linetable.size()))
      info.linetable.clear();
  }
  if (l.code_varnames && info.argcount > 0) {
    if (auto names = memory_.ReadValue<uint64_t>(code + l.code_varnames)) {
      if (auto first = memory_.ReadValue<uint64_t>(*names + inspect::PythonLayout::kTupleItems))
        info.first_param = ReadString(*first).value_or("");
    }
  }
  return info;
}

const CodeInfo* PythonCodeReader::Read(uint64_t code_addr) {
  auto it = cache_.find(code_addr);
  if (it != cache_.end()) {
    const inspect::PythonLayout& l = layout_;
    auto first_line = memory_.ReadValue<int32_t>(code_addr + l.code_firstlineno);
    auto name = memory_.ReadValue<uint64_t>(code_addr + (l.code_qualname ? l.code_qualname : l.code_name));
    if (first_line && name && *first_line == it->second.first_line && *name == it->second.name_ptr)
      return &it->second;
    if (first_line && name) reuse_detected_++;
  }
  auto info = Load(code_addr);
  if (!info) return nullptr;
  auto [pos, inserted] = cache_.insert_or_assign(code_addr, std::move(*info));
  return &pos->second;
}

}  // namespace gpuflame::symbolizer
