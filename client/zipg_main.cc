// The `zipg` program: one binary for every user-facing command (`zipg help` lists them).

#include <signal.h>

#include <iostream>
#include <string>

#include "client/cli.h"

namespace {

const char kHelp[] =
    "zipg: a compressed graph store\n"
    "\n"
    "commands:\n"
    "  zipg file build|extract|search|count|stats ...   the compressed flat file (zipg file help)\n"
    "  zipg gen text|graph ...                         generate sample data (zipg gen help)\n"
    "  zipg compress --nodes F --edges F --out DIR ...  build a compressed graph store\n"
    "  zipg query (--store DIR | --connect HOST:PORT) OP [--ARG V] | --batch F\n"
    "                                                  run operations in-process or on a cluster\n"
    "  zipg local start|stop --store DIR ...            a whole cluster on this machine, in the background\n"
    "  zipg status --connect HOST:PORT | --store DIR    describe a running cluster\n"
    "  zipg bench --connect HOST:PORT | --store DIR ... load a cluster with the TAO, LinkBench or\n"
    "                                                  Graph Search mix; throughput and latency\n"
    "  zipg admin compact --connect HOST:PORT          compress the LogStore's log into a shard now\n"
    "  zipg serve shard|logstore|aggregator ...        run one server process (zipg serve help)\n"
    "  zipg node start|stop|status --spec F --host H    this machine's part of a multi-host cluster\n"
    "  zipg deploy plan|certs|start|stop|status ...     a cluster on several machines (docs/deploy.md)\n"
    "  zipg help                                         this list\n";

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  // OpenSSL writes to sockets with write(2): a peer that closes a TLS connection would kill the
  // process with SIGPIPE (plain Thrift sockets use MSG_NOSIGNAL). Every command sees EPIPE instead.
  signal(SIGPIPE, SIG_IGN);
  const std::string cmd = argc > 1 ? argv[1] : "help";
  if (cmd == "file") return zipg::cli::RunFile(argc, argv);
  if (cmd == "gen") return zipg::cli::RunGen(argc, argv);
  if (cmd == "compress") return zipg::cli::RunCompress(argc, argv);
  if (cmd == "query") return zipg::cli::RunQuery(argc, argv);
  if (cmd == "serve") return zipg::cli::RunServe(argc, argv);
  if (cmd == "local") return zipg::cli::RunLocal(argc, argv);
  if (cmd == "status") return zipg::cli::RunStatus(argc, argv);
  if (cmd == "bench") return zipg::cli::RunBench(argc, argv);
  if (cmd == "admin") return zipg::cli::RunAdmin(argc, argv);
  if (cmd == "node") return zipg::cli::RunNode(argc, argv);
  if (cmd == "deploy") return zipg::cli::RunDeploy(argc, argv);
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::cout << kHelp;
    return zipg::cli::kExitOk;
  }
  std::cerr << "zipg: unknown command '" << cmd << "'\n" << kHelp;
  return zipg::cli::kExitUsage;
}
