// LiveShard (engine/live_shard.h).

#include "engine/live_shard.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>

#include "graph/compress.h"
#include "graph/graph.h"
#include "graph/input.h"
#include "graph/memory_plan.h"
#include "graph/partition.h"
#include "util/file.h"
#include "util/metrics.h"

namespace zipg::engine {

namespace fs = std::filesystem;
using nlohmann::json;

struct LiveShard::Version {
  int64_t number = 0;
  uint64_t through = 0;
  std::unique_ptr<layout::Shard> owned;  // null for version 0 (the store's shard)
  std::unique_ptr<MergedShard> merged;
  // Set when a newer version replaced this one: its files go when its last reader does.
  std::vector<std::string> remove_when_closed;

  ~Version() {
    merged.reset();
    owned.reset();
    std::error_code ec;
    for (const auto& path : remove_when_closed) fs::remove_all(path, ec);
  }
};

LiveShard::LiveShard(const layout::Shard* original, std::string prefix, FragmentSource* log,
                     LiveShardOptions options)
    : original_(original),
      prefix_(std::move(prefix)),
      log_(log),
      options_(std::move(options)),
      retention_(std::chrono::milliseconds(options_.snapshot_retention_ms)),
      await_commit_(options_.await_commit) {}

LiveShard::~LiveShard() = default;

Status LiveShard::WriteVersionPointer(const std::string& prefix, int64_t number, uint64_t through) {
  const std::string pointer = json({{"version", number}, {"through", through}}).dump() + "\n";
  return WriteFileAtomically(prefix + ".version",
                             [&](const FileSink& sink) { return sink(pointer); });
}

void LiveShard::SetAwaitCommit(std::function<Status(uint64_t id)> f) {
  std::lock_guard lock(stats_mu_);
  await_commit_ = std::move(f);
}

Status LiveShard::AwaitCommit(uint64_t id) const {
  std::function<Status(uint64_t)> f;
  {
    std::lock_guard lock(stats_mu_);
    f = await_commit_;
  }
  return f ? f(id) : Status::OK();
}

std::string LiveShard::VersionDir(int64_t k) const { return prefix_ + ".v" + std::to_string(k); }

std::string LiveShard::DeltaPath(int64_t k) const {
  return k == 0 ? prefix_ + ".delta" : VersionDir(k) + ".delta";
}

namespace {

// The one shard of a rebuilt version's store directory.
StatusOr<std::unique_ptr<layout::Shard>> OpenVersion(const std::string& dir, bool verify) {
  GraphOpenOptions open_options;
  open_options.verify_checksums = verify;
  ZIPG_ASSIGN_OR_RETURN(OpenedStore store, OpenStore(dir, open_options, nullptr));
  if (store.shards.size() != 1) {
    return Status::Corruption(dir + ": a rebuilt shard must hold one partition, not " +
                              std::to_string(store.shards.size()));
  }
  return std::move(store.shards[0]);
}

// Removes a split's half files at `prefix` (version 1, its delta, the version file).
void RemoveHalf(const std::string& prefix) {
  std::error_code ec;
  fs::remove_all(prefix + ".v1", ec);
  fs::remove(prefix + ".v1.delta", ec);
  fs::remove(prefix + ".version", ec);
}

// The updates of `batch` for shard `half` of `count` (and the layout marks).
std::vector<Update> HalfOf(const std::vector<Update>& batch, uint32_t count, uint32_t half) {
  std::vector<Update> out;
  for (const Update& u : batch) {
    if (u.op == UpdateOp::kLayout || ShardOf(u.node, count) == half) out.push_back(u);
  }
  return out;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

StatusOr<std::unique_ptr<LiveShard>> LiveShard::Open(const layout::Shard* original,
                                                     const std::string& prefix, FragmentSource* log,
                                                     LiveShardOptions options) {
  std::unique_ptr<LiveShard> live(new LiveShard(original, prefix, log, std::move(options)));
  auto v = std::make_shared<Version>();
  const std::string pointer = prefix + ".version";
  if (fs::exists(pointer)) {
    ZIPG_ASSIGN_OR_RETURN(std::string text, ReadFileToString(pointer));
    const json j = json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("version") || !j["version"].is_number_integer() ||
        !j.contains("through") || !j["through"].is_number_unsigned() ||
        j["version"].get<int64_t>() < 1) {
      return Status::Corruption(pointer + ": expected {\"version\": K >= 1, \"through\": ID}");
    }
    v->number = j["version"].get<int64_t>();
    v->through = j["through"].get<uint64_t>();
    ZIPG_ASSIGN_OR_RETURN(v->owned, OpenVersion(live->VersionDir(v->number), /*verify=*/true));
  } else if (original == nullptr) {
    return Status::NotFound(pointer + ": a shard the store does not hold needs a version");
  }
  // Versions the pointer does not name: an interrupted build, or files a crash left behind.
  const fs::path parent = fs::path(prefix).parent_path();
  const std::string stem = fs::path(prefix).filename().string() + ".v";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(stem, 0) != 0) continue;
    // <stem>K or <stem>K.delta, K a number: anything else (the version file) is not a version.
    std::string rest = name.substr(stem.size());
    if (rest.size() > 6 && rest.compare(rest.size() - 6, 6, ".delta") == 0) {
      rest.resize(rest.size() - 6);
    }
    if (rest.empty() || rest.find_first_not_of("0123456789") != std::string::npos) continue;
    if (rest == std::to_string(v->number)) continue;
    fs::remove_all(entry.path(), ec);
  }
  if (v->number > 0) fs::remove(prefix + ".delta", ec);
  ZIPG_ASSIGN_OR_RETURN(
      auto delta, DeltaIndex::Open(live->DeltaPath(v->number), live->options_.sync, v->through,
                                   live->options_.hold_uncommitted));
  v->merged =
      std::make_unique<MergedShard>(v->owned ? v->owned.get() : original, std::move(delta), log);
  live->current_ = std::move(v);
  return live;
}

