#include "graph/edge_list.h"

#include <algorithm>

namespace zipg {

std::pair<int64_t, int64_t> ListEdgeRange(const EdgeList& edges, int64_t lo, int64_t hi) {
  auto begin = std::partition_point(edges.begin(), edges.end(),
                                    [hi](const Edge& e) { return e.timestamp > hi; });
  auto end = std::partition_point(edges.begin(), edges.end(),
                                  [lo](const Edge& e) { return e.timestamp >= lo; });
  const int64_t b = begin - edges.begin();
  return {b, std::max<int64_t>(b, end - edges.begin())};
}

std::optional<Edge> ListEdgeData(const EdgeList& edges, int64_t time_order) {
  if (time_order < 0 || static_cast<uint64_t>(time_order) >= edges.size()) return std::nullopt;
  return edges[time_order];
}

EdgeList ListAssocRange(const EdgeList& edges, int64_t pos, int64_t limit) {
  if (pos < 0 || limit <= 0 || static_cast<uint64_t>(pos) >= edges.size()) return {};
  const uint64_t end = pos + std::min<uint64_t>(limit, edges.size() - pos);
  return EdgeList(edges.begin() + pos, edges.begin() + end);
}

EdgeList ListAssocGet(const EdgeList& edges, const std::vector<int64_t>& ids, int64_t low,
                      int64_t high) {
  std::vector<int64_t> wanted = ids;
  std::sort(wanted.begin(), wanted.end());
  const auto [begin, end] = ListEdgeRange(edges, low, high);
  EdgeList out;
  for (int64_t i = begin; i < end; ++i) {
    if (std::binary_search(wanted.begin(), wanted.end(), edges[i].dst)) out.push_back(edges[i]);
  }
  return out;
}

EdgeList ListAssocTimeRange(const EdgeList& edges, int64_t low, int64_t high, int64_t limit) {
  if (limit <= 0) return {};
  const auto [begin, end] = ListEdgeRange(edges, low, high);
  return EdgeList(edges.begin() + begin, edges.begin() + begin + std::min(end - begin, limit));
}

Properties SelectProperties(const Properties& all, const std::vector<std::string>* names) {
  if (names == nullptr) return all;
  Properties out;
  for (const auto& [name, value] : all) {
    if (std::find(names->begin(), names->end(), name) != names->end()) {
      out.emplace_back(name, value);
    }
  }
  return out;
}

bool MatchesAll(const Properties& all, const Properties& filter) {
  for (const auto& [name, value] : filter) {
    auto it = std::lower_bound(all.begin(), all.end(), name,
                               [](const auto& p, const std::string& n) { return p.first < n; });
    if (it == all.end() || it->first != name || it->second != value) return false;
  }
  return true;
}

Properties NormalizeProperties(Properties properties) {
  std::stable_sort(properties.begin(), properties.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  Properties out;
  for (auto& p : properties) {
    if (!out.empty() && out.back().first == p.first) out.pop_back();
    if (!p.second.empty()) out.push_back(std::move(p));
  }
  return out;
}

}  // namespace zipg
