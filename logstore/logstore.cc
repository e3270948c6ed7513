#include "logstore/logstore.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <limits>
#include <set>

#include "graph/compress.h"
#include "graph/graph.h"
#include "graph/memory_plan.h"
#include "graph/partition.h"
#include "layout/record_coding.h"
#include "logstore/logstore_internal.h"
#include "util/file.h"
#include "util/memory.h"

namespace zipg::logstore {

namespace fs = std::filesystem;
using engine::NodeUpdates;
using engine::Update;
using internal::Contains;
using internal::DirBytes;
using internal::kStateName;
using internal::ShipMismatch;
using nlohmann::json;

namespace {
// The property names this LogStore has taken (logstore/property_names.h).
constexpr char kPropertyNamesName[] = "property-names.log";
constexpr size_t kResendChunk = 1 << 16;
}  // namespace

std::string LogStore::WalPath(int64_t g) const {
  return options_.dir + "/wal-" + std::to_string(g) + ".log";
}

WalOptions LogStore::LogOptions() const {
  WalOptions wal_options;
  wal_options.sync = options_.sync;
  wal_options.preallocate = uint64_t{1} << 20;
  return wal_options;
}

std::string LogStore::FeedPath(uint32_t shard) const {
  return options_.dir + "/feed/shard-" + std::to_string(shard) + ".log";
}
std::string LogStore::ShardName(const Range& range) {
  std::string name = "shard-";
  if (range.first != range.second) name += std::to_string(range.first) + "-";
  return name + std::to_string(range.second);
}

std::string LogStore::ShardDir(const Range& range) const {
  return options_.dir + "/" + ShardName(range);
}

std::string LogStore::StateText(const std::vector<Range>& shards,
                                const std::vector<int64_t>& logs) const {
  json ends = json::object();
  for (const auto& [g, n] : ends_) ends[std::to_string(g)] = n;
  // "shards" lists each log shard's last generation; "covers" the first one of merged shards.
  std::vector<int64_t> last;
  json covers = json::object();
  for (const auto& [first, g] : shards) {
    last.push_back(g);
    if (first != g) covers[std::to_string(g)] = first;
  }
  json j = {{"shards", last}, {"logs", logs}, {"ends", ends}};
  if (!covers.empty()) j["covers"] = covers;
  {
    std::shared_lock lock(feeds_mu_);
    if (layout_.size() > 1) j["layout"] = layout_;  // after a split (docs/cluster-changes.md)
  }
  return j.dump() + "\n";
}

std::vector<LogStore::Range> LogStore::ShardRanges() const {
  std::shared_lock data(data_mu_);
  std::vector<Range> out;
  for (const auto& ls : log_shards_) out.emplace_back(ls.first_generation, ls.generation);
  return out;
}

std::vector<int64_t> LogStore::LiveLogs() const {
  std::shared_lock data(data_mu_);
  return LiveLogsLocked();
}

std::vector<int64_t> LogStore::LiveLogsLocked() const {
  if (frozen_) return {frozen_->generation, generation_};
  return {generation_};
}

Status LogStore::WriteState(const std::vector<Range>& shards, const std::vector<int64_t>& logs) {
  const std::string text = StateText(shards, logs);
  return WriteFileAtomically(options_.dir + "/" + kStateName,
                             [&](const FileSink& sink) { return sink(text); });
}

StatusOr<std::unique_ptr<LogStore>> LogStore::Open(
    const LogStoreOptions& options, GraphApi* reader, shard::UpdateSender* sink,
    std::function<void(std::vector<int64_t>)> publish) {
  if (options.merge_width >= 2 && options.max_log_shards < options.merge_width + 1) {
    return Status::InvalidArgument("max_log_shards (" + std::to_string(options.max_log_shards) +
                                   ") must be at least merge_width + 1 (" +
                                   std::to_string(options.merge_width + 1) + ")");
  }
  std::unique_ptr<LogStore> store(new LogStore(options));
  store->reader_ = reader;
  store->sink_ = sink;
  store->publish_ = std::move(publish);
  store->sink_->SetEpoch(options.epoch);
  ZIPG_RETURN_IF_ERROR(store->Recover(/*post=*/!options.standby));
  // Snapshots: the live logs' histories were replayed; older ones died with the last process,
  // and so did the inputs of merged shards (whose merge may have been in a live generation).
  store->floor_ = static_cast<uint64_t>(store->LiveLogs().front()) << 32;
  for (const auto& ls : store->log_shards_) {
    if (ls.first_generation != ls.generation) store->floor_ = store->applied_id_.load();
  }
  // The deletion sets replayed every version they logged: keep those a snapshot may need.
  for (auto& ls : store->log_shards_) ls.deletes->Prune(store->floor_.load());
  if (!options.standby && !options.standby_endpoint.empty()) {
    // In sync only if the standby is exactly where this log is; otherwise the leader goes on
    // alone and the resync thread catches the standby up.
    store->ship_ = std::make_unique<ShipSender>(options.standby_endpoint, options.ship_security);
    {
      std::lock_guard lock(store->stats_mu_);
      store->ship_endpoint_ = options.standby_endpoint;
    }
    const std::string mismatch = ShipMismatch(
        store->ship_->Send(ShipKind::kProbe, options.epoch, 0, 0, {}, options.ship_timeout_ms),
        static_cast<uint64_t>(store->generation_), store->records_in_generation_);
    if (!mismatch.empty()) {
      if (Status s = store->Degrade(mismatch); !s.ok()) return s;
    }
  }
  if (store->frozen_) store->wake_ = true;  // finish the interrupted compaction
  store->resync_ = std::thread([p = store.get()] { p->ResyncLoop(); });
  store->compactor_ = std::thread([p = store.get()] { p->CompactionLoop(); });
  store->merger_ = std::thread([p = store.get()] { p->MergeLoop(); });
  return store;
}

LogStore::~LogStore() {
  stop_merge_ = true;
  {
    std::lock_guard lock(loop_mu_);
    stopping_ = true;
  }
  loop_cv_.notify_all();
  merge_cv_.notify_all();
  resync_cv_.notify_all();
  if (merger_.joinable()) merger_.join();
  if (compactor_.joinable()) compactor_.join();
  if (resync_.joinable()) resync_.join();
}

Status LogStore::Recover(bool post) {
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec) return Status::IOError("cannot create " + options_.dir + ": " + ec.message());
  // Opened again on every Recover: a re-seeded standby's directory is a new one.
  names_.reset();  // one Wal per file
  ZIPG_ASSIGN_OR_RETURN(names_, PropertyNames::Open(options_.dir + "/" + kPropertyNamesName,
                                                    options_.sync, layout::kMaxProperties));
  LearnNames(PropertyNames::kNode, options_.base_node_names);
  LearnNames(PropertyNames::kEdge, options_.base_edge_names);
  std::vector<Range> shards;
  std::vector<int64_t> logs = {1};
  // Without a split in STATE: the shard servers' count (the map's), from the first id on.
  std::vector<std::pair<uint32_t, uint64_t>> layout = {{sink_->num_shards(), 0}};
  const std::string state_path = options_.dir + "/" + kStateName;
  if (fs::exists(state_path)) {
    ZIPG_ASSIGN_OR_RETURN(std::string text, ReadFileToString(state_path));
    const json j = json::parse(text, nullptr, false);
    try {
      std::map<int64_t, int64_t> covers;  // absent before merges (2026-11)
      if (auto it = j.find("covers"); it != j.end()) {
        for (const auto& [g, first] : it->items()) covers[std::stoll(g)] = first.get<int64_t>();
      }
      for (int64_t g : j.at("shards").get<std::vector<int64_t>>()) {
        auto it = covers.find(g);
        shards.emplace_back(it == covers.end() ? g : it->second, g);
        if (shards.back().first > g) return Status::Corruption(state_path + ": bad covers");
      }
      logs = j.at("logs").get<std::vector<int64_t>>();
      ends_.clear();
      if (auto it = j.find("ends"); it != j.end()) {  // absent in directories of before 2026-11
        for (const auto& [g, n] : it->items()) ends_[std::stoll(g)] = n.get<uint64_t>();
      }
      if (auto it = j.find("layout"); it != j.end()) {  // after a split
        layout = it->get<std::vector<std::pair<uint32_t, uint64_t>>>();
        for (size_t k = 1; k < layout.size(); ++k) {
          if (layout[k].first != 2 * layout[k - 1].first ||
              layout[k].second <= layout[k - 1].second) {
            return Status::Corruption(state_path + ": bad layout");
          }
        }
        if (layout.empty() || layout.front().second != 0) {
          return Status::Corruption(state_path + ": bad layout");
        }
      }
    } catch (const std::exception& e) {
      return Status::Corruption(state_path + ": " + e.what());
    }
    if (logs.empty() || logs.size() > 2) return Status::Corruption(state_path + ": bad log list");
  } else {
    ZIPG_RETURN_IF_ERROR(WriteState(shards, logs));
  }
  // Leftovers of an interrupted compaction or merge, of merged shards and of dropped logs:
  // anything STATE does not list (a listed shard's files are its directory and ".deletes").
  std::set<std::string> keep;
  for (const Range& r : shards) {
    keep.insert(ShardName(r));
    keep.insert(ShardName(r) + ".deletes");
  }
  for (const auto& entry : fs::directory_iterator(options_.dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("shard-", 0) == 0) {
      if (!keep.count(name)) fs::remove_all(entry.path(), ec);
    } else if (name.rfind("wal-", 0) == 0) {
      if (!Contains(logs, std::atoll(name.c_str() + 4))) fs::remove(entry.path(), ec);
    }
  }
  for (const Range& r : shards) {
    LogShard ls;
    ls.first_generation = r.first;
    ls.generation = r.second;
    GraphOpenOptions open_options;
    ZIPG_ASSIGN_OR_RETURN(OpenedStore opened, OpenStore(ShardDir(r), open_options, nullptr));
    ls.parts = std::move(opened.shards);
    ls.bytes = DirBytes(ShardDir(r));
    ZIPG_ASSIGN_OR_RETURN(ls.deletes, engine::UpdateIndex::Open(ShardDir(r) + ".deletes"));
    if (auto h = histories_.find(r.second); r.first == r.second && h != histories_.end()) {
      ls.history = h->second;  // kept from before a Reload
    }
    for (const auto& part : ls.parts) {  // a directory of before the names' log, a re-seed
      LearnNames(PropertyNames::kNode, part->nodes().property_names());
      LearnNames(PropertyNames::kEdge, part->edges().property_names());
    }
    log_shards_.push_back(std::move(ls));
  }
  // The feeds keep what older generations sent; the live logs' updates are appended again below.
  fs::create_directories(options_.dir + "/feed", ec);
  if (ec) return Status::IOError("cannot create " + options_.dir + "/feed: " + ec.message());
  {
    std::unique_lock lock(feeds_mu_);
    feeds_.clear();
    layout_ = layout;
  }
  ZIPG_RETURN_IF_ERROR(OpenFeeds(layout.back().first, UpdateId(logs.front(), 0)));
  // Replay the logs in order; a frozen generation (two logs) is frozen again after its replay.
  // Per live log, per base shard: a feed record never spans generations, so the cut at open
  // (by generation) keeps or drops whole records. Each update goes back into the feed of its
  // shard when it was logged (the layout then), and is resent to the shard that owns its node
  // now (after a split, the half).
  std::vector<std::vector<std::vector<Update>>> resend(logs.size()), refeed(logs.size());
  memtable_ = std::make_unique<Memtable>();
  for (size_t i = 0; i < logs.size(); ++i) {
    const int64_t g = logs[i];
    generation_ = g;
    uint64_t dropped = 0;
    uint64_t index = 0;
    resend[i].resize(sink_->num_shards());
    refeed[i].resize(sink_->num_shards());
    ZIPG_ASSIGN_OR_RETURN(auto wal,
                          Wal::Open(
                              WalPath(g),
                              [&](std::string_view payload) -> Status {
                                LogRecord record;
                                ZIPG_RETURN_IF_ERROR(DecodeRecord(payload, &record));
                                const Update u = NumberedUpdate(record, g, index);
                                resend[i][ShardOf(record.node, sink_->num_shards())].push_back(u);
                                refeed[i][ShardOf(record.node, CountAt(u.id))].push_back(u);
                                LearnNames(record);
                                return ApplyLocal(record, g, UpdateId(g, index++)).status();
                              },
                              LogOptions(), &dropped));
    records_in_generation_ = index;
    if (dropped > 0) {
      std::cerr << "LogStore: dropped a torn tail of " << dropped << " bytes from " << WalPath(g)
                << "\n";
    }
    if (i + 1 < logs.size()) {
      frozen_ = Frozen{g, std::shared_ptr<const Memtable>(std::move(memtable_)), {}, {}, {}};
      memtable_ = std::make_unique<Memtable>();
    } else {
      wal_ = std::move(wal);
    }
  }
  // Redo the fan-out of every logged write: a write logged before a crash may not have reached
  // its base shard. Updates are idempotent, so resending what did arrive changes nothing.
  std::vector<bool> posted(sink_->num_shards(), false);
  auto send = [&](uint32_t s, std::vector<Update> chunk) -> Status {
    // Replicas that are behind say so and read the feed once this LogStore serves.
    posted[s] = true;
    auto sent = sink_->Send(s, std::move(chunk), 60000);
    if (!sent.ok() && sent.status().code() != StatusCode::kUnavailable) return sent.status();
    return Status::OK();
  };
  for (size_t i = 0; i < logs.size(); ++i) {
    for (uint32_t s = 0; s < refeed[i].size(); ++s) {
      for (size_t at = 0; at < refeed[i][s].size(); at += kResendChunk) {
        const size_t end = std::min(refeed[i][s].size(), at + kResendChunk);
        ZIPG_RETURN_IF_ERROR(feeds_[s]->Append(
            std::vector<Update>(refeed[i][s].begin() + at, refeed[i][s].begin() + end)));
      }
    }
    // The marks of splits that ended this generation (the cut above dropped them).
    ZIPG_RETURN_IF_ERROR(AppendMarks(logs[i]));
    if (!post) continue;  // a standby's leader posts them
    for (uint32_t s = 0; s < resend[i].size(); ++s) {
      for (size_t at = 0; at < resend[i][s].size(); at += kResendChunk) {
        const size_t end = std::min(resend[i][s].size(), at + kResendChunk);
        ZIPG_RETURN_IF_ERROR(
            send(s, std::vector<Update>(resend[i][s].begin() + at, resend[i][s].begin() + end)));
      }
    }
    // A split in this generation: its mark again on the old lanes, for a replica that did not
    // switch before the crash.
    for (const auto& [count, z] : SplitsEnding(logs[i])) {
      const Update mark{engine::UpdateOp::kLayout, static_cast<int64_t>(count), 0, 0, 0, 0, z};
      for (uint32_t s = 0; s < count / 2; ++s) ZIPG_RETURN_IF_ERROR(send(s, {mark}));
    }
  }
  // An elected leader reaches every shard with its epoch before it takes a write, so that each
  // one fences the leaders before it (docs/logstore-ha.md, "Election and takeover").
  if (post && epoch_ > 0) {
    for (uint32_t s = 0; s < sink_->num_shards(); ++s) {
      if (!posted[s]) ZIPG_RETURN_IF_ERROR(send(s, {}));
    }
  }
  // Every record of the live logs is applied here and resent: committed once the lanes confirm.
  const uint64_t applied = static_cast<uint64_t>(generation_) << 32 | records_in_generation_;
  if (post) sink_->SetApplied(applied);
  applied_id_ = std::max(applied_id_.load(), applied);
  retention_.Note(applied_id_.load());
  // What the replay found again, for the file's next reader (FlushDeletes without its lock: Open
  // runs alone, Reload holds the data lock).
  for (auto& ls : log_shards_) ZIPG_RETURN_IF_ERROR(ls.deletes->Flush());
  return Status::OK();
}

