#include "rpc/convert.h"

namespace zipg::rpc {
namespace {

thread_local const char* error_code = nullptr;

// The IDL's name of `code` (the contract's code), from the generated table.
const char* CodeName(ErrorCode::type code) {
  auto it = _ErrorCode_VALUES_TO_NAMES.find(code);
  return it == _ErrorCode_VALUES_TO_NAMES.end() ? "INTERNAL" : it->second;
}

}  // namespace

const char* TakeErrorCode() {
  const char* code = error_code;
  error_code = nullptr;
  return code;
}

GraphError ToError(const Status& status) {
  GraphError e;
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      e.code = ErrorCode::INVALID_ARGUMENT;
      break;
    case StatusCode::kNotFound:
      e.code = ErrorCode::NOT_FOUND;
      break;
    case StatusCode::kAlreadyExists:
      e.code = ErrorCode::ALREADY_EXISTS;
      break;
    case StatusCode::kUnavailable:
      e.code = ErrorCode::UNAVAILABLE;
      break;
    case StatusCode::kDeadlineExceeded:
      e.code = ErrorCode::DEADLINE_EXCEEDED;
      break;
    case StatusCode::kResourceExhausted:
      e.code = ErrorCode::RESOURCE_EXHAUSTED;
      break;
    case StatusCode::kFailedPrecondition:
      e.code = ErrorCode::FAILED_PRECONDITION;
      break;
    default:  // kInternal, kCorruption, kIOError (and kOk, which never gets here)
      e.code = ErrorCode::INTERNAL;
      break;
  }
  e.message = status.code() == StatusCode::kCorruption || status.code() == StatusCode::kIOError
                  ? std::string(StatusCodeName(status.code())) + ": " + status.message()
                  : status.message();
  error_code = CodeName(e.code);
  return e;
}

Status FromError(const GraphError& error) {
  switch (error.code) {
    case ErrorCode::INVALID_ARGUMENT:
      return Status::InvalidArgument(error.message);
    case ErrorCode::NOT_FOUND:
      return Status::NotFound(error.message);
    case ErrorCode::ALREADY_EXISTS:
      return Status::AlreadyExists(error.message);
    case ErrorCode::UNAVAILABLE:
      return Status::Unavailable(error.message);
    case ErrorCode::DEADLINE_EXCEEDED:
      return Status::DeadlineExceeded(error.message);
    case ErrorCode::RESOURCE_EXHAUSTED:
      return Status::ResourceExhausted(error.message);
    case ErrorCode::INTERNAL:
      return Status::Internal(error.message);
    case ErrorCode::FAILED_PRECONDITION:
      return Status::FailedPrecondition(error.message);
  }
  return Status::Internal("unknown error code " + std::to_string(static_cast<int>(error.code)) +
                          ": " + error.message);
}

void ThrowIfError(const Status& status) {
  if (!status.ok()) throw ToError(status);
}

std::map<std::string, std::string> ToThrift(const Properties& properties) {
  return std::map<std::string, std::string>(properties.begin(), properties.end());
}

Properties FromThrift(const std::map<std::string, std::string>& properties) {
  return Properties(properties.begin(), properties.end());  // std::map iterates sorted
}

SearchRequest ToThrift(const NodeSearch& search) {
  SearchRequest r;
  r.pattern = search.pattern;
  r.any_property = !search.property.has_value();
  r.property = search.property.value_or("");
  r.match = SearchMatchName(search.match);
  r.limit = search.limit;
  return r;
}

StatusOr<NodeSearch> FromThrift(const SearchRequest& search) {
  NodeSearch q;
  if (!ParseSearchMatch(search.match, &q.match)) {
    return Status::InvalidArgument(
        "search_node_ids: match must be contains, prefix, suffix or exact, got '" + search.match +
        "'");
  }
  q.pattern = search.pattern;
  if (!search.any_property) q.property = search.property;
  q.limit = search.limit;
  return q;
}

rpc::Edge ToThrift(const zipg::Edge& edge) {
  rpc::Edge e;
  e.src = edge.src;
  e.type = edge.type;
  e.dst = edge.dst;
  e.timestamp = edge.timestamp;
  e.properties = ToThrift(edge.properties);
  return e;
}

zipg::Edge FromThrift(const rpc::Edge& edge) {
  return zipg::Edge{edge.src, edge.type, edge.dst, edge.timestamp, FromThrift(edge.properties)};
}

std::vector<rpc::Edge> ToThrift(const std::vector<zipg::Edge>& edges) {
  std::vector<rpc::Edge> out;
  out.reserve(edges.size());
  for (const auto& e : edges) out.push_back(ToThrift(e));
  return out;
}

std::vector<zipg::Edge> FromThrift(const std::vector<rpc::Edge>& edges) {
  std::vector<zipg::Edge> out;
  out.reserve(edges.size());
  for (const auto& e : edges) out.push_back(FromThrift(e));
  return out;
}

