#include "shard/server.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cluster/remote_search.h"
#include "cluster/remote_traversal.h"
#include "graph/partition.h"
#include "rpc/convert.h"
#include "rpc/fanout.h"
#include "rpc/remote_graph.h"
#include "shard/fetch.h"
#include "util/call_deadline.h"
#include "util/file.h"
#include "util/snapshot.h"

namespace zipg::shard {

namespace {

constexpr char kLayoutFile[] = "layout.json";

}  // namespace

StatusOr<std::unique_ptr<ServerGraph>> ServerGraph::Open(
    const std::string& dir, const std::vector<uint32_t>& shards, const GraphOpenOptions& options,
    const cluster::ClusterView* view, rpc::PoolSet* pools, const std::string& updates_dir_option,
    const RebuildOptions& rebuild) {
  std::unique_ptr<ServerGraph> g(new ServerGraph());
  g->updates_dir_ = updates_dir_option.empty() ? dir + "/updates" : updates_dir_option;
  std::error_code ec;
  std::filesystem::create_directories(g->updates_dir_, ec);
  if (ec) return Status::IOError("cannot create " + g->updates_dir_ + ": " + ec.message());
  // After a split (docs/cluster-changes.md, step 4): the count, where the shards' files are, and
  // the shards this server last hosted.
  uint32_t count = 0;
  std::vector<uint32_t> recorded;
  const std::string layout_path = g->updates_dir_ + "/" + kLayoutFile;
  if (std::filesystem::exists(layout_path)) {
    ZIPG_ASSIGN_OR_RETURN(std::string text, ReadFileToString(layout_path));
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("shards") || !j["shards"].is_number_unsigned() ||
        !j.contains("dir") || !j["dir"].is_string() || j["shards"].get<uint32_t>() == 0 ||
        j["shards"].get<uint32_t>() > kMaxSlots) {
      return Status::Corruption(layout_path + R"(: expected {"shards": N, "dir": "split-N"})");
    }
    count = j["shards"].get<uint32_t>();
    g->layout_dir_ = j["dir"].get<std::string>();
    if (j.contains("hosted") && j["hosted"].is_array()) {
      for (const auto& s : j["hosted"]) {
        if (!s.is_number_unsigned()) return Status::Corruption(layout_path + ": bad hosted list");
        recorded.push_back(s.get<uint32_t>());
      }
    }
  }
  // Halves prepared for a split that did not switch before this start are dropped (asked
  // again, the split starts over), and so are the directories of earlier layouts.
  for (const auto& entry : std::filesystem::directory_iterator(g->updates_dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("split-", 0) == 0 && name != g->layout_dir_) {
      std::filesystem::remove_all(entry.path(), ec);
    }
  }
  std::vector<uint32_t> hosted = shards;
  const std::vector<uint32_t> none;
  ZIPG_ASSIGN_OR_RETURN(g->store_, OpenStore(dir, options, count ? &none : &shards));
  const uint32_t original = g->store_.manifest.shards;
  if (count != 0) {
    if (count % original != 0) {
      return Status::Corruption(layout_path + ": " + std::to_string(count) +
                                " shards is not a split of the store's " +
                                std::to_string(original));
    }
    // A list in the store's own numbering (every shard below its count: the command line of
    // before the split) means what this server hosted last, as recorded; a list with a shard of
    // the new numbering is taken as it is.
    const bool old_numbering =
        std::all_of(shards.begin(), shards.end(), [&](uint32_t s) { return s < original; });
    if (old_numbering) {
      hosted = recorded;
      if (!shards.empty() && recorded.empty()) {  // a layout.json without the list
        for (uint32_t s : shards) {
          for (uint32_t t = s; t < count; t += original) hosted.push_back(t);
        }
      }
    }
  }
  g->set_num_shards(count ? count : original);
  std::sort(hosted.begin(), hosted.end());
  hosted.erase(std::unique(hosted.begin(), hosted.end()), hosted.end());
  g->view_ = view;
  g->pools_ = pools;
  g->store_dir_ = dir;
  g->open_options_ = options;
  g->log_ = std::make_unique<LogStoreSource>(view, pools, [p = g.get()](int64_t node) {
    const Hosting* h = p->NodeSlot(node);
    return h ? h->commits->committed() : uint64_t{0};
  });
  g->rebuild_ = rebuild;
  g->slots_ = std::make_unique<std::atomic<Hosting*>[]>(kMaxSlots);
  g->kept_.resize(kMaxSlots);
  for (uint32_t s : hosted) {
    if (s >= g->num_shards()) {
      return Status::InvalidArgument("the store has " + std::to_string(g->num_shards()) +
                                     " shards; there is no shard " + std::to_string(s));
    }
    ZIPG_ASSIGN_OR_RETURN(
        g->kept_[s],
        g->OpenHosting(count ? nullptr : std::move(g->store_.shards[s]), g->ShardPrefix(s)));
    g->kept_[s]->serving = true;  // until StopServing: a server without a LogStore (tests)
    g->slots_[s].store(g->kept_[s].get(), std::memory_order_release);
  }
  std::atomic_store(&g->hosted_, std::make_shared<const std::vector<uint32_t>>(hosted));
  g->syncer_ = std::thread([p = g.get()] { p->SyncLoop(); });
  g->rebuilder_ = std::thread([p = g.get()] { p->RebuildLoop(); });
  return g;
}

std::string ServerGraph::ShardPrefix(uint32_t shard) const {
  const std::string dir = layout_dir_.empty() ? updates_dir_ : updates_dir_ + "/" + layout_dir_;
  return dir + "/shard-" + std::to_string(shard);
}

ServerGraph::Hosting* ServerGraph::NodeSlot(int64_t id, uint32_t* shard) const {
  for (;;) {
    const uint32_t count = num_shards();
    const uint32_t s = ShardOf(id, count);
    Hosting* h = Slot(s);
    if (num_shards() != count) continue;  // a split switched meanwhile: route again
    if (shard) *shard = s;
    return h;
  }
}

StatusOr<std::unique_ptr<ServerGraph::Hosting>> ServerGraph::OpenHosting(
    std::unique_ptr<layout::Shard> base, const std::string& prefix) {
  if (std::filesystem::exists(prefix + ".log")) {
    // The previous format kept deleted keys without the LogStore edges' timestamps, which
    // this one needs to order them (docs/writes.md, "The shard side").
    return Status::InvalidArgument(
        prefix +
        ".log was written by an older zipg; its writes cannot be read by this version. "
        "Rebuild the store with zipg compress and start with an empty " +
        updates_dir_);
  }
  auto h = std::make_unique<Hosting>();
  h->base = std::move(base);
  engine::LiveShardOptions live_options;
  live_options.rebuild_memory = rebuild_.memory;
  live_options.snapshot_retention_ms = rebuild_.snapshot_retention_ms;
  live_options.hold_uncommitted = true;
  live_options.await_commit = [h = h.get()](uint64_t id) {
    return h->commits->AwaitCommitted(id,
                                      std::chrono::steady_clock::now() + std::chrono::seconds(60));
  };
  ZIPG_ASSIGN_OR_RETURN(h->live,
                        engine::LiveShard::Open(h->base.get(), prefix, log_.get(), live_options));
  h->commits = std::make_unique<CommitTracker>(h->live->last_id());
  std::error_code ec;
  std::filesystem::remove_all(prefix + ".fetch", ec);  // an adoption a crash interrupted
  return h;
}

ServerGraph::~ServerGraph() {
  {
    std::lock_guard lock(sync_mu_);
    stop_sync_ = true;
  }
  {
    std::lock_guard lock(kept_mu_);
    for (const auto& h : kept_) {
      if (h) h->live->Cancel();
    }
  }
  sync_cv_.notify_all();
  if (syncer_.joinable()) syncer_.join();
  if (rebuilder_.joinable()) rebuilder_.join();
}

std::vector<uint32_t> ServerGraph::hosted() const { return *std::atomic_load(&hosted_); }

