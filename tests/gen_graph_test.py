#!/usr/bin/python3
"""End-to-end test of `zipg gen graph`: runs the real binary, reads the CSV files back with Python's csv
module and checks the TAO-like shape (properties, degrees, types, timestamps, distinct triples), that the
output is deterministic, and that quoted fields (comma, double quote, newline) round-trip byte for byte."""
import collections
import csv
import io
import os
import subprocess
import sys
import tempfile

ZIPG = sys.argv[1]
EPOCH, DAYS = 1483228800, 50  # TaoGraphOptions defaults
failures = 0


def run(*args):
    return subprocess.run([ZIPG, *args], capture_output=True)


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def rows_of(data):
    return list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))


def rewrite(rows):
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_MINIMAL).writerows(rows)
    return out.getvalue().encode("utf-8")


with tempfile.TemporaryDirectory() as d:
    out = os.path.join(d, "g", "sub")  # created, parents included
    n = 3000
    r = run("gen", "graph", "--nodes", str(n), "--out", out, "--seed", "5")
    check(r.returncode == 0, f"gen graph exit code: {r.stderr}")
    nodes_bytes, edges_bytes = read(os.path.join(out, "nodes.csv")), read(os.path.join(out, "edges.csv"))
    check(sorted(os.listdir(out)) == ["edges.csv", "nodes.csv"], "only the two files are left")
    line = r.stdout.decode()
    check(line.count("\n") == 1 and f"nodes {n} ({len(nodes_bytes)} bytes)" in line
          and f"({len(edges_bytes)} bytes)" in line, f"summary line: {line!r}")

    # Nodes: header, one row per id, ~90% of properties present, ~640 value bytes per node.
    nodes = rows_of(nodes_bytes)
    check(nodes[0] == ["id"] + [f"p{i:02d}" for i in range(40)], f"nodes header {nodes[0][:3]}")
    check(len(nodes) == n + 1, "one row per node")
    check(all(len(row) == 41 for row in nodes), "41 fields per node row")
    check([row[0] for row in nodes[1:]] == [str(i) for i in range(n)], "ids 0..n-1 in order")
    values = [v for row in nodes[1:] for v in row[1:]]
    present = [v for v in values if v]
    check(abs(len(present) / len(values) - 0.9) < 0.01, f"presence {len(present) / len(values)}")
    mean = sum(len(v.encode()) for v in present) / n
    check(abs(mean - 640) < 640 * 0.03, f"mean value bytes per node {mean}")
    p00 = collections.Counter(row[1] for row in nodes[1:] if row[1])
    check(len(p00) <= 50 and p00.most_common(1)[0][1] > n / 20, "p00 is categorical with repeats")

    # Quoted fields: present, rare, and the files round-trip byte for byte through csv.writer.
    specials = {c: sum(c in v for v in present) for c in [",", '"', "\n"]}
    check(all(0 < k < n / 10 for k in specials.values()), f"rare specials in node values {specials}")
    check(rewrite(nodes) == nodes_bytes, "nodes.csv round-trips through csv.writer")

    # Edges: header, power-law out-degrees averaging 10, 5 types, timestamps in 50 days, no
    # duplicate (src, type, dst), equal timestamps present.
    edges = rows_of(edges_bytes)
    check(edges[0] == ["src", "dst", "type", "timestamp", "data"], f"edges header {edges[0]}")
    check(all(len(row) == 5 for row in edges), "5 fields per edge row")
    check(rewrite(edges) == edges_bytes, "edges.csv round-trips through csv.writer")
    body = edges[1:]
    check(any("," in row[4] or '"' in row[4] or "\n" in row[4] for row in body), "quoted edge data")
    check(len(body) == 10 * n, f"edge count {len(body)}")
    src = [int(row[0]) for row in body]
    check(src == sorted(src), "edges grouped by ascending src")
    check(all(0 <= int(row[1]) < n for row in body), "dst in range")
    degree = collections.Counter(src)
    zeros = n - len(degree)
    check(max(degree.values()) >= 20 * 10, f"max out-degree {max(degree.values())} is far above the mean")
    check(n / 20 < zeros < n / 3, f"{zeros} nodes without out-edges")
    check(sorted({row[2] for row in body}) == ["0", "1", "2", "3", "4"], "5 edge types")
    ts = [int(row[3]) for row in body]
    check(all(EPOCH <= t < EPOCH + DAYS * 86400 for t in ts), "timestamps within 50 days")
    check(max(ts) - min(ts) > 45 * 86400, "timestamps spread over the 50 days")
    triples = [(row[0], row[2], row[1]) for row in body]
    check(len(set(triples)) == len(triples), "distinct (src, type, dst)")
    same = collections.Counter((row[0], row[2], row[3]) for row in body)
    check(sum(c > 1 for c in same.values()) > 50, "equal timestamps within a node's edges of a type")
    data_mean = sum(len(row[4].encode()) for row in body) / len(body)
    check(abs(data_mean - 128) < 128 * 0.03, f"mean edge data bytes {data_mean}")

    # Deterministic in the options; another seed gives another graph.
    again = os.path.join(d, "again")
    run("gen", "graph", "--nodes", str(n), "--out", again, "--seed", "5")
    check(read(os.path.join(again, "nodes.csv")) == nodes_bytes, "nodes.csv is deterministic")
    check(read(os.path.join(again, "edges.csv")) == edges_bytes, "edges.csv is deterministic")
    other = os.path.join(d, "other")
    run("gen", "graph", "--nodes", str(n), "--out", other, "--seed", "6")
    check(read(os.path.join(other, "nodes.csv")) != nodes_bytes, "another seed, other nodes")

    # Options: --degree and --properties.
    small = os.path.join(d, "small")
    r = run("gen", "graph", "--nodes", "500", "--out", small, "--degree", "2.5", "--properties", "7")
    check(r.returncode == 0, f"gen graph with options: {r.stderr}")
    sn = rows_of(read(os.path.join(small, "nodes.csv")))
    se = rows_of(read(os.path.join(small, "edges.csv")))
    check(sn[0] == ["id"] + [f"p{i:02d}" for i in range(7)] and len(sn) == 501, "--properties 7")
    check(len(se) - 1 == 1250, f"--degree 2.5 gives 1250 edges, got {len(se) - 1}")

    # Errors: usage errors exit 2 with a message.
    for args, what in [(["--out", small], "--nodes"), (["--nodes", "10"], "--out"),
                       (["--nodes", "x", "--out", small], "--nodes"),
                       (["--nodes", "10", "--out", small, "--degree", "abc"], "--degree"),
                       (["--nodes", "10", "--out", small, "--degree", "100"], "average_degree"),
                       (["--nodes", "0", "--out", small], "nodes"),
                       (["--nodes", "10", "--out", small, "--bogus", "1"], "--bogus")]:
        r = run("gen", "graph", *args)
        check(r.returncode == 2 and what.encode() in r.stderr, f"usage error for {args}: {r.stderr}")
    r = run("gen", "nothing")
    check(r.returncode == 2 and b"gen graph" in r.stderr, "unknown gen kind lists the usage")
    blocker = os.path.join(d, "file")
    open(blocker, "w").close()
    r = run("gen", "graph", "--nodes", "10", "--out", os.path.join(blocker, "x"))
    check(r.returncode == 1 and b"error" in r.stderr, "an output dir that cannot be created fails")

print(f"{'FAILED' if failures else 'passed'}: {failures} failures")
sys.exit(1 if failures else 0)
