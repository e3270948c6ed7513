// zipg local start|stop: a whole cluster on this machine, in the background, for one store:
// etcd (unless --etcd names one), shard servers (several processes, shards dealt round-robin) and
// aggregators (one per shard server by default). State and logs live under <store>/run/:
//   run/cluster.json   what is running (endpoints, pids, logs); present only while it runs
//   run/etcd/          etcd's data (membership is ephemeral; removed at stop)
//   run/*.log          one log per process
// Design notes: docs/serving.md ("Local cluster").

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "client/cli.h"
#include "client/client.h"
#include "client/procs.h"
#include "client/prometheus.h"
#include "cluster/etcd.h"
#include "cluster/membership.h"
#include "cluster/placement.h"
#include "graph/manifest.h"
#include "util/file.h"
#include "util/memory.h"

namespace zipg::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

const char kUsage[] =
    "usage:\n"
    "  zipg local start --store DIR [options]\n"
    "      start etcd, shard servers, the LogStore and aggregators for the store in the\n"
    "      background, wait until\n"
    "      every shard is served, print the aggregator endpoints\n"
    "  zipg local stop --store DIR\n"
    "      stop that cluster (aggregators, LogStore, shard servers, then etcd) and remove its run\n"
    "      state\n"
    "options of start:\n"
    "  --servers N      shard-server processes (default 2, or R with --replicas R; at most\n"
    "                   shards x R)\n"
    "  --replicas R     every shard served by R shard-server processes, no two copies on one\n"
    "                   (default 1); each keeps its writes in STORE/updates/server-K\n"
    "  --aggregators N  aggregator processes (default: one per shard server)\n"
    "  --logstores N    1, or 2: two LogStores that elect a leader in etcd; the leader ships\n"
    "                   every commit group to the other before acknowledging it, and the\n"
    "                   other takes over if the leader dies (docs/logstore-ha.md; its data in\n"
    "                   STORE/logstore-standby)\n"
    "  --host H         address every server binds (default 127.0.0.1)\n"
    "  --port P         first aggregator port, the next ones follow (default 0: free ports)\n"
    "  --etcd HOST:PORT use this etcd instead of starting one\n"
    "  --etcd-port P    client port of the etcd started here (default: a free port; peer P+1)\n"
    "  --cluster NAME   cluster name, the etcd key prefix /zipg/NAME/ (default: local-<pid>)\n"
    "  --lease-ttl S    membership lease in seconds (default 5)\n"
    "  --wait S         how long to wait for a healthy cluster (default 120)\n"
    "  --no-verify      shard servers skip checksum verification of the store files\n"
    "  --rebuild-delta SIZE  rebuild a base shard when its writes' delta holds SIZE (default\n"
    "                   64M; 0: only on zipg admin rebuild)\n"
    "  --rebuild-memory SIZE  memory one rebuild may use (default 80% of what is available)\n"
    "  --read-consistency linearizable|replica  shard servers' reads (default linearizable;\n"
    "                   docs/consistency.md)\n"
    "  --snapshot-retention S  reads at a snapshot taken less than S seconds ago are answered\n"
    "                   (default 60; docs/consistency.md)\n"
    "  --memtable-mb N  the LogStore compresses its log into a new shard past N MiB (default 256)\n"
    "  --compaction-memory SIZE  memory a LogStore compaction may use (default 80% of what is\n"
    "                   available when it starts; shared with a merge running meanwhile)\n"
    "  --merge-width N [--merge-ratio R]  the LogStore merges runs of N log shards within Rx\n"
    "                   of each other in size (default 4 and 2; 0: never merge)\n"
    "  --max-log-shards N  the cap on the LogStore's log shards (default 12)\n"
    "  --edge-cache SIZE  edges the LogStore keeps decoded after reading them from its log\n"
    "                   shards (default 64M; 0: none)\n"
    "  --no-sync        the LogStore does not fsync its log (benchmarks only: not durable)\n"
    "  --write-batches N  each aggregator's write_batch calls in flight (default 8)\n"
    "  --traversal-deadline-ms MS --traversal-memory SIZE  the bounds of each bfs / rpq\n"
    "                   (default 5000 ms, 256M; docs/traversal.md)\n"
    "  --metrics        every server serves Prometheus metrics on a free port; prints\n"
    "                   `metrics ROLE NAME URL` per server (docs/operations.md)\n"
    "  --http           every aggregator serves the HTTP/JSON API and the web explorer on a free\n"
    "                   port; prints `http URL` per aggregator (--http-read-timeout-ms MS and\n"
    "                   --http-max-connections N as for zipg serve)\n"
    "  --prometheus     with --metrics: also start a Prometheus server (Debian's `prometheus`)\n"
    "                   scraping every server each second; prints `prometheus URL`\n"
    "  --tls-ca F --tls-cert F --tls-key F  every server runs mutual TLS (docs/deploy.md);\n"
    "                   etcd started here stays plain on loopback\n";