std::shared_ptr<LiveShard::Version> LiveShard::Snapshot() const {
  std::lock_guard lock(version_mu_);
  return current_;
}

std::shared_ptr<const MergedShard> LiveShard::Current() const {
  auto v = Snapshot();
  return std::shared_ptr<const MergedShard>(v, v->merged.get());
}

StatusOr<std::shared_ptr<const MergedShard>> LiveShard::CurrentAt(uint64_t at) {
  if (at == 0) return Current();
  // Pinned before the check (util/snapshot.h SnapshotPins), unpinned when the read lets go.
  auto pin = std::make_shared<SnapshotPins::Scope>(&pins_, at);
  std::shared_ptr<Version> v;
  uint64_t floor;
  {
    std::lock_guard lock(version_mu_);
    v = current_;
    // Before the current version's start: the version it replaced, if still kept.
    for (auto it = replaced_.rbegin(); it != replaced_.rend() && at < v->merged->delta().floor();
         ++it) {
      v = *it;
    }
    floor = OldestStartLocked();
  }
  floor = std::max(floor, retention_.Horizon());
  if (at < floor) {
    return Status::FailedPrecondition(SnapshotGoneMessage(at, floor, "this shard replica"));
  }
  return std::shared_ptr<const MergedShard>(v->merged.get(), [v, pin](const MergedShard*) mutable {
    pin.reset();
    v.reset();
  });
}

uint64_t LiveShard::OldestStartLocked() const {
  return (replaced_.empty() ? current_ : replaced_.front())->merged->delta().floor();
}

uint64_t LiveShard::SnapshotFloor() {
  uint64_t floor;
  {
    std::lock_guard lock(version_mu_);
    floor = OldestStartLocked();
  }
  return std::max(floor, retention_.Horizon());
}

nlohmann::json LiveShard::SnapshotStats() {
  size_t versions = 0, replaced = 0;
  {
    std::lock_guard lock(version_mu_);
    versions = current_->merged->delta().versions();
    for (const auto& v : replaced_) versions += v->merged->delta().versions();
    replaced = replaced_.size();
  }
  return {{"floor", SnapshotFloor()}, {"versions", versions}, {"replaced", replaced}};
}

