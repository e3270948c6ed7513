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
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import compare, comparison_parser, parse_workloads, split_args  # noqa: E402

DEFAULT_LOCAL = ["--servers", "2", "--replicas", "2", "--aggregators", "2", "--logstores", "2",
                 "--memtable-mb", "0"]


def main():
    argv, local_args = split_args(sys.argv[1:])
    p = comparison_parser(__doc__, "tao:4,write:16,linkbench:16")
    a = p.parse_args(argv)
    local = local_args or DEFAULT_LOCAL
    configs = [("before", a.before, []),
               ("replica", a.zipg, ["--read-consistency", "replica"]),
               ("linearizable", a.zipg, [])]
    compare(configs, parse_workloads(a.workloads), a.store, local, a.rounds, a.duration)

if __name__ == "__main__":
    main()
