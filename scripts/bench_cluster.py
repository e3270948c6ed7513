#!/usr/bin/python3
"""Throughput and CPU per operation of a local cluster, per process.

Starts `zipg local start --store STORE` with the given options (writes are removed first: the
store's updates/ and LogStore directories), runs `zipg bench --connect <every aggregator>` with
the given mix and connections, reads each server process's CPU time from /proc before and after,
and the bench's own with getrusage, then stops the cluster. Prints one line per run:

    mix write, 16 connections: 6551 op/s  p50 2421 us  p99 4067 us  errors 0
      CPU us per op: aggregator 37  logstore 65  shard 103  client 21  total 227

The CPU of the warm-up second is counted against warm-up operations at the measured rate.

Usage: bench_cluster.py --zipg BUILD/client/zipg --store STORE [--mix write] [--connections 16]
       [--duration 10] [--runs 1] [--json] [-- LOCAL-START-OPTIONS...]
e.g.   scripts/bench_cluster.py --zipg build/client/zipg --store store --connections 16 \\
           -- --servers 2 --memtable-mb 0 --logstores 2
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from benchlib import run_bench, split_args, start_cluster, stop_cluster  # noqa: E402
from write_model import raw_status  # noqa: E402


def run_once(a, local_args):
    state = start_cluster(a.zipg, a.store, local_args)
    try:
        # A TLS cluster: the bench uses the same files (any certificate of the cluster's CA).
        tls = []
        for flag in ("--tls-ca", "--tls-cert", "--tls-key"):
            if flag in local_args:
                tls += [flag, local_args[local_args.index(flag) + 1]]
        r = run_bench(a.zipg, state, a.mix, a.duration, a.connections, extra=tls)
        # The LogStore the cluster started with (the leader, unless it failed over).
        status = (raw_status(state["logstore"]) or {}).get("logstore") or {}
        commit = dict(status.get("commit") or {}, writes=status.get("writes", 0))
    finally:
        stop_cluster(a.zipg, a.store)
    return {"mix": a.mix, "connections": a.connections, "ops_per_s": r["ops_per_s"],
            "p50_us": r["p50_us"], "p99_us": r["p99_us"], "errors": r["errors"],
            "cpu_us_per_op": {k: round(v, 1) for k, v in r["cpu_per"].items()},
            "cpu_us_per_op_total": round(r["cpu_us"], 1),
            "logstore_groups": {k: (v / max(commit.get("groups", 0), 1) if k != "groups" else v)
                                for k, v in commit.items()}}


def main():
    argv, local_args = split_args(sys.argv[1:])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--zipg", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--mix", default="write")
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    for _ in range(a.runs):
        r = run_once(a, local_args)
        if a.json:
            print(json.dumps(r))
            continue
        cpu = "  ".join(f"{k} {v:.0f}" for k, v in sorted(r["cpu_us_per_op"].items()))
        print(f"mix {r['mix']}, {r['connections']} connections: {r['ops_per_s']:.0f} op/s  "
              f"p50 {r['p50_us']:.0f} us  p99 {r['p99_us']:.0f} us  errors {r['errors']}\n"
              f"  CPU us per op: {cpu}  total {r['cpu_us_per_op_total']:.0f}", flush=True)
        g = r["logstore_groups"]
        if g.get("groups"):
            stages = "  ".join(f"{k} {v:.0f}" for k, v in g.items() if k.endswith("_us"))
            print(f"  LogStore: {g['groups']} commit groups of {g.get('writes', 0):.1f} writes; "
                  f"us per group: {stages}", flush=True)


if __name__ == "__main__":
    main()
