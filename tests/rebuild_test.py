#!/usr/bin/python3
"""End-to-end test of base-shard rebuilds (docs/writes.md, "Rebuilding a base shard") on a real
local cluster: `zipg local start --servers 2 --replicas 2 --rebuild-delta 0` (etcd, 2 shard
servers each holding all 4 shards, a LogStore, 2 aggregators; rebuilds only when asked). Every
answer is compared with the plain-Python model of the contract with writes
(write_model.WriteModel).

A. Two rounds of random writes, a compaction and more writes (so the written data lies in a log
   shard and in the memtable), then `zipg admin rebuild`, while 2 clients add and delete edges of
   their own nodes and read their counts back (every outcome checked against each client's own
   state). After each rebuild both replicas report the next version of each shard, through the
   same update id: shard-0 (the first by name) built it, shard-1 adopted its files and caught up
   from the feed; each delta holds only the nodes written since (the loaders' at most); every
   read equals the model through the aggregators and asked of each replica directly.
B. kill -9 of one shard server, writes meanwhile, its restart: it reopens its rebuilt versions,
   catches up from the LogStore's feed and answers like the model; no version files but the
   current ones are left.
C. shard-0 restarted with `--rebuild-delta 1K`: writes make it rebuild on its own, and shard-1
   adopts each of its versions on its own.
D. `zipg admin rebuild --shards 9` names no hosted shard: an error; `zipg local stop` leaves no
   process.

Usage: rebuild_test.py PATH/TO/zipg        (exit status 0 if everything passed)"""
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
from write_model import random_write, raw_status, short  # noqa: E402

SEED = 20261127
rnd = random.Random(SEED)
T = cluster_procs.TestSetup("rebuild_test", __doc__)
check, section, note = T.check, T.section, T.note
TMP, ZIPG, STORE, procs, report = T.tmp, T.zipg, T.store, T.procs, T.report
SHARDS = 4
LOADERS = 2
LOAD_TYPE = 9  # the loaders' edges: (9_000_000 + k, 9, dst), a type random_write never uses
SERVERS = ["shard-0", "shard-1"]