// A free TCP port on `host` right now (bind to port 0 and read it back).
StatusOr<int> FreePort(const std::string& host) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status::IOError("socket: " + std::string(strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    close(fd);
    return Status::InvalidArgument("--host must be an IPv4 address, not '" + host + "'");
  }
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string err = strerror(errno);
    close(fd);
    return Status::Unavailable("cannot bind " + host + ": " + err);
  }
  const int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

std::string RunDir(const std::string& store) { return store + "/run"; }

// Stops aggregators first, then shard servers (they revoke their leases in etcd), then etcd, then
// a Prometheus server.
void StopAll(const std::vector<Process>& processes, const std::string& etcd_endpoint,
             const std::string& run_dir) {
  for (const char* role : {"aggregator", "logstore", "shard", "etcd", "prometheus"}) {
    std::vector<Process> group;
    for (const auto& p : processes) {
      // Only processes that are still the ones we started (same etcd endpoint in argv; the run
      // directory in Prometheus' argv).
      const std::string& mark = p.role == "prometheus" ? run_dir : etcd_endpoint;
      if (p.role == role && Alive(p.pid) && CmdlineHas(p.pid, mark)) group.push_back(p);
    }
    StopGroup(group, std::chrono::seconds(10));
  }
}

std::string StateFile(const std::string& store) { return RunDir(store) + "/cluster.json"; }

StatusOr<json> ReadState(const std::string& store) {
  ZIPG_ASSIGN_OR_RETURN(std::string text, ReadFileToString(StateFile(store)));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::Corruption(StateFile(store) + ": not JSON");
  return j;
}

std::vector<Process> ProcessesOf(const json& state) {
  std::vector<Process> out;
  for (const auto& p : state.value("processes", json::array())) {
    out.push_back(
        Process{p.value("role", ""), p.value("name", ""), p.value("pid", 0), p.value("log", "")});
  }
  return out;
}

int Stop(const std::string& store) {
  auto state = ReadState(store);
  if (!state.ok()) {
    std::cout << "zipg local: no cluster is running for " << store << "\n";
    return kExitOk;
  }
  const auto processes = ProcessesOf(*state);
  StopAll(processes, state->value("etcd", ""), RunDir(store));
  std::error_code ec;
  if (state->value("etcd_started", false)) fs::remove_all(RunDir(store) + "/etcd", ec);
  fs::remove(StateFile(store), ec);
  std::cout << "zipg local: stopped " << processes.size() << " processes of cluster "
            << state->value("cluster", "?") << "\n";
  return kExitOk;
}

class Starter {
 public:
  Starter(std::string store, const Args& args) : store_(std::move(store)), args_(args) {}

  int Run() {
    Status s = Start();
    if (s.ok()) return kExitOk;
    StopAll(processes_, etcd_endpoint_, RunDir(store_));
    std::error_code ec;
    if (etcd_started_) fs::remove_all(RunDir(store_) + "/etcd", ec);
    return Fail(s);
  }

