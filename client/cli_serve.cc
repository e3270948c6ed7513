// zipg serve shard|aggregator: run one server process in the foreground until SIGTERM/SIGINT.
// `zipg local start` runs these in the background; they are also how a real multi-machine
// cluster is started (one shard server per machine or per group of shards, one aggregator per
// machine, all pointed at the same etcd).

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <sstream>

#include "aggregator/aggregator.h"
#include "client/cli.h"
#include "cluster/membership.h"
#include "rpc/server.h"
#include "shard/server.h"

namespace zipg::cli {
namespace {

const char kUsage[] =
    "usage:\n"
    "  zipg serve shard --store DIR --shards LIST --etcd HOST:PORT [options]\n"
    "      serve the listed shards (e.g. 0,2,4) of a compressed store\n"
    "  zipg serve aggregator --etcd HOST:PORT [options]\n"
    "      the client-facing service; routes by the shard map in etcd\n"
    "options:\n"
    "  --host H        address to bind (default 127.0.0.1)\n"
    "  --port P        port to bind (default 0: any free port, printed at start)\n"
    "  --cluster NAME  etcd key prefix /zipg/NAME/ (default zipg)\n"
    "  --name NAME     member name (default <role>-<host>-<port>)\n"
    "  --lease-ttl S   seconds before a silent server leaves the shard map (default 5)\n"
    "  --call-timeout-ms MS  timeout of calls to other servers (default 10000)\n"
    "  --no-verify     shard: skip checksum verification of the store files\n"
    "stops cleanly (leaving etcd at once) on SIGTERM or SIGINT\n";

StatusOr<std::vector<uint32_t>> ParseShardList(const std::string& text) {
  std::vector<uint32_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    ZIPG_ASSIGN_OR_RETURN(uint64_t v, ParseUint(item, "--shards"));
    if (v > 1u << 20) return Status::InvalidArgument("--shards: " + item + " is too large");
    out.push_back(static_cast<uint32_t>(v));
  }
  if (out.empty()) return Status::InvalidArgument("--shards needs a list such as 0,1");
  return out;
}

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

}  // namespace

int RunServe(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, 2, {"no-verify"});
  if (!args.ok()) return UsageError(args.status().message(), kUsage);
  if (args->positional().size() != 1) return UsageError("serve needs shard or aggregator", kUsage);
  const std::string role = args->positional()[0];
  if (role != "shard" && role != "aggregator") {
    return UsageError("unknown server role '" + role + "'", kUsage);
  }
  Status known = args->CheckKnown({"store", "shards", "etcd", "host", "port", "cluster", "name",
                                   "lease-ttl", "call-timeout-ms", "no-verify"});
  if (!known.ok()) return UsageError(known.message(), kUsage);
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
  const std::string cluster_name = args->Get("cluster").value_or("zipg");
  const std::string prefix = cluster::ClusterPrefix(cluster_name);

  const sigset_t stop_signals = BlockStopSignals();
  auto etcd = std::make_shared<cluster::EtcdClient>(*etcd_endpoint);
  auto view = cluster::ClusterView::Start(etcd, prefix);
  if (!view.ok()) return Fail(view.status());
  rpc::ConnectionOptions conn_options;
  conn_options.call_timeout_ms = static_cast<int>(*timeout);
  rpc::PoolSet pools(conn_options);

  rpc::ServerOptions server_options;
  server_options.host = args->Get("host").value_or("127.0.0.1");
  server_options.port = static_cast<int>(*port);
  cluster::MemberInfo info;
  info.role = role;
  info.pid = getpid();

  std::unique_ptr<shard::ServerGraph> shard_graph;
  std::unique_ptr<aggregator::ClusterGraph> cluster_graph;
  std::shared_ptr<apache::thrift::TProcessor> processor;
  if (role == "shard") {
    const auto store = args->Get("store");
    const auto shard_list = args->Get("shards");
    if (!store || !shard_list) return UsageError("serve shard needs --store and --shards", kUsage);
    auto shards = ParseShardList(*shard_list);
    if (!shards.ok()) return UsageError(shards.status().message(), kUsage);
    GraphOpenOptions open_options;
    open_options.verify_checksums = !args->Has("no-verify");
    auto g = shard::ServerGraph::Open(*store, *shards, open_options, view->get(), &pools);
    if (!g.ok()) return Fail(g.status());
    shard_graph = std::move(*g);
    info.num_shards = shard_graph->num_shards();
    info.shards = shard_graph->hosted();
    info.store = *store;
    const auto& m = shard_graph->manifest();
    info.store_info = {{"nodes", m.nodes},
                       {"edges", m.edges},
                       {"raw_bytes", m.raw_bytes},
                       {"node_properties", m.node_properties},
                       {"edge_properties", m.edge_properties}};
    auto handler = std::make_shared<shard::ShardHandler>(
        shard_graph.get(), [&info]() -> StatusOr<std::string> { return info.ToJson().dump(); });
    processor = std::make_shared<rpc::ShardServiceProcessor>(handler);
  } else {
    if (args->Has("store") || args->Has("shards")) {
      return UsageError("an aggregator takes no --store or --shards", kUsage);
    }
    cluster_graph = std::make_unique<aggregator::ClusterGraph>(view->get(), &pools);
    auto handler = std::make_shared<rpc::GraphHandler>(
        cluster_graph.get(), [&]() -> StatusOr<std::string> {
          return cluster_graph->StatusJson(info.name, cluster_name).dump();
        });
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
  info.endpoint = rpc::Endpoint{server_options.host, (*server)->port()};
  info.name = args->Get("name").value_or(role + "-" + info.endpoint.ToString());
  auto registration = cluster::Registration::Start(etcd, prefix, info, static_cast<int64_t>(*ttl));
  if (!registration.ok()) return Fail(registration.status());
  std::cout << "zipg " << role << " " << info.name << " serving on " << info.endpoint.ToString()
            << " (cluster " << cluster_name << ", etcd " << etcd->endpoint() << ")" << std::endl;

  const int sig = WaitForStop(stop_signals);
  std::cout << "zipg " << role << " " << info.name << ": signal " << sig << ", stopping"
            << std::endl;
  registration->reset();  // leave the shard map first, so routers stop sending us work
  (*server)->Stop();
  return serving_failed ? kExitFailure : kExitOk;
}

}  // namespace zipg::cli