StatusOr<std::vector<bool>> LiveShard::Apply(const std::vector<Update>& batch) {
  std::lock_guard lock(apply_mu_);
  auto v = Snapshot();
  ZIPG_ASSIGN_OR_RETURN(auto found, v->merged->Apply(batch));
  if (logging_) log_since_.push_back(batch);
  if (halves_[0]) {
    for (int i = 0; i < 2; ++i) {
      auto applied = halves_[i]->Apply(HalfOf(batch, split_count_, split_halves_[i]));
      if (!applied.ok()) {
        // The split is dropped (asked again, it starts over); the shard itself is fine.
        std::cerr << "zipg: shard " << prefix_ << ": a split's half failed to apply a batch ("
                  << applied.status().ToString() << "); the split is dropped" << std::endl;
        halves_ = {};
        split_count_ = 0;
        break;
      }
    }
  }
  DeltaIndex& delta = v->merged->mutable_delta();
  retention_.Note(delta.last_id());
  const auto now = std::chrono::steady_clock::now();
  if (now - last_prune_ >= std::chrono::milliseconds(200)) {
    last_prune_ = now;
    const uint64_t horizon = std::min(retention_.Horizon(), pins_.Oldest());
    delta.Prune(horizon);
    std::lock_guard lock(version_mu_);
    // A replaced version answers reads before its successor's start: done once no read is.
    while (!replaced_.empty()) {
      const uint64_t until = replaced_.size() > 1 ? replaced_[1]->merged->delta().floor()
                                                  : current_->merged->delta().floor();
      if (until > horizon) break;
      replaced_.pop_front();
    }
    for (auto& old : replaced_) old->merged->mutable_delta().Prune(horizon);
  }
  return found;
}

uint64_t LiveShard::last_id() const { return Snapshot()->merged->delta().last_id(); }

Status LiveShard::Commit(uint64_t id) {
  std::lock_guard lock(apply_mu_);
  Status status = Snapshot()->merged->mutable_delta().Commit(id);
  for (auto& half : halves_) {
    if (!half) continue;
    if (Status s = half->Commit(id); status.ok()) status = s;
  }
  return status;
}

StatusOr<size_t> LiveShard::RollBackUncommitted() {
  std::lock_guard lock(apply_mu_);
  ZIPG_ASSIGN_OR_RETURN(const size_t undone,
                        Snapshot()->merged->mutable_delta().RollBackUncommitted());
  // Even with nothing undone here: a rebuild's or adoption's version may hold updates from the
  // feed of the sender that changed.
  ++rollbacks_;
  if (undone > 0 && halves_[0]) {
    std::cerr << "zipg: shard " << prefix_ << ": " << undone
              << " uncommitted updates were rolled back; the prepared split is dropped"
              << std::endl;
    halves_ = {};
    split_count_ = 0;
  }
  return undone;
}

Status LiveShard::RolledBackSinceLog() const {
  if (rollbacks_ == rollbacks_at_log_) return Status::OK();
  return Status::Unavailable(
      "uncommitted updates were rolled back meanwhile (a new LogStore sender); "
      "asked again, it starts over");
}

Status LiveShard::Sync() { return Snapshot()->merged->SyncDelta(); }

uint64_t LiveShard::delta_bytes() const { return Snapshot()->merged->delta().bytes(); }

size_t LiveShard::written_nodes() const { return Snapshot()->merged->delta().size(); }