void LogStore::LearnNames(PropertyNames::Kind kind, const std::vector<std::string>& names) {
  if (Status s = names_->Learn(kind, names); !s.ok()) {
    std::cerr << "LogStore: cannot keep a property name (learned again from the data at the "
              << "next open): " << s.ToString() << std::endl;
  }
}

void LogStore::LearnNames(const LogRecord& record) {
  if (!record.is_put()) return;
  std::vector<std::string> names;
  for (const auto& [name, value] : record.properties) names.push_back(name);
  LearnNames(NamesKind(record), names);
}

Status LogStore::Reload(bool post, std::optional<uint64_t> keep_live_records,
                        const std::function<Status()>& before_recover) {
  ++reloads_;  // a merge under way is discarded
  std::unique_lock data(data_mu_);
  // A merged shard's inputs stay open in retired_: the reopened shard answers through them at
  // snapshots before its merge, as before (a takeover keeps those snapshots).
  std::map<Range, std::pair<uint64_t, std::vector<const LogShard*>>> merges;
  for (auto& ls : log_shards_) {
    if (ls.merged_at != 0) {
      merges[{ls.first_generation, ls.generation}] = {ls.merged_at, ls.inputs};
    }
    for (const auto& part : ls.parts) edge_cache_.Forget(part.get());
    retired_.push_back(std::move(ls));
  }
  log_shards_.clear();
  merge_log_.clear();
  frozen_.reset();
  const std::string live = wal_ ? wal_->path() : "";
  wal_.reset();
  if (keep_live_records && !live.empty()) {
    ZIPG_RETURN_IF_ERROR(Wal::Truncate(live, *keep_live_records));
  }
  if (before_recover) ZIPG_RETURN_IF_ERROR(before_recover());
  ZIPG_RETURN_IF_ERROR(Recover(post));
  for (auto& ls : log_shards_) {
    auto m = merges.find({ls.first_generation, ls.generation});
    if (m == merges.end()) continue;
    ls.merged_at = m->second.first;
    ls.inputs = m->second.second;
  }
  // The deletion sets replayed every version they logged: keep those a snapshot may need.
  for (auto& ls : log_shards_) ls.deletes->Prune(SnapshotFloor());
  data.unlock();
  if (frozen_) WakeCompactor();  // finish the interrupted compaction
  return Status::OK();
}

