// zipg node start|stop|status and zipg deploy plan|certs|start|stop|status: a cluster on several
// machines, described by one cluster spec (cluster/spec.h; docs/deploy.md). `node` runs on a host
// and starts / stops / reports exactly the processes the spec gives that host, in the background,
// with their logs and a state file in <store>/run/ (node-<host>.json), and, when asked, a
// Prometheus server scraping the whole cluster's metrics. `deploy` runs the node
// commands on every host through a transport (ssh by default; `--exec` takes any command prefix,
// e.g. "ip netns exec zipg-{host}" for the tests).

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "client/cli.h"
#include "client/client.h"
#include "client/deploy.h"
#include "client/procs.h"
#include "client/prometheus.h"
#include "cluster/spec.h"
#include "graph/manifest.h"
#include "shard/fetch.h"
#include "shard/update_channel.h"
#include "util/file.h"

namespace zipg::cli {
namespace {

namespace fs = std::filesystem;
using cluster::ClusterSpec;
using cluster::SpecHost;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

const char kNodeUsage[] =
    "usage:\n"
    "  zipg node start --spec FILE --host NAME [--roles all|etcd|servers]\n"
    "                  [--prometheus [--prometheus-port P]]\n"
    "      start, in the background, the processes the spec gives this host: its etcd member,\n"
    "      then its shard server, the LogStore, its aggregator (each as the spec says, with\n"
    "      its metrics_port and http_port); prints `metrics ROLE NAME URL` per process started\n"
    "      with a metrics port and `http URL` per aggregator with an HTTP port.\n"
    "      --prometheus: then also a Prometheus server (Debian's `prometheus`) on this host's\n"
    "      address, port P (default 9090), scraping every process of the spec that has a\n"
    "      metrics_port each second (https with this host's certificate when the spec has\n"
    "      TLS); its data in STORE/run/prometheus-NAME/; prints `prometheus URL`\n"
    "  zipg node stop --spec FILE --host NAME [--roles all|etcd|servers]\n"
    "      stop them (Prometheus, aggregator, LogStore, shard server, then etcd)\n"
    "  zipg node status --spec FILE --host NAME [--json]\n"
    "      each process: running or not, and what it reports; exit 0 if all run\n"
    "  zipg node check --spec FILE --host NAME\n"
    "      exit 0 if this zipg runs here and the spec names the host (what deploy asks first)\n"
    "  State and logs: STORE/run/node-NAME.json and STORE/run/NAME-OF-PROCESS.log on the host.\n";

const char kDeployUsage[] =
    "usage:\n"
    "  zipg deploy plan --hosts H1,H2,... --replicas R --store DIR [--addresses A1,A2,...]\n"
    "      (without --addresses, the host names are resolved to IPv4 addresses)\n"
    "      [--etcd-members N] [--logstores 1|2] [--base-port P] [--tls-dir D] [--cluster NAME]\n"
    "      [--metrics]\n"
    "      print a cluster spec (JSON) placing R copies of each shard of the store at DIR on\n"
    "      different hosts; on stderr, the store files each host needs. --logstores 2: a\n"
    "      second LogStore on the second host; the two elect their leader (docs/logstore-ha.md)\n"
    "      Ports: aggregator P, shard server P+1, update channel P+2, LogStore P+3, etcd P+4 and\n"
    "      P+5, log shipping P+6. --metrics: every process a metrics_port (shard server P+7,\n"
    "      aggregator P+8, LogStore P+9) and every aggregator an http_port (P+10)\n"
    "  zipg deploy certs --hosts H1,... --addresses A1,... --out DIR [--days N]\n"
    "      make a CA, a certificate and key per host and one for clients (client.pem), with\n"
    "      openssl; a DIR that has ca.pem and ca.key keeps them (certificates for hosts added\n"
    "      later are signed by the cluster's CA)\n"
    "  zipg deploy start|stop|status --spec FILE [--exec PREFIX] [--zipg PATH] [--wait S]\n"
    "                               [--reach-timeout S]\n"
    "      run zipg node start|stop|status on every host of the spec: PREFIX is the command that\n"
    "      reaches a host, {host} and {address} replaced (default \"ssh -o BatchMode=yes -o\n"
    "      ConnectTimeout=10 {address}\"); PATH is zipg on the hosts (default: zipg over ssh,\n"
    "      this zipg's own path with --exec). First every host is asked `zipg node check` at\n"
    "      once; a host that cannot be reached, or cannot run PATH, within --reach-timeout\n"
    "      (default 15 s) is named with the reason, and start and status stop there (stop goes\n"
    "      on with the others). --exec and --zipg that reached every host are kept in the spec\n"
    "      (\"transport\") for the next commands. start waits until the cluster is healthy.\n"
    "  zipg deploy move SHARD FROM TO --spec FILE [--timeout-ms MS] [--tls-ca F --tls-cert F\n"
    "                                 --tls-key F]\n"
    "      move host FROM's copy of SHARD to host TO while the cluster serves: the spec is\n"
    "      written with SHARD on both hosts and a \"moving\" record, TO's shard server serves it\n"
    "      (fetching its files) and catches up, FROM's stops serving it, and the spec is written\n"
    "      with the final placement. Run it again after an interruption: it continues. The\n"
    "      TLS files are a client's (deploy certs' client.pem) when the cluster has TLS\n"
    "  zipg deploy add-host NAME ADDRESS --spec FILE [--roles shard,aggregator,etcd]\n"
    "                       [--store DIR] [--timeout-ms MS] [--tls-*]\n"
    "      add a host (roles default shard,aggregator; ports as the other hosts'): written to\n"
    "      the spec, its etcd member added through etcd's member API and started to join, its\n"
    "      servers started (its shard server with no shards: rebalance gives it some)\n"
    "  zipg deploy remove-host NAME --spec FILE [--timeout-ms MS] [--tls-*]\n"
    "      drain a host: each of its shard copies moves to the host with the fewest that lacks\n"
    "      it (as deploy move), then its servers stop, its etcd member is removed through the\n"
    "      member API, and it leaves the spec. A host that cannot be reached (dead) is removed\n"
    "      the same way, its copies made again from the other replicas\n"
    "  zipg deploy rebalance --spec FILE [--dry-run] [--timeout-ms MS] [--tls-*]\n"
    "      even out the copies per host (then bytes): while a host has two copies more than\n"
    "      another, its largest shard the other lacks moves there, one move at a time; prints\n"
    "      the plan; --dry-run only prints it\n"
    "  zipg deploy split --spec FILE [--timeout-ms MS] [--tls-*]\n"
    "      double the shards online (as zipg admin split), then write the spec with the new\n"
    "      count and each host's shards as its server registers them\n"
    "  Each of move, add-host, remove-host, rebalance and split can be run again after an\n"
    "  interruption: the spec records where it stopped (split: the cluster does).\n";

std::vector<std::string> SplitList(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string StatePath(const std::string& store, const std::string& host) {
  return store + "/run/node-" + host + ".json";
}

std::vector<Process> ReadProcesses(const std::string& path) {
  std::vector<Process> out;
  auto text = ReadFileToString(path);
  if (!text.ok()) return out;
  json j = json::parse(*text, nullptr, false);
  if (!j.is_object()) return out;
  for (const auto& p : j.value("processes", json::array())) {
    out.push_back(
        Process{p.value("role", ""), p.value("name", ""), p.value("pid", 0), p.value("log", "")});
  }
  return out;
}

Status WriteProcesses(const std::string& path, const std::vector<Process>& processes) {
  json list = json::array();
  for (const auto& p : processes) list.push_back(p.ToJson());
  const std::string text = json{{"processes", list}}.dump(2) + "\n";
  return WriteFileAtomically(path, [&](const FileSink& sink) { return sink(text); });
}

bool RoleIn(const std::string& role, const std::string& roles) {
  if (roles == "all") return true;
  return (roles == "etcd") == (role == "etcd");
}

// The TLS options of a host's processes and of its own status calls.
std::vector<std::string> TlsArgs(const ClusterSpec& spec, const SpecHost& host) {
  if (!spec.tls.enabled()) return {};
  const auto t = spec.TlsOf(host);
  return {"--tls-ca", t.ca, "--tls-cert", t.cert, "--tls-key", t.key};
}

// A process this host runs is still the one we started: its command line names it and the
// cluster.
bool Ours(const Process& p, const ClusterSpec& spec) {
  return Alive(p.pid) && CmdlineHas(p.pid, p.name) && CmdlineHas(p.pid, spec.cluster);
}

// The value of the argument `prefix`VALUE in the command line of pid ("" if none).
std::string CmdlineValue(pid_t pid, const std::string& prefix) {
  auto text = ReadFileToString("/proc/" + std::to_string(pid) + "/cmdline");
  if (!text.ok()) return "";
  std::istringstream in(*text);
  std::string arg;
  while (std::getline(in, arg, '\0')) {
    if (arg.rfind(prefix, 0) == 0) return arg.substr(prefix.size());
  }
  return "";
}

// The metrics endpoints (HOST:PORT) of every process of the spec that has one.
std::vector<std::string> MetricsTargets(const ClusterSpec& spec) {
  std::vector<std::string> out;
  for (const SpecHost& h : spec.hosts) {
    for (const auto& port :
         {h.shard_metrics_port, h.aggregator_metrics_port, h.logstore_metrics_port}) {
      if (port) out.push_back(h.address + ":" + std::to_string(*port));
    }
  }
  return out;
}

// What `zipg node start` starts besides the spec's processes.
struct NodeStartOptions {
  std::string roles = "all";
  std::optional<int> prometheus_port;  // a Prometheus server on this port of the host's address
};

class Node {
 public:
  Node(ClusterSpec spec, const SpecHost& host)
      : spec_(std::move(spec)), host_(*spec_.Host(host.name)), store_(spec_.StoreOf(host_)) {}

  int Start(const NodeStartOptions& options) {
    const std::string& roles = options.roles;
    const bool prometheus = options.prometheus_port && RoleIn("prometheus", roles);
    if (prometheus) {
      if (MetricsTargets(spec_).empty()) {
        return Fail(Status::InvalidArgument(
            "--prometheus: no process of the spec has a metrics_port (zipg deploy plan "
            "--metrics gives every one)"));
      }
      std::vector<int> taken = host_.Ports();
      for (const auto& m : spec_.etcd_members) {
        if (m.host == host_.name) taken.insert(taken.end(), {m.client_port, m.peer_port});
      }
      if (std::find(taken.begin(), taken.end(), *options.prometheus_port) != taken.end()) {
        return Fail(Status::InvalidArgument("--prometheus-port " +
                                            std::to_string(*options.prometheus_port) +
                                            " is a port of the spec on host " + host_.name));
      }
    }
    std::error_code ec;
    fs::create_directories(store_ + "/run", ec);
    if (ec) return Fail(Status::IOError(store_ + "/run: " + ec.message()));
    auto self = SelfPath();
    if (!self.ok()) return Fail(self.status());
    std::vector<Process> running = ReadProcesses(StatePath(store_, host_.name));
    std::vector<Process> kept;
    for (const auto& p : running) {  // dead ones of other roles stay listed (status shows them)
      if (Ours(p, spec_) || !RoleIn(p.role, roles)) kept.push_back(p);
    }
    auto is_running = [&](const std::string& name) {
      for (const auto& p : kept) {
        if (p.name == name) return true;
      }
      return false;
    };
    if (spec_.tls.enabled()) {
      const auto t = spec_.TlsOf(host_);
      rpc::TlsOptions tls{t.ca, t.cert, t.key};
      if (Status v = tls.Validate(); !v.ok()) return Fail(v);
    }
    // A host with shard servers only and an empty (or no) store directory is started as it is:
    // its shard servers fetch their shards' files, and the MANIFEST, from serving replicas
    // (docs/cluster-changes.md).
    // So is a host whose shard server has no shards yet (`zipg deploy add-host`): it fetches the
    // MANIFEST alone.
    bool fetches = false;
    if (!host_.logstore_port && host_.shards &&
        !std::filesystem::exists(store_ + "/" + graph::kManifestName, ec)) {
      auto missing = shard::ShardMissing(store_, host_.shards->empty() ? 0 : host_.shards->front());
      fetches = missing.ok() && *missing;
    }
    if ((host_.shards || host_.logstore_port) && !fetches) {
      auto manifest = graph::ReadManifest(store_);
      if (!manifest.ok()) {
        return Fail(Status::InvalidArgument("host " + host_.name + " has no store at " + store_ +
                                            ": " + manifest.status().message()));
      }
      // After `zipg deploy split` the spec counts 2^k times the store's shards, and the shards
      // are the servers' own (docs/cluster-changes.md, step 4), not the store's files.
      const uint32_t times = manifest->shards ? spec_.shards / manifest->shards : 0;
      const bool split =
          times > 1 && spec_.shards % manifest->shards == 0 && (times & (times - 1)) == 0;
      if (manifest->shards != spec_.shards && !split) {
        return Fail(Status::InvalidArgument(
            "the store at " + store_ + " has " + std::to_string(manifest->shards) +
            " shards; the spec says " + std::to_string(spec_.shards)));
      }
      // A store built in parts (compress --shards A,B --of N) must hold this host's shards.
      for (uint32_t s :
           split ? std::vector<uint32_t>{} : host_.shards.value_or(std::vector<uint32_t>{})) {
        if (!manifest->Holds(s)) {
          return Fail(Status::InvalidArgument(
              "host " + host_.name + " serves shard " + std::to_string(s) + " but the store at " +
              store_ + " holds " + manifest->DescribeShards() +
              " (build it there with zipg compress --shards A,B --of N)"));
        }
      }
    }
    std::vector<std::pair<Process, std::vector<std::string>>> plan;
    const std::string etcd = spec_.EtcdEndpoints();
    const auto tls = TlsArgs(spec_, host_);
    // The HTTP endpoints of the processes (docs/operations.md), printed when they start.
    const std::string scheme = spec_.tls.enabled() ? "https://" : "http://";
    std::map<std::string, std::vector<std::string>> endpoint_lines;  // by process name
    auto server = [&](const std::string& role, const std::string& name, int port,
                      std::vector<std::string> extra, std::optional<int> metrics_port) {
      std::vector<std::string> argv = {*self, "serve",     role,         "--etcd",
                                       etcd,  "--cluster", spec_.cluster};
      argv.insert(argv.end(),
                  {"--name", name, "--host", host_.address, "--port", std::to_string(port),
                   "--lease-ttl", std::to_string(spec_.lease_ttl)});
      argv.insert(argv.end(), extra.begin(), extra.end());
      if (metrics_port) {
        argv.insert(argv.end(), {"--metrics-port", std::to_string(*metrics_port)});
        endpoint_lines[name].push_back("metrics " + role + " " + name + " " + scheme +
                                       host_.address + ":" + std::to_string(*metrics_port) +
                                       "/metrics");
      }
      argv.insert(argv.end(), tls.begin(), tls.end());
      plan.push_back({Process{role, name, 0, store_ + "/run/" + name + ".log"}, argv});
    };
    if (RoleIn("etcd", roles)) {
      for (const auto& m : spec_.etcd_members) {
        if (m.host == host_.name) plan.push_back(EtcdProcess(m));
      }
    }
    if (RoleIn("shard", roles)) {
      if (host_.shards) {
        std::string list;
        for (uint32_t s : *host_.shards) list += (list.empty() ? "" : ",") + std::to_string(s);
        if (list.empty()) list = "none";  // a host added with no shards yet
        server("shard", ClusterSpec::ShardServerName(host_), host_.shard_port,
               {"--store", store_, "--shards", list, "--update-port",
                std::to_string(host_.update_port)},
               host_.shard_metrics_port);
      }
      if (host_.logstore_port) {
        std::vector<std::string> extra = {"--store", store_};
        if (spec_.LogStores() == 2) {  // two that elect their leader (docs/logstore-ha.md)
          extra.insert(extra.end(), {"--elect", "--ship-port", std::to_string(*host_.ship_port)});
        }
        server("logstore", spec_.LogStoreName(host_), *host_.logstore_port, extra,
               host_.logstore_metrics_port);
      }
      if (host_.aggregator_port) {
        const std::string name = ClusterSpec::AggregatorName(host_);
        std::vector<std::string> extra;
        if (host_.http_port) extra = {"--http-port", std::to_string(*host_.http_port)};
        server("aggregator", name, *host_.aggregator_port, extra, host_.aggregator_metrics_port);
        if (host_.http_port) {
          endpoint_lines[name].push_back("http " + scheme + host_.address + ":" +
                                         std::to_string(*host_.http_port) + "/");
        }
      }
    }
    if (prometheus) {
      auto p = PrometheusProcess(*options.prometheus_port);
      if (!p.ok()) return Fail(p.status());
      endpoint_lines[p->first.name].push_back("prometheus http://" + host_.address + ":" +
                                              std::to_string(*options.prometheus_port) + "/");
      plan.push_back(*std::move(p));
    }
    std::vector<Process> started;
    for (auto& [p, argv] : plan) {
      if (is_running(p.name)) {
        std::cout << "zipg node: " << p.name << " already runs\n";
        continue;
      }
      auto pid = Spawn(argv, p.log);
      if (!pid.ok()) return Fail(pid.status());
      p.pid = *pid;
      started.push_back(p);
      kept.push_back(p);
    }
    if (Status s = WriteProcesses(StatePath(store_, host_.name), kept); !s.ok()) return Fail(s);
    // Started processes must survive their start-up (etcd and the LogStore may wait for peers on
    // other hosts, so only "still running" is asked of them).
    const auto settle = Clock::now() + std::chrono::milliseconds(started.empty() ? 0 : 1500);
    while (Clock::now() < settle) {
      for (const auto& p : started) {
        int status = 0;
        if (waitpid(p.pid, &status, WNOHANG) == p.pid || !Alive(p.pid)) {
          return Fail(Status::Unavailable(p.name + " exited during start-up; " + p.log + ":\n" +
                                          LogTail(p.log)));
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // Prometheus answers once it has loaded its configuration and its data.
    for (const auto& p : started) {
      if (p.role != "prometheus") continue;
      const auto ready = Clock::now() + std::chrono::seconds(30);
      while (!PrometheusReady(host_.address, *options.prometheus_port)) {
        if (!Alive(p.pid) || Clock::now() > ready) {
          return Fail(Status::Unavailable(
              p.name + (Alive(p.pid) ? " did not answer in 30 s; " : " exited during start-up; ") +
              p.log + ":\n" + LogTail(p.log)));
        }
        waitpid(p.pid, nullptr, WNOHANG);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    for (const auto& p : started) {
      std::cout << "zipg node: " << host_.name << ": started " << p.name << " (pid " << p.pid
                << "), log " << p.log << "\n";
    }
    for (const auto& p : started) {
      for (const auto& line : endpoint_lines[p.name]) std::cout << line << "\n";
    }
    return kExitOk;
  }

  int Stop(const std::string& roles) {
    const std::string path = StatePath(store_, host_.name);
    std::vector<Process> all = ReadProcesses(path), left;
    size_t stopped = 0;
    for (const char* role : {"prometheus", "aggregator", "logstore", "shard", "etcd"}) {
      std::vector<Process> group;
      for (const auto& p : all) {
        if (p.role != role) continue;
        if (!RoleIn(p.role, roles)) {
          left.push_back(p);
        } else if (Ours(p, spec_)) {
          group.push_back(p);
        }
      }
      StopGroup(group, std::chrono::seconds(10));
      stopped += group.size();
    }
    std::error_code ec;
    if (left.empty()) {
      fs::remove(path, ec);
    } else if (Status s = WriteProcesses(path, left); !s.ok()) {
      return Fail(s);
    }
    std::cout << "zipg node: " << host_.name << ": stopped " << stopped << " processes\n";
    return kExitOk;
  }

  int Report(bool as_json) {
    const auto processes = ReadProcesses(StatePath(store_, host_.name));
    json out = {{"host", host_.name}, {"processes", json::array()}};
    bool all_running = !processes.empty();
    rpc::TlsOptions tls;
    if (spec_.tls.enabled()) {
      const auto t = spec_.TlsOf(host_);
      tls = {t.ca, t.cert, t.key};
    }
    for (const auto& p : processes) {
      json j = p.ToJson();
      j["running"] = Ours(p, spec_);
      all_running = all_running && j["running"].get<bool>();
      const int port = PortOf(p);
      if (p.role == "prometheus" && j["running"].get<bool>()) {
        j["endpoint"] = CmdlineValue(p.pid, "--web.listen-address=");
        const size_t colon = j["endpoint"].get<std::string>().rfind(':');
        const int prometheus_port =
            colon == std::string::npos
                ? 0
                : std::atoi(j["endpoint"].get<std::string>().c_str() + colon + 1);
        j["ready"] = prometheus_port > 0 && PrometheusReady(host_.address, prometheus_port);
      } else if (port > 0 && j["running"].get<bool>()) {
        j["endpoint"] = host_.address + ":" + std::to_string(port);
        ClientOptions options;
        options.timeout_ms = 3000;
        options.tls = tls;
        auto client = Connect(j["endpoint"].get<std::string>(), options);
        auto status = client.ok() ? (*client)->ServerStatus() : client.status();
        if (status.ok()) {
          json s = json::parse(*status, nullptr, false);
          if (p.role == "shard") j["serving"] = s.value("serving", false);
          if (p.role == "aggregator") {
            j["healthy"] = s.value("healthy", false);
            out["healthy"] = s.value("healthy", false);
          }
        } else {
          j["error"] = status.status().ToString();
        }
      }
      out["processes"].push_back(j);
    }
    if (as_json) {
      std::cout << out.dump() << "\n";
    } else {
      std::cout << "host " << host_.name << " (" << host_.address << "):\n";
      for (const auto& j : out["processes"]) {
        std::cout << "  " << std::left << std::setw(11) << j.value("role", "") << std::setw(20)
                  << j.value("name", "") << "pid " << std::setw(8) << j.value("pid", 0)
                  << (j.value("running", false) ? "running" : "NOT running");
        if (j.contains("endpoint")) std::cout << "  " << j["endpoint"].get<std::string>();
        if (j.contains("serving"))
          std::cout << (j["serving"].get<bool>() ? "  serving" : "  catching up");
        if (j.contains("healthy"))
          std::cout << (j["healthy"].get<bool>() ? "  cluster healthy" : "  cluster NOT healthy");
        if (j.contains("ready")) std::cout << (j["ready"].get<bool>() ? "  ready" : "  NOT ready");
        if (j.contains("error")) std::cout << "  " << j["error"].get<std::string>();
        std::cout << "\n";
      }
    }
    return all_running ? kExitOk : kExitFailure;
  }

 private:
  int PortOf(const Process& p) const {
    if (p.role == "shard") return host_.shard_port;
    if (p.role == "logstore") return host_.logstore_port.value_or(0);
    if (p.role == "aggregator") return host_.aggregator_port.value_or(0);
    return 0;
  }

  // A Prometheus server on this host's address scraping every process of the spec with a
  // metrics port each second; its configuration and data in STORE/run/prometheus-HOST/ (the data
  // kept across restarts). Its page title names the cluster, so that Ours() knows it.
  StatusOr<std::pair<Process, std::vector<std::string>>> PrometheusProcess(int port) {
    const std::string name = "prometheus-" + host_.name;
    const std::string dir = store_ + "/run/" + name;
    std::error_code ec;
    fs::create_directories(dir + "/data", ec);
    if (ec) return Status::IOError(dir + ": " + ec.message());
    ScrapeConfig scrape;
    scrape.targets = MetricsTargets(spec_);
    if (spec_.tls.enabled()) {
      const auto t = spec_.TlsOf(host_);
      scrape.scheme = "https";
      scrape.ca_file = t.ca;
      scrape.cert_file = t.cert;
      scrape.key_file = t.key;
    }
    const std::string config = PrometheusConfig(scrape);
    ZIPG_RETURN_IF_ERROR(WriteFileAtomically(
        dir + "/prometheus.yml", [&config](const FileSink& sink) { return sink(config); }));
    std::vector<std::string> argv = {
        "prometheus",
        "--config.file=" + dir + "/prometheus.yml",
        "--storage.tsdb.path=" + dir + "/data",
        "--web.listen-address=" + host_.address + ":" + std::to_string(port),
        "--web.page-title=zipg " + spec_.cluster + " " + name,
        "--log.level=warn"};
    return std::pair{Process{"prometheus", name, 0, store_ + "/run/" + name + ".log"}, argv};
  }

  std::pair<Process, std::vector<std::string>> EtcdProcess(const cluster::SpecEtcdMember& m) {
    const std::string scheme = spec_.tls.enabled() ? "https://" : "http://";
    const std::string name = ClusterSpec::EtcdName(m.host);
    std::string initial;
    for (const auto& other : spec_.etcd_members) {
      if (!initial.empty()) initial += ",";
      initial += ClusterSpec::EtcdName(other.host) + "=" + scheme +
                 spec_.Host(other.host)->address + ":" + std::to_string(other.peer_port);
    }
    const std::string client = scheme + host_.address + ":" + std::to_string(m.client_port);
    const std::string peer = scheme + host_.address + ":" + std::to_string(m.peer_port);
    std::vector<std::string> argv = {
        "etcd", "--name", name, "--data-dir", store_ + "/run/" + name, "--listen-client-urls",
        client, "--advertise-client-urls", client, "--listen-peer-urls", peer,
        "--initial-advertise-peer-urls", peer, "--initial-cluster", initial,
        "--initial-cluster-state", m.join ? "existing" : "new", "--initial-cluster-token",
        spec_.cluster,
        // A member cut off by a partition comes back with a higher
        // term; without pre-vote it deposes the leader at the heal
        // (2-5 s without one, measured by the Jepsen rig).
        "--pre-vote"};
    if (spec_.tls.enabled()) {
      const auto t = spec_.TlsOf(host_);
      for (const std::string& kind : {std::string(""), std::string("peer-")}) {
        argv.insert(argv.end(),
                    {"--" + kind + "cert-file", t.cert, "--" + kind + "key-file", t.key,
                     "--" + kind + "trusted-ca-file", t.ca, "--" + kind + "client-cert-auth"});
      }
    }
    return {Process{"etcd", name, 0, store_ + "/run/" + name + ".log"}, argv};
  }

  const ClusterSpec spec_;
  const SpecHost& host_;
  const std::string store_;
};

// ---- deploy -------------------------------------------------------------------------------------

// Runs argv and returns its exit status (-1 if it could not run). With `out`, its stdout (and
// stderr too, if merge_stderr) is captured there; without, its output passes through.
// Runs argv and waits for it; its exit status (-1: it could not be started or was killed). With
// `out`, its standard output (and error, with merge_stderr) is collected. With `timeout`, it is
// killed (SIGKILL, its process group) once that passes, and *timed_out says so.
int Run(const std::vector<std::string>& argv, std::string* out = nullptr, bool merge_stderr = false,
        std::optional<std::chrono::seconds> timeout = std::nullopt, bool* timed_out = nullptr) {
  int fds[2] = {-1, -1};
  // Close-on-exec: a child forked meanwhile by another thread (deploy runs hosts at once) must not
  // inherit this pipe, or its daemons would hold it open and this read would never end.
  if (out != nullptr && pipe2(fds, O_CLOEXEC) != 0) return -1;
  std::vector<char*> cargs;
  for (const auto& a : argv) cargs.push_back(const_cast<char*>(a.c_str()));
  cargs.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    if (out != nullptr) {
      close(fds[0]);
      close(fds[1]);
    }
    return -1;
  }
  if (pid == 0) {
    if (timeout) setpgid(0, 0);  // so that a kill reaches what the transport started
    if (out != nullptr) {
      dup2(fds[1], 1);
      if (merge_stderr) dup2(fds[1], 2);
      close(fds[0]);
      close(fds[1]);
    }
    execvp(cargs[0], cargs.data());
    dprintf(2, "cannot run %s: %s\n", cargs[0], strerror(errno));
    _exit(127);
  }
  std::thread killer;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  if (timeout) {
    killer = std::thread([&] {
      std::unique_lock lock(mu);
      if (!cv.wait_for(lock, *timeout, [&] { return done; })) {
        if (timed_out != nullptr) *timed_out = true;
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
      }
    });
  }
  if (out != nullptr) {
    close(fds[1]);
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof(buf))) > 0) out->append(buf, static_cast<size_t>(n));
    close(fds[0]);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (killer.joinable()) {
    {
      std::lock_guard lock(mu);
      done = true;
    }
    cv.notify_all();
    killer.join();
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class Deployer {
 public:
  Deployer(ClusterSpec spec, std::string spec_path, std::string prefix, std::string zipg,
           std::chrono::seconds reach_timeout)
      : spec_(std::move(spec)),
        spec_path_(std::move(spec_path)),
        prefix_(std::move(prefix)),
        zipg_(std::move(zipg)),
        reach_timeout_(reach_timeout) {}

  // Asks every host, at once, `zipg node check` through the transport. OK if all answer; else
  // an error naming each host that did not, with why (docs/deploy.md, "Transport").
  // The answer is kept: a command asks once.
  Status Reach() const {
    if (!reached_) reached_ = AskHosts(spec_.hosts);
    return *reached_;
  }

  // The same question of the named hosts of `spec` (a spec the command has changed since).
  Status ReachSome(const ClusterSpec& spec, const std::vector<std::string>& names) const {
    std::vector<SpecHost> hosts;
    for (const auto& h : spec.hosts) {
      if (std::find(names.begin(), names.end(), h.name) != names.end()) hosts.push_back(h);
    }
    return AskHosts(hosts);
  }

 private:
  Status AskHosts(const std::vector<SpecHost>& hosts) const {
    std::vector<std::string> problems(hosts.size());
    std::vector<std::thread> asks;
    for (size_t i = 0; i < hosts.size(); ++i) {
      asks.emplace_back([&, i] {
        const SpecHost& h = hosts[i];
        std::string out;
        bool timed_out = false;
        const int rc = Run(OnHost(h, {"node", "check"}), &out, /*merge_stderr=*/true,
                           reach_timeout_, &timed_out);
        if (rc == 0) return;
        std::string said = out;
        while (!said.empty() && (said.back() == '\n' || said.back() == '\r')) said.pop_back();
        if (const size_t nl = said.rfind('\n'); nl != std::string::npos) said = said.substr(nl + 1);
        std::string why;
        if (timed_out) {
          why =
              "no answer within " + std::to_string(reach_timeout_.count()) + " s (--reach-timeout)";
        } else if (rc == 255 && prefix_.rfind("ssh", 0) == 0) {
          why = "ssh could not reach it (exit 255): " + said;
        } else if ((rc == 126 || rc == 127) && said.rfind("cannot run ", 0) == 0) {
          why = "the transport could not be started here: " + said +
                "; --exec PREFIX names the command that reaches a host";
        } else if (rc == 126 || rc == 127) {
          why = "could not run `" + zipg_ + "` there (exit " + std::to_string(rc) + "): " + said +
                "; --zipg PATH names zipg on the hosts";
        } else {
          why = "`zipg node check` failed (exit " + std::to_string(rc) + "): " + said;
        }
        problems[i] = h.name + " (" + h.address + "): " + why;
      });
    }
    for (auto& t : asks) t.join();
    std::string message;
    for (const auto& p : problems) {
      if (p.empty()) continue;
      if (!message.empty()) message += "; ";
      message += p;
    }
    if (message.empty()) return Status::OK();
    return Status::Unavailable("cannot reach every host through `" + prefix_ + "`: " + message);
  }

 public:
  std::vector<std::string> OnHost(const SpecHost& h, std::vector<std::string> command) const {
    std::vector<std::string> argv;
    for (const auto& word : SplitList(prefix_, ' ')) {
      argv.push_back(cluster::ExpandHost(word, h));
    }
    argv.push_back(zipg_);
    argv.insert(argv.end(), command.begin(), command.end());
    argv.insert(argv.end(), {"--spec", spec_path_, "--host", h.name});
    return argv;
  }

  int Start(int wait_seconds) {
    if (Status reached = Reach(); !reached.ok()) return Fail(reached);
    // etcd members first (servers wait for etcd's quorum), then every host's servers; the hosts
    // of each step at once.
    std::vector<const SpecHost*> members, all;
    for (const auto& m : spec_.etcd_members) members.push_back(spec_.Host(m.host));
    for (const auto& h : spec_.hosts) all.push_back(&h);
    if (auto failed = OnHosts(members, {"node", "start", "--roles", "etcd"}); !failed.empty()) {
      return Fail(Status::Unavailable("starting etcd on " + failed + " failed"));
    }
    if (auto failed = OnHosts(all, {"node", "start", "--roles", "servers"}); !failed.empty()) {
      return Fail(Status::Unavailable("starting the servers of " + failed + " failed"));
    }
    // Healthy: an aggregator says every shard is served and the LogStore is registered.
    const auto deadline = Clock::now() + std::chrono::seconds(wait_seconds);
    std::string last;
    while (Clock::now() < deadline) {
      for (const auto& h : spec_.hosts) {
        if (!h.aggregator_port) continue;
        std::string out;
        Run(OnHost(h, {"node", "status", "--json"}), &out);
        json j = json::parse(out, nullptr, false);
        if (j.is_object() && j.value("healthy", false)) {
          std::cout << "zipg deploy: cluster " << spec_.cluster << " is healthy\n";
          for (const auto& a : spec_.hosts) {
            if (a.aggregator_port) {
              std::cout << "aggregator " << a.address << ":" << *a.aggregator_port << "\n";
            }
          }
          return kExitOk;
        }
        last = out;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return Fail(Status::Unavailable("the cluster is not healthy after " +
                                    std::to_string(wait_seconds) + " s; last status: " + last));
  }

  int Stop() {
    int rc = kExitOk;
    // Unreachable hosts are named; the others are stopped all the same.
    if (Status reached = Reach(); !reached.ok()) {
      std::cerr << "zipg deploy: " << reached.message() << "\n";
      rc = kExitFailure;
    }
    std::vector<const SpecHost*> members, all;
    for (const auto& m : spec_.etcd_members) members.push_back(spec_.Host(m.host));
    for (const auto& h : spec_.hosts) all.push_back(&h);
    if (!OnHosts(all, {"node", "stop", "--roles", "servers"}).empty()) rc = kExitFailure;
    if (!OnHosts(members, {"node", "stop", "--roles", "etcd"}).empty()) rc = kExitFailure;
    return rc;
  }

  // Runs `zipg COMMAND` on every one of `hosts` at once; their output is printed in the hosts'
  // order once all ended. The names of those that failed, comma-separated (empty: none).
  std::string OnHosts(const std::vector<const SpecHost*>& hosts,
                      const std::vector<std::string>& command) const {
    std::vector<std::string> out(hosts.size());
    std::vector<int> rc(hosts.size(), 0);
    std::vector<std::thread> runs;
    for (size_t i = 0; i < hosts.size(); ++i) {
      runs.emplace_back(
          [&, i] { rc[i] = Run(OnHost(*hosts[i], command), &out[i], /*merge_stderr=*/true); });
    }
    for (auto& t : runs) t.join();
    std::string failed;
    for (size_t i = 0; i < hosts.size(); ++i) {
      std::cout << out[i];
      if (rc[i] != 0) failed += (failed.empty() ? "" : ", ") + hosts[i]->name;
    }
    std::cout.flush();
    return failed;
  }

  int StatusAll() {
    if (Status reached = Reach(); !reached.ok()) return Fail(reached);
    int rc = kExitOk;
    for (const auto& h : spec_.hosts) {
      if (Run(OnHost(h, {"node", "status"})) != 0) rc = kExitFailure;
    }
    return rc;
  }

 private:
  const ClusterSpec spec_;
  const std::string spec_path_;
  const std::string prefix_;
  const std::string zipg_;
  const std::chrono::seconds reach_timeout_;
  mutable std::optional<Status> reached_;
};

// The IPv4 address of a host name (itself if it is one).
StatusOr<std::string> ResolveIpv4(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    return Status::InvalidArgument("cannot resolve host '" + host +
                                   "' to an IPv4 address: give --addresses");
  }
  char text[INET_ADDRSTRLEN] = "";
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr, text, sizeof(text));
  freeaddrinfo(found);
  return std::string(text);
}

int Plan(const Args& args) {
  Status known = args.CheckKnown({"hosts", "addresses", "replicas", "store", "etcd-members",
                                  "base-port", "tls-dir", "cluster", "logstores", "metrics"});
  if (!known.ok()) return UsageError(known.message(), kDeployUsage);
  cluster::PlanOptions o;
  o.hosts = SplitList(args.Get("hosts").value_or(""), ',');
  o.addresses = SplitList(args.Get("addresses").value_or(""), ',');
  if (o.addresses.empty()) {  // the host names, resolved here (servers bind an IPv4 address)
    for (const auto& h : o.hosts) {
      auto address = ResolveIpv4(h);
      if (!address.ok()) return Fail(address.status());
      o.addresses.push_back(*address);
    }
  }
  auto replicas = args.GetUint("replicas", 1);
  auto members = args.GetUint("etcd-members", 3);
  auto base = args.GetUint("base-port", 7000);
  auto logstores = args.GetUint("logstores", 1);
  if (!replicas.ok() || !members.ok() || !base.ok() || !logstores.ok()) {
    return UsageError("--replicas, --etcd-members, --logstores and --base-port take numbers",
                      kDeployUsage);
  }
  o.logstores = static_cast<uint32_t>(*logstores);
  const auto store = args.Get("store");
  if (!store || o.hosts.empty()) return UsageError("plan needs --hosts and --store", kDeployUsage);
  auto manifest = graph::ReadManifest(*store);
  if (!manifest.ok()) return Fail(manifest.status());
  o.replicas = static_cast<uint32_t>(*replicas);
  o.etcd_members = static_cast<uint32_t>(*members);
  o.base_port = static_cast<int>(*base);
  o.shards = manifest->shards;
  o.store = fs::absolute(*store).string();
  o.tls_dir = args.Get("tls-dir").value_or("");
  o.cluster = args.Get("cluster").value_or("zipg");
  o.metrics = args.Has("metrics");
  auto spec = cluster::PlanCluster(o);
  if (!spec.ok()) return Fail(spec.status());
  std::cout << spec->ToJson().dump(2) << "\n";
  // What each host needs of the store: the manifest and its shards' files (the LogStore's host
  // creates logstore/ itself).
  for (const auto& h : spec->hosts) {
    std::cerr << "# " << h.name << " (" << h.address << "): " << spec->store << "/MANIFEST";
    for (const auto& f : manifest->files) {
      for (uint32_t s : h.shards.value_or(std::vector<uint32_t>{})) {
        char dir[32];
        snprintf(dir, sizeof(dir), "shard-%04u/", s);
        if (f.path.rfind(dir, 0) == 0) std::cerr << " " << spec->store << "/" << f.path;
      }
    }
    std::cerr << "\n";
  }
  return kExitOk;
}

int Certs(const Args& args) {
  Status known = args.CheckKnown({"hosts", "addresses", "out", "days"});
  if (!known.ok()) return UsageError(known.message(), kDeployUsage);
  const auto hosts = SplitList(args.Get("hosts").value_or(""), ',');
  auto addresses = SplitList(args.Get("addresses").value_or(""), ',');
  const auto out = args.Get("out");
  if (hosts.empty() || !out) return UsageError("certs needs --hosts and --out", kDeployUsage);
  if (addresses.empty()) addresses = hosts;
  if (addresses.size() != hosts.size()) {
    return UsageError("--addresses needs one address per host", kDeployUsage);
  }
  const std::string days = args.Get("days").value_or("3650");
  std::error_code ec;
  fs::create_directories(*out, ec);
  if (ec) return Fail(Status::IOError(*out + ": " + ec.message()));
  const std::string dir = *out;
  std::string output;  // of the last openssl run, shown if it fails
  auto openssl = [&](std::vector<std::string> a) {
    a.insert(a.begin(), "openssl");
    output.clear();
    return Run(a, &output, /*merge_stderr=*/true) == 0;
  };
  // A directory that has the CA already (a host added later) keeps it: the new certificates are
  // signed by the cluster's CA, and a second run never replaces the CA the cluster trusts.
  const bool kept_ca = fs::exists(dir + "/ca.pem", ec) && fs::exists(dir + "/ca.key", ec);
  if (!kept_ca && fs::exists(dir + "/ca.pem", ec)) {
    return Fail(Status::FailedPrecondition(
        dir +
        " has the cluster's ca.pem but not its ca.key (kept offline?): put ca.key there to "
        "sign the new certificates, or give an empty --out for a new cluster"));
  }
  if (!kept_ca &&
      !openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-keyout", dir + "/ca.key", "-out", dir + "/ca.pem", "-days", days,
                "-subj", "/CN=zipg cluster CA"})) {
    return Fail(
        Status::Internal("openssl could not make the CA (is openssl installed?): " + output));
  }
  std::vector<std::pair<std::string, std::string>> subjects;
  for (size_t i = 0; i < hosts.size(); ++i) subjects.push_back({hosts[i], addresses[i]});
  if (!kept_ca || !fs::exists(dir + "/client.pem", ec)) subjects.push_back({"client", "127.0.0.1"});
  for (const auto& [name, address] : subjects) {
    const std::string ext = dir + "/" + name + ".ext";
    std::ofstream(ext) << "subjectAltName=DNS:" << name << ",DNS:localhost,IP:127.0.0.1"
                       << (address != "127.0.0.1" ? ",IP:" + address : "") << "\n"
                       << "extendedKeyUsage=serverAuth,clientAuth\n";
    if (!openssl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                  "-nodes", "-keyout", dir + "/" + name + ".key", "-out", dir + "/" + name + ".csr",
                  "-subj", "/CN=" + name}) ||
        !openssl({"x509", "-req", "-in", dir + "/" + name + ".csr", "-CA", dir + "/ca.pem",
                  "-CAkey", dir + "/ca.key", "-CAcreateserial", "-out", dir + "/" + name + ".pem",
                  "-days", days, "-extfile", ext})) {
      return Fail(
          Status::Internal("openssl could not make the certificate of " + name + ": " + output));
    }
    fs::remove(dir + "/" + name + ".csr", ec);
    fs::remove(ext, ec);
  }
  fs::permissions(dir + "/ca.key", fs::perms::owner_read | fs::perms::owner_write, ec);
  std::cout << "zipg deploy: " << (kept_ca ? "the CA kept, " : "CA, ") << hosts.size()
            << " host certificates" << (subjects.size() > hosts.size() ? " and client.pem" : "")
            << " in " << dir
            << "; copy ca.pem and HOST.pem/.key to each host; keep ca.key offline\n";
  return kExitOk;
}

}  // namespace

int RunNode(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, 2, {"json", "prometheus"});
  if (!args.ok()) return UsageError(args.status().message(), kNodeUsage);
  if (args->positional().size() != 1)
    return UsageError("node needs start, stop, status or check", kNodeUsage);
  const std::string action = args->positional()[0];
  Status known =
      args->CheckKnown({"spec", "host", "roles", "json", "prometheus", "prometheus-port"});
  if (!known.ok()) return UsageError(known.message(), kNodeUsage);
  NodeStartOptions options;
  if (args->Has("prometheus") || args->Has("prometheus-port")) {
    if (action != "start") return UsageError("--prometheus is an option of node start", kNodeUsage);
    if (!args->Has("prometheus")) {
      return UsageError("--prometheus-port needs --prometheus", kNodeUsage);
    }
    auto port = args->GetUint("prometheus-port", 9090);
    if (!port.ok() || *port < 1 || *port > 65535) {
      return UsageError("--prometheus-port must be 1..65535", kNodeUsage);
    }
    options.prometheus_port = static_cast<int>(*port);
  }
  const auto spec_path = args->Get("spec");
  const auto host = args->Get("host");
  if (!spec_path || !host) return UsageError("node needs --spec FILE and --host NAME", kNodeUsage);
  auto spec = ClusterSpec::Load(*spec_path);
  if (!spec.ok()) return Fail(spec.status());
  const SpecHost* h = spec->Host(*host);
  if (!h) return Fail(Status::InvalidArgument("the spec has no host '" + *host + "'"));
  const std::string roles = args->Get("roles").value_or("all");
  if (roles != "all" && roles != "etcd" && roles != "servers") {
    return UsageError("--roles must be all, etcd or servers", kNodeUsage);
  }
  options.roles = roles;
  if (action == "check") {
    std::cout << "zipg node check: " << h->name << " (" << h->address << ") of cluster "
              << spec->cluster << ": ok\n";
    return kExitOk;
  }
  Node node(*spec, *h);
  if (action == "start") return node.Start(options);
  if (action == "stop") return node.Stop(roles);
  if (action == "status") return node.Report(args->Has("json"));
  return UsageError("unknown action '" + action + "'", kNodeUsage);
}

int RunDeploy(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, 2, {"metrics", "dry-run"});
  if (!args.ok()) return UsageError(args.status().message(), kDeployUsage);
  const std::string action = args->positional().empty() ? "" : args->positional()[0];
  // The actions and their positional arguments.
  const std::map<std::string, size_t> positional = {
      {"plan", 1}, {"certs", 1},    {"start", 1},       {"stop", 1},      {"status", 1},
      {"move", 4}, {"add-host", 3}, {"remove-host", 2}, {"rebalance", 1}, {"split", 1}};
  const auto it = positional.find(action);
  if (it == positional.end()) {
    return UsageError(
        "deploy needs plan, certs, start, stop, status, move, add-host, remove-host, rebalance "
        "or split",
        kDeployUsage);
  }
  if (args->positional().size() != it->second) {
    return UsageError(action == "move"          ? "deploy move needs SHARD FROM TO"
                      : action == "add-host"    ? "deploy add-host needs NAME ADDRESS"
                      : action == "remove-host" ? "deploy remove-host needs NAME"
                                                : "deploy " + action + " takes no arguments",
                      kDeployUsage);
  }
  if (action == "plan") return Plan(*args);
  if (action == "certs") return Certs(*args);
  const bool changes = action == "move" || action == "add-host" || action == "remove-host" ||
                       action == "rebalance" || action == "split";
  std::vector<std::string> flags = {"spec", "exec", "zipg", "wait", "reach-timeout"};
  if (changes) flags = WithTls(WithFlags(flags, {"timeout-ms"}));
  if (action == "add-host") flags.insert(flags.end(), {"roles", "store"});
  if (action == "rebalance") flags.push_back("dry-run");
  Status known = args->CheckKnown(flags);
  if (!known.ok()) return UsageError(known.message(), kDeployUsage);
  const auto spec_path = args->Get("spec");
  if (!spec_path) return UsageError("deploy " + action + " needs --spec FILE", kDeployUsage);
  auto spec = ClusterSpec::Load(*spec_path);
  if (!spec.ok()) return Fail(spec.status());
  auto wait = args->GetUint("wait", 120);
  if (!wait.ok()) return UsageError(wait.status().message(), kDeployUsage);
  auto reach = args->GetUint("reach-timeout", 15);
  if (!reach.ok() || *reach < 1 || *reach > 3600) {
    return UsageError("--reach-timeout must be 1..3600 seconds", kDeployUsage);
  }
  // The transport: the flags, else what the spec kept, else ssh. zipg: the flag, else the
  // spec's; over ssh, zipg on the remote PATH; through another transport (namespaces,
  // containers) this very binary, whose path the check then proves or refutes there.
  const std::string exec = args->Get("exec").value_or(spec->transport.exec);
  std::string zipg = args->Get("zipg").value_or(spec->transport.zipg);
  if (zipg.empty()) {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    zipg = !exec.empty() && !ec ? self.string() : "zipg";
  }
  Deployer d(*spec, fs::absolute(*spec_path).string(),
             exec.empty() ? "ssh -o BatchMode=yes -o ConnectTimeout=10 {address}" : exec, zipg,
             std::chrono::seconds(*reach));
  // Options given here that reached every host are kept in the spec for the next commands.
  if (args->Has("exec") || args->Has("zipg")) {
    cluster::SpecTransport kept = spec->transport;
    if (args->Has("exec")) kept.exec = exec;
    if (args->Has("zipg")) kept.zipg = zipg;
    if (kept.exec != spec->transport.exec || kept.zipg != spec->transport.zipg) {
      if (Status reached = d.Reach(); reached.ok()) {
        ClusterSpec updated = *spec;
        updated.transport = kept;
        const std::string text = updated.ToJson().dump(2) + "\n";
        Status written =
            WriteFileAtomically(*spec_path, [&](const FileSink& sink) { return sink(text); });
        if (!written.ok()) return Fail(written);
        std::cerr << "zipg deploy: kept the transport in " << *spec_path << ":";
        if (!kept.exec.empty()) std::cerr << " exec \"" << kept.exec << "\"";
        if (!kept.zipg.empty()) std::cerr << " zipg " << kept.zipg;
        std::cerr << "\n";
      }
    }
  }
  if (action == "start") return d.Start(static_cast<int>(*wait));
  if (changes) {
    // Each step reads the spec from the file (what the transport step above may have kept is in
    // it now) and writes it back: one such command at a time per spec (SPEC.lock, held until
    // this process exits).
    const std::string lock_path = *spec_path + ".lock";
    const int lock = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) != 0) {
      return Fail(Status::FailedPrecondition(
          lock < 0 ? "cannot open " + lock_path + ": " + strerror(errno)
                   : "another zipg deploy command is changing " + *spec_path + " (it holds " +
                         lock_path + "); run this one after it ends"));
    }
    DeployContext ctx;
    ctx.spec_path = *spec_path;
    ctx.on_host = [&d](const SpecHost& h, const std::vector<std::string>& command) {
      return Run(d.OnHost(h, command));
    };
    ctx.reach = [&d](const ClusterSpec& now, const std::vector<std::string>& names) {
      return d.ReachSome(now, names);
    };
    auto timeout = args->GetUint("timeout-ms", 3600000);
    if (!timeout.ok() || *timeout == 0 || *timeout > 86400000) {
      return UsageError("--timeout-ms must be 1..86400000", kDeployUsage);
    }
    ctx.options.timeout_ms = static_cast<int>(*timeout);
    auto tls = ApplyTlsArgs(*args);
    if (!tls.ok()) return UsageError(tls.status().message(), kDeployUsage);
    ctx.options.tls = *tls;
    const auto& p = args->positional();
    if (action == "move") return DeployMove(ctx, p[1], p[2], p[3]);
    if (action == "add-host") return DeployAddHost(ctx, p[1], p[2], *args);
    if (action == "remove-host") return DeployRemoveHost(ctx, p[1]);
    if (action == "split") return DeploySplit(ctx);
    return DeployRebalance(ctx, args->Has("dry-run"));
  }
  if (action == "stop") return d.Stop();
  if (action == "status") return d.StatusAll();
  return UsageError("unknown action '" + action + "'", kDeployUsage);
}

}  // namespace zipg::cli
