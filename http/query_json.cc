// JSON requests and responses for the contract's operations.

#include "http/query_json.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "graph/traversal.h"
#include "util/snapshot.h"

namespace zipg::http {

namespace {
using nlohmann::json;

// Public code names; engine-internal codes are reported as INTERNAL.
std::string CodeName(StatusCode code) {
  if (code == StatusCode::kCorruption || code == StatusCode::kIOError) return "INTERNAL";
  return std::string(StatusCodeName(code));
}

// The value as an int64, or nullopt if it is not an integer in range.
std::optional<int64_t> AsInt64(const json& v) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return std::nullopt;
    }
    return static_cast<int64_t>(v.get<uint64_t>());
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

// Typed access to a request's arguments, collecting the first error.
class Request {
 public:
  Request(const json& j, std::string op) : j_(j), op_(std::move(op)) {}

  bool Has(const char* name) const { return j_.contains(name) && !j_.at(name).is_null(); }

  StatusOr<int64_t> Int(const char* name) {
    used_.insert(name);
    if (!Has(name)) return Missing(name);
    const json& v = j_.at(name);
    if (auto i = AsInt64(v)) return *i;
    return Bad(name, v.is_number_unsigned() ? "an int64" : "an integer");
  }
  StatusOr<std::optional<int64_t>> OptionalInt(const char* name) {
    used_.insert(name);
    if (!Has(name)) return std::optional<int64_t>();
    ZIPG_ASSIGN_OR_RETURN(int64_t v, Int(name));
    return std::optional<int64_t>(v);
  }
  StatusOr<std::vector<int64_t>> IntList(const char* name) {
    used_.insert(name);
    if (!Has(name)) return Missing(name);
    const json& v = j_.at(name);
    if (!v.is_array()) return Bad(name, "an array of integers");
    std::vector<int64_t> out;
    for (const json& e : v) {
      auto i = AsInt64(e);
      if (!i) return Bad(name, "an array of int64 integers");
      out.push_back(*i);
    }
    return out;
  }
  StatusOr<std::optional<std::vector<int64_t>>> OptionalIntList(const char* name) {
    used_.insert(name);
    if (!Has(name)) return std::optional<std::vector<int64_t>>();
    ZIPG_ASSIGN_OR_RETURN(auto v, IntList(name));
    return std::optional<std::vector<int64_t>>(std::move(v));
  }
  StatusOr<std::string> String(const char* name) {
    used_.insert(name);
    if (!Has(name)) return Missing(name);
    const json& v = j_.at(name);
    if (!v.is_string()) return Bad(name, "a string");
    return v.get<std::string>();
  }
  StatusOr<std::optional<std::string>> OptionalString(const char* name) {
    used_.insert(name);
    if (!Has(name)) return std::optional<std::string>();
    ZIPG_ASSIGN_OR_RETURN(std::string v, String(name));
    return std::optional<std::string>(std::move(v));
  }
  // An object of string values, as sorted Properties; absent -> empty unless required.
  StatusOr<Properties> Props(const char* name, bool required) {
    used_.insert(name);
    if (!Has(name)) {
      if (required) return Missing(name);
      return Properties();
    }
    const json& v = j_.at(name);
    if (!v.is_object()) return Bad(name, "an object of string values");
    Properties out;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!it.value().is_string()) return Bad(name, "an object of string values");
      out.emplace_back(it.key(), it.value().get<std::string>());
    }
    return out;  // json objects iterate in key order
  }
  StatusOr<std::optional<std::vector<std::string>>> OptionalNames(const char* name) {
    used_.insert(name);
    if (!Has(name)) return std::optional<std::vector<std::string>>();
    const json& v = j_.at(name);
    if (!v.is_array()) return Bad(name, "an array of property names");
    std::vector<std::string> out;
    for (const json& e : v) {
      if (!e.is_string()) return Bad(name, "an array of property names");
      out.push_back(e.get<std::string>());
    }
    return std::optional<std::vector<std::string>>(std::move(out));
  }
  // INVALID_ARGUMENT for an argument the operation does not take (catches typos).
  Status CheckNoExtra() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (it.key() != "op" && !used_.count(it.key())) {
        return Status::InvalidArgument(op_ + " takes no argument '" + it.key() + "'");
      }
    }
    return Status::OK();
  }

 private:
  Status Missing(const char* name) const {
    return Status::InvalidArgument(op_ + " needs argument '" + name + "'");
  }
  Status Bad(const char* name, const char* expected) const {
    return Status::InvalidArgument(op_ + ": argument '" + name + "' must be " + expected);
  }
  const json& j_;
  std::string op_;
  std::set<std::string> used_;
};

