#!/usr/bin/python3
"""Jepsen-style linearizability test on real local clusters (tests/jepsen/jepsen.py, checked by
tests/jepsen/checker, zipg-check; tests/jepsen/README.md).

A. One cluster (`zipg local start --servers 2 --replicas 2 --aggregators 2 --lease-ttl 2
   --logstores 2`, reads linearizable, the default): four histories of 10 s, 8 clients on 6 node
   keys and 4 edge records (half reads), each with its own keys, under the nemeses none,
   pause-replica, kill-replica and kill-logstore. Each nemesis must act, each history must have
   enough ok operations, every fault must be undone (the killed members back, serving / in
   sync), and every history must be linearizable.
B. The negative control: a second cluster with `--read-consistency replica` (a shard replica
   answers reads with whatever it has applied, before the write is committed everywhere) under
   pause-replica, 10 clients on 2 node keys and 1 edge record, 3 reads in 4. zipg-check must find
   a violation (exit 1) in one of at most 3 histories of 10 s: otherwise the workload or the
   checker cannot see the anomalies A claims to be absent.

Needs Go (the checker is built with `go build`): without it the test fails, it does not skip.
The histories, their checks and porcupine's HTML are kept (path printed) when something failed.

Usage: jepsen_test.py PATH/TO/zipg        (exit status 0 if everything passed)"""
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "jepsen"))
from cluster_procs import Report  # noqa: E402
import jepsen  # noqa: E402

SEED = 20261127
SECONDS = 10
NEMESES = ["none", "pause-replica", "kill-replica", "kill-logstore"]
CONTROL_ATTEMPTS = 3


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    report = Report(max_printed=60)
    check, section, note = report.check, report.section, report.note
    out = tempfile.mkdtemp(prefix="zipg-jepsen-test-")
    env = None
    clusters = []
    try:
        section("setup: the checker (go build), the Python client, a graph of 2000 nodes")
        env = jepsen.Env(sys.argv[1], report)

        section(f"A. --logstores 2, linearizable reads: {', '.join(NEMESES)} ({SECONDS} s each)")
        a = jepsen.Cluster(env, "linearizable", logstores=2, read_consistency="linearizable")
        clusters.append(a)
        if a.create(jepsen.random.Random(SEED)) and a.start():
            for k, nem in enumerate(NEMESES):
                if a.wait_healthy(60, f"A: before history {k}") is None:
                    break
                res = jepsen.run_history(env, a, nem, SECONDS, k, out, "default", SEED)
                print("   " + res.summary(), flush=True)
                if res.error_summary:
                    note(f"errors: {res.error_summary}")
                check(res.linearizable,
                      f"A: history {k} [{nem}] is not linearizable (zipg-check exit "
                      f"{res.verdict}, keys {res.check.get('bad_keys')}): {res.history}, "
                      f"{res.html}")
        a.stop()

        section(f"B. negative control: --read-consistency replica, pause-replica, reads of few "
                f"keys (up to {CONTROL_ATTEMPTS} histories of {SECONDS} s)")
        b = jepsen.Cluster(env, "replica", logstores=2, read_consistency="replica")
        clusters.append(b)
        found = None
        if b.create(jepsen.random.Random(SEED + 1)) and b.start():
            for k in range(CONTROL_ATTEMPTS):
                if b.wait_healthy(60, f"B: before history {k}") is None:
                    break
                res = jepsen.run_history(env, b, "pause-replica", SECONDS, 100 + k, out,
                                         "stale-reads", SEED)
                print("   " + res.summary(), flush=True)
                if res.verdict == 1:
                    found = k + 1
                    note(f"B: the violation was found in attempt {found}: keys "
                         f"{res.check.get('bad_keys')}")
                    break
        check(found is not None,
              f"B: no violation in {CONTROL_ATTEMPTS} histories with replica reads under "
              f"pause-replica: the workload or the checker cannot see stale reads")
        b.stop()
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        check(False, f"test aborted: {e!r}")
    finally:
        for c in clusters:
            c.procs.cleanup()
        if env is not None:
            env.cleanup()
        if os.listdir(out) and (report.failures or os.environ.get("ZIPG_KEEP_TEST_DIR")):
            print(f"histories, checks and visualizations kept in {out}")
        else:
            shutil.rmtree(out, ignore_errors=True)
    return report.finish("jepsen_test")


if __name__ == "__main__":
    sys.exit(main())
