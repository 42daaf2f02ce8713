#include "profiler/collectives/nccl_api.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "bpf/gpuflame_abi.h"
#include "profiler/probes/probe_table.h"

namespace gpuflame::profiler {
namespace {

struct TypeInfo {
  const char* name;
  uint64_t bytes;
};
// ncclDataType_t 0..11 (ncclInt8 = ncclChar, ncclFloat16 = ncclHalf, ...).
constexpr std::array<TypeInfo, 12> kTypes = {{{"int8", 1},
                                              {"uint8", 1},
                                              {"int32", 4},
                                              {"uint32", 4},
                                              {"int64", 8},
                                              {"uint64", 8},
                                              {"float16", 2},
                                              {"float32", 4},
                                              {"float64", 8},
                                              {"bfloat16", 2},
                                              {"float8e4m3", 1},
                                              {"float8e5m2", 1}}};
// ncclResult_t 0..8.
constexpr std::array<const char*, 9> kResults = {"ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
                                                 "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
                                                 "ncclRemoteError",   "ncclInProgress",         "ncclTimeout"};

}  // namespace

std::optional<uint64_t> NcclBusBytes(uint16_t api, uint64_t bytes, int nranks) {
  const auto scaled = [&](uint64_t num, uint64_t den) {
    return static_cast<uint64_t>(
        std::min<unsigned __int128>(static_cast<unsigned __int128>(bytes) * num / den, UINT64_MAX));
  };
  switch (api) {
    case GF_API_NCCL_BROADCAST:
    case GF_API_NCCL_SEND:
    case GF_API_NCCL_RECV: return bytes;
    case GF_API_NCCL_ALL_REDUCE:
      if (nranks <= 0) return std::nullopt;
      return scaled(2 * static_cast<uint64_t>(nranks - 1), static_cast<uint64_t>(nranks));
    case GF_API_NCCL_ALL_GATHER:
    case GF_API_NCCL_REDUCE_SCATTER:
      if (nranks <= 0) return std::nullopt;
      return scaled(static_cast<uint64_t>(nranks - 1), 1);
    default: return std::nullopt;
  }
}

bool IsNcclCollective(uint16_t api) {
  return api == GF_API_NCCL_ALL_REDUCE || api == GF_API_NCCL_BROADCAST || api == GF_API_NCCL_ALL_GATHER ||
         api == GF_API_NCCL_REDUCE_SCATTER;
}

bool IsNcclPointToPoint(uint16_t api) { return api == GF_API_NCCL_SEND || api == GF_API_NCCL_RECV; }

std::optional<uint64_t> NcclTypeSize(uint32_t datatype) {
  if (datatype >= kTypes.size()) return std::nullopt;
  return kTypes[datatype].bytes;
}

std::optional<uint64_t> NcclCallBytes(uint16_t api, uint64_t count, uint32_t datatype) {
  if (!IsNcclCollective(api) && !IsNcclPointToPoint(api)) return 0;
  std::optional<uint64_t> size = NcclTypeSize(datatype);
  if (!size) return std::nullopt;
  return count > UINT64_MAX / *size ? UINT64_MAX : count * *size;
}

std::string NcclTypeName(uint32_t datatype) {
  return datatype < kTypes.size() ? std::string(kTypes[datatype].name) : absl::StrCat("type ", datatype);
}

std::string NcclOpName(uint32_t op) {
  static constexpr std::array<const char*, 5> kOps = {"sum", "prod", "max", "min", "avg"};  // ncclRedOp_t 0..4
  return op < kOps.size() ? std::string(kOps[op]) : absl::StrCat("op ", op);
}

std::string NcclResultName(uint32_t result) {
  return result < kResults.size() ? std::string(kResults[result]) : absl::StrCat("ncclResult ", result);
}

std::string_view NcclMatchingCall(uint16_t api) {
  if (api == GF_API_NCCL_SEND) return "ncclRecv";
  if (api == GF_API_NCCL_RECV) return "ncclSend";
  return ApiName(api);
}

}  // namespace gpuflame::profiler
