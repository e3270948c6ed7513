// What the `zipg deploy` commands that change a running cluster's hosts and placement
// (client/cli_deploy_hosts.cc: move, add-host, remove-host, rebalance) need from the transport
// that client/cli_deploy.cc sets up (docs/deploy.md, docs/cluster-changes.md).
//
// Thread-safety: used by one command's thread.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "client/cli.h"
#include "client/client.h"
#include "cluster/spec.h"

namespace zipg::cli {

struct DeployContext {
  std::string spec_path;  // the spec file, rewritten by each step
  // Runs `zipg COMMAND... --spec F --host H` on host h through the transport; its exit status.
  std::function<int(const cluster::SpecHost& h, const std::vector<std::string>& command)> on_host;
  // OK if `zipg node check` answers on each named host; else an error naming those that did not.
  std::function<Status(const cluster::ClusterSpec& spec, const std::vector<std::string>& names)>
      reach;
  ClientOptions options;  // the calls to the cluster: timeout, and a client's TLS files
};

// zipg deploy move SHARD FROM TO.
int DeployMove(const DeployContext& ctx, const std::string& shard, const std::string& from,
               const std::string& to);
// zipg deploy add-host NAME ADDRESS [--roles shard,aggregator,etcd] [--store DIR].
int DeployAddHost(const DeployContext& ctx, const std::string& name, const std::string& address,
                  const Args& args);
// zipg deploy remove-host NAME.
int DeployRemoveHost(const DeployContext& ctx, const std::string& name);
// zipg deploy rebalance [--dry-run].
int DeployRebalance(const DeployContext& ctx, bool dry_run);
// zipg deploy split: zipg admin split, then the spec's count and lists from the cluster.
int DeploySplit(const DeployContext& ctx);

}  // namespace zipg::cli