Status LiveShard::Build(const Version& v, const std::string& dir, json* summary,
                        const std::function<bool(int64_t node)>& keep) const {
  const layout::Shard& base = v.owned ? *v.owned : *original_;
  const DeltaIndex& delta = v.merged->delta();
  const auto start = std::chrono::steady_clock::now();
  auto kept = [&](int64_t id) { return keep == nullptr || keep(id); };
  // The written nodes, each as one snapshot of its delta, used for both of its parts: what the
  // LogStore holds (fetched first, so that property names the writes added are in the header;
  // held in memory: the delta's share of the shard, which the rebuild threshold bounds) and what
  // of the base is still live (read in the passes over the base below).
  std::vector<std::pair<int64_t, std::shared_ptr<const NodeDelta>>> written;
  for (int64_t id : delta.Nodes()) {
    if (kept(id)) written.emplace_back(id, delta.Lookup(id));
  }
  auto written_delta = [&](int64_t id) -> const NodeDelta* {
    auto it = std::lower_bound(written.begin(), written.end(), id,
                               [](const auto& w, int64_t x) { return w.first < x; });
    return it != written.end() && it->first == id ? it->second.get() : nullptr;
  };
  std::vector<std::pair<int64_t, Properties>> logged_props;
  std::vector<Edge> logged_edges;
  std::set<std::string> node_names(base.nodes().property_names().begin(),
                                   base.nodes().property_names().end());
  std::set<std::string> edge_names(base.edges().property_names().begin(),
                                   base.edges().property_names().end());
  const Status closing = Status::Unavailable("the shard is closing");
  uint64_t fetches = 0, calls = 0;
  // The logged edges are asked in batches (kAsksPerCall, or about kDstsPerCall destinations).
  std::vector<FragmentSource::Ask> asks;
  size_t ask_dsts = 0;
  auto ask_now = [&]() -> Status {
    if (asks.empty()) return Status::OK();
    ZIPG_ASSIGN_OR_RETURN(auto answers, log_->FragmentEdgesBatch(asks));
    ++calls;
    for (auto& edges : answers) {
      for (Edge& e : edges) {
        for (const auto& [name, value] : e.properties) edge_names.insert(name);
        logged_edges.push_back(std::move(e));
      }
    }
    asks.clear();
    ask_dsts = 0;
    return Status::OK();
  };
  constexpr size_t kAsksPerCall = 256, kDstsPerCall = 16384;
  for (const auto& [id, node] : written) {
    if (cancelled_) return closing;
    if (log_ == nullptr && (node->props_generation != 0 || !node->types.empty())) {
      return Status::Unavailable("no LogStore to read the written nodes from");
    }
    if (node->props_generation != 0) {
      ZIPG_ASSIGN_OR_RETURN(auto props, log_->FragmentProperties(id, {node->props_generation}));
      ++fetches;
      ++calls;
      if (props) {
        for (const auto& [name, value] : *props) node_names.insert(name);
        logged_props.emplace_back(id, std::move(*props));
      }
    }
    for (const auto& [type, t] : node->types) {
      if (t.log.empty()) continue;
      FragmentSource::Ask ask{id, type, {}, {}};
      std::set<int64_t> generations;
      t.log.Visit(0, t.log.size(), [&](const EdgeKey& k, int64_t generation) {
        ask.dsts.push_back(k.dst);
        generations.insert(generation);
        return true;
      });
      ask.generations.assign(generations.begin(), generations.end());
      ask_dsts += ask.dsts.size();
      asks.push_back(std::move(ask));
      ++fetches;
      if (asks.size() >= kAsksPerCall || ask_dsts >= kDstsPerCall) ZIPG_RETURN_IF_ERROR(ask_now());
    }
  }
  ZIPG_RETURN_IF_ERROR(ask_now());
  const double fetch_seconds = Seconds(start);
  const std::vector<std::string> node_list(node_names.begin(), node_names.end());
  const std::vector<std::string> edge_list(edge_names.begin(), edge_names.end());
  uint64_t nodes_out = 0, edges_out = 0;
  graph::CompressOptions options;
  options.shards = 1;
  options.threads = 1;
  options.memory_limit =
      options_.rebuild_memory != 0 ? options_.rebuild_memory : graph::DefaultMemoryBudget();
  options.overwrite = true;
  // The rebuilt shard keeps the base's choice of searchable properties (an older base gets the
  // default: every property).
  options.node_file.search = base.nodes().search_spec();
  // Reading the base's edge text whole is several times faster than by chunks; half the budget
  // may go to it, as the new files are built only after the rows are read.
  const uint64_t read_memory = options.memory_limit / 2;
  graph::GraphSource source;
  source.feed = [&](graph::InputSink* sink, const graph::CompressProgress&) -> StatusOr<uint64_t> {
    ZIPG_RETURN_IF_ERROR(sink->NodeHeader(node_list));
    ZIPG_RETURN_IF_ERROR(sink->EdgeHeader(edge_list));
    graph::PropertyRefs refs;
    nodes_out = edges_out = 0;
    // Properties: the base's (one pass over its node text), unless deleted (a written node's
    // live ones are then logged).
    ZIPG_RETURN_IF_ERROR(base.nodes().ForEachNode(
        [&](int64_t id, Properties props) -> Status {
          if (cancelled_) return closing;
          if (!kept(id)) return Status::OK();
          const NodeDelta* node = written_delta(id);
          if (node && node->props_dead) return Status::OK();
          ++nodes_out;
          return sink->Node(id, graph::RefsByName(node_list, props, &refs));
        },
        read_memory));
    for (const auto& [id, props] : logged_props) {
      ZIPG_RETURN_IF_ERROR(sink->Node(id, graph::RefsByName(node_list, props, &refs)));
      ++nodes_out;
    }
    // Edges: one pass over the base's records, less the deleted ones, then the logged ones.
    const NodeDelta* node = nullptr;
    int64_t node_of = -1;
    bool any = false;
    ZIPG_RETURN_IF_ERROR(base.edges().ForEachRecord(
        [&](const layout::EdgeFile::Record& r, std::vector<Edge> edges) -> Status {
          if (cancelled_) return closing;
          if (!kept(r.src)) return Status::OK();
          if (!any || r.src != node_of) {  // records come by (src, type)
            node = written_delta(r.src);
            node_of = r.src;
            any = true;
          }
          if (node && node->edges_dead) return Status::OK();
          const TypeDelta* t = node ? node->Type(r.type) : nullptr;
          for (size_t i = 0; i < edges.size(); ++i) {  // edges[i] has TimeOrder i
            if (t && t->dead.Find(i) != nullptr) continue;
            const Edge& e = edges[i];
            ZIPG_RETURN_IF_ERROR(sink->Edge(e.src, e.dst, e.type, e.timestamp,
                                            graph::RefsByName(edge_list, e.properties, &refs)));
            ++edges_out;
          }
          return Status::OK();
        },
        read_memory));
    for (const Edge& e : logged_edges) {
      ZIPG_RETURN_IF_ERROR(sink->Edge(e.src, e.dst, e.type, e.timestamp,
                                      graph::RefsByName(edge_list, e.properties, &refs)));
      ++edges_out;
    }
    return uint64_t{0};
  };
  graph::CompressReport report;
  ZIPG_RETURN_IF_ERROR(graph::Compress(source, dir, options, nullptr, &report));
  (*summary)["written_nodes"] = written.size();
  (*summary)["logstore_fetches"] = fetches;
  (*summary)["logstore_calls"] = calls;
  (*summary)["fetch_seconds"] = fetch_seconds;
  (*summary)["nodes"] = nodes_out;
  (*summary)["edges"] = edges_out;
  (*summary)["stored_bytes"] = report.stored_bytes;
  (*summary)["planned_peak"] = report.planned_peak;
  return Status::OK();
}

