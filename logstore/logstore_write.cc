// LogStore: the write path: each write checked, encoded, logged by a group commit (one WAL
// append and sync for a group of writers, shipped to the standby) and applied to the memtable
// (docs/writes.md, "Group commit"; docs/logstore-ha.md).

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
#include <unordered_set>

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

using engine::Update;
using engine::UpdateOp;
using internal::ShipMismatch;

namespace {
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

}  // namespace

StatusOr<bool> LogStore::ApplyLocal(
    const LogRecord& record, int64_t generation, uint64_t id,
    const std::vector<std::pair<const engine::UpdateIndex*, bool>>* stored) {
  Update u = record.ToUpdate(0);
  u.id = id;
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
      if (id != 0) {
        frozen_->overlay_history.Record(
            u.node, id,
            it == frozen_->overlay.end() ? nullptr
                                         : std::make_shared<const engine::NodeUpdates>(it->second));
        frozen_->overlay_log.push_back(u);
      }
      engine::UpdateIndex::ApplyTo(u, true, &frozen_->overlay[u.node]);
      found = true;
    }
  }
  if (memtable_->Remove(u)) found = true;
  if (record.is_put()) memtable_->Put(record, id);
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
  if (writes_suspended_) {
    return "this LogStore leader cannot renew its term in etcd now; writes resume when it can, "
           "or its standby takes over";
  }
  return "";
}

StatusOr<bool> LogStore::Write(const LogRecord& record) {
  if (std::string why = Refusal(); !why.empty()) return Status::Unavailable(why);
  ZIPG_ASSIGN_OR_RETURN(std::string payload, Encode(record));
  std::vector<Commit> commits;
  commits.emplace_back(&record, std::move(payload), std::make_shared<Waiter>());
  CommitAll(&commits);
  if (!commits[0].status.ok()) return commits[0].status;
  return commits[0].found;
}

void LogStore::CommitAll(std::vector<Commit>* commits) {
  if (commits->empty()) return;
  Waiter* const self = commits->front().waiter.get();
  std::unique_lock lock(commit_mu_);
  self->pending = commits->size();
  for (Commit& c : *commits) commits_.push_back(&c);
  // A group starts when the previous one has been logged and at most one is still waiting for
  // its shards; writers arriving meanwhile queue up and make the next group larger. This
  // thread's writes are contiguous in the queue and a group takes the whole queue, so they all
  // end up in one group: led by this thread, or done when it wakes.
  while (self->pending > 0) {
    if (!commits_.empty() && commits_.front()->waiter.get() == self && !logging_ && !freezing_ &&
        next_ticket_ - applied_ticket_ < kGroupsInFlight) {
      LeadGroup(lock, self);
      return;
    }
    self->cv.wait(lock);
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
  std::shared_ptr<Waiter> next_leader;
  if (!commits_.empty()) next_leader = commits_.front()->waiter;
  lock.unlock();
  if (next_leader) next_leader->cv.notify_one();
  order_cv_.notify_all();

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
    // The commit point (docs/consistency.md): applied here, and on every replica once its lane
    // confirmed; the lanes tell the replicas, whose reads of these nodes wait for it.
    sink_->SetApplied(fanout.last_id);
  } else {
    for (Commit* c : group) c->status = logged;
  }
  const auto t3 = std::chrono::steady_clock::now();

  // The waiters to wake, woken once commit_mu_ is released. Counted under it: a waiter whose
  // writes are done destroys its Commits.
  std::vector<std::shared_ptr<Waiter>> wake;
  lock.lock();
  ++applied_ticket_;
  for (Commit* c : group) {
    if (--c->waiter->pending == 0 && c->waiter.get() != self) wake.push_back(c->waiter);
  }
  if (!commits_.empty()) wake.push_back(commits_.front()->waiter);  // may now start a group
  auto us = [](auto d) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
  };
  ++commit_groups_;
  commit_log_us_ += us(t1 - t0);
  commit_fanout_us_ += us(t2 - t1);
  commit_apply_us_ += us(t3 - t2);
  lock.unlock();
  for (const auto& w : wake) w->cv.notify_one();
  order_cv_.notify_all();
}

