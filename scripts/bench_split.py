#!/usr/bin/python3
"""`zipg admin split` measured on a real store (docs/cluster-changes.md, step 4; issue 32's
acceptance): a local cluster over a copy of STORE (hard links of its files, fresh writes), then

1. the read list: for --reads node ids spread over the id space, obj_get, and per edge type 0..4
   assoc_count, assoc_range (first 20), assoc_time_range (all time, first 10) and typed
   get_neighbor_ids; plus get_node_ids and search_node_ids of a few values and a bfs; answered
   through an aggregator (one `zipg query --batch` call) before the split;
2. a baseline: `zipg bench --mix tao` for --baseline seconds;
3. the split: `zipg admin split` while the same TAO load runs and a writer adds edges of a type
   the read list never reads (each acknowledged one recorded); the shard servers' peak memory;
4. the read list again: every answer must be identical; every acknowledged write present.

Prints a JSON report (phases, pause, per-half builds, p50/p99 of the reads before and during,
the writes and their p99, memory) and exits 1 if an answer differs or a write is missing.

Usage: bench_split.py --zipg build/client/zipg --store STORE [--servers 2] [--replicas 1]
                      [--reads 2000] [--baseline 10] [--connections 2]"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

WRITE_TYPE = 77  # the writer's edges: a type the read list never reads


def run(argv, timeout=3600, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)


def batch(zipg, agg, lines):
    r = run([zipg, "query", "--connect", agg, "--batch", "-", "--timeout-ms", "60000"],
            input="".join(json.dumps(q) + "\n" for q in lines))
    out = r.stdout.splitlines()
    if len(out) != len(lines):
        sys.exit(f"query --batch answered {len(out)} of {len(lines)} lines: {r.stderr[-500:]}")
    return out


def read_list(nodes, rng, count):
    ids = sorted(rng.sample(range(nodes), min(count, nodes)))
    q = []
    for i in ids:
        q.append({"op": "obj_get", "id": i})
        for t in range(5):
            q.append({"op": "assoc_count", "id": i, "type": t})
            q.append({"op": "assoc_range", "id": i, "type": t, "pos": 0, "limit": 20})
            q.append({"op": "assoc_time_range", "id": i, "type": t, "low": 0,
                      "high": 2 ** 62, "limit": 10})
            q.append({"op": "get_neighbor_ids", "id": i, "type": t})
    for i in ids[:20]:
        q.append({"op": "bfs", "id": i, "types": [1], "max_depth": 2, "limit": 200})
    q.append({"op": "get_node_ids", "properties": {"p03": "Rngt"}})
    q.append({"op": "search_node_ids", "pattern": "Nwam", "match": "prefix", "property": "p02",
              "limit": 1000})
    return q


def status(zipg, agg):
    r = run([zipg, "status", "--connect", agg, "--json"], timeout=60)
    return json.loads(r.stdout)


def peak_rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def bench(zipg, agg, seconds, connections, out):
    return subprocess.Popen([zipg, "bench", "--connect", agg, "--mix", "tao", "--connections",
                             str(connections), "--duration", str(seconds), "--json", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def latency(path):
    with open(path) as f:
        j = json.load(f)
    o = j.get("ops", {}).get("overall", {})
    out = {k: o.get(k) for k in ("ops_per_s", "p50_us", "p99_us", "max_us")}
    out["errors"] = j.get("errors")
    return out


class Writer:
    """Adds edges (src, 77, k) one at a time through `zipg query --batch -`; records each
    acknowledged one and its latency."""

    def __init__(self, zipg, agg, nodes, seed):
        self.p = subprocess.Popen([zipg, "query", "--connect", agg, "--batch", "-"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  bufsize=1)
        self.rng, self.nodes = random.Random(seed), nodes
        self.acked, self.failed, self.lat = [], 0, []
        self.halt = threading.Event()
        self.t = threading.Thread(target=self.run)
        self.t.start()

    def run(self):
        k = 0
        while not self.halt.is_set():
            k += 1
            q = {"op": "assoc_add", "src": self.rng.randrange(self.nodes), "type": WRITE_TYPE,
                 "dst": k, "timestamp": k, "properties": {"data": str(k)}}
            t0 = time.monotonic()
            self.p.stdin.write(json.dumps(q) + "\n")
            self.p.stdin.flush()
            a = json.loads(self.p.stdout.readline())
            self.lat.append(time.monotonic() - t0)
            if "ok" in a:
                self.acked.append(q)
            else:
                self.failed += 1

    def stop(self):
        self.halt.set()
        self.t.join()
        self.p.stdin.close()
        self.p.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zipg", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--reads", type=int, default=2000)
    ap.add_argument("--baseline", type=int, default=10)
    ap.add_argument("--connections", type=int, default=2)
    a = ap.parse_args()
    zipg = os.path.abspath(a.zipg)
    tmp = tempfile.mkdtemp(prefix="zipg-bench-split-")
    store = os.path.join(tmp, "store")
    os.makedirs(store)
    with open(os.path.join(a.store, "MANIFEST")) as f:
        manifest = json.load(f)
    for name in os.listdir(a.store):  # the compressed files only, as hard links
        if name == "MANIFEST" or name.startswith("shard-"):
            src = os.path.join(a.store, name)
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(store, name), copy_function=os.link)
            else:
                os.link(src, os.path.join(store, name))
    report = {"store": a.store, "nodes": manifest["nodes"], "edges": manifest["edges"],
              "servers": a.servers, "replicas": a.replicas}
    ok = True
    try:
        r = run([zipg, "local", "start", "--store", store, "--servers", str(a.servers),
                 "--replicas", str(a.replicas), "--rebuild-delta", "0", "--no-verify"])
        if r.returncode != 0:
            sys.exit(f"local start: {r.stderr[-800:]}")
        agg = [l.split()[1] for l in r.stdout.splitlines() if l.startswith("aggregator ")][0]
        reads = read_list(manifest["nodes"], random.Random(7), a.reads)
        t0 = time.monotonic()
        before = batch(zipg, agg, reads)
        report["read_list"] = {"requests": len(reads), "seconds": time.monotonic() - t0,
                               "errors": sum('"error"' in l for l in before)}
        bench(zipg, agg, a.baseline, a.connections, os.path.join(tmp, "base.json")).wait()
        report["tao_before"] = latency(os.path.join(tmp, "base.json"))
        doc = status(zipg, agg)
        pids = [m["pid"] for m in doc.get("servers", []) if m.get("role") == "shard"]
        # The split, under the TAO load and the writer.
        writer = Writer(zipg, agg, manifest["nodes"], 11)
        runs, halt = [], threading.Event()

        def reader():  # successive 5 s TAO runs until the split ends
            k = 0
            while not halt.is_set():
                k += 1
                out = os.path.join(tmp, f"during-{k}.json")
                bench(zipg, agg, 5, a.connections, out).wait()
                if os.path.exists(out):
                    runs.append(latency(out))
        during = threading.Thread(target=reader)
        during.start()
        time.sleep(2)
        t0 = time.monotonic()
        r = run([zipg, "admin", "split", "--connect", agg])
        report["split_seconds"] = time.monotonic() - t0
        time.sleep(2)
        halt.set()
        during.join()
        writer.stop()
        if r.returncode != 0:
            sys.exit(f"admin split: {r.stdout[-800:]} {r.stderr[-800:]}")
        summary = json.loads(r.stdout)
        report["split"] = {k: summary.get(k) for k in
                           ("shards_before", "shards", "prepare_seconds", "switch_seconds")}
        report["split"]["paused_ms"] = summary.get("switch", {}).get("paused_ms")
        report["split"]["halves"] = {
            f"{server}/{shard}": {"seconds": p.get("seconds"), "through": p.get("through"),
                                  "builds": [{k: h.get(k) for k in ("shard", "nodes", "edges",
                                                                     "stored_bytes",
                                                                     "planned_peak",
                                                                     "build_seconds")}
                                             for h in p.get("halves", [])]}
            for server, shards in summary.get("prepared", {}).items()
            for shard, p in shards.items()}
        report["shard_server_peak_rss"] = [peak_rss(p) for p in pids]
        report["tao_during_runs"] = runs
        lat = sorted(writer.lat)
        report["writes_during"] = {
            "acknowledged": len(writer.acked), "failed": writer.failed,
            "p50_us": int(lat[len(lat) // 2] * 1e6) if lat else None,
            "p99_us": int(lat[int(len(lat) * 0.99)] * 1e6) if lat else None,
            "max_us": int(lat[-1] * 1e6) if lat else None}
        # The read list again, and every acknowledged write.
        after = batch(zipg, agg, reads)
        differ = [(q, b, c) for q, b, c in zip(reads, before, after) if b != c]
        report["read_list"]["identical"] = len(reads) - len(differ)
        report["read_list"]["differ"] = len(differ)
        for q, b, c in differ[:5]:
            print(f"DIFFERS: {json.dumps(q)}\n  before {b[:300]}\n  after  {c[:300]}",
                  file=sys.stderr)
        gets = [{"op": "assoc_get", "id": q["src"], "type": WRITE_TYPE, "ids": [q["dst"]],
                 "low": 0, "high": 2 ** 62} for q in writer.acked]
        answers = batch(zipg, agg, gets) if gets else []
        missing = sum(1 for x in answers if '"dst"' not in x)
        report["writes_during"]["missing_after"] = missing
        ok = not differ and missing == 0 and report["read_list"]["errors"] == 0
        report["tao_after"] = None
        bench(zipg, agg, a.baseline, a.connections, os.path.join(tmp, "after.json")).wait()
        report["tao_after"] = latency(os.path.join(tmp, "after.json"))
    finally:
        run([zipg, "local", "stop", "--store", store], timeout=120)
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(report, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
