// The CUPTI entry points the injection library uses, resolved with dlopen at
// start-up rather than linked: libcupti.so.13 lives in the workload's wheel
// (site-packages/nvidia/cu13/lib), usually already loaded by PyTorch, and a
// missing CUPTI must cost kernel time only, never the workload's start.
#ifndef GPUFLAME_CUPTI_CUPTI_API_H_
#define GPUFLAME_CUPTI_CUPTI_API_H_

#include <cupti.h>

#include <string>

namespace gpuflame::cupti {

struct CuptiApi {
  decltype(&cuptiSubscribe) Subscribe = nullptr;
  decltype(&cuptiEnableCallback) EnableCallback = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) ActivityRegisterCallbacks = nullptr;
  decltype(&cuptiActivityEnable) ActivityEnable = nullptr;
  decltype(&cuptiActivityDisable) ActivityDisable = nullptr;
  decltype(&cuptiGetTimestamp) GetTimestamp = nullptr;
  decltype(&cuptiActivityFlushAll) ActivityFlushAll = nullptr;
  decltype(&cuptiActivityGetNextRecord) ActivityGetNextRecord = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) ActivityGetNumDroppedRecords = nullptr;
  decltype(&cuptiGetResultString) GetResultString = nullptr;
  // Optional (the tuning knobs, activity_tuning.h): absent, left at CUPTI's defaults.
  decltype(&cuptiActivitySetAttribute) ActivitySetAttribute = nullptr;
  decltype(&cuptiActivityFlushPeriod) ActivityFlushPeriod = nullptr;
  // Optional: absent, CUPTI stays attached after the last agent leaves.
  decltype(&cuptiFinalize) Finalize = nullptr;
  // Optional: absent, launch stacks come from the callbacks alone (the
  // launch route needs records of the launch calls alone, by the kernel's
  // thread IDs).
  decltype(&cuptiActivityEnableDriverApi) ActivityEnableDriverApi = nullptr;
  decltype(&cuptiSetThreadIdType) SetThreadIdType = nullptr;

  // Finds CUPTI: an already loaded libcupti.so.13 (PyTorch's), the loader's
  // search path, then $GPUFLAME_CUPTI_PATH. Empty string on success, else why not.
  std::string Load();
};

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_CUPTI_API_H_