Status LogStore::Promote(uint64_t epoch) {
  std::lock_guard role(role_mu_);
  if (!standby_) return Status::InvalidArgument("this LogStore is the leader already");
  if (epoch <= shipped_epoch_) {
    return Status::InvalidArgument("epoch " + std::to_string(epoch) + " is not above " +
                                   std::to_string(shipped_epoch_.load()) + ", already seen");
  }
  shipped_epoch_ = epoch;  // the old leader's shipments are fenced from here on
  std::lock_guard compacting(compact_mu_);
  epoch_ = epoch;
  sink_->SetEpoch(epoch);
  // The live logs again, and their updates to every shard with the new epoch (Recover).
  ZIPG_RETURN_IF_ERROR(Reload(/*post=*/true));
  if (frozen_) {  // an older generation still being built: finish it before the next freeze
    json summary;
    ZIPG_RETURN_IF_ERROR(BuildFrozen(&summary));
  }
  ZIPG_ASSIGN_OR_RETURN(bool frozen, Freeze(/*force=*/true));
  if (frozen) WakeCompactor();
  std::cerr << "LogStore: the leader now, epoch " << epoch << ", generation " << generation_
            << "\n";
  standby_ = false;
  return Status::OK();
}

void LogStore::AttachStandby(const std::string& endpoint) {
  std::lock_guard role(role_mu_);
  std::lock_guard compacting(compact_mu_);  // no catch-up, no freeze meanwhile
  CommitPause pause(this);                  // and no commit group in flight
  {
    std::lock_guard lock(stats_mu_);
    if (ship_endpoint_ == endpoint) return;
    ship_endpoint_ = endpoint;
  }
  ship_.reset();
  degraded_ = false;
  if (endpoint.empty()) return;
  ship_ = std::make_unique<ShipSender>(endpoint, options_.ship_security);
  // Until the resync thread has caught it up. If that cannot be recorded, the next group ships
  // to it and degrades then.
  (void)Degrade("a new standby at " + endpoint + ": catching it up");
  {
    std::lock_guard lock(loop_mu_);
    resync_now_ = true;
  }
  resync_cv_.notify_all();
}