json PropsJson(const Properties& props) {
  json j = json::object();
  for (const auto& [name, value] : props) j[name] = value;
  return j;
}
json EdgeJson(const Edge& e) {
  return {{"src", e.src},
          {"type", e.type},
          {"dst", e.dst},
          {"timestamp", e.timestamp},
          {"properties", PropsJson(e.properties)}};
}
json EdgesJson(const std::vector<Edge>& edges) {
  json j = json::array();
  for (const auto& e : edges) j.push_back(EdgeJson(e));
  return j;
}

using Handler = std::function<StatusOr<json>(GraphApi&, Request&)>;

// Reads every argument first (so that missing/mistyped ones are reported before running).
#define ARG(var, expr) ZIPG_ASSIGN_OR_RETURN(auto var, expr)

const std::map<std::string, Handler>& Handlers() {
  static const std::map<std::string, Handler> handlers = {
      {"get_node_property",
       [](GraphApi& g, Request& r) -> StatusOr<json> {
         ARG(id, r.Int("id"));
         ARG(names, r.OptionalNames("properties"));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         ARG(props, g.GetNodeProperty(id, names ? &*names : nullptr));
         return props ? PropsJson(*props) : json(nullptr);
       }},
      {"get_node_ids",
       [](GraphApi& g, Request& r) -> StatusOr<json> {
         ARG(props, r.Props("properties", true));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         ARG(ids, g.GetNodeIds(props));
         return json(ids);
       }},
      {"search_node_ids",
       [](GraphApi& g, Request& r) -> StatusOr<json> {
         ARG(pattern, r.String("pattern"));
         ARG(property, r.OptionalString("property"));
         ARG(match, r.OptionalString("match"));
         ARG(limit, r.OptionalInt("limit"));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         NodeSearch q{std::move(pattern), std::move(property), SearchMatch::kContains,
                      limit.value_or(kDefaultSearchLimit)};
         if (match && !ParseSearchMatch(*match, &q.match)) {
           return Status::InvalidArgument(
               "search_node_ids: match must be contains, prefix, suffix or exact, not '" + *match +
               "'");
         }
         ARG(result, g.SearchNodeIds(q));
         return json{{"ids", result.ids}, {"truncated", result.truncated}};
       }},
      {"get_neighbor_ids",
       [](GraphApi& g, Request& r) -> StatusOr<json> {
         ARG(id, r.Int("id"));
         ARG(type, r.OptionalInt("type"));
         ARG(props, r.Props("properties", false));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         ARG(ids, g.GetNeighborIds(id, type, props));
         return json(ids);
       }},
      {"get_edge_record",
       [](GraphApi& g, Request& r) -> StatusOr<json> {
         ARG(id, r.Int("id"));
         ARG(type, r.Int("type"));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         ARG(rec, g.GetEdgeRecord(id, type));
         return json{{"src", rec.src}, {"type", rec.type}, {"count", rec.count}};
       }},
      {"get_edge_range",
       [](GraphApi& g, Request& r) -> StatusOr<json> {
         ARG(id, r.Int("id"));
         ARG(type, r.Int("type"));
         ARG(lo, r.Int("t_lo"));
         ARG(hi, r.Int("t_hi"));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         ARG(range, g.GetEdgeRange(id, type, lo, hi));
         return json::array({range.first, range.second});
       }},
      {"get_edge_data",
       [](GraphApi& g, Request& r) -> StatusOr<json> {
         ARG(id, r.Int("id"));
         ARG(type, r.Int("type"));
         ARG(order, r.Int("time_order"));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         ARG(edge, g.GetEdgeData(id, type, order));
         return edge ? EdgeJson(*edge) : json(nullptr);
       }},
      {"obj_get",
       [](GraphApi& g, Request& r) -> StatusOr<json> {
         ARG(id, r.Int("id"));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         ARG(node, g.ObjGet(id));
         if (!node) return json(nullptr);
         return json{{"id", node->id}, {"properties", PropsJson(node->properties)}};
       }},
      {"assoc_range",
       [](GraphApi& g, Request& r) -> StatusOr<json> {
         ARG(id, r.Int("id"));
         ARG(type, r.Int("type"));
         ARG(pos, r.Int("pos"));
         ARG(limit, r.Int("limit"));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         ARG(edges, g.AssocRange(id, type, pos, limit));
         return EdgesJson(edges);
       }},
      {"assoc_count",
       [](GraphApi& g, Request& r) -> StatusOr<json> {
         ARG(id, r.Int("id"));
         ARG(type, r.Int("type"));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         ARG(count, g.AssocCount(id, type));
         return json(count);
       }},
      {"assoc_get",
       [](GraphApi& g, Request& r) -> StatusOr<json> {
         ARG(id, r.Int("id"));
         ARG(type, r.Int("type"));
         ARG(ids, r.IntList("ids"));
         ARG(low, r.Int("low"));
         ARG(high, r.Int("high"));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         ARG(edges, g.AssocGet(id, type, ids, low, high));
         return EdgesJson(edges);
       }},
      {"assoc_time_range",
       [](GraphApi& g, Request& r) -> StatusOr<json> {
         ARG(id, r.Int("id"));
         ARG(type, r.Int("type"));
         ARG(low, r.Int("low"));
         ARG(high, r.Int("high"));
         ARG(limit, r.Int("limit"));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         ARG(edges, g.AssocTimeRange(id, type, low, high, limit));
         return EdgesJson(edges);
       }},
      {"bfs",
       [](GraphApi& g, Request& r) -> StatusOr<json> {
         ARG(id, r.Int("id"));
         ARG(types, r.OptionalIntList("types"));
         ARG(max_depth, r.Int("max_depth"));
         ARG(limit, r.OptionalInt("limit"));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         if (max_depth < 0 || max_depth > graph::kMaxBfsDepth) {
           return Status::InvalidArgument("bfs: max_depth must be 0.." +
                                          std::to_string(graph::kMaxBfsDepth) + ", not " +
                                          std::to_string(max_depth));
         }
         const auto depth = static_cast<int32_t>(max_depth);
         ARG(entries, g.Bfs(id, types, depth, limit.value_or(graph::kDefaultBfsLimit)));
         json out = json::array();
         for (const BfsEntry& e : entries) out.push_back({{"id", e.id}, {"depth", e.depth}});
         return out;
       }},
      {"snapshot",
       [](GraphApi& g, Request& r) -> StatusOr<json> {
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         ARG(seq, g.Snapshot());
         return json{{"seq", seq}};
       }},
      {"rpq",
       [](GraphApi& g, Request& r) -> StatusOr<json> {
         ARG(expr, r.String("expr"));
         ARG(sources, r.OptionalIntList("sources"));
         ARG(limit, r.OptionalInt("limit"));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         ARG(result, g.Rpq(expr, sources, limit.value_or(graph::kDefaultRpqLimit)));
         json pairs = json::array();
         for (const auto& [src, dst] : result.pairs) pairs.push_back(json::array({src, dst}));
         return json{{"pairs", std::move(pairs)}, {"truncated", result.truncated}};
       }},
  };
  return handlers;
}
using WriteHandler = std::function<StatusOr<json>(GraphWriteApi&, Request&)>;

