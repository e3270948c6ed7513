#!/usr/bin/python3
"""End-to-end test of `zipg query`: compresses generated CSVs with the real binary, then runs every
read operation through `--batch FILE`, `--batch -` (stdin) and single-operation mode and compares
each JSON answer with a plain-Python model computed from the same CSV files (read back with Python's
csv module). Also: malformed lines, unknown operations, missing / mistyped / extra arguments and
write operations yield error lines (and later lines still run); blank lines are skipped; single
operations exit 0 on success and 1 on error.

Usage: query_cli_test.py PATH/TO/zipg"""
import csv
import json
import os
import random
import subprocess
import sys
import tempfile

ZIPG = sys.argv[1]
INT64_MAX = 2**63 - 1
INT64_MIN = -2**63
CODES = {"INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "UNAVAILABLE", "DEADLINE_EXCEEDED",
         "RESOURCE_EXHAUSTED", "INTERNAL"}
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        if failures <= 40:
            print("FAIL:", what)


def run(*args, stdin=None):
    return subprocess.run([ZIPG, *args], capture_output=True, input=stdin)


# ------------------------------------------------------------------------------------------------
# Generated input. Values use every UTF-8 length, U+0000, U+FFFD, U+10FFFF, commas, quotes, CR, LF.
rnd = random.Random(20240501)
CHARS = ["a", "Z", "0", ",", '"', "\n", "\r", " ", "\t", "\\", "\x00", "\x7f", "\x80", "é", "\u07ff",
         "\u0800", "日", "\ufffd", "\uffff", "\U00010000", "😀", "\U0010ffff"]
COMMON = ["red", "re", "red ", "blue", "a,b", '"q"', "two\nlines", "cr\r\nlf", "é", "日本", "\x00", "0"]


def value():
    if rnd.random() < 0.5:
        return rnd.choice(COMMON)
    return "".join(rnd.choice(CHARS) for _ in range(rnd.randint(1, 12)))


NODE_PROPS = ["name", "city", "tag", "note,1", "名"]
EDGE_PROPS = ["w", "data"]
ids = {0, 1, 2, 63, 64, 4096, 2**62, INT64_MAX, INT64_MAX - 1}
while len(ids) < 70:
    ids.add(rnd.randrange(500))
ids = sorted(ids)
rnd.shuffle(ids)
node_ids, ghost_ids = ids[:55], ids[55:]
TYPES = [0, 1, 5, 2**40]


def timestamp():
    r = rnd.random()
    if r < 0.3:
        return rnd.randint(-2, 2)
    if r < 0.45:
        return rnd.choice([INT64_MIN, INT64_MAX, INT64_MIN + 1, INT64_MAX - 1])
    return 1_700_000_000 + rnd.randrange(50)


def field(v):
    return '"' + v.replace('"', '""') + '"' if v else ""


node_rows = []
for i in node_ids:
    node_rows.append([str(i)] + [value() if rnd.random() < 0.5 else "" for _ in NODE_PROPS])