void ServerGraph::RebuildLoop() {
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
  for (;;) {
    {
      std::unique_lock lock(sync_mu_);
      if (sync_cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stop_sync_; })) return;
    }
    auto map = view_ ? view_->Current() : nullptr;
    for (uint32_t s : hosted()) {
      Hosting* h = Slot(s);
      if (!h || !h->serving.load()) continue;  // catching up: neither builds nor adopts
      StatusOr<nlohmann::json> done = nlohmann::json();
      if (const std::string peer = NewerPeer(s, map.get()); !peer.empty()) {
        done = Adopt(s, peer);
      } else if (rebuild_.delta_bytes > 0 && h->live->delta_bytes() >= rebuild_.delta_bytes &&
                 IsBuilder(s, map.get())) {
        done = Rebuild(s);
      }
      if (!done.ok()) {  // tried again at the next check; said once per different error
        std::lock_guard lock(rebuild_mu_);
        const std::string why = done.status().ToString();
        if (why != h->rebuild_error) fprintf(stderr, "zipg shard: shard %u: %s\n", s, why.c_str());
        h->rebuild_error = why;
      }
    }
  }
}

bool ServerGraph::IsBuilder(uint32_t shard, const cluster::ShardMap* map) const {
  if (!map || self_.empty() || shard >= map->replicas.size()) return true;  // alone
  for (size_t i : map->replicas[shard]) {
    const auto& m = map->members[i];
    if (m.serving && m.name < self_) return false;
  }
  return true;
}

std::string ServerGraph::NewerPeer(uint32_t shard, const cluster::ShardMap* map) const {
  if (!map || shard >= map->replicas.size()) return "";
  const Hosting* h = Slot(shard);
  if (!h) return "";
  std::string best;
  int64_t newest = h->live->version();
  for (size_t i : map->replicas[shard]) {
    const auto& m = map->members[i];
    auto it = m.versions.find(shard);
    if (m.name == self_ || !m.serving || it == m.versions.end() || it->second <= newest) continue;
    newest = it->second;
    best = m.name;
  }
  return best;
}

StatusOr<ServerGraph::Hosting*> ServerGraph::Hosted(uint32_t shard) const {
  Hosting* h = Slot(shard);
  if (!h) return Status::InvalidArgument("shard " + std::to_string(shard) + " is not served here");
  return h;
}

StatusOr<nlohmann::json> ServerGraph::Rebuild(uint32_t shard) {
  ZIPG_ASSIGN_OR_RETURN(Hosting * h, Hosted(shard));
  std::lock_guard lock(h->rebuild_mu);
  auto done = h->live->Rebuild();
  if (done.ok()) VersionsChanged(shard);
  return done;
}

StatusOr<nlohmann::json> ServerGraph::Adopt(uint32_t shard, const std::string& from) {
  ZIPG_ASSIGN_OR_RETURN(Hosting * h, Hosted(shard));
  engine::LiveShard* live = h->live.get();
  if (!view_) return Status::Unavailable("no cluster view to find replica " + from);
  std::lock_guard lock(h->rebuild_mu);
  const auto start = std::chrono::steady_clock::now();
  auto map = view_->Current();
  const cluster::MemberInfo* peer = nullptr;
  for (const auto& m : map->members) {
    if (m.name == from) peer = &m;
  }
  if (!peer) return Status::NotFound("no member " + from + " in the cluster");
  ZIPG_ASSIGN_OR_RETURN(const nlohmann::json listing, PeerVersion(shard, *peer));
  const int64_t number = listing["version"].get<int64_t>();
  const uint64_t through = listing["through"].get<uint64_t>();
  if (number <= live->version()) {  // adopted already (by the adoption loop) or built here
    nlohmann::json last = live->LastRebuild();
    if (!last.is_object() || last.value("version", int64_t{-1}) != live->version()) {
      last = nlohmann::json{{"version", live->version()}};
    }
    last["already"] = true;
    return last;
  }
  // The files, fetched into a directory of their own (removed if anything fails).
  const std::string fetched = ShardPrefix(shard) + ".fetch";
  ZIPG_ASSIGN_OR_RETURN(const uint64_t bytes, FetchVersion(shard, *peer, listing, fetched));
  const double fetch_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto feed = [this, map, shard](uint64_t after) -> StatusOr<std::vector<engine::Update>> {
    ZIPG_ASSIGN_OR_RETURN(const cluster::MemberInfo* logstore, map->LogStore());
    ZIPG_ASSIGN_OR_RETURN(rpc::UpdateFeedChunk got,
                          rpc::RemoteGraph(pools_->Get(logstore->endpoint))
                              .UpdatesSince(shard, after, self_, num_shards()));
    // From another sender than the pushes': refused (the adoption is asked again).
    ZIPG_RETURN_IF_ERROR(FeedFromCurrentSender(shard, static_cast<uint64_t>(got.sender)));
    std::vector<engine::Update> updates;
    ZIPG_RETURN_IF_ERROR(engine::DecodeUpdates(got.updates, &updates, nullptr));
    return updates;
  };
  auto done =
      live->Adopt(number, through, fetched, feed,
                  {{"from", from}, {"fetched_bytes", bytes}, {"fetch_seconds", fetch_seconds}});
  std::error_code ec;
  std::filesystem::remove_all(fetched, ec);  // left only if Adopt failed before moving it
  if (!done.ok()) return done;
  VersionsChanged(shard);
  return done;
}

StatusOr<nlohmann::json> ServerGraph::PeerVersion(uint32_t shard,
                                                  const cluster::MemberInfo& peer) const {
  ZIPG_ASSIGN_OR_RETURN(
      std::string text,
      rpc::RemoteGraph(pools_->Get(peer.endpoint)).RebuiltVersion(static_cast<int32_t>(shard)));
  const nlohmann::json listing = nlohmann::json::parse(text, nullptr, false);
  if (!listing.is_object() || !listing.contains("version") ||
      !listing["version"].is_number_integer() || !listing.contains("through") ||
      !listing["through"].is_number_unsigned() || !listing.contains("files") ||
      !listing["files"].is_array()) {
    return Status::Internal(peer.name + " answered rebuilt_version with " + text.substr(0, 200));
  }
  return listing;
}

StatusOr<uint64_t> ServerGraph::FetchVersion(uint32_t shard, const cluster::MemberInfo& peer,
                                             const nlohmann::json& listing,
                                             const std::string& into) const {
  rpc::RemoteGraph remote(pools_->Get(peer.endpoint));
  const int64_t number = listing["version"].get<int64_t>();
  std::error_code ec;
  std::filesystem::remove_all(into, ec);
  uint64_t bytes = 0;
  auto fetch = [&]() -> Status {
    for (const auto& f : listing["files"]) {
      const std::string path = f.at("path").get<std::string>();
      const std::string file = into + "/" + path;
      std::filesystem::create_directories(std::filesystem::path(file).parent_path(), ec);
      std::ofstream out(file, std::ios::binary | std::ios::trunc);
      const uint64_t size = f.at("bytes").get<uint64_t>();
      for (uint64_t at = 0; at < size;) {
        ZIPG_ASSIGN_OR_RETURN(std::string chunk,
                              remote.RebuiltChunk(static_cast<int32_t>(shard), number, path,
                                                  static_cast<int64_t>(at), kFetchChunk));
        if (chunk.empty()) return Status::Internal(peer.name + ": " + path + " ends early");
        out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        at += chunk.size();
        bytes += chunk.size();
      }
      out.close();
      if (!out) return Status::IOError("cannot write " + file);
      ZIPG_RETURN_IF_ERROR(SyncFile(file));
    }
    return Status::OK();
  };
  if (Status s = fetch(); !s.ok()) {
    std::filesystem::remove_all(into, ec);
    return s;
  }
  return bytes;
}