StatusOr<Edge> EdgeArgs(Request& r, bool properties_required) {
  ARG(src, r.Int("src"));
  ARG(type, r.Int("type"));
  ARG(dst, r.Int("dst"));
  ARG(timestamp, r.Int("timestamp"));
  ARG(props, r.Props("properties", properties_required));
  ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
  return Edge{src, type, dst, timestamp, std::move(props)};
}

// Results: null for adds and updates, {"deleted": bool} for deletes (as the Python client).
const std::map<std::string, WriteHandler>& WriteHandlers() {
  static const std::map<std::string, WriteHandler> handlers = {
      {"obj_add",
       [](GraphWriteApi& g, Request& r) -> StatusOr<json> {
         ARG(id, r.Int("id"));
         ARG(props, r.Props("properties", false));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         ZIPG_RETURN_IF_ERROR(g.ObjAdd(id, props));
         return json(nullptr);
       }},
      {"obj_update",
       [](GraphWriteApi& g, Request& r) -> StatusOr<json> {
         ARG(id, r.Int("id"));
         ARG(props, r.Props("properties", true));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         ZIPG_RETURN_IF_ERROR(g.ObjUpdate(id, props));
         return json(nullptr);
       }},
      {"obj_delete",
       [](GraphWriteApi& g, Request& r) -> StatusOr<json> {
         ARG(id, r.Int("id"));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         ARG(deleted, g.ObjDelete(id));
         return json{{"deleted", deleted}};
       }},
      {"assoc_add",
       [](GraphWriteApi& g, Request& r) -> StatusOr<json> {
         ARG(edge, EdgeArgs(r, false));
         ARG(replaced, g.AssocAdd(edge));
         return json{{"replaced", replaced}};
       }},
      {"assoc_update",
       [](GraphWriteApi& g, Request& r) -> StatusOr<json> {
         ARG(edge, EdgeArgs(r, true));
         ZIPG_RETURN_IF_ERROR(g.AssocUpdate(edge));
         return json(nullptr);
       }},
      {"assoc_delete",
       [](GraphWriteApi& g, Request& r) -> StatusOr<json> {
         ARG(src, r.Int("src"));
         ARG(type, r.Int("type"));
         ARG(dst, r.Int("dst"));
         ZIPG_RETURN_IF_ERROR(r.CheckNoExtra());
         ARG(deleted, g.AssocDelete(src, type, dst));
         return json{{"deleted", deleted}};
       }},
  };
  return handlers;
}
#undef ARG

}  // namespace