edge_rows = []
for k in range(260):
    if edge_rows and rnd.random() < 0.1:  # repeat a (src, type, dst): upsert
        src, dst, typ = edge_rows[rnd.randrange(len(edge_rows))][:3]
    else:
        src = rnd.choice(node_ids[:6]) if rnd.random() < 0.3 else rnd.choice(ids[:40] + ghost_ids)
        src, dst, typ = str(src), str(rnd.choice(ids)), str(rnd.choice(TYPES))
    edge_rows.append([src, dst, typ, str(timestamp())] +
                     [value() if rnd.random() < 0.4 else "" for _ in EDGE_PROPS])


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
            dsts = set()
            for (s, t), edges in self.records.items():
                if s == a["id"] and (a.get("type") is None or t == a["type"]):
                    dsts.update(e["dst"] for e in edges)
            flt = a.get("properties") or {}
            keep = [d for d in sorted(dsts) if not flt or (
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


def requests(model):
    """Well-formed requests for every operation, with edge cases."""
    out = []
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
    if "error" in want:
        return "error" in got and got["error"]["code"] == want["error"]
    return got == want


# Requests that must fail (with the code), mixed into the batch between good ones.
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
WRITES = [
    {"op": "obj_add", "id": 100000, "properties": {"name": "x"}},
    {"op": "obj_update", "id": node_ids[0], "properties": {"name": "x"}},
    {"op": "obj_delete", "id": node_ids[0]},
    {"op": "assoc_add", "src": 1, "type": 0, "dst": 2, "timestamp": 5, "properties": {}},
    {"op": "assoc_update", "src": 1, "type": 0, "dst": 2, "timestamp": 5, "properties": {}},
    {"op": "assoc_delete", "src": 1, "type": 0, "dst": 2},
]


def as_line(x):
    if isinstance(x, bytes):
        return x
    if isinstance(x, str):
        return x.encode("utf-8")
    return json.dumps(x, ensure_ascii=rnd.random() < 0.5).encode("utf-8")


with tempfile.TemporaryDirectory() as d:
    nodes_csv, edges_csv = os.path.join(d, "nodes.csv"), os.path.join(d, "edges.csv")
    with open(nodes_csv, "wb") as f:
        f.write(csv_bytes(["id"] + NODE_PROPS, node_rows))
    with open(edges_csv, "wb") as f:
        f.write(csv_bytes(["src", "dst", "type", "timestamp"] + EDGE_PROPS, edge_rows))
    store = os.path.join(d, "store")
    r = run("compress", "--nodes", nodes_csv, "--edges", edges_csv, "--out", store, "--shards", "3",
            "--sa-rate", "4", "--isa-rate", "8", "--psi-block", "16")
    check(r.returncode == 0, f"compress: {r.stderr!r}")
    if r.returncode != 0:
        sys.exit(1)
    model = Model(*load_model(nodes_csv, edges_csv))
    check(len(model.nodes) == len(node_ids), "model: nodes")

    # Build the batch: good requests with bad ones, writes and blank lines mixed in.
    good = requests(model)
    lines, expected = [], []  # expected: ("good", want) | ("bad", code) | ("write", None)
    bad_iter, write_iter = iter(BAD), iter(WRITES)
    for k, req in enumerate(good):
        if k % 23 == 5:
            lines.append(b"")
            lines.append(b"   \t")
        if k % 17 == 3:
            b = next(bad_iter, None)
            if b is not None:
                lines.append(as_line(b[0]))
                expected.append(("bad", b[1], len(lines)))
        if k % 41 == 7:
            w = next(write_iter, None)
            if w is not None:
                lines.append(as_line(w))
                expected.append(("write", None, len(lines)))
        lines.append(as_line(req))
        expected.append(("good", model.run(req), len(lines)))
    for b in bad_iter:
        lines.append(as_line(b[0]))
        expected.append(("bad", b[1], len(lines)))
    for w in write_iter:
        lines.append(as_line(w))
        expected.append(("write", None, len(lines)))
    # CRLF endings on some lines; the last line has no newline at all.
    batch = b""
    for i, line in enumerate(lines):
        batch += line + (b"\r\n" if i % 5 == 0 else b"\n")
    batch = batch.rstrip(b"\r\n")
    batch_file = os.path.join(d, "batch.jsonl")
    with open(batch_file, "wb") as f:
        f.write(batch)

    def check_batch(r, how):
        check(r.returncode == 0, f"{how}: exit code {r.returncode}: {r.stderr!r}")
        out = r.stdout.decode("utf-8").split("\n")
        check(out[-1] == "", f"{how}: output ends with a newline")
        out = out[:-1]
        check(len(out) == len(expected), f"{how}: {len(out)} lines for {len(expected)} requests")
        for got_line, (kind, want, line_no) in zip(out, expected):
            try:
                got = json.loads(got_line)
            except ValueError:
                check(False, f"{how}: line {line_no}: output is not JSON: {got_line[:200]!r}")
                continue
            req = lines[line_no - 1][:160]
            if kind == "good":
                check(same(got, want), f"{how}: {req!r}\n   got  {str(got)[:300]}\n   want {str(want)[:300]}")
            elif kind == "bad":
                check("error" in got and got["error"]["code"] == want and got["error"]["message"],
                      f"{how}: {req!r} should be {want}: {got}")
            else:
                check("error" in got and got["error"]["code"] in CODES and got["error"]["message"],
                      f"{how}: write {req!r} must be an error: {got}")

    check_batch(run("query", "--store", store, "--batch", batch_file), "--batch FILE")
    check_batch(run("query", "--store", store, "--batch", "-", stdin=batch), "--batch -")
    # The malformed-JSON error names its line (counting every input line, blank ones too).
    r = run("query", "--store", store, "--batch", "-",
            stdin=b'{"op": "obj_get", "id": 1}\n\n{"op": \n{"op": "obj_get", "id": 1}\n')
    out = [json.loads(x) for x in r.stdout.decode().splitlines()]
    check(len(out) == 3 and "ok" in out[0] and "ok" in out[2] and "error" in out[1]
          and "line 3" in out[1]["error"]["message"], f"malformed line number: {out}")
    # An empty batch gives no output; a missing batch file is an error.
    r = run("query", "--store", store, "--batch", "-", stdin=b"")
    check(r.returncode == 0 and r.stdout == b"", "empty batch")
    r = run("query", "--store", store, "--batch", os.path.join(d, "nope.jsonl"))
    check(r.returncode == 1 and r.stderr, "missing batch file")

    # --- Single-operation mode. ---
    def single(*args):
        r = run("query", "--store", store, *args)
        try:
            return r.returncode, json.loads(r.stdout)
        except ValueError:
            return r.returncode, None

    n0 = node_ids[0]
    rc, got = single("obj_get", "--id", str(n0))
    check(rc == 0 and got == model.run({"op": "obj_get", "id": n0}), f"single obj_get: {rc} {got}")
    rc, got = single("obj_get", "--id", "99999")
    check(rc == 0 and got == {"ok": None}, f"single obj_get absent: {rc} {got}")
    rc, got = single("get_node_property", "--id", str(n0), "--properties", '["name", "city"]')
    check(rc == 0 and got == model.run({"op": "get_node_property", "id": n0,
                                        "properties": ["name", "city"]}), f"single get_node_property: {got}")
    rc, got = single("get_node_ids", "--properties", json.dumps({"name": "red"}))
    check(rc == 0 and got == model.run({"op": "get_node_ids", "properties": {"name": "red"}}),
          f"single get_node_ids: {got}")
    s, t = next(iter(model.records))
    rc, got = single("assoc_range", "--id", str(s), "--type", str(t), "--pos", "0", "--limit", "100")
    check(rc == 0 and got == model.run({"op": "assoc_range", "id": s, "type": t, "pos": 0, "limit": 100}),
          f"single assoc_range: {got}")
    rc, got = single("get_edge_range", "--id", str(s), "--type", str(t), "--t_lo",
                     str(INT64_MIN), "--t_hi", str(INT64_MAX))
    check(rc == 0 and got == {"ok": [0, len(model.rec(s, t))]}, f"single get_edge_range: {got}")
    for args in (["obj_get", "--id", "-1"], ["obj_get", "--id", "abc"], ["obj_get"],
                 ["obj_gett", "--id", "1"], ["obj_get", "--id", "1", "--extra", "2"],
                 ["obj_delete", "--id", "1"], ["get_node_ids", "--properties", "{}"]):
        rc, got = single(*args)
        check(rc == 1 and got is not None and got.get("error", {}).get("code") in CODES,
              f"single {args}: exit {rc}, {got}")
    r = run("query", "--store", store)
    check(r.returncode == 2, f"no operation is a usage error: {r.returncode}")
    r = run("query", "--store", os.path.join(d, "nowhere"), "obj_get", "--id", "1")
    check(r.returncode == 1 and b"NOT_FOUND" in r.stderr, f"missing store: {r.returncode} {r.stderr!r}")

print("query_cli_test:", "OK" if failures == 0 else f"{failures} failure(s)")
sys.exit(1 if failures else 0)