Status ServerGraph::FetchSplitShard(uint32_t shard) {
  const std::string prefix = ShardPrefix(shard);
  if (std::filesystem::exists(prefix + ".version")) return Status::OK();  // hosted here before
  if (!view_)
    return Status::Unavailable("no cluster view to find a replica of " + std::to_string(shard));
  auto map = view_->Current();
  if (map->num_shards != num_shards()) {
    return Status::Unavailable("the cluster's map has " + std::to_string(map->num_shards) +
                               " shards, this server " + std::to_string(num_shards()));
  }
  ZIPG_ASSIGN_OR_RETURN(const cluster::MemberInfo* peer, map->Pick(shard, self_));
  ZIPG_ASSIGN_OR_RETURN(const nlohmann::json listing, PeerVersion(shard, *peer));
  const int64_t number = listing["version"].get<int64_t>();
  const uint64_t through = listing["through"].get<uint64_t>();
  const std::string fetched = prefix + ".fetch";
  ZIPG_ASSIGN_OR_RETURN(const uint64_t bytes, FetchVersion(shard, *peer, listing, fetched));
  std::error_code ec;
  const std::string dir = prefix + ".v" + std::to_string(number);
  std::filesystem::remove_all(dir, ec);
  std::filesystem::remove(dir + ".delta", ec);
  std::filesystem::rename(fetched, dir, ec);
  if (ec) return Status::IOError("cannot rename " + fetched + ": " + ec.message());
  // Its delta starts at `through`; the catch-up reads the feed after it.
  ZIPG_RETURN_IF_ERROR(engine::LiveShard::WriteVersionPointer(prefix, number, through));
  fprintf(stderr, "zipg shard: fetched shard %u (version %lld, %llu bytes) from %s\n", shard,
          static_cast<long long>(number), static_cast<unsigned long long>(bytes),
          peer->name.c_str());
  return Status::OK();
}

void ServerGraph::VersionsChanged(uint32_t shard) {
  if (Hosting* h = Slot(shard)) {
    std::lock_guard lock(rebuild_mu_);
    h->rebuild_error.clear();
  }
  if (on_versions_) on_versions_();
}

std::map<uint32_t, int64_t> ServerGraph::Versions() const {
  std::map<uint32_t, int64_t> out;
  for (uint32_t s : hosted()) {
    if (const Hosting* h = Slot(s)) out[s] = h->live->version();
  }
  return out;
}

StatusOr<std::string> ServerGraph::RebuiltVersion(uint32_t shard) const {
  ZIPG_ASSIGN_OR_RETURN(const Hosting* h, Hosted(shard));
  ZIPG_ASSIGN_OR_RETURN(auto listing, h->live->VersionFiles());
  return listing.dump();
}

StatusOr<std::string> ServerGraph::RebuiltChunk(uint32_t shard, int64_t version,
                                                const std::string& path, uint64_t offset,
                                                uint64_t length) const {
  ZIPG_ASSIGN_OR_RETURN(const Hosting* h, Hosted(shard));
  if (length > kFetchChunk * 4) return Status::InvalidArgument("rebuilt_chunk: at most 16 MiB");
  return h->live->ReadVersionFile(version, path, offset, length);
}

StatusOr<std::string> ServerGraph::StoreChunk(const std::string& path, uint64_t offset,
                                              uint64_t length) const {
  if (length > kFetchChunk * 4) return Status::InvalidArgument("store_chunk: at most 16 MiB");
  if (!Fetchable(store_.manifest.files, hosted(), path)) {
    return Status::NotFound(path + " is not a file of a shard served here");
  }
  return ReadFileRange(store_dir_ + "/" + path, offset, length);
}

nlohmann::json ServerGraph::RebuildStats() const {
  nlohmann::json j = nlohmann::json::object();
  std::lock_guard lock(rebuild_mu_);
  for (uint32_t s : hosted()) {
    const Hosting* h = Slot(s);
    if (!h) continue;
    j[std::to_string(s)] = h->live->Stats();
    if (!h->rebuild_error.empty()) j[std::to_string(s)]["last_error"] = h->rebuild_error;
  }
  return j;
}

void ServerGraph::SyncLoop() {
  // Until stopped, and once more after: every applied batch is durable when the server closes.
  bool stopping = false;
  bool reported = false;
  while (!stopping) {
    {
      std::unique_lock lock(sync_mu_);
      sync_cv_.wait_for(lock, std::chrono::milliseconds(kSyncIntervalMs),
                        [&] { return stop_sync_; });
      stopping = stop_sync_;
    }
    std::vector<std::pair<uint32_t, engine::LiveShard*>> lives;  // an unserved shard's too
    {
      std::lock_guard lock(kept_mu_);
      for (uint32_t s = 0; s < kept_.size(); ++s) {
        if (kept_[s]) lives.emplace_back(s, kept_[s]->live.get());
      }
    }
    for (auto [s, live] : lives) {
      Status synced = live->Sync();
      if (!synced.ok() && !reported) {  // the delta file refuses appends from now on
        fprintf(stderr, "zipg shard: shard %u: %s\n", s, synced.ToString().c_str());
        reported = true;
      }
    }
  }
}

StatusOr<rpc::RemoteGraph> ServerGraph::LogStoreSource::Remote() const {
  if (!view_) return Status::Unavailable("no cluster view to find the LogStore");
  auto map = view_->Current();
  ZIPG_ASSIGN_OR_RETURN(const cluster::MemberInfo* logstore, map->LogStore());
  return rpc::RemoteGraph(pools_->Get(logstore->endpoint));
}

StatusOr<std::optional<Properties>> ServerGraph::LogStoreSource::FragmentProperties(
    int64_t id, const std::vector<int64_t>& generations) {
  ZIPG_ASSIGN_OR_RETURN(auto remote, Remote());
  ZIPG_ASSIGN_OR_RETURN(NodeData data, remote.Fragment(id, false, -1, generations, committed_(id)));
  return std::move(data.properties);
}

StatusOr<std::vector<Edge>> ServerGraph::LogStoreSource::FragmentEdges(
    int64_t id, int64_t type, const std::vector<int64_t>& generations,
    const std::vector<int64_t>& dsts) {
  ZIPG_ASSIGN_OR_RETURN(auto remote, Remote());
  return remote.FragmentEdges(id, type, generations, dsts, committed_(id));
}

StatusOr<std::vector<std::vector<Edge>>> ServerGraph::LogStoreSource::FragmentEdgesBatch(
    const std::vector<Ask>& asks) {
  ZIPG_ASSIGN_OR_RETURN(auto remote, Remote());
  std::vector<rpc::FragmentAsk> wire(asks.size());
  uint64_t through = 0;
  for (size_t i = 0; i < asks.size(); ++i) {
    through = std::max(through, committed_(asks[i].id));
    wire[i].id = asks[i].id;
    wire[i].type = asks[i].type;
    wire[i].generations = asks[i].generations;
    wire[i].dsts = asks[i].dsts;
  }
  return remote.FragmentEdgesBatch(wire, through);
}

StatusOr<PushAnswer> ServerGraph::ApplyPush(uint32_t shard, uint64_t prev,
                                            const std::vector<engine::Update>& batch) {
  Hosting* h = Slot(shard);
  if (!h) return Status::Unavailable("shard " + std::to_string(shard) + " is not served here");
  PushAnswer answer;
  {
    std::unique_lock gate(h->commits->gate());
    std::lock_guard lock(h->apply_mu);
    if (prev > h->live->last_id()) {
      answer.behind = true;
    } else {
      ZIPG_ASSIGN_OR_RETURN(answer.found, h->live->Apply(batch));
      h->commits->Applied(batch);
    }
  }
  if (answer.behind) {
    FellBehind(*h, /*count=*/true);
  } else {
    NoteLayoutMark(shard, batch);
  }
  return answer;
}

void ServerGraph::FellBehind(Hosting& h, bool count) {
  bool was_serving;
  {
    std::lock_guard lock(serving_mu_);
    was_serving = h.serving.exchange(false);
    if (count || was_serving) {
      ++h.refused;
      ++refused_;
    }
  }
  if (was_serving && on_behind_) on_behind_();
}

void ServerGraph::StopServing() {
  std::lock_guard lock(serving_mu_);
  for (uint32_t s : hosted()) {
    if (Hosting* h = Slot(s)) h->serving = false;
  }
}

