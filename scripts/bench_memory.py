#!/usr/bin/python3
"""TAO throughput of a local cluster under a memory limit that counts the page cache.

For each store and each factor F, starts `zipg local start --store STORE` inside a cgroup v1
memory cgroup limited to F x (the store's files) + (the processes' own memory), with the store's
pages evicted from the page cache first, and runs `zipg bench --mix tao` (outside the cgroup)
against it. Every page the servers read, the store's included, is charged to the cgroup, so below
1.0 the cluster runs with part of its store on disk. The processes' own memory is measured once per
store, in a run without a limit (the cgroup's rss + mapped_file - the store's mapped pages is not
separable in v1, so: rss, the anonymous memory). Prints one line per run and a table:

    store      factor  limit MB   op/s     p50 us   p99 us   of unlimited
    store-v1   1.30    260        8400     ...

Needs root (cgroup v1 memory controller at /sys/fs/cgroup/memory). Every run is bounded by
--duration; the cluster is stopped after each.

Usage: bench_memory.py --zipg BUILD/client/zipg --store S1 [--store S2] [--factors 1.3,1.0,0.6]
       [--duration 10] [--connections 4] [-- LOCAL-START-OPTIONS...]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import run_bench, split_args, stop_cluster  # noqa: E402

CGROUP_ROOT = "/sys/fs/cgroup/memory"


def store_files(store):
    """The store's data files (MANIFEST and the shard directories' files)."""
    files = [os.path.join(store, "MANIFEST")]
    for d in sorted(os.listdir(store)):
        if d.startswith("shard-") and os.path.isdir(os.path.join(store, d)):
            files += [os.path.join(store, d, f) for f in sorted(os.listdir(os.path.join(store, d)))]
    return files


def evict(files):
    """Drops the files' clean pages from the page cache (none may be mapped: no server runs)."""
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def make_cgroup(name, limit):
    path = os.path.join(CGROUP_ROOT, name)
    if os.path.isdir(path):
        os.rmdir(path)
    os.mkdir(path)
    with open(os.path.join(path, "memory.limit_in_bytes"), "w") as f:
        f.write(str(limit) if limit else "-1")
    return path


def remove_cgroup(path):
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except OSError:
            time.sleep(0.1)  # processes still leaving


def memory_stat(path):
    with open(os.path.join(path, "memory.stat")) as f:
        return {k: int(v) for k, v in (line.split() for line in f)}


def run_point(a, store, local_args, limit):
    """Starts the cluster in a cgroup of `limit` bytes (0: none), benches it, stops it. Returns
    the bench result with the cgroup's memory.stat at the end and its failcnt."""
    stop_cluster(a.zipg, store)
    for d in ("updates", "logstore", "logstore-standby", "run"):
        shutil.rmtree(os.path.join(store, d), ignore_errors=True)
    evict(store_files(store))
    cg = make_cgroup(f"zipg-bench-memory-{os.getpid()}", limit)
    try:
        start = subprocess.run(
            ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cg, a.zipg, "local", "start",
             "--store", store, *local_args], capture_output=True, text=True, timeout=300)
        if start.returncode != 0:
            sys.exit(f"local start failed:\n{start.stdout}{start.stderr}")
        with open(os.path.join(store, "run", "cluster.json")) as f:
            state = json.load(f)
        r = run_bench(a.zipg, state, "tao", a.duration, a.connections, count_cpu=False)
        r["stat"] = memory_stat(cg)
        with open(os.path.join(cg, "memory.failcnt")) as f:
            r["failcnt"] = int(f.read())
        return r
    finally:
        stop_cluster(a.zipg, store)
        remove_cgroup(cg)


def main():
    own, local_args = split_args(sys.argv[1:])
    p = argparse.ArgumentParser()
    p.add_argument("--zipg", required=True)
    p.add_argument("--store", action="append", required=True)
    p.add_argument("--factors", default="1.3,1.13,1.0,0.8,0.6")
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--connections", type=int, default=4)
    a = p.parse_args(own)
    if not os.path.isdir(CGROUP_ROOT):
        sys.exit(f"no cgroup v1 memory controller at {CGROUP_ROOT}")
    factors = [float(f) for f in a.factors.split(",")]
    rows = []
    for store in a.store:
        size = sum(os.path.getsize(f) for f in store_files(store))
        free = run_point(a, store, local_args, 0)
        own_bytes = free["stat"]["rss"]
        print(f"{store}: files {size / 1e6:.1f} MB, processes' own memory (rss) "
              f"{own_bytes / 1e6:.1f} MB; unlimited {free['ops_per_s']:.0f} op/s "
              f"p50 {free['p50_us']:.0f} us p99 {free['p99_us']:.0f} us", flush=True)
        rows.append((store, "none", 0, free, free["ops_per_s"]))
        for f in factors:
            limit = int(f * size + own_bytes)
            r = run_point(a, store, local_args, limit)
            print(f"  factor {f:.2f}: limit {limit / 1e6:.0f} MB, {r['ops_per_s']:.0f} op/s "
                  f"p50 {r['p50_us']:.0f} us p99 {r['p99_us']:.0f} us, errors {r['errors']}, "
                  f"cache {r['stat']['cache'] / 1e6:.0f} MB, limit hit {r['failcnt']} times",
                  flush=True)
            rows.append((store, f"{f:.2f}", limit, r, free["ops_per_s"]))
    print(f"\n{'store':<28} {'factor':>6} {'limit MB':>9} {'op/s':>9} {'p50 us':>9} "
          f"{'p99 us':>9} {'of unlimited':>12}")
    for store, f, limit, r, base in rows:
        print(f"{os.path.basename(store.rstrip('/')):<28} {f:>6} {limit / 1e6:>9.0f} "
              f"{r['ops_per_s']:>9.0f} {r['p50_us']:>9.0f} {r['p99_us']:>9.0f} "
              f"{r['ops_per_s'] / base:>12.3f}")


if __name__ == "__main__":
    main()
