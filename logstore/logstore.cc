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
#include "util/file.h"
#include "util/memory.h"

namespace zipg::logstore {

namespace fs = std::filesystem;
using engine::NodeUpdates;
using engine::Update;
using engine::UpdateOp;
using nlohmann::json;

namespace {
constexpr char kStateName[] = "STATE";
// The property names this LogStore has taken (logstore/property_names.h).
constexpr char kPropertyNamesName[] = "property-names.log";
constexpr size_t kResendChunk = 1 << 16;
// The log shards' blocks: they are built while writes arrive, on the same cores, and live only
// until a merge or a rebuild folds them in, so they trade size for build time: zstd level 3 and a
// 64 KiB dictionary against the defaults' 19 and 256 KiB (graph_bench on the 100k/1M graph: level 3
// compressed in 6.3 s what level 19 did in 15.1 s, for EdgeFiles 7% larger).
constexpr layout::BlockFileOptions kLogShardBlocks = {4096, 3, 64 << 10};

Status CheckEdgeKey(int64_t src, int64_t type, int64_t dst) {
  if (src < 0) return Status::InvalidArgument("src must be >= 0");
  if (type < 0) return Status::InvalidArgument("type must be >= 0");
  if (dst < 0) return Status::InvalidArgument("dst must be >= 0");
  return Status::OK();
}

// An unconditional write (assoc_add, assoc_delete, obj_delete) as it is logged: its key checked,
// the fields its op does not use cleared, assoc_add's properties normalized. The single calls and
// WriteBatch both go through here, so they accept and log exactly the same records.
StatusOr<LogRecord> Unconditional(const LogRecord& r) {
  switch (r.op) {
    case UpdateOp::kPutEdge:
      ZIPG_RETURN_IF_ERROR(CheckEdgeKey(r.node, r.type, r.dst));
      return LogRecord{r.op, r.node, r.type, r.dst, r.timestamp, NormalizeProperties(r.properties)};
    case UpdateOp::kDeleteEdge:
      ZIPG_RETURN_IF_ERROR(CheckEdgeKey(r.node, r.type, r.dst));
      return LogRecord{r.op, r.node, r.type, r.dst, 0, {}};
    case UpdateOp::kDeleteNode:
      if (r.node < 0) return Status::InvalidArgument("id must be >= 0");
      return LogRecord{r.op, r.node, 0, 0, 0, {}};
    default:
      return Status::InvalidArgument("only assoc_add, assoc_delete and obj_delete are batched");
  }
}

bool Contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// The size of the regular files under `dir`.
uint64_t DirBytes(const std::string& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_regular_file(ec)) bytes += it->file_size(ec);
  }
  return bytes;
}
// Why a log shipping answer leaves the standby out of step with this log: "" if it answered ok
// and is at (generation, next_index), as it must be after the request.
std::string ShipMismatch(const StatusOr<ShipReply>& reply, uint64_t generation,
                         uint64_t next_index) {
  if (!reply.ok()) return reply.status().ToString();
  if (reply->code == ShipCode::kOk && reply->generation == generation &&
      reply->next_index == next_index) {
    return "";
  }
  return "the standby answered code " + std::to_string(static_cast<int>(reply->code)) +
         " at generation " + std::to_string(reply->generation) + " record " +
         std::to_string(reply->next_index) + ", this log at generation " +
         std::to_string(generation) + " record " + std::to_string(next_index) +
         (reply->message.empty() ? "" : ": " + reply->message);
}

}  // namespace

