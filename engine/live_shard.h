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

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/merged.h"
#include "layout/shard.h"
#include "util/snapshot.h"

namespace zipg::engine {

struct LiveShardOptions {
  // fdatasync the delta at each batch (else on Sync()).
  bool sync = false;
  // Memory a rebuild's compress may use, in bytes; 0: graph::Compress's default share of the
  // memory available.
  uint64_t rebuild_memory = 0;
  // Tests: called by Rebuild (and Split) with 0 after it took its snapshot and 1 after the
  // build, before the swap (writes applied from it land during the build).
  std::function<void(int stage)> rebuild_hook;
  // Snapshots (docs/consistency.md): reads at a snapshot the LogStore handed out less than this
  // long ago are answered.
  int snapshot_retention_ms = 60000;
  // Returns once every update up to the id is committed (the LogStore has applied its data);
  // a rebuild calls it before it reads the LogStore's data of the updates it folds in. Null:
  // no wait (a test's stand-in LogStore applies before the shard does).
  std::function<Status(uint64_t id)> await_commit;
  // Hold each version's uncommitted batches out of its delta file until Commit passes them, so
  // that RollBackUncommitted can undo them (engine/delta.h; a shard server's replicas).
  bool hold_uncommitted = false;
};

class LiveShard {
 public:
  // `original` (the store's shard, version 0) and `log` must outlive this. `original` may be null
  // for a shard the store's files do not hold (a split's half): then `prefix`.version must name a
  // version.
  static StatusOr<std::unique_ptr<LiveShard>> Open(const layout::Shard* original,
                                                   const std::string& prefix, FragmentSource* log,
                                                   LiveShardOptions options);
  ~LiveShard();

  // The current version, for one read (it stays open while the pointer is held).
  std::shared_ptr<const MergedShard> Current() const;
  // The current version for one read at snapshot `at` (util/snapshot.h; 0: the latest state):
  // the versions of its nodes the read needs are kept while the pointer is held.
  // FAILED_PRECONDITION if `at` is below SnapshotFloor(). The caller has made sure that every
  // update up to `at` is applied here.
  StatusOr<std::shared_ptr<const MergedShard>> CurrentAt(uint64_t at);
  // The lowest snapshot answered: the retention horizon, or the oldest kept version's start (its
  // delta's floor: the updates replayed at open, or a rebuild's last id). A rebuild keeps the
  // version it replaced for the reads before its start, until the horizon passes it.
  uint64_t SnapshotFloor();
  // {"floor", "versions" (node versions kept), "replaced" (whole versions kept)}.
  nlohmann::json SnapshotStats();

  // Applies a batch from the LogStore to the current version (MergedShard::Apply).
  StatusOr<std::vector<bool>> Apply(const std::vector<Update>& batch);
  uint64_t last_id() const;
  Status Sync();
  // Every update up to `id` is committed: the current version's delta (and an attached split's
  // halves) write the batches they held up to it (DeltaIndex::Commit).
  Status Commit(uint64_t id);
  // Undoes every update applied and not yet committed (DeltaIndex::RollBackUncommitted) and
  // returns how many: the LogStore sender changed (ServerGraph::NoteSender). A rebuild, adoption
  // or split under way then fails at its swap (its snapshot, logged batches or feed reads may
  // hold such updates: asked again, it starts over), and a prepared split holding some is
  // dropped.
  StatusOr<size_t> RollBackUncommitted();
  uint64_t delta_bytes() const;  // the current delta's bytes in memory
  size_t written_nodes() const;  // nodes in the current delta

  // Builds a new version holding every write applied so far and switches to it. Returns its
  // summary (also in Stats()["last_rebuild"]). On failure the current version stays.
  StatusOr<nlohmann::json> Rebuild();

  // Where a replica adopting a peer's version reads the updates after an id again: the LogStore's
  // feed of this shard (docs/replication.md), in id order; empty when there are none.
  using FeedFetch = std::function<StatusOr<std::vector<Update>>(uint64_t after)>;
  // Switches to version `number`, which a peer built with every update up to `through`, from
  // the files fetched into directory `fetched` (moved into place, checked against their
  // manifest): the updates this replica applied after `through` are read again from `feed` and
  // applied to it, then the batches applied meanwhile, then the swap, as in Rebuild.
  // UNAVAILABLE if this replica has not yet applied every update up to `through` (try later).
  // `about` (where it came from, what the fetch cost) is added to the summary.
  StatusOr<nlohmann::json> Adopt(int64_t number, uint64_t through, const std::string& fetched,
                                 const FeedFetch& feed,
                                 nlohmann::json about = nlohmann::json::object());

  // The current version's number (0: the store's own files).
  int64_t version() const;
  // The current version's files for a peer: {"version", "through", "files": [{"path",
  // "bytes"}]}, paths relative to its directory; NOT_FOUND for version 0.
  StatusOr<nlohmann::json> VersionFiles() const;
  // Up to `length` bytes of one of them from `offset` (fewer at its end); NOT_FOUND if `number`
  // is no longer the current version.
  StatusOr<std::string> ReadVersionFile(int64_t number, const std::string& path, uint64_t offset,
                                        uint64_t length) const;

