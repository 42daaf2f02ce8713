// A shared library opened at run time (dlopen), held by a move-only owner so
// that it is closed exactly once, on every path. For libraries gpuflame must
// run without, such as the driver's NVML: absent, Open says why and nothing
// else is affected. Not thread-safe (dlerror is per thread but the owner is
// not): one thread at a time, as every user here is the worker.
#ifndef GPUFLAME_PROFILER_DEVICES_SHARED_LIBRARY_H_
#define GPUFLAME_PROFILER_DEVICES_SHARED_LIBRARY_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace gpuflame::profiler {

class SharedLibrary {
 public:
  // |name|: a soname (the dynamic loader's search: LD_LIBRARY_PATH, the
  // ld.so cache) or a path. RTLD_NOW: a library missing a symbol it needs
  // fails here, not at the first call; RTLD_LOCAL: its symbols stay its own.
  static absl::StatusOr<SharedLibrary> Open(const std::string& name);

  SharedLibrary() = default;
  SharedLibrary(SharedLibrary&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)), name_(std::move(o.name_)) {}
  SharedLibrary& operator=(SharedLibrary&& o) noexcept;
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  ~SharedLibrary() { Reset(); }

  bool valid() const { return handle_ != nullptr; }
  const std::string& name() const { return name_; }
  // The address of |symbol|, or null where the library does not export it
  // (an older version): callers say what they lose.
  void* Symbol(const char* symbol) const;
  // |symbol| as a function of type F (a function pointer type).
  template <typename F>
  F Function(const char* symbol) const {
    return reinterpret_cast<F>(Symbol(symbol));
  }

 private:
  SharedLibrary(void* handle, std::string name) : handle_(handle), name_(std::move(name)) {}
  void Reset();

  void* handle_ = nullptr;
  std::string name_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_DEVICES_SHARED_LIBRARY_H_