std::string LogStore::WalPath(int64_t g) const {
  return options_.dir + "/wal-" + std::to_string(g) + ".log";
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
  if (!options.standby && !options.standby_endpoint.empty()) {
    // In sync only if the standby is exactly where this log is; otherwise the leader goes on
    // alone and the resync thread catches the standby up.
    store->ship_ = std::make_unique<ShipSender>(options.standby_endpoint, options.ship_curve);
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
    for (const auto& part : ls.parts) {  // a directory of before the names' log, a re-seed
      LearnNames(PropertyNames::kNode, part->nodes().property_names());
      LearnNames(PropertyNames::kEdge, part->edges().property_names());
    }
    log_shards_.push_back(std::move(ls));
  }
  // The feeds keep what older generations sent; the live logs' updates are appended again below.
  fs::create_directories(options_.dir + "/feed", ec);
  if (ec) return Status::IOError("cannot create " + options_.dir + "/feed: " + ec.message());
  feeds_.clear();
  for (uint32_t s = 0; s < sink_->num_shards(); ++s) {
    ZIPG_ASSIGN_OR_RETURN(auto feed, UpdateFeed::Open(FeedPath(s), UpdateId(logs.front(), 0)));
    sink_->SetPrev(s, feed->last_id());
    feeds_.push_back(std::move(feed));
  }
  // Replay the logs in order; a frozen generation (two logs) is frozen again after its replay.
  // Per live log, per base shard: a feed record never spans generations, so the cut at open
  // (by generation) keeps or drops whole records.
  std::vector<std::vector<std::vector<Update>>> resend(logs.size());
  memtable_ = std::make_unique<Memtable>();
  for (size_t i = 0; i < logs.size(); ++i) {
    const int64_t g = logs[i];
    generation_ = g;
    uint64_t dropped = 0;
    WalOptions wal_options;
    wal_options.sync = options_.sync;
    uint64_t index = 0;
    resend[i].resize(sink_->num_shards());
    ZIPG_ASSIGN_OR_RETURN(auto wal,
                          Wal::Open(
                              WalPath(g),
                              [&](std::string_view payload) -> Status {
                                LogRecord record;
                                ZIPG_RETURN_IF_ERROR(DecodeRecord(payload, &record));
                                resend[i][ShardOf(record.node, sink_->num_shards())].push_back(
                                    NumberedUpdate(record, g, index++));
                                LearnNames(record);
                                return ApplyLocal(record, g).status();
                              },
                              wal_options, &dropped));
    records_in_generation_ = index;
    if (dropped > 0) {
      std::cerr << "LogStore: dropped a torn tail of " << dropped << " bytes from " << WalPath(g)
                << "\n";
    }
    if (i + 1 < logs.size()) {
      frozen_ = Frozen{g, std::shared_ptr<const Memtable>(std::move(memtable_)), {}};
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
  for (const auto& log : resend) {
    for (uint32_t s = 0; s < log.size(); ++s) {
      for (size_t at = 0; at < log[s].size(); at += kResendChunk) {
        const size_t end = std::min(log[s].size(), at + kResendChunk);
        std::vector<Update> chunk(log[s].begin() + at, log[s].begin() + end);
        ZIPG_RETURN_IF_ERROR(feeds_[s]->Append(chunk));
        if (!post) continue;  // a standby's leader posts them
        ZIPG_RETURN_IF_ERROR(send(s, std::move(chunk)));
      }
    }
  }
  // An elected leader reaches every shard with its epoch before it takes a write, so that each
  // one fences the leaders before it (docs/logstore-ha.md, "Election and takeover").
  if (post && epoch_ > 0) {
    for (uint32_t s = 0; s < sink_->num_shards(); ++s) {
      if (!posted[s]) ZIPG_RETURN_IF_ERROR(send(s, {}));
    }
  }
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
  for (auto& ls : log_shards_) {
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
  ship_ = std::make_unique<ShipSender>(endpoint, options_.ship_curve);
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

StatusOr<bool> LogStore::ApplyLocal(
    const LogRecord& record, int64_t generation,
    const std::vector<std::pair<const engine::UpdateIndex*, bool>>* stored) {
  const Update u = record.ToUpdate(0);
  bool found = false;
  for (auto& ls : log_shards_) {
    auto entry = ls.deletes->Lookup(u.node);
    // A hint names the deletion set (not the generation) of the shard it was looked up in: a
    // merge may have replaced that shard since.
    const std::pair<const engine::UpdateIndex*, bool>* hint = nullptr;
    if (stored) {
      for (const auto& h : *stored) {
        if (h.first == ls.deletes.get()) hint = &h;
      }
    }
    bool live;
    if (hint) {
      live = hint->second && !(entry && entry->EdgeDead(u.type, u.dst));
    } else {
      ZIPG_ASSIGN_OR_RETURN(live,
                            engine::FoundLive(*ls.PartFor(u.node), entry ? &*entry : nullptr, u));
    }
    if (!live) continue;
    ls.deletes->Apply(u);  // persisted with the group's (FlushDeletes)
    if (ls.merging) merge_log_.push_back(u);
    found = true;
  }
  if (frozen_ && frozen_->generation != generation) {
    auto it = frozen_->overlay.find(u.node);
    if (frozen_->table->FoundLive(u, it == frozen_->overlay.end() ? nullptr : &it->second)) {
      engine::UpdateIndex::ApplyTo(u, true, &frozen_->overlay[u.node]);
      found = true;
    }
  }
  if (memtable_->Remove(u)) found = true;
  if (record.is_put()) memtable_->Put(record);
  return found;
}

Status LogStore::FlushDeletes() {
  std::shared_lock data(data_mu_);  // readers go on; log shards are only added under it
  for (auto& ls : log_shards_) ZIPG_RETURN_IF_ERROR(ls.deletes->Flush());
  return Status::OK();
}

// Holds a stripe shared or exclusively for the life of one write (see LogStore::Stripe).
class LogStore::StripeLock {
 public:
  StripeLock(Stripe& stripe, bool exclusive) : stripe_(stripe), exclusive_(exclusive) {
    std::unique_lock lock(stripe_.mu);
    if (exclusive_) {
      ++stripe_.exclusive_waiting;
      stripe_.cv.wait(lock, [&] { return !stripe_.exclusive && stripe_.shared == 0; });
      --stripe_.exclusive_waiting;
      stripe_.exclusive = true;
    } else {
      stripe_.cv.wait(lock, [&] { return !stripe_.exclusive && stripe_.exclusive_waiting == 0; });
      ++stripe_.shared;
    }
  }
  ~StripeLock() {
    std::lock_guard lock(stripe_.mu);
    if (exclusive_) {
      stripe_.exclusive = false;
    } else if (--stripe_.shared > 0) {
      return;
    }
    stripe_.cv.notify_all();
  }
  StripeLock(const StripeLock&) = delete;
  StripeLock& operator=(const StripeLock&) = delete;

 private:
  Stripe& stripe_;
  const bool exclusive_;
};

StatusOr<std::string> LogStore::Encode(const LogRecord& record) const {
  // Encoded by the writer, and refused here if too large: one bad record must not fail a group.
  std::string payload = EncodeRecord(record);
  if (payload.size() > kMaxWalPayload) {
    return Status::InvalidArgument("a write holds at most " + std::to_string(kMaxWalPayload) +
                                   " bytes, not " + std::to_string(payload.size()));
  }
  // A put's new property names must fit under the bound of a layout file (docs/limits.md).
  if (record.is_put()) ZIPG_RETURN_IF_ERROR(names_->Admit(NamesKind(record), record.properties));
  return payload;
}

std::string LogStore::Refusal() const {
  if (standby_) return "this LogStore is a standby: write to its leader";
  if (writes_stopped_) {
    std::lock_guard lock(stats_mu_);
    return stop_reason_;
  }
  return "";
}

StatusOr<bool> LogStore::Write(const LogRecord& record) {
  if (std::string why = Refusal(); !why.empty()) return Status::Unavailable(why);
  ZIPG_ASSIGN_OR_RETURN(std::string payload, Encode(record));
  Waiter waiter;
  std::vector<Commit> commits;
  commits.emplace_back(&record, std::move(payload), &waiter);
  CommitAll(&commits);
  if (!commits[0].status.ok()) return commits[0].status;
  return commits[0].found;
}

void LogStore::CommitAll(std::vector<Commit>* commits) {
  if (commits->empty()) return;
  Waiter* const self = commits->front().waiter;
  std::unique_lock lock(commit_mu_);
  self->pending = commits->size();
  for (Commit& c : *commits) commits_.push_back(&c);
  // A group starts when the previous one has been logged and at most one is still waiting for
  // its shards; writers arriving meanwhile queue up and make the next group larger. This
  // thread's writes are contiguous in the queue and a group takes the whole queue, so they all
  // end up in one group.
  while (self->pending > 0) {
    if (!commits_.empty() && commits_.front()->waiter == self && !logging_ && !freezing_ &&
        next_ticket_ - applied_ticket_ < kGroupsInFlight) {
      LeadGroup(lock, self);
    } else {
      self->cv.wait(lock);
    }
  }
}

void LogStore::LeadGroup(std::unique_lock<std::mutex>& lock, Waiter* self) {
  // Every write queued now, this thread's first. Stage 1, one group at a time: log the group and
  // post its updates, both in queue order. Stage 2, overlapping the next group's stage 1: wait
  // for the base shards' answers, then apply, in the order of stage 1.
  std::vector<Commit*> group(commits_.begin(), commits_.end());
  commits_.clear();
  logging_ = true;
  const uint64_t ticket = next_ticket_++;
  const int64_t generation = generation_;  // Freeze changes it only with no group in flight
  Wal* const wal = wal_.get();
  lock.unlock();

  const auto t0 = std::chrono::steady_clock::now();
  GroupFanout fanout;
  const Status logged = LogGroup(group, wal, generation, &fanout);
  const auto t1 = std::chrono::steady_clock::now();

  lock.lock();
  logging_ = false;
  if (!commits_.empty()) commits_.front()->waiter->cv.notify_one();  // the next group's leader
  order_cv_.notify_all();
  lock.unlock();

  if (logged.ok()) {
    LookupStored(group, &fanout);
    AwaitGroup(&fanout);
  }
  const auto t2 = std::chrono::steady_clock::now();

  lock.lock();
  order_cv_.wait(lock, [&] { return applied_ticket_ == ticket; });
  lock.unlock();
  if (logged.ok()) {
    ApplyGroup(group, generation, fanout);
  } else {
    for (Commit* c : group) c->status = logged;
  }
  const auto t3 = std::chrono::steady_clock::now();

  lock.lock();
  ++applied_ticket_;
  for (Commit* c : group) {
    // Under commit_mu_: a woken waiter destroys its Commits.
    if (--c->waiter->pending == 0 && c->waiter != self) c->waiter->cv.notify_one();
  }
  if (!commits_.empty()) commits_.front()->waiter->cv.notify_one();  // may now start a group
  order_cv_.notify_all();

  auto us = [](auto d) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
  };
  ++commit_groups_;
  commit_log_us_ += us(t1 - t0);
  commit_fanout_us_ += us(t2 - t1);
  commit_apply_us_ += us(t3 - t2);
}

Status LogStore::LogGroup(const std::vector<Commit*>& group, Wal* wal, int64_t generation,
                          GroupFanout* fanout) {
  std::vector<std::string_view> views;
  views.reserve(group.size());
  for (const Commit* c : group) views.push_back(c->payload);
  // The standby logs the group while this LogStore does (docs/logstore-ha.md, "Log shipping").
  const uint64_t first = records_in_generation_;
  std::optional<std::future<StatusOr<ShipReply>>> shipping;
  if (ship_ && !degraded_) {
    shipping = ship_->SendAsync(ShipKind::kAppend, epoch_, generation, first, views,
                                options_.ship_timeout_ms);
  }
  // A group logged here while another leader has taken over is never posted: the standby fences
  // it (below), the shards fence it, and in a cluster the in-sync set cannot be changed by a
  // leader whose key is gone.
  if (std::string why = Refusal(); !why.empty()) {
    if (shipping) shipping->wait();  // `views` must outlive the send
    return Status::Unavailable(why);
  }
  const Status logged = wal->AppendAll(views.data(), views.size());
  if (shipping) {
    // `views` must outlive the send.
    const StatusOr<ShipReply> reply = shipping->get();
    const std::string mismatch =
        ShipMismatch(reply, static_cast<uint64_t>(generation), first + group.size());
    if (mismatch.empty()) {
      ++shipped_groups_;
    } else if (reply.ok() && reply->code == ShipCode::kFenced) {
      StopWrites("fenced: the standby has a newer leader (epoch " +
                 std::to_string(reply->epoch) + "); write to it");
      return Status::Unavailable(Refusal());
    } else {
      ZIPG_RETURN_IF_ERROR(Degrade(mismatch));
    }
  }
  // Had this failed after the standby logged the group, the standby holds records this log does
  // not: its outcome is unknown to the writers (they fail), as for any failed write.
  ZIPG_RETURN_IF_ERROR(logged);

  // One batch per base shard, all in flight at once; a lane delivers its batches in post order.
  const uint32_t num_shards = sink_->num_shards();
  fanout->members.assign(num_shards, {});
  fanout->replies.clear();
  fanout->replies.resize(num_shards);
  fanout->status.assign(group.size(), Status::OK());
  fanout->found.assign(group.size(), false);
  for (size_t i = 0; i < group.size(); ++i) {
    fanout->members[ShardOf(group[i]->record->node, num_shards)].push_back(i);
  }
  records_in_generation_ += group.size();
  for (uint32_t s = 0; s < num_shards; ++s) {
    if (fanout->members[s].empty()) continue;
    std::vector<Update> updates;
    updates.reserve(fanout->members[s].size());
    for (size_t i : fanout->members[s]) {
      updates.push_back(NumberedUpdate(*group[i]->record, generation, first + i));
    }
    // Into the feed before any replica can see it (docs/replication.md). Had this failed, the
    // writes are logged and still posted and applied; their outcome is unknown.
    if (Status fed = feeds_[s]->Append(updates); !fed.ok()) {
      for (size_t i : fanout->members[s]) fanout->status[i] = fed;
    }
    fanout->replies[s] = sink_->Post(s, std::move(updates));
  }
  return Status::OK();
}

void LogStore::LookupStored(const std::vector<Commit*>& group, GroupFanout* fanout) {
  fanout->stored.assign(group.size(), {});
  // The parts to ask, taken under the lock; log shards stay put while they are read (ShardsIn).
  std::vector<std::vector<std::pair<const engine::UpdateIndex*, const engine::Shard*>>> parts(
      group.size());
  {
    std::shared_lock data(data_mu_);
    if (log_shards_.empty()) return;
    for (size_t i = 0; i < group.size(); ++i) {
      const LogRecord& r = *group[i]->record;
      if (r.op != UpdateOp::kPutEdge && r.op != UpdateOp::kDeleteEdge) continue;
      for (const auto& ls : log_shards_) {
        parts[i].emplace_back(ls.deletes.get(), ls.PartFor(r.node));
      }
    }
  }
  for (size_t i = 0; i < group.size(); ++i) {
    const LogRecord& r = *group[i]->record;
    const Update u = r.ToUpdate(0);
    for (const auto& [deletes, part] : parts[i]) {
      // Whether the shard stores the key; ApplyLocal weighs its deletion set. On an error
      // ApplyLocal looks again, and reports it.
      auto stored = engine::FoundLive(*part, nullptr, u);
      if (stored.ok()) fanout->stored[i].emplace_back(deletes, *stored);
    }
  }
}

void LogStore::AwaitGroup(GroupFanout* fanout) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.update_timeout_ms);
  for (uint32_t s = 0; s < fanout->replies.size(); ++s) {
    auto& reply = fanout->replies[s];
    if (!reply) continue;
    StatusOr<std::vector<bool>> found = reply->ok()
                                            ? shard::UpdateSender::Await(&**reply, s, deadline)
                                            : StatusOr<std::vector<bool>>(reply->status());
    const auto& members = fanout->members[s];
    for (size_t k = 0; k < members.size(); ++k) {
      if (found.ok()) {
        fanout->found[members[k]] = found->at(k);
      } else if (fanout->status[members[k]].ok()) {
        fanout->status[members[k]] = found.status();
      }
    }
  }
}

void LogStore::ApplyGroup(const std::vector<Commit*>& group, int64_t generation,
                          const GroupFanout& fanout) {
  // Apply locally even where a base shard did not confirm: the records are logged, and the lane
  // keeps delivering their updates, after which the writes are wholly visible.
  bool full = false;
  {
    std::unique_lock data(data_mu_);
    for (size_t i = 0; i < group.size(); ++i) {
      Commit* c = group[i];
      StatusOr<bool> found =
          ApplyLocal(*c->record, generation, fanout.stored.empty() ? nullptr : &fanout.stored[i]);
      if (!found.ok()) {
        c->status = found.status();
      } else if (!fanout.status[i].ok()) {
        c->status = fanout.status[i];
      } else {
        c->found = *found || fanout.found[i];
      }
    }
    // While the memtable waits for a merge (held_), only its limit wakes the compactor.
    const uint64_t wake_at = options_.memtable_bytes * (held_ ? kHeldMemtableFactor : 1);
    full = options_.memtable_bytes > 0 && !frozen_ && memtable_->bytes() >= wake_at;
  }
  // The group's deletes on log shards, one record per shard touched, before any write of it is
  // acknowledged. Had this failed, the writes are still logged: their outcome is unknown.
  if (Status flushed = FlushDeletes(); !flushed.ok()) {
    for (Commit* c : group) c->status = flushed;
  }
  writes_ += group.size();
  if (full) WakeCompactor();
}

Status LogStore::ObjAdd(int64_t id, const Properties& properties) {
  if (id < 0) return Status::InvalidArgument("id must be >= 0");
  StripeLock stripe(StripeOf(id), /*exclusive=*/true);
  ZIPG_ASSIGN_OR_RETURN(auto node, reader_->ObjGet(id));
  if (node) return Status::AlreadyExists("node " + std::to_string(id) + " already exists");
  LogRecord r{UpdateOp::kPutNode, id, 0, 0, 0, NormalizeProperties(properties)};
  return Write(r).status();
}

Status LogStore::ObjUpdate(int64_t id, const Properties& properties) {
  if (id < 0) return Status::InvalidArgument("id must be >= 0");
  StripeLock stripe(StripeOf(id), /*exclusive=*/true);
  ZIPG_ASSIGN_OR_RETURN(auto node, reader_->ObjGet(id));
  if (!node) return Status::NotFound("node " + std::to_string(id) + " does not exist");
  LogRecord r{UpdateOp::kPutNode, id, 0, 0, 0, NormalizeProperties(properties)};
  return Write(r).status();
}

StatusOr<bool> LogStore::ObjDelete(int64_t id) {
  ZIPG_ASSIGN_OR_RETURN(LogRecord r, Unconditional({UpdateOp::kDeleteNode, id, 0, 0, 0, {}}));
  StripeLock stripe(StripeOf(id), /*exclusive=*/false);
  return Write(r);
}

StatusOr<bool> LogStore::AssocAdd(const Edge& e) {
  ZIPG_ASSIGN_OR_RETURN(LogRecord r, Unconditional({UpdateOp::kPutEdge, e.src, e.type, e.dst,
                                                    e.timestamp, e.properties}));
  StripeLock stripe(StripeOf(e.src), /*exclusive=*/false);
  return Write(r);
}

Status LogStore::AssocUpdate(const Edge& e) {
  ZIPG_RETURN_IF_ERROR(CheckEdgeKey(e.src, e.type, e.dst));
  StripeLock stripe(StripeOf(e.src), /*exclusive=*/true);
  ZIPG_ASSIGN_OR_RETURN(
      auto live, reader_->AssocGet(e.src, e.type, {e.dst}, std::numeric_limits<int64_t>::min(),
                                   std::numeric_limits<int64_t>::max()));
  if (live.empty()) {
    return Status::NotFound("edge (" + std::to_string(e.src) + ", " + std::to_string(e.type) +
                            ", " + std::to_string(e.dst) + ") does not exist");
  }
  LogRecord r{
      UpdateOp::kPutEdge, e.src, e.type, e.dst, e.timestamp, NormalizeProperties(e.properties)};
  return Write(r).status();
}

StatusOr<bool> LogStore::AssocDelete(int64_t src, int64_t type, int64_t dst) {
  ZIPG_ASSIGN_OR_RETURN(LogRecord r, Unconditional({UpdateOp::kDeleteEdge, src, type, dst, 0, {}}));
  StripeLock stripe(StripeOf(src), /*exclusive=*/false);
  return Write(r);
}

std::vector<StatusOr<bool>> LogStore::WriteBatch(const std::vector<zipg::Write>& writes) {
  auto unconditional = [](zipg::Write::Op op) {
    return op == zipg::Write::Op::kAssocAdd || op == zipg::Write::Op::kAssocDelete ||
           op == zipg::Write::Op::kObjDelete;
  };
  std::vector<StatusOr<bool>> out;
  out.reserve(writes.size());
  for (size_t i = 0; i < writes.size();) {
    if (!unconditional(writes[i].op)) {
      out.push_back(ApplyWrite(*this, writes[i++]));
      continue;
    }
    std::vector<LogRecord> run;
    for (; i < writes.size() && unconditional(writes[i].op); ++i) {
      const zipg::Write& w = writes[i];
      const UpdateOp op = w.op == zipg::Write::Op::kAssocAdd      ? UpdateOp::kPutEdge
                          : w.op == zipg::Write::Op::kAssocDelete ? UpdateOp::kDeleteEdge
                                                                  : UpdateOp::kDeleteNode;
      run.push_back(LogRecord{op, w.id, w.type, w.dst, w.timestamp, w.properties});
    }
    for (auto& outcome : CommitUnconditional(run)) out.push_back(std::move(outcome));
  }
  return out;
}

std::vector<StatusOr<bool>> LogStore::CommitUnconditional(const std::vector<LogRecord>& records) {
  if (std::string why = Refusal(); !why.empty()) {
    return std::vector<StatusOr<bool>>(records.size(), Status::Unavailable(why));
  }
  std::vector<StatusOr<bool>> out(records.size(), StatusOr<bool>(false));
  std::vector<LogRecord> valid;  // normalized copies of the good records
  std::vector<size_t> index;     // their positions in `records`
  std::vector<std::string> payloads;
  valid.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    StatusOr<LogRecord> copy = Unconditional(records[i]);
    if (!copy.ok()) {
      out[i] = copy.status();
      continue;
    }
    StatusOr<std::string> payload = Encode(*copy);
    if (!payload.ok()) {
      out[i] = payload.status();
      continue;
    }
    valid.push_back(std::move(*copy));
    index.push_back(i);
    payloads.push_back(std::move(*payload));
  }
  if (valid.empty()) return out;

  // Every stripe shared, in increasing order (docs/writes.md, "Write batches": no lock cycle).
  std::vector<size_t> stripes;
  for (const LogRecord& r : valid) stripes.push_back(static_cast<uint64_t>(r.node) % kStripes);
  std::sort(stripes.begin(), stripes.end());
  stripes.erase(std::unique(stripes.begin(), stripes.end()), stripes.end());
  std::deque<StripeLock> held;
  for (size_t s : stripes) held.emplace_back(stripes_[s], /*exclusive=*/false);

  Waiter waiter;
  std::vector<Commit> commits;
  commits.reserve(valid.size());
  for (size_t k = 0; k < valid.size(); ++k) {
    commits.emplace_back(&valid[k], std::move(payloads[k]), &waiter);
  }
  CommitAll(&commits);
  for (size_t k = 0; k < commits.size(); ++k) {
    if (commits[k].status.ok()) {
      out[index[k]] = commits[k].found;
    } else {
      out[index[k]] = commits[k].status;
    }
  }
  return out;
}

