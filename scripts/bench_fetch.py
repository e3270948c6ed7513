#!/usr/bin/python3
"""What fetching a shard costs the reads around it (docs/cluster-changes.md, step 1).

Starts `zipg local start --store STORE` with the given options, runs `zipg bench --mix MIX` for
DURATION seconds through the aggregators with no fetch (the baseline), then again while an extra
shard server for shard 0, started on an empty store directory, fetches its files from the serving
replica (with --fetch-rate RATE when given), and prints per run: the bytes fetched, the fetch's
time, and the bench's throughput, p50 and p99 over the window from the fetch's start (all of it
during the fetch when the rate makes the fetch outlast it; otherwise the window also holds the new
replica verifying its files, catching up and serving a share of the reads on the same cores).
Stops everything at the end.

Usage: bench_fetch.py --zipg BUILD/client/zipg --store STORE [--mix tao] [--connections 4]
       [--duration 10] [--rates 0,20M,5M] [-- LOCAL-START-OPTIONS...]
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


def shard0_server_argv(state):
    """The command line of a server that serves shard 0 (from /proc)."""
    for p in state["processes"]:
        if p.get("role") != "shard":
            continue
        with open(f"/proc/{p['pid']}/cmdline", "rb") as f:
            argv = [a.decode() for a in f.read().split(b"\0") if a]
        shards = argv[argv.index("--shards") + 1].split(",")
        if "0" in shards:
            return argv
    sys.exit("no shard server serves shard 0")


def main():
    own, local = split_args(sys.argv[1:])
    ap = argparse.ArgumentParser()
    ap.add_argument("--zipg", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--mix", default="tao")
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rates", default="0,20M,5M")
    a = ap.parse_args(own)
    state = start_cluster(a.zipg, a.store, local)
    work = tempfile.mkdtemp(prefix="bench-fetch-")
    try:
        base = run_bench(a.zipg, state, a.mix, a.duration, a.connections, count_cpu=False)
        print(f"no fetch: {base['ops_per_s']:.0f} op/s  p50 {base['p50_us']:.0f} us  "
              f"p99 {base['p99_us']:.0f} us", flush=True)
        template = shard0_server_argv(state)
        for k, rate in enumerate(a.rates.split(",")):
            store = os.path.join(work, f"store-{k}")
            argv = list(template)
            argv[argv.index("--store") + 1] = store
            argv[argv.index("--name") + 1] = f"shard-fetch-{k}"
            argv += ["--updates-dir", os.path.join(work, f"updates-{k}")]
            if rate != "0":
                argv += ["--fetch-rate", rate]
            log = open(os.path.join(work, f"fetch-{k}.log"), "wb")
            # The fetch starts first, the bench (its warm-up second, then DURATION) just after:
            # at a rate where the fetch outlasts the bench, every read measured overlaps it.
            bench = {}
            server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True)
            time.sleep(0.3)
            t = threading.Thread(target=lambda: bench.update(
                run_bench(a.zipg, state, a.mix, a.duration, a.connections, count_cpu=False)))
            t.start()
            t.join()
            # Its report, once it serves (the fetch may outlast the bench at a low rate).
            report = None
            deadline = time.monotonic() + 300
            while report is None and time.monotonic() < deadline and server.poll() is None:
                with open(log.name, "rb") as f:
                    for line in f.read().decode(errors="replace").splitlines():
                        if "fetched: {" in line:
                            report = json.loads(line.split("fetched: ", 1)[1])
                time.sleep(0.2)
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
            log.close()
            if report is None:
                sys.exit(f"the fetch did not finish; see {log.name}")
            mb = report["bytes"] / 1e6
            print(f"fetch at {'unlimited' if rate == '0' else rate + '/s'}: {mb:.1f} MB in "
                  f"{report['seconds']:.2f} s ({mb / max(report['seconds'], 1e-9):.0f} MB/s); "
                  f"reads over the {a.duration + 1} s from its start "
                  f"({'all during the fetch' if report['seconds'] > a.duration + 1.3 else 'the fetch, then a third replica opening and serving'}): "
                  f"{bench['ops_per_s']:.0f} op/s  "
                  f"p50 {bench['p50_us']:.0f} us  p99 {bench['p99_us']:.0f} us", flush=True)
            shutil.rmtree(store, ignore_errors=True)
    finally:
        stop_cluster(a.zipg, a.store)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