namespace {
constexpr std::pair<zipg::Write::Op, WriteKind::type> kKinds[] = {
    {zipg::Write::Op::kAssocAdd, WriteKind::ASSOC_ADD},
    {zipg::Write::Op::kAssocDelete, WriteKind::ASSOC_DELETE},
    {zipg::Write::Op::kObjDelete, WriteKind::OBJ_DELETE},
    {zipg::Write::Op::kObjAdd, WriteKind::OBJ_ADD},
    {zipg::Write::Op::kObjUpdate, WriteKind::OBJ_UPDATE},
    {zipg::Write::Op::kAssocUpdate, WriteKind::ASSOC_UPDATE},
};
}  // namespace

BatchedWrite ToThrift(const zipg::Write& write) {
  BatchedWrite w;
  for (const auto& [op, kind] : kKinds) {
    if (op == write.op) w.kind = kind;
  }
  w.id = write.id;
  w.type = write.type;
  w.dst = write.dst;
  w.timestamp = write.timestamp;
  w.properties = ToThrift(write.properties);
  return w;
}

StatusOr<zipg::Write> FromThrift(const BatchedWrite& write) {
  zipg::Write w;
  bool known = false;
  for (const auto& [op, kind] : kKinds) {
    if (kind == write.kind) {
      w.op = op;
      known = true;
    }
  }
  if (!known) {
    return Status::InvalidArgument("unknown write kind " +
                                   std::to_string(static_cast<int>(write.kind)));
  }
  w.id = write.id;
  w.type = write.type;
  w.dst = write.dst;
  w.timestamp = write.timestamp;
  w.properties = FromThrift(write.properties);
  return w;
}

WriteOutcome ToOutcome(const StatusOr<bool>& outcome) {
  WriteOutcome o;
  if (outcome.ok()) {
    o.found = *outcome;
  } else {
    o.__set_error(ToError(outcome.status()));
  }
  return o;
}

StatusOr<bool> FromOutcome(const WriteOutcome& outcome) {
  if (outcome.__isset.error) return FromError(outcome.error);
  return outcome.found;
}

std::vector<Transition> ToThrift(const graph::PathAutomaton& automaton) {
  std::vector<Transition> out;
  out.reserve(automaton.transitions.size());
  for (const auto& t : automaton.transitions) {
    Transition x;
    x.from_state = static_cast<int32_t>(t.from);
    x.type = t.type;
    x.to_state = static_cast<int32_t>(t.to);
    out.push_back(x);
  }
  return out;
}

Visits ToThrift(const std::vector<graph::Visit>& visits) {
  Visits out;
  out.tags.reserve(visits.size());
  out.nodes.reserve(visits.size());
  out.states.reserve(visits.size());
  for (const graph::Visit& v : visits) {
    out.tags.push_back(static_cast<int32_t>(v.tag));
    out.nodes.push_back(v.node);
    out.states.push_back(static_cast<int32_t>(v.state));
  }
  return out;
}

StatusOr<std::vector<graph::Visit>> FromThrift(const Visits& visits) {
  const size_t n = visits.nodes.size();
  if (visits.tags.size() != n || visits.states.size() != n) {
    return Status::InvalidArgument("visits: lists of different lengths");
  }
  std::vector<graph::Visit> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (visits.tags[i] < 0 || visits.states[i] < 0 || visits.nodes[i] < 0) {
      return Status::InvalidArgument("visits: negative tag, state or node");
    }
    out[i] = {static_cast<uint32_t>(visits.tags[i]), static_cast<uint32_t>(visits.states[i]),
              visits.nodes[i]};
  }
  return out;
}

StatusOr<graph::PathAutomaton> FromThrift(const std::vector<Transition>& transitions,
                                          const std::vector<graph::Visit>& visits) {
  int64_t states = 1;
  std::vector<graph::PathAutomaton::Transition> out;
  out.reserve(transitions.size());
  for (const Transition& t : transitions) {
    if (t.from_state < 0 || t.to_state < 0) {
      return Status::InvalidArgument("automaton: negative state");
    }
    states = std::max<int64_t>(states, std::max(t.from_state, t.to_state) + int64_t{1});
    out.push_back({static_cast<uint32_t>(t.from_state), t.type, static_cast<uint32_t>(t.to_state)});
  }
  for (const graph::Visit& v : visits) states = std::max<int64_t>(states, v.state + int64_t{1});
  if (states > static_cast<int64_t>(graph::PathAutomaton::kMaxAtoms + 1)) {
    return Status::InvalidArgument("automaton: more than " +
                                   std::to_string(graph::PathAutomaton::kMaxAtoms + 1) + " states");
  }
  return graph::PathAutomaton::FromTransitions(std::move(out), static_cast<uint32_t>(states));
}

}  // namespace zipg::rpc
