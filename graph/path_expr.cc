// Parsing regular path expressions and building their Glushkov automata.
//
// The parser is recursive descent over the grammar
//   alt  := seq ('|' seq)*
//   seq  := post ('/' post)*
//   post := atom ('*' | '+' | '?')*
//   atom := number | '_' | '(' alt ')'
// into a small tree; the automaton comes from the tree's nullable / first / last / follow sets.

#include "graph/path_expr.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <tuple>

namespace zipg::graph {

namespace {

bool TransitionLess(const PathAutomaton::Transition& x, const PathAutomaton::Transition& y) {
  return std::tie(x.from, x.type, x.to) < std::tie(y.from, y.type, y.to);
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Sorted distinct positions.
using PosSet = std::vector<uint32_t>;

PosSet Union(const PosSet& a, const PosSet& b) {
  PosSet out;
  out.reserve(a.size() + b.size());
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

struct Node {
  enum Kind { kAtom, kConcat, kAlt, kStar, kPlus, kOpt } kind = kAtom;
  int left = -1, right = -1;  // children (right only for kConcat / kAlt)
  uint32_t position = 0;      // kAtom: its Glushkov position (1-based)
};

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  StatusOr<PathAutomaton> Run() {
    if (text_.size() > PathAutomaton::kMaxExprBytes) {
      return Status::InvalidArgument("path expression longer than " +
                                     std::to_string(PathAutomaton::kMaxExprBytes) + " bytes");
    }
    SkipSpaces();
    ZIPG_ASSIGN_OR_RETURN(int root, Alt(0));
    if (at_ < text_.size()) return Error("unexpected '" + std::string(1, text_[at_]) + "'");
    return Build(root);
  }

 private:
  static constexpr int kMaxNesting = 200;

  Status Error(const std::string& what) const {
    const std::string where = at_ >= text_.size()
                                  ? "at the end (position " + std::to_string(text_.size() + 1) + ")"
                                  : "at position " + std::to_string(at_ + 1);
    return Status::InvalidArgument("path expression: " + what + " " + where);
  }
  void SkipSpaces() {
    while (at_ < text_.size() && IsSpace(text_[at_])) ++at_;
  }
  bool Peek(char c) const { return at_ < text_.size() && text_[at_] == c; }
  int Add(Node n) {
    nodes_.push_back(n);
    return static_cast<int>(nodes_.size()) - 1;
  }

  StatusOr<int> Alt(int depth) {
    ZIPG_ASSIGN_OR_RETURN(int left, Seq(depth));
    while (Peek('|')) {
      ++at_;
      SkipSpaces();
      ZIPG_ASSIGN_OR_RETURN(int right, Seq(depth));
      left = Add({Node::kAlt, left, right, 0});
    }
    return left;
  }
  StatusOr<int> Seq(int depth) {
    ZIPG_ASSIGN_OR_RETURN(int left, Post(depth));
    while (Peek('/')) {
      ++at_;
      SkipSpaces();
      ZIPG_ASSIGN_OR_RETURN(int right, Post(depth));
      left = Add({Node::kConcat, left, right, 0});
    }
    return left;
  }
  // Consecutive postfix operators become one node (x** = x*, x++ = x+, x?? = x?, any other mix
  // = x*), so a run of them cannot make the automaton's construction quadratic in its length.
  StatusOr<int> Post(int depth) {
    ZIPG_ASSIGN_OR_RETURN(int n, Atom(depth));
    std::optional<Node::Kind> kind;
    for (;;) {
      Node::Kind k;
      if (Peek('*')) {
        k = Node::kStar;
      } else if (Peek('+')) {
        k = Node::kPlus;
      } else if (Peek('?')) {
        k = Node::kOpt;
      } else {
        break;
      }
      ++at_;
      SkipSpaces();
      kind = !kind || *kind == k ? k : Node::kStar;
    }
    if (kind) n = Add({*kind, n, -1, 0});
    return n;
  }
  StatusOr<int> Atom(int depth) {
    if (at_ >= text_.size()) return Error("expected a type, '_' or '('");
    const char c = text_[at_];
    if (c == '(') {
      if (depth >= kMaxNesting) return Error("parentheses nested too deeply");
      const size_t open = at_;
      ++at_;
      SkipSpaces();
      ZIPG_ASSIGN_OR_RETURN(int inner, Alt(depth + 1));
      if (!Peek(')')) {
        return Error("expected ')' to close the '(' at position " + std::to_string(open + 1) + ",");
      }
      ++at_;
      SkipSpaces();
      return inner;
    }
    if (c == '_') {
      ++at_;
      SkipSpaces();
      return NewAtom(PathAutomaton::kAnyType);
    }
    if (!IsDigit(c))
      return Error("expected a type, '_' or '(' but found '" + std::string(1, c) + "'");
    // A decimal number; spaces are ignored, even between its digits.
    uint64_t value = 0;
    while (at_ < text_.size() && IsDigit(text_[at_])) {
      const uint64_t digit = static_cast<uint64_t>(text_[at_] - '0');
      if (value > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10) {
        return Error("type larger than 9223372036854775807");
      }
      value = value * 10 + digit;
      ++at_;
      SkipSpaces();
    }
    return NewAtom(static_cast<int64_t>(value));
  }
  StatusOr<int> NewAtom(int64_t type) {
    if (labels_.size() >= PathAutomaton::kMaxAtoms) {
      return Error("more than " + std::to_string(PathAutomaton::kMaxAtoms) + " types");
    }
    labels_.push_back(type);
    return Add({Node::kAtom, -1, -1, static_cast<uint32_t>(labels_.size())});
  }

  // The Glushkov automaton of the tree under `root`. Children precede their parents in nodes_,
  // so one pass in order computes every node's sets.
  PathAutomaton Build(int root) {
    const size_t n = nodes_.size();
    std::vector<bool> nullable(n);
    std::vector<PosSet> first(n), last(n);
    std::vector<PosSet> follow(labels_.size() + 1);
    for (size_t i = 0; i < n; ++i) {
      const Node& node = nodes_[i];
      const int a = node.left, b = node.right;
      switch (node.kind) {
        case Node::kAtom:
          nullable[i] = false;
          first[i] = last[i] = {node.position};
          break;
        case Node::kConcat:
          nullable[i] = nullable[a] && nullable[b];
          first[i] = nullable[a] ? Union(first[a], first[b]) : first[a];
          last[i] = nullable[b] ? Union(last[a], last[b]) : last[b];
          for (uint32_t p : last[a]) follow[p] = Union(follow[p], first[b]);
          break;
        case Node::kAlt:
          nullable[i] = nullable[a] || nullable[b];
          first[i] = Union(first[a], first[b]);
          last[i] = Union(last[a], last[b]);
          break;
        case Node::kStar:
        case Node::kPlus:
        case Node::kOpt:
          nullable[i] = node.kind == Node::kPlus ? nullable[a] : true;
          first[i] = first[a];
          last[i] = last[a];
          if (node.kind != Node::kOpt) {
            for (uint32_t p : last[a]) follow[p] = Union(follow[p], first[a]);
          }
          break;
      }
    }
    PathAutomaton out;
    out.accepting.assign(labels_.size() + 1, false);
    out.accepting[0] = nullable[root];
    for (uint32_t p : last[root]) out.accepting[p] = true;
    follow[0] = first[root];
    for (uint32_t q = 0; q < follow.size(); ++q) {
      for (uint32_t p : follow[q]) out.transitions.push_back({q, labels_[p - 1], p});
    }
    std::sort(out.transitions.begin(), out.transitions.end(), TransitionLess);
    return out;
  }

  std::string_view text_;
  size_t at_ = 0;
  std::vector<Node> nodes_;
  std::vector<int64_t> labels_;  // per position - 1
};

}  // namespace

StatusOr<PathAutomaton> PathAutomaton::Parse(std::string_view expr) { return Parser(expr).Run(); }

PathAutomaton PathAutomaton::Loop(bool any_type, const std::vector<int64_t>& types) {
  PathAutomaton out;
  out.accepting = {true};
  if (any_type) {
    out.transitions.push_back({0, kAnyType, 0});
  } else {
    for (int64_t t : types) out.transitions.push_back({0, t, 0});
    std::sort(out.transitions.begin(), out.transitions.end(), TransitionLess);
    out.transitions.erase(std::unique(out.transitions.begin(), out.transitions.end()),
                          out.transitions.end());
  }
  return out;
}

StatusOr<PathAutomaton> PathAutomaton::FromTransitions(std::vector<Transition> transitions,
                                                       uint32_t num_states) {
  if (num_states == 0 || num_states > kMaxAtoms + 1) {
    return Status::InvalidArgument("an automaton has 1 to " + std::to_string(kMaxAtoms + 1) +
                                   " states, not " + std::to_string(num_states));
  }
  for (const Transition& t : transitions) {
    if (t.from >= num_states || t.to >= num_states || t.type < kAnyType) {
      return Status::InvalidArgument("automaton transition (" + std::to_string(t.from) + ", " +
                                     std::to_string(t.type) + ", " + std::to_string(t.to) +
                                     ") is out of range");
    }
  }
  std::sort(transitions.begin(), transitions.end(), TransitionLess);
  transitions.erase(std::unique(transitions.begin(), transitions.end()), transitions.end());
  PathAutomaton out;
  out.transitions = std::move(transitions);
  out.accepting.assign(num_states, false);
  return out;
}

}  // namespace zipg::graph
