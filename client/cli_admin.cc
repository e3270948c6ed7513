// zipg admin compact: compress the LogStore's current generation into a new log shard now
// (docs/writes.md, "Periodic compression"); otherwise the LogStore's size threshold does it.
// zipg admin rebuild: fold the writes of base shards into new compressed files now
// (docs/writes.md, "Rebuilding a base shard"); otherwise each shard's delta size does it.
// zipg admin move / unserve: a shard's copy moves from one shard server to another, or leaves one
// (docs/cluster-changes.md, step 2).
// zipg admin split: doubles the number of shards online (docs/cluster-changes.md, step 4).

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "client/cli.h"
#include "client/client.h"

namespace zipg::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

const char kUsage[] =
    "usage:\n"
    "  zipg admin compact --connect HOST:PORT [--timeout-ms MS]\n"
    "      compress the LogStore's log into a new shard now, through an aggregator (or the\n"
    "      LogStore itself); prints a JSON summary (generation, nodes, edges, seconds)\n"
    "  zipg admin compact --store DIR       (a cluster started with zipg local start)\n"
    "  zipg admin rebuild (--connect HOST:PORT | --store DIR) [--shards LIST] [--timeout-ms MS]\n"
    "      rebuild the listed base shards (default all): their writes go into new compressed\n"
    "      files, built by one replica of each shard and copied to the others; prints a JSON\n"
    "      summary per server and shard\n"
    "  zipg admin move (--connect HOST:PORT | --store DIR) --shard S --from NAME --to NAME\n"
    "                  [--timeout-ms MS]\n"
    "      shard server TO serves shard S too (fetching its files from a replica if it has\n"
    "      none), and once TO serves it caught up, FROM stops serving it: never fewer serving\n"
    "      copies than before. Safe to run again after an interruption. Prints a JSON summary\n"
    "  zipg admin unserve (--connect HOST:PORT | --store DIR) --shard S --server NAME\n"
    "      shard server NAME stops serving shard S (refused if no other server serves it)\n"
    "  zipg admin split (--connect HOST:PORT | --store DIR) [--timeout-ms MS]\n"
    "      doubles the number of shards, online: every shard server builds the two halves of\n"
    "      each shard it hosts from its own copy, then the LogStore switches the cluster to the\n"
    "      new count (writes wait a moment). Safe to run again after an interruption. Prints a\n"
    "      JSON summary (docs/cluster-changes.md, step 4)\n";

}  // namespace

