#include "rpc/limits.h"

#include <string>

namespace zipg::rpc {

Status CheckRequestCount(const char* op, const char* what, size_t count, size_t bound) {
  if (count <= bound) return Status::OK();
  return Status::ResourceExhausted(std::string(op) + ": " + std::to_string(count) + " " + what +
                                   " in one call; at most " + std::to_string(bound));
}

Status CheckEdgeAnswer(const char* op, const std::vector<zipg::Edge>& edges, const char* hint,
                       size_t max_edges, size_t max_bytes) {
  if (edges.size() > max_edges) {
    return Status::ResourceExhausted(std::string(op) + ": the answer has more than " +
                                     std::to_string(max_edges) + " edges; " + hint);
  }
  size_t bytes = 0;
  for (const zipg::Edge& e : edges) {
    bytes += 48;  // four i64 fields, the field and map headers
    for (const auto& [name, value] : e.properties) bytes += 8 + name.size() + value.size();
  }
  if (bytes > max_bytes) {
    return Status::ResourceExhausted(std::string(op) + ": the answer of ~" + std::to_string(bytes) +
                                     " bytes exceeds the limit of " + std::to_string(max_bytes) +
                                     "; " + hint);
  }
  return Status::OK();
}

Status CheckIdAnswer(const char* op, size_t ids, const char* hint) {
  if (ids <= kMaxAnswerIds) return Status::OK();
  return Status::ResourceExhausted(std::string(op) + ": the answer has " + std::to_string(ids) +
                                   " ids, more than " + std::to_string(kMaxAnswerIds) + "; " +
                                   hint);
}

}  // namespace zipg::rpc
