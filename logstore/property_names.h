// PropertyNames: the distinct property names the LogStore has taken, nodes' and edges' apart, and
// the bound on them (docs/limits.md, "Property names"). Every file a compaction, a merge or a base
// shard's rebuild writes holds the property names of all its inputs in its header, and a layout
// file holds at most layout::kMaxProperties (1024) of each kind; a write that brought the 1025th
// name would make every later compaction of its generation fail. So the leader admits a write's
// new names only while fewer than that many are known (RESOURCE_EXHAUSTED otherwise), before the
// write is logged.
//
// Persisted in its own log (logstore/wal.h framing), one record per name: 'n' or 'e', then the
// name's bytes. Names are never removed: a name whose data was deleted may still be in the header
// of a log shard or a base shard.
//
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "graph/api.h"
#include "util/wal.h"
#include "util/status.h"

namespace zipg::logstore {

class PropertyNames {
 public:
  enum Kind { kNode = 0, kEdge = 1 };

  // Opens (creating) the log at `path` and reads the names in it; `sync`: fdatasync each new
  // name (WalOptions::sync).
  static StatusOr<std::unique_ptr<PropertyNames>> Open(const std::string& path, bool sync,
                                                       size_t bound);

  // Admits the names of one write: OK if each is known or all the new ones fit under the bound
  // (they are then known, durably); RESOURCE_EXHAUSTED naming the first that does not fit, and
  // none is added.
  Status Admit(Kind kind, const Properties& properties);
  // Adds names without the bound: names of data that exists (found at open, or applied by a
  // standby as its leader logged it). They are known from then on even if keeping them fails
  // (the status says so): the data holds them, and the next open learns them again from it.
  Status Learn(Kind kind, const std::vector<std::string>& names);

  size_t count(Kind kind) const;
  size_t bound() const { return bound_; }

 private:
  PropertyNames(std::unique_ptr<Wal> log, size_t bound) : log_(std::move(log)), bound_(bound) {}
  // The names not known yet, sorted and distinct (mu_ held).
  std::vector<std::string> FreshLocked(Kind kind, const std::vector<std::string>& names) const;
  // Appends the names in `fresh` to the log (mu_ held).
  Status Persist(Kind kind, const std::vector<std::string>& fresh);

  std::unique_ptr<Wal> log_;
  const size_t bound_;
  mutable std::mutex mu_;
  std::set<std::string> names_[2];
};

}  // namespace zipg::logstore