void LogStore::StopWrites(const std::string& reason) {
  {
    std::lock_guard lock(stats_mu_);
    if (writes_stopped_) return;
    stop_reason_ = reason;
  }
  writes_stopped_ = true;
  std::cerr << "LogStore: no more writes: " << reason << "\n";
}

uint64_t LogStore::AccountedBytes() const {
  std::shared_lock data(data_mu_);
  uint64_t bytes = memtable_->bytes();
  if (frozen_) bytes += frozen_->table->bytes() + engine::NodeUpdatesBytes(frozen_->overlay);
  for (const auto& ls : log_shards_) bytes += ls.deletes->bytes();
  return bytes + edge_cache_.stats().bytes;
}

std::vector<int64_t> LogStore::LogShards() const {
  std::shared_lock data(data_mu_);
  std::vector<int64_t> out;
  for (const auto& ls : log_shards_) out.push_back(ls.generation);
  return out;
}

json LogStore::StatusJson() const {
  json j;
  {
    std::shared_lock data(data_mu_);
    j["generation"] = generation_.load();
    j["memtable"] = {{"bytes", memtable_->bytes()},
                     {"nodes", memtable_->num_nodes()},
                     {"edges", memtable_->num_edges()}};
    j["frozen"] = frozen_ ? json(frozen_->generation) : json(nullptr);
    if (wal_) {
      const WalStats now = wal_->stats();
      j["wal"] = {{"records", retired_wal_.records + now.records},
                  {"syncs", retired_wal_.syncs + now.syncs},
                  {"bytes", retired_wal_.bytes + now.bytes}};
    }
    json shards = json::array();
    for (const auto& ls : log_shards_) {
      json one = {{"generation", ls.generation},
                  {"bytes", ls.bytes},
                  {"partitions", ls.parts.size()},
                  {"touched_nodes", ls.deletes->size()}};
      if (ls.first_generation != ls.generation) one["first_generation"] = ls.first_generation;
      shards.push_back(std::move(one));
    }
    j["log_shards"] = shards;
    // The generations of the merge under way: its inputs are marked from snapshot to swap.
    json merging = nullptr;
    for (const auto& ls : log_shards_) {
      if (!ls.merging) continue;
      if (merging.is_null()) merging = {ls.first_generation, ls.generation};
      merging[1] = ls.generation;
    }
    j["merging"] = merging;
    // Snapshots (docs/consistency.md): what is kept for reads at them.
    uint64_t history_changes = 0, history_bytes = 0, deletion_versions = 0;
    auto add = [&](const MemHistory& h) {
      history_changes += h.changes();
      history_bytes += h.bytes();
    };
    add(*memtable_->history());
    if (frozen_) {
      add(*frozen_->table->history());
      deletion_versions += frozen_->overlay_history.changes();
    }
    for (const auto& [g, h] : histories_) add(*h);
    for (const auto& ls : log_shards_) deletion_versions += ls.deletes->versions();
    for (const auto& ls : retired_) deletion_versions += ls.deletes->versions();
    j["snapshots"] = {{"applied", applied_id_.load()},
                      {"floor", SnapshotFloor()},
                      {"retention_ms", options_.snapshot_retention_ms},
                      {"history_changes", history_changes},
                      {"history_bytes", history_bytes},
                      {"deletion_versions", deletion_versions}};
  }
  j["merges"] = merges_.load();
  j["max_log_shards"] = options_.max_log_shards;
  j["forced_merges"] = forced_merges_.load();
  j["held_compactions"] = held_compactions_.load();
  j["held"] = held_.load();
  j["merge_deletes_moved"] = merge_deletes_moved_.load();
  j["writes"] = writes_.load();
  const engine::EdgeCache::Stats cache = edge_cache_.stats();
  j["edge_cache"] = {{"hits", cache.hits},
                     {"misses", cache.misses},
                     {"bytes", cache.bytes},
                     {"entries", cache.entries},
                     {"capacity", cache.capacity}};
  j["commit"] = {{"groups", commit_groups_.load()},
                 {"log_us", commit_log_us_.load()},
                 {"fanout_us", commit_fanout_us_.load()},
                 {"apply_us", commit_apply_us_.load()}};
  j["compactions"] = compactions_.load();
  j["update_batches"] = sink_->batches();
  j["commit_notices"] = sink_->notices();
  j["behind_answers"] = sink_->behind_answers();
  uint64_t feed_bytes = 0;
  {
    std::shared_lock lock(feeds_mu_);
    for (const auto& feed : feeds_) feed_bytes += feed->size();
    j["base_shards"] = layout_.back().first;
    if (layout_.size() > 1) j["layout"] = layout_;
  }
  j["feed_bytes"] = feed_bytes;
  j["epoch"] = epoch_.load();
  std::lock_guard lock(stats_mu_);
  if (writes_stopped_) j["writes_stopped"] = stop_reason_;
  if (writes_suspended_) j["writes_suspended"] = true;
  if (standby_) {
    j["standby"] = {{"role", "standby"},
                    {"applied_groups", applied_groups_.load()},
                    {"epoch", shipped_epoch_.load()},
                    {"reseeded", reseeds_}};
  } else if (!ship_endpoint_.empty()) {
    j["standby"] = {{"endpoint", ship_endpoint_},
                    {"sync", degraded_ ? "degraded" : "in_sync"},
                    {"shipped_groups", shipped_groups_.load()},
                    {"caught_up", resyncs_},
                    {"reseeded", reseeds_}};
    if (degraded_) j["standby"]["reason"] = degraded_reason_;
  }
  json reads = json::object();
  for (const auto& [g, n] : fragment_reads_) reads[std::to_string(g)] = n;
  j["fragment_reads"] = reads;
  j["last_compaction"] = last_compaction_;
  j["last_merge"] = last_merge_;
  if (!last_error_.empty()) j["last_error"] = last_error_;
  return j;
}

}  // namespace zipg::logstore
