#!/usr/bin/python3
"""End-to-end test of `zipg compress`: every malformed-input case of the contract stops with an error
naming FILE:LINE:COLUMN, exits non-zero and leaves no store (and no temporary directory) behind; a
good input prints the size report; an existing store is kept unless --force; --format snap works
without --nodes.

Usage: compress_cli_test.py PATH/TO/zipg"""
import json
import os
import re
import subprocess
import sys
import tempfile

ZIPG = sys.argv[1]
failures = 0

GOOD_NODES = b"id,name,city\n1,alice,Paris\n2,\"b,o\"\"b\",\n3,,Rome\n"
GOOD_EDGES = b"src,dst,type,timestamp,w\n1,2,0,100,x\n1,3,0,100,\n1,2,0,50,y\n2,1,5,-7,z\n"


def run(*args, stdin=None):
    return subprocess.run([ZIPG, *args], capture_output=True, input=stdin)


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def query(store, op, **args):
    argv = ["query", "--store", store, op]
    for k, v in args.items():
        argv += ["--" + k, json.dumps(v)]
    r = run(*argv)
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else None


def store_files(store):
    out = {}
    for root, _, files in os.walk(store):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, store)] = fh.read()
    return out


# --- Malformed input: (name, nodes bytes or None, edges bytes, format, bad file, line, column) ----
# The bad file is "n" (nodes) or "e" (edges); columns count code points, from 1.
HDR = b"src,dst,type,timestamp\n"
NODE_CASES = [
    ("nodes: empty file", b"", "n", 1, 1),
    ("nodes: first header column not id", b"name,id\n1,x\n", "n", 1, 1),
    ("nodes: duplicate column name", b"id,a,a\n1,x,y\n", "n", 1, 6),
    ("nodes: empty property name", b"id,,b\n1,x,y\n", "n", 1, 4),
    ("nodes: header after a byte order mark", b"\xef\xbb\xbfid,b,\n1,x,y\n", "n", 1, 6),
    ("nodes: too many fields", b"id,a\n1,x\n2,y,z\n", "n", 3, 5),
    ("nodes: too few fields", b"id,a,b\n1,x,y\n2,y\n", "n", 3, 4),
    ("nodes: non-integer id", b"id,a\n1,x\nx7,y\n", "n", 3, 1),
    ("nodes: negative id", b"id,a\n1,x\n-3,y\n", "n", 3, 1),
    ("nodes: id beyond int64", b"id,a\n9223372036854775808,y\n", "n", 2, 1),
    ("nodes: empty id", b"id,a\n,y\n", "n", 2, 1),
    ("nodes: duplicate id", b"id,a\n5,x\n6,y\n5,z\n", "n", 4, 1),
    ("nodes: duplicate id out of order", b"id,a\n9,x\n6,y\n7,q\n6,z\n", "n", 5, 1),
    ("nodes: unterminated quote", b"id,a\n1,\"abc\n2,d\n", "n", 2, 3),
    ("nodes: invalid UTF-8 byte", b"id,a\n1,ab\xff\n", "n", 2, 5),
    ("nodes: truncated UTF-8 after multibyte chars", b"id,a\n1,\xc3\xa9\xe6\x97\xa5\xc3\n", "n", 2, 5),
    ("nodes: UTF-8 surrogate", b"id,a\n1,\xed\xa0\x80\n", "n", 2, 3),
    ("nodes: overlong UTF-8", b"id,a\n1,\xc0\xaf\n", "n", 2, 3),
    ("nodes: invalid UTF-8 in header", b"id,n\xfe\n", "n", 1, 5),
    ("nodes: error after a multi-line quoted field", b"id,a\n1,\"x\ny\"\n2,q\"r\n", "n", 4, 4),
    ("nodes: carriage return without line feed", b"id,a\n1,x\ry\n", "n", 2, 4),
    ("nodes: text after a closing quote", b"id,a\n1,\"x\"y\n", "n", 2, 6),
]
EDGE_CASES = [
    ("edges: empty file", b"", "e", 1, 1),
    ("edges: wrong header column", b"src,dst,kind,timestamp\n1,2,0,5\n", "e", 1, 9),
    ("edges: header too short", b"src,dst\n1,2\n", "e", 1, 8),
    ("edges: non-integer src", HDR + b"1,2,0,5\nx,2,0,5\n", "e", 3, 1),
    ("edges: negative dst", HDR + b"1,2,0,5\n1,-2,0,5\n", "e", 3, 3),
    ("edges: negative type", HDR + b"1,2,-1,5\n", "e", 2, 5),
    ("edges: non-integer timestamp", HDR + b"1,2,0,5.0\n", "e", 2, 7),
    ("edges: timestamp beyond int64", HDR + b"1,2,0,9223372036854775808\n", "e", 2, 7),
    ("edges: too many fields", HDR + b"1,2,0,5,6\n", "e", 2, 9),
    ("edges: too few fields", HDR + b"1,2,0\n", "e", 2, 6),
    ("edges: invalid UTF-8 in a property", b"src,dst,type,timestamp,w\n1,2,0,5,\xe6\x97\n", "e", 2, 9),
    ("edges: unterminated quote", b"src,dst,type,timestamp,w\n1,2,0,5,ok\n1,3,0,5,\"oops\n", "e", 3, 9),
    ("edges: property named like a fixed column", b"src,dst,type,timestamp,src\n", "e", 1, 24),
]
SNAP_CASES = [
    ("snap: non-integer src", b"1 2\nx 3\n", "e", 2, 1),
    ("snap: missing dst", b"1 2\n3\n", "e", 2, 2),
    ("snap: three columns", b"1 2 3\n", "e", 1, 5),
    ("snap: negative id after a comment", b"# comment\n1 -2\n", "e", 2, 3),
    ("snap: carriage return without line feed", b"1 2\r3 4\n", "e", 1, 4),
    ("snap: id beyond int64", b"1\t9223372036854775808\n", "e", 1, 3),
]


