// zipg query: run contract operations against a store in-process (--store DIR) or a cluster
// (--connect HOST:PORT): one operation from the command line, or JSON lines with --batch. The
// output is the same either way (client/query_json.h).

#include <algorithm>
#include <fstream>
#include <iostream>

#include "client/cli.h"
#include "client/client.h"
#include "http/query_json.h"
#include "graph/graph.h"

namespace zipg::cli {
namespace {

const char kUsage[] =
    "usage:\n"
    "  zipg query --store DIR OP [--ARG VALUE ...]\n"
    "      one operation; VALUE is JSON when it parses as JSON, else a string, e.g.\n"
    "      zipg query --store s obj_get --id 7\n"
    "      zipg query --store s get_node_ids --properties '{\"city\": \"Paris\"}'\n"
    "      zipg query --store s search_node_ids --pattern Ali --match prefix [--property name]\n"
    "  zipg query --connect HOST:PORT OP [--ARG VALUE ...]\n"
    "      the same against a cluster, through one of its aggregators\n"
    "  zipg query (--store DIR | --connect HOST:PORT) --batch FILE|- [--write-batch N]\n"
    "      JSON lines {\"op\": OP, ARG: VALUE, ...} in, one {\"ok\": ...} or\n"
    "      {\"error\": {\"code\", \"message\"}} line out per request, in order;\n"
    "      --write-batch N sends up to N consecutive write lines as one write_batch\n"
    "      (each still answered on its own line; default 1: one call per line)\n"
    "  --at SEQ      (any read, also a --batch line's \"at\") answer as of snapshot SEQ,\n"
    "                from `zipg query --connect HOST:PORT snapshot` (docs/consistency.md)\n"
    "  --no-verify   skip checksum verification when opening the store\n"
    "  --timeout-ms MS  per-call timeout with --connect (default 10000)\n"
    "  --traversal-deadline-ms MS --traversal-memory SIZE  with --store: the bounds of each\n"
    "                bfs / rpq (default 5000 ms, 256M; docs/traversal.md)\n"
    "  --tls-ca F --tls-cert F --tls-key F  with --connect: mutual TLS\n"
    "  prints {\"ok\": result} or {\"error\": ...}; exit status 1 if a single operation fails\n";

int RunBatch(GraphApi& graph, GraphWriteApi* writer, const std::string& source,
             uint64_t write_batch) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (source != "-") {
    file.open(source);
    if (!file) return Fail(Status::IOError(source + ": cannot open"));
    in = &file;
  }
  http::RunJsonLines(graph, writer, *in, write_batch,
                     [](const std::string& line) { std::cout << line << '\n'; });
  std::cout.flush();
  return kExitOk;
}

}  // namespace

int RunQuery(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, 2, {"no-verify"});
  if (!args.ok()) return UsageError(args.status().message(), kUsage);
  const auto store = args->Get("store");
  const auto connect = args->Get("connect");
  if (!store == !connect)
    return UsageError("query needs --store DIR or --connect HOST:PORT", kUsage);
  std::unique_ptr<GraphApi> graph;
  GraphWriteApi* writer = nullptr;
  if (store) {
    GraphOpenOptions open_options;
    open_options.verify_checksums = !args->Has("no-verify");
    auto limits = TraversalLimitsFromArgs(*args);
    if (!limits.ok()) return UsageError(limits.status().message(), kUsage);
    auto opened = Graph::Open(*store, open_options);
    if (!opened.ok()) return Fail(opened.status());
    (*opened)->set_traversal_limits(*limits);
    graph = std::move(*opened);
  } else {
    auto timeout = args->GetUint("timeout-ms", 10000);
    if (!timeout.ok() || *timeout == 0 || *timeout > 3600000) {
      return UsageError("--timeout-ms must be 1..3600000", kUsage);
    }
    ClientOptions options;
    options.timeout_ms = static_cast<int>(*timeout);
    auto tls = ApplyTlsArgs(*args);
    if (!tls.ok()) return UsageError(tls.status().message(), kUsage);
    auto client = Connect(*connect, options);
    if (!client.ok()) return Fail(client.status());
    writer = client->get();
    graph = std::move(*client);
  }

  if (auto batch = args->Get("batch")) {
    if (!args->positional().empty()) return UsageError("--batch takes no operation", kUsage);
    auto write_batch = args->GetUint("write-batch", 1);
    if (!write_batch.ok() || *write_batch == 0 || *write_batch > 1000000) {
      return UsageError("--write-batch must be 1..1000000", kUsage);
    }
    return RunBatch(*graph, writer, *batch, *write_batch);
  }
  if (args->Has("write-batch")) return UsageError("--write-batch goes with --batch", kUsage);
  if (args->positional().size() != 1) return UsageError("query needs one operation", kUsage);
  nlohmann::json request = {{"op", args->positional()[0]}};
  for (const auto& [name, value] : args->options()) {
    if (name == "store" || name == "connect" || name == "no-verify" || name == "timeout-ms" ||
        name == "write-batch" ||
        std::find(kTlsFlags.begin(), kTlsFlags.end(), name) != kTlsFlags.end() ||
        std::find(kTraversalFlags.begin(), kTraversalFlags.end(), name) != kTraversalFlags.end()) {
      continue;
    }
    // Always text: "--expr 1" is the expression 1, "--pattern 42" the two bytes "42".
    if (name == "expr" || name == "pattern" || name == "property" || name == "match") {
      request[name] = value;
      continue;
    }
    nlohmann::json parsed = nlohmann::json::parse(value, nullptr, false);
    request[name] = parsed.is_discarded() ? nlohmann::json(value) : parsed;
  }
  const nlohmann::json response = http::ExecuteJson(*graph, request, writer);
  std::cout << http::ResponseLine(response) << '\n';
  return response.contains("ok") ? kExitOk : kExitFailure;
}

}  // namespace zipg::cli
