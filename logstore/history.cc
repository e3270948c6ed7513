#include "logstore/history.h"

#include <algorithm>
#include <mutex>

#include "graph/edge_list.h"

namespace zipg::logstore {

void NodeAt::FixEdges(std::vector<Edge>* edges, bool any_type, int64_t type) const {
  if (this->edges.empty()) return;
  edges->erase(std::remove_if(edges->begin(), edges->end(),
                              [&](const Edge& e) {
                                return this->edges.count({e.type, e.dst}) > 0;
                              }),
               edges->end());
  for (const auto& [key, edge] : this->edges) {
    if (edge && (any_type || key.first == type)) edges->push_back(*edge);
  }
  std::sort(edges->begin(), edges->end(), [](const Edge& a, const Edge& b) {
    return a.type != b.type ? a.type < b.type : NewestFirst(a, b);
  });
}

uint64_t MemHistory::Bytes(const Change& c) {
  uint64_t n = sizeof(Change) + 16;
  auto props = [&n](const Properties& p) {
    for (const auto& [name, value] : p) n += name.size() + value.size() + 2 * sizeof(std::string);
  };
  if (c.props) props(*c.props);
  if (c.edge) props(c.edge->properties);
  return n;
}

void MemHistory::Record(int64_t node, Change change) {
  std::unique_lock lock(mu_);
  bytes_ += Bytes(change);
  order_.emplace_back(change.id, node);
  nodes_[node].push_back(std::move(change));
}

void MemHistory::RecordProps(int64_t node, uint64_t id, std::optional<Properties> before) {
  Record(node, Change{id, -1, 0, std::move(before), std::nullopt});
}

void MemHistory::RecordEdge(int64_t node, uint64_t id, int64_t type, int64_t dst,
                            std::optional<Edge> before) {
  Record(node, Change{id, type, dst, std::nullopt, std::move(before)});
}

bool MemHistory::ChangedAfter(int64_t node, uint64_t at) const {
  std::shared_lock lock(mu_);
  auto it = nodes_.find(node);
  return it != nodes_.end() && !it->second.empty() && it->second.back().id > at;
}

NodeAt MemHistory::At(int64_t node, uint64_t at) const {
  NodeAt out;
  std::shared_lock lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return out;
  for (const Change& c : it->second) {  // oldest first: the first change of a key after `at` wins
    if (c.id <= at) continue;
    if (c.type < 0) {
      if (!out.props_changed) {
        out.props_changed = true;
        out.props = c.props;
      }
    } else {
      out.edges.try_emplace({c.type, c.dst}, c.edge);
    }
  }
  return out;
}

std::vector<int64_t> MemHistory::PropsChangedAfter(uint64_t at) const {
  std::vector<int64_t> out;
  std::shared_lock lock(mu_);
  for (auto it = order_.rbegin(); it != order_.rend() && it->first > at; ++it) {
    out.push_back(it->second);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  // Only those whose properties changed.
  out.erase(std::remove_if(out.begin(), out.end(),
                           [&](int64_t node) {
                             const auto& changes = nodes_.at(node);
                             return std::none_of(
                                 changes.begin(), changes.end(),
                                 [&](const Change& c) { return c.id > at && c.type < 0; });
                           }),
            out.end());
  return out;
}

void MemHistory::Prune(uint64_t horizon) {
  std::unique_lock lock(mu_);
  while (!order_.empty() && order_.front().first <= horizon) {
    auto it = nodes_.find(order_.front().second);
    if (it != nodes_.end()) {
      auto& changes = it->second;
      while (!changes.empty() && changes.front().id <= horizon) {
        bytes_ -= Bytes(changes.front());
        changes.pop_front();
      }
      if (changes.empty()) nodes_.erase(it);
    }
    order_.pop_front();
  }
}

size_t MemHistory::changes() const {
  std::shared_lock lock(mu_);
  return order_.size();
}

uint64_t MemHistory::bytes() const {
  std::shared_lock lock(mu_);
  return bytes_;
}

}  // namespace zipg::logstore
