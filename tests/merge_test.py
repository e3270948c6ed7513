#!/usr/bin/python3
"""End-to-end test of log shard merges (docs/logstore-ha.md, "Merges") on a real local cluster:
`zipg local start --logstores 2 --merge-width 2 --merge-ratio 100 --max-log-shards 3
--edge-cache 4M` (etcd, 2
shard servers for 4 shards, two LogStores that elect their leader, 2 aggregators), so that every compaction is
followed by a merge on each LogStore. Every answer is compared with the plain-Python model of the
contract with writes (write_model.WriteModel).

A. Six rounds of random writes, a compaction and a wait for the merges, while 2 clients add and
   delete edges of their own nodes and read their counts back (a closed loop through the
   compactions and merges; every outcome checked against each client's own state). After each
   round, both LogStores hold one log shard covering every generation compacted so far, and
   every read equals the model. The merges' counts and sizes are reported.
B. kill -9 of the leader: the standby takes over with the log shards it merged itself; every
   read equals the model; more writes, a compaction and a merge on the new leader; the old
   leader restarted rejoins and is in sync; every read equals the model.
C. `zipg local stop` leaves no process.

Usage: merge_test.py PATH/TO/zipg        (exit status 0 if everything passed)"""
import json
import os
import random
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_procs  # noqa: E402
import write_model  # noqa: E402
from write_model import random_write, short  # noqa: E402

SEED = 20261126
rnd = random.Random(SEED)
T = cluster_procs.TestSetup("merge_test", __doc__)
check, section, note = T.check, T.section, T.note
TMP, ZIPG, STORE, procs, report = T.tmp, T.zipg, T.store, T.procs, T.report
SHARDS = 4
LOADERS = 2
LOAD_TYPE = 9  # the loaders' edges: (9_000_000 + k, 9, dst), a type random_write never uses