json ErrorJson(const Status& status) {
  return {{"error", {{"code", CodeName(status.code())}, {"message", status.message()}}}};
}

json ExecuteJson(GraphApi& graph, const json& request, GraphWriteApi* writer) {
  if (!request.is_object()) {
    return ErrorJson(Status::InvalidArgument("a request must be a JSON object"));
  }
  auto op_it = request.find("op");
  if (op_it == request.end() || !op_it->is_string()) {
    return ErrorJson(Status::InvalidArgument("a request needs \"op\": \"<operation>\""));
  }
  const std::string op = op_it->get<std::string>();
  auto it = Handlers().find(op);
  auto write = WriteHandlers().find(op);
  if (it == Handlers().end() && write == WriteHandlers().end()) {
    return ErrorJson(Status::InvalidArgument("unknown operation '" + op + "'"));
  }
  if (write != WriteHandlers().end() && writer == nullptr) {
    return ErrorJson(Status::InvalidArgument(
        op + " is a write; an embedded store is read-only (connect to a cluster to write)"));
  }
  try {
    Request args(request, op);
    // Every read takes `at` (docs/consistency.md, "Snapshots"); 0 or absent: the latest state.
    uint64_t at = 0;
    if (it != Handlers().end() && op != "snapshot") {
      StatusOr<std::optional<int64_t>> a = args.OptionalInt("at");
      if (!a.ok()) return ErrorJson(a.status());
      if (*a && **a < 0) {
        return ErrorJson(Status::InvalidArgument(op + ": argument 'at' must be a sequence " +
                                                 "returned by snapshot, not " +
                                                 std::to_string(**a)));
      }
      at = a->value_or(0);
    }
    ReadAt::Scope snapshot(at);
    StatusOr<json> result =
        it != Handlers().end() ? it->second(graph, args) : write->second(*writer, args);
    if (!result.ok()) return ErrorJson(result.status());
    return json{{"ok", std::move(result.value())}};
  } catch (const std::exception& e) {  // a bug, never user input: report, do not crash
    return ErrorJson(Status::Internal(std::string("unexpected exception: ") + e.what()));
  }
}

bool IsWriteRequest(const json& request) {
  if (!request.is_object()) return false;
  auto op = request.find("op");
  return op != request.end() && op->is_string() &&
         WriteHandlers().count(op->get<std::string>()) > 0;
}

