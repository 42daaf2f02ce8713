// Reading another process's memory: the profiled process is untrusted, so
// every read is bounded by the caller and may fail at any time (the process
// can exit, unmap, or hand us garbage pointers).
#ifndef GPUFLAME_INSPECT_PROCESS_MEMORY_H_
#define GPUFLAME_INSPECT_PROCESS_MEMORY_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace gpuflame::inspect {

class ProcessMemory {
 public:
  virtual ~ProcessMemory() = default;
  // Copies exactly |len| bytes at |addr| into |out|; false if any byte is unreadable.
  virtual bool Read(uint64_t addr, void* out, size_t len) const = 0;

  template <typename T>
  std::optional<T> ReadValue(uint64_t addr) const {
    T value;
    if (!Read(addr, &value, sizeof(value))) return std::nullopt;
    return value;
  }
};

// process_vm_readv on a live pid. Thread-compatible, no state besides the pid.
class RemoteProcessMemory final : public ProcessMemory {
 public:
  explicit RemoteProcessMemory(pid_t pid) : pid_(pid) {}
  bool Read(uint64_t addr, void* out, size_t len) const override;

 private:
  pid_t pid_;
};

// A byte buffer mapped at a fixed address. For tests and offline data.
class BufferMemory final : public ProcessMemory {
 public:
  BufferMemory(uint64_t base, std::string bytes) : base_(base), bytes_(std::move(bytes)) {}
  bool Read(uint64_t addr, void* out, size_t len) const override {
    if (addr < base_ || addr - base_ > bytes_.size() || len > bytes_.size() - (addr - base_))
      return false;
    std::memcpy(out, bytes_.data() + (addr - base_), len);
    return true;
  }

 private:
  uint64_t base_;
  std::string bytes_;
};

}  // namespace gpuflame::inspect

#endif  // GPUFLAME_INSPECT_PROCESS_MEMORY_H_
