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
  log_.Record(node, std::move(change));
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
  return log_.ChangedAfter(node, at);
}

NodeAt MemHistory::At(int64_t node, uint64_t at) const {
  NodeAt out;
  std::shared_lock lock(mu_);
  const auto* changes = log_.Changes(node);
  if (changes == nullptr) return out;
  for (const Change& c : *changes) {  // oldest first: the first change of a key after `at` wins
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
  std::shared_lock lock(mu_);
  std::vector<int64_t> out = log_.KeysChangedAfter(at);
  // Only those whose properties changed.
  std::erase_if(out, [&](int64_t node) {
    const auto* changes = log_.Changes(node);
    return std::none_of(changes->begin(), changes->end(),
                        [&](const Change& c) { return c.id > at && c.type < 0; });
  });
  return out;
}

void MemHistory::Prune(uint64_t horizon) {
  std::unique_lock lock(mu_);
  log_.Prune(horizon, [this](const Change& c) { bytes_ -= Bytes(c); });
}

size_t MemHistory::changes() const {
  std::shared_lock lock(mu_);
  return log_.changes();
}

uint64_t MemHistory::bytes() const {
  std::shared_lock lock(mu_);
  return bytes_;
}

}  // namespace zipg::logstore