namespace {

// A GraphWriteApi that does nothing but note each call as a Write: runs a request's argument
// checks without sending it.
class WriteRecorder final : public GraphWriteApi {
 public:
  std::optional<Write> write;
  Status ObjAdd(int64_t id, const Properties& p) override {
    return Note({Write::Op::kObjAdd, id, 0, 0, 0, p});
  }
  Status ObjUpdate(int64_t id, const Properties& p) override {
    return Note({Write::Op::kObjUpdate, id, 0, 0, 0, p});
  }
  StatusOr<bool> ObjDelete(int64_t id) override {
    ZIPG_RETURN_IF_ERROR(Note({Write::Op::kObjDelete, id, 0, 0, 0, {}}));
    return false;
  }
  StatusOr<bool> AssocAdd(const Edge& e) override {
    ZIPG_RETURN_IF_ERROR(
        Note({Write::Op::kAssocAdd, e.src, e.type, e.dst, e.timestamp, e.properties}));
    return false;
  }
  Status AssocUpdate(const Edge& e) override {
    return Note({Write::Op::kAssocUpdate, e.src, e.type, e.dst, e.timestamp, e.properties});
  }
  StatusOr<bool> AssocDelete(int64_t src, int64_t type, int64_t dst) override {
    ZIPG_RETURN_IF_ERROR(Note({Write::Op::kAssocDelete, src, type, dst, 0, {}}));
    return false;
  }
  StatusOr<std::string> Compact() override { return Status::InvalidArgument("not a write"); }

 private:
  Status Note(Write w) {
    write = std::move(w);
    return Status::OK();
  }
};

// A GraphWriteApi that answers every call with one given outcome: shapes a batch outcome into
// the single call's response.
class OutcomeReplayer final : public GraphWriteApi {
 public:
  explicit OutcomeReplayer(StatusOr<bool> outcome) : outcome_(std::move(outcome)) {}
  Status ObjAdd(int64_t, const Properties&) override { return outcome_.status(); }
  Status ObjUpdate(int64_t, const Properties&) override { return outcome_.status(); }
  StatusOr<bool> ObjDelete(int64_t) override { return outcome_; }
  StatusOr<bool> AssocAdd(const Edge&) override { return outcome_; }
  Status AssocUpdate(const Edge&) override { return outcome_.status(); }
  StatusOr<bool> AssocDelete(int64_t, int64_t, int64_t) override { return outcome_; }
  StatusOr<std::string> Compact() override { return Status::InvalidArgument("not a write"); }

 private:
  StatusOr<bool> outcome_;
};

}  // namespace

std::vector<json> ExecuteWriteBatch(GraphApi& graph, const std::vector<json>& requests,
                                    GraphWriteApi* writer) {
  std::vector<json> responses(requests.size());
  std::vector<Write> writes;
  std::vector<size_t> index;  // positions of `writes` in `requests`
  for (size_t i = 0; i < requests.size(); ++i) {
    WriteRecorder recorder;
    json checked = writer == nullptr ? ExecuteJson(graph, requests[i], nullptr)
                                     : ExecuteJson(graph, requests[i], &recorder);
    if (!recorder.write) {  // refused by its checks (or by a read-only store)
      responses[i] = std::move(checked);
      continue;
    }
    writes.push_back(std::move(*recorder.write));
    index.push_back(i);
  }
  if (writes.empty()) return responses;
  const std::vector<StatusOr<bool>> outcomes = writer->WriteBatch(writes);
  for (size_t k = 0; k < index.size(); ++k) {
    OutcomeReplayer replayer(k < outcomes.size() ? outcomes[k]
                                                 : StatusOr<bool>(Status::Internal("no outcome")));
    responses[index[k]] = ExecuteJson(graph, requests[index[k]], &replayer);
  }
  return responses;
}

std::string ResponseLine(const json& response) {
  return response.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool IsBlankLine(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

void RunJsonLines(GraphApi& graph, GraphWriteApi* writer, std::istream& in, uint64_t write_batch,
                  const std::function<void(const std::string& line)>& out) {
  std::string line;
  uint64_t number = 0;
  std::vector<nlohmann::json> writes;  // consecutive write requests not yet sent
  auto flush = [&] {
    for (const auto& response : ExecuteWriteBatch(graph, writes, writer)) {
      out(ResponseLine(response));
    }
    writes.clear();
  };
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (IsBlankLine(line)) continue;
    nlohmann::json request = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (write_batch > 1 && !request.is_discarded() && IsWriteRequest(request)) {
      writes.push_back(std::move(request));
      if (writes.size() >= write_batch) flush();
      continue;
    }
    flush();
    const nlohmann::json response =
        request.is_discarded() ? ErrorJson(Status::InvalidArgument(
                                     "line " + std::to_string(number) + ": malformed JSON request"))
                               : ExecuteJson(graph, request, writer);
    out(ResponseLine(response));
  }
  flush();
}

}  // namespace zipg::http
