// Which GPU each of the process's CUDA devices is, for the agent
// (GF_GPU_DEVICE in bpf/gpuflame_abi.h). A GPU lane is a process's CUDA
// ordinal, and CUDA_VISIBLE_DEVICES renumbers ordinals, so NVML's index of
// a lane's GPU cannot be inferred from it; the driver's UUID of the device
// names the same GPU NVML does, in every process and container.
//
// Read from the driver that loaded us (libcuda.so.1 is mapped by then: it
// is the one that called InitializeInjection), on the flusher thread and
// never in a CUPTI callback, where a driver call could wait on a lock the
// calling thread holds. Only after the process has launched work: the
// driver is initialised then, and a process that never launches has no
// lanes to tie.
#ifndef GPUFLAME_CUPTI_DEVICE_UUIDS_H_
#define GPUFLAME_CUPTI_DEVICE_UUIDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bpf/gpuflame_abi.h"

namespace gpuflame::cupti {

// The GF_GPU_DEVICE record of CUDA ordinal |ordinal| with UUID |uuid|
// (CUuuid's 16 bytes).
gf_kernel_record DeviceRecord(uint32_t ordinal, const unsigned char (&uuid)[16]);

class DeviceUuids {
 public:
  // Ordinals read at most: one batch (the probe's limit) holds them all.
  static constexpr int kMaxDevices = 64;
  static_assert(kMaxDevices <= GF_KERNEL_BATCH_MAX);
  static constexpr int kMaxAttempts = 10;  // reads that failed before it stops trying

  // Flusher thread: reads every device's UUID unless done, or given up.
  // Empty string, or what went wrong (said once, by the caller, when it
  // gives up: attempts() reaches kMaxAttempts).
  std::string Read();
  bool done() const { return done_; }
  int attempts() const { return attempts_; }
  // One record per device, ordinal order; empty until read.
  const std::vector<gf_kernel_record>& records() const { return records_; }

 private:
  std::vector<gf_kernel_record> records_;
  bool done_ = false;
  int attempts_ = 0;
};

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_DEVICE_UUIDS_H_