StatusOr<json> CompactAndWait(Client& client, const ClientOptions& options) {
  ZIPG_ASSIGN_OR_RETURN(std::string started_text, client.Compact());
  const json started = json::parse(started_text, nullptr, false);
  if (!started.is_object() || !started.value("started", false)) {
    return started.is_discarded() ? json(started_text) : started;  // nothing to compress
  }
  const int64_t generation = started.value("generation", int64_t{0});
  // The LogStore compresses in the background; follow its status until the generation is
  // published as a log shard.
  std::unique_ptr<Client> logstore;
  const auto deadline = Clock::now() + std::chrono::milliseconds(options.timeout_ms);
  for (;;) {
    Client& c = logstore ? *logstore : client;
    ZIPG_ASSIGN_OR_RETURN(std::string text, c.ServerStatus());
    const json status = json::parse(text, nullptr, false);
    if (status.is_object() && status.contains("logstore") && status["logstore"].is_object()) {
      const json& log = status["logstore"];
      const json& last = log.value("last_compaction", json());
      if (last.is_object() && last.value("generation", int64_t{0}) >= generation) return last;
      if (log.contains("last_error")) {
        return Status::Internal("compaction failed: " + log["last_error"].dump());
      }
    } else if (!logstore) {
      for (const auto& m : status.value("servers", json::array())) {
        if (m.value("role", "") != "logstore") continue;
        ZIPG_ASSIGN_OR_RETURN(logstore, Connect(m.value("endpoint", ""), options));
      }
      if (!logstore) return Status::Unavailable("no LogStore in the cluster's status");
      continue;
    }
    if (Clock::now() > deadline) {
      return Status::DeadlineExceeded("generation " + std::to_string(generation) +
                                      " is still being compressed");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

namespace {

struct ShardServer {
  std::string endpoint;
  bool serving = false;
  uint32_t num_shards = 0;
  std::vector<uint32_t> shards, catching_up;
};

// The shard servers in the cluster's status document, by name.
StatusOr<std::map<std::string, ShardServer>> ShardServers(Client& client) {
  ZIPG_ASSIGN_OR_RETURN(std::string text, client.ServerStatus());
  const json status = json::parse(text, nullptr, false);
  if (!status.is_object()) return Status::Internal("the cluster's status is not JSON");
  std::map<std::string, ShardServer> out;
  for (const auto& m : status.value("servers", json::array())) {
    if (m.value("role", "") != "shard") continue;
    ShardServer& s = out[m.value("name", "")];
    s.endpoint = m.value("endpoint", "");
    s.serving = m.value("serving", false);
    s.shards = m.value("shards", std::vector<uint32_t>());
    s.catching_up = m.value("catching_up", std::vector<uint32_t>());
    s.num_shards = m.value("num_shards", 0u);
  }
  return out;
}

bool Lists(const std::vector<uint32_t>& list, uint32_t shard) {
  return std::find(list.begin(), list.end(), shard) != list.end();
}

// Whether `s` answers reads of `shard`.
bool Serves(const ShardServer& s, uint32_t shard) {
  return s.serving && Lists(s.shards, shard) && !Lists(s.catching_up, shard);
}

// Polls the cluster's status every 100 ms until `done` holds, or DEADLINE_EXCEEDED with `what`.
Status AwaitStatus(Client& client, Clock::time_point deadline, const std::string& what,
                   const std::function<bool(const std::map<std::string, ShardServer>&)>& done) {
  for (;;) {
    auto servers = ShardServers(client);
    if (servers.ok() && done(*servers)) return Status::OK();
    if (Clock::now() > deadline) {
      return Status::DeadlineExceeded(
          what +
          (servers.ok() ? std::string() : " (last status: " + servers.status().ToString() + ")"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

// Rebuilds `shards` (all if empty) once each, on its first serving replica by name (the one
// whose threshold would), then makes every other replica adopt that version; their summaries by
// server name and shard.
StatusOr<json> RebuildEverywhere(Client& client, const std::vector<uint32_t>& shards,
                                 const ClientOptions& options) {
  ZIPG_ASSIGN_OR_RETURN(auto servers, ShardServers(client));
  std::map<uint32_t, std::map<std::string, std::string>> replicas;  // shard -> name -> endpoint
  for (const auto& [name, server] : servers) {
    if (!server.serving) continue;
    for (uint32_t shard : server.shards) {
      if (shards.empty() || Lists(shards, shard)) replicas[shard][name] = server.endpoint;
    }
  }
  if (replicas.empty())
    return Status::NotFound("no shard server in the cluster hosts those shards");
  json out = json::object();
  for (const auto& [shard, servers] : replicas) {
    const std::string builder = servers.begin()->first;
    for (const auto& [name, endpoint] : servers) {
      ZIPG_ASSIGN_OR_RETURN(auto server, Connect(endpoint, options));
      ZIPG_ASSIGN_OR_RETURN(std::string summary, server->Rebuild({static_cast<int32_t>(shard)},
                                                                 name == builder ? "" : builder));
      const json j = json::parse(summary, nullptr, false);
      if (j.is_object()) out[name].update(j);
    }
  }
  return out;
}

StatusOr<json> MoveShard(Client& client, uint32_t shard, const std::string& from,
                         const std::string& to, const ClientOptions& options) {
  if (from == to) return Status::InvalidArgument("move: --from and --to name the same server");
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(options.timeout_ms);
  ZIPG_ASSIGN_OR_RETURN(auto servers, ShardServers(client));
  if (!servers.count(to)) return Status::NotFound("no shard server named " + to);
  const bool from_known = servers.count(from) > 0;
  // 1. TO serves it too: fetched, opened, caught up (a rerun finds it served already).
  if (!Serves(servers[to], shard)) {
    ZIPG_ASSIGN_OR_RETURN(auto target, Connect(servers[to].endpoint, options));
    ZIPG_RETURN_IF_ERROR(target->Serve(static_cast<int32_t>(shard)));
  }
  const auto added = Clock::now();
  ZIPG_RETURN_IF_ERROR(AwaitStatus(
      client, deadline,
      to + " does not serve shard " + std::to_string(shard) + " yet; " + from + " still serves it",
      [&](const auto& now) { return now.count(to) && Serves(now.at(to), shard); }));
  const auto caught_up = Clock::now();
  // 2. Only then FROM stops serving it (a rerun after this step finds nothing to do).
  if (from_known && Lists(servers[from].shards, shard)) {
    ZIPG_ASSIGN_OR_RETURN(auto source, Connect(servers[from].endpoint, options));
    ZIPG_RETURN_IF_ERROR(source->Unserve(static_cast<int32_t>(shard)));
    ZIPG_RETURN_IF_ERROR(AwaitStatus(
        client, deadline, from + " still lists shard " + std::to_string(shard),
        [&](const auto& now) { return !now.count(from) || !Lists(now.at(from).shards, shard); }));
  }
  auto secs = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  json out = {{"shard", shard},
              {"from", from},
              {"to", to},
              {"serve_seconds", secs(added - start)},
              {"catch_up_seconds", secs(caught_up - added)},
              {"seconds", secs(Clock::now() - start)}};
  // What TO fetched, from its own status document.
  if (auto target = Connect(servers[to].endpoint, options); target.ok()) {
    if (auto text = (*target)->ServerStatus(); text.ok()) {
      const json doc = json::parse(*text, nullptr, false);
      if (doc.is_object() && doc.contains("fetched") &&
          doc["fetched"].contains(std::to_string(shard))) {
        out["fetched"] = doc["fetched"][std::to_string(shard)];
      }
    }
  }
  return out;
}

StatusOr<json> SplitShards(Client& client, const ClientOptions& options) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(options.timeout_ms);
  ZIPG_ASSIGN_OR_RETURN(std::string text, client.ServerStatus());
  const json status = json::parse(text, nullptr, false);
  if (!status.is_object()) return Status::Internal("the cluster's status is not JSON");
  // The count now: the smallest a shard server registers (a rerun after an interrupted switch
  // finds some servers at the new count already).
  uint32_t count = 0;
  std::map<std::string, std::string> shard_servers;  // name -> endpoint
  std::string logstore;
  for (const auto& m : status.value("servers", json::array())) {
    const std::string role = m.value("role", "");
    if (role == "shard") {
      const uint32_t n = m.value("num_shards", 0u);
      if (n != 0 && (count == 0 || n < count)) count = n;
      shard_servers[m.value("name", "")] = m.value("endpoint", "");
    } else if (role == "logstore" && m.value("leader", true)) {
      logstore = m.value("endpoint", "");
    }
  }
  if (count == 0 || shard_servers.empty())
    return Status::Unavailable("no shard server is registered");
  if (logstore.empty()) return Status::Unavailable("no LogStore leader is registered");
  const uint32_t target = 2 * count;
  // 1. Every shard server prepares the halves of the shards it hosts, all at once.
  json prepared = json::object();
  {
    std::vector<std::thread> threads;
    std::mutex mu;
    Status failed;
    for (const auto& [name, endpoint] : shard_servers) {
      threads.emplace_back([&, name = name, endpoint = endpoint] {
        StatusOr<std::string> done = Status::Unavailable("not connected");
        if (auto server = Connect(endpoint, options); server.ok()) {
          done = (*server)->Split(target);
        } else {
          done = server.status();
        }
        std::lock_guard lock(mu);
        if (!done.ok()) {
          if (failed.ok())
            failed = Status(done.status().code(), name + ": " + done.status().message());
          return;
        }
        prepared[name] = json::parse(*done, nullptr, false);
      });
    }
    for (auto& t : threads) t.join();
    ZIPG_RETURN_IF_ERROR(failed);
  }
  const auto prepared_at = Clock::now();
  // 2. The LogStore switches the cluster (a rerun after the switch: the LogStore says so).
  ZIPG_ASSIGN_OR_RETURN(auto log, Connect(logstore, options));
  ZIPG_ASSIGN_OR_RETURN(std::string switched_text, log->Split(target));
  const auto switched_at = Clock::now();
  // 3. Every shard server registered with the new count.
  ZIPG_RETURN_IF_ERROR(AwaitStatus(
      client, deadline,
      "some shard server has not switched to " + std::to_string(target) + " shards",
      [&](const auto& now) {
        return std::all_of(now.begin(), now.end(),
                           [&](const auto& server) { return server.second.num_shards == target; });
      }));
  auto secs = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  return json{{"shards_before", count},
              {"shards", target},
              {"prepared", prepared},
              {"switch", json::parse(switched_text, nullptr, false)},
              {"prepare_seconds", secs(prepared_at - start)},
              {"switch_seconds", secs(switched_at - prepared_at)},
              {"seconds", secs(Clock::now() - start)}};
}

StatusOr<json> UnserveShard(Client& client, uint32_t shard, const std::string& server,
                            const ClientOptions& options) {
  ZIPG_ASSIGN_OR_RETURN(auto servers, ShardServers(client));
  if (!servers.count(server)) return Status::NotFound("no shard server named " + server);
  ZIPG_ASSIGN_OR_RETURN(auto target, Connect(servers[server].endpoint, options));
  ZIPG_RETURN_IF_ERROR(target->Unserve(static_cast<int32_t>(shard)));
  return json{{"shard", shard}, {"server", server}, {"serving", false}};
}

int RunAdmin(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, 2, {});
  if (!args.ok()) return UsageError(args.status().message(), kUsage);
  const std::string what = args->positional().size() == 1 ? args->positional()[0] : "";
  if (what != "compact" && what != "rebuild" && what != "move" && what != "unserve" &&
      what != "split") {
    return UsageError("admin needs a subcommand: compact, rebuild, move, unserve or split", kUsage);
  }
  std::vector<std::string> flags = {"connect", "store", "timeout-ms"};
  if (what == "rebuild") flags.push_back("shards");
  if (what == "move") flags.insert(flags.end(), {"shard", "from", "to"});
  if (what == "unserve") flags.insert(flags.end(), {"shard", "server"});
  Status known = args->CheckKnown(WithTls(flags));
  if (!known.ok()) return UsageError(known.message(), kUsage);
  if (auto tls = ApplyTlsArgs(*args); !tls.ok()) return UsageError(tls.status().message(), kUsage);
  auto address = ClusterAddress(*args);
  if (!address.ok()) return Fail(address.status());
  if (!*address) {
    return UsageError("admin " + what + " needs --connect HOST:PORT or --store DIR", kUsage);
  }
  std::vector<uint32_t> shards;
  if (args->Get("shards")) {
    auto list = ParseShardList(*args->Get("shards"));
    if (!list.ok()) return UsageError(list.status().message(), kUsage);
    shards = *list;
  }
  auto timeout = args->GetUint("timeout-ms", 3600000);
  if (!timeout.ok() || *timeout == 0 || *timeout > 86400000) {
    return UsageError("--timeout-ms must be 1..86400000", kUsage);
  }
  ClientOptions options;
  options.timeout_ms = static_cast<int>(*timeout);
  uint32_t shard = 0;
  if (what == "move" || what == "unserve") {
    for (const char* flag : what == "move" ? std::vector<const char*>{"shard", "from", "to"}
                                           : std::vector<const char*>{"shard", "server"}) {
      if (!args->Get(flag)) {
        return UsageError("admin " + what + " needs --" + std::string(flag), kUsage);
      }
    }
    auto s = args->GetUint("shard", 0);
    if (!s.ok() || *s > std::numeric_limits<int32_t>::max()) {
      return UsageError("--shard must be a shard number", kUsage);
    }
    shard = static_cast<uint32_t>(*s);
  }
  auto client = Connect(**address, options);
  if (!client.ok()) return Fail(client.status());
  StatusOr<json> summary =
      what == "compact"   ? CompactAndWait(**client, options)
      : what == "rebuild" ? RebuildEverywhere(**client, shards, options)
      : what == "move"  ? MoveShard(**client, shard, *args->Get("from"), *args->Get("to"), options)
      : what == "split" ? SplitShards(**client, options)
                        : UnserveShard(**client, shard, *args->Get("server"), options);
  if (!summary.ok()) return Fail(summary.status());
  std::cout << (summary->is_string() ? summary->get<std::string>() : summary->dump()) << "\n";
  return kExitOk;
}

}  // namespace zipg::cli
