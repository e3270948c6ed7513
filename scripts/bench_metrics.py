#!/usr/bin/python3
"""What metrics cost (docs/operations.md, "Overhead"): the same workloads on the same store, side
by side in one run, configurations alternating within each round:

  off          `zipg local start` without --metrics: no recording point records anything
  on           --metrics: every call counted and timed per operation and code
  on+scrape    --metrics --prometheus: also a Prometheus server scraping every server each second
               (its own CPU is not counted: it is not part of the cluster)

Prints medians of op/s, p50, p99 and CPU per operation over the servers, and the ratios to `off`.

Usage: bench_metrics.py --zipg BUILD/client/zipg --store STORE [--workloads tao:4]
       [--duration 10] [--rounds 3] [--configs off,on,on+scrape] [-- LOCAL-START-OPTIONS...]
       (default: --servers 2 --aggregators 2)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import compare, parse_workloads, split_args  # noqa: E402


def main():
    argv, local = split_args(sys.argv[1:])
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--zipg", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--workloads", default="tao:4")
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--configs", default="off,on,on+scrape",
                   help="which configurations, comma-separated (default all three)")
    a = p.parse_args(argv)
    local = local or ["--servers", "2", "--aggregators", "2"]
    every = {"off": [], "on": ["--metrics"], "on+scrape": ["--metrics", "--prometheus"]}
    configs = [(name, a.zipg, every[name]) for name in a.configs.split(",")]
    compare(configs, parse_workloads(a.workloads), a.store, local, a.rounds, a.duration)


if __name__ == "__main__":
    main()