StatusOr<json> LiveShard::Rebuild() {
  ReadAt::Scope latest(0);  // a rebuild reads the latest state, whoever asked for it
  std::lock_guard rebuild(rebuild_mu_);
  const auto start = std::chrono::steady_clock::now();
  // 1. The snapshot: every update up to `through` is in `from`; later ones are logged.
  auto [from, through] = SnapshotAndLog();
  const int64_t number = from->number + 1;
  if (options_.rebuild_hook) options_.rebuild_hook(0);
  // The shard applies an update before the LogStore applies its data (docs/consistency.md): the
  // build must not read a pointer whose data is not there yet, or the new base would lack it
  // while the new delta starts after it (an acknowledged write lost; tests/snapshot_test.py).
  if (Status s = AwaitCommit(through); !s.ok()) return Abandon(number, s);

  // 2. The build, with no lock held.
  json summary = {
      {"version", number}, {"through", through}, {"delta_bytes", from->merged->delta().bytes()}};
  RemoveVersion(number);
  if (Status s = Build(*from, VersionDir(number), &summary); !s.ok()) {
    return Abandon(number, s);
  }
  summary["build_seconds"] = Seconds(start);
  if (options_.rebuild_hook) options_.rebuild_hook(1);
  return Install(std::move(from), number, through, nullptr, start, std::move(summary));
}

