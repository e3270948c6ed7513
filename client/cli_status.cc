// zipg status: describe a running cluster as one of its aggregators sees it in etcd: members,
// shard map, health, store, and each member's memory (resident, and what its own accounting says
// its data holds), asked of the member itself. Exit 0 if healthy, 1 if not (or unreachable).

#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "client/cli.h"
#include "client/client.h"

namespace zipg::cli {
namespace {

using nlohmann::json;

const char kUsage[] =
    "usage:\n"
    "  zipg status --connect HOST:PORT [--json]\n"
    "  zipg status --store DIR [--json]     (a cluster started with zipg local start)\n"
    "  --json   print the status document as JSON\n";

void PrintHuman(const json& s) {
  std::cout << "cluster " << s.value("cluster", "?") << " (etcd " << s.value("etcd", "?")
            << "): " << (s.value("healthy", false) ? "healthy" : "NOT healthy") << "\n";
  if (s.contains("problem")) std::cout << "problem: " << s["problem"].get<std::string>() << "\n";
  const json store = s.value("store", json::object());
  if (!store.empty()) {
    std::cout << "store " << store.value("dir", "?") << ": " << store.value("nodes", 0)
              << " nodes, " << store.value("edges", 0) << " edges, " << s.value("num_shards", 0)
              << " shards\n";
  }
  std::cout << "servers (as seen by aggregator " << s.value("aggregator", "?") << "):\n";
  for (const auto& m : s.value("servers", json::array())) {
    std::cout << "  " << std::left << std::setw(11) << m.value("role", "?") << std::setw(16)
              << m.value("name", "?") << std::setw(22) << m.value("endpoint", "?") << "pid "
              << m.value("pid", 0);
    if (m.contains("shards")) std::cout << "  shards " << m["shards"].dump();
    if (m.contains("catching_up")) std::cout << " (catching up " << m["catching_up"].dump() << ")";
    const json memory = m.value("memory", json());
    if (memory.is_object()) {
      auto mib = [&](const char* key) { return memory.value(key, uint64_t{0}) / 1048576; };
      std::cout << "  rss " << mib("rss_bytes") << " MiB (heap " << mib("anon_bytes") << ", mapped "
                << mib("file_bytes") << "), data " << mib("accounted_bytes") << " MiB";
    }
    std::cout << "\n";
  }
  const json unserved = s.value("unserved_shards", json::array());
  std::cout << "unserved shards: " << (unserved.empty() ? "none" : unserved.dump()) << "\n";
}

}  // namespace

int RunStatus(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, 2, {"json"});
  if (!args.ok()) return UsageError(args.status().message(), kUsage);
  Status known = args->CheckKnown(WithTls({"connect", "store", "json"}));
  if (!known.ok()) return UsageError(known.message(), kUsage);
  if (auto tls = ApplyTlsArgs(*args); !tls.ok()) return UsageError(tls.status().message(), kUsage);
  auto address = ClusterAddress(*args);
  if (!address.ok()) return Fail(address.status());
  if (!*address) return UsageError("status needs --connect HOST:PORT or --store DIR", kUsage);
  auto client = Connect(**address);
  if (!client.ok()) return Fail(client.status());
  auto text = (*client)->ServerStatus();
  if (!text.ok()) return Fail(text.status());
  json s = json::parse(*text, nullptr, false);
  if (s.is_discarded()) return Fail(Status::Internal("the status document is not JSON"));
  // Each member's own status has its memory; a member that does not answer gets none.
  ClientOptions quick;
  quick.timeout_ms = 2000;
  if (s.contains("servers") && s["servers"].is_array()) {
    for (auto& m : s["servers"]) {
      auto member = Connect(m.value("endpoint", ""), quick);
      if (!member.ok()) continue;
      auto own = (*member)->ServerStatus();
      if (!own.ok()) continue;
      const json o = json::parse(*own, nullptr, false);
      if (o.is_object() && o.contains("memory")) m["memory"] = o["memory"];
    }
  }
  if (args->Has("json")) {
    std::cout << s.dump(2) << "\n";
  } else {
    PrintHuman(s);
  }
  return s.value("healthy", false) ? kExitOk : kExitFailure;
}

}  // namespace zipg::cli
