#include "shard/fence.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "util/file.h"

namespace zipg::shard {

StatusOr<std::unique_ptr<Fence>> Fence::Open(const std::string& path) {
  std::unique_ptr<Fence> fence(new Fence(path));
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return fence;
  ZIPG_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) {
    return Status::Corruption(path + ": not a JSON object of shard epochs");
  }
  for (const auto& [key, value] : j.items()) {
    uint32_t shard = 0;
    try {
      size_t used = 0;
      const unsigned long parsed = std::stoul(key, &used);
      if (used != key.size() || parsed > UINT32_MAX) throw std::out_of_range(key);
      shard = static_cast<uint32_t>(parsed);
    } catch (const std::exception&) {
      return Status::Corruption(path + ": '" + key + "' is not a shard number");
    }
    if (!value.is_number_unsigned()) {
      return Status::Corruption(path + ": the epoch of shard " + key + " is not a number");
    }
    fence->epochs_[shard] = value.get<uint64_t>();
  }
  return fence;
}

Status Fence::Admit(uint32_t shard, uint64_t epoch) {
  std::lock_guard lock(mu_);
  const uint64_t seen = epochs_.count(shard) ? epochs_[shard] : 0;
  if (epoch < seen) {
    return Status::Unavailable("fenced: shard " + std::to_string(shard) +
                                      " has seen LogStore epoch " + std::to_string(seen) +
                                      ", this batch is of epoch " + std::to_string(epoch));
  }
  if (epoch > seen) {
    auto next = epochs_;
    next[shard] = epoch;
    ZIPG_RETURN_IF_ERROR(Save(next));
    epochs_ = std::move(next);
  }
  return Status::OK();
}

uint64_t Fence::epoch(uint32_t shard) const {
  std::lock_guard lock(mu_);
  auto it = epochs_.find(shard);
  return it == epochs_.end() ? 0 : it->second;
}

Status Fence::Save(const std::map<uint32_t, uint64_t>& epochs) const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [shard, epoch] : epochs) j[std::to_string(shard)] = epoch;
  const std::string text = j.dump() + "\n";
  return WriteFileAtomically(path_, [&](const FileSink& sink) { return sink(text); });
}

}  // namespace zipg::shard
