#!/usr/bin/python3
"""End-to-end test of the standby LogStore (docs/logstore-ha.md, step 1: log shipping) on a real
local cluster: `zipg local start --logstores 2` (etcd, 2 shard servers for 4 shards, the LogStore
and its standby, 2 aggregators). Every answer is compared with the plain-Python model of the
contract with writes (write_model.WriteModel).

A. status lists both LogStores (role logstore; leader true / false; the leader in sync) and names
   the leader as the cluster's LogStore. Random writes through both aggregators, then a
   compaction: every read equals the model, and the standby holds what the leader holds (the
   same generation, log shards, write count, memtable and feed sizes).
B. kill -9 of the standby during a closed-loop write load of 8 clients: 0 failed writes, the
   leader says "degraded" (in etcd and in its status); every acknowledged write is readable.
   Restarted with its own command line, the standby catches up from the leader's log: the
   leader says "in_sync" again, and after more writes both hold the same memtable.
C. `zipg local stop` leaves no process.

Usage: standby_test.py PATH/TO/zipg        (exit status 0 if everything passed)"""
import os
import random
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_procs  # noqa: E402
import write_model  # noqa: E402
from write_model import acceptable, random_write, raw_status, short  # noqa: E402

SEED = 20261127
rnd = random.Random(SEED)
T = cluster_procs.TestSetup("standby_test", __doc__)
check, section, note = T.check, T.section, T.note
TMP, ZIPG, STORE, procs, report = T.tmp, T.zipg, T.store, T.procs, T.report
SHARDS = 4


def zipg(*args, timeout=120):
    return subprocess.run([ZIPG, *args], capture_output=True, timeout=timeout)