def main():
    section("setup: compress (4 shards), local start --servers 2 --replicas 2 --rebuild-delta 0")
    made = write_model.compressed_input(ZIPG, TMP, STORE, rnd, SHARDS, check)
    if made is None:
        return
    inp, nodes_csv, edges_csv, model = made
    r, state = procs.local_start(check, "--servers", "2", "--replicas", "2", "--lease-ttl", "2",
                                 "--memtable-mb", "0", "--no-verify", "--rebuild-delta", "0")
    if state is None:
        return
    aggs = state["aggregators"]
    view = write_model.ClusterView(aggs[0], check)
    members = view.members

    def Session(endpoint, label, seed=0):
        return write_model.Session(ZIPG, TMP, procs.sessions, endpoint, label, seed)

    sess = [Session(aggs[0], "agg0", SEED + 1), Session(aggs[1], "agg1", SEED + 2)]
    cc = write_model.ClusterCheck(model, sess, Session, members, SHARDS, check, note)
    universe = sorted(set(inp.ids) | {7_000_001 + k for k in range(20)})
    hot = inp.node_ids[:8]
    w = random.Random(SEED + 3)

    def rebuilds(name):
        """The server's rebuild status by shard (its own status document)."""
        m = members().get(name)
        return (raw_status(m["endpoint"]) or {}).get("rebuilds", {}) if m else {}

    def admin(*args):
        r = subprocess.run([ZIPG, "admin", *args], capture_output=True, text=True, timeout=600)
        try:
            return r.returncode, json.loads(r.stdout), r.stderr
        except ValueError:
            return r.returncode, None, r.stdout + r.stderr

    def rebuild_all(label):
        """zipg admin rebuild of every shard while the loaders run; checks each replica's new
        version against its rebuild status just before."""
        before = {name: rebuilds(name) for name in SERVERS}
        t0 = time.monotonic()
        rc, summary, err = admin("rebuild", "--connect", aggs[0])
        took = time.monotonic() - t0
        check(rc == 0 and isinstance(summary, dict) and sorted(summary) == SERVERS,
              f"{label}: admin rebuild: rc {rc} {short(summary)} {err[-300:]!r}")
        after = {name: rebuilds(name) for name in SERVERS}
        for s in range(SHARDS):
            for name in SERVERS:
                b, a = before[name].get(str(s), {}), after[name].get(str(s), {})
                got = (summary or {}).get(name, {}).get(str(s), {})
                check(a.get("version") == b.get("version", 0) + 1 and
                      got.get("version") == a.get("version") and
                      a.get("through") == after["shard-0"].get(str(s), {}).get("through") and
                      a.get("through", 0) >= b.get("through", 0) and
                      a.get("rebuilds") == b.get("rebuilds", 0) + 1 and
                      b.get("written_nodes", 0) > LOADERS and
                      a.get("written_nodes", 1 << 60) <= LOADERS and
                      bool(got.get("adopted")) == (name == "shard-1") and
                      (name == "shard-0" or (got.get("from") == "shard-0" and
                                             got.get("fetched_bytes", 0) > 0)),
                      f"{label}: {name} shard {s}: before {short(b, 300)} after {short(a, 300)} "
                      f"summary {short(got, 300)}")
        # Registered in etcd: the cluster's view follows within moments.
        want = {str(s): after["shard-0"].get(str(s), {}).get("version") for s in range(SHARDS)}
        deadline = time.monotonic() + 10
        while True:
            registered = {n: m.get("versions") for n, m in members().items() if n in SERVERS}
            done = len(registered) == 2 and all(v == want for v in registered.values())
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        check(done, f"{label}: the registered versions: {registered}, want {want}")
        note(f"{label}: shard-1/0 adopted: {short((summary or {}).get('shard-1', {}).get('0'), 400)}")
        s0 = (summary or {}).get("shard-0", {}).get("0", {})
        note(f"{label}: admin rebuild of 4 shards on 2 servers took {took:.1f} s; shard-0/0: "
             f"{short(s0, 400)}")

    # The loaders: each adds and deletes edges of its own node and checks its count.
    loaders = write_model.EdgeLoaders(LOADERS, aggs, Session, SEED, check, LOAD_TYPE)

    # ---- A ------------------------------------------------------------------------------------
    section("A. two rounds of writes, a compaction and a rebuild, with 2 loaders running")
    for name in SERVERS:
        status = rebuilds(name)
        check(all(status.get(str(s), {}).get("version") == 0 for s in range(SHARDS)),
              f"A: {name} starts at version 0: {short(status)}")
    loaders.start()
    for rnd_no in (1, 2):
        for k in range(200):
            cc.write(random_write(model, w, hot, universe), k)
        rc, summary, err = admin("compact", "--connect", aggs[0])
        check(rc == 0, f"A{rnd_no}: admin compact: {short(summary)} {err[-300:]!r}")
        for k in range(100):
            cc.write(random_write(model, w, hot, universe), k)
        rebuild_all(f"A{rnd_no}")
        for k in range(50):  # written after the rebuild: in the new delta
            cc.write(random_write(model, w, hot, universe), k)
    stats, took = loaders.stop(model)
    check(stats["wrong"] == 0, f"A: {stats['wrong']} wrong loader answers")
    note(f"A: the loaders made {stats['writes']} writes (each with a count read) in "
         f"{took:.1f} s, {stats['wrong']} wrong")
    cc.full_comparison("A")
    cc.compare_replicas("A", SERVERS)

    # ---- B ------------------------------------------------------------------------------------
    section("B. kill -9 of a rebuilt shard server, writes meanwhile, its restart")
    victim = members()["shard-1"]
    victim_argv = cluster_procs.cmdline(victim["pid"])
    os.kill(victim["pid"], signal.SIGKILL)
    for k in range(150):
        cc.write(random_write(model, w, hot, universe), k)
    procs.start_server(victim_argv, os.path.join(STORE, "run", "shard-1.log"))
    time.sleep(0.5)
    cc.wait_serving(SERVERS, 60)
    back = rebuilds("shard-1")
    check(all(back.get(str(s), {}).get("version") == 2 for s in range(SHARDS)),
          f"B: shard-1 reopened its version 2 of every shard: {short(back)}")
    cc.full_comparison("B")
    cc.compare_replicas("B", SERVERS)
    updates = os.path.join(STORE, "updates", "server-1")
    left = sorted(f for f in os.listdir(updates) if f.startswith("shard-"))
    want = sorted([f"shard-{s}.v2" for s in range(SHARDS)] +
                  [f"shard-{s}.v2.delta" for s in range(SHARDS)] +
                  [f"shard-{s}.version" for s in range(SHARDS)])
    check(left == want, f"B: files of shard-1's shards: {left}")

    # ---- C ------------------------------------------------------------------------------------
    section("C. --rebuild-delta 1K on shard-0: it rebuilds on its own, shard-1 adopts on its own")
    victim = members()["shard-0"]
    argv = cluster_procs.cmdline(victim["pid"])
    procs.kill_and_wait([victim["pid"]])
    at = argv.index("--rebuild-delta")
    argv[at + 1] = "1K"
    procs.start_server(argv, os.path.join(STORE, "run", "shard-0.log"))
    time.sleep(0.5)
    cc.wait_serving(SERVERS, 60)
    for k in range(300):
        cc.write(random_write(model, w, hot, universe), k)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        auto = {name: rebuilds(name) for name in SERVERS}
        if all(auto[n].get(str(s), {}).get("version", 0) >= 3 for n in SERVERS
               for s in range(SHARDS)):
            break
        time.sleep(0.2)
    for s in range(SHARDS):
        built, adopted = auto["shard-0"].get(str(s), {}), auto["shard-1"].get(str(s), {})
        check(built.get("version", 0) >= 3 and adopted.get("version", 0) >= 3 and
              not (built.get("last_rebuild") or {}).get("adopted") and
              (adopted.get("last_rebuild") or {}).get("adopted") is True,
              f"C: shard {s}: shard-0 {short(built, 300)}; shard-1 {short(adopted, 300)}")
    note(f"C: shard 0 at versions {auto['shard-0'].get('0', {}).get('version')} (built) and "
         f"{auto['shard-1'].get('0', {}).get('version')} (adopted)")
    time.sleep(1.5)  # a rebuild swapping right now would make the replicas answer alike anyway
    cc.full_comparison("C")
    cc.compare_replicas("C", SERVERS)

    # ---- D ------------------------------------------------------------------------------------
    section("D. errors, zipg local stop")
    rc, summary, err = admin("rebuild", "--connect", aggs[0], "--shards", "9")
    check(rc != 0 and "no shard server" in err, f"D: --shards 9: rc {rc} {err[-300:]!r}")
    rc, summary, err = admin("rebuild", "--connect", aggs[0], "--shards", "x")
    check(rc != 0 and "--shards" in err, f"D: --shards x: rc {rc} {err[-300:]!r}")
    procs.local_stop(check, STORE, ZIPG)


if __name__ == "__main__":
    cluster_procs.run_test("rebuild_test", main, report, procs.cleanup)
