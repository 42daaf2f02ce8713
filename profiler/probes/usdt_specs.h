// The USDT argument specs in the BPF map the programs read them from
// (libbpf's __bpf_usdt_specs, struct gf_usdt_spec), each under the ID its
// sites carry as their BPF cookie.
//
// One ID per distinct spec, shared by every site and process that has it,
// and counted: a library's sites look the same in every process that maps
// it, so a job of many processes uses a handful of IDs, not one per site
// per process. An ID is free again when the last link holding it has
// closed: a closed uprobe runs no more (its close waits out the programs
// in flight), so a spec rewritten after that is read by no one of before.
//
// Threads: the worker attaches; the reaper and the closers of
// BpfProbes::CloseUprobeMultiLinks drop links (and so references): the
// table locks.
#ifndef GPUFLAME_PROFILER_PROBES_USDT_SPECS_H_
#define GPUFLAME_PROFILER_PROBES_USDT_SPECS_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "bpf/gpuflame_abi.h"

namespace gpuflame::profiler {

class UsdtSpecTable {
 public:
  // |map_fd|: the BPF array of |capacity| specs (not owned: the BPF object's).
  UsdtSpecTable(int map_fd, uint32_t capacity) : map_fd_(map_fd), capacity_(capacity) {}

  // The ID of |spec|, written to the map if new, with one reference more.
  absl::StatusOr<uint32_t> Acquire(const gf_usdt_spec& spec);
  void Ref(uint32_t id);
  void Release(uint32_t id);

  size_t in_use() const;

 private:
  static std::string KeyOf(const gf_usdt_spec& spec);

  const int map_fd_;
  const uint32_t capacity_;
  mutable std::mutex mutex_;
  absl::flat_hash_map<std::string, uint32_t> ids_;  // spec bytes -> ID
  std::vector<std::string> keys_;                   // ID -> spec bytes ("" once free)
  std::vector<uint32_t> refs_;                      // ID -> references
  std::vector<uint32_t> free_;                      // IDs to reuse
};

// References to specs held by one link, dropped when it is destroyed:
// declared before the link's descriptors in ProbeLink, so the link closes
// first.
class UsdtSpecRefs {
 public:
  UsdtSpecRefs() = default;
  UsdtSpecRefs(std::shared_ptr<UsdtSpecTable> table, std::vector<uint32_t> ids);
  ~UsdtSpecRefs() { Drop(); }
  UsdtSpecRefs(UsdtSpecRefs&& o) noexcept : table_(std::move(o.table_)), ids_(std::move(o.ids_)) {}
  UsdtSpecRefs& operator=(UsdtSpecRefs&& o) noexcept;
  UsdtSpecRefs(const UsdtSpecRefs&) = delete;
  UsdtSpecRefs& operator=(const UsdtSpecRefs&) = delete;

  // For a link left open to the kernel at exit (AbandonLink): its specs stay.
  void Keep() {
    table_.reset();
    ids_.clear();
  }

 private:
  void Drop();
  std::shared_ptr<UsdtSpecTable> table_;
  std::vector<uint32_t> ids_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROBES_USDT_SPECS_H_
