// zipg admin compact: compress the LogStore's current generation into a new log shard now
// (docs/writes.md, "Periodic compression"); otherwise the LogStore's size threshold does it.

#include <iostream>

#include "client/cli.h"
#include "client/client.h"

namespace zipg::cli {
namespace {

const char kUsage[] =
    "usage:\n"
    "  zipg admin compact --connect HOST:PORT [--timeout-ms MS]\n"
    "      compress the LogStore's log into a new shard now, through an aggregator (or the\n"
    "      LogStore itself); prints a JSON summary (generation, nodes, edges, seconds)\n"
    "  zipg admin compact --store DIR       (a cluster started with zipg local start)\n";

}  // namespace

int RunAdmin(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, 2, {});
  if (!args.ok()) return UsageError(args.status().message(), kUsage);
  if (args->positional().size() != 1 || args->positional()[0] != "compact") {
    return UsageError("admin needs a subcommand: compact", kUsage);
  }
  Status known = args->CheckKnown({"connect", "store", "timeout-ms"});
  if (!known.ok()) return UsageError(known.message(), kUsage);
  std::string address;
  if (auto connect = args->Get("connect")) {
    address = *connect;
  } else if (auto store = args->Get("store")) {
    auto aggregators = LocalAggregators(*store);
    if (!aggregators.ok()) return Fail(aggregators.status());
    address = aggregators->front();
  } else {
    return UsageError("admin compact needs --connect HOST:PORT or --store DIR", kUsage);
  }
  auto timeout = args->GetUint("timeout-ms", 3600000);
  if (!timeout.ok() || *timeout == 0 || *timeout > 86400000) {
    return UsageError("--timeout-ms must be 1..86400000", kUsage);
  }
  ClientOptions options;
  options.timeout_ms = static_cast<int>(*timeout);
  auto client = Connect(address, options);
  if (!client.ok()) return Fail(client.status());
  auto summary = (*client)->Compact();
  if (!summary.ok()) return Fail(summary.status());
  std::cout << *summary << "\n";
  return kExitOk;
}

}  // namespace zipg::cli
