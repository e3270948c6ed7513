// zipg deploy move | add-host | remove-host | rebalance: changes to a running cluster's hosts and
// to where its shards' copies live, each written to the spec and carried out on the cluster, each
// safe to run again after an interruption (docs/cluster-changes.md, steps 2 and 3).
//
// The spec is the record of progress: a move is written (both hosts list the shard, a "moving"
// record) before the cluster changes and its end after; a host is in the spec before its
// processes start and leaves it after they stopped; an etcd member joins through the member API
// before it starts and is removed through it before its host leaves the spec.

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "client/deploy.h"
#include "cluster/etcd.h"
#include "graph/manifest.h"
#include "util/file.h"

namespace zipg::cli {
namespace {

using cluster::ClusterSpec;
using cluster::SpecHost;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

bool Lists(const SpecHost& h, uint32_t shard) {
  return h.shards && std::find(h.shards->begin(), h.shards->end(), shard) != h.shards->end();
}

SpecHost* HostOf(ClusterSpec* spec, const std::string& name) {
  for (auto& h : spec->hosts) {
    if (h.name == name) return &h;
  }
  return nullptr;
}

// Writes the spec, parsed again first: a spec this writes must load.
Status WriteSpec(const std::string& path, const ClusterSpec& spec) {
  const std::string text = spec.ToJson().dump(2) + "\n";
  ZIPG_RETURN_IF_ERROR(ClusterSpec::Parse(text, path).status());
  return WriteFileAtomically(path, [&](const FileSink& sink) { return sink(text); });
}

// The first aggregator of the spec that answers its status, skipping those on `skip` (a host
// that is leaving, maybe dead).
StatusOr<std::unique_ptr<Client>> ConnectCluster(const ClusterSpec& spec,
                                                 const ClientOptions& options,
                                                 const std::string& skip = "") {
  Status last = Status::FailedPrecondition("the spec has no aggregator");
  for (const auto& h : spec.hosts) {
    if (!h.aggregator_port || h.name == skip) continue;
    ClientOptions quick = options;
    quick.timeout_ms = std::min(options.timeout_ms, 10000);
    auto probe = Connect(h.address + ":" + std::to_string(*h.aggregator_port), quick);
    if (probe.ok()) {
      if (auto status = (*probe)->ServerStatus(); status.ok()) {
        return Connect(h.address + ":" + std::to_string(*h.aggregator_port), options);
      } else {
        last = status.status();
      }
    } else {
      last = probe.status();
    }
  }
  return Status(last.code(), "no aggregator of the spec answers: " + last.message());
}

// The names of the cluster's members, from an aggregator's status document.
StatusOr<std::set<std::string>> MemberNames(Client& client) {
  ZIPG_ASSIGN_OR_RETURN(std::string text, client.ServerStatus());
  const json status = json::parse(text, nullptr, false);
  if (!status.is_object()) return Status::Internal("the cluster's status is not JSON");
  std::set<std::string> out;
  for (const auto& m : status.value("servers", json::array())) out.insert(m.value("name", ""));
  return out;
}

// An etcd client on the spec's members other than `skip`'s, with the command's TLS files.
std::unique_ptr<cluster::EtcdClient> EtcdOf(const ClusterSpec& spec, const ClientOptions& options,
                                            const std::string& skip) {
  const std::string scheme = spec.tls.enabled() ? "https://" : "http://";
  std::string endpoints;
  for (const auto& m : spec.etcd_members) {
    if (m.host == skip) continue;
    if (!endpoints.empty()) endpoints += ",";
    endpoints += scheme + spec.Host(m.host)->address + ":" + std::to_string(m.client_port);
  }
  auto etcd = std::make_unique<cluster::EtcdClient>(endpoints, std::chrono::milliseconds(5000));
  if (options.tls.enabled()) etcd->SetTls({options.tls.ca, options.tls.cert, options.tls.key});
  return etcd;
}

std::string PeerUrl(const ClusterSpec& spec, const cluster::SpecEtcdMember& m) {
  return (spec.tls.enabled() ? "https://" : "http://") + spec.Host(m.host)->address + ":" +
         std::to_string(m.peer_port);
}

const cluster::SpecEtcdMember* MemberOn(const ClusterSpec& spec, const std::string& host) {
  for (const auto& m : spec.etcd_members) {
    if (m.host == host) return &m;
  }
  return nullptr;
}

// The etcd member whose peer URL is `peer`, if the cluster lists it.
StatusOr<std::optional<cluster::EtcdMember>> FindMember(cluster::EtcdClient& etcd,
                                                        const std::string& peer) {
  ZIPG_ASSIGN_OR_RETURN(auto members, etcd.MemberList());
  for (const auto& m : members) {
    if (std::find(m.peer_urls.begin(), m.peer_urls.end(), peer) != m.peer_urls.end())
      return std::optional<cluster::EtcdMember>(m);
  }
  return std::optional<cluster::EtcdMember>();
}

// Moves host FROM's copy of `shard` to host TO: the spec records the move (both hosts list the
// shard, a "moving" record), the cluster moves it (MoveShard), the spec records the end. A rerun
// continues a recorded move, and after the end says "already". `skip`: an aggregator not to ask.
StatusOr<json> MoveCopy(const DeployContext& ctx, uint32_t shard, const std::string& from,
                        const std::string& to, const std::string& skip = "") {
  ZIPG_ASSIGN_OR_RETURN(ClusterSpec spec, ClusterSpec::Load(ctx.spec_path));
  const cluster::SpecMove move{shard, from, to};
  if (spec.moving && !(*spec.moving == move)) {
    return Status::FailedPrecondition(ctx.spec_path + " records another move under way (shard " +
                                      std::to_string(spec.moving->shard) + " from " +
                                      spec.moving->from + " to " + spec.moving->to +
                                      "): run that one again to finish it first");
  }
  if (!spec.moving) {
    SpecHost* source = HostOf(&spec, from);
    SpecHost* target = HostOf(&spec, to);
    if (!source || !target) {
      return Status::NotFound("deploy move: no host named " + (source ? to : from) + " in " +
                              ctx.spec_path);
    }
    if (from == to) return Status::InvalidArgument("deploy move: FROM and TO are one host");
    if (!target->shards) {
      return Status::InvalidArgument("deploy move: host " + to + " runs no shard server");
    }
    if (!Lists(*source, shard) && Lists(*target, shard)) {  // moved already (a rerun)
      return json{{"shard", shard}, {"from", from}, {"to", to}, {"already", true}};
    }
    if (!Lists(*source, shard)) {
      return Status::InvalidArgument("deploy move: host " + from + " does not serve shard " +
                                     std::to_string(shard));
    }
    if (Lists(*target, shard)) {
      return Status::InvalidArgument("deploy move: host " + to + " serves shard " +
                                     std::to_string(shard) + " already");
    }
    // 1. The spec: the shard on both hosts, and the move recorded.
    target->shards->push_back(shard);
    std::sort(target->shards->begin(), target->shards->end());
    spec.moving = move;
    ZIPG_RETURN_IF_ERROR(WriteSpec(ctx.spec_path, spec));
    std::cerr << "zipg deploy: " << ctx.spec_path << " records the move of shard " << shard
              << " from " << from << " to " << to << "\n";
  }
  // 2. The cluster: TO serves it, caught up; then FROM stops (each step skipped once done).
  ZIPG_ASSIGN_OR_RETURN(auto client, ConnectCluster(spec, ctx.options, skip));
  auto summary = MoveShard(*client, shard, ClusterSpec::ShardServerName(*HostOf(&spec, from)),
                           ClusterSpec::ShardServerName(*HostOf(&spec, to)), ctx.options);
  if (!summary.ok()) {
    return Status(summary.status().code(), summary.status().message() + " (" + ctx.spec_path +
                                               " still records the move; run the command again)");
  }
  // 3. The spec: the final placement.
  SpecHost* source = HostOf(&spec, from);
  source->shards->erase(std::find(source->shards->begin(), source->shards->end(), shard));
  spec.moving.reset();
  ZIPG_RETURN_IF_ERROR(WriteSpec(ctx.spec_path, spec));
  return *summary;
}

// Finishes a move the spec records (an interrupted command's), if any.
Status FinishRecordedMove(const DeployContext& ctx, const std::string& skip = "") {
  ZIPG_ASSIGN_OR_RETURN(ClusterSpec spec, ClusterSpec::Load(ctx.spec_path));
  if (!spec.moving) return Status::OK();
  std::cerr << "zipg deploy: finishing the recorded move of shard " << spec.moving->shard
            << " from " << spec.moving->from << " to " << spec.moving->to << "\n";
  ZIPG_ASSIGN_OR_RETURN(
      json done, MoveCopy(ctx, spec.moving->shard, spec.moving->from, spec.moving->to, skip));
  std::cout << done.dump() << "\n";
  return Status::OK();
}

// Bytes of each shard's base files, from the MANIFEST of the spec's store when this machine has
// it; else every shard weighs 1 (copies are evened out all the same).
std::vector<uint64_t> ShardBytes(const ClusterSpec& spec) {
  std::vector<uint64_t> bytes(spec.shards, 1);
  auto manifest = graph::ReadManifest(spec.store);
  if (!manifest.ok() || manifest->shards != spec.shards) return bytes;
  std::fill(bytes.begin(), bytes.end(), 0);
  for (const auto& f : manifest->files) {
    for (uint32_t s = 0; s < spec.shards; ++s) {
      const std::string prefix = graph::ShardDirName(s) + "/";
      if (f.path.compare(0, prefix.size(), prefix) == 0) bytes[s] += f.bytes;
    }
  }
  return bytes;
}

struct Load {
  uint64_t copies = 0, bytes = 0;
  bool operator<(const Load& o) const {
    return copies != o.copies ? copies < o.copies : bytes < o.bytes;
  }
};

std::map<std::string, Load> LoadByHost(const ClusterSpec& spec, const std::vector<uint64_t>& bytes,
                                       const std::string& leaving = "") {
  std::map<std::string, Load> out;
  for (const auto& h : spec.hosts) {
    if (!h.shards || h.name == leaving) continue;
    Load& l = out[h.name];
    for (uint32_t s : *h.shards) {
      ++l.copies;
      l.bytes += bytes[s];
    }
  }
  return out;
}

struct PlannedMove {
  uint32_t shard;
  std::string from, to;
};

// rebalance's plan (docs/cluster-changes.md, step 3): while the host with the most copies has two
// more than the one with the fewest, its largest shard that the other lacks moves there.
std::vector<PlannedMove> PlanRebalance(ClusterSpec spec, const std::vector<uint64_t>& bytes) {
  std::vector<PlannedMove> plan;
  for (;;) {
    auto load = LoadByHost(spec, bytes);
    if (load.size() < 2) break;
    auto most = std::max_element(load.begin(), load.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    auto least = std::min_element(load.begin(), load.end(),
                                  [](const auto& a, const auto& b) { return a.second < b.second; });
    if (most->second.copies < least->second.copies + 2) break;
    SpecHost* from = HostOf(&spec, most->first);
    SpecHost* to = HostOf(&spec, least->first);
    std::optional<uint32_t> pick;
    for (uint32_t s : *from->shards) {
      if (!Lists(*to, s) && (!pick || bytes[s] > bytes[*pick])) pick = s;
    }
    if (!pick) break;  // the lightest host holds every shard of the heaviest
    plan.push_back({*pick, from->name, to->name});
    from->shards->erase(std::find(from->shards->begin(), from->shards->end(), *pick));
    to->shards->push_back(*pick);
  }
  return plan;
}

}  // namespace

int DeployMove(const DeployContext& ctx, const std::string& shard_text, const std::string& from,
               const std::string& to) {
  auto shard = ParseShardList(shard_text);
  if (!shard.ok() || shard->size() != 1) {
    return Fail(Status::InvalidArgument("deploy move: SHARD must be one shard number"));
  }
  auto done = MoveCopy(ctx, (*shard)[0], from, to);
  if (!done.ok()) return Fail(done.status());
  std::cout << done->dump() << "\n";
  return kExitOk;
}

int DeployAddHost(const DeployContext& ctx, const std::string& name, const std::string& address,
                  const Args& args) {
  const auto start = Clock::now();
  auto loaded = ClusterSpec::Load(ctx.spec_path);
  if (!loaded.ok()) return Fail(loaded.status());
  ClusterSpec spec = *std::move(loaded);
  std::set<std::string> roles;
  std::stringstream list(args.Get("roles").value_or("shard,aggregator"));
  for (std::string r; std::getline(list, r, ',');) {
    if (r != "shard" && r != "aggregator" && r != "etcd") {
      return Fail(
          Status::InvalidArgument("--roles takes shard, aggregator and etcd, not '" + r + "'"));
    }
    roles.insert(r);
  }
  // 1. The spec: the host, with the ports the other hosts use for each role.
  if (const SpecHost* h = spec.Host(name)) {
    if (h->address != address) {
      return Fail(Status::InvalidArgument("the spec has host " + name + " at " + h->address +
                                          ", not " + address));
    }
  } else {
    SpecHost host;
    host.name = name;
    host.address = address;
    host.store = args.Get("store").value_or("");
    auto like = [&](auto has) -> const SpecHost* {
      for (const auto& h : spec.hosts) {
        if (has(h)) return &h;
      }
      return nullptr;
    };
    if (roles.count("shard")) {
      const SpecHost* t = like([](const SpecHost& h) { return h.shards.has_value(); });
      if (!t) return Fail(Status::InvalidArgument("the spec has no shard server to copy ports of"));
      host.shards = std::vector<uint32_t>();
      host.shard_port = t->shard_port;
      host.update_port = t->update_port;
      host.shard_metrics_port = t->shard_metrics_port;
    }
    if (roles.count("aggregator")) {
      const SpecHost* t = like([](const SpecHost& h) { return h.aggregator_port.has_value(); });
      if (!t) return Fail(Status::InvalidArgument("the spec has no aggregator to copy ports of"));
      host.aggregator_port = t->aggregator_port;
      host.aggregator_metrics_port = t->aggregator_metrics_port;
      host.http_port = t->http_port;
    }
    if (roles.count("etcd")) {
      if (spec.etcd_members.empty()) {
        return Fail(Status::InvalidArgument(
            "the spec's etcd is not run by zipg (etcd.endpoints): add its members there"));
      }
      cluster::SpecEtcdMember m = spec.etcd_members.front();
      m.host = name;
      m.join = true;
      spec.etcd_members.push_back(m);
    }
    spec.hosts.push_back(host);
    if (Status s = WriteSpec(ctx.spec_path, spec); !s.ok()) return Fail(s);
    std::cerr << "zipg deploy: " << ctx.spec_path << " lists host " << name << " (" << address
              << ")\n";
  }
  const SpecHost& host = *spec.Host(name);
  if (Status s = ctx.reach(spec, {name}); !s.ok()) return Fail(s);
  json out = {{"host", name}, {"address", address}};
  // 2. Its etcd member: added through the member API, then started to join.
  if (const auto* member = MemberOn(spec, name)) {
    auto etcd = EtcdOf(spec, ctx.options, name);
    const std::string peer = PeerUrl(spec, *member);
    auto found = FindMember(*etcd, peer);
    if (!found.ok()) return Fail(found.status());
    if (!*found) {
      auto added = etcd->MemberAdd({peer});
      if (!added.ok()) return Fail(added.status());
      std::cerr << "zipg deploy: etcd member " << ClusterSpec::EtcdName(name) << " added (" << peer
                << ")\n";
    }
    if (ctx.on_host(host, {"node", "start", "--roles", "etcd"}) != 0) {
      return Fail(Status::Unavailable("starting etcd on " + name + " failed"));
    }
    // Started: the member list has its name (it stays empty until the member connects). An added
    // member that does not start counts against etcd's quorum: wait a minute at most.
    const auto deadline = Clock::now() + std::min(std::chrono::milliseconds(ctx.options.timeout_ms),
                                                  std::chrono::milliseconds(60000));
    for (;;) {
      auto now = FindMember(*etcd, peer);
      if (now.ok() && *now && !(*now)->name.empty()) break;
      if (Clock::now() > deadline) {
        return Fail(Status::DeadlineExceeded(
            "etcd member " + ClusterSpec::EtcdName(name) + " on " + name +
            " was added but has not joined within 60 s (see its log, STORE/run/" +
            ClusterSpec::EtcdName(name) +
            ".log there); while it is out it counts against "
            "etcd's quorum: run this again once it can start, or `zipg deploy remove-host " +
            name + "` to take it out"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    out["etcd_member"] = ClusterSpec::EtcdName(name);
  }
  // 3. Its servers, registered in the cluster (a shard server with no shards yet).
  if (ctx.on_host(host, {"node", "start", "--roles", "servers"}) != 0) {
    return Fail(Status::Unavailable("starting the servers of " + name + " failed"));
  }
  std::vector<std::string> expect;
  if (host.shards) expect.push_back(ClusterSpec::ShardServerName(host));
  if (host.aggregator_port) expect.push_back(ClusterSpec::AggregatorName(host));
  auto client = ConnectCluster(spec, ctx.options);
  if (!client.ok()) return Fail(client.status());
  const auto deadline = Clock::now() + std::chrono::milliseconds(ctx.options.timeout_ms);
  for (;;) {
    auto names = MemberNames(**client);
    if (names.ok() && std::all_of(expect.begin(), expect.end(),
                                  [&](const std::string& n) { return names->count(n) > 0; })) {
      break;
    }
    if (Clock::now() > deadline) {
      return Fail(Status::DeadlineExceeded("the servers of " + name + " have not registered"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  out["servers"] = expect;
  out["seconds"] = Seconds(Clock::now() - start);
  std::cout << out.dump() << "\n";
  return kExitOk;
}

int DeployRemoveHost(const DeployContext& ctx, const std::string& name) {
  const auto start = Clock::now();
  auto spec = ClusterSpec::Load(ctx.spec_path);
  if (!spec.ok()) return Fail(spec.status());
  if (!spec->Host(name)) {  // removed already (a rerun after the end)
    std::cout << json{{"host", name}, {"already", true}}.dump() << "\n";
    return kExitOk;
  }
  if (spec->Host(name)->logstore_port) {
    return Fail(Status::FailedPrecondition(
        "host " + name + " runs a LogStore; moving a LogStore is not supported yet"));
  }
  int aggregators = 0;
  for (const auto& h : spec->hosts) aggregators += h.aggregator_port && h.name != name;
  if (aggregators == 0) {
    return Fail(Status::FailedPrecondition("host " + name + " runs the only aggregator"));
  }
  if (MemberOn(*spec, name) && spec->etcd_members.size() == 1) {
    return Fail(Status::FailedPrecondition("host " + name + " runs the only etcd member"));
  }
  // Reached or not: a dead host's copies are made again elsewhere from the other replicas. But a
  // host that cannot be reached while its servers are still registered may be alive (a wrong
  // transport, a spec missing there): removing it would leave them serving outside the spec.
  const Status reach = ctx.reach(*spec, {name});
  const bool reached = reach.ok();
  if (!reached) {
    auto client = ConnectCluster(*spec, ctx.options, name);
    if (!client.ok()) return Fail(client.status());
    auto names = MemberNames(**client);
    if (!names.ok()) return Fail(names.status());
    std::vector<std::string> still;
    for (const std::string& n : names.value()) {
      if (n.size() > name.size() &&
          n.compare(n.size() - name.size() - 1, std::string::npos, "-" + name) == 0) {
        still.push_back(n);
      }
    }
    if (!still.empty()) {
      std::string list;
      for (const auto& n : still) list += (list.empty() ? "" : ", ") + n;
      return Fail(Status::FailedPrecondition(
          reach.message() + "; yet its servers are registered (" + list +
          "): a dead host's servers leave the cluster when their leases expire (lease_ttl); "
          "run this again then, or fix the transport"));
    }
    std::cerr << "zipg deploy: " << reach.message() << "; its servers are gone: removing it\n";
  }
  json out = {{"host", name}, {"reached", reached}, {"moves", json::array()}};
  // 1. Its copies, one at a time, each to the host with the fewest that lacks it. A recorded move
  // to this host is taken back (its copy there is not needed), one from it is finished.
  if (spec->moving && spec->moving->to == name) {
    SpecHost* to = HostOf(&*spec, name);
    std::erase(*to->shards, spec->moving->shard);
    std::cerr << "zipg deploy: the recorded move of shard " << spec->moving->shard << " to " << name
              << " is taken back\n";
    spec->moving.reset();
    if (Status s = WriteSpec(ctx.spec_path, *spec); !s.ok()) return Fail(s);
  }
  if (Status s = FinishRecordedMove(ctx, name); !s.ok()) return Fail(s);
  for (;;) {
    spec = ClusterSpec::Load(ctx.spec_path);
    if (!spec.ok()) return Fail(spec.status());
    const SpecHost& host = *spec->Host(name);
    if (!host.shards || host.shards->empty()) break;
    const uint32_t shard = host.shards->front();
    const auto load = LoadByHost(*spec, ShardBytes(*spec), name);
    std::optional<std::string> to;
    for (const auto& [other, l] : load) {
      if (!Lists(*spec->Host(other), shard) && (!to || l < load.at(*to))) to = other;
    }
    if (!to) {
      return Fail(Status::FailedPrecondition("no other host can take shard " +
                                             std::to_string(shard) + " of " + name +
                                             " (each shard server has it): add a host first"));
    }
    auto moved = MoveCopy(ctx, shard, name, *to, name);
    if (!moved.ok()) return Fail(moved.status());
    std::cerr << "zipg deploy: " << moved->dump() << "\n";
    out["moves"].push_back(*moved);
  }
  // 2. Its servers stop (a host that cannot be reached is past stopping).
  const SpecHost host = *spec->Host(name);
  if (reached && ctx.on_host(host, {"node", "stop", "--roles", "servers"}) != 0) {
    return Fail(Status::Unavailable("stopping the servers of " + name + " failed"));
  }
  // 3. Its etcd member leaves through the member API, then stops.
  if (const auto* member = MemberOn(*spec, name)) {
    auto etcd = EtcdOf(*spec, ctx.options, name);
    auto found = FindMember(*etcd, PeerUrl(*spec, *member));
    if (!found.ok()) return Fail(found.status());
    if (*found) {
      if (Status s = etcd->MemberRemove((*found)->id); !s.ok() && s.code() != StatusCode::kNotFound)
        return Fail(s);
      std::cerr << "zipg deploy: etcd member " << ClusterSpec::EtcdName(name) << " removed\n";
    }
    if (reached) ctx.on_host(host, {"node", "stop", "--roles", "etcd"});
    out["etcd_member"] = ClusterSpec::EtcdName(name);
  }
  // 4. The spec without it.
  std::erase_if(spec->etcd_members, [&](const auto& m) { return m.host == name; });
  std::erase_if(spec->hosts, [&](const SpecHost& h) { return h.name == name; });
  if (Status s = WriteSpec(ctx.spec_path, *spec); !s.ok()) return Fail(s);
  out["seconds"] = Seconds(Clock::now() - start);
  std::cout << out.dump() << "\n";
  return kExitOk;
}

int DeployRebalance(const DeployContext& ctx, bool dry_run) {
  const auto start = Clock::now();
  if (!dry_run) {
    if (Status s = FinishRecordedMove(ctx); !s.ok()) return Fail(s);
  }
  auto spec = ClusterSpec::Load(ctx.spec_path);
  if (!spec.ok()) return Fail(spec.status());
  const auto bytes = ShardBytes(*spec);
  const auto plan = PlanRebalance(*spec, bytes);
  json planned = json::array();
  for (const auto& m : plan) {
    planned.push_back(
        {{"shard", m.shard}, {"from", m.from}, {"to", m.to}, {"bytes", bytes[m.shard]}});
  }
  std::cerr << "zipg deploy: rebalance plan: " << planned.dump() << "\n";
  json out = {{"plan", planned}, {"moves", json::array()}};
  if (!dry_run) {
    for (const auto& m : plan) {
      auto moved = MoveCopy(ctx, m.shard, m.from, m.to);
      if (!moved.ok()) return Fail(moved.status());
      std::cerr << "zipg deploy: " << moved->dump() << "\n";
      out["moves"].push_back(*moved);
    }
  }
  auto after = ClusterSpec::Load(ctx.spec_path);
  if (!after.ok()) return Fail(after.status());
  json copies = json::object();
  for (const auto& [host, l] : LoadByHost(*after, bytes)) copies[host] = l.copies;
  out["copies"] = copies;
  out["seconds"] = Seconds(Clock::now() - start);
  std::cout << out.dump() << "\n";
  return kExitOk;
}

int DeploySplit(const DeployContext& ctx) {
  const auto start = Clock::now();
  auto spec = ClusterSpec::Load(ctx.spec_path);
  if (!spec.ok()) return Fail(spec.status());
  auto client = ConnectCluster(*spec, ctx.options);
  if (!client.ok()) return Fail(client.status());
  auto split = SplitShards(**client, ctx.options);
  if (!split.ok()) return Fail(split.status());
  // The spec: the new count, and each host's shards as its server registers them (a host whose
  // server is not registered now gets the halves of what it had).
  auto text = (*client)->ServerStatus();
  if (!text.ok()) return Fail(text.status());
  const json status = json::parse(*text, nullptr, false);
  std::map<std::string, std::vector<uint32_t>> registered;
  for (const auto& m : status.value("servers", json::array())) {
    if (m.value("role", "") == "shard") {
      registered[m.value("name", "")] = m.value("shards", std::vector<uint32_t>());
    }
  }
  auto now = ClusterSpec::Load(ctx.spec_path);
  if (!now.ok()) return Fail(now.status());
  const uint32_t count = split->value("shards", 0u);
  if (count > now->shards) {
    const uint32_t before = now->shards;
    for (SpecHost& h : now->hosts) {
      if (!h.shards) continue;
      auto it = registered.find(ClusterSpec::ShardServerName(h));
      if (it != registered.end()) {
        h.shards = it->second;
        continue;
      }
      std::vector<uint32_t> halves;
      for (uint32_t s : *h.shards) {
        for (uint32_t t = s; t < count; t += before) halves.push_back(t);
      }
      std::sort(halves.begin(), halves.end());
      h.shards = halves;
    }
    now->shards = count;
    if (Status s = WriteSpec(ctx.spec_path, *now); !s.ok()) return Fail(s);
  }
  json out = *split;
  out["spec_shards"] = now->shards;
  out["seconds"] = Seconds(Clock::now() - start);
  std::cout << out.dump() << "\n";
  return kExitOk;
}

}  // namespace zipg::cli