 private:
  Status Start() {
    ZIPG_ASSIGN_OR_RETURN(graph::Manifest manifest, graph::ReadManifest(store_));
    store_ = fs::absolute(store_).lexically_normal().string();
    if (auto old = ReadState(store_); old.ok()) {
      for (const auto& p : ProcessesOf(*old)) {
        if (Alive(p.pid) && CmdlineHas(p.pid, old->value("etcd", ""))) {
          return Status::AlreadyExists("a cluster is already running for " + store_ +
                                       " (zipg local stop --store " + store_ + ")");
        }
      }
    }
    std::error_code ec;
    fs::create_directories(RunDir(store_), ec);
    if (ec) return Status::IOError(RunDir(store_) + ": " + ec.message());
    ZIPG_ASSIGN_OR_RETURN(self_, SelfPath());

    ZIPG_RETURN_IF_ERROR(ApplyTlsArgs(args_).status());  // our own health checks use it too
    ZIPG_ASSIGN_OR_RETURN(uint64_t replicas, args_.GetUint("replicas", 1));
    if (replicas < 1 || replicas > 16) return Status::InvalidArgument("--replicas must be 1..16");
    ZIPG_ASSIGN_OR_RETURN(uint64_t servers,
                          args_.GetUint("servers", std::max<uint64_t>(2, replicas)));
    if (servers < 1) return Status::InvalidArgument("--servers must be >= 1");
    // At most one copy of each shard per server, so no server is idle and none holds two copies.
    servers = std::min<uint64_t>(servers, manifest.shards * replicas);
    ZIPG_ASSIGN_OR_RETURN(auto placement,
                          cluster::PlaceReplicas(manifest.shards, static_cast<uint32_t>(servers),
                                                 static_cast<uint32_t>(replicas)));
    ZIPG_ASSIGN_OR_RETURN(uint64_t aggregators, args_.GetUint("aggregators", servers));
    if (aggregators < 1 || aggregators > 64) {
      return Status::InvalidArgument("--aggregators must be 1..64");
    }
    ZIPG_ASSIGN_OR_RETURN(uint64_t port, args_.GetUint("port", 0));
    if (port > 65535 - aggregators) return Status::InvalidArgument("--port is out of range");
    ZIPG_ASSIGN_OR_RETURN(uint64_t wait, args_.GetUint("wait", 120));
    host_ = args_.Get("host").value_or("127.0.0.1");
    cluster_ = args_.Get("cluster").value_or("local-" + std::to_string(getpid()));
    lease_ttl_ = args_.Get("lease-ttl").value_or("5");
    const auto deadline = Clock::now() + std::chrono::seconds(wait);

    ZIPG_RETURN_IF_ERROR(StartEtcd(deadline));
    // Shard server k serves shards k, k+servers, k+2*servers, ... and, with replicas, the copies
    // cluster::PlaceReplicas gives it; each replica keeps its applied writes in its own directory.
    for (uint64_t k = 0; k < servers; ++k) {
      std::string shards;
      for (uint32_t s : placement[k]) shards += (shards.empty() ? "" : ",") + std::to_string(s);
      const std::string name = "shard-" + std::to_string(k);
      std::vector<std::string> argv = {self_,  "serve",    "shard", "--store",
                                       store_, "--shards", shards};
      if (replicas > 1) {
        argv.insert(argv.end(), {"--updates-dir", store_ + "/updates/server-" + std::to_string(k)});
      }
      if (args_.Has("no-verify")) argv.push_back("--no-verify");
      if (auto c = args_.Get("read-consistency")) {
        if (*c != "linearizable" && *c != "replica") {
          return Status::InvalidArgument("--read-consistency must be linearizable or replica");
        }
        argv.insert(argv.end(), {"--read-consistency", *c});
      }
      if (auto r = args_.Get("snapshot-retention")) {
        ZIPG_RETURN_IF_ERROR(args_.GetUint("snapshot-retention", 60).status());
        argv.insert(argv.end(), {"--snapshot-retention", *r});
      }
      for (const char* flag : {"rebuild-delta", "rebuild-memory"}) {
        if (auto size = args_.Get(flag)) {
          ZIPG_RETURN_IF_ERROR(ParseByteSize(*size).status());
          argv.insert(argv.end(), {std::string("--") + flag, *size});
        }
      }
      ZIPG_RETURN_IF_ERROR(SpawnServer(argv, name, 0));
    }
    ZIPG_ASSIGN_OR_RETURN(uint64_t logstores, args_.GetUint("logstores", 1));
    if (logstores < 1 || logstores > 2)
      return Status::InvalidArgument("--logstores must be 1 or 2");
    logstores_ = logstores;
    std::vector<std::string> logstore_argv = {self_, "serve", "logstore", "--store", store_};
    if (auto r = args_.Get("snapshot-retention")) {
      logstore_argv.insert(logstore_argv.end(), {"--snapshot-retention", *r});
    }
    if (auto mb = args_.Get("memtable-mb")) {
      ZIPG_RETURN_IF_ERROR(args_.GetUint("memtable-mb", 0).status());
      logstore_argv.insert(logstore_argv.end(), {"--memtable-mb", *mb});
    }
    for (const char* flag : {"compaction-memory", "edge-cache"}) {
      if (auto size = args_.Get(flag)) {
        ZIPG_RETURN_IF_ERROR(ParseByteSize(*size).status());
        logstore_argv.insert(logstore_argv.end(), {std::string("--") + flag, *size});
      }
    }
    for (const char* flag : {"merge-width", "merge-ratio", "max-log-shards"}) {
      if (auto value = args_.Get(flag)) {
        ZIPG_RETURN_IF_ERROR(args_.GetUint(flag, 0).status());
        logstore_argv.insert(logstore_argv.end(), {std::string("--") + flag, *value});
      }
    }
    if (args_.Has("no-sync")) logstore_argv.push_back("--no-sync");
    if (logstores == 2) {
      // Two LogStores that elect their leader (docs/logstore-ha.md): "logstore" first, so that
      // it wins the first election; "logstore-standby" then follows it.
      logstore_argv.push_back("--elect");
      for (const char* name : {"logstore", "logstore-standby"}) {
        std::vector<std::string> argv = logstore_argv;
        if (std::string(name) != "logstore") {
          argv.insert(argv.end(), {"--logstore-dir", store_ + "/" + name});
        }
        ZIPG_RETURN_IF_ERROR(SpawnServer(argv, name, 0));
        ZIPG_RETURN_IF_ERROR(WaitRegistered(name, deadline));
      }
    } else {
      ZIPG_RETURN_IF_ERROR(SpawnServer(logstore_argv, "logstore", 0));
    }
    for (uint64_t k = 0; k < aggregators; ++k) {
      std::vector<std::string> argv = {self_, "serve", "aggregator"};
      if (auto n = args_.Get("write-batches")) {
        ZIPG_RETURN_IF_ERROR(args_.GetUint("write-batches", 8).status());
        argv.insert(argv.end(), {"--write-batches", *n});
      }
      ZIPG_RETURN_IF_ERROR(SpawnServer(argv, "aggregator-" + std::to_string(k),
                                       port == 0 ? 0 : static_cast<int>(port + k)));
    }
    ZIPG_RETURN_IF_ERROR(WaitHealthy(servers, aggregators, deadline));
    // The HTTP endpoints the servers registered (docs/operations.md).
    std::vector<std::string> endpoint_lines, metrics_urls;
    if (args_.Has("metrics") || args_.Has("http")) {
      ZIPG_ASSIGN_OR_RETURN(auto kvs,
                            etcd_->GetPrefix(cluster::ClusterPrefix(cluster_) + "servers/"));
      std::vector<cluster::MemberInfo> members;
      for (const auto& kv : kvs) {
        if (auto m = cluster::MemberInfo::FromJson(kv.value); m.ok()) members.push_back(*m);
      }
      std::sort(members.begin(), members.end(), [](const auto& a, const auto& b) {
        return std::tie(a.role, a.name) < std::tie(b.role, b.name);
      });
      for (const auto& m : members) {
        if (!m.http_url.empty()) endpoint_lines.push_back("http " + m.http_url);
      }
      for (const auto& m : members) {
        if (m.metrics_url.empty()) continue;
        endpoint_lines.push_back("metrics " + m.role + " " + m.name + " " + m.metrics_url);
        metrics_urls.push_back(m.metrics_url);
      }
    }
    if (args_.Has("prometheus")) {
      ZIPG_ASSIGN_OR_RETURN(std::string url, StartPrometheus(metrics_urls, deadline));
      endpoint_lines.push_back("prometheus " + url);
    }
    ZIPG_RETURN_IF_ERROR(WriteState());
    std::cout << "zipg local: cluster " << cluster_ << " is up: " << servers << " shard servers ("
              << replicas << (replicas == 1 ? " copy" : " copies") << " of each shard), "
              << aggregators << " aggregators, " << manifest.shards << " shards, etcd "
              << etcd_endpoint_ << "; logs in " << RunDir(store_) << "\n";
    for (const auto& a : aggregator_endpoints_) std::cout << "aggregator " << a << "\n";
    for (const auto& line : endpoint_lines) std::cout << line << "\n";
    return Status::OK();
  }

