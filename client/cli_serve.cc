// zipg serve shard|aggregator: run one server process in the foreground until SIGTERM/SIGINT.
// `zipg local start` runs these in the background; they are also how a real multi-machine
// cluster is started (one shard server per machine or per group of shards, one aggregator per
// machine, all pointed at the same etcd).

#include <signal.h>
#include <thrift/transport/TSSLSocket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "aggregator/aggregator.h"
#include "client/cli.h"
#include "cluster/membership.h"
#include "http/api.h"
#include "http/server.h"
#include "http/status_metrics.h"
#include "logstore/ha.h"
#include "logstore/logstore.h"
#include "logstore/server.h"
#include "rpc/framed_transport.h"
#include "rpc/remote_graph.h"
#include "rpc/server.h"
#include "rpc/tls.h"
#include "shard/catch_up.h"
#include "shard/fetch.h"
#include "shard/server.h"
#include "shard/update_channel.h"
#include "util/call_deadline.h"
#include "util/memory.h"
#include "util/metrics.h"

namespace zipg::cli {
namespace {

const char kUsage[] =
    "usage:\n"
    "  zipg serve shard --store DIR --shards LIST --etcd HOST:PORT [options]\n"
    "      serve the listed shards (e.g. 0,2,4) of a compressed store; `--shards none`: none\n"
    "      until told to (admin_serve: zipg admin move, zipg deploy add-host / rebalance)\n"
    "  zipg serve aggregator --etcd HOST:PORT [options]\n"
    "      the client-facing service; routes by the shard map in etcd\n"
    "  zipg serve logstore --store DIR --etcd HOST:PORT [options]\n"
    "      the cluster's LogStore (writes; or its standby with --standby); its data lives in\n"
    "      DIR/logstore\n"
    "options:\n"
    "  --host H        address to bind (default 127.0.0.1)\n"
    "  --port P        port to bind (default 0: any free port, printed at start)\n"
    "  --advertise HOST:PORT  the Thrift endpoint registered in etcd, where the other servers\n"
    "                  and clients reach this one (default: the bound host and port), e.g. a\n"
    "                  proxy or a NAT address in front of it\n"
    "  --cluster NAME  etcd key prefix /zipg/NAME/ (default zipg)\n"
    "  --name NAME     member name (default <role>-<host>-<port>)\n"
    "  --lease-ttl S   seconds before a silent server leaves the shard map (default 5)\n"
    "  --call-timeout-ms MS  timeout of calls to other servers (default 10000)\n"
    "  --metrics-port P  serve Prometheus metrics on http(s)://HOST:P/metrics (0: any free port;\n"
    "                  printed as `metrics URL`; docs/operations.md). Without it nothing is "
    "recorded\n"
    "  --http-port P   aggregator: serve the HTTP/JSON API and the web explorer on P (0: any free\n"
    "                  port; printed as `http URL`)\n"
    "  --http-read-timeout-ms MS  HTTP: a client sending its request slower is cut off (10000)\n"
    "  --http-max-connections N   HTTP: connections served at once; more wait (default 64)\n"
    "  --no-verify     shard: skip checksum verification of the store files\n"
    "  --fetch-rate SIZE  shard: a shard whose files the store lacks (and the MANIFEST, in an\n"
    "                  empty or new store directory) is fetched from a serving replica first,\n"
    "                  at most SIZE bytes a second (default 0: unlimited; "
    "docs/cluster-changes.md)\n"
    "  --no-fetch      shard: a shard whose files are missing is an error instead\n"
    "  --update-port P shard: port of the update channel (default 0: any free port)\n"
    "  --advertise-update HOST:PORT  shard: the update endpoint registered in etcd, where the\n"
    "                  LogStore sends updates (default: the bound host and --update-port)\n"
    "  --rebuild-delta SIZE  shard: rebuild a shard (fold its writes into new compressed\n"
    "                  files) when its delta holds SIZE in memory (default 64M; 0: only on zipg\n"
    "                  admin rebuild)\n"
    "  --rebuild-memory SIZE  shard: memory one rebuild may use (default 80% of the available)\n"
    "  --read-consistency linearizable|replica  shard: linearizable (default): a read of a node\n"
    "                  with a write in flight waits for its commit (docs/consistency.md);\n"
    "                  replica: reads see what this replica applied (read-your-writes only)\n"
    "  --snapshot-retention S  shard, logstore: reads at a snapshot taken less than S seconds\n"
    "                  ago are answered (default 60; older: FAILED_PRECONDITION)\n"
    "  --tls-ca F --tls-cert F --tls-key F  mutual TLS on every Thrift connection and every\n"
    "                  update and log shipping link (served and made), https to etcd\n"
    "                  (docs/deploy.md; --tls-curve-key F is accepted and ignored)\n"
    "  --traversal-deadline-ms MS  aggregator, shard: each bfs / rpq it coordinates fails with\n"
    "                  DEADLINE_EXCEEDED after MS (default 5000)\n"
    "  --traversal-memory SIZE  ... or with RESOURCE_EXHAUSTED past SIZE of search state\n"
    "                  (default 256M)\n"
    "  --updates-dir D shard: where its applied writes are kept (default STORE/updates); replicas\n"
    "                  sharing one store directory need one each\n"
    "  --memtable-mb N logstore: compress the log into a new shard past N MiB (default 256;\n"
    "                  0: only on `zipg admin compact`)\n"
    "  --compaction-memory SIZE  logstore: memory a compaction may use to build its log shard\n"
    "                  (e.g. 2G; default 80% of the memory available when it starts; shared\n"
    "                  with a merge running meanwhile)\n"
    "  --merge-width N logstore: merge runs of N log shards of similar size (within 2x; with\n"
    "                  --merge-ratio R, within Rx) into one (default 4; 0: never merge)\n"
    "  --max-log-shards N  logstore: at N log shards, merge whatever their sizes and hold\n"
    "                  compactions on the threshold until a merge makes room (default 12)\n"
    "  --edge-cache SIZE  logstore: edges read from log shards kept decoded for later reads\n"
    "                  (default 64M; 0: none)\n"
    "  --no-sync       logstore: do not fsync the log (benchmarks only: writes are not durable)\n"
    "  --logstore-dir D  logstore: its directory (default STORE/logstore)\n"
    "  --standby       logstore: a standby (docs/logstore-ha.md): takes no writes, applies what\n"
    "                  its leader ships to --ship-port P (default 0: any free port)\n"
    "  --standby-endpoint tcp://H:P  logstore: ship every commit group to this standby before\n"
    "                  acknowledging it; without an answer in --ship-timeout-ms (default 1000)\n"
    "                  go on alone (\"degraded\" in status)\n"
    "  --elect         logstore: one of two LogStores that elect their leader in etcd (needs\n"
    "                  --name): the leader takes writes and ships them to the other, which takes\n"
    "                  over when the leader's key expires (--leader-ttl S, default 2)\n"
    "  --write-batches N  aggregator: write_batch calls in flight to the LogStore (default 8;\n"
    "                  concurrent writes beyond them queue and go together)\n"
    "stops cleanly (leaving etcd at once) on SIGTERM or SIGINT\n";

// Blocks SIGTERM and SIGINT in this thread (and every thread started after it), so that
// WaitForStop can collect them synchronously.
sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

int WaitForStop(const sigset_t& set) {
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

// Fetch options whose sources are the members serving one of `shards` (not `self`), paced at
// `rate` bytes/s; a stop signal or `stopping` cancels the fetch.
shard::FetchOptions FetchFrom(std::vector<uint32_t> shards, uint64_t rate, const std::string& self,
                              const cluster::ClusterView* view, rpc::PoolSet* pools,
                              const std::atomic<bool>* stopping, const std::string& what) {
  shard::FetchOptions options;
  options.rate_bytes_per_s = rate;
  options.sources = [=]() {
    std::vector<shard::FetchSource> sources;
    const auto map = view->Current();
    if (!map) return sources;
    std::set<size_t> members;
    for (uint32_t s : shards) {
      if (s < map->owners.size()) members.insert(map->owners[s].begin(), map->owners[s].end());
    }
    for (size_t i : members) {
      const cluster::MemberInfo& m = map->members[i];
      if (m.name == self) continue;
      sources.push_back({m.name, [pool = pools->Get(m.endpoint)](const std::string& path,
                                                                 uint64_t offset, uint32_t length) {
                           return rpc::RemoteGraph(pool).StoreChunk(
                               path, static_cast<int64_t>(offset), static_cast<int32_t>(length));
                         }});
    }
    return sources;
  };
  // SIGTERM and SIGINT are blocked (BlockStopSignals) until the server waits for them: one that
  // arrives during the fetch stops it.
  options.cancelled = [stopping] {
    if (stopping->load()) return true;
    sigset_t pending;
    sigpending(&pending);
    return sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1;
  };
  options.waiting = [what](const std::string& why) {
    std::cerr << "zipg serve: fetching " << what << ": waiting for a replica (" << why << ")"
              << std::endl;
  };
  return options;
}

// When `store` lacks shard `shard`'s files, fetches them from a member serving it (not `self`;
// docs/cluster-changes.md, step 1) and returns the fetch's report; null when nothing was missing.
// `stopping`: the server is shutting down (a fetch for admin_serve stops then).
StatusOr<nlohmann::json> FetchMissingShard(const std::string& store, uint32_t shard, uint64_t rate,
                                           const std::string& self,
                                           const cluster::ClusterView* view, rpc::PoolSet* pools,
                                           const std::atomic<bool>* stopping) {
  if (auto manifest = graph::ReadManifest(store); manifest.ok() && shard >= manifest->shards) {
    return nlohmann::json();  // a split's shard: no file of the store holds it (ServerGraph)
  }
  ZIPG_ASSIGN_OR_RETURN(const bool missing, shard::ShardMissing(store, shard));
  if (!missing) return nlohmann::json();
  std::cerr << "zipg serve: shard " << shard << " has no files in " << store
            << ": fetching them from a replica that serves it" << std::endl;
  ZIPG_ASSIGN_OR_RETURN(const shard::FetchReport r,
                        shard::FetchShardFiles(store, shard,
                                               FetchFrom({shard}, rate, self, view, pools, stopping,
                                                         "shard " + std::to_string(shard))));
  nlohmann::json j = {{"bytes", r.bytes},         {"resumed_bytes", r.resumed_bytes},
                      {"seconds", r.seconds},     {"sources", r.sources},
                      {"refetched", r.refetched}, {"manifest", r.manifest}};
  std::cerr << "zipg serve: shard " << shard << " fetched: " << j.dump() << std::endl;
  return j;
}

// A shard server started with no shards on a store directory without a MANIFEST (a host added
// by `zipg deploy add-host`) fetches the MANIFEST alone, from any serving shard server.
Status FetchManifestIfMissing(const std::string& store, const std::string& self,
                              const cluster::ClusterView* view, rpc::PoolSet* pools,
                              const std::atomic<bool>* stopping) {
  std::error_code ec;
  if (std::filesystem::exists(store + "/" + graph::kManifestName, ec)) return Status::OK();
  // What ShardMissing allows in a store directory without a MANIFEST (shard 0 always exists).
  ZIPG_RETURN_IF_ERROR(shard::ShardMissing(store, 0).status());
  std::vector<uint32_t> any;
  if (const auto map = view->Current()) {
    for (uint32_t s = 0; s < map->owners.size(); ++s) any.push_back(s);
  }
  if (any.empty()) any = {0};
  ZIPG_ASSIGN_OR_RETURN(
      const shard::FetchReport r,
      shard::FetchManifest(store, FetchFrom(any, 0, self, view, pools, stopping, "the MANIFEST")));
  std::cerr << "zipg serve: fetched the MANIFEST from " << (r.sources.empty() ? "" : r.sources[0])
            << std::endl;
  return Status::OK();
}

}  // namespace

int RunServe(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, 2, {"no-verify", "no-sync", "standby", "elect", "no-fetch"});
  if (!args.ok()) return UsageError(args.status().message(), kUsage);
  if (args->positional().size() != 1) return UsageError("serve needs shard or aggregator", kUsage);
  const std::string role = args->positional()[0];
  if (role != "shard" && role != "aggregator" && role != "logstore") {
    return UsageError("unknown server role '" + role + "'", kUsage);
  }
  Status known = args->CheckKnown(WithFlags(WithTls({"store",
                                                     "shards",
                                                     "etcd",
                                                     "host",
                                                     "port",
                                                     "advertise",
                                                     "advertise-update",
                                                     "cluster",
                                                     "name",
                                                     "lease-ttl",
                                                     "call-timeout-ms",
                                                     "no-verify",
                                                     "no-fetch",
                                                     "fetch-rate",
                                                     "update-port",
                                                     "memtable-mb",
                                                     "edge-cache",
                                                     "compaction-memory",
                                                     "merge-width",
                                                     "merge-ratio",
                                                     "max-log-shards",
                                                     "rebuild-delta",
                                                     "rebuild-memory",
                                                     "no-sync",
                                                     "write-batches",
                                                     "updates-dir",
                                                     "tls-curve-key",
                                                     "standby",
                                                     "ship-port",
                                                     "standby-endpoint",
                                                     "ship-timeout-ms",
                                                     "logstore-dir",
                                                     "elect",
                                                     "leader-ttl",
                                                     "read-consistency",
                                                     "snapshot-retention",
                                                     "metrics-port",
                                                     "http-port",
                                                     "http-read-timeout-ms",
                                                     "http-max-connections"}),
                                            kTraversalFlags));
  if (!known.ok()) return UsageError(known.message(), kUsage);
  auto retention_s = args->GetUint("snapshot-retention", 60);
  if (!retention_s.ok() || *retention_s < 1 || *retention_s > 86400) {
    return UsageError("--snapshot-retention must be 1..86400 seconds", kUsage);
  }
  const int retention_ms = static_cast<int>(*retention_s * 1000);
  const auto etcd_endpoint = args->Get("etcd");
  if (!etcd_endpoint) return UsageError("serve needs --etcd HOST:PORT", kUsage);
  auto port = args->GetUint("port", 0);
  auto ttl = args->GetUint("lease-ttl", 5);
  auto timeout = args->GetUint("call-timeout-ms", 10000);
  if (!port.ok()) return UsageError(port.status().message(), kUsage);
  if (!ttl.ok()) return UsageError(ttl.status().message(), kUsage);
  if (!timeout.ok()) return UsageError(timeout.status().message(), kUsage);
  if (*port > 65535) return UsageError("--port must be 0..65535", kUsage);
  if (*ttl < 1 || *ttl > 3600) return UsageError("--lease-ttl must be 1..3600 seconds", kUsage);
  // Where others reach this server, if not where it binds (a proxy or a NAT in front of it).
  std::optional<rpc::Endpoint> advertise, advertise_update;
  for (auto [flag, slot] :
       {std::pair{"advertise", &advertise}, std::pair{"advertise-update", &advertise_update}}) {
    if (auto text = args->Get(flag)) {
      auto endpoint = rpc::Endpoint::Parse(*text);
      if (endpoint.ok() && text->find("://") != std::string::npos) {
        endpoint = Status::InvalidArgument("'" + *text + "' is not HOST:PORT (no scheme)");
      }
      if (!endpoint.ok()) {
        return UsageError("--" + std::string(flag) + ": " + endpoint.status().message(), kUsage);
      }
      *slot = *endpoint;
    }
  }
  if (advertise_update && role != "shard") {
    return UsageError("--advertise-update is for shard servers (their update channel)", kUsage);
  }
  auto traversal = TraversalLimitsFromArgs(*args);
  if (!traversal.ok()) return UsageError(traversal.status().message(), kUsage);
  // A step must end (or fail) before the caller's call to it times out and is retried.
  if (static_cast<uint64_t>(traversal->deadline.count()) >= *timeout) {
    return UsageError("--traversal-deadline-ms must be below --call-timeout-ms (" +
                          std::to_string(*timeout) + ")",
                      kUsage);
  }
  // The HTTP ports (docs/operations.md): metrics on every server, the API on aggregators.
  std::optional<int> metrics_port, http_port;
  for (auto [flag, slot] :
       {std::pair{"metrics-port", &metrics_port}, std::pair{"http-port", &http_port}}) {
    if (!args->Has(flag)) continue;
    auto p = args->GetUint(flag, 0);
    if (!p.ok() || *p > 65535)
      return UsageError("--" + std::string(flag) + " must be 0..65535", kUsage);
    *slot = static_cast<int>(*p);
  }
  if (http_port && role != "aggregator") {
    return UsageError("--http-port is for aggregators", kUsage);
  }
  auto http_read_timeout = args->GetUint("http-read-timeout-ms", 10000);
  auto http_connections = args->GetUint("http-max-connections", 64);
  if (!http_read_timeout.ok() || *http_read_timeout < 1 || *http_read_timeout > 3600000) {
    return UsageError("--http-read-timeout-ms must be 1..3600000", kUsage);
  }
  if (!http_connections.ok() || *http_connections < 1 || *http_connections > 4096) {
    return UsageError("--http-max-connections must be 1..4096", kUsage);
  }
  if (metrics_port) metrics::Enable();  // before the servers start: they record from the first call
  const std::string cluster_name = args->Get("cluster").value_or("zipg");
  const std::string prefix = cluster::ClusterPrefix(cluster_name);

