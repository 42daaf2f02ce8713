#include "profiler/probes/usdt_specs.h"

#include <bpf/bpf.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {

std::string UsdtSpecTable::KeyOf(const gf_usdt_spec& spec) {
  gf_usdt_spec clean{};  // padding zeroed: equal specs, equal keys
  for (int i = 0; i < GF_USDT_MAX_ARGS; i++) {
    clean.args[i].val_off = spec.args[i].val_off;
    clean.args[i].arg_type = spec.args[i].arg_type;
    clean.args[i].reg_off = spec.args[i].reg_off;
    clean.args[i].arg_signed = spec.args[i].arg_signed;
    clean.args[i].arg_bitshift = spec.args[i].arg_bitshift;
  }
  clean.usdt_cookie = spec.usdt_cookie;
  clean.arg_cnt = spec.arg_cnt;
  return std::string(reinterpret_cast<const char*>(&clean), sizeof(clean));
}

absl::StatusOr<uint32_t> UsdtSpecTable::Acquire(const gf_usdt_spec& spec) {
  std::string key = KeyOf(spec);
  std::lock_guard lock(mutex_);
  if (auto it = ids_.find(key); it != ids_.end()) {
    refs_[it->second]++;
    return it->second;
  }
  uint32_t id;
  if (!free_.empty()) {
    id = free_.back();
  } else if (keys_.size() < capacity_) {
    id = static_cast<uint32_t>(keys_.size());
  } else {
    return absl::ResourceExhaustedError(absl::StrCat("all ", capacity_, " USDT argument specs are in use"));
  }
  if (bpf_map_update_elem(map_fd_, &id, key.data(), BPF_ANY) != 0)
    return absl::InternalError(absl::StrCat("writing a USDT argument spec: ", std::strerror(errno)));
  if (!free_.empty()) {
    free_.pop_back();
  } else {
    keys_.emplace_back();
    refs_.push_back(0);
  }
  keys_[id] = key;
  refs_[id] = 1;
  ids_.emplace(std::move(key), id);
  return id;
}

void UsdtSpecTable::Ref(uint32_t id) {
  std::lock_guard lock(mutex_);
  if (id < refs_.size() && refs_[id] > 0) refs_[id]++;
}

void UsdtSpecTable::Release(uint32_t id) {
  std::lock_guard lock(mutex_);
  if (id >= refs_.size() || refs_[id] == 0) return;
  if (--refs_[id] > 0) return;
  ids_.erase(keys_[id]);
  keys_[id].clear();
  free_.push_back(id);
}

size_t UsdtSpecTable::in_use() const {
  std::lock_guard lock(mutex_);
  return ids_.size();
}

UsdtSpecRefs::UsdtSpecRefs(std::shared_ptr<UsdtSpecTable> table, std::vector<uint32_t> ids)
    : table_(std::move(table)), ids_(std::move(ids)) {
  for (uint32_t id : ids_) table_->Ref(id);
}

UsdtSpecRefs& UsdtSpecRefs::operator=(UsdtSpecRefs&& o) noexcept {
  if (this != &o) {
    Drop();
    table_ = std::move(o.table_);
    ids_ = std::move(o.ids_);
  }
  return *this;
}

void UsdtSpecRefs::Drop() {
  if (table_)
    for (uint32_t id : ids_) table_->Release(id);
  table_.reset();
  ids_.clear();
}

}  // namespace gpuflame::profiler