bool ServerGraph::StartServing(uint32_t shard, uint64_t refused_before) {
  std::lock_guard lock(serving_mu_);
  Hosting* h = Slot(shard);
  if (!h || h->refused.load() != refused_before) return false;
  h->serving = true;
  return true;
}

uint64_t ServerGraph::refused(uint32_t shard) const {
  const Hosting* h = Slot(shard);
  return h ? h->refused.load() : 0;
}

bool ServerGraph::serving() const { return CatchingUp().empty(); }

std::vector<uint32_t> ServerGraph::CatchingUp() const {
  std::vector<uint32_t> out;
  for (uint32_t s : hosted()) {
    const Hosting* h = Slot(s);
    if (h && !h->serving.load()) out.push_back(s);
  }
  return out;
}

Status ServerGraph::ApplyFeed(uint32_t shard, const std::vector<engine::Update>& batch,
                              uint64_t sender) {
  Hosting* h = Slot(shard);
  if (!h) return Status::Unavailable("shard " + std::to_string(shard) + " is not served here");
  {
    std::unique_lock gate(h->commits->gate());
    std::lock_guard lock(h->apply_mu);
    ZIPG_RETURN_IF_ERROR(FromSenderLocked(*h, sender));
    ZIPG_RETURN_IF_ERROR(h->live->Apply(batch).status());
    h->commits->Applied(batch);
  }
  NoteLayoutMark(shard, batch);
  return Status::OK();
}

void ServerGraph::ApplyCommit(uint32_t shard, uint64_t prev, uint64_t committed) {
  Hosting* h = Slot(shard);
  if (!h) return;
  if (prev > 0) {
    bool behind;
    {
      std::lock_guard lock(h->apply_mu);
      behind = prev > h->live->last_id();
    }
    // Missed a batch (its lease lapsed during a stall, say): only a serving shard reacts; one
    // catching up reads the feed anyway.
    if (behind) FellBehind(*h, /*count=*/false);
  }
  // The delta file first: what a reader may now take as committed is also what a restart keeps.
  // If it cannot be written, the shard stops serving (it cannot keep what it would answer).
  if (Status s = h->live->Commit(committed); !s.ok()) {
    std::cerr << "zipg shard: shard " << shard
              << ": cannot write its committed updates: " << s.ToString() << std::endl;
    FellBehind(*h, /*count=*/false);
    return;
  }
  h->commits->Commit(committed);
}

Status ServerGraph::FromSenderLocked(Hosting& h, uint64_t sender) {
  if (sender == 0) return Status::OK();
  uint64_t noted = 0;
  if (h.sender.compare_exchange_strong(noted, sender) || noted == sender) return Status::OK();
  return Status::Unavailable(
      "the LogStore's feed read is from another update sender than the "
      "pushes of its current leader; read again");
}

Status ServerGraph::FeedFromCurrentSender(uint32_t shard, uint64_t sender) {
  Hosting* h = Slot(shard);
  if (!h) return Status::Unavailable("shard " + std::to_string(shard) + " is not served here");
  std::lock_guard lock(h->apply_mu);
  return FromSenderLocked(*h, sender);
}

StatusOr<size_t> ServerGraph::NoteSender(uint32_t shard, uint64_t sender) {
  Hosting* h = Slot(shard);
  if (!h || sender == 0 || h->sender.load() == sender) return size_t{0};
  size_t undone = 0;
  {
    std::unique_lock gate(h->commits->gate());
    std::lock_guard lock(h->apply_mu);
    const uint64_t before = h->sender.exchange(sender);
    // None before: nothing applied here came from a sender yet (the feed and the pushes note
    // theirs before they apply).
    if (before == 0 || before == sender) return size_t{0};
    ZIPG_ASSIGN_OR_RETURN(undone, h->live->RollBackUncommitted());
  }
  if (undone > 0) {
    std::cerr << "zipg shard: shard " << shard << ": rolled back " << undone
              << " uncommitted updates of the previous LogStore sender (the new one sends them "
              << "again if it has them)" << std::endl;
    h->rolled_back += undone;
  }
  return undone;
}

Status ServerGraph::Serve(uint32_t shard) {
  if (shard >= num_shards()) {
    return Status::InvalidArgument("the store has " + std::to_string(num_shards()) +
                                   " shards; there is no shard " + std::to_string(shard));
  }
  std::lock_guard serialize(hosting_mu_);
  if (Slot(shard)) return Status::OK();
  Hosting* h;
  {
    std::lock_guard lock(kept_mu_);
    h = kept_[shard].get();
  }
  if (!h && !layout_dir_.empty()) {
    // A split's shard exists only as versions of its own (no files of the store hold it): a
    // serving replica's current version, which then catches up from the feed.
    ZIPG_RETURN_IF_ERROR(FetchSplitShard(shard));
    ZIPG_ASSIGN_OR_RETURN(auto made, OpenHosting(nullptr, ShardPrefix(shard)));
    std::lock_guard lock(kept_mu_);
    kept_[shard] = std::move(made);
    h = kept_[shard].get();
  }
  if (!h) {  // never served by this process: its files, then its objects
    if (fetch_) ZIPG_RETURN_IF_ERROR(fetch_(shard).status());
    const std::vector<uint32_t> only = {shard};
    ZIPG_ASSIGN_OR_RETURN(OpenedStore opened, OpenStore(store_dir_, open_options_, &only));
    if (opened.manifest.shards != num_shards()) {
      return Status::FailedPrecondition(
          store_dir_ + " now has " + std::to_string(opened.manifest.shards) +
          " shards; this server opened it with " + std::to_string(num_shards()));
    }
    ZIPG_ASSIGN_OR_RETURN(auto made,
                          OpenHosting(std::move(opened.shards[shard]), ShardPrefix(shard)));
    std::lock_guard lock(kept_mu_);
    kept_[shard] = std::move(made);
    h = kept_[shard].get();
  }
  // Not answering reads until the catch-up thread has brought it up to the feed.
  h->serving = false;
  h->commits->SetWithdrawn(false);
  slots_[shard].store(h, std::memory_order_release);
  auto now = std::make_shared<std::vector<uint32_t>>(hosted());
  now->insert(std::lower_bound(now->begin(), now->end(), shard), shard);
  std::atomic_store(&hosted_, std::shared_ptr<const std::vector<uint32_t>>(std::move(now)));
  ZIPG_RETURN_IF_ERROR(WriteLayoutFile());
  if (on_hosted_) on_hosted_();
  if (on_behind_) on_behind_();
  return Status::OK();
}

Status ServerGraph::Unserve(uint32_t shard) {
  std::lock_guard serialize(hosting_mu_);
  Hosting* h = Slot(shard);
  if (!h) return Status::OK();
  const std::vector<uint32_t> before = hosted();
  // Never the last serving copy: another member must serve it in etcd's view.
  auto map = view_ ? view_->Current() : nullptr;
  bool elsewhere = false;
  if (map && shard < map->owners.size()) {
    for (size_t i : map->owners[shard]) elsewhere |= map->members[i].name != self_;
  }
  if (!elsewhere) {
    return Status::FailedPrecondition("no other member serves shard " + std::to_string(shard) +
                                      "; serve it elsewhere first");
  }
  {
    std::lock_guard lock(serving_mu_);
    h->serving = false;
  }
  slots_[shard].store(nullptr, std::memory_order_release);
  // Reads waiting for a commit on it: none will come once the LogStore stops sending here.
  h->commits->SetWithdrawn(true);
  auto now = std::make_shared<std::vector<uint32_t>>(before);
  now->erase(std::find(now->begin(), now->end(), shard));
  std::atomic_store(&hosted_, std::shared_ptr<const std::vector<uint32_t>>(std::move(now)));
  ZIPG_RETURN_IF_ERROR(WriteLayoutFile());
  if (on_hosted_) on_hosted_();
  return h->live->Sync();
}