const engine::Shard* LogStore::LogShard::PartFor(int64_t id) const {
  return parts[ShardOf(id, static_cast<uint32_t>(parts.size()))].get();
}

std::vector<std::pair<const engine::Shard*, const engine::UpdateIndex*>> LogStore::ShardsIn(
    const std::vector<int64_t>* generations, std::optional<int64_t> id) const {
  // Log shards are never closed while the LogStore lives, so their pointers stay valid after the
  // data lock is released: the slow compressed reads then do not hold it (a writer waiting for
  // the lock would otherwise starve behind a stream of readers).
  std::vector<std::pair<const engine::Shard*, const engine::UpdateIndex*>> out;
  for (const auto& ls : log_shards_) {
    if (generations && std::none_of(generations->begin(), generations->end(),
                                    [&ls](int64_t g) { return ls.Covers(g); })) {
      continue;
    }
    if (id) {
      out.emplace_back(ls.PartFor(*id), ls.deletes.get());
    } else {
      for (const auto& part : ls.parts) out.emplace_back(part.get(), ls.deletes.get());
    }
  }
  return out;
}

std::vector<std::pair<const engine::Shard*, const engine::UpdateIndex*>> LogStore::ReadFragments(
    int64_t id, const std::vector<int64_t>& generations, const MemtableVisitor& visit) {
  std::vector<std::pair<const engine::Shard*, const engine::UpdateIndex*>> shards;
  {
    std::shared_lock data(data_mu_);
    shards = ShardsIn(&generations, id);
    if (frozen_ && Contains(generations, frozen_->generation)) {
      auto it = frozen_->overlay.find(id);
      visit(*frozen_->table, it == frozen_->overlay.end() ? nullptr : &it->second);
    }
    if (Contains(generations, generation_)) visit(*memtable_, nullptr);
  }
  std::lock_guard lock(stats_mu_);
  for (int64_t g : generations) ++fragment_reads_[g];
  return shards;
}

