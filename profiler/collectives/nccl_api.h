// What NCCL's API means, for the tracker and its reports: which calls are
// collectives, which point-to-point, how many bytes an element of each
// ncclDataType_t is, and names of reduction ops and results. Facts from
// NCCL's src/nccl.h.in and src/include/collectives.h (ncclTypeSize) at
// 2.30.7; the same values in 2.28.9, the version PyTorch 2.11's wheels use.
// Pure functions: any thread.
#ifndef GPUFLAME_PROFILER_COLLECTIVES_NCCL_API_H_
#define GPUFLAME_PROFILER_COLLECTIVES_NCCL_API_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpuflame::profiler {

// All-reduce, broadcast, all-gather, reduce-scatter: every rank of the
// communicator takes part, in the same order.
bool IsNcclCollective(uint16_t api);
// ncclSend / ncclRecv: a pair of ranks.
bool IsNcclPointToPoint(uint16_t api);

// Bytes of one element of an ncclDataType_t value; none for a value this
// NCCL does not define (the profiled process may pass anything).
std::optional<uint64_t> NcclTypeSize(uint32_t datatype);
// Bytes a call names: its count of elements of its type (all-gather: each
// rank's contribution; reduce-scatter: each rank's result); 0 for a call
// that moves no data (init, group start/end); none for an unknown type. A
// hostile count saturates at UINT64_MAX instead of wrapping.
std::optional<uint64_t> NcclCallBytes(uint16_t api, uint64_t count, uint32_t datatype);
// "float32", "bfloat16", ... or "type N".
std::string NcclTypeName(uint32_t datatype);
// "sum", "prod", "max", "min", "avg", or "op N" (NCCL's dynamic PreMulSum ops).
std::string NcclOpName(uint32_t op);
// "ncclSuccess", ... or "ncclResult N".
std::string NcclResultName(uint32_t result);

// The bytes a call's link moves in nccl-tests' bus-bandwidth terms
// (NCCL's doc/PERFORMANCE.md of nccl-tests: busBw = algBw x factor), from
// the bytes the call names (NcclCallBytes) and its communicator's size:
// all-reduce x 2(n-1)/n; all-gather and reduce-scatter, whose named bytes
// are one rank's part of the n, x (n-1); broadcast, send, receive x 1. None
// where that needs |nranks| and it is not known (0), or for a call that
// moves no data.
std::optional<uint64_t> NcclBusBytes(uint16_t api, uint64_t bytes, int nranks);

// The peer's call that matches |api| on this rank: ncclSend's is ncclRecv,
// a collective's is itself.
std::string_view NcclMatchingCall(uint16_t api);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_COLLECTIVES_NCCL_API_H_