  // Prepares a split (docs/cluster-changes.md, step 4): from the live data at a snapshot, builds
  // two new shards, each a version 1 at prefix `prefixes[i]` (its directory must exist) holding
  // the nodes n with ShardOf(n, count) == `halves[i]`, opens them with the batches applied since
  // the snapshot, and attaches them: from then on each batch applied here is applied to each
  // half too, filtered (layout marks go to both). Replaces halves attached before. Returns the
  // summary.
  StatusOr<nlohmann::json> Split(uint32_t count, std::array<uint32_t, 2> halves,
                                 std::array<std::string, 2> prefixes);
  // The attached halves of a prepared split (null if none), detached: the caller serves them now
  // (or drops them). Apply no longer forwards to them.
  std::array<std::unique_ptr<LiveShard>, 2> TakeHalves();
  // The shard count and halves of the attached split, if any.
  std::optional<std::pair<uint32_t, std::array<uint32_t, 2>>> PreparedSplit() const;

  // Writes `prefix`.version atomically: the shard at `prefix` is version `number`, holding every
  // update up to `through` (the file Open reads).
  static Status WriteVersionPointer(const std::string& prefix, int64_t number, uint64_t through);

  // Replaces options.await_commit (a split's half, which its parent's options made, waits on its
  // own shard's commits once it serves).
  void SetAwaitCommit(std::function<Status(uint64_t id)> f);

  // Makes a rebuild under way (and every later one) stop soon with UNAVAILABLE (closing).
  void Cancel() { cancelled_ = true; }

  // {"version", "through", "rebuilds", "rebuilding", "last_rebuild"}.
  nlohmann::json Stats() const;
  // The summary of the last rebuild or adoption (null if none).
  nlohmann::json LastRebuild() const;

 private:
  struct Version;

  LiveShard(const layout::Shard* original, std::string prefix, FragmentSource* log,
            LiveShardOptions options);
  std::string VersionDir(int64_t k) const;
  std::string DeltaPath(int64_t k) const;
  std::shared_ptr<Version> Snapshot() const;
  // The start (delta floor) of the oldest version kept: replaced_'s first, or current_ (version_mu_
  // held).
  uint64_t OldestStartLocked() const;
  // Rebuild and Adopt: starts logging the batches applied from now on (apply_mu_ held).
  void StartLogging();
  // Rebuild and Split: the current version and its last id, logging from there on.
  std::pair<std::shared_ptr<Version>, uint64_t> SnapshotAndLog();
  // Stops logging the applied batches (a rebuild, adoption or split ended or failed).
  void StopLogging();
  void RemoveVersion(int64_t number) const;
  // Stops logging, removes version `number`'s files and returns `why`.
  Status Abandon(int64_t number, const Status& why);
  // Opens version `number` (in VersionDir), runs `catch_up` on it if given, re-applies the
  // batches logged since the snapshot, writes the version file and swaps it in.
  StatusOr<nlohmann::json> Install(
      std::shared_ptr<Version> from, int64_t number, uint64_t through,
      const std::function<Status(MergedShard*, nlohmann::json*)>& catch_up,
      std::chrono::steady_clock::time_point start, nlohmann::json summary);
  // Streams the live data of `v` into a new one-shard store at `dir`: of every node, or of those
  // `keep` says.
  Status Build(const Version& v, const std::string& dir, nlohmann::json* summary,
               const std::function<bool(int64_t node)>& keep = nullptr) const;

  const layout::Shard* const original_;
  const std::string prefix_;
  FragmentSource* const log_;
  const LiveShardOptions options_;

  mutable std::mutex version_mu_;     // guards current_ (held only to copy or swap it)
  std::shared_ptr<Version> current_;  // never null after Open
  // Versions a rebuild or adoption replaced, oldest first, kept for reads at snapshots before
  // their successor's start (its delta's floor: the last id at its swap; its base holds what
  // the build read, which may be newer than its `through`) until the retention horizon passes
  // it.
  std::deque<std::shared_ptr<Version>> replaced_;

  // Serializes Apply and the swap; guards the two fields below.
  mutable std::mutex apply_mu_;
  std::atomic<bool> logging_{false};            // a rebuild is under way (read unlocked by Stats)
  std::vector<std::vector<Update>> log_since_;  // batches applied since its snapshot
  // Rollbacks of uncommitted updates so far, and their count when the logging began.
  uint64_t rollbacks_ = 0;
  uint64_t rollbacks_at_log_ = 0;
  // Whether a rollback happened since the logging began (apply_mu_ held): the swap fails.
  Status RolledBackSinceLog() const;
  // A prepared split: its count, the halves' numbers and the halves, which every applied batch
  // reaches too (filtered).
  uint32_t split_count_ = 0;
  std::array<uint32_t, 2> split_halves_{};
  std::array<std::unique_ptr<LiveShard>, 2> halves_;

  // Snapshots: the applied ids over time, the reads running at a snapshot, the last prune.
  RetentionClock retention_;
  SnapshotPins pins_;
  std::chrono::steady_clock::time_point last_prune_;  // guarded by apply_mu_

  std::mutex rebuild_mu_;  // one rebuild at a time
  std::atomic<bool> cancelled_{false};
  // options_.await_commit, or as set (SetAwaitCommit); guarded by stats_mu_.
  std::function<Status(uint64_t id)> await_commit_;
  Status AwaitCommit(uint64_t id) const;
  mutable std::mutex stats_mu_;  // guards the two below and await_commit_
  uint64_t rebuilds_ = 0;
  nlohmann::json last_rebuild_;
};

}  // namespace zipg::engine
