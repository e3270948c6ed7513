"""Shared pieces of the end-to-end tests that compare `zipg` answers with a plain-Python model:
the generated edge-case input (values with every UTF-8 length, U+0000, U+FFFD, U+10FFFF, commas,
quotes, CR, LF; ids up to INT64_MAX; timestamps at the INT64 extremes; repeated (src, type, dst)
rows), the model computed from the CSV files as Python's csv module reads them, and well-formed
requests for every read operation of the contract (../shared/spec/interface.md).

Everything random takes an explicit random.Random, so a test is reproducible from its seed.
Used by query_cli_test.py (embedded store) and cluster_test.py (a real local cluster)."""
import csv
import json
import os

INT64_MAX = 2**63 - 1
INT64_MIN = -2**63
CODES = {"INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "UNAVAILABLE", "DEADLINE_EXCEEDED",
         "RESOURCE_EXHAUSTED", "INTERNAL"}

CHARS = ["a", "Z", "0", ",", '"', "\n", "\r", " ", "\t", "\\", "\x00", "\x7f", "\x80", "é", "\u07ff",
         "\u0800", "日", "\ufffd", "\uffff", "\U00010000", "😀", "\U0010ffff"]
COMMON = ["red", "re", "red ", "blue", "a,b", '"q"', "two\nlines", "cr\r\nlf", "é", "日本", "\x00", "0"]
NODE_PROPS = ["name", "city", "tag", "note,1", "名"]
EDGE_PROPS = ["w", "data"]
TYPES = [0, 1, 5, 2**40]


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

    def run(self, req):
        """The expected response for a well-formed request (argument errors are tested apart)."""
        op = req["op"]
        a = req
        neg = [k for k in ("id", "type", "pos", "limit") if isinstance(a.get(k), int) and a[k] < 0]
        if neg:
            return {"error": "INVALID_ARGUMENT"}
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
    id lists with duplicates and misses, limit / pos / time_order edge cases, negative arguments."""
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
            {"op": "get_node_ids", "properties": {}}]
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