  // A Prometheus server (Debian's `prometheus`) scraping `targets` (metrics URLs) every second,
  // its data in the run directory; returns its URL once it answers.
  StatusOr<std::string> StartPrometheus(const std::vector<std::string>& targets,
                                        Clock::time_point deadline) {
    const std::string dir = RunDir(store_) + "/prometheus";
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::create_directories(dir + "/data", ec);
    if (ec) return Status::IOError(dir + ": " + ec.message());
    const std::string config = ScrapeConfigOf(targets);
    ZIPG_RETURN_IF_ERROR(WriteFileAtomically(
        dir + "/prometheus.yml", [&config](const FileSink& sink) { return sink(config); }));
    ZIPG_ASSIGN_OR_RETURN(int port, FreePort(host_));
    const std::string listen = host_ + ":" + std::to_string(port);
    ZIPG_ASSIGN_OR_RETURN(
        pid_t pid, Spawn({"prometheus", "--config.file=" + dir + "/prometheus.yml",
                          "--storage.tsdb.path=" + dir + "/data", "--web.listen-address=" + listen,
                          "--log.level=warn"},
                         RunDir(store_) + "/prometheus.log"));
    processes_.push_back(
        Process{"prometheus", "prometheus", pid, RunDir(store_) + "/prometheus.log"});
    const std::string url = "http://" + listen + "/";
    while (Clock::now() < deadline) {
      ZIPG_RETURN_IF_ERROR(CheckChildren());
      if (PrometheusReady(host_, port)) return url;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return Status::DeadlineExceeded("prometheus did not start in time; see " + RunDir(store_) +
                                    "/prometheus.log");
  }

  // The scrape configuration (client/prometheus.h) of the servers' metrics URLs; with TLS, the
  // cluster's certificate (docs/operations.md, "Prometheus").
  std::string ScrapeConfigOf(const std::vector<std::string>& urls) {
    ScrapeConfig config;
    for (const auto& u : urls) {  // scheme://host:port/metrics
      const size_t start = u.find("://");
      if (start == std::string::npos) continue;
      config.scheme = u.substr(0, start);
      const size_t end = u.find('/', start + 3);
      config.targets.push_back(u.substr(start + 3, end - (start + 3)));
    }
    config.ca_file = args_.Get("tls-ca").value_or("");
    config.cert_file = args_.Get("tls-cert").value_or("");
    config.key_file = args_.Get("tls-key").value_or("");
    return PrometheusConfig(config);
  }

  Status StartEtcd(Clock::time_point deadline) {
    if (auto external = args_.Get("etcd")) {
      etcd_endpoint_ = *external;
    } else {
      int client_port, peer_port;
      if (args_.Has("etcd-port")) {
        ZIPG_ASSIGN_OR_RETURN(uint64_t p, args_.GetUint("etcd-port", 0));
        if (p < 1 || p > 65534) return Status::InvalidArgument("--etcd-port must be 1..65534");
        client_port = static_cast<int>(p);
        peer_port = client_port + 1;
      } else {
        ZIPG_ASSIGN_OR_RETURN(client_port, FreePort(host_));
        ZIPG_ASSIGN_OR_RETURN(peer_port, FreePort(host_));
      }
      etcd_endpoint_ = host_ + ":" + std::to_string(client_port);
      const std::string client_url = "http://" + etcd_endpoint_;
      const std::string peer_url = "http://" + host_ + ":" + std::to_string(peer_port);
      const std::string data = RunDir(store_) + "/etcd";
      std::error_code ec;
      fs::remove_all(data, ec);  // membership is ephemeral: start from nothing
      const std::string log = RunDir(store_) + "/etcd.log";
      ZIPG_ASSIGN_OR_RETURN(
          pid_t pid,
          Spawn({"etcd", "--name", "zipg-local", "--data-dir", data, "--listen-client-urls",
                 client_url, "--advertise-client-urls", client_url, "--listen-peer-urls", peer_url,
                 "--initial-advertise-peer-urls", peer_url, "--initial-cluster",
                 "zipg-local=" + peer_url, "--log-level", "warn"},
                log));
      processes_.push_back(Process{"etcd", "etcd", pid, log});
      etcd_started_ = true;
    }
    etcd_ = std::make_shared<cluster::EtcdClient>(etcd_endpoint_, std::chrono::milliseconds(1000));
    for (;;) {
      auto probe = etcd_->GetPrefix(cluster::ClusterPrefix(cluster_));
      if (probe.ok()) {
        if (!probe->empty()) {
          return Status::AlreadyExists("etcd " + etcd_endpoint_ +
                                       " already has members of cluster " + cluster_ +
                                       "; choose another --cluster");
        }
        return Status::OK();
      }
      ZIPG_RETURN_IF_ERROR(CheckChildren());
      if (Clock::now() > deadline) {
        return Status::Unavailable("etcd at " + etcd_endpoint_ +
                                   " did not answer: " + probe.status().ToString());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  Status SpawnServer(std::vector<std::string> argv, const std::string& name, int port) {
    const std::string log = RunDir(store_) + "/" + name + ".log";
    const std::vector<std::string> common = {
        "--etcd", etcd_endpoint_, "--cluster",          cluster_,      "--name",  name, "--host",
        host_,    "--port",       std::to_string(port), "--lease-ttl", lease_ttl_};
    argv.insert(argv.end(), common.begin(), common.end());
    for (const char* flag : {"tls-ca", "tls-cert", "tls-key"}) {
      if (auto v = args_.Get(flag)) argv.insert(argv.end(), {std::string("--") + flag, *v});
    }
    const std::string role = argv[2];
    if (args_.Has("metrics") || args_.Has("prometheus")) {
      argv.insert(argv.end(), {"--metrics-port", "0"});
    }
    if (args_.Has("http") && role == "aggregator") {
      argv.insert(argv.end(), {"--http-port", "0"});
      for (const char* flag : {"http-read-timeout-ms", "http-max-connections"}) {
        if (auto v = args_.Get(flag)) argv.insert(argv.end(), {std::string("--") + flag, *v});
      }
    }
    if (role != "logstore") {
      for (const std::string& flag : kTraversalFlags) {
        if (auto v = args_.Get(flag)) argv.insert(argv.end(), {"--" + flag, *v});
      }
    }
    ZIPG_ASSIGN_OR_RETURN(pid_t pid, Spawn(argv, log));
    processes_.push_back(Process{role, name, pid, log});
    return Status::OK();
  }

  // A child that exited already is a failed start: report it with the end of its log.
  Status CheckChildren() {
    for (const auto& p : processes_) {
      int status = 0;
      if (waitpid(p.pid, &status, WNOHANG) == p.pid) {
        return Status::Unavailable(p.name + " exited during start-up (status " +
                                   std::to_string(status) + "); " + p.log + ":\n" + LogTail(p.log));
      }
    }
    return Status::OK();
  }

  // A member named `name` is registered in etcd (a process of ours that exited fails at once).
  Status WaitRegistered(const std::string& name, Clock::time_point deadline) {
    while (Clock::now() < deadline) {
      ZIPG_RETURN_IF_ERROR(CheckChildren());
      auto kvs = etcd_->GetPrefix(cluster::ClusterPrefix(cluster_) + "servers/");
      if (kvs.ok()) {
        for (const auto& kv : *kvs) {
          auto m = cluster::MemberInfo::FromJson(kv.value);
          if (m.ok() && m->name == name) return Status::OK();
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return Status::DeadlineExceeded(name + " did not register in time");
  }

  // Every process registered, every shard server caught up and serving (not merely registered:
  // a replica still catching up takes no reads yet), and each aggregator answers and says healthy.
  Status WaitHealthy(uint64_t servers, uint64_t aggregators, Clock::time_point deadline) {
    std::string why = "not started";
    for (;;) {
      ZIPG_RETURN_IF_ERROR(CheckChildren());
      auto kvs = etcd_->GetPrefix(cluster::ClusterPrefix(cluster_) + "servers/");
      if (kvs.ok()) {
        std::vector<std::string> aggs;
        uint64_t shard_servers = 0, catching_up = 0, standbys = 0;
        std::string leader_sync;
        for (const auto& kv : *kvs) {
          auto m = cluster::MemberInfo::FromJson(kv.value);
          if (!m.ok()) continue;
          if (m->role == "aggregator") aggs.push_back(m->endpoint.ToString());
          if (m->role == "shard") {
            ++shard_servers;
            if (!m->serving) ++catching_up;
          }
          if (m->role == "logstore" && m->leader) {
            logstore_endpoint_ = m->endpoint.ToString();
            leader_sync = m->sync;
          }
          if (m->role == "logstore" && !m->leader) ++standbys;
        }
        why = std::to_string(shard_servers) + "/" + std::to_string(servers) + " shard servers, " +
              std::to_string(aggs.size()) + "/" + std::to_string(aggregators) + " aggregators, " +
              std::to_string(catching_up) + " shard servers catching up";
        if (shard_servers == servers && catching_up == 0 && aggs.size() == aggregators &&
            !logstore_endpoint_.empty() && standbys + 1 >= logstores_ &&
            (logstores_ == 1 || leader_sync == "in_sync")) {
          bool all_healthy = true;
          for (const auto& a : aggs) {
            auto client = Connect(a);
            auto status =
                client.ok() ? (*client)->ServerStatus() : StatusOr<std::string>(client.status());
            const json j = status.ok() ? json::parse(*status, nullptr, false) : json();
            if (!j.is_object() || !j.value("healthy", false)) {
              all_healthy = false;
              why = "aggregator " + a + " does not see every shard yet";
              break;
            }
          }
          if (all_healthy) {
            aggregator_endpoints_ = aggs;
            return Status::OK();
          }
        }
      } else {
        why = kvs.status().ToString();
      }
      if (Clock::now() > deadline) {
        return Status::DeadlineExceeded("the cluster did not become healthy in time (" + why +
                                        "); logs in " + RunDir(store_));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  Status WriteState() {
    json procs = json::array();
    for (const auto& p : processes_) procs.push_back(p.ToJson());
    const json state = {{"store", store_},
                        {"cluster", cluster_},
                        {"etcd", etcd_endpoint_},
                        {"etcd_started", etcd_started_},
                        {"aggregators", aggregator_endpoints_},
                        {"logstore", logstore_endpoint_},
                        {"processes", procs}};
    const std::string text = state.dump(2) + "\n";
    return WriteFileAtomically(StateFile(store_), [&](const FileSink& sink) { return sink(text); });
  }

  std::string store_;
  const Args& args_;
  std::string self_;
  std::string host_;
  std::string cluster_;
  std::string lease_ttl_;
  std::string etcd_endpoint_;
  bool etcd_started_ = false;
  std::shared_ptr<cluster::EtcdClient> etcd_;
  std::vector<Process> processes_;
  std::vector<std::string> aggregator_endpoints_;
  std::string logstore_endpoint_;
  uint64_t logstores_ = 1;
};

}  // namespace

StatusOr<std::optional<std::string>> ClusterAddress(const Args& args) {
  if (auto connect = args.Get("connect")) return std::optional<std::string>(*connect);
  if (auto store = args.Get("store")) {
    ZIPG_ASSIGN_OR_RETURN(auto aggregators, LocalAggregators(*store));
    return std::optional<std::string>(aggregators.front());
  }
  return std::optional<std::string>();
}

StatusOr<std::vector<std::string>> LocalAggregators(const std::string& store) {
  auto state = ReadState(store);
  if (!state.ok()) {
    if (state.status().code() != StatusCode::kIOError) return state.status();
    return Status::NotFound("no cluster is running for " + store + " (no run/cluster.json)");
  }
  std::vector<std::string> aggregators;
  for (const auto& a : state->value("aggregators", json::array())) {
    if (a.is_string()) aggregators.push_back(a.get<std::string>());
  }
  if (aggregators.empty()) return Status::Corruption(StateFile(store) + " lists no aggregator");
  return aggregators;
}

int RunLocal(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, 2, {"no-verify", "no-sync", "metrics", "http", "prometheus"});
  if (!args.ok()) return UsageError(args.status().message(), kUsage);
  if (args->positional().size() != 1) return UsageError("local needs start or stop", kUsage);
  const std::string action = args->positional()[0];
  const auto store = args->Get("store");
  if (!store) return UsageError("local " + action + " needs --store DIR", kUsage);
  if (action == "stop") {
    Status known = args->CheckKnown({"store"});
    if (!known.ok()) return UsageError(known.message(), kUsage);
    return Stop(*store);
  }
  if (action != "start") return UsageError("unknown action '" + action + "'", kUsage);
  Status known = args->CheckKnown(WithFlags({"store",
                                             "metrics",
                                             "http",
                                             "prometheus",
                                             "http-read-timeout-ms",
                                             "http-max-connections",
                                             "servers",
                                             "aggregators",
                                             "host",
                                             "port",
                                             "etcd",
                                             "etcd-port",
                                             "cluster",
                                             "lease-ttl",
                                             "wait",
                                             "no-verify",
                                             "memtable-mb",
                                             "compaction-memory",
                                             "merge-width",
                                             "merge-ratio",
                                             "max-log-shards",
                                             "rebuild-delta",
                                             "rebuild-memory",
                                             "no-sync",
                                             "write-batches",
                                             "replicas",
                                             "tls-ca",
                                             "tls-cert",
                                             "tls-key",
                                             "tls-curve-key",
                                             "logstores",
                                             "edge-cache",
                                             "read-consistency",
                                             "snapshot-retention"},
                                            kTraversalFlags));
  if (!known.ok()) return UsageError(known.message(), kUsage);
  return Starter(*store, *args).Run();
}

}  // namespace zipg::cli
