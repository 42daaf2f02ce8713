#include "cupti/cupti_api.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <cstring>

namespace gpuflame::cupti {
namespace {

// pip wheels put libcupti.so.13 beside libcudart.so.13
// (site-packages/nvidia/cu13/lib), which is not on the loader's path: look
// next to the runtime the process already loaded.
int FindRuntimeDir(dl_phdr_info* info, size_t, void* out) {
  const char* name = info->dlpi_name;
  const char* slash = name ? std::strrchr(name, '/') : nullptr;
  if (!slash || std::strncmp(slash + 1, "libcudart.so", 12) != 0) return 0;
  static_cast<std::string*>(out)->assign(name, slash - name);
  return 1;
}

}  // namespace

std::string CuptiApi::Load() {
  void* lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libcupti.so.13", RTLD_NOW);
  if (!lib) lib = dlopen("libcupti.so", RTLD_NOW);
  if (!lib) {
    std::string dir;
    dl_iterate_phdr(FindRuntimeDir, &dir);
    if (!dir.empty()) lib = dlopen((dir + "/libcupti.so.13").c_str(), RTLD_NOW);
  }
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
      !get(ActivityEnable, "cuptiActivityEnable") || !get(ActivityDisable, "cuptiActivityDisable") ||
      !get(GetTimestamp, "cuptiGetTimestamp") || !get(ActivityFlushAll, "cuptiActivityFlushAll") ||
      !get(ActivityGetNextRecord, "cuptiActivityGetNextRecord") ||
      !get(ActivityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords") ||
      !get(GetResultString, "cuptiGetResultString"))
    return "libcupti lacks an entry point gpuflame needs";
  get(ActivitySetAttribute, "cuptiActivitySetAttribute");
  get(ActivityFlushPeriod, "cuptiActivityFlushPeriod");
  get(Finalize, "cuptiFinalize");
  get(ActivityEnableDriverApi, "cuptiActivityEnableDriverApi");
  get(SetThreadIdType, "cuptiSetThreadIdType");
  return "";
}

}  // namespace gpuflame::cupti