StatusOr<NodeData> LogStore::Fragment(int64_t id, bool any_type, int64_t type,
                                      const std::vector<int64_t>& generations) {
  NodeData out;
  const bool edges = any_type || type >= 0;
  auto shards = ReadFragments(id, generations, [&](const Memtable& t, const NodeUpdates* dead) {
    t.Collect(id, any_type, type, dead, &out);
  });
  for (const auto& [log_shard, deletes] : shards) {
    auto entry = deletes->Lookup(id);
    if (!(entry && entry->props_dead)) {
      ZIPG_ASSIGN_OR_RETURN(auto props, log_shard->GetNodeProperty(id, nullptr));
      if (props) {
        std::sort(props->begin(), props->end());
        out.properties = std::move(props);
      }
    }
    if (edges && !(entry && entry->edges_dead)) {
      ZIPG_ASSIGN_OR_RETURN(
          auto list,
          log_shard->AllEdges(id, any_type ? std::nullopt : std::optional<int64_t>(type)));
      for (auto& e : list) {
        if (!(entry && entry->EdgeDead(e.type, e.dst))) out.edges.push_back(std::move(e));
      }
    }
  }
  return out;
}

StatusOr<std::vector<Edge>> LogStore::FragmentEdges(int64_t id, int64_t type,
                                                    const std::vector<int64_t>& generations,
                                                    const std::vector<int64_t>& dsts,
                                                    bool fill_cache) {
  std::vector<int64_t> wanted = dsts;
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  std::vector<Edge> out;
  if (wanted.empty() || type < 0) return out;
  auto shards = ReadFragments(id, generations, [&](const Memtable& t, const NodeUpdates* dead) {
    t.CollectKeys(id, type, wanted, dead, &out);
  });
  std::vector<int64_t> maybe;
  for (const auto& [log_shard, deletes] : shards) {
    // Only the keys the shard's filter may hold: a read names several generations, and a key
    // lives in one of them.
    maybe.clear();
    for (int64_t dst : wanted) {
      if (log_shard->edges().MayContain(id, type, dst)) maybe.push_back(dst);
    }
    if (maybe.empty()) continue;
    auto entry = deletes->Lookup(id);
    if (entry && entry->edges_dead) continue;
    ZIPG_ASSIGN_OR_RETURN(auto list, edge_cache_.Get(*log_shard, id, type, maybe, fill_cache));
    for (auto& e : list) {
      if (!(entry && entry->EdgeDead(e.type, e.dst))) out.push_back(std::move(e));
    }
  }
  return out;
}

