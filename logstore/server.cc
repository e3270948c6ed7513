#include "logstore/server.h"

#include "rpc/convert.h"

namespace zipg::logstore {

void LogStoreHandler::fragment(rpc::NodeFragment& _return, int64_t id, bool any_type, int64_t type,
                               const std::vector<int64_t>& generations, int64_t applied_through) {
  rpc::ThrowIfError(store_->CheckAppliedThrough(applied_through));
  NodeData data = rpc::ValueOrThrow(store_->Fragment(id, any_type, type, generations));
  if (data.properties) _return.__set_properties(rpc::ToThrift(*data.properties));
  _return.edges = rpc::ToThrift(data.edges);
}

void LogStoreHandler::fragment_edges(std::vector<rpc::Edge>& _return, int64_t id, int64_t type,
                                     const std::vector<int64_t>& generations,
                                     const std::vector<int64_t>& dsts, int64_t applied_through) {
  rpc::ThrowIfError(store_->CheckAppliedThrough(applied_through));
  _return = rpc::ToThrift(rpc::ValueOrThrow(store_->FragmentEdges(id, type, generations, dsts)));
}

int64_t LogStoreHandler::snapshot() {
  return static_cast<int64_t>(rpc::ValueOrThrow(store_->Snapshot()));
}

void LogStoreHandler::fragment_edges_batch(std::vector<std::vector<rpc::Edge>>& _return,
                                           const std::vector<rpc::FragmentAsk>& asks,
                                           int64_t applied_through) {
  rpc::ThrowIfError(store_->CheckAppliedThrough(applied_through));
  _return.clear();
  for (const auto& a : asks) {
    // Batches are a rebuild's scan of every written edge: read around the edge cache.
    _return.push_back(rpc::ToThrift(rpc::ValueOrThrow(
        store_->FragmentEdges(a.id, a.type, a.generations, a.dsts, /*fill_cache=*/false))));
  }
}

void LogStoreHandler::log_node_ids(std::vector<int64_t>& _return,
                                   const std::map<std::string, std::string>& properties) {
  _return = rpc::ValueOrThrow(store_->NodeIds(rpc::FromThrift(properties)));
}

void LogStoreHandler::updates_since(rpc::UpdateFeedChunk& _return, int32_t shard, int64_t after,
                                    const std::string& member, int32_t num_shards) {
  if (shard < 0 || after < 0 || num_shards < 0) {
    rpc::ThrowIfError(Status::InvalidArgument("negative shard, id or count"));
  }
  auto chunk = rpc::ValueOrThrow(store_->UpdatesSince(static_cast<uint32_t>(shard),
                                                      static_cast<uint64_t>(after), member,
                                                      static_cast<uint32_t>(num_shards)));
  _return.updates = engine::EncodeUpdates(chunk.updates, nullptr, /*with_ids=*/true);
  _return.head = static_cast<int64_t>(chunk.head);
  _return.included = chunk.included;
  _return.sender = static_cast<int64_t>(chunk.sender);
}

void LogStoreHandler::filter_nodes(std::vector<int64_t>&, const std::vector<int64_t>&,
                                   const std::map<std::string, std::string>&) {
  rpc::ThrowIfError(Status::InvalidArgument("filter_nodes is a shard server call"));
}

void LogStoreHandler::local_node_ids(std::vector<int64_t>&, const std::vector<int32_t>&,
                                     const std::map<std::string, std::string>&, int32_t) {
  rpc::ThrowIfError(Status::InvalidArgument("local_node_ids is a shard server call"));
}

void LogStoreHandler::local_search_node_ids(std::vector<int64_t>&, const std::vector<int32_t>&,
                                            const rpc::SearchRequest&, int32_t) {
  rpc::ThrowIfError(Status::InvalidArgument("local_search_node_ids is a shard server call"));
}

void LogStoreHandler::log_search_node_ids(std::vector<int64_t>& _return,
                                          const rpc::SearchRequest& search) {
  _return = rpc::ValueOrThrow(store_->SearchNodeIds(rpc::ValueOrThrow(rpc::FromThrift(search))));
}

void LogStoreHandler::traverse_expand(rpc::Visits&, const std::vector<rpc::Transition>&,
                                      const rpc::Visits&, int64_t, int64_t) {
  rpc::ThrowIfError(Status::InvalidArgument("traverse_expand is a shard server call"));
}

void LogStoreHandler::traverse_sources(std::vector<int64_t>&, const std::vector<int32_t>&, bool,
                                       int64_t, int64_t, int32_t) {
  rpc::ThrowIfError(Status::InvalidArgument("traverse_sources is a shard server call"));
}

void LogStoreHandler::admin_split(std::string& _return, int32_t shards) {
  if (shards <= 0) rpc::ThrowIfError(Status::InvalidArgument("the shard count must be positive"));
  _return = rpc::ValueOrThrow(store_->Split(static_cast<uint32_t>(shards), publish_layout_)).dump();
}

void LogStoreHandler::admin_rebuild(std::string&, const std::vector<int32_t>&, const std::string&) {
  rpc::ThrowIfError(Status::InvalidArgument("admin_rebuild is a shard server call"));
}

void LogStoreHandler::rebuilt_version(std::string&, int32_t) {
  rpc::ThrowIfError(Status::InvalidArgument("rebuilt_version is a shard server call"));
}

void LogStoreHandler::rebuilt_chunk(std::string&, int32_t, int64_t, const std::string&, int64_t,
                                    int32_t) {
  rpc::ThrowIfError(Status::InvalidArgument("rebuilt_chunk is a shard server call"));
}

void LogStoreHandler::store_chunk(std::string&, const std::string&, int64_t, int32_t) {
  rpc::ThrowIfError(Status::InvalidArgument("store_chunk is a shard server call"));
}

void LogStoreHandler::admin_serve(int32_t) {
  rpc::ThrowIfError(Status::InvalidArgument("admin_serve is a shard server call"));
}

void LogStoreHandler::admin_unserve(int32_t) {
  rpc::ThrowIfError(Status::InvalidArgument("admin_unserve is a shard server call"));
}

}  // namespace zipg::logstore
