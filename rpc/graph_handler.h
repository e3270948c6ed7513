// GraphHandler: the server side of GraphService over any GraphApi. Each call converts its
// arguments, runs the operation and turns a failed Status into the declared GraphError. Exceptions
// other than GraphError (a bug) are caught by the generated processor and reported to the caller
// as an application error; the server keeps running.
//
// Thread-safety: as the GraphApi it wraps (the servers' are safe for concurrent use).
#pragma once

#include <functional>
#include <string>

#include "graph/api.h"
#include "zipg_rpc/GraphService.h"

namespace zipg::rpc {

class GraphHandler : virtual public GraphServiceIf {
 public:
  // `status` produces the status() document. Writes go to `writer`; without one (shard
  // servers) they fail with INVALID_ARGUMENT.
  GraphHandler(GraphApi* graph, std::function<StatusOr<std::string>()> status,
               GraphWriteApi* writer = nullptr)
      : graph_(graph), writer_(writer), status_(std::move(status)) {}

  void get_node_property(MaybeProperties& _return, int64_t id, bool all_properties,
                         const std::vector<std::string>& properties) override;
  void get_node_ids(std::vector<int64_t>& _return,
                    const std::map<std::string, std::string>& properties) override;
  void search_node_ids(SearchAnswer& _return, const SearchRequest& search) override;
  void get_neighbor_ids(std::vector<int64_t>& _return, int64_t id, bool any_type, int64_t type,
                        const std::map<std::string, std::string>& properties) override;
  void get_edge_record(EdgeRecord& _return, int64_t id, int64_t type) override;
  void get_edge_range(EdgeRange& _return, int64_t id, int64_t type, int64_t t_lo,
                      int64_t t_hi) override;
  void get_edge_data(MaybeEdge& _return, int64_t id, int64_t type, int64_t time_order) override;
  void obj_get(MaybeNode& _return, int64_t id) override;
  void obj_add(int64_t id, const std::map<std::string, std::string>& properties) override;
  void obj_update(int64_t id, const std::map<std::string, std::string>& properties) override;
  bool obj_delete(int64_t id) override;
  bool assoc_add(int64_t src, int64_t type, int64_t dst, int64_t timestamp,
                 const std::map<std::string, std::string>& properties) override;
  void assoc_update(int64_t src, int64_t type, int64_t dst, int64_t timestamp,
                    const std::map<std::string, std::string>& properties) override;
  bool assoc_delete(int64_t src, int64_t type, int64_t dst) override;
  void assoc_range(std::vector<Edge>& _return, int64_t id, int64_t type, int64_t pos,
                   int64_t limit) override;
  int64_t assoc_count(int64_t id, int64_t type) override;
  void assoc_get(std::vector<Edge>& _return, int64_t id, int64_t type,
                 const std::vector<int64_t>& ids, int64_t low, int64_t high) override;
  void assoc_time_range(std::vector<Edge>& _return, int64_t id, int64_t type, int64_t low,
                        int64_t high, int64_t limit) override;
  void bfs(BfsResult& _return, int64_t id, bool any_type, const std::vector<int64_t>& types,
           int32_t max_depth, int64_t limit) override;
  void rpq(RpqResult& _return, const std::string& expr, bool all_sources,
           const std::vector<int64_t>& sources, int64_t limit) override;
  int64_t snapshot() override;
  void status(std::string& _return) override;
  void admin_compact(std::string& _return) override;
  void write_batch(std::vector<WriteOutcome>& _return,
                   const std::vector<BatchedWrite>& writes) override;

 private:
  // The writer of every write operation; also clears the call's snapshot (util/snapshot.h).
  GraphWriteApi& Writer();

  GraphApi* graph_;
  GraphWriteApi* writer_;
  std::function<StatusOr<std::string>()> status_;
};

}  // namespace zipg::rpc