void ServerGraph::SetLinearizable(bool on, std::function<bool()> lease_valid) {
  lease_valid_ = std::move(lease_valid);
  linearizable_ = on;
}

Status ServerGraph::ReadNode(uint32_t, int64_t id, const NodeRead& read) {
  return OnStableCount([&] { return ReadNodeOnce(id, read); });
}

Status ServerGraph::ReadNodeOnce(int64_t id, const NodeRead& read) {
  // By this server's own count: the router's may be from before a split's switch.
  uint32_t shard = 0;
  Hosting* h = NodeSlot(id, &shard);
  if (!linearizable_.load() || !h ||
      ReadAt::Current() != 0) {  // a snapshot's state is committed (LocalShard)
    return ShardRouter::ReadNode(shard, id, read);
  }
  CommitTracker& tracker = *h->commits;
  // A committed state of the node names only versions the leader has applied: one the LogStore
  // does not hold means this replica is behind it (a write the LogStore applied after its update
  // timeout, which this replica, cut off from it, has not) or the LogStore asked is not that
  // leader. Either way the answer would lack that version: refuse, the router tries elsewhere.
  auto disagree = [&] {
    tracker.NoteDisagreement();
    return Status::Unavailable("node " + std::to_string(id) +
                               ": this replica's committed state names a version the LogStore "
                               "does not hold (one of them is behind the other)");
  };
  Status status;
  bool again;
  {
    ZIPG_ASSIGN_OR_RETURN(ShardRef ref, LocalShard(shard));  // serving, and the lease held
    engine::MissedVersions missed;
    const uint64_t began = tracker.BeginRead();
    status = read(*ref);
    again = tracker.EndRead(began, id);
    if (status.ok() && !again && missed.count() > 0) status = disagree();
  }
  if (!status.ok()) return status;
  // Stopped serving (found behind, lease lost) while the read ran: it may have read stale data.
  ZIPG_RETURN_IF_ERROR(Answering(*h));
  if (!again) return status;
  // The node had an update applied here and not yet committed: wait for its commit, then read
  // the committed state with no update applied meanwhile.
  const auto deadline = CallDeadline::Current().value_or(std::chrono::steady_clock::now() +
                                                         std::chrono::milliseconds(kCommitWaitMs));
  while (true) {
    ZIPG_RETURN_IF_ERROR(tracker.AwaitNode(id, deadline));
    std::shared_lock gate(tracker.gate());
    if (!tracker.Settled(id)) continue;  // another update arrived: wait for it too
    ZIPG_ASSIGN_OR_RETURN(ShardRef ref, LocalShard(shard));
    engine::MissedVersions missed;
    ZIPG_RETURN_IF_ERROR(read(*ref));
    return missed.count() > 0 ? disagree() : Status::OK();
  }
}

nlohmann::json ServerGraph::CommitStats() const {
  nlohmann::json j = nlohmann::json::object();
  for (uint32_t s : hosted()) {
    const Hosting* h = Slot(s);
    if (!h) continue;
    j[std::to_string(s)] = {
        {"committed", h->commits->committed()}, {"tracked_nodes", h->commits->tracked()},
        {"rereads", h->commits->rereads()},     {"disagreements", h->commits->disagreements()},
        {"rolled_back", h->rolled_back.load()}, {"snapshots", h->live->SnapshotStats()}};
  }
  return j;
}

uint64_t ServerGraph::LastId(uint32_t shard) const {
  const Hosting* h = Slot(shard);
  return h ? h->live->last_id() : 0;
}

uint64_t ServerGraph::AccountedBytes() const {
  uint64_t bytes = 0;
  std::lock_guard lock(kept_mu_);  // an unserved shard's index is still in memory
  for (const auto& h : kept_) {
    if (h) bytes += h->live->delta_bytes();
  }
  return bytes;
}

nlohmann::json ServerGraph::UpdateStats() const {
  nlohmann::json j = nlohmann::json::object();
  for (uint32_t s : hosted()) {
    if (const Hosting* h = Slot(s)) j[std::to_string(s)] = h->live->written_nodes();
  }
  return j;
}

Status ServerGraph::Answering(const Hosting& h) const {
  if (!h.serving.load()) {
    return Status::Unavailable("this replica is catching up with the LogStore's writes");
  }
  if (linearizable_.load() && lease_valid_ && !lease_valid_()) {
    return Status::Unavailable(
        "this replica's membership lease may have expired: it may have missed writes");
  }
  return Status::OK();
}

bool ServerGraph::OthersServe(uint32_t index) const {
  if (view_ == nullptr) return false;
  const auto map = view_->Current();
  if (map->num_shards != num_shards() || index >= map->owners.size()) return false;
  for (size_t m : map->owners[index]) {
    if (map->members[m].name != self_) return true;
  }
  return false;
}

StatusOr<ShardRouter::ShardRef> ServerGraph::LocalShard(uint32_t index) {
  const Hosting* h = Slot(index);
  if (!h) return Status::Unavailable("shard " + std::to_string(index) + " is not served here");
  ZIPG_RETURN_IF_ERROR(Answering(*h));
  const uint64_t at = ReadAt::Current();
  if (at == 0) return ShardRef(h->live->Current());
  // A read at a snapshot (docs/consistency.md, "Snapshots"): once every update up to it is
  // committed, the versions at it no longer change, and the read needs no commit wait.
  if (at > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Status::InvalidArgument("at must be a sequence returned by snapshot, not " +
                                   std::to_string(static_cast<int64_t>(at)));
  }
  // A replica cut off from the LogStore's commit notices (a LogStore that has not yet seen it
  // register, a partition) may never reach `at`. While another replica serves the shard, it
  // waits half the call's time, so that the router's retry there (DEADLINE_EXCEEDED is retried
  // elsewhere) has the other half.
  const auto now = std::chrono::steady_clock::now();
  auto deadline = CallDeadline::Current().value_or(now + std::chrono::milliseconds(kCommitWaitMs));
  if (OthersServe(index)) deadline = now + (deadline - now) / 2;
  ZIPG_RETURN_IF_ERROR(h->commits->AwaitCommitted(at, deadline));
  ZIPG_ASSIGN_OR_RETURN(auto version, h->live->CurrentAt(at));
  return ShardRef(std::move(version));
}

StatusOr<std::vector<uint32_t>> ServerGraph::Resolve(const std::vector<int32_t>& shards,
                                                     uint32_t count) const {
  const uint32_t own = num_shards();
  if (count == 0) count = own;
  if (count > own) {
    return Status::Unavailable("this server has " + std::to_string(own) +
                               " shards; it has not switched to " + std::to_string(count) + " yet");
  }
  if (own % count != 0) {
    return Status::InvalidArgument("shards numbered by " + std::to_string(count) +
                                   " of a store of " + std::to_string(own));
  }
  std::vector<uint32_t> out;
  for (int32_t s : shards) {
    if (s < 0) return Status::InvalidArgument("negative shard number");
    if (static_cast<uint32_t>(s) >= count) {
      return Status::InvalidArgument("no shard " + std::to_string(s) + " of " +
                                     std::to_string(count));
    }
    for (uint32_t t = static_cast<uint32_t>(s); t < own; t += count) out.push_back(t);
  }
  return out;
}

StatusOr<std::vector<int64_t>> ServerGraph::LocalNodeIds(const std::vector<int32_t>& shards,
                                                         const Properties& properties,
                                                         uint32_t count) {
  if (properties.empty()) {
    return Status::InvalidArgument("get_node_ids needs at least one property");
  }
  return OnStableCount([&]() -> StatusOr<std::vector<int64_t>> {
    std::vector<int64_t> ids;
    ZIPG_ASSIGN_OR_RETURN(auto own, Resolve(shards, count));
    for (uint32_t s : own) {
      ZIPG_ASSIGN_OR_RETURN(ShardRef shard, LocalShard(s));
      ZIPG_ASSIGN_OR_RETURN(auto part, shard->GetNodeIds(properties));
      ids.insert(ids.end(), part.begin(), part.end());
    }
    std::sort(ids.begin(), ids.end());
    return ids;
  });
}