  // Mutual TLS for every Thrift connection and every frame link (the update channel, log
  // shipping), https to etcd.
  const rpc::TlsOptions tls = TlsFromArgs(*args);
  if (Status v = tls.Validate(); !v.ok()) return UsageError(v.message(), kUsage);
  rpc::FrameSecurity frames;
  std::shared_ptr<apache::thrift::transport::TSSLSocketFactory> server_tls, client_tls;
  if (tls.enabled()) {
    auto made = rpc::FrameSecurity::Make(tls);
    if (!made.ok()) return Fail(made.status());
    frames = *made;
    auto s = rpc::MakeTlsFactory(tls, /*server=*/true);
    if (!s.ok()) return Fail(s.status());
    server_tls = *s;
    auto c = ClientTlsFactory(tls);
    if (!c.ok()) return Fail(c.status());
    client_tls = *c;
  }

  const sigset_t stop_signals = BlockStopSignals();
  TuneAllocatorForServers();
  MemoryTrimmer trimmer(std::chrono::seconds(5));
  auto etcd = std::make_shared<cluster::EtcdClient>(*etcd_endpoint);
  if (tls.enabled()) etcd->SetTls({tls.ca, tls.cert, tls.key});
  // etcd may not have a quorum yet (its members start on several hosts): wait for it.
  auto view = cluster::ClusterView::Start(etcd, prefix);
  for (int i = 0; i < 600 && !view.ok() && view.status().code() != StatusCode::kInvalidArgument;
       ++i) {
    if (i % 50 == 0) {
      std::cerr << "zipg serve: waiting for etcd: " << view.status().ToString() << std::endl;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    view = cluster::ClusterView::Start(etcd, prefix);
  }
  if (!view.ok()) return Fail(view.status());
  rpc::ConnectionOptions conn_options;
  conn_options.call_timeout_ms = static_cast<int>(*timeout);
  conn_options.tls = client_tls;
  rpc::PoolSet pools(conn_options);

  rpc::ServerOptions server_options;
  server_options.host = args->Get("host").value_or("127.0.0.1");
  server_options.tls = server_tls;
  server_options.port = static_cast<int>(*port);
  auto calls = std::make_shared<std::atomic<uint64_t>>(0);
  server_options.calls = calls;
  auto traffic = std::make_shared<rpc::Traffic>();
  server_options.traffic = traffic;
  cluster::MemberInfo info;
  info.role = role;
  info.pid = getpid();
  std::mutex info_mu;  // info is read by status() and updated when the LogStore publishes
  std::unique_ptr<cluster::Registration>* registration_slot = nullptr;
  std::atomic<const cluster::Registration*> registration_ptr{nullptr};  // for the lease check

  std::unique_ptr<shard::ServerGraph> shard_graph;
  std::unique_ptr<shard::Fence> fence;  // outlives update_receiver, which uses it
  std::unique_ptr<shard::UpdateReceiver> update_receiver;
  std::unique_ptr<shard::CatchUp> catch_up;
  std::unique_ptr<aggregator::ClusterGraph> cluster_graph;
  std::unique_ptr<shard::UpdateSender> sender;
  std::unique_ptr<logstore::LogStore> log_store;
  std::unique_ptr<logstore::ShipReceiver> ship_receiver;  // a standby's; goes before log_store
  std::unique_ptr<logstore::HaCoordinator> ha;            // --elect; goes before log_store
  std::atomic<logstore::LogStore*> store_ptr{nullptr};    // for the receiver and ha callbacks
  std::shared_ptr<apache::thrift::TProcessor> processor;
  std::function<StatusOr<std::string>()> status_document;   // this server's status()
  std::mutex fetch_mu;                                      // guards fetch_reports
  nlohmann::json fetch_reports = nlohmann::json::object();  // by shard: the files fetched
  std::atomic<bool> stopping{false};                        // set once a stop signal came
  if (role == "shard") {
    const auto store = args->Get("store");
    const auto shard_list = args->Get("shards");
    if (!store || !shard_list) return UsageError("serve shard needs --store and --shards", kUsage);
    auto shards = *shard_list == "none" ? StatusOr<std::vector<uint32_t>>(std::vector<uint32_t>{})
                                        : ParseShardList(*shard_list);
    if (!shards.ok()) return UsageError(shards.status().message(), kUsage);
    uint64_t fetch_rate = 0;
    if (auto text = args->Get("fetch-rate")) {
      auto bytes = ParseByteSize(*text);
      if (!bytes.ok()) return UsageError("--fetch-rate: " + bytes.status().message(), kUsage);
      fetch_rate = *bytes;
    }
    // Fetches a shard's files if the store lacks them (at start, and for admin_serve).
    std::function<StatusOr<nlohmann::json>(uint32_t)> fetch_missing;
    if (!args->Has("no-fetch")) {
      // Called by admin_serve after this block: what it reads from here is copied.
      fetch_missing = [&, fetch_rate, store = *store, self_name = args->Get("name").value_or("")](
                          uint32_t s) -> StatusOr<nlohmann::json> {
        ZIPG_ASSIGN_OR_RETURN(
            nlohmann::json fetched,
            FetchMissingShard(store, s, fetch_rate, self_name, view->get(), &pools, &stopping));
        if (!fetched.is_null()) {
          std::lock_guard lock(fetch_mu);
          fetch_reports[std::to_string(s)] = fetched;
        }
        return fetched;
      };
      for (uint32_t s : *shards) {
        auto fetched = fetch_missing(s);
        if (!fetched.ok()) return Fail(fetched.status());
      }
      // With no shards, an empty store still needs the MANIFEST (the shard count, the files
      // a later admin_serve fetches): from any serving shard server.
      if (shards->empty()) {
        Status fetched = FetchManifestIfMissing(*store, args->Get("name").value_or(""), view->get(),
                                                &pools, &stopping);
        if (!fetched.ok()) return Fail(fetched);
      }
    }
    GraphOpenOptions open_options;
    open_options.verify_checksums = !args->Has("no-verify");
    shard::RebuildOptions rebuild;
    rebuild.snapshot_retention_ms = retention_ms;
    for (auto [flag, field] : {std::pair{"rebuild-delta", &rebuild.delta_bytes},
                               std::pair{"rebuild-memory", &rebuild.memory}}) {
      if (auto text = args->Get(flag)) {
        auto bytes = ParseByteSize(*text);
        if (!bytes.ok())
          return UsageError("--" + std::string(flag) + ": " + bytes.status().message(), kUsage);
        *field = *bytes;
      }
    }
    auto g = shard::ServerGraph::Open(*store, *shards, open_options, view->get(), &pools,
                                      args->Get("updates-dir").value_or(""), rebuild);
    if (!g.ok()) return Fail(g.status());
    shard_graph = std::move(*g);
    shard_graph->set_traversal_limits(*traversal);
    // A server with no shards yet (an added host) in a cluster split since the store was
    // compressed takes the cluster's count (docs/cluster-changes.md, step 4).
    if (shard_graph->hosted().empty()) {
      const uint32_t count = (*view)->Current()->num_shards;
      if (count > shard_graph->num_shards()) {
        if (Status joined = shard_graph->JoinLayout(count); !joined.ok()) return Fail(joined);
      }
    }
    const std::string consistency = args->Get("read-consistency").value_or("linearizable");
    if (consistency != "linearizable" && consistency != "replica") {
      return UsageError("--read-consistency must be linearizable or replica", kUsage);
    }
    shard_graph->SetLinearizable(consistency == "linearizable", [&registration_ptr] {
      const cluster::Registration* r = registration_ptr.load();
      return r == nullptr || r->LeaseValid();  // not registered yet: not serving either
    });
    // Not serving until caught up (below, after registering); a refused push then wakes it.
    shard_graph->StopServing();
    shard_graph->OnBehind([&catch_up] {
      if (catch_up) catch_up->Wake();
    });
    if (fetch_missing) shard_graph->SetFetcher(fetch_missing);
    info.num_shards = shard_graph->num_shards();
    info.shards = shard_graph->hosted();
    info.store = *store;
    const auto& m = shard_graph->manifest();
    info.store_info = {{"nodes", m.nodes},
                       {"edges", m.edges},
                       {"raw_bytes", m.raw_bytes},
                       {"node_properties", m.node_properties},
                       {"edge_properties", m.edge_properties}};
    auto update_port = args->GetUint("update-port", 0);
    if (!update_port.ok() || *update_port > 65535) {
      return UsageError("--update-port must be 0..65535", kUsage);
    }
    // The LogStore epochs these shards have seen (docs/logstore-ha.md, "Fencing"), next to the
    // delta files.
    auto opened_fence =
        shard::Fence::Open(args->Get("updates-dir").value_or(*store + "/updates") + "/fence.json");
    if (!opened_fence.ok()) return Fail(opened_fence.status());
    fence = std::move(*opened_fence);
    auto receiver = shard::UpdateReceiver::Start(
        server_options.host, static_cast<int>(*update_port),
        [g = shard_graph.get()](uint32_t s, uint64_t prev,
                                const std::vector<engine::Update>& batch) {
          return g->ApplyPush(s, prev, batch);
        },
        frames, fence.get(),
        [g = shard_graph.get()](uint32_t s, uint64_t prev, uint64_t committed) {
          g->ApplyCommit(s, prev, committed);
        },
        [g = shard_graph.get()](uint32_t s, uint64_t sender) {
          if (auto undone = g->NoteSender(s, sender); !undone.ok()) {
            std::cerr << "zipg shard: shard " << s << ": cannot roll back its uncommitted updates "
                      << "for a new LogStore sender: " << undone.status().ToString() << std::endl;
          }
        });
    if (!receiver.ok()) return Fail(receiver.status());
    update_receiver = std::move(*receiver);
    info.update_endpoint =
        advertise_update ? "tcp://" + advertise_update->ToString() : update_receiver->endpoint();
    status_document = [&]() -> StatusOr<std::string> {
      nlohmann::json j = info.ToJson();
      j["calls"] = calls->load();
      j["bytes_in"] = traffic->bytes_in.load();
      j["bytes_out"] = traffic->bytes_out.load();
      j["touched_nodes"] = shard_graph->UpdateStats();
      j["memory"] = nlohmann::json::parse(MemoryJson(shard_graph->AccountedBytes()));
      j["update_batches"] = update_receiver->batches();
      j["serving"] = shard_graph->serving();
      nlohmann::json last = nlohmann::json::object();
      for (uint32_t s : shard_graph->hosted()) last[std::to_string(s)] = shard_graph->LastId(s);
      j["last_update_ids"] = last;
      j["refused_pushes"] = shard_graph->refused();
      j["commits"] = shard_graph->CommitStats();
      j["rebuilds"] = shard_graph->RebuildStats();
      j["split"] = shard_graph->SplitStats();
      {
        std::lock_guard lock(fetch_mu);
        if (!fetch_reports.empty()) j["fetched"] = fetch_reports;
      }
      if (catch_up) {
        j["catch_up"] = {{"reads", catch_up->reads()}, {"applied", catch_up->applied()}};
      }
      return j.dump();
    };
    auto handler = std::make_shared<shard::ShardHandler>(shard_graph.get(), status_document);
    processor = std::make_shared<rpc::ShardServiceProcessor>(handler);
  } else if (role == "logstore") {
    const auto store = args->Get("store");
    if (!store) return UsageError("serve logstore needs --store DIR", kUsage);
    auto memtable_mb = args->GetUint("memtable-mb", 256);
    if (!memtable_mb.ok()) return UsageError(memtable_mb.status().message(), kUsage);
    // The shard map must be complete before the LogStore can fan out (and resend) updates.
    std::shared_ptr<const cluster::ShardMap> map;
    // Replicas register before they serve: they catch up from this LogStore's feed first.
    auto every_shard_registered = [](const cluster::ShardMap& m) {
      if (m.num_shards == 0) return false;
      for (const auto& r : m.replicas) {
        if (r.empty()) return false;
      }
      return true;
    };
    for (int i = 0; i < 600; ++i) {
      map = (*view)->Current();
      if (every_shard_registered(*map)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!every_shard_registered(*map)) {
      return Fail(
          Status::Unavailable("the shard map is incomplete after 60 s; start the shard "
                              "servers first"));
    }
    cluster_graph = std::make_unique<aggregator::ClusterGraph>(view->get(), &pools);
    cluster_graph->set_traversal_limits(*traversal);
    sender = std::make_unique<shard::UpdateSender>(
        map->num_shards,
        [v = view->get()](uint32_t s) {
          // Every registered replica, serving or catching up (docs/replication.md).
          auto current = v->Current();
          std::vector<shard::UpdateTarget> targets;
          if (s < current->replicas.size() && current->problem.empty()) {
            for (size_t i : current->replicas[s]) {
              const auto& m = current->members[i];
              if (!m.update_endpoint.empty()) targets.push_back({m.name, m.update_endpoint});
            }
          }
          return targets;
        },
        1000, frames);
    logstore::LogStoreOptions log_options;
    log_options.dir = args->Get("logstore-dir").value_or(*store + "/logstore");
    // The base store's property names count towards the LogStore's bound on distinct names.
    std::set<std::string> base_node_names, base_edge_names;
    for (const auto& m : map->members) {
      if (!m.store_info.is_object()) continue;
      for (const auto& [key, into] : {std::pair{"node_properties", &base_node_names},
                                      std::pair{"edge_properties", &base_edge_names}}) {
        const auto it = m.store_info.find(key);
        if (it == m.store_info.end() || !it->is_array()) continue;
        for (const auto& name : *it) {
          if (name.is_string()) into->insert(name.get<std::string>());
        }
      }
    }
    log_options.base_node_names.assign(base_node_names.begin(), base_node_names.end());
    log_options.base_edge_names.assign(base_edge_names.begin(), base_edge_names.end());
    log_options.standby = args->Has("standby");
    if (log_options.standby && args->Has("standby-endpoint")) {
      return UsageError("a standby LogStore takes no --standby-endpoint", kUsage);
    }
    const bool elect = args->Has("elect");
    if (elect && (args->Has("standby") || args->Has("standby-endpoint"))) {
      return UsageError("--elect chooses the role itself: no --standby or --standby-endpoint",
                        kUsage);
    }
    if (elect && !args->Has("name")) {
      return UsageError("--elect needs --name (the in-sync set names LogStores)", kUsage);
    }
    auto leader_ttl = args->GetUint("leader-ttl", 2);
    if (!leader_ttl.ok() || *leader_ttl < 1 || *leader_ttl > 600) {
      return UsageError("--leader-ttl must be 1..600 seconds", kUsage);
    }
    log_options.standby_endpoint = args->Get("standby-endpoint").value_or("");
    auto ship_timeout = args->GetUint("ship-timeout-ms", 1000);
    if (!ship_timeout.ok() || *ship_timeout < 1 || *ship_timeout > 600000) {
      return UsageError("--ship-timeout-ms must be 1..600000", kUsage);
    }
    log_options.ship_timeout_ms = static_cast<int>(*ship_timeout);
    log_options.ship_security = frames;
    info.leader = !log_options.standby;
    if (!log_options.standby_endpoint.empty()) info.sync = "in_sync";
    log_options.on_sync = [&](const std::string& state, const std::string&) {
      // The in-sync set first: "degraded" must be recorded before a write is acknowledged alone.
      if (ha) ZIPG_RETURN_IF_ERROR(ha->RecordSync(state));
      std::lock_guard lock(info_mu);
      info.sync = state;
      if (registration_slot && *registration_slot) (void)(*registration_slot)->Update(info);
      return Status::OK();
    };
    auto ship_port = args->GetUint("ship-port", 0);
    if (!ship_port.ok() || *ship_port > 65535) {
      return UsageError("--ship-port must be 0..65535", kUsage);
    }
    if (log_options.standby || elect) {
      // Before the LogStore opens: an elected leader advertises it too (unused until it is a
      // standby again, after a restart).
      auto receiver = logstore::ShipReceiver::Start(
          args->Get("host").value_or("127.0.0.1"), static_cast<int>(*ship_port),
          [&store_ptr](const logstore::ShipRequest& q) {
            logstore::LogStore* l = store_ptr.load();
            if (l != nullptr) return l->ApplyShipped(q);
            logstore::ShipReply r;
            r.message = "this LogStore is starting";
            return r;
          },
          frames);
      if (!receiver.ok()) return Fail(receiver.status());
      ship_receiver = std::move(*receiver);
      info.ship_endpoint = ship_receiver->endpoint();
    }
    if (elect) {
      // The role: the leader if it wins the election now, else a standby that takes over when
      // the leader's key goes (docs/logstore-ha.md, "Election and takeover").
      const std::string self = *args->Get("name");
      ha = std::make_unique<logstore::HaCoordinator>(etcd, prefix, self,
                                                     static_cast<int64_t>(*leader_ttl));
      logstore::HaCoordinator::Callbacks callbacks;
      callbacks.promote = [&](uint64_t epoch) -> Status {
        logstore::LogStore* l = store_ptr.load();
        if (l == nullptr) return Status::Unavailable("the LogStore is not open");
        ZIPG_RETURN_IF_ERROR(l->Promote(epoch));
        std::lock_guard lock(info_mu);
        info.leader = true;
        info.epoch = static_cast<int64_t>(epoch);
        info.sync.clear();
        if (registration_slot && *registration_slot) {
          ZIPG_RETURN_IF_ERROR((*registration_slot)->Update(info));
        }
        return Status::OK();
      };
      callbacks.find_standby = [&, self]() -> std::pair<std::string, std::string> {
        auto current = (*view)->Current();
        for (const auto& m : current->members) {
          if (m.role == "logstore" && m.name != self && !m.leader && !m.ship_endpoint.empty()) {
            return {m.name, m.ship_endpoint};
          }
        }
        return {"", ""};
      };
      callbacks.attach = [&store_ptr](const std::string& endpoint) {
        if (logstore::LogStore* l = store_ptr.load()) l->AttachStandby(endpoint);
      };
      callbacks.on_suspend = [&store_ptr](bool suspended) {
        if (logstore::LogStore* l = store_ptr.load()) l->SuspendWrites(suspended);
      };
      callbacks.on_lost = [&store_ptr] {
        if (logstore::LogStore* l = store_ptr.load())
          l->StopWrites("this LogStore lost the leadership");
        std::cerr << "zipg logstore: lost the leadership; exiting (restart it: it rejoins as the "
                     "standby)"
                  << std::endl;
        kill(getpid(), SIGTERM);
      };
      auto epoch = ha->Start(std::move(callbacks));
      if (!epoch.ok()) return Fail(epoch.status());
      log_options.standby = *epoch == 0;
      log_options.epoch = *epoch;
      info.leader = *epoch != 0;
      info.epoch = static_cast<int64_t>(*epoch);
      std::cout << "zipg logstore " << self << ": "
                << (*epoch ? "the leader, epoch " + std::to_string(*epoch)
                           : std::string("a standby"))
                << std::endl;
    }
    log_options.memtable_bytes = *memtable_mb << 20;
    log_options.snapshot_retention_ms = retention_ms;
    if (auto size = args->Get("edge-cache")) {
      auto bytes = ParseByteSize(*size);
      if (!bytes.ok()) return UsageError("--edge-cache: " + bytes.status().message(), kUsage);
      log_options.edge_cache_bytes = *bytes;
    }
    if (auto limit = args->Get("compaction-memory")) {
      auto bytes = ParseByteSize(*limit);
      if (!bytes.ok())
        return UsageError("--compaction-memory: " + bytes.status().message(), kUsage);
      log_options.compaction_memory_bytes = *bytes;
    }
    auto merge_width = args->GetUint("merge-width", 4);
    auto merge_ratio = args->GetUint("merge-ratio", 2);
    if (!merge_width.ok() || *merge_width > 64) {
      return UsageError("--merge-width: a number of log shards up to 64", kUsage);
    }
    if (!merge_ratio.ok() || *merge_ratio < 1) {
      return UsageError("--merge-ratio: a whole number, at least 1", kUsage);
    }
    auto max_log_shards = args->GetUint("max-log-shards", 12);
    if (!max_log_shards.ok() || *max_log_shards > 1024 ||
        (*merge_width >= 2 && *max_log_shards < *merge_width + 1)) {
      return UsageError(
          "--max-log-shards: a number of log shards up to 1024, at least "
          "--merge-width + 1",
          kUsage);
    }
    log_options.max_log_shards = static_cast<uint32_t>(*max_log_shards);
    log_options.merge_width = static_cast<uint32_t>(*merge_width);
    log_options.merge_ratio = static_cast<double>(*merge_ratio);
    log_options.sync = !args->Has("no-sync");
    log_options.update_timeout_ms = static_cast<int>(*timeout);
    auto opened = logstore::LogStore::Open(
        log_options, cluster_graph.get(), sender.get(), [&](std::vector<int64_t> generations) {
          std::lock_guard lock(info_mu);
          info.generations = std::move(generations);
          if (registration_slot && *registration_slot) {
            Status s = (*registration_slot)->Update(info);
            if (!s.ok()) std::cerr << "zipg logstore: publish: " << s.ToString() << std::endl;
          }
        });
    if (!opened.ok()) return Fail(opened.status());
    log_store = std::move(*opened);
    store_ptr = log_store.get();
    info.store = *store;
    info.generations = log_store->LogShards();
    status_document = [&]() -> StatusOr<std::string> {
      nlohmann::json j;
      {
        std::lock_guard lock(info_mu);
        j = info.ToJson();
      }
      j["calls"] = calls->load();
      j["bytes_in"] = traffic->bytes_in.load();
      j["bytes_out"] = traffic->bytes_out.load();
      j["logstore"] = log_store->StatusJson();
      j["memory"] = nlohmann::json::parse(MemoryJson(log_store->AccountedBytes()));
      return j.dump();
    };
    auto handler = std::make_shared<logstore::LogStoreHandler>(cluster_graph.get(), log_store.get(),
                                                               status_document);
    // A split's switch (docs/cluster-changes.md, step 4): the cluster's layout key, then writes
    // wait (at most 10 s) until every shard of the new count has a registered replica.
    auto publish_layout = [&view, etcd, prefix, every_shard_registered](uint32_t count) -> Status {
      ZIPG_RETURN_IF_ERROR(
          etcd->Put(cluster::LayoutKey(prefix), nlohmann::json{{"shards", count}}.dump()));
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (std::chrono::steady_clock::now() < deadline) {
        auto current = (*view)->Current();
        if (current->num_shards == count && every_shard_registered(*current)) return Status::OK();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      std::cerr << "zipg logstore: after 10 s, some shard of the " << count
                << " has no registered replica; writes go on (its writes fail until one "
                   "registers)"
                << std::endl;
      return Status::OK();
    };
    handler->SetLayoutPublisher(publish_layout);
    // A split whose key a crash kept from etcd: published again.
    if (const auto layout = log_store->Layout(); layout.size() > 1 && !log_options.standby) {
      Status put = etcd->Put(cluster::LayoutKey(prefix),
                             nlohmann::json{{"shards", layout.back().first}}.dump());
      if (!put.ok()) return Fail(put);
    }
    processor = std::make_shared<rpc::LogStoreServiceProcessor>(handler);
  } else {
    if (args->Has("store") || args->Has("shards")) {
      return UsageError("an aggregator takes no --store or --shards", kUsage);
    }
    auto in_flight = args->GetUint("write-batches", 8);
    if (!in_flight.ok()) return UsageError(in_flight.status().message(), kUsage);
    if (*in_flight < 1 || *in_flight > 1024) {
      return UsageError("--write-batches must be 1..1024", kUsage);
    }
    cluster_graph = std::make_unique<aggregator::ClusterGraph>(view->get(), &pools, *in_flight);
    cluster_graph->set_traversal_limits(*traversal);
    status_document = [&]() -> StatusOr<std::string> {
      nlohmann::json j = cluster_graph->StatusJson(info.name, cluster_name);
      j["calls"] = calls->load();
      j["bytes_in"] = traffic->bytes_in.load();
      j["bytes_out"] = traffic->bytes_out.load();
      j["memory"] = nlohmann::json::parse(MemoryJson(0));
      return j.dump();
    };
    auto handler = std::make_shared<rpc::GraphHandler>(cluster_graph.get(), status_document,
                                                       cluster_graph.get());
    processor = std::make_shared<rpc::GraphServiceProcessor>(handler);
  }

  // A server that stops accepting must not stay registered: treat it like a stop signal.
  std::atomic<bool> serving_failed{false};
  server_options.on_failure = [&serving_failed](const std::string& why) {
    std::cerr << "zipg serve: " << why << "; shutting down" << std::endl;
    serving_failed = true;
    kill(getpid(), SIGTERM);
  };
  auto server = rpc::RpcServer::Start(processor, server_options);
  if (!server.ok()) return Fail(server.status());
  const rpc::Endpoint bound{server_options.host, (*server)->port()};
  info.endpoint = advertise.value_or(bound);
  info.name = args->Get("name").value_or(role + "-" + info.endpoint.ToString());

  // Metrics (every server) and the HTTP/JSON API (aggregators), with the Thrift port's TLS.
  http::HttpOptions http_options;
  http_options.host = server_options.host;
  if (tls.enabled()) {
    http_options.tls_ca = tls.ca;
    http_options.tls_cert = tls.cert;
    http_options.tls_key = tls.key;
  }
  http_options.read_timeout_ms = static_cast<int>(*http_read_timeout);
  http_options.max_connections = static_cast<int>(*http_connections);
  const std::string scheme = tls.enabled() ? "https://" : "http://";
  const std::string url_host = advertise ? advertise->host : server_options.host;
  auto url = [&](int bound_port, const char* path) {
    return scheme + url_host + ":" + std::to_string(bound_port) + path;
  };
  metrics::CollectorHandle status_metrics;
  std::unique_ptr<http::HttpServer> metrics_server, http_server;
  std::unique_ptr<http::Api> http_api;
  if (metrics_port) {
    status_metrics = metrics::AddCollector([&status_document](metrics::Samples* out) {
      auto text = status_document();
      if (!text.ok()) return;
      http::StatusMetrics(nlohmann::json::parse(*text, nullptr, false), out);
    });
    http_options.port = *metrics_port;
    auto started = http::HttpServer::Start(http_options, [](const http::HttpRequest& r) {
      if (r.path != "/metrics") return http::HttpResponse{404, "text/plain", "see /metrics\n"};
      return http::HttpResponse{200, "text/plain; version=0.0.4", metrics::Exposition()};
    });
    if (!started.ok()) return Fail(started.status());
    metrics_server = std::move(*started);
    info.metrics_url = url(metrics_server->port(), "/metrics");
  }
  if (http_port) {
    http::ApiOptions api_options;
    api_options.call_timeout_ms = static_cast<int64_t>(*timeout);
    // GET /v1/status: the aggregator's document, with each member's own status.
    auto cluster_status = [&]() -> nlohmann::json {
      auto text = status_document();
      nlohmann::json j = text.ok() ? nlohmann::json::parse(*text, nullptr, false)
                                   : nlohmann::json{{"error", text.status().ToString()}};
      if (!j.is_object() || !j.contains("servers")) return j;
      for (auto& m : j["servers"]) {
        auto endpoint = rpc::Endpoint::Parse(m.value("endpoint", ""));
        if (!endpoint.ok()) continue;
        CallDeadline::Scope quick(CallDeadline::Clock::now() + std::chrono::seconds(2));
        auto own = rpc::RemoteGraph(pools.Get(*endpoint)).ServerStatus();
        if (own.ok()) {
          m["status"] = nlohmann::json::parse(*own, nullptr, false);
        } else {
          m["error"] = own.status().ToString();
        }
      }
      return j;
    };
    http_api = std::make_unique<http::Api>(cluster_graph.get(), cluster_graph.get(), cluster_status,
                                           api_options);
    http_options.port = *http_port;
    auto started = http::HttpServer::Start(
        http_options,
        [api = http_api.get()](const http::HttpRequest& r) { return api->Handle(r); });
    if (!started.ok()) return Fail(started.status());
    http_server = std::move(*started);
    info.http_url = url(http_server->port(), "/");
  }
  // The shards served here, those still catching up (docs/cluster-changes.md, step 2) and
  // their versions, into the etcd entry.
  std::function<Status()> publish_shards = [&]() -> Status {
    std::lock_guard lock(info_mu);
    info.num_shards = shard_graph->num_shards();  // changes at a split's switch
    info.shards = shard_graph->hosted();
    info.catching_up = shard_graph->CatchingUp();
    // Serving: some hosted shard answers reads, or none is hosted (a drained server).
    info.serving = info.catching_up.empty() || info.catching_up.size() < info.shards.size();
    info.versions = shard_graph->Versions();
    if (!registration_slot || !*registration_slot) return Status::OK();
    return (*registration_slot)->Update(info);
  };
  if (shard_graph) {
    info.serving = false;  // until caught up with the LogStore's feed
    info.catching_up = info.shards;
    info.versions = shard_graph->Versions();
    shard_graph->SetSelf(info.name);
    // A rebuilt or adopted version is published, so that the other replicas adopt it.
    shard_graph->OnVersions([&] { (void)publish_shards(); });
    // A shard added (admin_serve) or withdrawn (admin_unserve).
    shard_graph->OnHosted([&] {
      if (Status s = publish_shards(); !s.ok()) {
        std::cerr << "zipg shard: cannot publish the shards served here: " << s.ToString()
                  << std::endl;
      }
    });
  }
  StatusOr<std::unique_ptr<cluster::Registration>> registration = [&] {
    std::lock_guard lock(info_mu);
    return cluster::Registration::Start(etcd, prefix, info, static_cast<int64_t>(*ttl));
  }();
  if (!registration.ok()) return Fail(registration.status());
  {
    std::lock_guard lock(info_mu);
    registration_slot = &*registration;
    registration_ptr = registration->get();
    if (log_store && log_store->LogShards() != info.generations) {  // published while starting
      info.generations = log_store->LogShards();
      (void)(*registration)->Update(info);
    }
  }
  if (ha) ha->Run();
  if (shard_graph) {
    // Catch up with the LogStore's feed, then serve (docs/replication.md, "Catching up").
    const std::string self = info.name;
    catch_up = std::make_unique<shard::CatchUp>(
        shard_graph.get(),
        [&, self](uint32_t s, uint64_t after) -> StatusOr<shard::FeedChunk> {
          auto current = (*view)->Current();
          ZIPG_ASSIGN_OR_RETURN(const cluster::MemberInfo* logstore, current->LogStore());
          ZIPG_ASSIGN_OR_RETURN(rpc::UpdateFeedChunk got,
                                rpc::RemoteGraph(pools.Get(logstore->endpoint))
                                    .UpdatesSince(s, after, self, shard_graph->num_shards()));
          shard::FeedChunk chunk;
          chunk.included = got.included;
          chunk.sender = static_cast<uint64_t>(got.sender);
          ZIPG_RETURN_IF_ERROR(engine::DecodeUpdates(got.updates, &chunk.updates, nullptr));
          return chunk;
        },
        publish_shards);
  }
  if (shard_graph) {
    // A lease that expired while this server stalled: the writes since may have been committed
    // without it. Stop serving and catch up before the entry says serving again.
    (*registration)->OnLost([&] {
      shard_graph->StopServing();
      (void)publish_shards();
      catch_up->Wake();
    });
  }
  std::cout << "zipg " << role << " " << info.name << " serving on " << bound.ToString()
            << (advertise ? " (advertised as " + advertise->ToString() + ")" : std::string())
            << " (cluster " << cluster_name << ", etcd " << etcd->endpoint() << ")" << std::endl;
  if (metrics_server) std::cout << "metrics " << info.metrics_url << std::endl;
  if (http_server) std::cout << "http " << info.http_url << std::endl;

  const int sig = WaitForStop(stop_signals);
  stopping = true;
  std::cout << "zipg " << role << " " << info.name << ": signal " << sig << ", stopping"
            << std::endl;
  ha.reset();  // a leader resigns: its standby takes over at once
  std::unique_ptr<cluster::Registration> leaving;
  {
    std::lock_guard lock(info_mu);
    registration_slot = nullptr;
    registration_ptr = nullptr;
    leaving = std::move(*registration);
  }
  leaving.reset();      // leave the shard map first, so routers stop sending us work
  http_server.reset();  // before what its requests use
  metrics_server.reset();
  status_metrics = metrics::CollectorHandle();  // before what status_document reads
  if (shard_graph) shard_graph->StopServing();  // no more wake-ups
  update_receiver.reset();
  catch_up.reset();
  (*server)->Stop();
  ship_receiver.reset();  // before the standby LogStore it applies to
  log_store.reset();      // before the sender and the view it uses
  return serving_failed ? kExitFailure : kExitOk;
}

}  // namespace zipg::cli
