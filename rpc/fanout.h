// Concurrent fan-out of sub-queries that each return a list: the calls run on a ThreadPool (the
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

template <typename T>
using ListCall = std::function<StatusOr<std::vector<T>>()>;
using IdsCall = ListCall<int64_t>;

template <typename T>
StatusOr<std::vector<T>> Gather(ThreadPool& pool, const std::vector<ListCall<T>>& calls) {
  std::vector<std::future<StatusOr<std::vector<T>>>> pending;
  for (size_t i = 1; i < calls.size(); ++i) pending.push_back(pool.Submit(calls[i]));
  std::vector<StatusOr<std::vector<T>>> results;
  if (!calls.empty()) results.push_back(calls[0]());
  for (auto& f : pending) results.push_back(f.get());
  std::vector<T> out;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    out.insert(out.end(), r->begin(), r->end());
  }
  return out;
}

inline StatusOr<std::vector<int64_t>> GatherIds(ThreadPool& pool,
                                                const std::vector<IdsCall>& calls) {
  return Gather<int64_t>(pool, calls);
}

}  // namespace zipg::rpc
