// Fuzz target for a target's mount table (inspect/mount_types.cc,
// FsTypeOfDevice): /proc/PID/mountinfo names mount points and sources the
// process chose (escaped, but any length), in a namespace it may have made.
//
// Input: MAJOR ':' MINOR '\n' MOUNTINFO (the device looked up; without that
// first line, a few fixed ones). Checked: a type found is a non-empty slice
// of the input without spaces or newlines.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "inspect/mount_types.h"

namespace {

void Check(std::string_view text, uint32_t major, uint32_t minor) {
  auto type = gpuflame::inspect::FsTypeOfDevice(text, major, minor);
  if (!type) return;
  FUZZ_CHECK(!type->empty());
  FUZZ_CHECK(type->find_first_of(" \n") == std::string::npos);
  FUZZ_CHECK(text.find(*type) != std::string_view::npos);
  (void)gpuflame::inspect::ServedByAProcess(*type);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (in.size() > gpuflame::inspect::kMaxMountinfoBytes) in = in.substr(0, gpuflame::inspect::kMaxMountinfoBytes);
  const size_t nl = in.find('\n');
  const size_t colon = in.find(':');
  if (nl != std::string_view::npos && colon < nl && nl < 24) {
    uint32_t major = 0, minor = 0;
    for (char c : in.substr(0, colon)) major = major * 10 + static_cast<uint32_t>(c - '0');
    for (char c : in.substr(colon + 1, nl - colon - 1)) minor = minor * 10 + static_cast<uint32_t>(c - '0');
    Check(in.substr(nl + 1), major, minor);
  }
  for (auto [major, minor] : {std::pair{0u, 52u}, std::pair{98u, 0u}, std::pair{0u, 0u}}) Check(in, major, minor);
  return 0;
}