Status LogStore::LogGroup(const std::vector<Commit*>& group, Wal* wal, int64_t generation,
                          GroupFanout* fanout) {
  std::vector<std::string_view> views;
  views.reserve(group.size());
  for (const Commit* c : group) views.push_back(c->payload);
  // The standby logs the group while this LogStore does (docs/logstore-ha.md, "Log shipping").
  const uint64_t first = records_in_generation_;
  // Written to the standby on this thread; its reply is read once the group is in this log.
  std::optional<ShipSender::Pending> shipping;
  if (ship_ && !degraded_) {
    shipping =
        ship_->Begin(ShipKind::kAppend, epoch_, generation, first, views, options_.ship_timeout_ms);
  }
  // A group logged here while another leader has taken over is never posted: the standby fences
  // it (below), the shards fence it, and in a cluster the in-sync set cannot be changed by a
  // leader whose key is gone.
  if (std::string why = Refusal(); !why.empty()) {
    if (shipping) (void)ship_->Finish(&*shipping);
    return Status::Unavailable(why);
  }
  // Provisional pointers (docs/write-pipeline.md): posted now, so that the shards' round trip
  // overlaps the append's fdatasync and the standby's; the shards hold them as uncommitted
  // until the commit notice, which follows the apply below (the log is durable by then).
  PostGroup(group, generation, first, fanout);
  Status logged = wal->AppendAll(views.data(), views.size());
  if (shipping) {
    const StatusOr<ShipReply> reply = ship_->Finish(&*shipping);
    const std::string mismatch =
        ShipMismatch(reply, static_cast<uint64_t>(generation), first + group.size());
    if (mismatch.empty()) {
      ++shipped_groups_;
    } else if (reply.ok() && reply->code == ShipCode::kFenced) {
      StopWrites("fenced: the standby has a newer leader (epoch " + std::to_string(reply->epoch) +
                 "); write to it");
      return Status::Unavailable(Refusal());
    } else if (Status degraded = Degrade(mismatch); !degraded.ok() && logged.ok()) {
      logged = degraded;
    }
  }
  // Had this failed after the standby logged the group, the standby holds records this log does
  // not: its outcome is unknown to the writers (they fail), as for any failed write.
  if (!logged.ok()) {
    // The shards hold this group's pointers, uncommitted: no later group may follow them from
    // this LogStore. The next sender (a new leader, or this one started again) makes the
    // shards undo those it does not hold.
    StopWrites("a commit group's log append failed after its pointers were posted: " +
               logged.ToString());
    return logged;
  }
  return Status::OK();
}

void LogStore::PostGroup(const std::vector<Commit*>& group, int64_t generation, uint64_t first,
                         GroupFanout* fanout) {
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
  fanout->last_id = UpdateId(generation, first + group.size() - 1);
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
}

