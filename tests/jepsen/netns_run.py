#!/usr/bin/python3
"""Jepsen histories on the multi-host rig (netns_rig.py): one cluster deployed on network
namespaces with TLS, 2 LogStores and 3 etcd members; one history per nemesis, recorded with
jepsen.py's workload and checked with zipg-check.

    netns_run.py --zipg BIN --nemeses partition-one,partition-halves,... --seconds S
                 [--route blackhole|prohibit|unreachable] [--keep DIR] [--seed N]
                 [--workers N] [--profile P] [--check-bin PATH]

Nemeses: partition-one, partition-halves, partition-bridge, etcd-member-loss (netns_rig.py) and
jepsen.py's pause-replica, kill-replica, kill-logstore, pause-logstore, kill-aggregator, none.

Prints, per history: operations, ok / fail / info, the nemesis's actions, the verdict. Exit status
0 iff every history is linearizable, every nemesis (but none) acted, every history has at least
jepsen.MIN_OK ok operations, every fault was undone and the cluster whole again. Histories, their
visualizations and the servers' logs are kept (in --keep, else a temporary directory named at the
end) when anything failed. Where network namespaces cannot be made the run fails and says why.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import jepsen  # noqa: E402
import netns_rig  # noqa: E402
from cluster_procs import Report  # noqa: E402


def key_lines(history, key):
    lines = []
    with open(history) as f:
        for line in f:
            r = json.loads(line)
            if r.get("key") == key:
                lines.append(r)
    return lines


def check_lines(check_bin, lines, path, timeout):
    """zipg-check's exit code for `lines` (written to path, then removed): 0, 1, 3."""
    with open(path, "w") as f:
        for r in lines:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    try:
        return subprocess.run([check_bin, "--timeout", f"{timeout:g}s", path], capture_output=True,
                              timeout=timeout + 60).returncode
    finally:
        os.remove(path)


def recheck_keys(check_bin, history, keys, timeout=10.0):
    """{key: "violation" | "unfinished" | "linearizable"}: each key checked alone. When the
    whole history's check times out after finding a violation, bad_keys also names the keys whose
    check had not finished (README.md); this tells them apart."""
    out = {}
    for key in keys:
        code = check_lines(check_bin, key_lines(history, key), history + ".key.jsonl", timeout)
        out[key] = {0: "linearizable", 1: "violation"}.get(code, "unfinished")
    return out


