#!/usr/bin/python3
"""A base-shard rebuild on a written store (docs/writes.md, "Rebuilding a base shard"): its time,
the shard servers' peak memory, and reads of the written nodes before, during and after it.

Starts `zipg local start --store STORE --memtable-mb 0 --rebuild-delta 0` (writes are removed
first: the store's updates/ and LogStore directories), then:
  1. writes: `zipg bench --mix write` for --write-seconds (Zipf ids: the hot nodes get most);
  2. `zipg admin compact` (the written data in a log shard, as after any compaction);
  3. reads: `zipg bench --mix tao` (the same Zipf ids: mostly written nodes) for --duration;
  4. `zipg admin rebuild` of every shard, with the same read bench running meanwhile;
  5. the read bench again, after.
Prints the shard servers' delta bytes and written nodes before and after, the rebuild's summary,
its wall time, each shard server's peak RSS during it (VmHWM, reset before it through
/proc/PID/clear_refs), and the reads' op/s, p50, p99 and CPU us per read (all processes) in each
phase, with the ratios to the phase before.

Usage: bench_rebuild.py --zipg BUILD/client/zipg --store STORE [--write-seconds 40]
       [--duration 10] [--connections 8] [-- LOCAL-START-OPTIONS...]
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

from benchlib import run_bench, server_pids, split_args, start_cluster, stop_cluster


def hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def status(zipg, endpoint):
    r = subprocess.run([zipg, "status", "--connect", endpoint, "--json"], capture_output=True,
                       text=True, timeout=60)
    return json.loads(r.stdout)


def main():
    argv, local_args = split_args(sys.argv[1:])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--zipg", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--write-seconds", type=int, default=40)
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--connections", type=int, default=8)
    a = p.parse_args(argv)
    state = start_cluster(a.zipg, a.store,
                          ["--memtable-mb", "0", "--rebuild-delta", "0", *local_args])
    try:
        shards = {pid: name for pid, name in server_pids(state).items()
                  if name.startswith("shard")}

        def bench(mix, seconds):
            return run_bench(a.zipg, state, mix, seconds, a.connections)

        def deltas():
            out = {}
            for m in status(a.zipg, state["aggregators"][0]).get("servers", []):
                if m.get("role") != "shard":
                    continue
                own = status(a.zipg, m["endpoint"]).get("rebuilds", {})
                out[m["name"]] = {s: {"delta_bytes": v["delta_bytes"],
                                      "written_nodes": v["written_nodes"],
                                      "version": v["version"]} for s, v in own.items()}
            return out

        def line(label, r, ref=None):
            ratio = ""
            if ref:
                ratio = (f"  ({r['ops_per_s'] / ref['ops_per_s']:.2f}x op/s, p99 "
                         f"{r['p99_us'] / ref['p99_us']:.2f}x)")
            print(f"{label}: {r['ops_per_s']:.0f} reads/s  p50 {r['p50_us']:.0f} us  p99 "
                  f"{r['p99_us']:.0f} us  CPU {r['cpu_us']:.0f} us/read{ratio}", flush=True)

        w = bench("write", a.write_seconds)
        print(f"writes: {w['ops_per_s']:.0f}/s for {a.write_seconds} s, CPU {w['cpu_us']:.0f} "
              f"us/write", flush=True)
        c = subprocess.run([a.zipg, "admin", "compact", "--connect", state["aggregators"][0]],
                           capture_output=True, text=True)
        print(f"compact: {c.stdout.strip()[:300]}", flush=True)
        print(f"deltas before: {json.dumps(deltas())}", flush=True)
        before = bench("tao", a.duration)
        line("reads before the rebuild", before)

        for pid in shards:
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")
        rebuild = {}

        def run_rebuild():
            t0 = time.monotonic()
            r = subprocess.run([a.zipg, "admin", "rebuild", "--connect", state["aggregators"][0]],
                               capture_output=True, text=True)
            rebuild["seconds"] = time.monotonic() - t0
            rebuild["out"] = r.stdout.strip() or r.stderr.strip()

        rss = {shards[p]: f"{rss_kib(p) / 1024:.0f} MiB" for p in shards}
        th = threading.Thread(target=run_rebuild)
        th.start()
        chunks = []  # read benches of --duration seconds until the rebuild is done
        while th.is_alive():
            chunks.append(bench("tao", a.duration))
        th.join()
        during = {"ops_per_s": sum(c["ops_per_s"] for c in chunks) / len(chunks),
                  "p50_us": sorted(c["p50_us"] for c in chunks)[len(chunks) // 2],
                  "p99_us": max(c["p99_us"] for c in chunks),
                  "cpu_us": sum(c["cpu_us"] for c in chunks) / len(chunks)}
        line(f"reads during the rebuild ({len(chunks)} runs: mean op/s, median p50, worst p99)",
             during, before)
        print(f"shard servers' RSS before the rebuild: {rss}", flush=True)
        print(f"rebuild: {rebuild['seconds']:.1f} s wall; peak RSS "
              f"{ {shards[p]: f'{hwm_kib(p) / 1024:.0f} MiB' for p in shards} }", flush=True)
        print(f"rebuild summary: {rebuild['out'][:2000]}", flush=True)
        print(f"deltas after: {json.dumps(deltas())}", flush=True)
        after = bench("tao", a.duration)
        line("reads after the rebuild", after, before)
    finally:
        stop_cluster(a.zipg, a.store)


if __name__ == "__main__":
    main()