StatusOr<std::vector<int64_t>> ServerGraph::NodeIdsOnAllShards(const Properties& properties) {
  std::vector<int32_t> local;
  cluster::WorkPlan<int32_t> remote;
  auto map = view_ ? view_->Current() : nullptr;
  // Numbered by the map's count (this server's may differ for a moment around a split).
  const uint32_t n = map && map->num_shards ? map->num_shards : num_shards();
  for (uint32_t s = 0; s < n; ++s) {
    if (ServesAll(s, n)) {
      local.push_back(static_cast<int32_t>(s));
      continue;
    }
    if (!map) return Status::Unavailable("shard " + std::to_string(s) + " is not served here");
    ZIPG_RETURN_IF_ERROR(cluster::AddWork(*map, s, {static_cast<int32_t>(s)}, &remote));
  }
  std::vector<rpc::IdsCall> calls;
  calls.push_back([&] { return LocalNodeIds(local, properties, n); });
  for (const auto& entry : remote) {  // not a structured binding: clang 14 cannot capture one
    const auto& name = entry.first;
    const auto& work = entry.second;
    calls.push_back([this, &name, &work, &properties, n]() -> StatusOr<std::vector<int64_t>> {
      auto got =
          rpc::RemoteGraph(pools_->Get(work.endpoint)).LocalNodeIds(work.items, properties, n);
      if (got.ok() || !cluster::RetryElsewhere(got.status())) return got;
      std::map<uint32_t, std::vector<int32_t>> by_shard;  // once more on other replicas
      for (int32_t s : work.items) by_shard[static_cast<uint32_t>(s)].push_back(s);
      return cluster::RetryOnOthers(
          *view_, name, by_shard, [this, &properties, n](const cluster::ServerWork<int32_t>& w) {
            return rpc::RemoteGraph(pools_->Get(w.endpoint)).LocalNodeIds(w.items, properties, n);
          });
    });
  }
  // Nodes whose live properties were written since the load live in the LogStore.
  if (!map) return Status::Unavailable("no cluster view to find the LogStore");
  ZIPG_ASSIGN_OR_RETURN(const cluster::MemberInfo* logstore, map->LogStore());
  calls.push_back([this, logstore, &properties] {
    return rpc::RemoteGraph(pools_->Get(logstore->endpoint)).LogNodeIds(properties);
  });
  ZIPG_ASSIGN_OR_RETURN(auto ids, rpc::GatherIds(fanout_, calls));
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

StatusOr<std::vector<int64_t>> ServerGraph::LocalSearchNodeIds(const std::vector<int32_t>& shards,
                                                               const NodeSearch& q,
                                                               uint32_t count) {
  return OnStableCount([&]() -> StatusOr<std::vector<int64_t>> {
    ZIPG_ASSIGN_OR_RETURN(auto local, Resolve(shards, count));
    return SearchLocal(local, q);
  });
}

StatusOr<std::vector<int64_t>> ServerGraph::LocalSources(
    const std::vector<int32_t>& shards, uint32_t count, bool include_dsts,
    const layout::ShardReader::ListBounds& bounds) {
  return OnStableCount([&]() -> StatusOr<std::vector<int64_t>> {
    ZIPG_ASSIGN_OR_RETURN(auto local, Resolve(shards, count));
    return SourcesLocal(local, include_dsts, bounds);
  });
}

StatusOr<std::vector<int64_t>> ServerGraph::LocalFilter(const std::vector<int64_t>& ids,
                                                        const Properties& properties) {
  return OnStableCount([&] { return FilterLocal(ids, properties); });
}

StatusOr<std::vector<graph::Visit>> ServerGraph::LocalExpand(
    const graph::PathAutomaton& automaton, const std::vector<graph::Visit>& visits,
    int64_t deadline_ms, uint64_t max_visits) {
  return OnStableCount([&] { return ExpandLocal(automaton, visits, deadline_ms, max_visits); });
}

uint32_t ServerGraph::SplitByHost(const cluster::ShardMap* map, std::vector<int32_t>* local,
                                  std::vector<uint32_t>* remote) const {
  const uint32_t n = map && map->num_shards ? map->num_shards : num_shards();
  for (uint32_t s = 0; s < n; ++s) {
    if (ServesAll(s, n)) {
      local->push_back(static_cast<int32_t>(s));
    } else {
      remote->push_back(s);
    }
  }
  return n;
}

StatusOr<std::vector<int64_t>> ServerGraph::SearchOnAllShards(const NodeSearch& q) {
  std::vector<uint32_t> remote;
  std::vector<int32_t> local;
  // One map for the plan and the calls: the shard numbers are by its count.
  auto map = view_ ? view_->Current() : nullptr;
  const uint32_t n = SplitByHost(map.get(), &local, &remote);
  std::vector<rpc::IdsCall> calls;
  calls.push_back([&] { return LocalSearchNodeIds(local, q, n); });
  // The other shards' servers, and the LogStore for the nodes written since the load.
  if (!view_) return Status::Unavailable("no cluster view to find the other servers");
  ZIPG_RETURN_IF_ERROR(cluster::AddSearchCalls(*view_, *map, pools_, remote, true, q, &calls));
  return rpc::GatherIds(fanout_, calls);
}

StatusOr<std::vector<int64_t>> ServerGraph::FilterGroups(
    const std::map<uint32_t, std::vector<int64_t>>& groups, const Properties& properties) {
  std::vector<int64_t> local;
  cluster::WorkPlan<int64_t> remote;
  auto map = view_ ? view_->Current() : nullptr;
  std::map<uint32_t, std::vector<int64_t>> by_map;  // the others, by the map's count
  for (const auto& [s, ids] : groups) {
    if (ServesHere(s)) {
      local.insert(local.end(), ids.begin(), ids.end());
      continue;
    }
    if (!map || map->num_shards == 0) {
      return Status::Unavailable("shard " + std::to_string(s) + " is not served here");
    }
    for (int64_t id : ids) by_map[ShardOf(id, map->num_shards)].push_back(id);
  }
  for (const auto& [s, ids] : by_map) ZIPG_RETURN_IF_ERROR(cluster::AddWork(*map, s, ids, &remote));
  std::vector<rpc::IdsCall> calls;
  calls.push_back([&] { return LocalFilter(local, properties); });
  for (const auto& entry : remote) {  // not a structured binding: clang 14 cannot capture one
    const auto& name = entry.first;
    const auto& work = entry.second;
    calls.push_back([this, &name, &work, &properties, &map]() -> StatusOr<std::vector<int64_t>> {
      auto got = rpc::RemoteGraph(pools_->Get(work.endpoint)).FilterNodes(work.items, properties);
      if (got.ok() || !cluster::RetryElsewhere(got.status())) return got;
      std::map<uint32_t, std::vector<int64_t>> by_shard;  // once more on other replicas
      for (int64_t id : work.items) by_shard[ShardOf(id, map->num_shards)].push_back(id);
      return cluster::RetryOnOthers(
          *view_, name, by_shard, [this, &properties](const cluster::ServerWork<int64_t>& w) {
            return rpc::RemoteGraph(pools_->Get(w.endpoint)).FilterNodes(w.items, properties);
          });
    });
  }
  return rpc::GatherIds(fanout_, calls);
}

StatusOr<std::vector<graph::Visit>> ServerGraph::ExpandGroups(
    const graph::PathAutomaton& automaton,
    const std::map<uint32_t, std::vector<graph::Visit>>& groups,
    const graph::TraversalBudget& budget) {
  std::vector<graph::Visit> local;  // regrouped by this server's count as it expands them
  std::map<uint32_t, std::vector<graph::Visit>> remote;
  for (const auto& [s, visits] : groups) {
    if (ServesHere(s)) {
      local.insert(local.end(), visits.begin(), visits.end());
    } else {
      remote[s] = visits;
    }
  }
  std::vector<rpc::ListCall<graph::Visit>> calls;
  calls.push_back([&] {
    return LocalExpand(automaton, local, budget.remaining_ms(), budget.max_step_visits());
  });
  if (!remote.empty()) {
    if (!view_) return Status::Unavailable("no cluster view to reach the other shards");
    ZIPG_RETURN_IF_ERROR(
        cluster::AddExpandCalls(*view_, pools_, automaton, remote, budget, &calls));
  }
  return rpc::Gather<graph::Visit>(fanout_, calls);
}

StatusOr<std::vector<int64_t>> ServerGraph::SourcesOnAllShards(
    bool include_dsts, const graph::TraversalBudget& budget) {
  std::vector<uint32_t> remote;
  std::vector<int32_t> local;
  auto map = view_ ? view_->Current() : nullptr;
  const uint32_t n = SplitByHost(map.get(), &local, &remote);
  std::vector<rpc::IdsCall> calls;
  calls.push_back([&] { return LocalSources(local, n, include_dsts, ListBoundsOf(budget)); });
  if (!remote.empty()) {
    if (!view_) return Status::Unavailable("no cluster view to reach the other shards");
    ZIPG_RETURN_IF_ERROR(
        cluster::AddSourcesCalls(*view_, *map, pools_, remote, include_dsts, budget, &calls));
  }
  return rpc::GatherIds(fanout_, calls);
}

// Steps and listings from other processes are bounded by this server's own limits too.
void ShardHandler::traverse_expand(rpc::Visits& _return,
                                   const std::vector<rpc::Transition>& automaton,
                                   const rpc::Visits& visits, int64_t deadline_ms,
                                   int64_t max_visits) {
  auto from = rpc::ValueOrThrow(rpc::FromThrift(visits));
  const auto a = rpc::ValueOrThrow(rpc::FromThrift(automaton, from));
  const graph::TraversalLimits& own = graph_->traversal_limits();
  const int64_t ms = std::clamp<int64_t>(deadline_ms, 0, own.deadline.count());
  const uint64_t cap = std::min<uint64_t>(static_cast<uint64_t>(std::max<int64_t>(max_visits, 0)),
                                          own.memory_bytes / sizeof(graph::Visit));
  _return = rpc::ToThrift(rpc::ValueOrThrow(graph_->LocalExpand(a, from, ms, cap)));
}

void ShardHandler::traverse_sources(std::vector<int64_t>& _return,
                                    const std::vector<int32_t>& shards, bool include_dsts,
                                    int64_t deadline_ms, int64_t max_ids, int32_t num_shards) {
  if (num_shards < 0) rpc::ThrowIfError(Status::InvalidArgument("negative shard count"));
  const graph::TraversalLimits& own = graph_->traversal_limits();
  layout::ShardReader::ListBounds bounds;
  bounds.deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(std::clamp<int64_t>(deadline_ms, 0, own.deadline.count()));
  bounds.max_ids = std::min<uint64_t>(static_cast<uint64_t>(std::max<int64_t>(max_ids, 0)),
                                      own.memory_bytes / sizeof(int64_t));
  _return = rpc::ValueOrThrow(
      graph_->LocalSources(shards, static_cast<uint32_t>(num_shards), include_dsts, bounds));
}

void ShardHandler::filter_nodes(std::vector<int64_t>& _return, const std::vector<int64_t>& ids,
                                const std::map<std::string, std::string>& properties) {
  _return = rpc::ValueOrThrow(graph_->LocalFilter(ids, rpc::FromThrift(properties)));
}

void ShardHandler::local_node_ids(std::vector<int64_t>& _return, const std::vector<int32_t>& shards,
                                  const std::map<std::string, std::string>& properties,
                                  int32_t num_shards) {
  if (num_shards < 0) rpc::ThrowIfError(Status::InvalidArgument("negative shard count"));
  _return = rpc::ValueOrThrow(
      graph_->LocalNodeIds(shards, rpc::FromThrift(properties), static_cast<uint32_t>(num_shards)));
}

void ShardHandler::local_search_node_ids(std::vector<int64_t>& _return,
                                         const std::vector<int32_t>& shards,
                                         const rpc::SearchRequest& search, int32_t num_shards) {
  if (num_shards < 0) rpc::ThrowIfError(Status::InvalidArgument("negative shard count"));
  _return = rpc::ValueOrThrow(graph_->LocalSearchNodeIds(
      shards, rpc::ValueOrThrow(rpc::FromThrift(search)), static_cast<uint32_t>(num_shards)));
}

void ShardHandler::admin_split(std::string& _return, int32_t shards) {
  if (shards <= 0) rpc::ThrowIfError(Status::InvalidArgument("the shard count must be positive"));
  _return = rpc::ValueOrThrow(graph_->PrepareSplit(static_cast<uint32_t>(shards))).dump();
}

void ShardHandler::rebuilt_version(std::string& _return, int32_t shard) {
  if (shard < 0) rpc::ThrowIfError(Status::InvalidArgument("negative shard number"));
  _return = rpc::ValueOrThrow(graph_->RebuiltVersion(static_cast<uint32_t>(shard)));
}

void ShardHandler::rebuilt_chunk(std::string& _return, int32_t shard, int64_t version,
                                 const std::string& path, int64_t offset, int32_t length) {
  if (shard < 0 || offset < 0 || length < 0) {
    rpc::ThrowIfError(Status::InvalidArgument("negative shard, offset or length"));
  }
  _return = rpc::ValueOrThrow(graph_->RebuiltChunk(static_cast<uint32_t>(shard), version, path,
                                                   static_cast<uint64_t>(offset),
                                                   static_cast<uint64_t>(length)));
}

void ShardHandler::store_chunk(std::string& _return, const std::string& path, int64_t offset,
                               int32_t length) {
  if (offset < 0 || length < 0)
    rpc::ThrowIfError(Status::InvalidArgument("negative offset or length"));
  _return = rpc::ValueOrThrow(
      graph_->StoreChunk(path, static_cast<uint64_t>(offset), static_cast<uint64_t>(length)));
}

void ShardHandler::admin_rebuild(std::string& _return, const std::vector<int32_t>& shards,
                                 const std::string& from_member) {
  std::vector<uint32_t> which(graph_->hosted());
  if (!shards.empty()) {
    which.clear();
    for (int32_t s : shards) {
      if (s < 0) rpc::ThrowIfError(Status::InvalidArgument("negative shard number"));
      which.push_back(static_cast<uint32_t>(s));
    }
  }
  nlohmann::json out = nlohmann::json::object();
  for (uint32_t s : which) {
    out[std::to_string(s)] =
        rpc::ValueOrThrow(from_member.empty() ? graph_->Rebuild(s) : graph_->Adopt(s, from_member));
  }
  _return = out.dump();
}

void ShardHandler::admin_serve(int32_t shard) {
  if (shard < 0) rpc::ThrowIfError(Status::InvalidArgument("negative shard number"));
  rpc::ThrowIfError(graph_->Serve(static_cast<uint32_t>(shard)));
}

void ShardHandler::admin_unserve(int32_t shard) {
  if (shard < 0) rpc::ThrowIfError(Status::InvalidArgument("negative shard number"));
  rpc::ThrowIfError(graph_->Unserve(static_cast<uint32_t>(shard)));
}

// --- Splits (docs/cluster-changes.md, step 4) ---

bool ServerGraph::ServesHere(uint32_t shard) const {
  const Hosting* h = Slot(shard);
  return h != nullptr && h->serving.load();
}

bool ServerGraph::ServesAll(uint32_t shard, uint32_t count) const {
  const uint32_t own = num_shards();
  if (count > own) return false;
  for (uint32_t t = shard; t < own; t += count) {
    if (!ServesHere(t)) return false;
  }
  return true;
}

Status ServerGraph::WriteLayoutFile() const {
  if (layout_dir_.empty()) return Status::OK();
  const std::string text =
      nlohmann::json({{"shards", num_shards()}, {"dir", layout_dir_}, {"hosted", hosted()}})
          .dump() +
      "\n";
  return WriteFileAtomically(updates_dir_ + "/" + kLayoutFile,
                             [&](const FileSink& sink) { return sink(text); });
}

std::string ServerGraph::SplitDir(uint32_t count) { return "split-" + std::to_string(count); }

Status ServerGraph::MakeSplitDir(uint32_t count) const {
  const std::string dir = updates_dir_ + "/" + SplitDir(count);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError("cannot create " + dir + ": " + ec.message());
  return Status::OK();
}

StatusOr<nlohmann::json> ServerGraph::SplitHosted(Hosting& h, uint32_t shard, uint32_t count) {
  ZIPG_RETURN_IF_ERROR(MakeSplitDir(count));
  const uint32_t high = shard + count / 2;
  const std::string base = updates_dir_ + "/" + SplitDir(count) + "/shard-";
  return h.live->Split(count, {shard, high},
                       {base + std::to_string(shard), base + std::to_string(high)});
}

Status ServerGraph::JoinLayout(uint32_t count) {
  std::lock_guard serialize(hosting_mu_);
  if (count == num_shards()) return Status::OK();
  if (!hosted().empty() || !layout_dir_.empty() || count % num_shards() != 0 || count > kMaxSlots) {
    return Status::FailedPrecondition("this server cannot take a layout of " +
                                      std::to_string(count) + " shards");
  }
  ZIPG_RETURN_IF_ERROR(MakeSplitDir(count));
  layout_dir_ = SplitDir(count);
  set_num_shards(count);
  return WriteLayoutFile();
}

StatusOr<nlohmann::json> ServerGraph::PrepareSplit(uint32_t count) {
  const uint32_t n = num_shards();
  if (count == n && !layout_dir_.empty()) return nlohmann::json{{"already", true}};
  if (count != 2 * n) {
    return Status::InvalidArgument("a split doubles the shard count: " + std::to_string(n) +
                                   " shards become " + std::to_string(2 * n) + ", not " +
                                   std::to_string(count));
  }
  if (count > kMaxSlots) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxSlots) + " shards");
  }
  // The builds run at nice 10, as the rebuild thread's do: reads come first.
  StatusOr<nlohmann::json> result = nlohmann::json::object();
  std::thread builder([&] {
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
    nlohmann::json out = nlohmann::json::object();
    for (uint32_t s : hosted()) {
      Hosting* h = Slot(s);
      if (!h) continue;
      std::lock_guard lock(h->rebuild_mu);
      if (auto prepared = h->live->PreparedSplit(); prepared && prepared->first == count) {
        out[std::to_string(s)] = {{"already", true}};
        continue;
      }
      auto done = SplitHosted(*h, s, count);
      if (!done.ok()) {
        result = done.status();
        return;
      }
      out[std::to_string(s)] = std::move(*done);
    }
    result = std::move(out);
  });
  builder.join();
  return result;
}

