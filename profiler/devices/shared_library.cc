#include "profiler/devices/shared_library.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {

absl::StatusOr<SharedLibrary> SharedLibrary::Open(const std::string& name) {
  dlerror();  // a stale message from an earlier failure must not be reported as this one's
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return absl::NotFoundError(absl::StrCat("cannot load ", name, ": ", why ? why : "unknown dlopen error"));
  }
  return SharedLibrary(handle, name);
}

SharedLibrary& SharedLibrary::operator=(SharedLibrary&& o) noexcept {
  if (this != &o) {
    Reset();
    handle_ = std::exchange(o.handle_, nullptr);
    name_ = std::move(o.name_);
  }
  return *this;
}

void* SharedLibrary::Symbol(const char* symbol) const { return handle_ ? dlsym(handle_, symbol) : nullptr; }

void SharedLibrary::Reset() {
  // dlclose's failure leaves nothing to do: the handle is not ours any more.
  if (handle_) (void)dlclose(std::exchange(handle_, nullptr));
}

}  // namespace gpuflame::profiler