def expect_failure(d, name, argv, bad_path, line, column):
    out = os.path.join(d, "store")
    before = set(os.listdir(d))
    r = run("compress", *argv, "--out", out, "--shards", "2")
    err = r.stderr.decode("utf-8", "replace")
    check(r.returncode != 0, f"{name}: exit code {r.returncode}")
    if line is not None:
        want = f"{bad_path}:{line}:{column}:"
        check(want in err, f"{name}: stderr should name {want}, got {err.strip()!r}")
    check(not os.path.exists(out), f"{name}: a store was left behind")
    left = set(os.listdir(d)) - before
    check(not left, f"{name}: left behind {sorted(left)}")


with tempfile.TemporaryDirectory() as d:
    good_nodes = write(os.path.join(d, "good_nodes.csv"), GOOD_NODES)
    good_edges = write(os.path.join(d, "good_edges.csv"), GOOD_EDGES)

    for name, data, which, line, col in NODE_CASES:
        bad = write(os.path.join(d, "n.csv"), data)
        expect_failure(d, name, ["--nodes", bad, "--edges", good_edges], bad, line, col)
    for name, data, which, line, col in EDGE_CASES:
        bad = write(os.path.join(d, "e.csv"), data)
        expect_failure(d, name, ["--nodes", good_nodes, "--edges", bad], bad, line, col)
    for name, data, which, line, col in SNAP_CASES:
        bad = write(os.path.join(d, "e.snap"), data)
        expect_failure(d, name, ["--format", "snap", "--edges", bad], bad, line, col)

    # The duplicate id message also names the first definition's line.
    bad = write(os.path.join(d, "n.csv"), b"id,a\n9,\"multi\nline\"\n6,y\n9,z\n")
    r = run("compress", "--nodes", bad, "--edges", good_edges, "--out", os.path.join(d, "store"))
    check(f"{bad}:5:1:".encode() in r.stderr and b"line 2" in r.stderr,
          f"duplicate id names both lines: {r.stderr!r}")

    # More property columns than the layout supports (1024): an error, no store.
    header = "id," + ",".join(f"p{i}" for i in range(1025))
    bad = write(os.path.join(d, "n.csv"), (header + "\n1" + ",v" * 1025 + "\n").encode())
    expect_failure(d, "1025 node property columns", ["--nodes", bad, "--edges", good_edges], bad,
                   None, None)
    ok_header = "id," + ",".join(f"p{i}" for i in range(1024))
    ok = write(os.path.join(d, "n1024.csv"), (ok_header + "\n1" + ",v" * 1024 + "\n").encode())
    r = run("compress", "--nodes", ok, "--edges", good_edges, "--out", os.path.join(d, "s1024"))
    check(r.returncode == 0, f"1024 property columns compress: {r.stderr!r}")
    rc, resp = query(os.path.join(d, "s1024"), "get_node_property", id=1, properties=["p1023"])
    check(rc == 0 and resp == {"ok": {"p1023": "v"}}, f"1024 columns: p1023 readable: {resp}")

    # Unreadable inputs and usage errors.
    expect_failure(d, "missing nodes file",
                   ["--nodes", os.path.join(d, "nope.csv"), "--edges", good_edges], None, None, None)
    expect_failure(d, "missing edges file",
                   ["--nodes", good_nodes, "--edges", os.path.join(d, "nope.csv")], None, None, None)
    r = run("compress", "--nodes", good_nodes, "--edges", good_edges)
    check(r.returncode == 2, f"no --out is a usage error: {r.returncode}")
    r = run("compress", "--edges", good_edges, "--out", os.path.join(d, "x"))
    check(r.returncode == 2 and not os.path.exists(os.path.join(d, "x")),
          "csv without --nodes is a usage error")
    r = run("compress", "--nodes", good_nodes, "--edges", good_edges, "--out",
            os.path.join(d, "x"), "--shards", "0")
    check(r.returncode == 2 and not os.path.exists(os.path.join(d, "x")), "--shards 0")
    r = run("compress", "--nodes", good_nodes, "--edges", good_edges, "--out",
            os.path.join(d, "x"), "--sa-rate", "3")
    check(r.returncode == 2 and not os.path.exists(os.path.join(d, "x")), "--sa-rate 3")
    # The search index's options: a list with an empty name is a usage error; a name that is no
    # node property of the input is refused once the input is read, and leaves nothing behind.
    for spec in (",", "name,", ""):
        r = run("compress", "--nodes", good_nodes, "--edges", good_edges, "--out",
                os.path.join(d, "x"), "--search-index", spec)
        check(r.returncode == 2 and not os.path.exists(os.path.join(d, "x")),
              f"--search-index {spec!r}: {r.returncode} {r.stderr!r}")
    r = run("compress", "--nodes", good_nodes, "--edges", good_edges, "--out",
            os.path.join(d, "x"), "--search-index", "name,nope")
    check(r.returncode != 0 and b"'nope'" in r.stderr and not os.path.exists(os.path.join(d, "x")),
          f"--search-index naming no property: {r.returncode} {r.stderr!r}")
    for leftover in os.listdir(d):
        check(".tmp-" not in leftover and ".old-" not in leftover, f"leftover {leftover}")

    # --- A successful compress prints the size report. ---
    store = os.path.join(d, "store")
    r = run("compress", "--nodes", good_nodes, "--edges", good_edges, "--out", store, "--shards", "3")
    out = r.stdout.decode()
    check(r.returncode == 0, f"good compress: {r.stderr!r}")
    check(re.search(r"3 shards, 3 nodes, 3 edges", out) is not None,
          f"summary names shards, nodes and merged edges: {out!r}")
    m = re.search(r"raw input\s+(\d+) bytes", out)
    raw = len(GOOD_NODES) + len(GOOD_EDGES)
    check(m is not None and int(m.group(1)) == raw, f"raw bytes {raw}: {out!r}")
    m = re.search(r"stored\s+(\d+) bytes\s+ratio ([0-9.]+)", out)
    on_disk = sum(len(b) for b in store_files(store).values())
    check(m is not None and int(m.group(1)) == on_disk,
          f"stored bytes = bytes on disk ({on_disk}): {out!r}")
    if m:
        check(abs(float(m.group(2)) - on_disk / raw) < 0.001, f"ratio = stored / raw: {out!r}")
    parts = dict((name, int(b)) for name, b in re.findall(r"^\s+(\S+)\s+(\d+) bytes\s+[0-9.]+%$", out, re.M))
    check(sum(parts.values()) == on_disk, f"breakdown sums to stored bytes: {parts}")
    for name in ("manifest", "nodes.index", "edges.meta"):
        check(name in parts, f"breakdown has {name}: {sorted(parts)}")
    check(any(p.startswith("nodes.text.") for p in parts) and any(p.startswith("edges.text.") for p in parts),
          f"breakdown has the compressed texts: {sorted(parts)}")
    check("nodes.search_index" in parts, f"breakdown has the search index: {sorted(parts)}")
    m = re.search(r"search index\s+(\d+) bytes for (\d+) bytes of value text", out)
    check(m is not None and int(m.group(1)) == parts.get("nodes.search_index"),
          f"the report gives the search index's bytes: {out!r}")
    manifest = json.loads(store_files(store)["MANIFEST"])
    check(manifest["node_file"].get("search_index") == "all" and
          manifest["node_file"]["format"] == 3, f"manifest: {manifest['node_file']}")
    r = run("query", "--store", store, "search_node_ids", "--pattern", "me", "--match", "suffix")
    check(r.returncode == 0 and json.loads(r.stdout) == {"ok": {"ids": [3], "truncated": False}},
          f"search: {r.stdout!r} {r.stderr!r}")
    rc, resp = query(store, "obj_get", id=2)
    check(rc == 0 and resp == {"ok": {"id": 2, "properties": {"name": 'b,o"b'}}}, f"obj_get 2: {resp}")
    rc, resp = query(store, "assoc_range", id=1, type=0, pos=0, limit=10)
    check(rc == 0 and [e["dst"] for e in resp["ok"]] == [3, 2] and resp["ok"][1]["properties"] == {"w": "y"},
          f"upserted edge keeps the last row: {resp}")

    # --- An existing store is refused without --force and left intact; --force replaces it. ---
    before = store_files(store)
    new_nodes = write(os.path.join(d, "new_nodes.csv"), b"id,name\n2,NEW\n")
    r = run("compress", "--nodes", new_nodes, "--edges", good_edges, "--out", store)
    check(r.returncode == 1 and b"ALREADY_EXISTS" in r.stderr and b"--force" in r.stderr,
          f"refuses to overwrite: {r.returncode} {r.stderr!r}")
    check(store_files(store) == before, "refused overwrite leaves the store byte for byte")
    r = run("compress", "--nodes", new_nodes, "--edges", good_edges, "--out", store, "--force")
    check(r.returncode == 0, f"--force: {r.stderr!r}")
    rc, resp = query(store, "obj_get", id=2)
    check(resp == {"ok": {"id": 2, "properties": {"name": "NEW"}}}, f"--force replaced the store: {resp}")
    rc, resp = query(store, "obj_get", id=1)
    check(resp == {"ok": None}, f"--force: old nodes are gone: {resp}")
    # A failed --force (bad input) keeps the old store.
    before = store_files(store)
    bad = write(os.path.join(d, "n.csv"), b"id,a\n1,\"open\n")
    r = run("compress", "--nodes", bad, "--edges", good_edges, "--out", store, "--force")
    check(r.returncode == 1 and store_files(store) == before, "failed --force keeps the old store")

    # A directory that is not a store is never touched, even with --force.
    other = os.path.join(d, "other")
    os.makedirs(other)
    write(os.path.join(other, "precious.txt"), b"keep")
    for extra in ([], ["--force"]):
        r = run("compress", "--nodes", good_nodes, "--edges", good_edges, "--out", other, *extra)
        check(r.returncode == 1 and os.listdir(other) == ["precious.txt"],
              f"non-store directory untouched {extra}: {r.stderr!r}")

    # "DIR/" is the same directory as "DIR".
    r = run("compress", "--nodes", good_nodes, "--edges", good_edges, "--out",
            os.path.join(d, "slash") + "/")
    check(r.returncode == 0, f"--out DIR/ works: {r.stderr.decode(errors='replace').strip().splitlines()[-1:]}")
    rc, resp = query(os.path.join(d, "slash"), "obj_get", id=1)
    check(rc == 0 and resp["ok"]["id"] == 1, f"--out DIR/ store answers: {resp}")

    # --- SNAP edge lists: no --nodes needed; type 0, timestamp 0, no properties. ---
    snap = write(os.path.join(d, "g.snap"), b"# a comment\n1 2\n\n1\t3\r\n  2 1  \n1 2\n")
    sstore = os.path.join(d, "snapstore")
    r = run("compress", "--format", "snap", "--edges", snap, "--out", sstore, "--shards", "2")
    check(r.returncode == 0, f"snap without --nodes: {r.stderr!r}")
    check(b"0 nodes, 3 edges" in r.stdout, f"snap summary: {r.stdout!r}")
    rc, resp = query(sstore, "assoc_range", id=1, type=0, pos=0, limit=10)
    check(rc == 0 and resp["ok"] == [
        {"src": 1, "type": 0, "dst": 2, "timestamp": 0, "properties": {}},
        {"src": 1, "type": 0, "dst": 3, "timestamp": 0, "properties": {}}], f"snap edges: {resp}")
    rc, resp = query(sstore, "obj_get", id=1)
    check(rc == 0 and resp == {"ok": None}, f"snap: no nodes: {resp}")
    r = run("compress", "--format", "snap", "--nodes", good_nodes, "--edges", snap, "--out",
            os.path.join(d, "snap2"))
    check(r.returncode == 0, f"snap with --nodes: {r.stderr!r}")
    rc, resp = query(os.path.join(d, "snap2"), "get_neighbor_ids", id=1, properties={"city": "Rome"})
    check(rc == 0 and resp == {"ok": [3]}, f"snap with nodes: filtered neighbors: {resp}")
    r = run("compress", "--format", "tsv", "--edges", snap, "--out", os.path.join(d, "x"))
    check(r.returncode == 2 and not os.path.exists(os.path.join(d, "x")), "unknown --format")

    # --- Header-only files are an empty graph, not an error. ---
    hn = write(os.path.join(d, "h_nodes.csv"), b"id,name\r\n")
    he = write(os.path.join(d, "h_edges.csv"), b"src,dst,type,timestamp\n\n")
    r = run("compress", "--nodes", hn, "--edges", he, "--out", os.path.join(d, "hstore"), "--shards", "2")
    check(r.returncode == 0 and b"0 nodes, 0 edges" in r.stdout, f"header-only inputs: {r.stdout!r} {r.stderr!r}")
    rc, resp = query(os.path.join(d, "hstore"), "get_node_ids", properties={"name": "x"})
    check(rc == 0 and resp == {"ok": []}, f"empty store get_node_ids: {resp}")

    # --- Progress is shown on a terminal. ---
    try:
        import pty
        master, slave = pty.openpty()
        p = subprocess.run([ZIPG, "compress", "--nodes", good_nodes, "--edges", good_edges, "--out",
                            os.path.join(d, "tty")], stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        shown = b""
        try:
            while True:
                chunk = os.read(master, 4096)
                if not chunk:
                    break
                shown += chunk
        except OSError:
            pass
        os.close(master)
        check(p.returncode == 0 and b"\r" in shown and b"build" in shown,
              f"progress on a terminal: {shown[:200]!r}")
    except ImportError:
        pass

    # --- CPU by phase: the tree of phases, each parent at least its children, the whole at most
    # the process's own CPU (getrusage of the child, an independent clock). A generated graph big
    # enough for dictionaries and a search index. ---
    gen = os.path.join(d, "gen")
    r = run("gen", "graph", "--nodes", "3000", "--out", gen)
    check(r.returncode == 0, f"gen graph: {r.stderr!r}")
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = run("compress", "--nodes", os.path.join(gen, "nodes.csv"), "--edges",
            os.path.join(gen, "edges.csv"), "--out", os.path.join(d, "phased"), "--shards", "2")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    process_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = r.stdout.decode()
    check(r.returncode == 0 and "cpu by phase" in out, f"compress prints its phases: {out!r}")
    lines = out.split("cpu by phase", 1)[-1].splitlines()[1:]
    phases, stack = {}, []
    for line in lines:
        m = re.match(r"^  ( *)(\S.*?)\s+([0-9.]+)$", line)
        check(m is not None, f"phase line: {line!r}")
        if not m:
            continue
        depth = len(m.group(1)) // 2
        stack = stack[:depth] + [m.group(2)]
        phases["/".join(stack)] = float(m.group(3))
    for path in ("load", "build", "finish", "build/nodes", "build/nodes/records",
                 "build/nodes/indexes/search index/suffix sort", "build/nodes/blocks/dictionary",
                 "build/nodes/blocks/compress", "build/edges/records", "build/edges/key filter",
                 "build/edges/blocks/dictionary", "build/edges/blocks/compress"):
        check(path in phases, f"phase {path}: {sorted(phases)}")
    for path, seconds in phases.items():
        children = [v for k, v in phases.items() if k.rsplit("/", 1)[0] == path and "/" in k]
        # Each line is rounded to 0.01 s.
        check(seconds + 0.005 * (len(children) + 1) >= sum(children),
              f"{path} ({seconds}) at least its children ({children})")
    top = sum(v for k, v in phases.items() if "/" not in k)
    check(top <= process_cpu + 0.05, f"phases ({top:.2f} s) within the process's CPU ({process_cpu:.2f} s)")
    check(top >= 0.5 * process_cpu, f"phases ({top:.2f} s) cover most of the CPU ({process_cpu:.2f} s)")

    # --- Some shards of a store (--shards A,B --of N), as each machine of a cluster builds its
    # own: every shard file equals the whole store's, byte for byte. ---
    gen_nodes, gen_edges = os.path.join(gen, "nodes.csv"), os.path.join(gen, "edges.csv")
    whole = os.path.join(d, "whole")
    r = run("compress", "--nodes", gen_nodes, "--edges", gen_edges, "--out", whole, "--shards", "4")
    check(r.returncode == 0, f"whole 4-shard store: {r.stderr!r}")
    whole_files = store_files(whole)
    whole_manifest = json.loads(whole_files["MANIFEST"])
    built, nodes = set(), 0
    for arg, part in (("0,2", [0, 2]), ("3,1", [1, 3])):
        out_dir = os.path.join(d, "part-" + arg.replace(",", "-"))
        r = run("compress", "--nodes", gen_nodes, "--edges", gen_edges, "--out", out_dir,
                "--shards", arg, "--of", "4")
        described = "shards " + ",".join(map(str, part)) + " of 4"
        check(r.returncode == 0 and described in r.stdout.decode(),
              f"--shards {arg} --of 4: {r.stdout!r} {r.stderr!r}")
        files = store_files(out_dir)
        manifest = json.loads(files.pop("MANIFEST"))
        check(manifest.get("built_shards") == part and manifest["shards"] == 4,
              f"manifest names the shards built: {manifest.get('built_shards')}")
        check(all(f.split("/")[0] in {"shard-%04d" % s for s in part} for f in files),
              f"only shards {part}: {sorted(files)}")
        for name, data in files.items():
            check(data == whole_files.get(name), f"{name} equals the whole store's")
        built |= set(files)
        nodes += manifest["nodes"]
        r = run("query", "--store", out_dir, "obj_get", "--id", "1")
        check(r.returncode != 0 and b"holds only shards" in r.stderr,
              f"a part does not open as a whole store: {r.returncode} {r.stderr!r}")
    check(built == set(whole_files) - {"MANIFEST"}, "the parts hold every shard file once")
    check(nodes == whole_manifest["nodes"], f"the parts' nodes add up: {nodes}")
    for argv, says in ((["--of", "4"], b"--shards A,B"), (["--shards", "0,x", "--of", "4"], b"0,x"),
                       (["--shards", "4", "--of", "4"], b"no shard 4"),
                       (["--shards", "1,1", "--of", "4"], b"repeats"),
                       (["--shards", "0,2"], b"--of")):
        out_dir = os.path.join(d, "bad-part")
        r = run("compress", "--nodes", gen_nodes, "--edges", gen_edges, "--out", out_dir, *argv)
        check(r.returncode != 0 and says in r.stderr and not os.path.exists(out_dir),
              f"{argv}: {r.returncode} {r.stderr!r}")

    for leftover in os.listdir(d):
        check(".tmp-" not in leftover and ".old-" not in leftover, f"leftover {leftover}")

print("compress_cli_test:", "OK" if failures == 0 else f"{failures} failure(s)")
sys.exit(1 if failures else 0)