StatusOr<json> LiveShard::Split(uint32_t count, std::array<uint32_t, 2> halves,
                                std::array<std::string, 2> prefixes) {
  ReadAt::Scope latest(0);
  std::lock_guard rebuild(rebuild_mu_);
  const auto start = std::chrono::steady_clock::now();
  // 1. The snapshot, as for a rebuild.
  auto [from, through] = SnapshotAndLog();
  std::array<std::unique_ptr<LiveShard>, 2> opened;
  // Stops logging, closes and removes the halves (apply_mu_ not held).
  auto abandon = [&](const Status& why) -> Status {
    StopLogging();
    opened = {};
    for (const auto& prefix : prefixes) RemoveHalf(prefix);
    return why;
  };
  if (options_.rebuild_hook) options_.rebuild_hook(0);
  if (Status s = AwaitCommit(through); !s.ok()) return abandon(s);
  // 2. The two builds, one after the other, no lock held; each half opened with a delta of
  // floor `through`.
  json summary = {{"count", count}, {"through", through}, {"halves", json::array()}};
  for (int i = 0; i < 2; ++i) {
    const auto built_at = std::chrono::steady_clock::now();
    const std::string& prefix = prefixes[i];
    RemoveHalf(prefix);
    json half = {{"shard", halves[i]}};
    const uint32_t number = halves[i];
    Status s = Build(*from, prefix + ".v1", &half,
                     [&](int64_t node) { return ShardOf(node, count) == number; });
    if (s.ok()) s = WriteVersionPointer(prefix, 1, through);
    if (!s.ok()) return abandon(s);
    auto live = Open(nullptr, prefix, log_, options_);
    if (!live.ok()) return abandon(live.status());
    opened[i] = std::move(*live);
    half["build_seconds"] = Seconds(built_at);
    summary["halves"].push_back(std::move(half));
  }
  if (options_.rebuild_hook) options_.rebuild_hook(1);
  // 3. Under the apply lock (so that no batch slips between): the batches applied since the
  // snapshot, then the halves are attached.
  size_t replayed = 0;
  Status failed;
  {
    std::lock_guard lock(apply_mu_);
    failed = RolledBackSinceLog();
    for (const auto& batch : log_since_) {
      for (int i = 0; i < 2 && failed.ok(); ++i) {
        failed = opened[i]->Apply(HalfOf(batch, count, halves[i])).status();
      }
      if (!failed.ok()) break;
      replayed += batch.size();
    }
    // What is committed here is committed in the halves: they write it to their files.
    const uint64_t committed = Snapshot()->merged->delta().committed();
    for (int i = 0; i < 2 && failed.ok(); ++i) failed = opened[i]->Commit(committed);
    if (failed.ok()) {
      // Snapshots: the halves' bases hold what the builds read, some of it newer than `through`
      // (as for a rebuild's swap): they answer reads from here on.
      const uint64_t now = Snapshot()->merged->delta().last_id();
      for (auto& half : opened) half->Snapshot()->merged->mutable_delta().RaiseFloor(now);
      logging_ = false;
      log_since_.clear();
      halves_ = std::move(opened);
      split_count_ = count;
      split_halves_ = halves;
    }
  }
  if (!failed.ok()) return abandon(failed);
  summary["replayed"] = replayed;
  summary["seconds"] = Seconds(start);
  return summary;
}

std::array<std::unique_ptr<LiveShard>, 2> LiveShard::TakeHalves() {
  std::lock_guard lock(apply_mu_);
  split_count_ = 0;
  return std::move(halves_);
}

std::optional<std::pair<uint32_t, std::array<uint32_t, 2>>> LiveShard::PreparedSplit() const {
  std::lock_guard lock(apply_mu_);
  if (!halves_[0]) return std::nullopt;
  return std::make_pair(split_count_, split_halves_);
}