def main():
    section("setup: compress (4 shards), local start --logstores 2")
    made = write_model.compressed_input(ZIPG, TMP, STORE, rnd, SHARDS, check)
    if made is None:
        return
    inp, nodes_csv, edges_csv, model = made
    r, state = procs.local_start(check, "--logstores", "2", "--servers", "2", "--lease-ttl", "2",
                                 "--memtable-mb", "0", "--no-verify")
    if state is None:
        return
    aggs = state["aggregators"]

    def cluster_status():
        return raw_status(aggs[0]) or {}

    def members():
        return {m["name"]: m for m in cluster_status().get("servers", [])}

    # ---- A ------------------------------------------------------------------------------------
    section("A. both LogStores registered; writes; the standby holds what the leader holds")
    st = cluster_status()
    logstores = {m["name"]: m for m in st.get("servers", []) if m["role"] == "logstore"}
    check(sorted(logstores) == ["logstore", "logstore-standby"], f"LogStores: {sorted(logstores)}")
    check(logstores.get("logstore", {}).get("leader") is True and
          logstores.get("logstore-standby", {}).get("leader") is False,
          f"leader flags: {logstores}")
    check(logstores.get("logstore", {}).get("sync") == "in_sync", f"sync: {logstores}")
    check(st.get("logstore") == "logstore" and st.get("healthy"), f"status: {short(st, 300)}")

    def Session(endpoint, label, seed=0):
        return write_model.Session(ZIPG, TMP, procs.sessions, endpoint, label, seed)

    sess = [Session(aggs[0], "agg0", SEED + 1), Session(aggs[1], "agg1", SEED + 2)]
    cc = write_model.ClusterCheck(model, sess, Session, members, SHARDS, check, note)
    universe = sorted(set(inp.ids) | {7_000_001 + k for k in range(20)})
    hot = inp.node_ids[:8]
    w = random.Random(SEED + 3)
    for k in range(400):
        cc.write(random_write(model, w, hot, universe), k)
    r = zipg("admin", "compact", "--connect", aggs[0], timeout=300)
    check(r.returncode == 0, f"admin compact: {r.stdout[-300:]!r} {r.stderr[-300:]!r}")
    for k in range(200):
        cc.write(random_write(model, w, hot, universe), k)
    cc.full_comparison("A")

    def logstore_status(name):
        m = members().get(name)
        return (raw_status(m["endpoint"]) or {}).get("logstore", {}) if m else {}

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        leader, standby = logstore_status("logstore"), logstore_status("logstore-standby")
        if leader.get("log_shards") and standby.get("log_shards") and \
                standby.get("writes") == leader.get("writes"):
            break
        time.sleep(0.2)
    for field in ("generation", "writes", "memtable", "feed_bytes"):
        check(leader.get(field) == standby.get(field),
              f"A: {field}: leader {leader.get(field)}, standby {standby.get(field)}")
    check([s["generation"] for s in leader.get("log_shards", [])] ==
          [s["generation"] for s in standby.get("log_shards", [])] and leader.get("log_shards"),
          f"A: log shards: leader {leader.get('log_shards')}, standby {standby.get('log_shards')}")
    check(leader.get("standby", {}).get("shipped_groups") ==
          standby.get("standby", {}).get("applied_groups"),
          f"A: shipped {leader.get('standby')} applied {standby.get('standby')}")
    note(f"A: leader and standby at generation {leader.get('generation')}, "
         f"{leader.get('writes')} writes, log shards "
         f"{[s['generation'] for s in leader.get('log_shards', [])]}, "
         f"{leader.get('standby', {}).get('shipped_groups')} groups shipped")

    # ---- B ------------------------------------------------------------------------------------
    section("B. kill -9 of the standby during a closed-loop write load")
    stop = threading.Event()
    lock = threading.Lock()
    stats = {"writes": 0, "failed": 0, "slowest": 0.0}
    written = []

    def writer(k):
        s = Session(aggs[k % 2], f"writer-{k}", SEED + 10 + k)
        n = 0
        while not stop.is_set():
            n += 1
            q = {"op": "assoc_add", "src": 8_000_000 + k, "type": 3, "dst": 8_100_000 + n,
                 "timestamp": n, "properties": {"n": str(n)}}
            t0 = time.monotonic()
            got = s.call(q)
            dt = time.monotonic() - t0
            with lock:
                stats["writes"] += 1
                stats["slowest"] = max(stats["slowest"], dt)
                if acceptable(got, {"ok": {"replaced": False}}):
                    written.append(q)
                else:
                    stats["failed"] += 1
                    check(False, f"B: write during the kill: {short(q)} -> {short(got)}")
        s.close()

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    time.sleep(1.0)
    standby_pid = members()["logstore-standby"]["pid"]
    standby_argv = cluster_procs.cmdline(standby_pid)
    os.kill(standby_pid, signal.SIGKILL)
    time.sleep(4.0)
    stop.set()
    for th in threads:
        th.join()
    check(stats["failed"] == 0, f"B: {stats['failed']} failed writes")
    note(f"B: {stats['writes']} writes by 8 clients around the kill of the standby, "
         f"{stats['failed']} failed, slowest {stats['slowest'] * 1000:.0f} ms")
    st = members()
    check(st.get("logstore", {}).get("sync") == "degraded", f"B: etcd says {st.get('logstore')}")
    leader = logstore_status("logstore")
    check(leader.get("standby", {}).get("sync") == "degraded" and
          leader["standby"].get("reason"), f"B: leader status {leader.get('standby')}")
    note(f"B: the leader goes on alone: {short(leader.get('standby', {}), 200)}")
    for q in written:
        model.write(q)
    cc.full_comparison("B, after the standby's loss")
    reqs = [{"op": "assoc_count", "id": 8_000_000 + k, "type": 3} for k in range(8)]
    cc.compare(sess[0], reqs, "B: counts of the load's nodes")

    section("B2. the standby restarted: it catches up from the leader's log and is in sync again")
    procs.start_server(standby_argv, os.path.join(STORE, "run", "logstore-standby.log"))
    t = time.monotonic()
    deadline = t + 30
    while time.monotonic() < deadline and members().get("logstore", {}).get("sync") != "in_sync":
        time.sleep(0.1)
    check(members().get("logstore", {}).get("sync") == "in_sync",
          f"B2: in sync again: {members().get('logstore')}")
    note(f"B2: in sync {time.monotonic() - t:.1f} s after the standby's restart")
    for k in range(200):
        cc.write(random_write(model, w, hot, universe), k)
    leader, standby = logstore_status("logstore"), logstore_status("logstore-standby")
    # Caught up twice: when the leader first attached it, and after its restart.
    check(leader.get("standby", {}).get("caught_up") == 2, f"B2: {leader.get('standby')}")
    # (Not the feeds' sizes: the same updates, framed in other batches after the restart.)
    for field in ("generation", "memtable"):
        check(leader.get(field) == standby.get(field),
              f"B2: {field}: leader {leader.get(field)}, standby {standby.get(field)}")
    note(f"B2: leader and standby memtables {leader.get('memtable')} / {standby.get('memtable')}")
    cc.full_comparison("B2")

    # ---- C ------------------------------------------------------------------------------------
    section("C. zipg local stop")
    procs.local_stop(check, STORE, ZIPG)

if __name__ == "__main__":
    cluster_procs.run_test("standby_test", main, report, procs.cleanup)
