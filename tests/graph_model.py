"""Shared pieces of the end-to-end tests that compare `zipg` answers with a plain-Python model:
the generated edge-case input (values with every UTF-8 length, U+0000, U+FFFD, U+10FFFF, commas,
quotes, CR, LF; ids up to INT64_MAX; timestamps at the INT64 extremes; repeated (src, type, dst)
rows), the model computed from the CSV files as Python's csv module reads them, and well-formed
requests for every read operation of the contract (../shared/spec/interface.md), the traversals
bfs and rpq included (the model's regular path expressions: a recursive-descent parser and a
Thompson NFA, independent of the engine's Glushkov automata), and search_node_ids (Python's `in`,
startswith, endswith and == over the node values, independent of the engine's FM-indexes).

Everything random takes an explicit random.Random, so a test is reproducible from its seed.
Used by query_cli_test.py (embedded store) and cluster_test.py (a real local cluster)."""
import csv
import json
import os
from collections import deque

INT64_MAX = 2**63 - 1
INT64_MIN = -2**63
CODES = {"INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "UNAVAILABLE", "DEADLINE_EXCEEDED",
         "RESOURCE_EXHAUSTED", "INTERNAL", "FAILED_PRECONDITION"}

CHARS = ["a", "Z", "0", ",", '"', "\n", "\r", " ", "\t", "\\", "\x00", "\x7f", "\x80", "é", "\u07ff",
         "\u0800", "日", "\ufffd", "\uffff", "\U00010000", "😀", "\U0010ffff"]
COMMON = ["red", "re", "red ", "blue", "a,b", '"q"', "two\nlines", "cr\r\nlf", "é", "日本", "\x00", "0"]
NODE_PROPS = ["name", "city", "tag", "note,1", "名"]
EDGE_PROPS = ["w", "data"]
TYPES = [0, 1, 5, 2**40]
BFS_LIMIT, RPQ_LIMIT = 10000, 100000     # the contract's defaults
MAX_LIMIT, MAX_DEPTH = 1000000, 10       # larger limits or depths are INVALID_ARGUMENT
SEARCH_LIMIT, MAX_PATTERN = 10000, 4096  # search_node_ids: default limit, longest pattern (bytes)
# search_node_ids's match kinds: whether a value matches a pattern. On str, as Python compares code
# points; the same as comparing UTF-8 bytes (a valid UTF-8 pattern occurs in valid UTF-8 text only
# at character boundaries).
SEARCH_MATCHES = {"contains": lambda v, p: p in v, "prefix": str.startswith,
                  "suffix": str.endswith, "exact": str.__eq__}


def value(rnd):
    if rnd.random() < 0.5:
        return rnd.choice(COMMON)
    return "".join(rnd.choice(CHARS) for _ in range(rnd.randint(1, 12)))


def timestamp(rnd):
    r = rnd.random()
    if r < 0.3:
        return rnd.randint(-2, 2)
    if r < 0.45:
        return rnd.choice([INT64_MIN, INT64_MAX, INT64_MIN + 1, INT64_MAX - 1])
    return 1_700_000_000 + rnd.randrange(50)


class Input:
    """Generated nodes and edges. ids: every id used (node_ids have a node row, ghost_ids are only
    edge endpoints); rows are lists of CSV fields (property fields unquoted, "" = absent)."""

    def __init__(self, rnd, num_ids=70, num_nodes=55, num_edges=260, id_range=500):
        ids = {0, 1, 2, 63, 64, 4096, 2**62, INT64_MAX, INT64_MAX - 1}
        while len(ids) < num_ids:
            ids.add(rnd.randrange(id_range))
        ids = sorted(ids)
        rnd.shuffle(ids)
        self.ids = ids
        self.node_ids, self.ghost_ids = ids[:num_nodes], ids[num_nodes:]
        self.node_rows = []
        for i in self.node_ids:
            self.node_rows.append([str(i)] + [value(rnd) if rnd.random() < 0.5 else ""
                                              for _ in NODE_PROPS])
        self.edge_rows = []
        for _ in range(num_edges):
            if self.edge_rows and rnd.random() < 0.1:  # repeat a (src, type, dst): upsert
                src, dst, typ = self.edge_rows[rnd.randrange(len(self.edge_rows))][:3]
            else:
                src = (rnd.choice(self.node_ids[:6]) if rnd.random() < 0.3
                       else rnd.choice(ids[:40] + self.ghost_ids))
                src, dst, typ = str(src), str(rnd.choice(ids)), str(rnd.choice(TYPES))
            self.edge_rows.append([src, dst, typ, str(timestamp(rnd))] +
                                  [value(rnd) if rnd.random() < 0.4 else "" for _ in EDGE_PROPS])

    def write(self, directory):
        """Writes nodes.csv and edges.csv into `directory`; returns their paths."""
        nodes_csv, edges_csv = os.path.join(directory, "nodes.csv"), os.path.join(directory, "edges.csv")
        with open(nodes_csv, "wb") as f:
            f.write(csv_bytes(["id"] + NODE_PROPS, self.node_rows))
        with open(edges_csv, "wb") as f:
            f.write(csv_bytes(["src", "dst", "type", "timestamp"] + EDGE_PROPS, self.edge_rows))
        return nodes_csv, edges_csv


def field(v):
    return '"' + v.replace('"', '""') + '"' if v else ""


def csv_bytes(header, rows):
    lines = [",".join(field(h) for h in header)]
    for row in rows:
        lines.append(",".join(row[:1 if header[0] == "id" else 4] +
                              [field(v) for v in row[1 if header[0] == "id" else 4:]]))
    # Mixed line endings, as files from different tools have.
    out = ""
    for i, line in enumerate(lines):
        out += line + ("\r\n" if i % 3 == 0 else "\n")
    return out.encode("utf-8")


