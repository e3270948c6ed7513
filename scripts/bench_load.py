#!/usr/bin/python3
"""Bulk load, side by side in one run (docs/writes.md, "Bulk load"): `zipg compress` of the same
CSVs by this build and, optionally, by an earlier build and by Kuzu's COPY FROM, alternating within
each round so that every configuration sees the same machine state.

For each run: wall seconds, CPU seconds (user + sys of the process and its children, from
wait4), peak resident memory, bytes stored and stored / CSV bytes. Prints the medians, the ratios
of this build to the others, and this build's CPU by phase from its last run.

Kuzu is not part of the product: give --kuzu-python a Python that has it, e.g.
  /usr/bin/python3 -m venv /tmp/kuzu && /tmp/kuzu/bin/pip install kuzu==0.11.3
Kuzu's reader cannot split these CSVs (quoted newlines in values), so it loads with PARALLEL=FALSE.

Usage: bench_load.py --zipg BUILD/client/zipg --nodes N.csv --edges E.csv
       [--before OLD/client/zipg] [--kuzu-python PY] [--rounds 2] [--work DIR]
       [--json FILE] [-- COMPRESS-OPTIONS...]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

KUZU_LOADER = r'''
import csv, sys, kuzu
nodes, edges, db = sys.argv[1:4]
with open(nodes, newline="") as f:
    header = next(csv.reader(f))
d = kuzu.Database(db)
c = kuzu.Connection(d)
c.execute("CREATE NODE TABLE N(id INT64, %s, PRIMARY KEY(id))" %
          ", ".join("`%s` STRING" % h for h in header[1:]))
c.execute("CREATE REL TABLE E(FROM N TO N, type INT64, timestamp INT64, data STRING)")
c.execute("COPY N FROM '%s' (HEADER=true, PARALLEL=FALSE)" % nodes)
c.execute("COPY E FROM '%s' (HEADER=true, PARALLEL=FALSE)" % edges)
'''


def tree_bytes(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def run_one(name, argv, out_path):
    """Runs argv to its end: wall and CPU seconds (user + sys, from wait4: the process and the
    children it waited for), peak RSS, bytes stored at out_path and what it printed."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        p = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if p.returncode != 0:
        sys.exit("%s failed (%d): %s" % (" ".join(argv), p.returncode, stderr[-2000:]))
    return {"config": name, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_bytes": usage.ru_maxrss * 1024, "stored_bytes": tree_bytes(out_path),
            "stdout": stdout}


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--zipg", required=True)
    p.add_argument("--before")
    p.add_argument("--kuzu-python")
    p.add_argument("--nodes", required=True)
    p.add_argument("--edges", required=True)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--work")
    p.add_argument("--json")
    a = p.parse_args(argv)
    raw = os.path.getsize(a.nodes) + os.path.getsize(a.edges)
    work = a.work or tempfile.mkdtemp(prefix="bench-load-")
    os.makedirs(work, exist_ok=True)
    configs = [("after", a.zipg)]
    if a.before:
        configs.append(("before", a.before))
    if a.kuzu_python:
        configs.append(("kuzu", None))
    loader = os.path.join(work, "kuzu_load.py")
    with open(loader, "w") as f:
        f.write(KUZU_LOADER)
    print("bench_load: %s + %s = %d bytes of CSV, %d rounds, compress options %s" %
          (a.nodes, a.edges, raw, a.rounds, extra or "(defaults)"), flush=True)
    runs = []
    for r in range(a.rounds):
        order = configs if r % 2 == 0 else configs[::-1]
        for name, binary in order:
            out = os.path.join(work, name)
            shutil.rmtree(out, ignore_errors=True)
            if os.path.exists(out):
                os.remove(out)
            if name == "kuzu":
                cmd = [a.kuzu_python, loader, os.path.abspath(a.nodes), os.path.abspath(a.edges),
                       out]
            else:
                cmd = [binary, "compress", "--nodes", a.nodes, "--edges", a.edges, "--out", out,
                       *extra]
            subprocess.run(["sync"])
            res = run_one(name, cmd, out)
            res["round"] = r
            runs.append(res)
            print("round %d %-7s %7.1f s wall %7.1f s cpu %12d bytes ratio %.3f peak RSS %.0f MiB"
                  % (r, name, res["wall_s"], res["cpu_s"], res["stored_bytes"],
                     res["stored_bytes"] / raw, res["peak_rss_bytes"] / 2**20), flush=True)
            shutil.rmtree(out, ignore_errors=True)
    med = {}
    print("\n%-8s %10s %10s %14s %8s %12s" % ("config", "wall s", "cpu s", "stored bytes", "ratio",
                                              "peak MiB"))
    for name, _ in configs:
        rs = [x for x in runs if x["config"] == name]
        med[name] = {k: statistics.median(x[k] for x in rs)
                     for k in ("wall_s", "cpu_s", "stored_bytes", "peak_rss_bytes")}
        print("%-8s %10.1f %10.1f %14d %8.3f %12.0f" %
              (name, med[name]["wall_s"], med[name]["cpu_s"], med[name]["stored_bytes"],
               med[name]["stored_bytes"] / raw, med[name]["peak_rss_bytes"] / 2**20))
    for name, _ in configs[1:]:
        print("after / %-6s wall %.3f  cpu %.3f  stored %.3f" %
              (name, med["after"]["wall_s"] / med[name]["wall_s"],
               med["after"]["cpu_s"] / med[name]["cpu_s"],
               med["after"]["stored_bytes"] / med[name]["stored_bytes"]))
    last = [x for x in runs if x["config"] == "after"][-1]["stdout"]
    if "cpu by phase" in last:
        print("\nthis build, " + last[last.index("cpu by phase"):].rstrip())
    if a.json:
        for x in runs:
            x.pop("stdout", None)
        with open(a.json, "w") as f:
            json.dump({"raw_bytes": raw, "runs": runs, "medians": med}, f, indent=1)
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
