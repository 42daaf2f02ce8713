#include "profiler/probes/usdt_notes.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {
namespace {

constexpr uint32_t kStapsdtNoteType = 3;
constexpr std::string_view kStapsdtOwner("stapsdt\0", 8);
constexpr size_t kMaxNoteBytes = 1 << 20;  // one note's descriptor: 3 addresses and 3 short strings

uint32_t U32(std::string_view s, size_t at) {
  uint32_t v;
  std::memcpy(&v, s.data() + at, sizeof(v));
  return v;
}
uint64_t U64(std::string_view s, size_t at) {
  uint64_t v;
  std::memcpy(&v, s.data() + at, sizeof(v));
  return v;
}
size_t Align4(size_t n) { return (n + 3) & ~size_t{3}; }

// The NUL-terminated string at |*at| in |desc|; nullopt when none ends there.
std::optional<std::string> Take(std::string_view desc, size_t* at) {
  if (*at >= desc.size()) return std::nullopt;
  size_t end = desc.find('\0', *at);
  if (end == std::string_view::npos) return std::nullopt;
  std::string out(desc.substr(*at, end - *at));
  *at = end + 1;
  return out;
}

// struct pt_regs (x86-64) offsets of the registers an argument may name,
// by every name GCC and Clang write for them (64, 32, 16, 8 bits).
struct Register {
  std::string_view names[4];
  int16_t offset;
};
constexpr Register kRegisters[] = {
    {{"rip", "eip", "", ""}, 128},         {{"rax", "eax", "ax", "al"}, 80},      {{"rbx", "ebx", "bx", "bl"}, 40},
    {{"rcx", "ecx", "cx", "cl"}, 88},      {{"rdx", "edx", "dx", "dl"}, 96},      {{"rsi", "esi", "si", "sil"}, 104},
    {{"rdi", "edi", "di", "dil"}, 112},    {{"rbp", "ebp", "bp", "bpl"}, 32},     {{"rsp", "esp", "sp", "spl"}, 152},
    {{"r8", "r8d", "r8w", "r8b"}, 72},     {{"r9", "r9d", "r9w", "r9b"}, 64},     {{"r10", "r10d", "r10w", "r10b"}, 56},
    {{"r11", "r11d", "r11w", "r11b"}, 48}, {{"r12", "r12d", "r12w", "r12b"}, 24}, {{"r13", "r13d", "r13w", "r13b"}, 16},
    {{"r14", "r14d", "r14w", "r14b"}, 8},  {{"r15", "r15d", "r15w", "r15b"}, 0},
};

std::optional<int16_t> RegisterOffset(std::string_view name) {
  for (const Register& r : kRegisters)
    for (std::string_view n : r.names)
      if (!n.empty() && n == name) return r.offset;
  return std::nullopt;
}

// A decimal integer, optionally negative, at the front of |*s| (consumed);
// nullopt past int64's range.
std::optional<int64_t> TakeInteger(std::string_view* s) {
  size_t i = 0;
  bool negative = false;
  if (i < s->size() && ((*s)[i] == '-' || (*s)[i] == '+')) negative = (*s)[i++] == '-';
  const size_t first = i;
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  uint64_t v = 0;
  for (; i < s->size() && (*s)[i] >= '0' && (*s)[i] <= '9'; i++) {
    const uint64_t digit = static_cast<uint64_t>((*s)[i] - '0');
    if (v > (limit - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  if (i == first) return std::nullopt;
  s->remove_prefix(i);
  return negative ? static_cast<int64_t>(uint64_t{0} - v) : static_cast<int64_t>(v);  // two's complement
}

absl::Status Bad(const char* what, std::string_view arg) {
  return absl::InvalidArgumentError(absl::StrCat(what, " \"", std::string(arg), "\""));
}

// "%reg" at the front of |*s| (consumed): its pt_regs offset.
absl::StatusOr<int16_t> TakeRegister(std::string_view* s, std::string_view arg) {
  if (s->empty() || s->front() != '%') return Bad("no register in", arg);
  s->remove_prefix(1);
  size_t n = 0;
  while (n < s->size() && n < 8 && (((*s)[n] >= 'a' && (*s)[n] <= 'z') || ((*s)[n] >= '0' && (*s)[n] <= '9'))) n++;
  auto offset = RegisterOffset(s->substr(0, n));
  if (!offset) return Bad("unknown register in", arg);
  s->remove_prefix(n);
  return *offset;
}

absl::StatusOr<gf_usdt_arg_spec> ParseArg(std::string_view arg) {
  gf_usdt_arg_spec spec{};
  std::string_view s = arg;
  auto size = TakeInteger(&s);
  if (!size || s.empty() || s.front() != '@' || *size < -8 || *size > 8) return Bad("no size@ (1 to 8) in", arg);
  s.remove_prefix(1);
  const int64_t bytes = *size < 0 ? -*size : *size;
  if (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8) return Bad("size not 1, 2, 4 or 8 in", arg);
  spec.arg_signed = *size < 0;
  spec.arg_bitshift = static_cast<uint8_t>(64 - 8 * bytes);
  if (!s.empty() && s.front() == '$') {  // 4@$71
    s.remove_prefix(1);
    auto value = TakeInteger(&s);
    if (!value || !s.empty()) return Bad("bad constant in", arg);
    spec.arg_type = GF_USDT_ARG_CONST;
    spec.val_off = static_cast<uint64_t>(*value);
    return spec;
  }
  if (!s.empty() && s.front() == '%') {  // -4@%eax
    auto reg = TakeRegister(&s, arg);
    if (!reg.ok()) return reg.status();
    if (!s.empty()) return Bad("trailing bytes in", arg);
    spec.arg_type = GF_USDT_ARG_REG;
    spec.reg_off = static_cast<uint16_t>(*reg);
    return spec;
  }
  int64_t offset = 0;  // 8@-16(%rbp), 8@(%rax)
  if (!s.empty() && s.front() != '(') {
    auto o = TakeInteger(&s);
    if (!o) return Bad("not a register, constant or memory operand:", arg);
    offset = *o;
  }
  if (s.empty() || s.front() != '(') return Bad("no (%reg) in", arg);
  s.remove_prefix(1);
  auto reg = TakeRegister(&s, arg);
  if (!reg.ok()) return reg.status();
  if (s != ")") return Bad("an index register or trailing bytes in", arg);
  spec.arg_type = GF_USDT_ARG_REG_DEREF;
  spec.reg_off = static_cast<uint16_t>(*reg);
  spec.val_off = static_cast<uint64_t>(offset);
  return spec;
}

}  // namespace

std::vector<UsdtNote> ParseUsdtNotes(std::string_view section, size_t max_notes) {
  std::vector<UsdtNote> notes;
  size_t at = 0;
  while (notes.size() < max_notes && section.size() - at >= 12) {
    const uint32_t namesz = U32(section, at), descsz = U32(section, at + 4), type = U32(section, at + 8);
    if (namesz > section.size() || descsz > kMaxNoteBytes) break;
    const size_t name_at = at + 12, desc_at = name_at + Align4(namesz);
    if (desc_at > section.size() || section.size() - desc_at < descsz) break;
    const std::string_view owner = section.substr(name_at, namesz);
    const std::string_view desc = section.substr(desc_at, descsz);
    at = std::min(desc_at + Align4(descsz), section.size());  // the last note's padding may be cut
    if (type != kStapsdtNoteType || owner != kStapsdtOwner || desc.size() < 24) continue;
    UsdtNote note;
    note.pc = U64(desc, 0);
    note.base = U64(desc, 8);
    note.semaphore = U64(desc, 16);
    size_t s = 24;
    auto provider = Take(desc, &s);
    auto name = provider ? Take(desc, &s) : std::nullopt;
    auto args = name ? Take(desc, &s) : std::nullopt;
    if (!args) continue;
    note.provider = std::move(*provider);
    note.name = std::move(*name);
    note.args = std::move(*args);
    notes.push_back(std::move(note));
  }
  return notes;
}

uint64_t UsdtSiteAddress(const UsdtNote& note, uint64_t stapsdt_base) {
  return stapsdt_base && note.base ? note.pc + (stapsdt_base - note.base) : note.pc;
}

absl::StatusOr<gf_usdt_spec> ParseUsdtArgs(std::string_view args) {
  gf_usdt_spec spec{};
  size_t count = 0;
  while (true) {
    while (!args.empty() && args.front() == ' ') args.remove_prefix(1);
    if (args.empty()) break;
    if (count == GF_USDT_MAX_ARGS)
      return absl::InvalidArgumentError(absl::StrCat("more than ", GF_USDT_MAX_ARGS, " arguments"));
    const size_t end = std::min(args.find(' '), args.size());
    auto arg = ParseArg(args.substr(0, end));
    if (!arg.ok()) return arg.status();
    spec.args[count++] = *arg;
    args.remove_prefix(end);
  }
  spec.arg_cnt = static_cast<uint16_t>(count);
  return spec;
}

}  // namespace gpuflame::profiler