bool ServerGraph::AwaitingSwitch(uint32_t shard) const {
  std::lock_guard lock(split_mu_);
  return marked_.count(shard) > 0;
}

nlohmann::json ServerGraph::SplitStats() const {
  nlohmann::json prepared = nlohmann::json::object();
  for (uint32_t s : hosted()) {
    const Hosting* h = Slot(s);
    if (!h) continue;
    if (auto p = h->live->PreparedSplit()) prepared[std::to_string(s)] = p->first;
  }
  std::lock_guard lock(split_mu_);
  return {{"shards", num_shards()},
          {"prepared", prepared},
          {"marked", std::vector<uint32_t>(marked_.begin(), marked_.end())}};
}

void ServerGraph::NoteLayoutMark(uint32_t shard, const std::vector<engine::Update>& batch) {
  uint32_t count = 0;
  uint64_t mark = 0;
  for (const engine::Update& u : batch) {
    if (u.op == engine::UpdateOp::kLayout) {
      count = static_cast<uint32_t>(u.node);
      mark = u.id;
    }
  }
  if (count == 0 || count != 2 * num_shards()) return;  // none, or one switched already
  // The LogStore posts the mark with no write in flight: every update up to it is committed.
  // Reads at snapshots before it need not wait for this server's other marks (its switch) and
  // the new lanes' first notices.
  if (Hosting* h = Slot(shard); h != nullptr && mark != 0) {
    h->layout_mark = mark;
    (void)h->live->Commit(mark);  // a failure is retried by the next commit notice
    h->commits->Commit(mark);
  }
  std::lock_guard lock(split_mu_);
  marked_.insert(shard);
  for (uint32_t s : hosted()) {
    if (!marked_.count(s)) return;  // the marks of the other lanes come next
  }
  if (Status s = SwitchLayout(count); !s.ok()) {
    fprintf(stderr, "zipg shard: the split to %u shards failed here: %s\n", count,
            s.ToString().c_str());
  }
}

