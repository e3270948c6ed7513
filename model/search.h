// search_node_ids (../shared/spec/interface.md, "Search inside values"; docs/search.md): its
// arguments, their checks, the match kinds and what each means on one value, and how the sorted
// parts of an answer (one per shard server and one from the LogStore) become the answer.
//
// Thread-safety: plain values and free functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/types.h"
#include "util/status.h"

namespace zipg {

enum class SearchMatch { kContains, kPrefix, kSuffix, kExact };

// The match kinds by name, as the contract spells them.
inline constexpr std::pair<std::string_view, SearchMatch> kSearchMatchNames[] = {
    {"contains", SearchMatch::kContains},
    {"prefix", SearchMatch::kPrefix},
    {"suffix", SearchMatch::kSuffix},
    {"exact", SearchMatch::kExact}};

// "contains", "prefix", "suffix", "exact"; false for anything else.
inline bool ParseSearchMatch(std::string_view name, SearchMatch* match) {
  for (const auto& [n, m] : kSearchMatchNames) {
    if (n == name) {
      *match = m;
      return true;
    }
  }
  return false;
}

inline const char* SearchMatchName(SearchMatch match) {
  for (const auto& [n, m] : kSearchMatchNames) {
    if (m == match) return n.data();  // the literals are NUL-terminated
  }
  return "contains";
}

// Whether `value` matches `pattern` as `match` says: the reference every search answers to.
inline bool ValueMatches(std::string_view value, std::string_view pattern, SearchMatch match) {
  switch (match) {
    case SearchMatch::kContains:
      return value.find(pattern) != std::string_view::npos;
    case SearchMatch::kPrefix:
      return value.starts_with(pattern);
    case SearchMatch::kSuffix:
      return value.ends_with(pattern);
    case SearchMatch::kExact:
      return value == pattern;
  }
  return false;
}

inline constexpr size_t kMaxSearchPattern = 4096;  // bytes
inline constexpr int64_t kDefaultSearchLimit = 10000;
inline constexpr int64_t kMaxSearchLimit = 1000000;
// Occurrences one shard's search may locate (each costs up to the sample rate's LF steps); more
// is RESOURCE_EXHAUSTED (docs/limits.md).
inline constexpr uint64_t kMaxSearchOccurrences = uint64_t{1} << 22;

struct NodeSearch {
  std::string pattern;
  std::optional<std::string> property;  // none: any property
  SearchMatch match = SearchMatch::kContains;
  int64_t limit = kDefaultSearchLimit;
};

// Whether a node with these properties answers the search (q.limit aside).
inline bool PropertiesMatch(const Properties& props, const NodeSearch& q) {
  return std::any_of(props.begin(), props.end(), [&](const auto& p) {
    return (!q.property || p.first == *q.property) && ValueMatches(p.second, q.pattern, q.match);
  });
}

struct SearchResult {
  std::vector<int64_t> ids;  // ascending
  bool truncated = false;    // more ids match than `ids` holds
  friend bool operator==(const SearchResult&, const SearchResult&) = default;
};

// INVALID_ARGUMENT for an empty pattern, one over kMaxSearchPattern bytes, or a limit outside
// 1..kMaxSearchLimit.
inline Status ValidateSearch(const NodeSearch& q) {
  if (q.pattern.empty()) return Status::InvalidArgument("search_node_ids needs a pattern");
  if (q.pattern.size() > kMaxSearchPattern) {
    return Status::InvalidArgument("search_node_ids: the pattern has " +
                                   std::to_string(q.pattern.size()) + " bytes, at most " +
                                   std::to_string(kMaxSearchPattern));
  }
  if (q.limit < 1 || q.limit > kMaxSearchLimit) {
    return Status::InvalidArgument("search_node_ids: limit must be in 1.." +
                                   std::to_string(kMaxSearchLimit) + ", got " +
                                   std::to_string(q.limit));
  }
  return Status::OK();
}

// One part of an answer as a server sends it: sorted, distinct, and at most limit + 1 ids (the
// extra one says that more exist). The union of such parts holds the answer's first limit + 1 ids.
inline void CutSearchPart(std::vector<int64_t>* ids, int64_t limit) {
  std::sort(ids->begin(), ids->end());
  ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
  if (ids->size() > static_cast<uint64_t>(limit) + 1) ids->resize(limit + 1);
}

// The answer from the concatenated parts.
inline SearchResult FinishSearch(std::vector<int64_t> ids, int64_t limit) {
  CutSearchPart(&ids, limit);
  SearchResult result;
  result.truncated = ids.size() > static_cast<uint64_t>(limit);
  if (result.truncated) ids.resize(limit);
  result.ids = std::move(ids);
  return result;
}

}  // namespace zipg
