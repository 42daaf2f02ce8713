// Fuzz target for a target's environment (inspect/proc_environ.cc,
// FindEnvironmentValue): /proc/PID/environ is whatever the process left
// there (it may rewrite its own stack), so entries may lack '=' or the last
// NUL, repeat, or be empty.
//
// Input: NAME '\n' ENVIRON (the name looked up; with no '\n', a fixed set of
// names the agent does look up). Checked: a value found is a slice of the
// input that follows "NAME=" at the start of an entry.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "inspect/proc_environ.h"

namespace {

void Check(std::string_view environ, std::string_view name) {
  auto value = gpuflame::inspect::FindEnvironmentValue(environ, name);
  if (!value) return;
  FUZZ_CHECK(value->data() >= environ.data() && value->data() + value->size() <= environ.data() + environ.size());
  const size_t at = static_cast<size_t>(value->data() - environ.data());
  FUZZ_CHECK(at >= name.size() + 1);
  const size_t entry = at - name.size() - 1;
  FUZZ_CHECK(entry == 0 || environ[entry - 1] == '\0');
  FUZZ_CHECK(environ.substr(entry, name.size()) == name && environ[at - 1] == '=');
  FUZZ_CHECK(value->find('\0') == std::string_view::npos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (in.size() > gpuflame::inspect::kMaxEnvironBytes) in = in.substr(0, gpuflame::inspect::kMaxEnvironBytes);
  const size_t nl = in.find('\n');
  if (nl != std::string_view::npos && nl < 256) Check(in.substr(nl + 1), in.substr(0, nl));
  for (std::string_view name : {"CUDA_INJECTION64_PATH", "GPUFLAME_SERVICE_NAME", "PATH", "", "A"}) Check(in, name);
  return 0;
}
