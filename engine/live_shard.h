// LiveShard: one base shard as a shard server hosts it: its current version (compressed files,
// the DeltaIndex of the writes since, read through a MergedShard) and the rebuild that folds
// those writes back into a new version (docs/writes.md, "Rebuilding a base shard").
//
// A rebuild takes the last applied update id X, builds new compressed files from the current
// version's live data (the base less its deletes, plus the LogStore's live edges and properties
// of the written nodes) without blocking reads or writes, then, holding the apply lock, opens
// them with an empty delta whose floor is X, re-applies every batch applied since X (each update
// resolved again against the new base, so an update the build saw or missed ends the same way),
// points the version file at them and swaps. Readers holding the old version keep it (and its
// files) until they finish.
//
// Files, for prefix P = <updates dir>/shard-<s>:
//   P.delta          the delta of the store's own shard (version 0)
//   P.v<K>/          version K >= 1: a one-shard store (manifest, shard-0000/) from graph::Compress
//   P.v<K>.delta     its delta
//   P.version        {"version": K, "through": X}, written atomically; absent: version 0
// Open removes any P.v* that P.version does not name (a build a crash interrupted, a version
// superseded while a reader held it).
//
// Thread-safety: every method may be called concurrently; Apply calls are serialized inside, and
// so are rebuilds.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/merged.h"
#include "engine/shard.h"

namespace zipg::engine {

struct LiveShardOptions {
  // fdatasync the delta at each batch (else on Sync()).
  bool sync = false;
  // Memory a rebuild's compress may use, in bytes; 0: graph::Compress's default share of the
  // memory available.
  uint64_t rebuild_memory = 0;
  // Tests: called by Rebuild with 0 after it took its snapshot and 1 after the build, before the
  // swap (writes applied from it land during the build).
  std::function<void(int stage)> rebuild_hook;
};

class LiveShard {
 public:
  // `original` (the store's shard, version 0) and `log` must outlive this.
  static StatusOr<std::unique_ptr<LiveShard>> Open(const Shard* original, const std::string& prefix,
                                                   FragmentSource* log, LiveShardOptions options);
  ~LiveShard();

  // The current version, for one read (it stays open while the pointer is held).
  std::shared_ptr<const MergedShard> Current() const;

  // Applies a batch from the LogStore to the current version (MergedShard::Apply).
  StatusOr<std::vector<bool>> Apply(const std::vector<Update>& batch);
  uint64_t last_id() const;
  Status Sync();
  uint64_t delta_bytes() const;  // the current delta's bytes in memory
  size_t written_nodes() const;  // nodes in the current delta

  // Builds a new version holding every write applied so far and switches to it. Returns its
  // summary (also in Stats()["last_rebuild"]). On failure the current version stays.
  StatusOr<nlohmann::json> Rebuild();

  // Makes a rebuild under way (and every later one) stop soon with UNAVAILABLE (closing).
  void Cancel() { cancelled_ = true; }

  // {"version", "through", "rebuilds", "rebuilding", "last_rebuild"}.
  nlohmann::json Stats() const;

 private:
  struct Version;

  LiveShard(const Shard* original, std::string prefix, FragmentSource* log,
            LiveShardOptions options);
  std::string VersionDir(int64_t k) const;
  std::string DeltaPath(int64_t k) const;
  std::shared_ptr<Version> Snapshot() const;
  // Streams the live data of `v` into a new one-shard store at `dir`.
  Status Build(const Version& v, const std::string& dir, nlohmann::json* summary) const;

  const Shard* const original_;
  const std::string prefix_;
  FragmentSource* const log_;
  const LiveShardOptions options_;

  mutable std::mutex version_mu_;     // guards current_ (held only to copy or swap it)
  std::shared_ptr<Version> current_;  // never null after Open

  // Serializes Apply and the swap; guards the two fields below.
  std::mutex apply_mu_;
  bool logging_ = false;                        // a rebuild is under way
  std::vector<std::vector<Update>> log_since_;  // batches applied since its snapshot

  std::mutex rebuild_mu_;  // one rebuild at a time
  std::atomic<bool> cancelled_{false};
  mutable std::mutex stats_mu_;  // guards the three below
  bool rebuilding_ = false;
  uint64_t rebuilds_ = 0;
  nlohmann::json last_rebuild_;
};

}  // namespace zipg::engine
