#!/usr/bin/python3
"""End-to-end test of shard replicas (docs/replication.md) on a real local cluster: `zipg local
start --replicas 2 --servers 4` (4 shards, each with two copies on two of the four servers,
cluster/placement.h), the LogStore, 2 aggregators, lease TTL 2 s. Every answer is compared with
the plain-Python model of the contract with writes (write_model.WriteModel).

A. placement: every shard has two serving replicas on different servers. Random writes through
   both aggregators, then every replica is asked directly for the nodes of its shards: each copy
   equals the model (updates reach every replica).
B. kill -9 of one replica of every shard (two servers) while 4 clients read in a closed loop
   through the aggregators: 0 failed or wrong reads; the slowest read is reported. Writes while
   they are down (each acknowledged: the LogStore stops waiting for a dead replica when its lease
   expires). One's delta files are cut short (the unsynced tail a machine crash loses). Both
   restarted with their own command lines: they catch up from the LogStore's feed before they
   serve (their status says so), and each then answers exactly as the model.
C. both replicas of shard 0 killed (so every shard they both hold is down): reads of its nodes fail with
   UNAVAILABLE within 1 s (time reported), other shards answer right; writes to shard 0's nodes
   fail with UNAVAILABLE (they are logged: the outcome is unknown to the client, and here they are
   applied once a replica returns). After the restart, every write is visible, through the
   aggregators and on each replica.
D. `zipg local stop` leaves no process.

Usage: replicas_test.py PATH/TO/zipg        (exit status 0 if everything passed)"""
import os
import random
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_procs  # noqa: E402
from graph_model import Model, load_model, requests  # noqa: E402
import write_model  # noqa: E402
from write_model import (acceptable, random_write, raw_status,  # noqa: E402
                         shard_of, short)

SEED = 20261125
rnd = random.Random(SEED)
T = cluster_procs.TestSetup("replicas_test", __doc__)
check, section, note = T.check, T.section, T.note
TMP, ZIPG, STORE, procs, report = T.tmp, T.zipg, T.store, T.procs, T.report
RUN = os.path.join(STORE, "run")
SHARDS = 4


def zipg(*args, timeout=120):
    return subprocess.run([ZIPG, *args], capture_output=True, timeout=timeout)


def Session(endpoint, label, seed=0):
    return write_model.Session(ZIPG, TMP, procs.sessions, endpoint, label, seed)


def start_server(argv, name):
    return procs.start_server(argv, os.path.join(RUN, name + ".log"))


