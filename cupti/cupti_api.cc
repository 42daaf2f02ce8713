#include "cupti/cupti_api.h"

#include <dlfcn.h>

#include <cstdlib>

namespace gpuflame::cupti {

std::string CuptiApi::Load() {
  void* lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libcupti.so.13", RTLD_NOW);
  if (!lib) lib = dlopen("libcupti.so", RTLD_NOW);
  if (!lib) {
    if (const char* path = std::getenv("GPUFLAME_CUPTI_PATH")) lib = dlopen(path, RTLD_NOW);
  }
  if (!lib) return "libcupti.so.13 not found (set GPUFLAME_CUPTI_PATH)";
  auto get = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    return fn != nullptr;
  };
  if (!get(Subscribe, "cuptiSubscribe") || !get(EnableCallback, "cuptiEnableCallback") ||
      !get(ActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks") ||
      !get(ActivityEnable, "cuptiActivityEnable") || !get(ActivityFlushAll, "cuptiActivityFlushAll") ||
      !get(ActivityGetNextRecord, "cuptiActivityGetNextRecord") ||
      !get(ActivityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords") ||
      !get(GetResultString, "cuptiGetResultString"))
    return "libcupti lacks an entry point gpuflame needs";
  return "";
}

}  // namespace gpuflame::cupti
