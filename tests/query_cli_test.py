#!/usr/bin/python3
"""End-to-end test of `zipg query`: compresses generated CSVs with the real binary, then runs every
read operation through `--batch FILE`, `--batch -` (stdin) and single-operation mode and compares
each JSON answer with a plain-Python model computed from the same CSV files (read back with Python's
csv module). Also: malformed lines, unknown operations, missing / mistyped / extra arguments and
write operations yield error lines (and later lines still run); blank lines are skipped; single
operations exit 0 on success and 1 on error; search_node_ids also on stores compressed with other
search settings (some properties indexed, none, other sampling, NodeFile formats 2 and 1).

Usage: query_cli_test.py PATH/TO/zipg"""
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from graph_model import (BAD, CODES, INT64_MAX, INT64_MIN, Input, Model, as_line, load_model,  # noqa: E402
                         requests, same, writes)

ZIPG = sys.argv[1]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        if failures <= 40:
            print("FAIL:", what)


def run(*args, stdin=None):
    return subprocess.run([ZIPG, *args], capture_output=True, input=stdin)


# Generated input and the model: graph_model.py (shared with cluster_test.py).
rnd = random.Random(20240501)
inp = Input(rnd)
node_ids = inp.node_ids
WRITES = writes(inp)


with tempfile.TemporaryDirectory() as d:
    nodes_csv, edges_csv = inp.write(d)
    store = os.path.join(d, "store")
    r = run("compress", "--nodes", nodes_csv, "--edges", edges_csv, "--out", store, "--shards", "3",
            "--sa-rate", "4", "--isa-rate", "8", "--psi-block", "16")
    check(r.returncode == 0, f"compress: {r.stderr!r}")
    if r.returncode != 0:
        sys.exit(1)
    model = Model(*load_model(nodes_csv, edges_csv))
    check(len(model.nodes) == len(node_ids), "model: nodes")

    # Build the batch: good requests with bad ones, writes and blank lines mixed in.
    good = requests(model, inp, rnd)
    lines, expected = [], []  # expected: ("good", want) | ("bad", code) | ("write", None)
    bad_iter, write_iter = iter(BAD), iter(WRITES)
    for k, req in enumerate(good):
        if k % 23 == 5:
            lines.append(b"")
            lines.append(b"   \t")
        if k % 17 == 3:
            b = next(bad_iter, None)
            if b is not None:
                lines.append(as_line(b[0], rnd))
                expected.append(("bad", b[1], len(lines)))
        if k % 41 == 7:
            w = next(write_iter, None)
            if w is not None:
                lines.append(as_line(w, rnd))
                expected.append(("write", None, len(lines)))
        lines.append(as_line(req, rnd))
        expected.append(("good", model.run(req), len(lines)))
    for b in bad_iter:
        lines.append(as_line(b[0], rnd))
        expected.append(("bad", b[1], len(lines)))
    for w in write_iter:
        lines.append(as_line(w, rnd))
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
    for args, req in [(["search_node_ids", "--pattern", "re", "--match", "prefix", "--property",
                        "name", "--limit", "2"],
                       {"op": "search_node_ids", "pattern": "re", "match": "prefix",
                        "property": "name", "limit": 2}),
                      (["search_node_ids", "--pattern", "0"],  # text, not the number 0
                       {"op": "search_node_ids", "pattern": "0"}),
                      (["search_node_ids", "--pattern", "é", "--match", "suffix"],
                       {"op": "search_node_ids", "pattern": "é", "match": "suffix"})]:
        rc, got = single(*args)
        check(rc == 0 and got == model.run(req), f"single {args}: exit {rc}, {got}")
    for args in (["obj_get", "--id", "-1"], ["obj_get", "--id", "abc"], ["obj_get"],
                 ["obj_gett", "--id", "1"], ["obj_get", "--id", "1", "--extra", "2"],
                 ["obj_delete", "--id", "1"], ["get_node_ids", "--properties", "{}"],
                 ["search_node_ids", "--pattern", ""], ["search_node_ids"],
                 ["search_node_ids", "--pattern", "re", "--match", "regex"],
                 ["search_node_ids", "--pattern", "re", "--limit", "0"]):
        rc, got = single(*args)
        check(rc == 1 and got is not None and got.get("error", {}).get("code") in CODES,
              f"single {args}: exit {rc}, {got}")
    r = run("query", "--store", store)
    check(r.returncode == 2, f"no operation is a usage error: {r.returncode}")

    # --- search_node_ids on stores that search otherwise: only some properties indexed (the
    # others' values scanned), every byte sampled; none indexed; NodeFile formats 2 and 1. ---
    searches = [q for q in good if q["op"] == "search_node_ids"]
    search_batch = b"\n".join(as_line(q, rnd) for q in searches) + b"\n"
    for k, opts in enumerate([["--search-index", "name,名", "--search-sample-rate", "1"],
                              ["--search-index", "none"], ["--search-sample-rate", "5"],
                              ["--node-format", "2"], ["--node-format", "1"]]):
        other = os.path.join(d, f"store-search-{k}")
        r = run("compress", "--nodes", nodes_csv, "--edges", edges_csv, "--out", other,
                "--shards", "2", *opts)
        if not check(r.returncode == 0, f"compress {opts}: {r.stderr[-300:]!r}"):
            continue
        r = run("query", "--store", other, "--batch", "-", stdin=search_batch)
        out = r.stdout.decode("utf-8").split("\n")[:-1]
        check(r.returncode == 0 and len(out) == len(searches),
              f"search batch on a store with {opts}: exit {r.returncode}, {len(out)} lines")
        for q, line in zip(searches, out):
            got, want = json.loads(line), model.run(q)
            check(same(got, want), f"store with {opts}: {str(q)[:160]}\n   got  {str(got)[:300]}"
                                   f"\n   want {str(want)[:300]}")
    r = run("query", "--store", os.path.join(d, "nowhere"), "obj_get", "--id", "1")
    check(r.returncode == 1 and b"NOT_FOUND" in r.stderr, f"missing store: {r.returncode} {r.stderr!r}")

print("query_cli_test:", "OK" if failures == 0 else f"{failures} failure(s)")
sys.exit(1 if failures else 0)