StatusOr<json> LiveShard::Adopt(int64_t number, uint64_t through, const std::string& fetched,
                                const FeedFetch& feed, json about) {
  ReadAt::Scope latest(0);
  std::lock_guard rebuild(rebuild_mu_);
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<Version> from;
  uint64_t applied;
  {
    std::lock_guard lock(apply_mu_);
    from = Snapshot();
    applied = from->merged->delta().last_id();
    if (number <= from->number) {
      return Status::InvalidArgument("version " + std::to_string(number) +
                                     " is not newer than this replica's " +
                                     std::to_string(from->number));
    }
    if (applied < through) {  // it would lack updates this replica has not seen yet
      return Status::Unavailable("this replica has applied updates up to " +
                                 std::to_string(applied) + ", version " + std::to_string(number) +
                                 " holds them up to " + std::to_string(through));
    }
    StartLogging();
  }
  RemoveVersion(number);
  std::error_code ec;
  fs::rename(fetched, VersionDir(number), ec);
  if (ec) return Abandon(number, Status::IOError("cannot rename " + fetched + ": " + ec.message()));
  // The updates this replica applied after `through` and before the snapshot, read again from
  // the LogStore's feed; those after the snapshot are in the log.
  auto catch_up = [&](MergedShard* next, json* summary) -> Status {
    uint64_t updates = 0;
    while (next->delta().last_id() < applied) {
      if (cancelled_) return Status::Unavailable("the shard is closing");
      ZIPG_ASSIGN_OR_RETURN(std::vector<Update> batch, feed(next->delta().last_id()));
      if (batch.empty()) {
        return Status::Unavailable("the LogStore's feed ends before update " +
                                   std::to_string(applied));
      }
      std::vector<Update> wanted;
      for (const Update& u : batch) {
        if (u.id <= applied) wanted.push_back(u);
      }
      if (wanted.empty()) break;
      ZIPG_RETURN_IF_ERROR(next->Apply(wanted).status());
      updates += wanted.size();
    }
    (*summary)["feed_updates"] = updates;
    return Status::OK();
  };
  json summary = std::move(about);
  summary["version"] = number;
  summary["through"] = through;
  summary["adopted"] = true;
  return Install(std::move(from), number, through, catch_up, start, std::move(summary));
}

std::pair<std::shared_ptr<LiveShard::Version>, uint64_t> LiveShard::SnapshotAndLog() {
  std::lock_guard lock(apply_mu_);
  auto from = Snapshot();
  const uint64_t through = from->merged->delta().last_id();
  StartLogging();
  return {std::move(from), through};
}

void LiveShard::StartLogging() {
  logging_ = true;
  rollbacks_at_log_ = rollbacks_;
  log_since_.clear();
}

void LiveShard::RemoveVersion(int64_t number) const {
  std::error_code ec;
  fs::remove_all(VersionDir(number), ec);
  fs::remove(DeltaPath(number), ec);
}

void LiveShard::StopLogging() {
  std::lock_guard lock(apply_mu_);
  logging_ = false;
  log_since_.clear();
}

Status LiveShard::Abandon(int64_t number, const Status& why) {
  StopLogging();
  RemoveVersion(number);
  return why;
}