def main():
    section("setup: edge-case input, compress (4 shards), local start --replicas 2 --servers 4")
    made = write_model.compressed_input(ZIPG, TMP, STORE, rnd, SHARDS, check)
    if made is None:
        return
    inp, nodes_csv, edges_csv, model = made
    t = time.monotonic()
    r, state = procs.local_start(check, "--replicas", "2", "--servers", "4", "--aggregators",
                                 "2", "--lease-ttl", "2", "--no-verify", "--write-batches", "1")
    if state is None:
        return
    aggs = state["aggregators"]
    note(f"cluster up in {time.monotonic() - t:.2f} s: {r.stdout.decode().splitlines()[0]}")

    def members():
        st = raw_status(aggs[0]) or {}
        out = {m["name"]: m for m in st.get("servers", [])}
        for m in out.values():
            procs.known_pids.add(m.get("pid", 0))
        return out

    by_name = members()
    servers = sorted(n for n, m in by_name.items() if m["role"] == "shard")
    holders = {s: sorted(n for n in servers if s in by_name[n]["shards"]) for s in range(SHARDS)}
    check(servers == [f"shard-{k}" for k in range(4)], f"shard servers: {servers}")
    check(all(len(h) == 2 for h in holders.values()), f"two replicas per shard: {holders}")
    check(all(by_name[n].get("serving") for n in servers), "every replica serving")
    loads = [sum(n in h for h in holders.values()) for n in servers]
    check(max(loads) - min(loads) <= 1, f"balanced placement: {holders}")
    note(f"replicas per shard: {holders}")

    sess = [Session(aggs[0], "agg0", SEED + 1), Session(aggs[1], "agg1", SEED + 2)]
    universe = sorted(set(inp.ids) | {7_000_001 + k for k in range(20)})
    hot = inp.node_ids[:8]

    def write_request(w):
        return random_write(model, w, hot, universe)

    cc = write_model.ClusterCheck(model, sess, Session, members, SHARDS, check, note)
    write, compare, full_comparison = cc.write, cc.compare, cc.full_comparison

    def node_reads(ids):
        return write_model.node_reads(model, ids)

    def compare_replicas(label, names=None):
        cc.compare_replicas(label, names or servers)

    def wait_serving(names, timeout=30):
        return cc.wait_serving(names, timeout)

    # ---- A ------------------------------------------------------------------------------------
    section("A. writes through both aggregators; every replica equals the model")
    w = random.Random(SEED + 3)
    for k in range(600):
        write(write_request(w), k)
    full_comparison("A")
    compare_replicas("A")

    # ---- B ------------------------------------------------------------------------------------
    section("B. kill -9 of one replica of every shard during a closed-loop read load")
    # Requests of every read operation (from the loaded data's shapes); the model with the writes
    # so far answers them (no write runs during the load).
    reads = requests(Model(*load_model(nodes_csv, edges_csv)), inp, random.Random(SEED + 4))
    stop = threading.Event()
    stats = {"reads": 0, "failed": 0, "slowest": 0.0, "slowest_req": None}
    lock = threading.Lock()

    def reader(k):
        s = Session(aggs[k % 2], f"reader-{k}", SEED + 10 + k)
        rr = random.Random(SEED + 20 + k)
        while not stop.is_set():
            q = rr.choice(reads)
            t0 = time.monotonic()
            got = s.call(q)
            dt = time.monotonic() - t0
            ok = acceptable(got, model.run(q))
            with lock:
                stats["reads"] += 1
                if not ok:
                    stats["failed"] += 1
                    check(False, f"B: read during the kill: {short(q, 200)} -> {short(got)}")
                if dt > stats["slowest"]:
                    stats["slowest"], stats["slowest_req"] = dt, q
        s.close()

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    time.sleep(1.0)
    before = stats["reads"]
    stats["slowest"] = 0.0
    victims = []  # one replica of every shard, never both
    for sh in range(SHARDS):
        if not any(n in victims for n in holders[sh]):
            victims.append(holders[sh][0])
    check(all(any(n not in victims for n in holders[sh]) for sh in range(SHARDS)),
          f"B: victims {victims} leave a replica of every shard ({holders})")
    argvs = {}
    for n in victims:
        pid = by_name[n]["pid"]
        argvs[n] = cluster_procs.cmdline(pid)
        os.kill(pid, signal.SIGKILL)
    t_kill = time.monotonic()
    time.sleep(4.0)  # past the lease TTL: the dead replicas leave the map
    stop.set()
    for th in threads:
        th.join()
    during = stats["reads"] - before
    check(stats["failed"] == 0, f"B: {stats['failed']} failed reads")
    note(f"B: {during} reads by 4 clients in the 4 s after killing {victims} (one replica of every "
         f"shard), {stats['failed']} failed; slowest {stats['slowest'] * 1000:.1f} ms "
         f"({short(stats['slowest_req'], 120)})")
    check(sorted(n for n in members() if n.startswith("shard-")) ==
          sorted(n for n in servers if n not in victims),
          f"B: the killed replicas left the map: {sorted(members())}")

    t = time.monotonic()
    slowest = 0.0
    for k in range(300):
        t0 = time.monotonic()
        write(write_request(w), k)
        slowest = max(slowest, time.monotonic() - t0)
    note(f"B: 300 writes with one replica of each shard down in {time.monotonic() - t:.2f} s "
         f"(slowest {slowest * 1000:.1f} ms)")
    full_comparison("B, replicas down")

    # A machine crash can lose what a shard server applied but had not synced yet (its delta
    # file syncs in the background, docs/replication.md): cut the first victim's delta files
    # short. It must get the lost updates back from the LogStore's feed.
    argv = argvs[victims[0]]
    updates_dir = argv[argv.index("--updates-dir") + 1]
    cut = 0
    for f in sorted(os.listdir(updates_dir)):
        if f.endswith(".delta"):
            path = os.path.join(updates_dir, f)
            size = os.path.getsize(path)
            os.truncate(path, size // 3)
            cut += size - size // 3
    check(cut > 0, f"B: {victims[0]} has delta files to cut in {updates_dir}")
    note(f"B: cut {cut} bytes off the tails of {victims[0]}'s delta files (a lost page cache)")
    t = time.monotonic()
    for n in victims:
        check(argvs[n][:3] == [ZIPG, "serve", "shard"], f"{n} command line: {argvs[n]}")
        start_server(argvs[n], n)
    current = wait_serving(victims)
    note(f"B: {victims} restarted, caught up and serving after {time.monotonic() - t:.2f} s "
         f"({time.monotonic() - t_kill:.1f} s after the kill)")
    for n in victims:
        st = raw_status(current[n]["endpoint"]) or {}
        cu = st.get("catch_up", {})
        check(cu.get("applied", 0) > 0, f"B: {n} applied the missed writes from the feed: {cu}")
        note(f"B: {n} caught up: {cu}, last update ids {st.get('last_update_ids')}")
    compare_replicas("B, after the restart", victims)
    full_comparison("B, after the restart")

    # ---- C ------------------------------------------------------------------------------------
    section("C. both replicas of shard 0 killed")
    current = members()
    down = holders[0]
    dead = [sh for sh in range(SHARDS) if all(n in down for n in holders[sh])]
    for n in down:
        argvs[n] = cluster_procs.cmdline(current[n]["pid"])
        os.kill(current[n]["pid"], signal.SIGKILL)
    ids0 = [i for i in sorted(model.ids_ever) if shard_of(i, SHARDS) in dead][:20]
    others = [i for i in sorted(model.ids_ever) if shard_of(i, SHARDS) not in dead][:60]
    note(f"C: killed {down}: shards {dead} have no replica left")
    worst = 0.0
    for phase in ("at once", "after the leases expire"):
        if phase != "at once":
            time.sleep(3.0)
        for i in ids0:
            t0 = time.monotonic()
            got = sess[0].call({"op": "obj_get", "id": i})
            worst = max(worst, time.monotonic() - t0)
            check(got.get("error", {}).get("code") == "UNAVAILABLE",
                  f"C ({phase}): obj_get {i} on the dead shard: {short(got)}")
        bad = compare(sess[1], node_reads(others), f"C ({phase}): other shards")
        check(bad == 0, f"C ({phase}): {bad} wrong answers for the live shards")
    check(worst < 1.0, f"C: UNAVAILABLE within 1 s (slowest {worst:.3f} s)")
    note(f"C: reads of shard 0's nodes: UNAVAILABLE, slowest in {worst * 1000:.1f} ms; other "
         f"shards answered right")
    t = time.monotonic()
    failed_writes = 0
    for k, i in enumerate(ids0[:5]):
        req = {"op": "assoc_add", "src": i, "type": 1, "dst": 9_000_000 + k, "timestamp": 77,
               "properties": {"c": str(k)}}
        t0 = time.monotonic()
        got = sess[0].call(req)
        if got.get("error", {}).get("code") == "UNAVAILABLE":
            failed_writes += 1
            model.write(req)  # logged: applied once a replica is back
        else:
            check(False, f"C: write to the dead shard: {short(got)}")
        note(f"C: assoc_add to shard 0's node {i}: {short(got, 160)} in "
             f"{(time.monotonic() - t0) * 1000:.0f} ms")
    for k in range(100):  # writes to the other shards are acknowledged as usual
        req = write_request(w)
        key = req.get("src", req.get("id"))
        if shard_of(key, SHARDS) not in dead:
            write(req, k)
    t = time.monotonic()
    for n in down:
        start_server(argvs[n], n)
    wait_serving(down)
    note(f"C: shard 0 serving again {time.monotonic() - t:.2f} s after the restart")
    full_comparison("C, after the restart")
    compare_replicas("C, after the restart")

    # ---- D ------------------------------------------------------------------------------------
    section("D. zipg local stop")
    procs.local_stop(check, STORE, ZIPG)

if __name__ == "__main__":
    cluster_procs.run_test("replicas_test", main, report, procs.cleanup)