Status ServerGraph::SwitchLayout(uint32_t count) {
  std::lock_guard serialize(hosting_mu_);
  const uint32_t n = num_shards();
  if (count != 2 * n) return Status::OK();
  const auto start = std::chrono::steady_clock::now();
  struct Halves {
    uint32_t shard;
    std::unique_ptr<Hosting> low, high;
  };
  std::vector<Halves> made;
  for (uint32_t s : hosted()) {
    Hosting* parent = Slot(s);
    if (!parent) continue;
    std::lock_guard rebuilding(parent->rebuild_mu);
    auto halves = parent->live->TakeHalves();
    if (!halves[0]) {
      // Not prepared (this server restarted since, or was not asked): built now, from the
      // parent as of the mark; the LogStore's switch waits for it.
      fprintf(stderr,
              "zipg shard: shard %u was not prepared for the split to %u; building its "
              "halves now\n",
              s, count);
      // Every update up to the mark is committed (below): the build need not wait for a notice,
      // which a server left out of the new map would never get.
      parent->commits->Commit(parent->live->last_id());
      ZIPG_RETURN_IF_ERROR(SplitHosted(*parent, s, count).status());
      halves = parent->live->TakeHalves();
    }
    Halves h{s, std::make_unique<Hosting>(), std::make_unique<Hosting>()};
    for (int i = 0; i < 2; ++i) {
      Hosting* hosting = i == 0 ? h.low.get() : h.high.get();
      hosting->live = std::move(halves[i]);
      // Every update up to the mark is committed: the LogStore switched with none in flight
      // (and a server catching up found the mark after them in the feed). Reads need not wait
      // for the next write's notice.
      hosting->commits = std::make_unique<CommitTracker>(hosting->live->last_id());
      hosting->commits->Commit(std::max(hosting->live->last_id(), parent->layout_mark.load()));
      hosting->live->SetAwaitCommit([hosting](uint64_t id) {
        return hosting->commits->AwaitCommitted(
            id, std::chrono::steady_clock::now() + std::chrono::seconds(60));
      });
      hosting->serving = parent->serving.load();
    }
    made.push_back(std::move(h));
  }
  // Readers route by the count and then the slot (NodeSlot): the high halves first, then the
  // count, then the low halves; a read between sees the parent or a half, both whole.
  {
    std::lock_guard lock(kept_mu_);
    for (auto& h : made) {
      kept_[h.shard + n] = std::move(h.high);
      slots_[h.shard + n].store(kept_[h.shard + n].get(), std::memory_order_release);
    }
  }
  set_num_shards(count);
  std::vector<uint32_t> now;
  {
    std::lock_guard lock(kept_mu_);
    for (auto& h : made) {
      retired_.push_back(std::move(kept_[h.shard]));
      kept_[h.shard] = std::move(h.low);
      slots_[h.shard].store(kept_[h.shard].get(), std::memory_order_release);
      now.push_back(h.shard);
      now.push_back(h.shard + n);
    }
  }
  std::sort(now.begin(), now.end());
  std::atomic_store(&hosted_, std::make_shared<const std::vector<uint32_t>>(now));
  layout_dir_ = SplitDir(count);
  marked_.clear();
  Status written = WriteLayoutFile();
  fprintf(
      stderr, "zipg shard: switched to %u shards in %.1f ms\n", count,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  if (on_hosted_) on_hosted_();
  return written;
}

}  // namespace zipg::shard
