#!/usr/bin/python3
"""Reads of written nodes before, during and after a sustained write load on a local cluster,
with compactions, log-shard merges and base-shard rebuilds running on their own (issue 14's
"sustained write load" acceptance: fragments per read stay bounded, and read p99 stays within 2x
of before the load).

Starts `zipg local start --store STORE LOCAL-START-OPTIONS...` (writes are removed first: the
store's updates/ and LogStore directories; pass small thresholds, e.g. `--memtable-mb 8
--rebuild-delta 8M`, so that a run of minutes sees many compactions, merges and rebuilds), then:
  1. reads: `zipg bench --mix tao` for --duration (Zipf ids: the nodes the writes will hit most);
  2. writes: `zipg bench --mix write` with --write-connections for --write-seconds, while a read
     bench with 2 connections runs in rounds of --duration, and the LogStore's and shard
     servers' status is sampled every second (log shards, merges, compactions, rebuilds);
  3. once no rebuild, compaction or merge is running (at most 300 s later): reads again, twice,
     with no writes (the quiet after-load figure the 2x target is about; the
     first round also fills the LogStore's edge cache with what was written last).
Prints each phase's reads (op/s, p50, p99, CPU us per read over all processes) with ratios to
before, the writes' rate, and the fragment counts: the most log shards at once, and the most
fragments a read of a written node could name (its base shard, its delta, the LogStore's live
and frozen memtables, and every log shard).

Usage: bench_sustained.py --zipg BUILD/client/zipg --store STORE [--write-seconds 120]
       [--duration 10] [--connections 8] [--write-connections 16] [--keep]
       [-- LOCAL-START-OPTIONS...]
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from benchlib import run_bench, split_args, start_cluster, stop_cluster  # noqa: E402
from write_model import raw_status  # noqa: E402


def main():
    argv, local_args = split_args(sys.argv[1:])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--zipg", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--write-seconds", type=int, default=120)
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--connections", type=int, default=8)
    p.add_argument("--write-connections", type=int, default=16)
    p.add_argument("--keep", action="store_true",
                   help="leave the cluster running at the end (zipg local stop --store STORE)")
    a = p.parse_args(argv)
    state = start_cluster(a.zipg, a.store, local_args)
    try:
        def bench(mix, seconds, connections, count_cpu=True):
            return run_bench(a.zipg, state, mix, seconds, connections, count_cpu)

        def line(label, r, ref=None):
            ratio = ""
            if ref:
                ratio = (f"  ({r['ops_per_s'] / ref['ops_per_s']:.2f}x op/s, p99 "
                         f"{r['p99_us'] / ref['p99_us']:.2f}x)")
            cpu = ""
            if r["cpu_us"] is not None:
                per = ", ".join(f"{k} {v:.0f}" for k, v in sorted(r["cpu_per"].items()))
                cpu = f"  CPU {r['cpu_us']:.0f} us/read ({per})"
            print(f"{label}: {r['ops_per_s']:.0f} reads/s  p50 {r['p50_us']:.0f} us  p99 "
                  f"{r['p99_us']:.0f} us{cpu}  errors {r['errors']}{ratio}", flush=True)

        shard_endpoints = [p.get("endpoint") for p in json.loads(subprocess.run(
            [a.zipg, "status", "--connect", state["aggregators"][0], "--json"],
            capture_output=True, text=True).stdout).get("servers", []) if p.get("role") == "shard"]

        def sample():
            ls = (raw_status(state["logstore"]) or {}).get("logstore") or {}
            versions, written = {}, 0
            for e in shard_endpoints:
                for s, v in ((raw_status(e) or {}).get("rebuilds") or {}).items():
                    versions[s] = max(versions.get(s, 0), v.get("version", 0))
                    written = max(written, v.get("written_nodes", 0))
            return {"log_shards": len(ls.get("log_shards") or []),
                    "frozen": ls.get("frozen") is not None,
                    "compactions": ls.get("compactions", 0), "merges": ls.get("merges", 0),
                    "forced_merges": ls.get("forced_merges", 0), "versions": versions,
                    "written_nodes": written}

        before = bench("tao", a.duration, a.connections)
        line("reads before the load", before)

        written = {}

        def write_load():
            written.update(bench("write", a.write_seconds, a.write_connections, count_cpu=False))

        samples = []
        stop = threading.Event()

        def sampler():
            while not stop.is_set():
                samples.append(sample())
                stop.wait(1.0)

        writer = threading.Thread(target=write_load)
        watcher = threading.Thread(target=sampler)
        t0 = time.monotonic()
        writer.start()
        watcher.start()
        during = []
        while writer.is_alive() and time.monotonic() - t0 < a.write_seconds - a.duration:
            during.append(bench("tao", a.duration, 2, count_cpu=False))
        writer.join()
        stop.set()
        watcher.join()
        print(f"writes: {written['ops_per_s']:.0f}/s for {a.write_seconds} s with "
              f"{a.write_connections} connections, p99 {written['p99_us']:.0f} us, errors "
              f"{written['errors']}", flush=True)
        for k, r in enumerate(during):
            line(f"reads during the load, round {k + 1} (2 connections)", r)
        end = samples[-1] if samples else sample()
        most = max((s["log_shards"] for s in samples), default=0)
        frozen = any(s["frozen"] and s["log_shards"] == most for s in samples)
        print(f"LogStore: {end['compactions']} compactions, {end['merges']} merges "
              f"({end['forced_merges']} forced), {end['log_shards']} log shards at the end, at "
              f"most {most} at once", flush=True)
        print(f"base shards: versions {end['versions']} (each a rebuild), written nodes in a "
              f"delta at the end: at most {end['written_nodes']}", flush=True)
        print(f"fragments a read of a written node could name, at most: "
              f"{2 + 1 + int(frozen) + most} (base, delta, live memtable"
              f"{', frozen memtable' if frozen else ''}, {most} log shards)", flush=True)
        # Quiet: no rebuild, compaction or merge still running from the load (at most 300 s).
        t1 = time.monotonic()
        while time.monotonic() - t1 < 300:
            ls = (raw_status(state["logstore"]) or {}).get("logstore") or {}
            busy = ls.get("frozen") is not None or ls.get("merging") is not None
            for e in shard_endpoints:
                rebuilds = (raw_status(e) or {}).get("rebuilds") or {}
                busy = busy or any(v.get("rebuilding") for v in rebuilds.values())
            if not busy:
                break
            time.sleep(1)
        print(f"waited {time.monotonic() - t1:.0f} s for rebuilds, compactions and merges to "
              f"end", flush=True)
        # Twice: the first round also fills the LogStore's edge cache with the keys written last.
        for k in (1, 2):
            after = bench("tao", a.duration, a.connections)
            line(f"reads after the load (quiet), round {k}", after, before)
        ls = (raw_status(state["logstore"]) or {}).get("logstore") or {}
        print(f"LogStore edge cache: {json.dumps(ls.get('edge_cache'))}", flush=True)
    finally:
        if not a.keep:
            stop_cluster(a.zipg, a.store)


if __name__ == "__main__":
    main()
