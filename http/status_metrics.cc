#include "http/status_metrics.h"

#include <string>

namespace zipg::http {
namespace {

using nlohmann::json;

// The number at `path` (keys, in order) in j, if there is one.
const json* At(const json& j, std::initializer_list<const char*> path) {
  const json* at = &j;
  for (const char* key : path) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

double Number(const json* j) {
  if (j == nullptr) return 0;
  if (j->is_number()) return j->get<double>();
  if (j->is_boolean()) return j->get<bool>() ? 1 : 0;
  return 0;
}

void Counter(metrics::Samples* out, const json& j, std::initializer_list<const char*> path,
             const char* name, const char* help, double scale = 1) {
  if (const json* v = At(j, path); v && (v->is_number() || v->is_boolean())) {
    out->Counter(name, help, Number(v) * scale);
  }
}

void Gauge(metrics::Samples* out, const json& j, std::initializer_list<const char*> path,
           const char* name, const char* help) {
  if (const json* v = At(j, path); v && (v->is_number() || v->is_boolean())) {
    out->Gauge(name, help, Number(v));
  }
}

void LogStoreMetrics(const json& l, metrics::Samples* out) {
  Counter(out, l, {"writes"}, "zipg_logstore_writes_total", "Writes the LogStore applied.");
  Counter(out, l, {"commit", "groups"}, "zipg_logstore_commit_groups_total",
          "Commit groups (writes logged, shipped and applied together).");
  for (auto [stage, key] : {std::pair{"log", "log_us"}, std::pair{"fanout", "fanout_us"},
                            std::pair{"apply", "apply_us"}}) {
    if (const json* v = At(l, {"commit", key}); v && v->is_number()) {
      out->Counter("zipg_logstore_commit_stage_seconds_total",
                   "Time commit groups spent per stage: log (WAL and standby), fanout (update "
                   "pointers to the replicas), apply (memtable).",
                   Number(v) / 1e6, {{"stage", stage}});
    }
  }
  Counter(out, l, {"wal", "records"}, "zipg_logstore_wal_records_total", "WAL records appended.");
  Counter(out, l, {"wal", "syncs"}, "zipg_logstore_wal_syncs_total", "WAL fdatasync calls.");
  Counter(out, l, {"wal", "bytes"}, "zipg_logstore_wal_bytes_total", "WAL bytes appended.");
  Gauge(out, l, {"memtable", "bytes"}, "zipg_logstore_memtable_bytes", "Bytes of the memtable.");
  if (const json* m = At(l, {"memtable"})) {
    out->Gauge("zipg_logstore_memtable_entries", "Node and edge entries of the memtable.",
               Number(At(*m, {"nodes"})) + Number(At(*m, {"edges"})));
  }
  if (const json* shards = At(l, {"log_shards"}); shards && shards->is_array()) {
    double bytes = 0;
    for (const auto& s : *shards) bytes += Number(At(s, {"bytes"}));
    out->Gauge("zipg_logstore_log_shards", "Compacted log shards.",
               static_cast<double>(shards->size()));
    out->Gauge("zipg_logstore_log_shard_bytes", "Bytes of the compacted log shards.", bytes);
  }
  Counter(out, l, {"compactions"}, "zipg_logstore_compactions_total", "Memtable compactions.");
  Counter(out, l, {"commit_notices"}, "zipg_logstore_commit_notices_total",
          "Commit notices sent to replicas (a committed id no batch carried).");
  Counter(out, l, {"merges"}, "zipg_logstore_merges_total", "Merges of log shards.");
  Counter(out, l, {"forced_merges"}, "zipg_logstore_forced_merges_total",
          "Merges forced by the log shard limit.");
  Gauge(out, l, {"epoch"}, "zipg_logstore_epoch", "The leader epoch (fencing).");
  Gauge(out, l, {"snapshots", "applied"}, "zipg_logstore_applied_id",
        "Id of the last update applied (generation << 32 | record).");
  Gauge(out, l, {"snapshots", "history_bytes"}, "zipg_logstore_snapshot_history_bytes",
        "Bytes kept for reads at snapshots.");
  if (const json* reads = At(l, {"fragment_reads"}); reads && reads->is_object()) {
    double n = 0;
    for (const auto& [g, count] : reads->items()) n += Number(&count);
    out->Counter("zipg_logstore_fragment_reads_total",
                 "Fragments read from compacted log shards for shard servers' reads.", n);
  }
  Counter(out, l, {"edge_cache", "hits"}, "zipg_edge_cache_hits_total", "Edge cache hits.");
  Counter(out, l, {"edge_cache", "misses"}, "zipg_edge_cache_misses_total", "Edge cache misses.");
  Gauge(out, l, {"edge_cache", "bytes"}, "zipg_edge_cache_bytes", "Bytes of the edge cache.");
  if (const json* standby = At(l, {"standby"}); standby && standby->is_object()) {
    if (const json* sync = At(*standby, {"sync"}); sync && sync->is_string()) {
      out->Gauge("zipg_logstore_standby_in_sync",
                 "1 while the standby acknowledges every commit group, 0 if degraded.",
                 sync->get<std::string>() == "in_sync" ? 1 : 0);
    }
    Counter(out, *standby, {"shipped_groups"}, "zipg_logstore_standby_shipped_groups_total",
            "Commit groups shipped to the standby.");
    Counter(out, *standby, {"reseeded"}, "zipg_logstore_standby_reseeds_total",
            "Times the standby was re-seeded from the leader.");
  }
}

void ShardMetrics(const json& s, metrics::Samples* out) {
  Gauge(out, s, {"serving"}, "zipg_shard_serving", "1 once caught up with the LogStore.");
  Counter(out, s, {"update_batches"}, "zipg_shard_update_batches_total",
          "Update pointer batches received from the LogStore.");
  Counter(out, s, {"refused_pushes"}, "zipg_shard_refused_pushes_total",
          "Update pushes refused (fenced or out of order).");
  Counter(out, s, {"catch_up", "reads"}, "zipg_shard_catch_up_reads_total",
          "Reads of the LogStore's feed while catching up.");
  Counter(out, s, {"catch_up", "applied"}, "zipg_shard_catch_up_updates_total",
          "Updates applied while catching up.");
  if (const json* commits = At(s, {"commits"}); commits && commits->is_object()) {
    for (const auto& [shard, c] : commits->items()) {
      out->Gauge("zipg_shard_committed_id",
                 "Id of the last update committed per hosted shard (generation << 32 | record); "
                 "the LogStore's zipg_logstore_applied_id minus this is the replica's lag.",
                 Number(At(c, {"committed"})), {{"shard", shard}});
      out->Counter("zipg_shard_commit_rereads_total",
                   "Linearizable reads that found their node's update uncommitted and read again.",
                   Number(At(c, {"rereads"})), {{"shard", shard}});
      out->Counter("zipg_shard_read_disagreements_total",
                   "Linearizable reads refused: the committed state named a version the LogStore "
                   "did not hold (this replica or the LogStore asked is behind the other).",
                   Number(At(c, {"disagreements"})), {{"shard", shard}});
    }
  }
  if (const json* rebuilds = At(s, {"rebuilds"}); rebuilds && rebuilds->is_object()) {
    for (const auto& [shard, r] : rebuilds->items()) {
      out->Counter("zipg_shard_rebuilds_total", "Rebuilds of a hosted base shard.",
                   Number(At(r, {"rebuilds"})), {{"shard", shard}});
      out->Gauge("zipg_shard_delta_bytes", "Bytes of a hosted shard's writes since its version.",
                 Number(At(r, {"delta_bytes"})), {{"shard", shard}});
      out->Gauge("zipg_shard_version", "Version of a hosted base shard.",
                 Number(At(r, {"version"})), {{"shard", shard}});
    }
  }
}

}  // namespace

void StatusMetrics(const json& status, metrics::Samples* out) {
  if (!status.is_object()) return;
  const std::string role = status.value("role", status.contains("servers") ? "aggregator" : "");
  out->Gauge("zipg_build_info", "1, labelled with the server's role and name.", 1,
             {{"role", role}, {"name", status.value("name", status.value("aggregator", ""))}});
  Gauge(out, status, {"memory", "rss_bytes"}, "zipg_process_resident_memory_bytes",
        "Resident memory of the process.");
  Gauge(out, status, {"memory", "file_bytes"}, "zipg_store_mapped_bytes",
        "Resident bytes of mapped files (the store's files) of the process.");
  Gauge(out, status, {"memory", "accounted_bytes"}, "zipg_data_accounted_bytes",
        "Bytes the process's own accounting gives its data.");
  if (const json* l = At(status, {"logstore"}); l && l->is_object()) {
    Gauge(out, status, {"leader"}, "zipg_logstore_leader", "1 on the LogStore leader.");
    LogStoreMetrics(*l, out);
  }
  if (role == "shard") ShardMetrics(status, out);
  if (role == "aggregator") {
    Gauge(out, status, {"healthy"}, "zipg_cluster_healthy",
          "1 if every shard is served and a LogStore leads, as this aggregator sees it.");
    if (const json* u = At(status, {"unserved_shards"}); u && u->is_array()) {
      out->Gauge("zipg_cluster_unserved_shards", "Shards no serving replica holds.",
                 static_cast<double>(u->size()));
    }
    Counter(out, status, {"write_batches", "batches"}, "zipg_aggregator_write_batches_total",
            "write_batch calls the aggregator sent for concurrent writes.");
    Counter(out, status, {"write_batches", "writes"}, "zipg_aggregator_batched_writes_total",
            "Writes sent in those write_batch calls.");
  }
}

}  // namespace zipg::http