def bad_key_story(check_bin, history, key, tail=30, budget=30.0):
    """The operations on `key` that show a violation: the shortest prefix of the key's lines (in
    the order they were recorded) that zipg-check finds not linearizable (searched for at most
    `budget` seconds), its last `tail` lines, one each, times in ms from the history's first
    operation and long values cut."""
    lines = key_lines(history, key)
    with open(history) as f:
        t0 = next((r["time"] for r in map(json.loads, f) if "time" in r), 0)
    deadline = time.monotonic() + budget
    lo, hi = 1, len(lines)
    while lo < hi and time.monotonic() < deadline:
        mid = (lo + hi) // 2
        left = max(1.0, min(10.0, deadline - time.monotonic()))
        if check_lines(check_bin, lines[:mid], history + ".prefix.jsonl", left) == 1:
            hi = mid
        else:  # linearizable, or not decided in time
            lo = mid + 1

    def short(v):
        if isinstance(v, str) and len(v) > 16:
            return v[:13] + "..."
        if isinstance(v, list):
            return [short(x) for x in v]
        if isinstance(v, dict):
            return {k: short(x) for k, x in v.items()}
        return v

    out = [f"  a violating prefix: {hi} of the key's {len(lines)} lines"
           f"{'' if lo >= hi else ' (search not finished)'}; its last {tail}:"]
    if lines and lines[0]["type"] == "init":
        out.append(f"  init {json.dumps(short(lines[0]['state']))}")
    for r in lines[max(1, hi - tail):hi]:
        body = r.get("args") if r["type"] == "invoke" else r.get("result")
        out.append(f"  {(r['time'] - t0) / 1e9:8.3f}s p{r['process']:<4} {r['type']:6s} "
                   f"{r['f']:12s} {json.dumps(short(body))}")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zipg", required=True, help="the zipg binary")
    ap.add_argument("--nemeses", required=True,
                    help="comma-separated, one history each, in order, on one cluster: " +
                         ", ".join(netns_rig.ALL_NEMESES))
    ap.add_argument("--seconds", type=float, default=15.0, help="length of each history")
    ap.add_argument("--route", default="blackhole", choices=netns_rig.ROUTE_TYPES,
                    help="the route type that cuts a host pair")
    ap.add_argument("--keep", help="write the histories, their HTML and the servers' logs here "
                                   "(kept); else a temporary directory, kept only on failure")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--profile", default="default", choices=sorted(jepsen.PROFILES))
    ap.add_argument("--stable-edge-ts", action="store_true",
                    help="jepsen.py's diagnostic: each dst of an edge record is always written "
                         "with one timestamp (no assoc_add moves a live edge)")
    ap.add_argument("--check-bin", help="a zipg-check already built (default: go build it)")
    a = ap.parse_args(argv)
    names = [n.strip() for n in a.nemeses.split(",") if n.strip()]
    for n in names:
        if n not in jepsen.NEMESIS_CLASSES:
            ap.error(f"unknown nemesis {n!r} (one of {', '.join(netns_rig.ALL_NEMESES)})")
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    report = Report(max_printed=60)
    out_dir = a.keep or tempfile.mkdtemp(prefix="zipg-jepsen-netns-")
    os.makedirs(out_dir, exist_ok=True)
    # Until the cluster's Procs installs its own: a SIGTERM / SIGHUP still runs the cleanups.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: sys.exit(f"netns_run: signal {s}"))
    results, env, rig = [], None, None
    exits_seen = 0
    try:
        env = jepsen.Env(a.zipg, report, a.check_bin)
        report.section(f"seed {seed}; nemeses {','.join(names)}; {a.seconds:g} s histories; "
                       f"partitions as {a.route} routes"
                       f"{'; --stable-edge-ts' if a.stable_edge_ts else ''}; results in {out_dir}")
        rig = netns_rig.Rig(env, route_type=a.route)
        try:
            started = rig.start(random.Random(seed))
        except netns_rig.RigError as e:
            report.check(False, f"the multi-host rig cannot run here: {e}")
            started = False
        if started:
            cluster = rig.cluster
            for index, n in enumerate(names):
                if cluster.wait_healthy(60, f"before history {index}") is None or \
                        cluster.etcd_problems():
                    raise RuntimeError(f"the cluster is not whole before history {index}: "
                                       f"{cluster.etcd_problems()}")
                res = jepsen.run_history(env, cluster, n, a.seconds, index, out_dir, a.profile,
                                         seed, a.workers, a.stable_edge_ts)
                results.append(res)
                print(res.summary(), flush=True)
                for line in res.log:
                    report.note(f"nemesis: {line}")
                if res.error_summary:
                    report.note(f"errors: {res.error_summary}")
                for name, expected, tail in cluster.exits[exits_seen:]:
                    said = [x for x in tail.splitlines()[1:] if not x.startswith("Thrift:")]
                    report.note(f"{'' if expected else 'UNEXPECTED '}exit of {name} (restarted); "
                                "its log ends:\n      " + "\n      ".join(said[-6:]))
                exits_seen = len(cluster.exits)
                if res.verdict == 1:
                    bad = res.check.get("bad_keys") or []
                    kinds = recheck_keys(env.check_bin, res.history, bad[:6])
                    report.note(f"NOT linearizable: history {res.history}, visualization "
                                f"{res.html}; keys checked alone: "
                                + ", ".join(f"{k} {v}" for k, v in kinds.items())
                                + (f" (and {len(bad) - 6} more)" if len(bad) > 6 else ""))
                    shown = [k for k, v in kinds.items() if v == "violation"]
                    shown.sort(key=lambda k: not k.startswith("node:"))
                    for key in shown[:1]:
                        report.note(f"operations on {key}:\n" +
                                    bad_key_story(env.check_bin, res.history, key))
            rig.save_logs(out_dir)
            cluster.stop()
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        report.check(False, f"run aborted: {e!r}")
    finally:
        if rig is not None:
            try:
                rig.save_logs(out_dir)
            except OSError:
                pass
            rig.cleanup()
        if env is not None:
            env.cleanup()
    jepsen.report_totals(report, results)
    if report.failures or not results:
        report.check(bool(results), "no history was recorded")
        print(f"results kept in {out_dir}")
    elif not a.keep:
        shutil.rmtree(out_dir, ignore_errors=True)
    return report.finish("jepsen netns")


if __name__ == "__main__":
    sys.exit(main())
