// LogStore: freezing the memtable and compressing it into a log shard, and merging log shards
// in the background (docs/writes.md, "Compaction" and "Merges").

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
#include "logstore/logstore.h"
#include "logstore/logstore_internal.h"
#include "util/file.h"
#include "util/memory.h"
#include "util/metrics.h"

namespace zipg::logstore {

namespace fs = std::filesystem;
using engine::NodeUpdates;
using engine::Update;
using engine::UpdateOp;
using internal::DirBytes;
using internal::Seconds;
using internal::ShipMismatch;
using nlohmann::json;

namespace {
// The log shards' blocks: they are built while writes arrive, on the same cores, and live only
// until a merge or a rebuild folds them in, so they trade size for build time: zstd level 3 and a
// 64 KiB dictionary against the defaults' 19 and 256 KiB (graph_bench on the 100k/1M graph: level 3
// compressed in 6.3 s what level 19 did in 15.1 s, for EdgeFiles 7% larger).
constexpr layout::BlockFileOptions kLogShardBlocks = {4096, 3, 64 << 10};

// The counter of bytes of log shards written `by` compactions or merges (docs/operations.md).
prometheus::Counter& WrittenBytes(const char* by) {
  return metrics::Counters("zipg_logstore_written_bytes_total",
                           "Bytes of log shards written, by compactions and merges.")
      .Add({{"by", by}});
}

// How a compaction or a merge builds its log shard: one partition unless `budget` needs more,
// one build at a time (the builder runs at nice 10), in kLogShardBlocks.
graph::CompressOptions LogShardOptions(uint64_t budget) {
  graph::CompressOptions options;
  options.auto_shards = 1;
  options.threads = 1;
  options.memory_limit = budget;
  options.overwrite = true;
  options.edge_file.blocks = options.node_file.blocks = kLogShardBlocks;
  return options;
}

}  // namespace

LogStore::CommitPause::CommitPause(LogStore* store) : store_(store) {
  std::unique_lock lock(store->commit_mu_);
  store->freezing_ = true;
  store->order_cv_.wait(
      lock, [&] { return !store->logging_ && store->applied_ticket_ == store->next_ticket_; });
}

LogStore::CommitPause::~CommitPause() {
  std::shared_ptr<Waiter> next_leader;
  {
    std::lock_guard lock(store_->commit_mu_);
    store_->freezing_ = false;
    if (!store_->commits_.empty()) next_leader = store_->commits_.front()->waiter;
  }
  if (next_leader) next_leader->cv.notify_one();
}

StatusOr<bool> LogStore::Freeze(bool force, const std::function<Status(int64_t frozen)>& in_pause) {
  // Hold back new commit groups and wait for those in flight to be applied.
  CommitPause pause(this);
  if (wal_->size() == 0 && !force) return false;
  const int64_t g = generation_;
  std::error_code ec;
  fs::remove(WalPath(g + 1), ec);
  ZIPG_ASSIGN_OR_RETURN(auto next, Wal::Open(WalPath(g + 1), {}, LogOptions()));
  ends_[g] = records_in_generation_;
  while (ends_.size() > kKeptEnds) ends_.erase(ends_.begin());
  ZIPG_RETURN_IF_ERROR(WriteState(ShardRanges(), {g, g + 1}));
  const uint64_t last_count = records_in_generation_;
  {
    std::unique_lock data(data_mu_);
    frozen_ = Frozen{g, std::shared_ptr<const Memtable>(std::move(memtable_)), {}, {}, {}};
    memtable_ = std::make_unique<Memtable>();
    generation_ = g + 1;
    records_in_generation_ = 0;  // with generation_, under data_mu_: Position reads the pair
    const WalStats done = wal_->stats();
    retired_wal_.records += done.records;
    retired_wal_.syncs += done.syncs;
    retired_wal_.bytes += done.bytes;
    wal_ = std::move(next);  // under data_mu_ too: StatusJson reads its stats
  }
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
  if (in_pause) ZIPG_RETURN_IF_ERROR(in_pause(g));
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
    graph::CompressOptions options = LogShardOptions(BuildBudget());
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
      // Deletes that hit the frozen table during the build move to the new shard's deletion set,
      // one by one with their ids, so that its versions answer snapshots before them.
      const std::vector<Update>& moved = frozen_->overlay_log;
      if (!moved.empty()) {
        // The overlay holds only what was live in the frozen table, which the shard holds too.
        ZIPG_RETURN_IF_ERROR(built.deletes->Record(moved, std::vector<bool>(moved.size(), true)));
      }
      // The table's history answers snapshots taken before the freeze (logstore/history.h).
      built.history = table->history();
      histories_[g] = table->history();
      log_shards_.push_back(std::move(built));
    } else if (table->history()->changes() > 0) {
      // Nothing stored, but keys changed (written, then deleted): snapshots before the freeze
      // would need a shard to correct. Rare; they are given up.
      floor_ = std::max(floor_.load(), static_cast<uint64_t>(g + 1) << 32);
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
  if (metrics::Enabled()) {
    static prometheus::Histogram& seconds = metrics::DurationHistogram(metrics::Histograms(
        "zipg_logstore_compaction_duration_seconds", "Time of compactions of the memtable."));
    static prometheus::Counter& bytes = WrittenBytes("compaction");
    seconds.Observe(summary.value("seconds", 0.0));
    bytes.Increment(summary.value("stored_bytes", 0.0));
  }
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
    std::vector<const layout::Shard*> parts;
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
    for (const layout::Shard* part : in.parts) {
      for (const auto& n : part->nodes().property_names()) node_names.insert(n);
      for (const auto& n : part->edges().property_names()) edge_names.insert(n);
    }
  }
  graph::CompressOptions options = LogShardOptions(BuildBudget());
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
      for (const layout::Shard* part : in.parts) {
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
    // Readers may hold pointers into the merged shards: they stay open in retired_. They also
    // answer reads at snapshots before the swap: the merged shard holds the live data as of
    // now, without the versions deleted before (docs/consistency.md, "Snapshots").
    merged.merged_at = applied_id_.load();  // no group applies meanwhile (data lock)
    std::vector<LogShard> next;
    size_t merged_at_index = 0;
    for (auto& ls : log_shards_) {
      if (!ls.merging) {
        next.push_back(std::move(ls));
        continue;
      }
      if (ls.first_generation == range.first) merged_at_index = next.size();
      ls.merging = false;
      retired_.push_back(std::move(ls));
      merged.inputs.push_back(&retired_.back());
    }
    next.insert(next.begin() + static_cast<ptrdiff_t>(merged_at_index), std::move(merged));
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
  if (metrics::Enabled()) {
    static prometheus::Histogram& seconds = metrics::DurationHistogram(metrics::Histograms(
        "zipg_logstore_merge_duration_seconds", "Time of merges of log shards."));
    static prometheus::Counter& bytes = WrittenBytes("merge");
    seconds.Observe(summary.value("seconds", 0.0));
    bytes.Increment(summary.value("stored_bytes", 0.0));
  }
  std::lock_guard stats(stats_mu_);
  last_merge_ = summary;
  return true;
}

}  // namespace zipg::logstore
