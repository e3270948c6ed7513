#!/usr/bin/python3
"""What snapshots cost (docs/consistency.md, "Snapshot cost"): the same workloads on the same
store, side by side in one run, with

  before   a build without snapshots (--before BIN, e.g. a worktree of an older commit)
  after    this build (versions kept for --snapshot-retention, 60 s by default)

Throughput: each workload (`zipg bench` mixes, e.g. tao:4 reads, write:16 durable writes with the
standby) runs on a fresh cluster per configuration and round, configurations alternating; prints
medians of op/s, p50, p99 and CPU per operation over every process, and the ratios to `before`.

Memory: one sustained write run per configuration (--memory-seconds, longer than the retention so
that versions are dropped as fast as they are made), sampling every server's resident memory
every 2 s; prints per role the RSS after 10 s and the mean over the last 30 s, and for `after`
the LogStore's and the replicas' "snapshots" status (versions kept, their bytes).

Usage: bench_snapshots.py --zipg BUILD/client/zipg --before OLD/client/zipg --store STORE
       [--workloads tao:4,write:16] [--duration 10] [--rounds 2] [--memory-seconds 100]
       [-- LOCAL-START-OPTIONS...]   (default: --servers 2 --replicas 2 --aggregators 2
                                      --logstores 2 --memtable-mb 0)
"""
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (compare, comparison_parser, kind, parse_workloads, run_bench,  # noqa
                      server_pids, split_args, start_cluster, stop_cluster)

DEFAULT_LOCAL = ["--servers", "2", "--replicas", "2", "--aggregators", "2", "--logstores", "2",
                 "--memtable-mb", "0"]


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def status_json(zipg, endpoint):
    r = subprocess.run([zipg, "status", "--connect", endpoint, "--json"], capture_output=True,
                       text=True, timeout=60)
    return json.loads(r.stdout) if r.returncode == 0 else {}


def snapshot_status(zipg, state):
    """What the LogStore leader and each replica keep for snapshots (their own status documents;
    absent in a build without snapshots)."""
    out = {}
    log = status_json(zipg, state["logstore"]).get("logstore", {})
    if "snapshots" in log:
        out["logstore"] = log["snapshots"]
    for server in status_json(zipg, state["aggregators"][0]).get("servers", []):
        if server.get("role") != "shard":
            continue
        commits = status_json(zipg, server["endpoint"]).get("commits", {})
        for shard, c in commits.items():
            if "snapshots" in c:
                out[f"{server['name']} shard {shard}"] = c["snapshots"]
    return out


def memory_run(zipg, store, local, seconds):
    state = start_cluster(zipg, store, local)
    samples = {}  # pid -> [(t, MiB)]
    procs = server_pids(state)
    done = threading.Event()
    result = {}

    def bench():
        try:
            result["bench"] = run_bench(zipg, state, "write", seconds, 16, count_cpu=False)
        finally:
            done.set()

    t0 = time.monotonic()
    th = threading.Thread(target=bench)
    th.start()
    while not done.wait(2.0):
        t = time.monotonic() - t0
        for pid in procs:
            m = rss_mib(pid)
            if m is not None:
                samples.setdefault(pid, []).append((t, m))
    th.join()
    status = snapshot_status(zipg, state)
    stop_cluster(zipg, store)
    per_role = {}
    for pid, name in procs.items():
        pts = samples.get(pid, [])
        if not pts:
            continue
        early = next((m for t, m in pts if t >= 10), pts[0][1])
        last = [m for t, m in pts if t >= pts[-1][0] - 30]
        role = kind(name)
        per_role.setdefault(role, []).append((early, statistics.mean(last), max(m for _, m in pts)))
    return result.get("bench"), per_role, status


def main():
    argv, local_args = split_args(sys.argv[1:])
    p = comparison_parser(__doc__, "tao:4,write:16")
    p.add_argument("--memory-seconds", type=int, default=100)
    a = p.parse_args(argv)
    local = local_args or DEFAULT_LOCAL
    configs = [("before", a.before, []), ("after", a.zipg, [])]
    compare(configs, parse_workloads(a.workloads), a.store, local, a.rounds, a.duration)
    if a.memory_seconds > 0:
        print()
        print(f"sustained durable writes (write:16) for {a.memory_seconds} s; resident MiB per "
              f"process: after 10 s / mean of the last 30 s / peak")
        print("| config | role | processes | RSS at 10 s | RSS last 30 s | peak | writes/s |")
        print("|---|---|---|---|---|---|---|")
        for name, zipg, _ in configs:
            bench, per_role, status = memory_run(zipg, a.store, local, a.memory_seconds)
            rate = bench["ops_per_s"] if bench else 0
            for role, rows in sorted(per_role.items()):
                print(f"| {name} | {role} | {len(rows)} | "
                      f"{statistics.mean(r[0] for r in rows):.0f} | "
                      f"{statistics.mean(r[1] for r in rows):.0f} | "
                      f"{max(r[2] for r in rows):.0f} | {rate:.0f} |", flush=True)
            for who, snap in status.items():
                print(f"  {name}: {who} keeps {json.dumps(snap)}", flush=True)


if __name__ == "__main__":
    main()
