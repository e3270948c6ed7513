// zipg admin compact: compress the LogStore's current generation into a new log shard now
// (docs/writes.md, "Periodic compression"); otherwise the LogStore's size threshold does it.
// zipg admin rebuild: fold the writes of base shards into new compressed files now
// (docs/writes.md, "Rebuilding a base shard"); otherwise each shard's delta size does it.

#include <algorithm>
#include <chrono>
#include <iostream>
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
    "      summary per server and shard\n";

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

// Rebuilds `shards` (all if empty) once each, on its first serving replica by name (the one
// whose threshold would), then makes every other replica adopt that version; their summaries by
// server name and shard.
StatusOr<json> RebuildEverywhere(Client& client, const std::vector<uint32_t>& shards,
                                 const ClientOptions& options) {
  ZIPG_ASSIGN_OR_RETURN(std::string text, client.ServerStatus());
  const json status = json::parse(text, nullptr, false);
  if (!status.is_object()) return Status::Internal("the cluster's status is not JSON");
  std::map<uint32_t, std::map<std::string, std::string>> replicas;  // shard -> name -> endpoint
  for (const auto& m : status.value("servers", json::array())) {
    if (m.value("role", "") != "shard" || !m.value("serving", false)) continue;
    for (const auto& s : m.value("shards", json::array())) {
      const auto shard = s.get<uint32_t>();
      if (shards.empty() || std::find(shards.begin(), shards.end(), shard) != shards.end()) {
        replicas[shard][m.value("name", "")] = m.value("endpoint", "");
      }
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

int RunAdmin(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, 2, {});
  if (!args.ok()) return UsageError(args.status().message(), kUsage);
  const std::string what = args->positional().size() == 1 ? args->positional()[0] : "";
  if (what != "compact" && what != "rebuild") {
    return UsageError("admin needs a subcommand: compact or rebuild", kUsage);
  }
  Status known = args->CheckKnown(WithTls(
      what == "rebuild" ? std::vector<std::string>{"connect", "store", "timeout-ms", "shards"}
                        : std::vector<std::string>{"connect", "store", "timeout-ms"}));
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
  auto client = Connect(**address, options);
  if (!client.ok()) return Fail(client.status());
  auto summary = what == "compact" ? CompactAndWait(**client, options)
                                   : RebuildEverywhere(**client, shards, options);
  if (!summary.ok()) return Fail(summary.status());
  std::cout << (summary->is_string() ? summary->get<std::string>() : summary->dump()) << "\n";
  return kExitOk;
}

}  // namespace zipg::cli
