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
import resource
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from write_model import raw_status  # noqa: E402


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime (fields 14, 15)


def kind(name):
    for prefix in ("shard", "aggregator"):
        if name.startswith(prefix):
            return prefix
    return name


def run_once(a, local_args):
    for d in ("updates", "logstore", "logstore-standby"):
        shutil.rmtree(os.path.join(a.store, d), ignore_errors=True)
    start = subprocess.run([a.zipg, "local", "start", "--store", a.store, *local_args],
                           capture_output=True, text=True)
    if start.returncode != 0:
        sys.exit(f"local start failed:\n{start.stdout}{start.stderr}")
    try:
        with open(os.path.join(a.store, "run", "cluster.json")) as f:
            state = json.load(f)
        procs = {p["pid"]: p.get("name", p.get("role")) for p in state["processes"]
                 if p.get("role") != "etcd"}
        before = {pid: cpu_ticks(pid) for pid in procs}
        usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        # A TLS cluster: the bench uses the same files (any certificate of the cluster's CA).
        tls = []
        for flag in ("--tls-ca", "--tls-cert", "--tls-key"):
            if flag in local_args:
                tls += [flag, local_args[local_args.index(flag) + 1]]
        bench = subprocess.run([a.zipg, "bench", "--connect", ",".join(state["aggregators"]),
                                "--mix", a.mix, "--connections", str(a.connections),
                                "--duration", str(a.duration), "--warmup", "1", "--json", *tls],
                               capture_output=True, text=True)
        usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        after = {pid: cpu_ticks(pid) for pid in procs}
        # The LogStore the cluster started with (the leader, unless it failed over).
        status = (raw_status(state["logstore"]) or {}).get("logstore") or {}
        commit = dict(status.get("commit") or {}, writes=status.get("writes", 0))
    finally:
        subprocess.run([a.zipg, "local", "stop", "--store", a.store], capture_output=True)
    lines = [l for l in bench.stdout.splitlines() if l.startswith("{")]
    if bench.returncode != 0 or not lines:
        sys.exit(f"bench failed:\n{bench.stdout}{bench.stderr}")
    report = json.loads(lines[-1])
    overall = report["ops"]["overall"]
    ops = overall["ops_per_s"] * (a.duration + 1)
    hz = os.sysconf("SC_CLK_TCK")
    per = {}
    for pid, name in procs.items():
        per[kind(name)] = per.get(kind(name), 0.0) + (after[pid] - before[pid]) / hz * 1e6 / ops
    client = ((usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)) * 1e6 / ops
    per["client"] = client
    return {"mix": a.mix, "connections": a.connections, "ops_per_s": overall["ops_per_s"],
            "p50_us": overall["p50_us"], "p99_us": overall["p99_us"], "errors": report["errors"],
            "cpu_us_per_op": {k: round(v, 1) for k, v in per.items()},
            "cpu_us_per_op_total": round(sum(per.values()), 1),
            "logstore_groups": {k: (v / max(commit.get("groups", 0), 1) if k != "groups" else v)
                                for k, v in commit.items()}}


def main():
    argv = sys.argv[1:]
    local_args = []
    if "--" in argv:
        local_args = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
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
