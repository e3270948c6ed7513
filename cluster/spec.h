// ClusterSpec: one JSON file that describes a whole deployment (docs/deploy.md): the hosts and
// their addresses, which processes each runs (a shard server with its shards, an aggregator, the
// LogStore, an etcd member), the replication factor, the store location, ports and TLS files.
// `zipg node start --spec F --host H` runs what it gives host H; `zipg deploy plan` writes one.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace zipg::cluster {

struct SpecTls {
  // Paths on the hosts; in cert and key, "{host}" and "{address}" are replaced (ExpandHost).
  std::string ca, cert, key;
  // Accepted from specs written before the update channel moved from ZeroMQ's CURVE to these
  // TLS files (2026-11-28), kept as written, and not used.
  std::string curve_key;
  bool enabled() const { return !ca.empty(); }
};

// How `zipg deploy` reaches the hosts, kept once a deploy command was given it and reached every
// host with it (docs/deploy.md, "Transport"). Empty: not kept (the command's defaults).
struct SpecTransport {
  std::string exec;  // the command prefix, {host} and {address} replaced
  std::string zipg;  // zipg on the hosts
};

struct SpecEtcdMember {
  std::string host;  // a host of the spec
  int client_port = 2379;
  int peer_port = 2380;
  // Added to a running etcd through its member API (`zipg deploy add-host`): started with
  // --initial-cluster-state existing. Without it, the member was one of those that formed the
  // cluster. etcd reads either only while its data directory is empty.
  bool join = false;
};

struct SpecHost {
  std::string name;
  std::string address;  // IPv4 address the host's servers bind and are reached at
  std::string store;    // overrides the spec's store on this host (empty: the spec's)
  std::optional<std::vector<uint32_t>> shards;  // a shard server with these shards
  int shard_port = 0;
  int update_port = 0;
  std::optional<int> aggregator_port;  // an aggregator
  std::optional<int> logstore_port;    // a LogStore
  std::optional<int> ship_port;        // its log shipping port (required with two LogStores)
  // Prometheus metrics of each process (`zipg serve --metrics-port`; docs/operations.md) and the
  // aggregator's HTTP/JSON API (`--http-port`): none when absent.
  std::optional<int> shard_metrics_port;       // shard_server.metrics_port
  std::optional<int> aggregator_metrics_port;  // aggregator.metrics_port
  std::optional<int> http_port;                // aggregator.http_port
  std::optional<int> logstore_metrics_port;    // logstore.metrics_port

  // Every port the host's servers listen on (not its etcd member's).
  std::vector<int> Ports() const;
};

// A copy of a shard moving from one host's shard server to another's (`zipg deploy move`,
// docs/cluster-changes.md, step 2): while it is recorded, both hosts list the shard.
struct SpecMove {
  uint32_t shard = 0;
  std::string from, to;  // host names
  friend bool operator==(const SpecMove&, const SpecMove&) = default;
};

struct ClusterSpec {
  std::string cluster = "zipg";  // etcd key prefix /zipg/<cluster>/
  std::string store;             // the store directory on every host
  uint32_t shards = 0;           // shards in the store (checked against its manifest at start)
  uint32_t replicas = 1;
  int lease_ttl = 5;
  SpecTls tls;
  SpecTransport transport;
  std::vector<SpecEtcdMember> etcd_members;  // etcd members that `zipg node start` runs
  std::vector<std::string> etcd_endpoints;   // an existing etcd (when there are no members)
  std::vector<SpecHost> hosts;
  std::optional<SpecMove> moving;  // a move under way (its shard has replicas + 1 copies)

  // Parses and validates; errors name the file, and the line and column (JSON syntax) or the
  // field (e.g. "hosts[1].shard_server.port").
  static StatusOr<ClusterSpec> Parse(const std::string& text, const std::string& path);
  static StatusOr<ClusterSpec> Load(const std::string& path);
  nlohmann::json ToJson() const;

  const SpecHost* Host(const std::string& name) const;
  // Every etcd client endpoint, comma-separated (https when TLS is on).
  std::string EtcdEndpoints() const;
  std::string StoreOf(const SpecHost& host) const;
  // The TLS files of a host ({host} replaced).
  SpecTls TlsOf(const SpecHost& host) const;
  // The member names `zipg node start` gives a host's processes.
  static std::string ShardServerName(const SpecHost& h) { return "shard-" + h.name; }
  static std::string AggregatorName(const SpecHost& h) { return "aggregator-" + h.name; }
  // "logstore" with one LogStore; with two (they elect their leader, docs/logstore-ha.md),
  // "logstore-HOST".
  std::string LogStoreName(const SpecHost& h) const {
    return LogStores() == 1 ? "logstore" : "logstore-" + h.name;
  }
  int LogStores() const {
    int n = 0;
    for (const auto& h : hosts) n += h.logstore_port.has_value();
    return n;
  }
  static std::string EtcdName(const std::string& host) { return "etcd-" + host; }
};

// `zipg deploy plan`: one shard server per host with the shards cluster/placement.h gives it, an
// aggregator on every host, the LogStore on the first, etcd members on the first
// min(etcd_members, hosts) hosts, ports from base_port (aggregator base, shard base+1, updates
// base+2, LogStore base+3, etcd client base+4, peer base+5, log shipping base+6; with metrics,
// the metrics of the shard server base+7, of the aggregator base+8, of the LogStore base+9, and
// the aggregator's HTTP API base+10).
struct PlanOptions {
  std::vector<std::string> hosts;
  std::vector<std::string> addresses;  // default: the host names (which must then be addresses)
  uint32_t replicas = 1;
  uint32_t shards = 0;
  std::string store;
  uint32_t etcd_members = 3;
  uint32_t logstores = 1;  // 2: a second LogStore on the second host (needs two hosts)
  int base_port = 7000;
  bool metrics = false;  // every process a metrics_port, every aggregator an http_port
  std::string tls_dir;   // non-empty: TLS on, files from `zipg deploy certs --out tls_dir`
  std::string cluster = "zipg";
};
StatusOr<ClusterSpec> PlanCluster(const PlanOptions& options);

// `text` with "{host}" and "{address}" replaced by the host's name and address.
std::string ExpandHost(std::string text, const SpecHost& host);

}  // namespace zipg::cluster
