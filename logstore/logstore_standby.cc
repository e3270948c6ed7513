// LogStore: the leader's side and the standby's side of log shipping: catching a standby up,
// reseeding it, and applying what a leader ships (docs/logstore-ha.md).

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

namespace zipg::logstore {

namespace fs = std::filesystem;
using engine::Update;
using internal::kStateName;
using internal::Seconds;
using internal::ShipMismatch;
using nlohmann::json;

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
  ZIPG_ASSIGN_OR_RETURN(ShipReply where,
                        ship_->Send(ShipKind::kProbe, epoch_, 0, 0, {}, options_.ship_timeout_ms));
  if (where.code != ShipCode::kOk) {
    return Status::Unavailable("the standby answered the probe with code " +
                               std::to_string(static_cast<int>(where.code)) + ": " + where.message);
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
      if (!records.empty())
        ZIPG_RETURN_IF_ERROR(ship(ShipKind::kAppend, generation, next, records));
      if (records.size() < kChunk) break;
    }
    ZIPG_RETURN_IF_ERROR(
        ship(ShipKind::kFreeze, generation + 1, end != ends_.end() ? end->second : next, {}));
    // A split that ended that generation (its layout is in STATE, not in the log).
    for (const auto& [count, z] : SplitsEnding(g)) {
      ZIPG_ASSIGN_OR_RETURN(ShipReply r, ship_->Send(ShipKind::kLayout, epoch_, count, z, {},
                                                     options_.ship_timeout_ms));
      if (r.code != ShipCode::kOk) {
        return Status::Unavailable("catching up: the standby refused the split to " +
                                   std::to_string(count) + " shards: " + r.message);
      }
    }
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
    return Status::Internal("the standby is at record " + std::to_string(next) + " of generation " +
                            std::to_string(generation) + "; this log has " +
                            std::to_string(records_in_generation_));
  }
  degraded_ = false;  // the next group is shipped (groups are held back until `pause` ends)
  {
    std::lock_guard lock(stats_mu_);
    degraded_reason_.clear();
    ++resyncs_;
  }
  std::cerr << "LogStore: the standby caught up at generation " << generation << " record " << next
            << "; in sync again\n";
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

  auto send = [&](ShipKind kind, uint64_t first,
                  std::vector<std::string_view> records) -> StatusOr<ShipReply> {
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
            << " bytes, in " << Seconds(start) << " s; it is at generation " << installed.generation
            << " record " << installed.next_index << "\n";
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
  // A re-seed brings generations this standby never applied: their histories are unknown, so
  // snapshots before it are given up here (histories_ of the old directory go).
  {
    std::unique_lock data(data_mu_);
    histories_.clear();
  }
  floor_ = std::numeric_limits<uint64_t>::max();  // until the install: then its applied id
  Status reloaded = Reload(/*post=*/false, std::nullopt, [&]() -> Status {
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
  floor_ = applied_id_.load();
  return reloaded;
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
  if (q.kind == ShipKind::kLayout) {
    std::lock_guard compacting(compact_mu_);
    if (q.generation > shard::UpdateSender::kMaxLanes) {
      return failed(Status::InvalidArgument("a layout of too many shards"));
    }
    if (Status s = ApplyLayout(static_cast<uint32_t>(q.generation), q.first_index); !s.ok()) {
      return failed(s);
    }
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
  if (q.generation != static_cast<uint64_t>(generation_) ||
      q.first_index != records_in_generation_) {
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
    for (size_t i = 0; i < records.size(); ++i) {
      const LogRecord& r = records[i];
      LearnNames(r);  // what the leader admitted
      if (auto applied = ApplyLocal(r, generation_, UpdateId(generation_, q.first_index + i));
          !applied.ok()) {
        return failed(applied.status());
      }
    }
    if (!records.empty()) NoteApplied(UpdateId(generation_, q.first_index + records.size() - 1));
  }
  if (Status flushed = FlushDeletes(); !flushed.ok()) return failed(flushed);
  records_in_generation_ += records.size();
  writes_ += records.size();
  ++applied_groups_;
  return Position(ShipCode::kOk);
}

}  // namespace zipg::logstore