# ------------------------------------------------------------------------------------------------
# The model, from the CSV files as Python's csv module reads them.
def load_model(nodes_path, edges_path):
    nodes, latest = {}, {}
    with open(nodes_path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    for row in rows[1:]:
        nodes[int(row[0])] = {header[i]: v for i, v in enumerate(row) if i > 0 and v != ""}
    with open(edges_path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    for row in rows[1:]:
        src, dst, typ, ts = (int(x) for x in row[:4])
        props = {header[i]: v for i, v in enumerate(row) if i >= 4 and v != ""}
        latest[(src, typ, dst)] = {"src": src, "type": typ, "dst": dst, "timestamp": ts,
                                   "properties": props}
    records = {}
    for e in latest.values():
        records.setdefault((e["src"], e["type"]), []).append(e)
    for edges in records.values():
        edges.sort(key=lambda e: (-e["timestamp"], e["dst"]))
    return nodes, records


# ------------------------------------------------------------------------------------------------
# Regular path expressions (rpq), the textbook way: a recursive-descent parser into a tuple AST and
# a Thompson NFA with epsilon transitions, searched over the product (node, NFA state). This is
# deliberately not the Glushkov position automaton the engine builds, so the two are independent.
WHITESPACE = " \t\r\n"  # ignored everywhere in an expression, even inside a number
DIGITS = "0123456789"   # ASCII only: str.isdigit() would also take "١" or "²"
POSTFIX = {"*": "star", "+": "plus", "?": "opt"}


class ExprError(ValueError):
    """A malformed regular path expression; the message names the (1-based) character position."""


class _Parser:
    """alt := cat ('|' cat)* ; cat := post ('/' post)* ; post := atom ('*' | '+' | '?')* ;
    atom := decimal type | '_' | '(' alt ')'. Whitespace is dropped before parsing (each kept
    character remembers its position in the text)."""

    def __init__(self, text):
        self.chars = [(c, k) for k, c in enumerate(text) if c not in WHITESPACE]
        self.i, self.end = 0, len(text)

    def peek(self):
        return self.chars[self.i][0] if self.i < len(self.chars) else None

    def fail(self, what):
        where = self.chars[self.i][1] if self.i < len(self.chars) else self.end
        raise ExprError(f"{what} at position {where + 1}")

    def parse(self):
        e = self.alt()
        if self.peek() is not None:
            self.fail(f"unexpected {self.peek()!r}")
        return e

    def alt(self):
        e = self.cat()
        while self.peek() == "|":
            self.i += 1
            e = ("alt", e, self.cat())
        return e

    def cat(self):
        e = self.post()
        while self.peek() == "/":
            self.i += 1
            e = ("cat", e, self.post())
        return e

    def post(self):
        e = self.atom()
        while self.peek() is not None and self.peek() in POSTFIX:
            e = (POSTFIX[self.peek()], e)
            self.i += 1
        return e

    def atom(self):
        c = self.peek()
        if c == "(":
            self.i += 1
            e = self.alt()
            if self.peek() != ")":
                self.fail("expected ')'")
            self.i += 1
            return e
        if c == "_":
            self.i += 1
            return ("any",)
        if c is not None and c in DIGITS:
            start, digits = self.i, ""
            while self.peek() is not None and self.peek() in DIGITS:
                digits += self.peek()
                self.i += 1
            if int(digits) > INT64_MAX:
                self.i = start
                self.fail("type out of the int64 range")
            return ("type", int(digits))
        self.fail("expected a type, '_' or '('")


def parse_expr(text):
    """The AST of a regular path expression: ("type", t) | ("any",) | ("cat", a, b) |
    ("alt", a, b) | ("star", a) | ("plus", a) | ("opt", a). Raises ExprError."""
    return _Parser(text).parse()


class Nfa:
    """Thompson's construction: every fragment has one start and one accepting state; `eps[q]`
    are q's epsilon successors, `moves[q]` its labelled ones as (type, or None for `_`, state)."""

    def __init__(self, ast):
        self.eps, self.moves = [], []
        self.start, self.final = self._build(ast)
        # Closures keep only the states that matter to a search: those with a move, and final.
        self.closure = [self._close(q) for q in range(len(self.eps))]

    def _state(self):
        self.eps.append([])
        self.moves.append([])
        return len(self.eps) - 1

    def _build(self, e):
        kind = e[0]
        if kind in ("type", "any"):
            s, f = self._state(), self._state()
            self.moves[s].append((e[1] if kind == "type" else None, f))
            return s, f
        if kind == "cat":
            s1, f1 = self._build(e[1])
            s2, f2 = self._build(e[2])
            self.eps[f1].append(s2)
            return s1, f2
        s, f = self._state(), self._state()
        s1, f1 = self._build(e[1])
        self.eps[s].append(s1)
        self.eps[f1].append(f)
        if kind == "alt":
            s2, f2 = self._build(e[2])
            self.eps[s].append(s2)
            self.eps[f2].append(f)
        elif kind == "star":
            self.eps[s].append(f)
            self.eps[f1].append(s1)
        elif kind == "plus":
            self.eps[f1].append(s1)
        else:
            assert kind == "opt", kind
            self.eps[s].append(f)
        return s, f

    def _close(self, q):
        seen, todo = {q}, [q]
        while todo:
            for r in self.eps[todo.pop()]:
                if r not in seen:
                    seen.add(r)
                    todo.append(r)
        return [r for r in sorted(seen) if self.moves[r] or r == self.final]

    def search(self, src, step):
        """Breadth-first over (node, state) from (src, start): (the sorted ids d such that some
        path from src to d spells a word of the expression, the (node, state) pairs visited).
        step(node, label) lists the node's destinations over live edges of type `label` (None:
        any type)."""
        seen = set((src, q) for q in self.closure[self.start])
        found = {src} if self.final in self.closure[self.start] else set()
        queue = deque(seen)
        while queue:
            n, q = queue.popleft()
            for label, q2 in self.moves[q]:
                for m in step(n, label):
                    for q3 in self.closure[q2]:
                        if (m, q3) not in seen:
                            seen.add((m, q3))
                            queue.append((m, q3))
                            if q3 == self.final:
                                found.add(m)
        return sorted(found), seen


class Model:
    def __init__(self, nodes, records):
        self.nodes, self.records = nodes, records

    def rec(self, i, t):
        return self.records.get((i, t), [])

    def neighbors(self, i, t=None):
        """Sorted distinct dst of the edges of node i (of type t, or all types)."""
        dsts = set()
        for (s, typ), edges in self.records.items():
            if s == i and (t is None or typ == t):
                dsts.update(e["dst"] for e in edges)
        return sorted(dsts)

    def live_ids(self):
        """Sorted ids with a node entry or a live edge (as its src or its dst): rpq's sources when
        a request names none."""
        ids = set(self.nodes)
        for (s, _), edges in self.records.items():
            if edges:
                ids.add(s)
                ids.update(e["dst"] for e in edges)
        return sorted(ids)

    def stepper(self):
        """step(node, type or None) -> self.neighbors(node, type), remembered (for one request:
        the base Model's neighbors() scans every record)."""
        memo = {}

        def step(n, t):
            r = memo.get((n, t))
            if r is None:
                r = memo[(n, t)] = self.neighbors(n, t)
            return r
        return step

    def bfs_depths(self, req):
        """{id: depth} of every id within max_depth hops of req["id"] (arguments valid)."""
        step = self.stepper()
        types = req.get("types")
        labels = [None] if types is None else sorted(set(types))
        depth, frontier = {req["id"]: 0}, [req["id"]]
        for d in range(1, req["max_depth"] + 1):
            nxt = []
            for n in frontier:
                for t in labels:
                    for m in step(n, t):
                        if m not in depth:
                            depth[m] = d
                            nxt.append(m)
            frontier = nxt
        return depth

    def bfs(self, req):
        types = req.get("types")
        limit = req.get("limit", BFS_LIMIT)
        if req["id"] < 0 or not 0 <= req["max_depth"] <= MAX_DEPTH or \
                not 1 <= limit <= MAX_LIMIT or (types and min(types) < 0):
            return {"error": "INVALID_ARGUMENT"}
        order = sorted(self.bfs_depths(req).items(), key=lambda x: (x[1], x[0]))
        return {"ok": [{"id": i, "depth": d} for i, d in order[:limit]]}

    def rpq_sources(self, req):
        """The sources of a valid rpq request, sorted and distinct."""
        srcs = req.get("sources")
        return self.live_ids() if srcs is None else sorted(set(srcs))

    def rpq(self, req):
        limit, srcs = req.get("limit", RPQ_LIMIT), req.get("sources")
        if not 1 <= limit <= MAX_LIMIT or (srcs and min(srcs) < 0):
            return {"error": "INVALID_ARGUMENT"}
        try:
            nfa = Nfa(parse_expr(req["expr"]))
        except ExprError:
            return {"error": "INVALID_ARGUMENT"}
        step, pairs = self.stepper(), []
        for s in self.rpq_sources(req):  # in order, so the first `limit` pairs are known early
            pairs += [[s, d] for d in nfa.search(s, step)[0]]
            if len(pairs) > limit:
                break
        return {"ok": {"pairs": pairs[:limit], "truncated": len(pairs) > limit}}

    def traversal_nodes(self, req, want):
        """For a well-formed bfs / rpq request and its answer `want` from run(): (the ids whose
        edges any correct server must read to give that answer, every id the traversal reaches).
        A server with some shards down must fail (UNAVAILABLE) if it needs one of the first and
        may fail if it meets one of the second. An rpq without sources needs every shard."""
        step = self.stepper()
        if req["op"] == "bfs":
            depth = self.bfs_depths(req)
            last = req["max_depth"]
            if len(want["ok"]) == req.get("limit", BFS_LIMIT):
                last = want["ok"][-1]["depth"]  # the depths after the last entry may be skipped
            return {i for i, d in depth.items() if d < last}, set(depth)
        nfa = Nfa(parse_expr(req["expr"]))
        srcs = self.rpq_sources(req)
        if want["ok"]["truncated"]:  # the sources after the one that overflowed may be skipped
            srcs_needed = {s for s, _ in want["ok"]["pairs"]} - {want["ok"]["pairs"][-1][0]}
        else:
            srcs_needed = set(srcs)
        must, reached = set(), set()
        for s in srcs:
            seen = nfa.search(s, step)[1]
            reached.update(n for n, _ in seen)
            if s in srcs_needed:
                must.update(n for n, q in seen if nfa.moves[q])
        return must, reached

    def degraded_wants(self, req, want, dead):
        """The answers a cluster may give to a traversal request (want: run(req)) while the ids
        in `dead` live on unreachable shards: an argument error as it is, UNAVAILABLE if a
        correct server must read a dead id's edges (an rpq without sources reads every shard),
        either if the traversal only meets one, else `want`. Never another (partial) answer."""
        if "error" in want:
            return [want]
        if req["op"] == "rpq" and req.get("sources") is None:
            return [{"error": "UNAVAILABLE"}]
        must, reached = self.traversal_nodes(req, want)
        if must & dead:
            return [{"error": "UNAVAILABLE"}]
        if reached & dead:
            return [{"error": "UNAVAILABLE"}, want]
        return [want]

    def search(self, req):
        """search_node_ids: the sorted ids of the live nodes with a value (of req["property"], or
        of any property) that matches req["pattern"] as req["match"] says (default contains), the
        first `limit`; an empty pattern, one over MAX_PATTERN bytes, an unknown match or a limit
        outside 1..MAX_LIMIT is INVALID_ARGUMENT. A JSON null is an absent argument."""
        pattern, prop = req["pattern"], req.get("property")
        match = "contains" if req.get("match") is None else req["match"]
        limit = SEARCH_LIMIT if req.get("limit") is None else req["limit"]
        if not pattern or len(pattern.encode("utf-8")) > MAX_PATTERN or \
                match not in SEARCH_MATCHES or not 1 <= limit <= MAX_LIMIT:
            return {"error": "INVALID_ARGUMENT"}
        test = SEARCH_MATCHES[match]
        ids = sorted(i for i, n in self.nodes.items()
                     if any(test(v, pattern) for k, v in n.items() if prop is None or k == prop))
        return {"ok": {"ids": ids[:limit], "truncated": len(ids) > limit}}

    def run(self, req):
        """The expected response for a well-formed request (argument errors are tested apart)."""
        op = req["op"]
        a = req
        neg = [k for k in ("id", "type", "pos", "limit") if isinstance(a.get(k), int) and a[k] < 0]
        if neg:
            return {"error": "INVALID_ARGUMENT"}
        if op == "bfs":  # limit 0 is INVALID_ARGUMENT too (assoc_range's limit 0 is fine)
            return self.bfs(a)
        if op == "rpq":
            return self.rpq(a)
        if op == "search_node_ids":
            return self.search(a)
        if op == "get_node_property":
            n = self.nodes.get(a["id"])
            if n is None:
                return {"ok": None}
            if a.get("properties") is None:
                return {"ok": dict(n)}
            return {"ok": {k: n[k] for k in a["properties"] if k in n}}
        if op == "obj_get":
            n = self.nodes.get(a["id"])
            return {"ok": None if n is None else {"id": a["id"], "properties": dict(n)}}
        if op == "get_node_ids":
            if not a["properties"]:
                return {"error": "INVALID_ARGUMENT"}
            return {"ok": sorted(i for i, n in self.nodes.items()
                                 if all(n.get(k) == v for k, v in a["properties"].items()))}
        if op == "get_neighbor_ids":
            flt = a.get("properties") or {}
            keep = [d for d in self.neighbors(a["id"], a.get("type")) if not flt or (
                d in self.nodes and all(self.nodes[d].get(k) == v for k, v in flt.items()))]
            return {"ok": keep}
        edges = self.rec(a["id"], a["type"])
        if op == "get_edge_record":
            return {"ok": {"src": a["id"], "type": a["type"], "count": len(edges)}}
        if op == "assoc_count":
            return {"ok": len(edges)}
        if op == "get_edge_range":
            newer = sum(1 for e in edges if e["timestamp"] > a["t_hi"])
            inside = sum(1 for e in edges if a["t_lo"] <= e["timestamp"] <= a["t_hi"])
            return {"ok": [newer, newer + inside]}
        if op == "get_edge_data":
            o = a["time_order"]
            return {"ok": edges[o] if 0 <= o < len(edges) else None}
        if op == "assoc_range":
            return {"ok": edges[a["pos"]:a["pos"] + a["limit"]]}
        if op == "assoc_get":
            return {"ok": [e for e in edges
                           if e["dst"] in a["ids"] and a["low"] <= e["timestamp"] <= a["high"]]}
        if op == "assoc_time_range":
            return {"ok": [e for e in edges if a["low"] <= e["timestamp"] <= a["high"]][:a["limit"]]}
        raise AssertionError(op)


def requests(model, inp, rnd):
    """Well-formed requests for every read operation, with edge cases: existing and missing ids,
    all types, time ranges with the INT64 extremes, filters, get_node_ids with 1-3 pairs, assoc_get
    id lists with duplicates and misses, limit / pos / time_order edge cases, negative arguments;
    then the traversals (traversal_requests) and the searches (search_requests)."""
    out = []
    ids, node_ids = inp.ids, inp.node_ids
    some_ids = ids + [3, 999, INT64_MAX - 5]
    names = NODE_PROPS + ["nope", ""]
    for i in some_ids:
        out.append({"op": "obj_get", "id": i})
        out.append({"op": "get_node_property", "id": i})
        out.append({"op": "get_node_property", "id": i,
                    "properties": rnd.sample(names, rnd.randint(0, 3))})
        out.append({"op": "get_neighbor_ids", "id": i})
        for t in TYPES[:2] + [7]:
            out.append({"op": "get_neighbor_ids", "id": i, "type": t})
        n = model.nodes[rnd.choice(node_ids)]
        flt = dict(rnd.sample(sorted(n.items()), min(len(n), 1))) if n else {"city": "red"}
        out.append({"op": "get_neighbor_ids", "id": i, "properties": flt})
        out.append({"op": "get_neighbor_ids", "id": i, "type": 0, "properties": {"nope": "x"}})
    for _ in range(60):
        n = model.nodes[rnd.choice(node_ids)]
        items = sorted(n.items())
        flt = dict(rnd.sample(items, rnd.randint(1, min(3, len(items))))) if items else {"name": "red"}
        if rnd.random() < 0.3:
            k = rnd.choice(list(flt))
            flt[k] = flt[k][:-1] if rnd.random() < 0.5 else flt[k] + "x"  # prefix / extension
        out.append({"op": "get_node_ids", "properties": flt})
    for v in COMMON:
        out.append({"op": "get_node_ids", "properties": {rnd.choice(NODE_PROPS): v}})
    keys = list(model.records) + [(node_ids[0], 7), (999, 0), (INT64_MAX, INT64_MAX)]
    for (s, t) in keys:
        edges = model.rec(s, t)
        c = len(edges)
        times = sorted({e["timestamp"] for e in edges} | {INT64_MIN, INT64_MAX, 0})
        out.append({"op": "get_edge_record", "id": s, "type": t})
        out.append({"op": "assoc_count", "id": s, "type": t})
        for lo, hi in [(INT64_MIN, INT64_MAX), (INT64_MAX, INT64_MIN)] + \
                [(rnd.choice(times), rnd.choice(times)) for _ in range(3)]:
            out.append({"op": "get_edge_range", "id": s, "type": t, "t_lo": lo, "t_hi": hi})
        tm = rnd.choice(times)
        out.append({"op": "get_edge_range", "id": s, "type": t, "t_lo": tm, "t_hi": tm})
        for o in (-1, 0, c - 1, c, INT64_MAX):
            out.append({"op": "get_edge_data", "id": s, "type": t, "time_order": o})
        for pos, limit in [(0, INT64_MAX), (0, 0), (1, 2), (c, 5), (INT64_MAX, 1),
                           (rnd.randint(0, c), rnd.randint(0, c + 1))]:
            out.append({"op": "assoc_range", "id": s, "type": t, "pos": pos, "limit": limit})
        dsts = [e["dst"] for e in edges]
        for _ in range(2):
            want = rnd.sample(dsts, min(len(dsts), rnd.randint(0, 3))) + [12345]
            if want and rnd.random() < 0.5:
                want.append(want[0])  # duplicate
            lo, hi = sorted((rnd.choice(times), rnd.choice(times)))
            out.append({"op": "assoc_get", "id": s, "type": t, "ids": want, "low": lo, "high": hi})
        out.append({"op": "assoc_get", "id": s, "type": t, "ids": dsts, "low": INT64_MIN,
                    "high": INT64_MAX})
        for limit in (0, 1, 3, INT64_MAX):
            lo, hi = sorted((rnd.choice(times), rnd.choice(times)))
            out.append({"op": "assoc_time_range", "id": s, "type": t, "low": lo, "high": hi,
                        "limit": limit})
    # Negative arguments are INVALID_ARGUMENT.
    out += [{"op": "obj_get", "id": -1},
            {"op": "assoc_range", "id": node_ids[0], "type": 0, "pos": -1, "limit": 1},
            {"op": "assoc_range", "id": node_ids[0], "type": 0, "pos": 0, "limit": -1},
            {"op": "assoc_count", "id": 1, "type": -1},
            {"op": "assoc_time_range", "id": 1, "type": 0, "low": 0, "high": 1, "limit": -5},
            {"op": "get_neighbor_ids", "id": 1, "type": -2},
            {"op": "get_node_ids", "properties": {}},
            {"op": "search_node_ids", "pattern": ""},
            {"op": "search_node_ids", "pattern": "red", "match": "regex"},
            {"op": "search_node_ids", "pattern": "red", "limit": 0}]
    return out + traversal_requests(model, inp, rnd) + search_requests(model, inp, rnd)


# Patterns for search_node_ids besides COMMON and pieces of stored values: single awkward characters
# (CSV syntax, U+0000, every UTF-8 length), case variants, and patterns no value holds.
SEARCH_PATTERNS = ['"', ",", "\n", "\r", "\r\n", "\x00", "\x00\x00", "\t", " ", "\\", "\x7f",
                   "\x80", "é", "\u07ff", "\u0800", "日", "\ufffd", "\uffff", "\U00010000", "😀",
                   "\U0010ffff", 'a"', '",', "e", "r", "0", "RED", "Red", "BLUE", "no such value",
                   "red\x00", "\x00red"]


def search_requests(model, inp, rnd):
    """search_node_ids requests (about 450): pieces of stored values cut at random code-point
    boundaries, whole values, their prefixes and suffixes, values with a character added, the end
    of one distinct value joined to the start of the next (adjacent in the engine's sorted text:
    must not match across them), COMMON and SEARCH_PATTERNS; every match kind (and none: contains);
    with the value's own property, another one, one no node has ("nope", "", an edge property) or
    none; small limits (truncated) and limits around the number of matches; JSON nulls for the
    optional arguments; patterns of 4096 bytes and just over it (multi-byte characters: the limit
    is in bytes); then argument errors (empty pattern, unknown match, limits out of range)."""
    out = []
    kinds = sorted(SEARCH_MATCHES)
    values = sorted({(k, v) for n in model.nodes.values() for k, v in n.items()})
    distinct = sorted({v for _, v in values}, key=lambda v: v.encode("utf-8"))
    other_props = NODE_PROPS + ["nope", "", "Name", EDGE_PROPS[0]]

    def search(pattern, prop=None, match=None, limit=None):
        q = {"op": "search_node_ids", "pattern": pattern}
        if prop is not None:
            q["property"] = prop
        if match is not None:
            q["match"] = match
        if limit is not None:
            q["limit"] = limit
        return q

    def prop_for(k):  # the value's own property, none, or any other name
        x = rnd.random()
        return k if x < 0.4 else None if x < 0.8 else rnd.choice(other_props)

    def some_limit():
        return rnd.choice([None, None, None, None, 1, 2, 3, 5])

    if values:
        for _ in range(100):
            k, v = rnd.choice(values)
            i = rnd.randrange(len(v))
            j = rnd.randint(i + 1, min(len(v), i + rnd.choice([1, 2, 3, 12])))
            out.append(search(v[i:j], prop_for(k), rnd.choice(kinds + [None]), some_limit()))
        for k, v in rnd.sample(values, min(len(values), 30)):
            out.append(search(v, prop_for(k), rnd.choice(kinds + [None]), some_limit()))
            out.append(search(v[:rnd.randint(1, len(v))], prop_for(k), "prefix", some_limit()))
            out.append(search(v[-rnd.randint(1, len(v)):], prop_for(k), "suffix", some_limit()))
            out.append(search(v + rnd.choice(["x", " ", "\x00", "é"]), prop_for(k),
                              rnd.choice(kinds)))
            out.append(search(rnd.choice(["x", " ", "\x00"]) + v, prop_for(k), rnd.choice(kinds)))
    adjacent = list(zip(distinct, distinct[1:]))
    for a, b in rnd.sample(adjacent, min(len(adjacent), 15)):
        out.append(search(a[-2:] + b[:2], None, rnd.choice(["contains", "contains", "exact"])))
        out.append(search(a[-1:] + rnd.choice(["\x00", "\x01", "\x02", ""]) + b[:1], None))
    for p in COMMON + SEARCH_PATTERNS:
        for m in kinds:
            out.append(search(p, rnd.choice([None, None, rnd.choice(NODE_PROPS)]), m,
                              rnd.choice([None, None, 1, 2, 3])))
    # Limits around the number of matches: truncated exactly when more ids match.
    for p, prop in [("e", None), ("a", None), ("\x00", None), ("r", "name"), ("re", "city"),
                    ("0", None)]:
        n = len(model.search(search(p, prop, None, MAX_LIMIT))["ok"]["ids"])
        for limit in sorted({1, max(n - 1, 1), max(n, 1), n + 1, MAX_LIMIT}):
            out.append(search(p, prop, "contains", limit))
    # Properties no node has; JSON nulls (absent arguments); the longest patterns.
    out += [search("red", "nope"), search("re", "", "prefix"), search("red", "Name", "exact"),
            search("a", EDGE_PROPS[0]), search("a", EDGE_PROPS[1], "suffix"),
            {"op": "search_node_ids", "pattern": "re", "property": None, "match": None,
             "limit": None},
            {"op": "search_node_ids", "pattern": "é", "property": "city", "match": None,
             "limit": 2},
            search("a" * MAX_PATTERN), search("日" * (MAX_PATTERN // 3), None, "prefix"),
            search("😀" * (MAX_PATTERN // 4), "name", "exact"), search("red" + "a" * 4093, None,
                                                                     "prefix")]
    # Argument errors (INVALID_ARGUMENT).
    out += [search(""), search("", "name", "exact"), search("", None, "regex", 0),
            search("a", None, "regex"), search("a", None, ""), search("a", "name", "Contains"),
            search("a", None, "prefix "), search("a", None, None, 0),
            search("a", "name", "prefix", MAX_LIMIT + 1), search("a", None, None, -1),
            search("a", None, "exact", INT64_MAX), search("a", None, None, INT64_MIN),
            search("a" * (MAX_PATTERN + 1)), search("日" * (MAX_PATTERN // 3 + 1)),
            search("😀" * (MAX_PATTERN // 4) + "a", None, "suffix")]
    return out


def random_expr(rnd, depth=3):
    """A random well-formed regular path expression over TYPES, the unknown type 7 and `_`, nested
    at most `depth` deep, parenthesized only where precedence needs it (and now and then where
    it does not), with random whitespace (also inside numbers: "10 99" is the type 1099)."""
    return _expr(rnd, depth)[0]


def _ws(rnd):
    return rnd.choice("    \t\r\n") if rnd.random() < 0.15 else ""


def _expr(rnd, depth):
    """(text, level): level 0 an alternation, 1 a concatenation, 2 a postfix or an atom."""
    def wrap(text, level, need):
        if level < need or rnd.random() < 0.1:
            return "(" + _ws(rnd) + text + _ws(rnd) + ")"
        return text
    r = rnd.random()
    if depth == 0 or r < 0.2:
        s = str(rnd.choice(TYPES + [7, "_", "_"]))
        if len(s) > 1 and rnd.random() < 0.2:
            k = rnd.randrange(1, len(s))
            s = s[:k] + rnd.choice(WHITESPACE) + s[k:]
        return s, 2
    if r < 0.45:
        a, b = _expr(rnd, depth - 1), _expr(rnd, depth - 1)
        return wrap(*a, 1) + _ws(rnd) + "/" + _ws(rnd) + wrap(*b, 2), 1
    if r < 0.65:
        a, b = _expr(rnd, depth - 1), _expr(rnd, depth - 1)
        return wrap(*a, 0) + _ws(rnd) + "|" + _ws(rnd) + wrap(*b, 1), 0
    a = _expr(rnd, depth - 1)
    ops = rnd.choice("**++?") + (rnd.choice("*+?") if rnd.random() < 0.15 else "")
    return wrap(*a, 2) + _ws(rnd) + ops, 2


# Regular path expressions that must be INVALID_ARGUMENT.
BAD_EXPRS = ["", "   ", "\t\r\n", "()", "(  )", "1/", "/1", "|1", "1|", "1||2", "1//2", "*1", "+",
             "?", "(1", "1)", "((1)", "(1))", ")(", "1(2)", "(1)(2)", "__", "_1", "1_", "1 _",
             "-1", "1-2", "a", "1.5", "1e3", "1,2", "1/(2|)", "(|1)", "1/*", "(*)", "1|*",
             "9223372036854775808", "99999999999999999999", "1\x0b", "\u00a01", "\uff11",
             "\u0661", "\u00b2", "1;2", "1/(_", "[1]", "1 / / 2"]


def traversal_requests(model, inp, rnd):
    """bfs and rpq requests (about 370): bfs from up to 80 ids (60 with edges; loaded, ghost,
    missing) with depths 0-10, type lists (None, [], subsets of TYPES, the unknown type 7,
    duplicates) and limits; rpq with random and fixed expressions from lists of sources
    (duplicates, ghost and missing ids, none) and over every source with small limits (truncated)
    and the default one; then argument errors and malformed expressions."""
    out = []
    ids, hubs = inp.ids + [3, 999, INT64_MAX - 5], inp.node_ids[:6]
    type_sets = [None, None, None, [], [0], [1, 5], [2**40], [7], [0, 0, 7], [5, 1], TYPES,
                 TYPES + [7]]

    def bfs(i, depth, types=None, limit=None):
        q = {"op": "bfs", "id": i, "max_depth": depth}
        if types is not None:
            q["types"] = types
        if limit is not None:
            q["limit"] = limit
        return q
    with_edges = [i for i in ids if model.neighbors(i)]
    others = [i for i in ids if i not in set(with_edges)]
    starts = rnd.sample(with_edges, min(len(with_edges), 60)) + \
        rnd.sample(others, min(len(others), 20))
    for i in starts:
        out.append(bfs(i, rnd.choice([0, 1, 2, 2, 3, 3, 10]), rnd.choice(type_sets),
                       rnd.choice([None, None, None, None, 1, 3])))
    for i in hubs:
        for depth in (0, 1, 2, 3, 10):
            out.append(bfs(i, depth))
        out.append(bfs(i, rnd.choice([2, 10]), rnd.choice(type_sets[3:])))
        out.append(bfs(i, 10, None, rnd.choice([1, 3, 10, MAX_LIMIT])))

    def rpq(expr, sources=None, limit=None):
        q = {"op": "rpq", "expr": expr}
        if sources is not None:
            q["sources"] = sources
        if limit is not None:
            q["limit"] = limit
        return q
    fixed = ["_", "_*", "_+", "_?", "0", "0*", "(1|_)?", "0/1*", "(0|5)+/_", "_/_/_", "7", "7*",
             "(7)?", "7/_*", "_*/7", "1099511627776", "1099 511627776+", "(0/1)*", "(0|1)*/5",
             "1**", "1+?", "0?*", "((0))", "0/_|1/_/_", "_/(0|5)*/1", "9223372036854775807",
             " 0 / 1 | 5 * ", "(_/_)*", "_*/_*"]
    pool = ids + [INT64_MAX]

    def sources():
        srcs = rnd.sample(pool, rnd.randint(1, 5))
        if rnd.random() < 0.3:
            srcs.append(srcs[0])  # duplicates count once
        if rnd.random() < 0.3:
            srcs.append(rnd.choice(hubs))
        return srcs
    for expr in fixed:
        out.append(rpq(expr, sources(), rnd.choice([None, None, None, 1, 5])))
        out.append(rpq(expr, [rnd.choice(hubs)]))
    for _ in range(110):
        out.append(rpq(random_expr(rnd, rnd.choice([1, 2, 3, 4])), sources(),
                       rnd.choice([None, None, None, None, 1, 3, 20])))
    out += [rpq("_*", []), rpq("0", [999]), rpq("7*", [999, 3, 999]), rpq("_*", [INT64_MAX]),
            rpq("_+", hubs, MAX_LIMIT)]
    # Over every source: small limits (truncated), and the default one.
    for expr, limit in [("_", 1), ("_", 5), ("_", 50), ("_*", 1), ("_*", 50), ("0/1*", 50),
                        ("7*", 5), ("_+", 5), ("7*", None), ("(1|_)?", None), ("_/_", None),
                        ("_+", None), ("0|5/_", None)]:
        out.append(rpq(expr, None, limit))
    for _ in range(3):
        out.append(rpq(random_expr(rnd, 3), None, rnd.choice([None, 10])))
    # Argument errors (INVALID_ARGUMENT).
    i = hubs[0]
    out += [bfs(i, -1), bfs(i, 11), bfs(i, 2, None, 0), bfs(i, 2, None, MAX_LIMIT + 1),
            bfs(i, 2, None, -1), bfs(i, 2, None, INT64_MAX), bfs(-1, 2), bfs(INT64_MIN, 0),
            bfs(i, 2, [0, -1]), bfs(i, 0, [INT64_MIN]), bfs(i, INT64_MAX),
            rpq("_", [i], 0), rpq("_", None, 0), rpq("_", [i], MAX_LIMIT + 1),
            rpq("_", [i], INT64_MAX), rpq("_", [i], -3), rpq("_", [-1]), rpq("_", [i, INT64_MIN])]
    out += [rpq(e, [i]) for e in BAD_EXPRS] + [rpq(e) for e in BAD_EXPRS[:6]]
    return out


def same(got, want):
    """True if a JSON answer matches the model's expectation ({"error": CODE} compares codes)."""
    if "error" in want:
        return "error" in got and got["error"]["code"] == want["error"]
    return got == want


# Requests that must fail (with the code).
BAD = [
    ('{"op": "obj_get", "id": 1', "INVALID_ARGUMENT"),                 # malformed JSON
    ("not json at all", "INVALID_ARGUMENT"),
    ('["op", "obj_get"]', "INVALID_ARGUMENT"),                         # not an object
    ('{"id": 1}', "INVALID_ARGUMENT"),                                 # no op
    ('{"op": 7}', "INVALID_ARGUMENT"),
    ('{"op": "obj_gett", "id": 1}', "INVALID_ARGUMENT"),               # unknown op
    ('{"op": "obj_get"}', "INVALID_ARGUMENT"),                         # missing argument
    ('{"op": "assoc_range", "id": 1, "type": 0, "pos": 0}', "INVALID_ARGUMENT"),
    ('{"op": "obj_get", "id": "1"}', "INVALID_ARGUMENT"),              # mistyped
    ('{"op": "obj_get", "id": 1.5}', "INVALID_ARGUMENT"),
    ('{"op": "obj_get", "id": true}', "INVALID_ARGUMENT"),
    ('{"op": "obj_get", "id": 9223372036854775808}', "INVALID_ARGUMENT"),
    ('{"op": "obj_get", "id": 1e30}', "INVALID_ARGUMENT"),
    ('{"op": "get_node_ids", "properties": ["name"]}', "INVALID_ARGUMENT"),
    ('{"op": "get_node_ids", "properties": {"name": 1}}', "INVALID_ARGUMENT"),
    ('{"op": "get_node_property", "id": 1, "properties": "name"}', "INVALID_ARGUMENT"),
    ('{"op": "assoc_get", "id": 1, "type": 0, "ids": 5, "low": 0, "high": 1}', "INVALID_ARGUMENT"),
    ('{"op": "assoc_get", "id": 1, "type": 0, "ids": ["5"], "low": 0, "high": 1}', "INVALID_ARGUMENT"),
    ('{"op": "get_edge_range", "id": 1, "type": 0, "t_lo": 0, "t_hi": 1, "t_mid": 0}', "INVALID_ARGUMENT"),  # extra
    ('{"op": "obj_get", "id": 1, "ID": 1}', "INVALID_ARGUMENT"),
    (b'{"op": "get_node_ids", "properties": {"name": "\xff"}}', "INVALID_ARGUMENT"),  # not UTF-8
    ('{"op": "bfs", "id": 1}', "INVALID_ARGUMENT"),                    # no max_depth
    ('{"op": "bfs", "max_depth": 1}', "INVALID_ARGUMENT"),
    ('{"op": "bfs", "id": 1, "max_depth": 2, "types": "0"}', "INVALID_ARGUMENT"),
    ('{"op": "bfs", "id": 1, "max_depth": 2, "types": 0}', "INVALID_ARGUMENT"),
    ('{"op": "bfs", "id": 1, "max_depth": 2, "types": [0.5]}', "INVALID_ARGUMENT"),
    ('{"op": "bfs", "id": 1, "max_depth": 2, "types": [true]}', "INVALID_ARGUMENT"),
    ('{"op": "bfs", "id": 1, "max_depth": "2"}', "INVALID_ARGUMENT"),
    ('{"op": "bfs", "id": 1, "max_depth": 2.0}', "INVALID_ARGUMENT"),
    ('{"op": "bfs", "id": 1, "max_depth": 2, "limit": "5"}', "INVALID_ARGUMENT"),
    ('{"op": "bfs", "id": 1, "max_depth": 4294967298}', "INVALID_ARGUMENT"),  # 2 mod 2^32
    ('{"op": "bfs", "id": 1, "max_depth": 2, "type": 0}', "INVALID_ARGUMENT"),  # extra
    ('{"op": "rpq"}', "INVALID_ARGUMENT"),                             # no expr
    ('{"op": "rpq", "expr": 5}', "INVALID_ARGUMENT"),
    ('{"op": "rpq", "expr": ["1"]}', "INVALID_ARGUMENT"),
    ('{"op": "rpq", "expr": "1/"}', "INVALID_ARGUMENT"),               # malformed expression
    ('{"op": "rpq", "expr": "1", "sources": ["1"]}', "INVALID_ARGUMENT"),
    ('{"op": "rpq", "expr": "1", "sources": 1}', "INVALID_ARGUMENT"),
    ('{"op": "rpq", "expr": "1", "limit": 1.5}', "INVALID_ARGUMENT"),
    ('{"op": "rpq", "expr": "1", "source": [1]}', "INVALID_ARGUMENT"),  # extra
    ('{"op": "search_node_ids"}', "INVALID_ARGUMENT"),                 # no pattern
    ('{"op": "search_node_ids", "pattern": null}', "INVALID_ARGUMENT"),
    ('{"op": "search_node_ids", "pattern": 5}', "INVALID_ARGUMENT"),   # mistyped
    ('{"op": "search_node_ids", "pattern": ["red"]}', "INVALID_ARGUMENT"),
    ('{"op": "search_node_ids", "pattern": "red", "property": ["name"]}', "INVALID_ARGUMENT"),
    ('{"op": "search_node_ids", "pattern": "red", "property": 1}', "INVALID_ARGUMENT"),
    ('{"op": "search_node_ids", "pattern": "red", "match": 1}', "INVALID_ARGUMENT"),
    ('{"op": "search_node_ids", "pattern": "red", "match": ["exact"]}', "INVALID_ARGUMENT"),
    ('{"op": "search_node_ids", "pattern": "red", "limit": "5"}', "INVALID_ARGUMENT"),
    ('{"op": "search_node_ids", "pattern": "red", "limit": 1.5}', "INVALID_ARGUMENT"),
    ('{"op": "search_node_ids", "pattern": "red", "limit": true}', "INVALID_ARGUMENT"),
    ('{"op": "search_node_ids", "pattern": "red", "limit": 9223372036854775808}',
     "INVALID_ARGUMENT"),
    ('{"op": "search_node_ids", "pattern": "red", "properties": {"name": "red"}}',
     "INVALID_ARGUMENT"),                                              # extra
    ('{"op": "search_node_ids", "pattern": "red", "prop": "name"}', "INVALID_ARGUMENT"),
    (b'{"op": "search_node_ids", "pattern": "\xff"}', "INVALID_ARGUMENT"),  # not UTF-8
]


def writes(inp):
    """One request of every write operation (read-only stores answer each with an error)."""
    return [
        {"op": "obj_add", "id": 100000, "properties": {"name": "x"}},
        {"op": "obj_update", "id": inp.node_ids[0], "properties": {"name": "x"}},
        {"op": "obj_delete", "id": inp.node_ids[0]},
        {"op": "assoc_add", "src": 1, "type": 0, "dst": 2, "timestamp": 5, "properties": {}},
        {"op": "assoc_update", "src": 1, "type": 0, "dst": 2, "timestamp": 5, "properties": {}},
        {"op": "assoc_delete", "src": 1, "type": 0, "dst": 2},
    ]


def as_line(x, rnd):
    """One batch line: bytes / str as they are, a dict as JSON (ASCII-escaped or not, at random)."""
    if isinstance(x, bytes):
        return x
    if isinstance(x, str):
        return x.encode("utf-8")
    return json.dumps(x, ensure_ascii=rnd.random() < 0.5).encode("utf-8")
