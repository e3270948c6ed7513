#!/usr/bin/python3
"""What linearizable reads cost (docs/consistency.md, "Cost"): the same workloads on the same
store, side by side in one run, with

  before        a build without the mechanism (--before BIN, e.g. a worktree of an older commit)
  replica       this build, `--read-consistency replica` (reads see what the replica applied)
  linearizable  this build, the default

Each run starts a fresh cluster (`zipg local start`, writes removed first) with the given local
start options, runs one `zipg bench` mix, and stops it; configurations alternate within a round so
that drift of the machine hits them alike. Prints per workload and configuration the median over
the rounds of op/s, p50, p99 and CPU per operation (all processes), and the ratios to `before`.

Usage: bench_consistency.py --zipg BUILD/client/zipg --before OLD/client/zipg --store STORE
       [--workloads tao:4,write:16,linkbench:16] [--duration 10] [--rounds 2]
       [-- LOCAL-START-OPTIONS...]   (default: --servers 2 --replicas 2 --aggregators 2
                                      --logstores 2 --memtable-mb 0)
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import run_bench, split_args, start_cluster, stop_cluster  # noqa: E402

DEFAULT_LOCAL = ["--servers", "2", "--replicas", "2", "--aggregators", "2", "--logstores", "2",
                 "--memtable-mb", "0"]


def main():
    argv, local_args = split_args(sys.argv[1:])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--zipg", required=True)
    p.add_argument("--before", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--workloads", default="tao:4,write:16,linkbench:16")
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args(argv)
    local = local_args or DEFAULT_LOCAL
    configs = [("before", a.before, []),
               ("replica", a.zipg, ["--read-consistency", "replica"]),
               ("linearizable", a.zipg, [])]
    workloads = [(w.split(":")[0], int(w.split(":")[1])) for w in a.workloads.split(",")]
    results = {}
    for mix, conns in workloads:
        for rnd in range(a.rounds):
            for name, zipg, extra in configs:
                r = None
                for attempt in range(2):  # a server that died under load (printed) is run again
                    state = start_cluster(zipg, a.store, local + extra)
                    try:
                        r = run_bench(zipg, state, mix, a.duration, conns)
                    except OSError as e:  # a server's /proc entry vanished: it exited
                        print(f"round {rnd + 1} {mix}:{conns} {name}: a server died ({e}); "
                              f"logs in {a.store}/run", flush=True)
                    finally:
                        stop_cluster(zipg, a.store)
                    if r is not None:
                        break
                if r is None:
                    sys.exit("a server died twice; see the logs")
                results.setdefault((mix, conns, name), []).append(r)
                print(f"round {rnd + 1} {mix}:{conns} {name}: {r['ops_per_s']:.0f} op/s "
                      f"p50 {r['p50_us']:.0f} us p99 {r['p99_us']:.0f} us "
                      f"CPU {r['cpu_us']:.0f} us/op errors {r['errors']}", flush=True)
    print()
    print("| workload | config | op/s | p50 us | p99 us | CPU us/op | op/s vs before | "
          "p99 vs before |")
    print("|---|---|---|---|---|---|---|---|")
    for mix, conns in workloads:
        base = None
        for name, _, _ in configs:
            runs = results[(mix, conns, name)]
            m = {k: statistics.median(r[k] for r in runs)
                 for k in ("ops_per_s", "p50_us", "p99_us", "cpu_us")}
            if base is None:
                base = m
            print(f"| {mix}, {conns} conn | {name} | {m['ops_per_s']:.0f} | {m['p50_us']:.0f} | "
                  f"{m['p99_us']:.0f} | {m['cpu_us']:.0f} | "
                  f"{m['ops_per_s'] / base['ops_per_s']:.3f} | "
                  f"{m['p99_us'] / base['p99_us']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
