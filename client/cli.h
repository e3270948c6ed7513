// The `zipg` command line: argument parsing shared by the subcommands, and the subcommand entry
// points.
//
// Every subcommand returns the process exit code: 0 success, 1 failure (a message on stderr), 2
// usage error.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "client/client.h"
#include "graph/traversal.h"
#include "rpc/tls.h"
#include "util/status.h"

namespace zipg::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Positional arguments and --name value / --name=value options. Flags listed as boolean take no
// value.
class Args {
 public:
  // Parses argv[first..]; INVALID_ARGUMENT for an option missing its value.
  static StatusOr<Args> Parse(int argc, char** argv, int first,
                              const std::vector<std::string>& boolean_flags = {});

  const std::vector<std::string>& positional() const { return positional_; }
  bool Has(const std::string& name) const { return options_.count(name) > 0; }
  std::optional<std::string> Get(const std::string& name) const;
  // The option as an unsigned integer, `fallback` if absent; INVALID_ARGUMENT if not a number.
  StatusOr<uint64_t> GetUint(const std::string& name, uint64_t fallback) const;
  // INVALID_ARGUMENT naming the first option not in `known`.
  Status CheckKnown(const std::vector<std::string>& known) const;
  const std::map<std::string, std::string>& options() const { return options_; }

 private:
  std::vector<std::string> positional_;
  std::map<std::string, std::string> options_;
};

// Parses a whole decimal unsigned integer; INVALID_ARGUMENT naming `what` otherwise.
StatusOr<uint64_t> ParseUint(const std::string& text, const std::string& what);

// --tls-ca F --tls-cert F --tls-key F: mutual TLS (rpc/tls.h), taken by every command that
// connects to a server (add kTlsFlags to its known options).
inline const std::vector<std::string> kTlsFlags = {"tls-ca", "tls-cert", "tls-key"};
inline const char kTlsUsage[] =
    "  --tls-ca F --tls-cert F --tls-key F  mutual TLS: the cluster's CA, this side's certificate\n"
    "                   and key (all three, or none for plaintext)\n";
rpc::TlsOptions TlsFromArgs(const Args& args);
// TlsFromArgs, validated, made the default of every client connection of this process.
StatusOr<rpc::TlsOptions> ApplyTlsArgs(const Args& args);
// `known` plus kTlsFlags.
std::vector<std::string> WithTls(std::vector<std::string> known);
// `known` plus `more`.
std::vector<std::string> WithFlags(std::vector<std::string> known,
                                   const std::vector<std::string>& more);

// --traversal-deadline-ms MS and --traversal-memory SIZE: the bounds of each bfs / rpq a server
// (or the embedded store) coordinates (docs/traversal.md).
inline const std::vector<std::string> kTraversalFlags = {"traversal-deadline-ms",
                                                         "traversal-memory"};
StatusOr<graph::TraversalLimits> TraversalLimitsFromArgs(const Args& args);

// A --shards list such as 0,2,5.
StatusOr<std::vector<uint32_t>> ParseShardList(const std::string& text);

// Prints "zipg: error: <message>" to stderr and returns kExitFailure.
int Fail(const Status& status);
int UsageError(const std::string& message, const std::string& usage);

// The aggregator endpoints of the cluster `zipg local start` runs for `store` (from
// <store>/run/cluster.json); NOT_FOUND if none runs.
StatusOr<std::vector<std::string>> LocalAggregators(const std::string& store);
// The server a cluster command talks to: --connect HOST:PORT, or the first aggregator of the local
// cluster of --store DIR; nullopt if neither option is given.
StatusOr<std::optional<std::string>> ClusterAddress(const Args& args);

// Runs a compaction through `client` (an aggregator or the LogStore) and waits until the LogStore
// publishes it: the summary of the compaction, or the LogStore's answer if nothing was compressed.
StatusOr<nlohmann::json> CompactAndWait(rpc::RemoteGraph& client, const ClientOptions& options);
// Moves shard `shard`'s copy on shard server `from` to shard server `to` (names in the cluster
// `client` reaches): `to` serves it, and once it serves it caught up, `from` stops
// (docs/cluster-changes.md, step 2). Rerunnable: each step is skipped once done. Its summary.
StatusOr<nlohmann::json> MoveShard(rpc::RemoteGraph& client, uint32_t shard,
                                   const std::string& from, const std::string& to,
                                   const ClientOptions& options);

// Doubles the shards of the cluster `client` reaches (docs/cluster-changes.md, step 4): every
// shard server prepares, then the LogStore leader switches; waits until every shard server
// registers the new count. Its summary.
StatusOr<nlohmann::json> SplitShards(rpc::RemoteGraph& client, const ClientOptions& options);

// `zipg bench --mix hot` and `--mix load` (client/cli_bench_hot.cc).
int RunHotBench(const std::vector<std::string>& endpoints, const Args& args);
int RunLoadBench(const std::vector<std::string>& endpoints, const Args& args);
int RunTraversalBench(const Args& args);
// `zipg bench --mix search` (client/cli_bench_search.cc).
int RunSearchBench(const Args& args);

int RunFile(int argc, char** argv);      // zipg file ...
int RunGen(int argc, char** argv);       // zipg gen ...
int RunCompress(int argc, char** argv);  // zipg compress ...
int RunQuery(int argc, char** argv);     // zipg query ...
int RunServe(int argc, char** argv);     // zipg serve ...
int RunNode(int argc, char** argv);      // zipg node ...
int RunDeploy(int argc, char** argv);    // zipg deploy ...
int RunLocal(int argc, char** argv);     // zipg local ...
int RunStatus(int argc, char** argv);    // zipg status ...
int RunBench(int argc, char** argv);     // zipg bench ...
int RunAdmin(int argc, char** argv);     // zipg admin ...

}  // namespace zipg::cli
