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
import resource
import shutil
import subprocess
import sys
import threading
import time


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


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
    argv = sys.argv[1:]
    local_args = []
    if "--" in argv:
        local_args = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--zipg", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--write-seconds", type=int, default=40)
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--connections", type=int, default=8)
    a = p.parse_args(argv)
    for d in ("updates", "logstore", "logstore-standby"):
        shutil.rmtree(os.path.join(a.store, d), ignore_errors=True)
    start = subprocess.run([a.zipg, "local", "start", "--store", a.store, "--memtable-mb", "0",
                            "--rebuild-delta", "0", *local_args], capture_output=True, text=True)
    if start.returncode != 0:
        sys.exit(f"local start failed:\n{start.stdout}{start.stderr}")
    try:
        with open(os.path.join(a.store, "run", "cluster.json")) as f:
            state = json.load(f)
        aggs = ",".join(state["aggregators"])
        procs = {p["pid"]: p.get("name", p.get("role")) for p in state["processes"]
                 if p.get("role") != "etcd"}
        shards = {pid: name for pid, name in procs.items() if name.startswith("shard")}

        def bench(mix, seconds):
            before = {pid: cpu_ticks(pid) for pid in procs}
            u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            r = subprocess.run([a.zipg, "bench", "--connect", aggs, "--mix", mix,
                                "--connections", str(a.connections), "--duration", str(seconds),
                                "--warmup", "1", "--json"], capture_output=True, text=True)
            u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            after = {pid: cpu_ticks(pid) for pid in procs}
            lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
            if r.returncode != 0 or not lines:
                sys.exit(f"bench failed:\n{r.stdout}{r.stderr}")
            o = json.loads(lines[-1])["ops"]["overall"]
            ops = o["ops_per_s"] * (seconds + 1)
            hz = os.sysconf("SC_CLK_TCK")
            cpu = sum(after[p] - before[p] for p in procs) / hz * 1e6 / ops
            cpu += ((u1.ru_utime - u0.ru_utime) + (u1.ru_stime - u0.ru_stime)) * 1e6 / ops
            return {"ops_per_s": o["ops_per_s"], "p50_us": o["p50_us"], "p99_us": o["p99_us"],
                    "cpu_us": cpu}

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
        subprocess.run([a.zipg, "local", "stop", "--store", a.store], capture_output=True)


if __name__ == "__main__":
    main()
