#!/usr/bin/python3
"""What moving a shard's copy to another server costs, and that it loses no write
(docs/cluster-changes.md, step 2; issue 32's acceptance).

Starts `zipg local start --store STORE --servers 2` (plus the given options), so shard 0 is on
shard-0; writes WRITES edges (type 77, unused by the generator) from nodes of shard 0 through the
aggregator, one request each, counting the acknowledged ones; starts a third shard server
(shard-new) on an empty store directory for shard 1 (it fetches shard 1) and waits until it
serves. Then per fetch rate: runs `zipg bench --mix MIX` for DURATION s with no move (the
baseline), then again while `zipg admin move` moves shard 0 from its server to shard-new (the
first time, fetching its files) and back, and prints the move's summary (bytes fetched, seconds
to serve, to catch up, in all) with the reads' throughput, p50 and p99 over the window. At the
end, every acknowledged edge is read back through the aggregator and asked of the server that
holds shard 0 directly: the count of missing ones is printed (it must be 0). Stops everything.

Usage: bench_move.py --zipg BUILD/client/zipg --store STORE [--writes 10000] [--mix tao]
       [--connections 4] [--duration 10] [--rates 0,20M] [-- LOCAL-START-OPTIONS...]
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import run_bench, split_args, start_cluster, stop_cluster  # noqa: E402

TYPE = 77


def query_batch(zipg, endpoint, requests):
    """Answers of `zipg query --connect endpoint --batch -`, one per request."""
    text = "".join(json.dumps(r) + "\n" for r in requests)
    r = subprocess.run([zipg, "query", "--connect", endpoint, "--batch", "-"], input=text,
                       capture_output=True, text=True, timeout=3600)
    return [json.loads(line) for line in r.stdout.split("\n") if line]


def bench(zipg, state, mix, seconds, connections):
    """`zipg bench` through every aggregator (benchlib.run_bench); a failed read is counted, not
    fatal: counting them is the point."""
    return run_bench(zipg, state, mix, seconds, connections, count_cpu=False, allow_errors=True)


def describe(b):
    overall = b["report"]["ops"]["overall"]
    per_s = b["report"]["intervals"]["ops"]["overall"]
    return (f"{b['ops_per_s']:.0f} op/s p50 {b['p50_us']:.0f} us p99 {b['p99_us']:.0f} us "
            f"max {overall['max_us'] / 1000:.1f} ms, {b['errors']} errors; per second {per_s}" +
            (f" ({b['first_error']})" if b["errors"] else ""))


def status(zipg, store):
    r = subprocess.run([zipg, "status", "--store", store, "--json"], capture_output=True,
                       text=True, timeout=60)
    return json.loads(r.stdout) if r.returncode == 0 else {}


def shard_servers(zipg, store):
    return {m["name"]: m for m in status(zipg, store).get("servers", [])
            if m.get("role") == "shard"}


def nodes_of_shard0(zipg, endpoint, count):
    """`count` node ids that shard 0 serves (asked of shard 0's server: it refuses others)."""
    ids, n = [], 0
    while len(ids) < count:
        asks = [{"op": "assoc_count", "id": i, "type": TYPE} for i in range(n, n + 200)]
        for i, a in zip(range(n, n + 200), query_batch(zipg, endpoint, asks)):
            if "ok" in a:
                ids.append(i)
        n += 200
    return ids[:count]


def main():
    own, local = split_args(sys.argv[1:])
    ap = argparse.ArgumentParser()
    ap.add_argument("--zipg", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--writes", type=int, default=10000)
    ap.add_argument("--mix", default="tao")
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rates", default="0,20M")
    a = ap.parse_args(own)
    state = start_cluster(a.zipg, a.store, ["--servers", "2"] + local)
    work = tempfile.mkdtemp(prefix="bench-move-")
    agg = state["aggregators"][0]
    new = None
    try:
        servers = shard_servers(a.zipg, a.store)
        home = next(n for n, m in servers.items() if 0 in m["shards"])
        # The writes: WRITES edges from 100 nodes of shard 0, each its own request.
        srcs = nodes_of_shard0(a.zipg, servers[home]["endpoint"], 100)
        reqs = [{"op": "assoc_add", "src": srcs[k % len(srcs)], "type": TYPE, "dst": k,
                 "timestamp": k, "properties": {"k": str(k)}} for k in range(a.writes)]
        t0 = time.monotonic()
        answers = query_batch(a.zipg, agg, reqs)
        acked = [q for q, r in zip(reqs, answers) if "ok" in r]
        print(f"writes: {len(acked)} of {len(reqs)} acknowledged in {time.monotonic() - t0:.1f} s "
              f"(edges of type {TYPE} from {len(srcs)} nodes of shard 0)", flush=True)
        # shard-new: an empty store directory, serving shard 1 first (fetched).
        with open(f"/proc/{servers[home]['pid']}/cmdline", "rb") as f:
            argv = [x.decode() for x in f.read().split(b"\0") if x]
        argv[argv.index("--store") + 1] = os.path.join(work, "store")
        argv[argv.index("--name") + 1] = "shard-new"
        argv[argv.index("--shards") + 1] = "1"
        argv += ["--updates-dir", os.path.join(work, "updates")]
        rate_at = len(argv)
        first = a.rates.split(",")[0]
        argv += ["--fetch-rate", first] if first != "0" else []
        log = open(os.path.join(work, "shard-new.log"), "wb")
        new = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            m = shard_servers(a.zipg, a.store).get("shard-new", {})
            if m.get("serving") and not m.get("catching_up"):
                break
            time.sleep(0.2)
        else:
            sys.exit(f"shard-new does not serve; see {log.name}")
        for k, rate in enumerate(a.rates.split(",")):
            if k > 0:  # restart shard-new with the rate; shard 0's files go, to be fetched again
                new.send_signal(signal.SIGTERM)
                new.wait(timeout=60)
                shutil.rmtree(os.path.join(work, "store", "shard-0000"), ignore_errors=True)
                argv = argv[:rate_at] + (["--fetch-rate", rate] if rate != "0" else [])
                new = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
                while not shard_servers(a.zipg, a.store).get("shard-new", {}).get("serving"):
                    time.sleep(0.2)
            base = bench(a.zipg, state, a.mix, a.duration, a.connections)
            moves = []

            def move_there_and_back():
                time.sleep(1.0)  # past the bench's warm-up second
                for src, dst in ((home, "shard-new"), ("shard-new", home)):
                    r = subprocess.run([a.zipg, "admin", "move", "--store", a.store, "--shard",
                                        "0", "--from", src, "--to", dst],
                                       capture_output=True, text=True, timeout=3600)
                    moves.append(json.loads(r.stdout) if r.returncode == 0 else
                                 {"error": r.stderr.strip()})

            mover = threading.Thread(target=move_there_and_back)
            mover.start()
            during = bench(a.zipg, state, a.mix, a.duration, a.connections)
            mover.join()
            label = "unlimited" if rate == "0" else rate + "/s"
            print(f"fetch rate {label}:\n  no move: {describe(base)}\n  moving there and back: "
                  f"{describe(during)}", flush=True)
            for m in moves:
                print(f"  move: {json.dumps(m)}", flush=True)
        # Every acknowledged write, through the aggregator and on shard 0's server directly.
        by_src = {}
        for q in acked:
            by_src.setdefault(q["src"], set()).add(q["dst"])
        holder = next(m for m in shard_servers(a.zipg, a.store).values() if 0 in m["shards"])
        for where, endpoint in (("aggregator", agg), (holder["name"], holder["endpoint"])):
            asks = [{"op": "assoc_range", "id": s, "type": TYPE, "pos": 0,
                     "limit": len(d) + 10} for s, d in sorted(by_src.items())]
            missing = 0
            for (s, want), got in zip(sorted(by_src.items()), query_batch(a.zipg, endpoint, asks)):
                have = {e["dst"] for e in got.get("ok", [])}
                missing += len(want - have)
            print(f"acknowledged writes missing through {where}: {missing} of {len(acked)}",
                  flush=True)
    finally:
        if new is not None and new.poll() is None:
            new.send_signal(signal.SIGTERM)
            new.wait(timeout=60)
        stop_cluster(a.zipg, a.store)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
