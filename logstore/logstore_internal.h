// Helpers shared by the files of the LogStore (logstore.cc, logstore_write.cc, logstore_read.cc,
// logstore_compact.cc, logstore_standby.cc); not part of its interface.
//
// Thread-safety: free functions over their arguments.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "logstore/ship.h"
#include "util/status.h"

namespace zipg::logstore::internal {

// The LogStore's state file: its log shards and live logs (docs/logstore-ha.md).
inline constexpr char kStateName[] = "STATE";

inline bool Contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

inline double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// The size of the regular files under `dir`.
inline uint64_t DirBytes(const std::string& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::end(it); it.increment(ec)) {
    if (it->is_regular_file(ec)) bytes += it->file_size(ec);
  }
  return bytes;
}

// Why a log shipping answer leaves the standby out of step with this log: "" if it answered ok
// and is at (generation, next_index), as it must be after the request.
inline std::string ShipMismatch(const StatusOr<ShipReply>& reply, uint64_t generation,
                                uint64_t next_index) {
  if (!reply.ok()) return reply.status().ToString();
  if (reply->code == ShipCode::kOk && reply->generation == generation &&
      reply->next_index == next_index) {
    return "";
  }
  return "the standby answered code " + std::to_string(static_cast<int>(reply->code)) +
         " at generation " + std::to_string(reply->generation) + " record " +
         std::to_string(reply->next_index) + ", this log at generation " +
         std::to_string(generation) + " record " + std::to_string(next_index) +
         (reply->message.empty() ? "" : ": " + reply->message);
}

}  // namespace zipg::logstore::internal
