// Concurrent fan-out of sub-queries that each return ids: the calls run on a ThreadPool (the
// first one on the calling thread), and the results are concatenated in call order. The first
// failure (in call order) is returned after every call has finished, so no call outlives the
// data it refers to.
//
// Thread-safety: stateless.
#pragma once

#include <functional>
#include <future>
#include <vector>

#include "util/status.h"
#include "util/thread_pool.h"

namespace zipg::rpc {

using IdsCall = std::function<StatusOr<std::vector<int64_t>>()>;

inline StatusOr<std::vector<int64_t>> GatherIds(ThreadPool& pool, const std::vector<IdsCall>& calls) {
  std::vector<std::future<StatusOr<std::vector<int64_t>>>> pending;
  for (size_t i = 1; i < calls.size(); ++i) pending.push_back(pool.Submit(calls[i]));
  std::vector<StatusOr<std::vector<int64_t>>> results;
  if (!calls.empty()) results.push_back(calls[0]());
  for (auto& f : pending) results.push_back(f.get());
  std::vector<int64_t> ids;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    ids.insert(ids.end(), r->begin(), r->end());
  }
  return ids;
}

}  // namespace zipg::rpc
