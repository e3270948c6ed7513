// The LogStore's Thrift handler: LogStoreService. Writes go to the LogStore; reads are answered
// like an aggregator's (the LogStore process holds a ClusterGraph), so a client connected to the
// LogStore sees the same data as through any aggregator; fragment and log_node_ids serve the
// shard servers and aggregators (docs/writes.md).
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <functional>
#include <string>

#include "logstore/logstore.h"
#include "rpc/graph_handler.h"
#include "zipg_rpc/LogStoreService.h"

namespace zipg::logstore {

class LogStoreHandler final : public rpc::LogStoreServiceIf, public rpc::GraphHandler {
 public:
  LogStoreHandler(GraphApi* reader, LogStore* store, std::function<StatusOr<std::string>()> status)
      : rpc::GraphHandler(reader, std::move(status), store), store_(store) {}

  int64_t snapshot() override;
  void fragment(rpc::NodeFragment& _return, int64_t id, bool any_type, int64_t type,
                const std::vector<int64_t>& generations, int64_t applied_through) override;
  void fragment_edges(std::vector<rpc::Edge>& _return, int64_t id, int64_t type,
                      const std::vector<int64_t>& generations, const std::vector<int64_t>& dsts,
                      int64_t applied_through) override;
  void fragment_edges_batch(std::vector<std::vector<rpc::Edge>>& _return,
                            const std::vector<rpc::FragmentAsk>& asks,
                            int64_t applied_through) override;
  void log_node_ids(std::vector<int64_t>& _return,
                    const std::map<std::string, std::string>& properties) override;
  void updates_since(rpc::UpdateFeedChunk& _return, int32_t shard, int64_t after,
                     const std::string& member, int32_t num_shards) override;
  void filter_nodes(std::vector<int64_t>& _return, const std::vector<int64_t>& ids,
                    const std::map<std::string, std::string>& properties) override;
  void local_node_ids(std::vector<int64_t>& _return, const std::vector<int32_t>& shards,
                      const std::map<std::string, std::string>& properties,
                      int32_t num_shards) override;
  void local_search_node_ids(std::vector<int64_t>& _return, const std::vector<int32_t>& shards,
                             const rpc::SearchRequest& search, int32_t num_shards) override;
  void log_search_node_ids(std::vector<int64_t>& _return,
                           const rpc::SearchRequest& search) override;
  void traverse_expand(rpc::Visits& _return, const std::vector<rpc::Transition>& automaton,
                       const rpc::Visits& visits, int64_t deadline_ms, int64_t max_visits) override;
  void traverse_sources(std::vector<int64_t>& _return, const std::vector<int32_t>& shards,
                        bool include_dsts, int64_t deadline_ms, int64_t max_ids,
                        int32_t num_shards) override;
  // The split's switch (LogStore::Split), with `publish_layout` run before writes go on.
  void admin_split(std::string& _return, int32_t shards) override;
  void SetLayoutPublisher(std::function<Status(uint32_t count)> f) {
    publish_layout_ = std::move(f);
  }
  void admin_rebuild(std::string& _return, const std::vector<int32_t>& shards,
                     const std::string& from_member) override;
  void rebuilt_version(std::string& _return, int32_t shard) override;
  void rebuilt_chunk(std::string& _return, int32_t shard, int64_t version, const std::string& path,
                     int64_t offset, int32_t length) override;
  void store_chunk(std::string& _return, const std::string& path, int64_t offset,
                   int32_t length) override;
  void admin_serve(int32_t shard) override;
  void admin_unserve(int32_t shard) override;

 private:
  LogStore* store_;
  std::function<Status(uint32_t count)> publish_layout_;
};

}  // namespace zipg::logstore