StatusOr<json> LiveShard::Install(std::shared_ptr<Version> from, int64_t number, uint64_t through,
                                  const std::function<Status(MergedShard*, json*)>& catch_up,
                                  std::chrono::steady_clock::time_point start, json summary) {
  auto next = std::make_shared<Version>();
  next->number = number;
  next->through = through;
  {
    // A version built here was just written and synced; one fetched from a peer is checked.
    auto base = OpenVersion(VersionDir(number), /*verify=*/catch_up != nullptr);
    if (!base.ok()) return Abandon(number, base.status());
    next->owned = std::move(*base);
    auto delta =
        DeltaIndex::Open(DeltaPath(number), options_.sync, through, options_.hold_uncommitted);
    if (!delta.ok()) return Abandon(number, delta.status());
    next->merged = std::make_unique<MergedShard>(next->owned.get(), std::move(*delta), log_);
  }
  if (catch_up) {
    if (Status s = catch_up(next->merged.get(), &summary); !s.ok()) return Abandon(number, s);
  }

  // The swap: the batches applied since the snapshot again, on the new version, then the version
  // file, then readers see it. A crash before the version file is written reopens the old
  // version; after, the new one, whose delta then catches up from the LogStore's feed.
  size_t replayed = 0;
  Status failed;
  {
    std::lock_guard lock(apply_mu_);
    failed = RolledBackSinceLog();
    for (const auto& batch : log_since_) {
      if (!failed.ok()) break;
      if (auto s = next->merged->Apply(batch); !s.ok()) {
        failed = s.status();
        break;
      }
      replayed += batch.size();
    }
    // What is committed in the version replaced is committed in this one.
    if (failed.ok())
      failed = next->merged->mutable_delta().Commit(from->merged->delta().committed());
    // Snapshots: the new base holds what the build read, some of it newer than `through`; the
    // version replaced answers reads before the swap (it has every update up to here), this
    // one from here on (tests/snapshot_test.py found a delete after `through` folded in).
    next->merged->mutable_delta().RaiseFloor(next->merged->delta().last_id());
    if (failed.ok()) failed = next->merged->SyncDelta();
    if (failed.ok()) failed = WriteVersionPointer(prefix_, number, through);
    if (failed.ok()) {
      from->remove_when_closed = {DeltaPath(from->number)};
      if (from->number > 0) from->remove_when_closed.push_back(VersionDir(from->number));
      std::lock_guard v(version_mu_);
      // Reads at a snapshot before the new version's start still go to this one (it holds
      // every update up to there, and their versions) until the horizon passes it.
      replaced_.push_back(from);
      current_ = std::move(next);
      logging_ = false;
      log_since_.clear();
    }
  }
  if (!failed.ok()) {
    next.reset();  // closes its files before they are removed
    return Abandon(number, failed);
  }
  from.reset();  // the old version closes now, or when its last reader finishes
  summary["replayed"] = replayed;
  summary["seconds"] = Seconds(start);
  if (metrics::Enabled()) {
    static prometheus::Histogram& seconds = metrics::DurationHistogram(metrics::Histograms(
        "zipg_shard_rebuild_duration_seconds", "Time of rebuilds of base shards."));
    seconds.Observe(summary.value("seconds", 0.0));
  }
  std::lock_guard stats(stats_mu_);
  ++rebuilds_;
  last_rebuild_ = summary;
  return summary;
}

int64_t LiveShard::version() const { return Snapshot()->number; }

StatusOr<json> LiveShard::VersionFiles() const {
  auto v = Snapshot();
  if (v->number == 0) return Status::NotFound("this shard has not been rebuilt");
  const std::string dir = VersionDir(v->number);
  json files = json::array();
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    files.push_back({{"path", fs::relative(e.path(), dir).string()}, {"bytes", e.file_size()}});
  }
  if (ec) return Status::IOError("cannot list " + dir + ": " + ec.message());
  return json{{"version", v->number}, {"through", v->through}, {"files", files}};
}

StatusOr<std::string> LiveShard::ReadVersionFile(int64_t number, const std::string& path,
                                                 uint64_t offset, uint64_t length) const {
  auto v = Snapshot();  // held: its files stay while this reads them
  if (v->number != number) {
    return Status::NotFound("version " + std::to_string(number) + " is not current (it is " +
                            std::to_string(v->number) + ")");
  }
  const fs::path relative(path);
  const bool outside = relative.is_absolute() ||
                       std::any_of(relative.begin(), relative.end(), [](const fs::path& part) {
                         return part == ".." || part == ".";
                       });
  if (outside) return Status::InvalidArgument("not a file of the version: " + path);
  return ReadFileRange(VersionDir(number) + "/" + path, offset, length);
}

json LiveShard::LastRebuild() const {
  std::lock_guard stats(stats_mu_);
  return last_rebuild_;
}

json LiveShard::Stats() const {
  auto v = Snapshot();
  std::lock_guard stats(stats_mu_);
  return {{"version", v->number},
          {"through", v->through},
          {"written_nodes", v->merged->delta().size()},
          {"delta_bytes", v->merged->delta().bytes()},
          {"rebuilds", rebuilds_},
          {"rebuilding", logging_.load()},
          {"last_rebuild", last_rebuild_}};
}

}  // namespace zipg::engine