def main():
    section("setup: compress (4 shards), local start --logstores 2 --merge-width 2")
    made = write_model.compressed_input(ZIPG, TMP, STORE, rnd, SHARDS, check)
    if made is None:
        return
    inp, nodes_csv, edges_csv, model = made
    r, state = procs.local_start(check, "--logstores", "2", "--servers", "2", "--lease-ttl", "2",
                                 "--memtable-mb", "0", "--no-verify", "--merge-width", "2",
                                 "--merge-ratio", "100", "--max-log-shards", "3",
                                 "--edge-cache", "4M")
    if state is None:
        return
    # A cap that leaves no room for a run is refused before the server starts.
    bad = subprocess.run([ZIPG, "serve", "logstore", "--store", STORE, "--merge-width", "4",
                          "--max-log-shards", "4"], capture_output=True, text=True, timeout=30)
    check(bad.returncode != 0 and "--max-log-shards" in bad.stderr,
          f"serve logstore --merge-width 4 --max-log-shards 4: rc {bad.returncode}, {bad.stderr!r}")
    aggs = state["aggregators"]

    view = write_model.ClusterView(aggs[0], check)
    members, logstores, leader_name = view.members, view.logstores, view.leader_name
    wait_in_sync, logstore_status = view.wait_in_sync, view.logstore_status

    def Session(endpoint, label, seed=0):
        return write_model.Session(ZIPG, TMP, procs.sessions, endpoint, label, seed)

    sess = [Session(aggs[0], "agg0", SEED + 1), Session(aggs[1], "agg1", SEED + 2)]
    cc = write_model.ClusterCheck(model, sess, Session, members, SHARDS, check, note)
    universe = sorted(set(inp.ids) | {7_000_001 + k for k in range(20)})
    hot = inp.node_ids[:8]
    w = random.Random(SEED + 3)

    compacted = []  # generations compacted into a log shard so far

    def compact_and_merge(label, names):
        """A compaction, then the wait until each of `names` holds one log shard covering every
        generation compacted so far (the merges are done)."""
        r = subprocess.run([ZIPG, "admin", "compact", "--connect", aggs[0]], capture_output=True,
                           timeout=300)
        try:
            summary = json.loads(r.stdout)
        except ValueError:
            summary = {}
        check(r.returncode == 0 and summary.get("compacted") is True,
              f"{label}: admin compact: {r.stdout[-300:]!r} {r.stderr[-300:]!r}")
        if summary.get("generation"):
            compacted.append(summary["generation"])
        deadline = time.monotonic() + 60
        while True:
            st = {n: logstore_status(n) for n in names}
            done = all(len(s.get("log_shards", [])) == 1 and s.get("frozen") is None and
                       s["log_shards"][0].get("first_generation", s["log_shards"][0]["generation"])
                       <= min(compacted) and
                       s["log_shards"][0]["generation"] >= max(compacted) for s in st.values())
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        check(done, f"{label}: one merged log shard covering {compacted} on each of {names}: "
                    f"{ {n: short(s.get('log_shards'), 300) for n, s in st.items()} }")
        for n, s in st.items():
            check("last_error" not in s, f"{label}: {n}: {s.get('last_error')}")
        return st

    # The loaders: each adds and deletes edges of its own node and checks its count.
    loaders = write_model.EdgeLoaders(LOADERS, aggs, Session, SEED, check, LOAD_TYPE)

    # ---- A ------------------------------------------------------------------------------------
    section("A. six rounds of writes, compaction and merges, with 2 loaders running throughout")
    check(wait_in_sync("logstore"), "A: in sync")
    loaders.start()
    for rnd_no in range(1, 7):
        for k in range(150):
            cc.write(random_write(model, w, hot, universe), k)
        st = compact_and_merge(f"A{rnd_no}", ["logstore", "logstore-standby"])
        lead = st["logstore"]
        note(f"A{rnd_no}: leader log shards {short(lead.get('log_shards'), 200)}, "
             f"{lead.get('merges')} merges, last {short(lead.get('last_merge'), 300)}")
    stats, took = loaders.stop(model)
    check(stats["wrong"] == 0, f"A: {stats['wrong']} wrong loader answers")
    note(f"A: the loaders made {stats['writes']} writes and {stats['reads']} reads in "
         f"{took:.1f} s, {stats['wrong']} wrong")
    lead, stand = logstore_status("logstore"), logstore_status("logstore-standby")
    check(lead.get("merges", 0) >= 5 and stand.get("merges", 0) >= 5,
          f"A: merges: leader {lead.get('merges')}, standby {stand.get('merges')}")
    for name, s in (("leader", lead), ("standby", stand)):
        check(s.get("max_log_shards") == 3 and len(s.get("log_shards", [])) <= 3,
              f"A: the {name}'s cap: max_log_shards {s.get('max_log_shards')}, "
              f"{len(s.get('log_shards', []))} log shards")
    note(f"A: merges: leader {lead.get('merges')} (deletes moved during builds: "
         f"{lead.get('merge_deletes_moved')}), standby {stand.get('merges')} "
         f"({stand.get('merge_deletes_moved')})")
    cc.full_comparison("A")
    # Again: now through the LogStore's edge cache, filled by the reads above.
    cc.full_comparison("A, again")
    cache = logstore_status("logstore").get("edge_cache") or {}
    check(cache.get("capacity") == 4 << 20 and cache.get("hits", 0) > 0 and
          cache.get("misses", 0) > 0 and cache.get("bytes", 1 << 30) <= 4 << 20,
          f"A: the leader's edge cache: {cache}")
    note(f"A: the leader's edge cache: {cache}")

    # ---- B ------------------------------------------------------------------------------------
    section("B. kill -9 of the leader: the standby leads with its own merged shards")
    victim = logstores()["logstore"]
    victim_argv = cluster_procs.cmdline(victim["pid"])
    os.kill(victim["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and leader_name() != "logstore-standby":
        time.sleep(0.1)
    check(leader_name() == "logstore-standby", f"B: the leader is now {leader_name()}")
    cc.full_comparison("B, after the takeover")
    for k in range(150):
        cc.write(random_write(model, w, hot, universe), k)
    compact_and_merge("B", ["logstore-standby"])
    procs.start_server(victim_argv, os.path.join(STORE, "run", "logstore.log"))
    check(wait_in_sync("logstore-standby"), "B: the old leader is back in sync")
    for k in range(100):
        cc.write(random_write(model, w, hot, universe), k)
    cc.full_comparison("B, after the old leader's return")
    back = logstore_status("logstore")
    note(f"B: the old leader rejoined with log shards {short(back.get('log_shards'), 200)}")

    # ---- C ------------------------------------------------------------------------------------
    section("C. zipg local stop")
    procs.local_stop(check, STORE, ZIPG)


if __name__ == "__main__":
    cluster_procs.run_test("merge_test", main, report, procs.cleanup)
