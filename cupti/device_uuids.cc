#include "cupti/device_uuids.h"

#include <cuda.h>
#include <dlfcn.h>

#include <cstring>

namespace gpuflame::cupti {

gf_kernel_record DeviceRecord(uint32_t ordinal, const unsigned char (&uuid)[16]) {
  gf_kernel_record r{};
  r.kind = GF_GPU_DEVICE;
  r.device = ordinal;
  std::memcpy(&r.start_ns, uuid, 8);
  std::memcpy(&r.end_ns, uuid + 8, 8);
  return r;
}

std::string DeviceUuids::Read() {
  if (done_ || attempts_ >= kMaxAttempts) return {};
  attempts_++;
  // The driver that loaded us; never a second one loaded here.
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!cuda) {
    attempts_ = kMaxAttempts;  // not mapped: it will not be
    return "libcuda.so.1 is not loaded";
  }
  // cuda.h maps cuDeviceGetUuid to the _v2 entry point, which the driver
  // exports since CUDA 11.4 (v1 differs for MIG instances only).
  auto count_fn = reinterpret_cast<decltype(&cuDeviceGetCount)>(dlsym(cuda, "cuDeviceGetCount"));
  auto get_fn = reinterpret_cast<decltype(&cuDeviceGet)>(dlsym(cuda, "cuDeviceGet"));
  auto uuid_fn = reinterpret_cast<decltype(&cuDeviceGetUuid_v2)>(dlsym(cuda, "cuDeviceGetUuid_v2"));
  dlclose(cuda);  // only drops the reference RTLD_NOLOAD took: the driver stays
  if (!count_fn || !get_fn || !uuid_fn) {
    attempts_ = kMaxAttempts;
    return "the driver exports no cuDeviceGetCount, cuDeviceGet or cuDeviceGetUuid_v2";
  }
  int count = 0;
  if (CUresult r = count_fn(&count); r != CUDA_SUCCESS) return "cuDeviceGetCount: error " + std::to_string(r);
  if (count > kMaxDevices) count = kMaxDevices;
  std::vector<gf_kernel_record> records;
  for (int i = 0; i < count; i++) {
    CUdevice dev = 0;
    CUuuid uuid{};
    if (CUresult r = get_fn(&dev, i); r != CUDA_SUCCESS) return "cuDeviceGet: error " + std::to_string(r);
    if (CUresult r = uuid_fn(&uuid, dev); r != CUDA_SUCCESS) return "cuDeviceGetUuid: error " + std::to_string(r);
    unsigned char bytes[16];
    static_assert(sizeof(uuid.bytes) == sizeof(bytes));
    std::memcpy(bytes, uuid.bytes, sizeof(bytes));
    records.push_back(DeviceRecord(static_cast<uint32_t>(i), bytes));
  }
  records_ = std::move(records);
  done_ = true;
  return {};
}

}  // namespace gpuflame::cupti