void LogStore::LookupStored(const std::vector<Commit*>& group, GroupFanout* fanout) {
  fanout->stored.assign(group.size(), {});
  // The parts to ask, taken under the lock; log shards stay put while they are read (ShardsIn).
  std::vector<std::vector<std::pair<const engine::UpdateIndex*, const layout::Shard*>>> parts(
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
    const uint64_t first_id = fanout.last_id - (group.size() - 1);
    for (size_t i = 0; i < group.size(); ++i) {
      Commit* c = group[i];
      StatusOr<bool> found = ApplyLocal(*c->record, generation, first_id + i,
                                        fanout.stored.empty() ? nullptr : &fanout.stored[i]);
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
    NoteApplied(fanout.last_id);
  }
  // The group's deletes on log shards, one record per shard touched, before any write of it is
  // acknowledged. Had this failed, the writes are still logged: their outcome is unknown.
  if (Status flushed = FlushDeletes(); !flushed.ok()) {
    for (Commit* c : group) c->status = flushed;
  }
  writes_ += group.size();
  if (full) WakeCompactor();
}

bool LogStore::LiveHere(const LogRecord& record) const {
  std::shared_lock data(data_mu_);
  return memtable_->FoundLive(record.ToUpdate(0), nullptr);
}

StatusOr<bool> LogStore::NodeExists(int64_t id) {
  if (LiveHere(LogRecord{UpdateOp::kPutNode, id, 0, 0, 0, {}})) return true;
  ZIPG_ASSIGN_OR_RETURN(auto node, reader_->ObjGet(id));
  return node.has_value();
}

Status LogStore::ObjAdd(int64_t id, const Properties& properties) {
  if (id < 0) return Status::InvalidArgument("id must be >= 0");
  StripeLock stripe(StripeOf(id), /*exclusive=*/true);
  ZIPG_ASSIGN_OR_RETURN(bool exists, NodeExists(id));
  if (exists) return Status::AlreadyExists("node " + std::to_string(id) + " already exists");
  LogRecord r{UpdateOp::kPutNode, id, 0, 0, 0, NormalizeProperties(properties)};
  return Write(r).status();
}

Status LogStore::ObjUpdate(int64_t id, const Properties& properties) {
  if (id < 0) return Status::InvalidArgument("id must be >= 0");
  StripeLock stripe(StripeOf(id), /*exclusive=*/true);
  ZIPG_ASSIGN_OR_RETURN(bool exists, NodeExists(id));
  if (!exists) return Status::NotFound("node " + std::to_string(id) + " does not exist");
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
  LogRecord r{
      UpdateOp::kPutEdge, e.src, e.type, e.dst, e.timestamp, NormalizeProperties(e.properties)};
  if (!LiveHere(r)) {
    ZIPG_ASSIGN_OR_RETURN(
        auto live, reader_->AssocGet(e.src, e.type, {e.dst}, std::numeric_limits<int64_t>::min(),
                                     std::numeric_limits<int64_t>::max()));
    if (live.empty()) {
      return Status::NotFound("edge (" + std::to_string(e.src) + ", " + std::to_string(e.type) +
                              ", " + std::to_string(e.dst) + ") does not exist");
    }
  }
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
  auto node_write = [](zipg::Write::Op op) {
    return op == zipg::Write::Op::kObjAdd || op == zipg::Write::Op::kObjUpdate;
  };
  std::vector<StatusOr<bool>> out;
  out.reserve(writes.size());
  for (size_t i = 0; i < writes.size();) {
    if (node_write(writes[i].op)) {
      size_t end = i;
      while (end < writes.size() && node_write(writes[end].op)) ++end;
      if (end - i == 1) {
        out.push_back(ApplyWrite(*this, writes[i++]));
        continue;
      }
      for (auto& outcome : CommitNodeWrites(std::span(writes).subspan(i, end - i))) {
        out.push_back(std::move(outcome));
      }
      i = end;
      continue;
    }
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

std::vector<StatusOr<bool>> LogStore::CommitNodeWrites(std::span<const zipg::Write> writes) {
  if (std::string why = Refusal(); !why.empty()) {
    return std::vector<StatusOr<bool>>(writes.size(), Status::Unavailable(why));
  }
  std::vector<StatusOr<bool>> out(writes.size(), StatusOr<bool>(false));
  // Every stripe exclusive, in increasing order: no lock cycle with batches (which take theirs
  // shared in increasing order) or single writes (which hold one).
  std::vector<size_t> stripes;
  for (const zipg::Write& w : writes) {
    if (w.id >= 0) stripes.push_back(static_cast<uint64_t>(w.id) % kStripes);
  }
  std::sort(stripes.begin(), stripes.end());
  stripes.erase(std::unique(stripes.begin(), stripes.end()), stripes.end());
  std::deque<StripeLock> held;
  for (size_t s : stripes) held.emplace_back(stripes_[s], /*exclusive=*/true);

  std::vector<LogRecord> valid;
  std::vector<size_t> index;
  std::vector<std::string> payloads;
  valid.reserve(writes.size());
  std::unordered_set<int64_t> written;  // live once the run's earlier writes are committed
  for (size_t i = 0; i < writes.size(); ++i) {
    const zipg::Write& w = writes[i];
    if (w.id < 0) {
      out[i] = Status::InvalidArgument("id must be >= 0");
      continue;
    }
    bool live = written.count(w.id) > 0;
    if (!live) {
      auto exists = NodeExists(w.id);
      if (!exists.ok()) {
        out[i] = exists.status();
        continue;
      }
      live = *exists;
    }
    if (w.op == zipg::Write::Op::kObjAdd && live) {
      out[i] = Status::AlreadyExists("node " + std::to_string(w.id) + " already exists");
      continue;
    }
    if (w.op == zipg::Write::Op::kObjUpdate && !live) {
      out[i] = Status::NotFound("node " + std::to_string(w.id) + " does not exist");
      continue;
    }
    LogRecord r{UpdateOp::kPutNode, w.id, 0, 0, 0, NormalizeProperties(w.properties)};
    StatusOr<std::string> payload = Encode(r);
    if (!payload.ok()) {
      out[i] = payload.status();
      continue;
    }
    written.insert(w.id);
    valid.push_back(std::move(r));
    index.push_back(i);
    payloads.push_back(std::move(*payload));
  }
  CommitRecords(valid, &payloads, index, /*report_found=*/false, &out);
  return out;
}

void LogStore::CommitRecords(const std::vector<LogRecord>& records,
                             std::vector<std::string>* payloads, const std::vector<size_t>& index,
                             bool report_found, std::vector<StatusOr<bool>>* out) {
  if (records.empty()) return;
  auto waiter = std::make_shared<Waiter>();
  std::vector<Commit> commits;
  commits.reserve(records.size());
  for (size_t k = 0; k < records.size(); ++k) {
    commits.emplace_back(&records[k], std::move((*payloads)[k]), waiter);
  }
  CommitAll(&commits);
  for (size_t k = 0; k < commits.size(); ++k) {
    if (!commits[k].status.ok()) {
      (*out)[index[k]] = commits[k].status;
    } else if (report_found) {
      (*out)[index[k]] = commits[k].found;
    }
  }
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
  CommitRecords(valid, &payloads, index, /*report_found=*/true, &out);
  return out;
}

}  // namespace zipg::logstore