StatusOr<std::vector<int64_t>> LogStore::NodeIds(const Properties& properties) {
  Properties filter = properties;
  std::sort(filter.begin(), filter.end());
  std::vector<int64_t> ids;
  std::vector<std::pair<const engine::Shard*, const engine::UpdateIndex*>> shards;
  {
    std::shared_lock data(data_mu_);
    memtable_->NodeIds(filter, nullptr, &ids);
    if (frozen_) frozen_->table->NodeIds(filter, &frozen_->overlay, &ids);
    shards = ShardsIn(nullptr, std::nullopt);
  }
  for (const auto& [log_shard, deletes] : shards) {
    ZIPG_ASSIGN_OR_RETURN(auto found, log_shard->GetNodeIds(filter));
    for (int64_t id : found) {
      auto entry = deletes->Lookup(id);
      if (!(entry && entry->props_dead)) ids.push_back(id);
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

StatusOr<std::vector<int64_t>> LogStore::SearchNodeIds(const NodeSearch& q) {
  ZIPG_RETURN_IF_ERROR(ValidateSearch(q));
  std::vector<int64_t> ids;
  std::vector<std::pair<const engine::Shard*, const engine::UpdateIndex*>> shards;
  {
    std::shared_lock data(data_mu_);
    memtable_->SearchNodeIds(q, nullptr, &ids);
    if (frozen_) frozen_->table->SearchNodeIds(q, &frozen_->overlay, &ids);
    shards = ShardsIn(nullptr, std::nullopt);
  }
  for (const auto& [log_shard, deletes] : shards) {
    ZIPG_ASSIGN_OR_RETURN(auto found, log_shard->SearchNodeIds(q));
    for (int64_t id : found) {
      auto entry = deletes->Lookup(id);
      if (!(entry && entry->props_dead)) ids.push_back(id);
    }
  }
  CutSearchPart(&ids, q.limit);
  return ids;
}

StatusOr<LogStore::FeedChunk> LogStore::UpdatesSince(uint32_t shard, uint64_t after,
                                                     const std::string& member) {
  if (shard >= feeds_.size()) {
    return Status::InvalidArgument("no shard " + std::to_string(shard) + " in this store");
  }
  FeedChunk chunk;
  // In this order: a batch the read below misses was appended after the check, so it is
  // pushed to the member (docs/replication.md, "Catching up").
  chunk.included = sink_->IsTarget(shard, member);
  chunk.head = feeds_[shard]->last_id();
  ZIPG_ASSIGN_OR_RETURN(chunk.updates, feeds_[shard]->Since(after, kFeedChunkUpdates));
  return chunk;
}

LogStore::CommitPause::CommitPause(LogStore* store) : store_(store) {
  std::unique_lock lock(store->commit_mu_);
  store->freezing_ = true;
  store->order_cv_.wait(lock, [&] {
    return !store->logging_ && store->applied_ticket_ == store->next_ticket_;
  });
}

LogStore::CommitPause::~CommitPause() {
  std::lock_guard lock(store_->commit_mu_);
  store_->freezing_ = false;
  if (!store_->commits_.empty()) store_->commits_.front()->waiter->cv.notify_one();
}

StatusOr<bool> LogStore::Freeze(bool force) {
  // Hold back new commit groups and wait for those in flight to be applied.
  CommitPause pause(this);
  if (wal_->size() == 0 && !force) return false;
  const int64_t g = generation_;
  WalOptions wal_options;
  wal_options.sync = options_.sync;
  std::error_code ec;
  fs::remove(WalPath(g + 1), ec);
  ZIPG_ASSIGN_OR_RETURN(auto next, Wal::Open(WalPath(g + 1), {}, wal_options));
  ends_[g] = records_in_generation_;
  while (ends_.size() > kKeptEnds) ends_.erase(ends_.begin());
  ZIPG_RETURN_IF_ERROR(WriteState(ShardRanges(), {g, g + 1}));
  const uint64_t last_count = records_in_generation_;
  {
    std::unique_lock data(data_mu_);
    frozen_ = Frozen{g, std::shared_ptr<const Memtable>(std::move(memtable_)), {}};
    memtable_ = std::make_unique<Memtable>();
    generation_ = g + 1;
    records_in_generation_ = 0;  // with generation_, under data_mu_: Position reads the pair
  }
  wal_ = std::move(next);
  if (ship_ && !degraded_) {
    const std::string mismatch =
        ShipMismatch(ship_->Send(ShipKind::kFreeze, epoch_, static_cast<uint64_t>(g + 1),
                                 last_count, {}, options_.ship_timeout_ms),
                     static_cast<uint64_t>(g + 1), 0);
    // Nothing is acknowledged by a freeze: if the degradation cannot be recorded, the next
    // group tries again.
    if (!mismatch.empty()) {
      (void)Degrade("the freeze of generation " + std::to_string(g) + ": " + mismatch);
    }
  }
  return true;
}

Status LogStore::BuildFrozen(json* summary) {
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const Memtable> table;
  int64_t g;
  {
    std::shared_lock data(data_mu_);
    table = frozen_->table;
    g = frozen_->generation;
  }
  const uint64_t log_bytes = fs::exists(WalPath(g)) ? fs::file_size(WalPath(g)) : 0;
  LogShard built;
  built.first_generation = g;
  built.generation = g;
  graph::CompressReport report;
  if (!table->empty()) {
    // One partition unless the memory budget needs more; one build at a time (at nice 10).
    graph::CompressOptions options;
    options.auto_shards = 1;
    options.threads = 1;
    options.memory_limit = BuildBudget();
    options.overwrite = true;
    options.edge_file.blocks = options.node_file.blocks = kLogShardBlocks;
    graph::GraphSource source;
    source.feed = [&table](graph::InputSink* sink,
                           const graph::CompressProgress&) -> StatusOr<uint64_t> {
      ZIPG_RETURN_IF_ERROR(table->Feed(sink));
      return table->bytes();
    };
    const std::string dir = ShardDir({g, g});
    ZIPG_RETURN_IF_ERROR(graph::Compress(source, dir, options, nullptr, &report));
    GraphOpenOptions open_options;
    open_options.verify_checksums = false;  // just written and synced
    ZIPG_ASSIGN_OR_RETURN(OpenedStore opened, OpenStore(dir, open_options, nullptr));
    built.parts = std::move(opened.shards);
    built.bytes = DirBytes(dir);
    std::error_code ec;
    fs::remove(dir + ".deletes", ec);
    ZIPG_ASSIGN_OR_RETURN(built.deletes, engine::UpdateIndex::Open(dir + ".deletes"));
  }
  const double build_seconds = Seconds(start);
  {
    std::unique_lock data(data_mu_);
    if (!built.parts.empty()) {
      // Deletes that hit the frozen table during the build move to the new shard's deletion set.
      std::vector<Update> moved;
      for (const auto& [node, entry] : frozen_->overlay) {
        if (entry.edges_dead) moved.push_back({UpdateOp::kDeleteNode, node, 0, 0, 0});
        if (entry.props_dead) moved.push_back({UpdateOp::kPutNode, node, 0, 0, 0});
        for (const auto& [type, dsts] : entry.dead_edges) {
          // Copies: clang 14 cannot capture structured bindings.
          const int64_t src = node, t = type;
          dsts.Visit(0, dsts.size(), [&](int64_t dst, const engine::Unit&) {
            moved.push_back({UpdateOp::kDeleteEdge, src, t, dst, 0});
            return true;
          });
        }
      }
      if (!moved.empty()) {
        // The overlay holds only what was live in the frozen table, which the shard holds too.
        ZIPG_RETURN_IF_ERROR(built.deletes->Record(moved, std::vector<bool>(moved.size(), true)));
      }
      log_shards_.push_back(std::move(built));
    }
    frozen_.reset();
  }
  // wal-G stops being replayed: its updates must be durable in the feeds first.
  for (auto& feed : feeds_) ZIPG_RETURN_IF_ERROR(feed->Sync());
  ZIPG_RETURN_IF_ERROR(WriteState(ShardRanges(), LiveLogs()));
  if (publish_) publish_(LogShards());
  std::error_code ec;
  fs::remove(WalPath(g), ec);
  ++compactions_;
  *summary = json{{"compacted", true},
                  {"generation", g},
                  {"log_bytes", log_bytes},
                  {"nodes", table->num_nodes()},
                  {"edges", table->num_edges()},
                  {"stored_bytes", report.stored_bytes},
                  {"partitions", report.shards},
                  {"memory_budget", report.memory_budget},
                  {"planned_peak", report.planned_peak},
                  {"build_seconds", build_seconds},
                  {"seconds", Seconds(start)}};
  return Status::OK();
}

StatusOr<std::string> LogStore::CompactNow() {
  std::lock_guard lock(compact_mu_);
  json summary = {{"compacted", false}};
  if (!frozen_ && standby_) return summary.dump();  // it freezes when its leader does
  if (!frozen_) {
    // Woken by the memory threshold. Groups applied while the previous compaction was freezing
    // may have woken the loop again for the generation already frozen: only a memtable still
    // past the threshold is compacted.
    {
      std::shared_lock data(data_mu_);
      if (options_.memtable_bytes == 0 || memtable_->bytes() < options_.memtable_bytes) {
        return summary.dump();
      }
      // At the cap on log shards, the memtable waits for a merge to make room (the merge thread
      // wakes this one), unless it has grown to kHeldMemtableFactor times its threshold.
      const bool hold =
          AtShardCap() && memtable_->bytes() < kHeldMemtableFactor * options_.memtable_bytes;
      if (hold && !held_.exchange(true)) ++held_compactions_;
      if (hold) return summary.dump();
      held_ = false;
    }
    ZIPG_ASSIGN_OR_RETURN(bool frozen, Freeze());
    if (!frozen) return summary.dump();
  }
  Status s = BuildFrozen(&summary);
  std::lock_guard stats(stats_mu_);
  if (!s.ok()) {
    last_error_ = s.ToString();
    return s;
  }
  last_compaction_ = summary;
  last_error_.clear();
  return summary.dump();
}

StatusOr<std::string> LogStore::Compact() {
  if (standby_) {
    return Status::Unavailable("this LogStore is a standby: it compacts when its leader does");
  }
  // Freeze now (so the caller knows which generation is being compressed); the build runs on the
  // compaction thread, and StatusJson reports when it is published.
  int64_t generation;
  {
    std::lock_guard lock(compact_mu_);
    if (!frozen_) {
      ZIPG_ASSIGN_OR_RETURN(bool frozen, Freeze());
      if (!frozen) return json{{"started", false}, {"reason", "the log is empty"}}.dump();
    }
    std::shared_lock data(data_mu_);
    generation = frozen_->generation;
  }
  WakeCompactor();
  return json{{"started", true}, {"generation", generation}}.dump();
}

void LogStore::WakeCompactor() {
  {
    std::lock_guard lock(loop_mu_);
    wake_ = true;
  }
  loop_cv_.notify_one();
}

void LogStore::BackgroundLoop(std::condition_variable* cv, bool* wake,
                              const std::function<bool()>& step) {
  // Builds are CPU-heavy; queries come first.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
  std::unique_lock lock(loop_mu_);
  while (true) {
    cv->wait(lock, [&] { return stopping_ || *wake; });
    if (stopping_) return;
    *wake = false;
    lock.unlock();
    const bool again = step();
    lock.lock();
    if (again) *wake = true;
  }
}

void LogStore::CompactionLoop() {
  BackgroundLoop(&loop_cv_, &wake_, [this] {
    auto result = CompactNow();
    if (!result.ok()) {
      std::cerr << "LogStore: compaction failed: " << result.status().ToString() << "\n";
      return false;
    }
    // The merge thread looks for a run that the new log shard may complete.
    WakeMerger();
    // Groups that filled the memtable while the build ran did not wake this thread (a frozen
    // generation was still there): look again, unless the memtable waits for a merge.
    if (held_ || options_.memtable_bytes == 0) return false;
    std::shared_lock data(data_mu_);
    return !frozen_ && memtable_->bytes() >= options_.memtable_bytes;
  });
}

void LogStore::WakeMerger() {
  {
    std::lock_guard lock(loop_mu_);
    merge_wake_ = true;
  }
  merge_cv_.notify_one();
}

void LogStore::MergeLoop() {
  // On a thread of its own, so that a long merge does not hold back compactions: the memtable
  // keeps to its threshold, and the generations to its size, which keeps the size tiers regular.
  BackgroundLoop(&merge_cv_, &merge_wake_, [this] {
    auto merged = MergeNow();
    if (!merged.ok()) {
      if (!stop_merge_) {
        std::cerr << "LogStore: merge failed: " << merged.status().ToString() << "\n";
        std::lock_guard stats(stats_mu_);
        last_error_ = "merge: " + merged.status().ToString();
      }
      return false;
    }
    // A compaction put off at the cap may go now.
    if (*merged && held_) WakeCompactor();
    // After a merge, look again: the merged shard may complete a run of the next tier.
    return *merged;
  });
}

uint64_t LogStore::BuildBudget() const {
  const uint64_t budget = options_.compaction_memory_bytes != 0 ? options_.compaction_memory_bytes
                                                                : graph::DefaultMemoryBudget();
  // One process: the builds share its baseline and split what is above it.
  if (options_.merge_width < 2 || budget <= graph::kProcessBaseline) return budget;
  return graph::kProcessBaseline + (budget - graph::kProcessBaseline) / 2;
}

bool LogStore::AtShardCap() const {
  return options_.merge_width >= 2 && log_shards_.size() >= options_.max_log_shards;
}

std::pair<size_t, size_t> LogStore::PickMergeRun(bool* forced) const {
  *forced = false;
  const size_t width = options_.merge_width;
  if (width < 2) return {0, 0};
  // The oldest run of `width` consecutive shards within merge_ratio of each other in size; at
  // the cap, failing that, the run with the fewest bytes, whatever its sizes.
  std::pair<size_t, size_t> smallest{0, 0};
  uint64_t smallest_bytes = UINT64_MAX;
  for (size_t begin = 0; begin + width <= log_shards_.size(); ++begin) {
    uint64_t lo = UINT64_MAX, hi = 0, total = 0;
    for (size_t i = begin; i < begin + width; ++i) {
      lo = std::min(lo, std::max<uint64_t>(log_shards_[i].bytes, 1));
      hi = std::max(hi, log_shards_[i].bytes);
      total += log_shards_[i].bytes;
    }
    if (static_cast<double>(hi) <= options_.merge_ratio * static_cast<double>(lo)) {
      return {begin, begin + width};
    }
    if (total < smallest_bytes) {
      smallest = {begin, begin + width};
      smallest_bytes = total;
    }
  }
  if (!AtShardCap()) return {0, 0};
  *forced = smallest.first != smallest.second;
  return smallest;
}

StatusOr<bool> LogStore::MergeNow() {
  const auto start = std::chrono::steady_clock::now();
  // 1. The run and its snapshot: from now on, ApplyLocal logs the deletes that hit it.
  struct Input {
    std::vector<const engine::Shard*> parts;
    const engine::UpdateIndex* deletes;
    uint64_t bytes;
    Range range;
  };
  std::vector<Input> inputs;
  Range range;
  uint64_t reloads;
  {
    std::lock_guard lock(compact_mu_);
    reloads = reloads_;
    std::unique_lock data(data_mu_);
    bool forced;
    const auto [begin, end] = PickMergeRun(&forced);
    if (begin == end) return false;
    if (forced) ++forced_merges_;
    range = {log_shards_[begin].first_generation, log_shards_[end - 1].generation};
    merge_log_.clear();
    for (size_t i = begin; i < end; ++i) {
      LogShard& ls = log_shards_[i];
      ls.merging = true;
      Input in;
      for (const auto& part : ls.parts) in.parts.push_back(part.get());
      in.deletes = ls.deletes.get();
      in.bytes = ls.bytes;
      in.range = {ls.first_generation, ls.generation};
      inputs.push_back(std::move(in));
    }
  }
  if (options_.before_merge_build) options_.before_merge_build();
  // Stops the merge: clears the merging marks of whichever inputs are still there.
  const std::string out = ShardDir(range) + ".merge";
  auto abandon = [&](const Status& why) -> StatusOr<bool> {
    {
      std::unique_lock data(data_mu_);
      for (auto& ls : log_shards_) ls.merging = false;
      merge_log_.clear();
    }
    std::error_code ec;
    fs::remove_all(out, ec);
    if (!why.ok()) return why;
    return false;
  };

  // 2. Build from the live rows, without a lock. A key is live in one generation at most, so
  // the rows of the inputs never collide (the compress pipeline takes rows in any order); a
  // node's properties are live in one input at most. Edges are read by one pass over each
  // part's text (no locates); properties node by node.
  uint64_t input_bytes = 0, nodes_out = 0, edges_out = 0;
  std::set<std::string> node_names, edge_names;
  for (const Input& in : inputs) {
    input_bytes += in.bytes;
    for (const engine::Shard* part : in.parts) {
      for (const auto& n : part->nodes().property_names()) node_names.insert(n);
      for (const auto& n : part->edges().property_names()) edge_names.insert(n);
    }
  }
  graph::CompressOptions options;
  options.auto_shards = 1;
  options.threads = 1;
  options.memory_limit = BuildBudget();
  options.overwrite = true;
  options.edge_file.blocks = options.node_file.blocks = kLogShardBlocks;
  // Reading an input part's edge text whole (5 bytes per text byte while it decodes) is several
  // times faster than by chunks; half the budget may go to it, as the build's partitions are
  // built only after the rows are read (docs/graph-layout.md, "Compress pipeline").
  const uint64_t read_memory = options.memory_limit / 2;
  graph::GraphSource source;
  source.feed = [&](graph::InputSink* sink, const graph::CompressProgress&) -> StatusOr<uint64_t> {
    const std::vector<std::string> node_list(node_names.begin(), node_names.end());
    const std::vector<std::string> edge_list(edge_names.begin(), edge_names.end());
    ZIPG_RETURN_IF_ERROR(sink->NodeHeader(node_list));
    ZIPG_RETURN_IF_ERROR(sink->EdgeHeader(edge_list));
    graph::PropertyRefs refs;
    nodes_out = edges_out = 0;
    for (const Input& in : inputs) {
      for (const engine::Shard* part : in.parts) {
        for (int64_t id : part->nodes().ids()) {
          if (stop_merge_) return Status::Unavailable("the LogStore is closing");
          const auto entry = in.deletes->Lookup(id);
          if (entry && entry->props_dead) continue;
          ZIPG_ASSIGN_OR_RETURN(auto props, part->GetNodeProperty(id, nullptr));
          if (!props) continue;
          ZIPG_RETURN_IF_ERROR(sink->Node(id, graph::RefsByName(node_list, *props, &refs)));
          ++nodes_out;
        }
        std::shared_ptr<const engine::NodeUpdates> entry;
        int64_t entry_of = -1;
        ZIPG_RETURN_IF_ERROR(part->edges().ForEachRecord(
            [&](const layout::EdgeFile::Record& r, std::vector<Edge> edges) -> Status {
              if (stop_merge_) return Status::Unavailable("the LogStore is closing");
              if (r.src != entry_of) {  // records come by (src, type): one lookup per src
                entry = in.deletes->Lookup(r.src);
                entry_of = r.src;
              }
              if (entry && entry->edges_dead) return Status::OK();
              for (const Edge& e : edges) {
                if (entry && entry->EdgeDead(e.type, e.dst)) continue;
                ZIPG_RETURN_IF_ERROR(sink->Edge(e.src, e.dst, e.type, e.timestamp,
                                                graph::RefsByName(edge_list, e.properties, &refs)));
                ++edges_out;
              }
              return Status::OK();
            },
            read_memory));
      }
    }
    return input_bytes;
  };
  graph::CompressReport report;
  if (Status s = graph::Compress(source, out, options, nullptr, &report); !s.ok()) {
    return abandon(s);
  }
  const double build_seconds = Seconds(start);

  // 3. The swap. Every delete logged since the snapshot goes to the merged shard if it holds
  // the key; STATE names the merged shard before any group can apply to it.
  std::lock_guard lock(compact_mu_);
  if (reloads_ != reloads) return abandon(Status::OK());  // the inputs were reloaded away
  const std::string dir = ShardDir(range);
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::remove(dir + ".deletes", ec);
  fs::rename(out, dir, ec);
  if (ec) return abandon(Status::IOError("cannot rename " + out + ": " + ec.message()));
  LogShard merged;
  merged.first_generation = range.first;
  merged.generation = range.second;
  merged.bytes = DirBytes(dir);
  {
    GraphOpenOptions open_options;
    open_options.verify_checksums = false;  // just written and synced
    auto opened = OpenStore(dir, open_options, nullptr);
    if (!opened.ok()) return abandon(opened.status());
    merged.parts = std::move(opened->shards);
    auto deletes = engine::UpdateIndex::Open(dir + ".deletes");
    if (!deletes.ok()) return abandon(deletes.status());
    merged.deletes = std::move(*deletes);
  }
  std::vector<Range> ranges;
  uint64_t moved = 0;
  {
    std::unique_lock data(data_mu_);
    for (const Update& u : merge_log_) {
      const auto entry = merged.deletes->Lookup(u.node);
      auto live = engine::FoundLive(*merged.PartFor(u.node), entry.get(), u);
      if (!live.ok()) {
        data.unlock();
        return abandon(live.status());
      }
      if (*live) {
        merged.deletes->Apply(u);
        ++moved;
      }
    }
    if (Status s = merged.deletes->Flush(); !s.ok()) {
      data.unlock();
      return abandon(s);
    }
    for (const auto& ls : log_shards_) {
      if (!ls.merging) {
        ranges.emplace_back(ls.first_generation, ls.generation);
      } else if (ranges.empty() || ranges.back() != range) {
        ranges.push_back(range);
      }
    }
    if (Status s = WriteState(ranges, LiveLogsLocked()); !s.ok()) {
      data.unlock();
      return abandon(s);
    }
    // Readers may hold pointers into the merged shards: they stay open in retired_.
    std::vector<LogShard> next;
    for (auto& ls : log_shards_) {
      if (!ls.merging) {
        next.push_back(std::move(ls));
        continue;
      }
      if (ls.first_generation == range.first) next.push_back(std::move(merged));
      ls.merging = false;
      for (const auto& part : ls.parts) edge_cache_.Forget(part.get());
      retired_.push_back(std::move(ls));
    }
    log_shards_ = std::move(next);
    merge_log_.clear();
    ++merges_;  // with the swap, so that a status showing the merged shard counts it
    merge_deletes_moved_ += moved;
  }
  if (publish_) publish_(LogShards());
  // The merged shards' files: nothing opens them by name any more (mapped files stay readable).
  for (const Input& in : inputs) {
    fs::remove_all(ShardDir(in.range), ec);
    fs::remove(ShardDir(in.range) + ".deletes", ec);
  }
  const json summary = {{"generations", {range.first, range.second}},
                        {"shards", inputs.size()},
                        {"input_bytes", input_bytes},
                        {"stored_bytes", report.stored_bytes},
                        {"nodes", nodes_out},
                        {"edges", edges_out},
                        {"deletes_moved", moved},
                        {"partitions", report.shards},
                        {"planned_peak", report.planned_peak},
                        {"build_seconds", build_seconds},
                        {"seconds", Seconds(start)}};
  std::lock_guard stats(stats_mu_);
  last_merge_ = summary;
  return true;
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

Status LogStore::Degrade(const std::string& reason) {
  if (degraded_) return Status::OK();
  // Recorded (the cluster's in-sync set) before anything is acknowledged alone.
  if (options_.on_sync) {
    if (Status s = options_.on_sync("degraded", reason); !s.ok()) {
      return Status::Unavailable("the standby is out of sync (" + reason +
                                 ") and that could not be recorded: " + s.ToString());
    }
  }
  std::cerr << "LogStore: the standby is out of sync; acknowledging alone from now on: " << reason
            << "\n";
  {
    std::lock_guard lock(stats_mu_);
    degraded_reason_ = reason;
  }
  degraded_ = true;
  return Status::OK();
}

Status LogStore::CatchUpStandby() {
  // One pass; the caller repeats it. Freezes wait meanwhile (compact_mu_), so the generations
  // stay put; new groups go on being logged (alone) until the last step.
  std::lock_guard compacting(compact_mu_);
  if (!ship_ || !degraded_ || standby_) return Status::OK();
  constexpr size_t kChunk = 4096;
  ZIPG_ASSIGN_OR_RETURN(ShipReply where, ship_->Send(ShipKind::kProbe, epoch_, 0, 0, {},
                                                     options_.ship_timeout_ms));
  if (where.code != ShipCode::kOk) {
    return Status::Unavailable("the standby answered the probe with code " +
                               std::to_string(static_cast<int>(where.code)) + ": " +
                               where.message);
  }
  uint64_t generation = where.generation, next = where.next_index;
  auto ship = [&](ShipKind kind, uint64_t g, uint64_t first,
                  const std::vector<std::string>& records) -> Status {
    std::vector<std::string_view> views(records.begin(), records.end());
    const uint64_t want_next = kind == ShipKind::kFreeze ? 0 : first + records.size();
    const std::string mismatch = ShipMismatch(
        ship_->Send(kind, epoch_, g, first, views, options_.ship_timeout_ms), g, want_next);
    if (!mismatch.empty()) return Status::Unavailable("catching up: " + mismatch);
    generation = g;
    next = want_next;
    return Status::OK();
  };
  // Older generations whose logs are still here (frozen, being compacted): their rest, then the
  // freeze that ends each.
  // A standby past a generation's end here holds a tail its old leader logged and never had
  // acknowledged (docs/logstore-ha.md, "Election and takeover"): the freeze ends its generation
  // where this history ends it, and the standby drops the rest.
  while (generation < static_cast<uint64_t>(generation_)) {
    const int64_t g = static_cast<int64_t>(generation);
    const std::string path = WalPath(g);
    const auto end = ends_.find(g);
    const bool beyond = end != ends_.end() && next >= end->second;
    if (!beyond && !fs::exists(path)) {
      // Compacted here: the standby gets a copy of this directory instead (re-seeding).
      ZIPG_ASSIGN_OR_RETURN(ShipReply installed, ReseedStandby());
      generation = installed.generation;
      next = installed.next_index;
      continue;
    }
    std::vector<std::string> records;
    while (!beyond) {
      records.clear();
      ZIPG_RETURN_IF_ERROR(Wal::ReadRecords(path, next, kChunk, &records));
      if (!records.empty()) ZIPG_RETURN_IF_ERROR(ship(ShipKind::kAppend, generation, next, records));
      if (records.size() < kChunk) break;
    }
    ZIPG_RETURN_IF_ERROR(
        ship(ShipKind::kFreeze, generation + 1, end != ends_.end() ? end->second : next, {}));
  }
  if (generation != static_cast<uint64_t>(generation_)) {
    return Status::Internal("the standby is at generation " + std::to_string(generation) +
                            ", ahead of this LogStore's " + std::to_string(generation_));
  }
  // The live log, while writes go on; then its last records with new groups held back.
  std::vector<std::string> records;
  for (;;) {
    records.clear();
    ZIPG_RETURN_IF_ERROR(Wal::ReadRecords(WalPath(generation_), next, kChunk, &records));
    if (records.size() < kChunk) break;
    ZIPG_RETURN_IF_ERROR(ship(ShipKind::kAppend, generation, next, records));
  }
  CommitPause pause(this);
  for (;;) {
    records.clear();
    ZIPG_RETURN_IF_ERROR(Wal::ReadRecords(WalPath(generation_), next, kChunk, &records));
    if (records.empty()) break;
    ZIPG_RETURN_IF_ERROR(ship(ShipKind::kAppend, generation, next, records));
  }
  if (next != records_in_generation_) {
    return Status::Internal("the standby is at record " + std::to_string(next) +
                            " of generation " + std::to_string(generation) + "; this log has " +
                            std::to_string(records_in_generation_));
  }
  degraded_ = false;  // the next group is shipped (groups are held back until `pause` ends)
  {
    std::lock_guard lock(stats_mu_);
    degraded_reason_.clear();
    ++resyncs_;
  }
  std::cerr << "LogStore: the standby caught up at generation " << generation << " record "
            << next << "; in sync again\n";
  if (options_.on_sync) {
    // Not recorded: the standby is not counted in sync by the cluster (it cannot take over), but
    // it gets every group; the next catch-up is not needed for that.
    if (Status s = options_.on_sync("in_sync", ""); !s.ok()) {
      std::cerr << "LogStore: the standby is in sync, but that could not be recorded: "
                << s.ToString() << "\n";
    }
  }
  return Status::OK();
}

void LogStore::ResyncLoop() {
  std::unique_lock lock(loop_mu_);
  while (!stopping_) {
    resync_cv_.wait_for(lock, std::chrono::milliseconds(kResyncIntervalMs),
                        [this] { return stopping_ || resync_now_; });
    resync_now_ = false;
    if (stopping_ || !degraded_) continue;
    lock.unlock();
    Status s = CatchUpStandby();
    if (!s.ok()) {
      std::lock_guard stats(stats_mu_);
      degraded_reason_ = "catching up: " + s.ToString();
    }
    lock.lock();
  }
}

StatusOr<ShipReply> LogStore::ReseedStandby() {
  const auto start = std::chrono::steady_clock::now();
  // What to copy, as relative paths: log shards and deletion sets (immutable, or append-only
  // logs of which a prefix is a valid file), the feeds (append-only), then the frozen and live
  // logs (a prefix of the live one: catch-up sends the rest). compact_mu_ keeps the list valid.
  const std::vector<Range> shards = ShardRanges();
  const std::vector<int64_t> logs = LiveLogs();
  std::vector<std::string> files;
  for (const Range& r : shards) {
    const fs::path dir = ShardDir(r);
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      if (it->is_regular_file()) files.push_back(fs::relative(it->path(), options_.dir).string());
    }
    if (ec) return Status::IOError("cannot list " + dir.string() + ": " + ec.message());
    files.push_back(ShardName(r) + ".deletes");
  }
  for (uint32_t s = 0; s < feeds_.size(); ++s) {
    files.push_back("feed/shard-" + std::to_string(s) + ".log");
  }
  for (int64_t g : logs) files.push_back("wal-" + std::to_string(g) + ".log");

  auto send = [&](ShipKind kind, uint64_t first, std::vector<std::string_view> records)
      -> StatusOr<ShipReply> {
    ZIPG_ASSIGN_OR_RETURN(ShipReply r, ship_->Send(kind, epoch_, 0, first, records,
                                                  std::max(options_.ship_timeout_ms, 10000)));
    if (r.code != ShipCode::kOk) {
      return Status::Unavailable("re-seeding the standby: it answered code " +
                                 std::to_string(static_cast<int>(r.code)) + ": " + r.message);
    }
    return r;
  };
  ZIPG_RETURN_IF_ERROR(send(ShipKind::kFile, 0, {"", ""}).status());  // start
  uint64_t bytes = 0;
  std::string chunk;
  for (const std::string& name : files) {
    const std::string path = options_.dir + "/" + name;
    std::ifstream in(path, std::ios::binary);
    if (!in) return Status::IOError("re-seeding: cannot open " + path);
    uint64_t offset = 0;
    do {
      chunk.resize(kReseedChunk);
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      chunk.resize(static_cast<size_t>(in.gcount()));
      if (in.bad()) return Status::IOError("re-seeding: cannot read " + path);
      ZIPG_RETURN_IF_ERROR(send(ShipKind::kFile, offset, {name, chunk}).status());
      offset += chunk.size();
    } while (chunk.size() == kReseedChunk);
    bytes += offset;
  }
  const std::string state = StateText(shards, logs);
  ZIPG_ASSIGN_OR_RETURN(ShipReply installed, send(ShipKind::kInstall, 0, {state}));
  {
    std::lock_guard lock(stats_mu_);
    ++reseeds_;
  }
  std::cerr << "LogStore: re-seeded the standby with " << files.size() << " files, " << bytes
            << " bytes, in " << Seconds(start) << " s; it is at generation "
            << installed.generation << " record " << installed.next_index << "\n";
  return installed;
}

Status LogStore::ReceiveFile(const ShipRequest& q) {
  if (q.records.size() != 2) return Status::InvalidArgument("a file chunk is [path, bytes]");
  const std::string name(q.records[0]);
  std::error_code ec;
  if (name.empty()) {  // a re-seed starts: an empty staging directory
    fs::remove_all(ReseedDir(), ec);
    fs::create_directories(ReseedDir(), ec);
    if (ec) return Status::IOError("cannot create " + ReseedDir() + ": " + ec.message());
    return Status::OK();
  }
  const fs::path rel(name);
  for (const auto& part : rel) {
    if (part == ".." || part == ".") return Status::InvalidArgument("bad path " + name);
  }
  if (rel.is_absolute()) return Status::InvalidArgument("bad path " + name);
  const fs::path path = fs::path(ReseedDir()) / rel;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return Status::IOError("cannot create " + path.parent_path().string());
  std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
  if (!out) out.open(path, std::ios::binary | std::ios::out);  // a new file
  if (!out) return Status::IOError("cannot write " + path.string());
  out.seekp(static_cast<std::streamoff>(q.first_index));
  out.write(q.records[1].data(), static_cast<std::streamsize>(q.records[1].size()));
  out.flush();
  if (!out) return Status::IOError("cannot write " + path.string());
  return Status::OK();
}

Status LogStore::InstallReseed(const ShipRequest& q) {
  if (q.records.size() != 1) return Status::InvalidArgument("an install is [STATE]");
  if (!fs::exists(ReseedDir())) return Status::InvalidArgument("no re-seed was started");
  // Durable before it replaces anything: every file, then STATE last.
  for (const auto& entry : fs::recursive_directory_iterator(ReseedDir())) {
    if (entry.is_regular_file()) ZIPG_RETURN_IF_ERROR(SyncFile(entry.path().string()));
  }
  const std::string state(q.records[0]);
  ZIPG_RETURN_IF_ERROR(WriteFileAtomically(ReseedDir() + "/" + kStateName,
                                           [&](const FileSink& sink) { return sink(state); }));
  std::lock_guard compacting(compact_mu_);
  // The old directory goes (readers of its log shards keep their mappings: retired_).
  return Reload(/*post=*/false, std::nullopt, [&]() -> Status {
    const std::string old = options_.dir + ".old";
    std::error_code ec;
    fs::remove_all(old, ec);
    fs::rename(options_.dir, old, ec);
    if (ec) return Status::IOError("cannot move " + options_.dir + " aside: " + ec.message());
    fs::rename(ReseedDir(), options_.dir, ec);
    if (ec) return Status::IOError("cannot install " + ReseedDir() + ": " + ec.message());
    ZIPG_RETURN_IF_ERROR(SyncDirectoryOf(options_.dir));
    fs::remove_all(old, ec);
    std::lock_guard lock(stats_mu_);
    ++reseeds_;
    return Status::OK();
  });
}

ShipReply LogStore::Position(ShipCode code) const {
  ShipReply r;
  r.code = code;
  r.epoch = shipped_epoch_;
  // A leader answering a stale request reads the pair while a freeze may change it.
  std::shared_lock data(data_mu_);
  r.generation = static_cast<uint64_t>(generation_);
  r.next_index = records_in_generation_;
  return r;
}

ShipReply LogStore::ApplyShipped(const ShipRequest& q) {
  std::lock_guard role(role_mu_);
  if (q.epoch < shipped_epoch_) {
    ShipReply r = Position(ShipCode::kFenced);
    r.message = "fenced: this LogStore has seen epoch " + std::to_string(shipped_epoch_);
    return r;
  }
  if (!standby_) {
    ShipReply r = Position(ShipCode::kError);
    r.message = "this LogStore is not a standby";
    if (q.epoch > epoch_) {
      StopWrites("a leader of epoch " + std::to_string(q.epoch) +
                 " ships to this LogStore: it is no longer the leader");
    }
    return r;
  }
  shipped_epoch_ = q.epoch;
  auto failed = [&](const Status& s) {
    ShipReply r = Position(ShipCode::kError);
    r.message = s.ToString();
    return r;
  };
  if (q.kind == ShipKind::kProbe) return Position(ShipCode::kOk);
  if (q.kind == ShipKind::kFile) {
    if (Status s = ReceiveFile(q); !s.ok()) return failed(s);
    return Position(ShipCode::kOk);
  }
  if (q.kind == ShipKind::kInstall) {
    if (Status s = InstallReseed(q); !s.ok()) return failed(s);
    return Position(ShipCode::kOk);
  }
  if (q.kind == ShipKind::kFreeze) {
    // The leader froze generation_ after first_index records and now logs generation_ + 1.
    if (q.generation != static_cast<uint64_t>(generation_) + 1 ||
        q.first_index > records_in_generation_) {
      return Position(ShipCode::kElsewhere);
    }
    std::lock_guard compacting(compact_mu_);
    if (q.first_index < records_in_generation_) {
      // The leader's history ends this generation earlier: the rest was logged by a leader that
      // lost its leadership before shipping it, never acknowledged nor posted. Drop it.
      std::cerr << "LogStore: dropping records " << q.first_index << ".."
                << records_in_generation_ - 1 << " of generation " << generation_
                << ": the leader's history ends the generation before them\n";
      if (Status s = Reload(/*post=*/false, q.first_index); !s.ok()) return failed(s);
      if (q.first_index != records_in_generation_) {
        return failed(Status::Internal("after dropping its tail, generation " +
                                       std::to_string(generation_) + " holds " +
                                       std::to_string(records_in_generation_) + " records"));
      }
    }
    if (frozen_) {  // the previous generation is still being built here: finish it first
      json summary;
      if (Status built = BuildFrozen(&summary); !built.ok()) return failed(built);
    }
    // Even an empty generation: the leader ends one when it takes over (Promote), and the
    // standby must be in the same generation after it.
    auto frozen = Freeze(/*force=*/true);
    if (!frozen.ok()) return failed(frozen.status());
    WakeCompactor();
    return Position(ShipCode::kOk);
  }
  // An append: records first_index.. of wal-<generation>.
  if (q.generation != static_cast<uint64_t>(generation_) || q.first_index != records_in_generation_) {
    return Position(ShipCode::kElsewhere);
  }
  std::vector<LogRecord> records(q.records.size());
  for (size_t i = 0; i < q.records.size(); ++i) {
    if (Status s = DecodeRecord(q.records[i], &records[i]); !s.ok()) return failed(s);
  }
  if (Status s = wal_->AppendAll(q.records.data(), q.records.size()); !s.ok()) return failed(s);
  // The feed, as the leader's LogGroup fills it: a promoted standby serves replicas from it.
  const uint32_t num_shards = sink_->num_shards();
  std::vector<std::vector<Update>> per_shard(num_shards);
  for (size_t i = 0; i < records.size(); ++i) {
    per_shard[ShardOf(records[i].node, num_shards)].push_back(
        NumberedUpdate(records[i], generation_, q.first_index + i));
  }
  for (uint32_t s = 0; s < num_shards; ++s) {
    if (per_shard[s].empty()) continue;
    if (Status fed = feeds_[s]->Append(per_shard[s]); !fed.ok()) return failed(fed);
  }
  {
    std::unique_lock data(data_mu_);
    for (const LogRecord& r : records) {
      LearnNames(r);  // what the leader admitted
      if (auto applied = ApplyLocal(r, generation_); !applied.ok()) return failed(applied.status());
    }
  }
  if (Status flushed = FlushDeletes(); !flushed.ok()) return failed(flushed);
  records_in_generation_ += records.size();
  writes_ += records.size();
  ++applied_groups_;
  return Position(ShipCode::kOk);
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
  j["behind_answers"] = sink_->behind_answers();
  uint64_t feed_bytes = 0;
  for (const auto& feed : feeds_) feed_bytes += feed->size();
  j["feed_bytes"] = feed_bytes;
  j["epoch"] = epoch_.load();
  std::lock_guard lock(stats_mu_);
  if (writes_stopped_) j["writes_stopped"] = stop_reason_;
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
