#!/usr/bin/python3
"""End-to-end test of `zipg admin split` (docs/cluster-changes.md, step 4) on a real local
cluster: `zipg local start --servers 3 --replicas 2 --logstores 2` over a store of 2 shards
(etcd, 3 shard servers holding 2 copies of each shard, a LogStore leader and its standby, 3
aggregators). Every answer is compared with the plain-Python model of the contract with writes
(write_model.WriteModel).

A. Random writes, a compaction, more writes: the written data lies in a log shard and in the
   memtable.
B. `zipg admin split` (2 -> 4 shards) while 4 clients write edges of their own nodes (spread
   over every shard) and read each node's count back after every write, and a fifth asks
   search_node_ids (every match kind, small limits: truncated answers) whose answers those writes
   do not change: no call fails and every answer equals the client's own state or the model,
   through the switch. Afterwards both servers register
   4 shards and host the halves of what they hosted, the LogStore and its standby report the
   layout, and every read through the aggregators and asked of each replica directly equals the
   model (bfs and rpq from every node after B and F; the node reads after every step).
C. Writes after the split; kill -9 of a shard server, writes meanwhile, its restart: it reopens
   its halves from updates/layout.json and catches up from the LogStore's feed.
D. kill -9 of the LogStore leader: the standby, which got the layout by log shipping, takes
   over and fans writes out by 4; the old leader rejoins as the standby.
E. A second split (4 -> 8) under the same load; every read again. Then `zipg admin move` of a
   half to a server that lacks it, under the load: it fetches a replica's version of the half
   (no file of the store holds it) and catches up from the feed.
F. A split (8 -> 16) while a shard server is down: the others switch; back, it finds the layout
   mark in the LogStore's feed, builds the halves of its copies then, catches up and serves.

Usage: split_test.py PATH/TO/zipg        (exit status 0 if everything passed)"""
import json
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
from graph_model import search_requests  # noqa: E402
from write_model import acceptable, random_write, raw_status, shard_of, short  # noqa: E402

SEED = 20261202
rnd = random.Random(SEED)
T = cluster_procs.TestSetup("split_test", __doc__)
check, section, note = T.check, T.section, T.note
TMP, ZIPG, STORE, procs, report = T.tmp, T.zipg, T.store, T.procs, T.report
SERVERS = ["shard-0", "shard-1", "shard-2"]
LOAD_TYPE = 9  # the loaders' edges, a type random_write never uses
CLIENTS = 4
# The long variant: a graph SCALE times larger (ZIPG_SPLIT_SCALE=10: 3,000 nodes, 30,000 edges)
# and four searchers instead of one.
SCALE = int(os.environ.get("ZIPG_SPLIT_SCALE", "1"))
SEARCHERS = 1 if SCALE == 1 else 4


def search_difference(got, want):
    """The ids one search answer lacks and has over another, with their shards of 2 ... 16."""
    g = set((got.get("ok") or {}).get("ids", []))
    w = set((want.get("ok") or {}).get("ids", []))

    def shards(ids):
        return [(i, [shard_of(i, n) for n in (2, 4, 8, 16)]) for i in sorted(ids)[:10]]
    return f"lacks {shards(w - g)}, has over {shards(g - w)}"


class Loaders:
    """CLIENTS clients, each writing edges (src, 9, n) of its own sources (spread over every
    shard: sources k, k + CLIENTS, ... of `sources`) and deleting some, reading the source's count
    after each write; its own state says every answer. Any error is a failed call."""

    def __init__(self, endpoints, new_session, sources):
        self.endpoints, self.new_session, self.sources = endpoints, new_session, sources
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.loaded = []
        self.stats = {"writes": 0, "reads": 0, "wrong": 0, "slowest_ms": 0.0}
        self.threads = []
        self.held = {}  # (src) -> set of dsts, across runs
        self.next = {}  # src -> the next dst

    def start(self, model, searches=()):
        """Starts the clients from the model's edges of their sources (other writes may have
        deleted some: an obj_delete takes every edge), and a searcher asking `searches` ((request,
        answer) pairs no loader write changes) in turn."""
        for src in self.sources:
            self.held[src] = set(model.neighbors(src, LOAD_TYPE))
        self.halt.clear()
        self.first_wrong = []
        self.stats = {"writes": 0, "reads": 0, "searches": 0, "wrong": 0, "slowest_ms": 0.0}
        self.started = time.monotonic()
        self.threads = [threading.Thread(target=self._run, args=(k,)) for k in range(CLIENTS)]
        if searches:
            self.threads += [threading.Thread(target=self._search, args=(list(searches), k))
                             for k in range(SEARCHERS)]
        for th in self.threads:
            th.start()

    def stop(self, model):
        self.halt.set()
        for th in self.threads:
            th.join()
        for q in self.loaded:
            model.write(q)
        self.loaded = []
        return dict(self.stats), time.monotonic() - self.started

    def _run(self, k):
        s = self.new_session(self.endpoints[k % len(self.endpoints)], f"loader-{k}", SEED + 30 + k)
        lw = random.Random(SEED + 40 + k + len(self.loaded))
        mine = self.sources[k::CLIENTS]
        done = []
        while not self.halt.is_set():
            src = lw.choice(mine)
            with self.lock:
                held = self.held.setdefault(src, set())
                n = self.next.get(src, 1)
            if held and lw.random() < 0.35:
                d = lw.choice(sorted(held))
                q = {"op": "assoc_delete", "src": src, "type": LOAD_TYPE, "dst": d}
                want = {"ok": {"deleted": True}}
                held.discard(d)
            else:
                q = {"op": "assoc_add", "src": src, "type": LOAD_TYPE, "dst": n,
                     "timestamp": n, "properties": {"n": str(n)}}
                want = {"ok": {"replaced": False}}
                held.add(n)
                with self.lock:
                    self.next[src] = n + 1
            t0 = time.monotonic()
            got = s.call(q)
            t1 = time.monotonic()
            count = s.call({"op": "assoc_count", "id": src, "type": LOAD_TYPE})
            t2 = time.monotonic()
            ok = acceptable(got, want) and acceptable(count, {"ok": len(held)})
            done.append(q)
            with self.lock:
                self.stats["writes"] += 1
                self.stats["reads"] += 1
                self.stats["slowest_ms"] = max(self.stats["slowest_ms"], (t1 - t0) * 1000,
                                               (t2 - t1) * 1000)
                if not ok:
                    self.stats["wrong"] += 1
                    if len(self.first_wrong) < 5:
                        self.first_wrong.append(f"loader {k}: {short(q)} -> {short(got)}; count "
                                                f"{short(count)} want {len(held)}")
        with self.lock:
            self.loaded.extend(done)
        s.close()

    def _search(self, searches, j):
        s = self.new_session(self.endpoints[j % len(self.endpoints)], f"searcher-{j}",
                             SEED + 50 + j)
        k = j * 7
        while not self.halt.is_set():
            q, want = searches[k % len(searches)]
            k += 1
            t0 = time.monotonic()
            got = s.call(q)
            ms = (time.monotonic() - t0) * 1000
            with self.lock:
                self.stats["searches"] += 1
                self.stats["slowest_ms"] = max(self.stats["slowest_ms"], ms)
                if not acceptable(got, want):
                    self.stats["wrong"] += 1
                    if len(self.first_wrong) < 5:
                        self.first_wrong.append(f"searcher: {short(q)} -> {short(got)}; want "
                                                f"{short(want)}; {search_difference(got, want)}")
        s.close()


def main():
    section("setup: compress (2 shards), local start --servers 3 --replicas 2 --logstores 2")
    made = write_model.compressed_input(ZIPG, TMP, STORE, rnd, 2, check, scale=SCALE)
    if made is None:
        return
    inp, nodes_csv, edges_csv, model = made
    r, state = procs.local_start(check, "--servers", "3", "--replicas", "2", "--logstores", "2",
                                 "--lease-ttl", "2", "--memtable-mb", "0", "--no-verify",
                                 "--rebuild-delta", "0")
    if state is None:
        return
    aggs = state["aggregators"]
    view = write_model.ClusterView(aggs[0], check)
    members = view.members

    def Session(endpoint, label, seed=0):
        return write_model.Session(ZIPG, TMP, procs.sessions, endpoint, label, seed)

    sess = [Session(aggs[0], "agg0", SEED + 1), Session(aggs[1], "agg1", SEED + 2)]
    cc = write_model.ClusterCheck(model, sess, Session, members, 2, check, note)
    universe = sorted(set(inp.ids) | {7_000_001 + k for k in range(20)})
    hot = inp.node_ids[:8]
    w = random.Random(SEED + 3)
    # The loaders' sources: 32 ids spread over the shards of every count up to 8.
    sources = sorted(inp.node_ids)[:32]
    check(len({shard_of(i, 8) for i in sources}) == 8, f"the loaders' sources cover 8 shards")
    loaders = Loaders(aggs, Session, sources)

    def admin(*args, timeout=600):
        r = subprocess.run([ZIPG, "admin", *args], capture_output=True, text=True, timeout=timeout)
        try:
            return r.returncode, json.loads(r.stdout), r.stderr
        except ValueError:
            return r.returncode, None, r.stdout + r.stderr

    def logstore_shards(name):
        doc = view.logstore_status(name) or {}
        return doc.get("base_shards"), doc.get("layout")

    def split(label, before, after):
        """zipg admin split under the loaders; the registrations, the LogStores' layouts, every
        read through the aggregators and of each replica."""
        hosted_before = {n: m.get("shards", []) for n, m in members().items() if n in SERVERS}
        answered = [(q, model.run(q)) for q in search_requests(model, inp, random.Random(SEED))]
        searches = [(q, want) for q, want in answered if "error" not in want]
        loaders.start(model, searches)
        time.sleep(0.5)
        t0 = time.monotonic()
        rc, summary, err = admin("split", "--connect", aggs[0])
        took = time.monotonic() - t0
        time.sleep(0.5)
        stats, ran = loaders.stop(model)
        summary = summary or {}
        check(rc == 0 and summary.get("shards_before") == before and
              summary.get("shards") == after and
              sorted(summary.get("prepared", {})) == SERVERS,
              f"{label}: admin split: rc {rc} {short(summary, 600)} {err[-400:]!r}")
        switch = summary.get("switch") or {}
        check(all(v == "ok" for v in (switch.get("marks") or {"-": "none"}).values()) and
              len(switch.get("marks", {})) == before,
              f"{label}: every old lane took the layout mark: {short(switch)}")
        check(stats["wrong"] == 0 and stats["writes"] > 0 and stats["searches"] > 0,
              f"{label}: the loaders: {stats['wrong']} wrong of {stats['writes']} writes and "
              f"{stats['searches']} searches; first: "
              + "\n      ".join(loaders.first_wrong))
        note(f"{label}: split {before} -> {after} in {took:.2f} s (prepare "
             f"{summary.get('prepare_seconds', 0):.2f} s, switch "
             f"{summary.get('switch_seconds', 0) * 1000:.0f} ms, writes paused "
             f"{switch.get('paused_ms', 0):.0f} ms); loaders: {stats['writes']} writes and "
             f"{stats['reads']} count reads and {stats['searches']} searches in {ran:.1f} s, "
             f"{stats['wrong']} wrong, slowest call "
             f"{stats['slowest_ms']:.0f} ms")
        current = members()
        for name in SERVERS:
            m, had = current.get(name, {}), hosted_before.get(name, [])
            want = sorted(t for s in had for t in (s, s + before))
            check(m.get("num_shards") == after and m.get("shards") == want,
                  f"{label}: {name} registers {after} shards, the halves of {had}: {short(m, 300)}")
        for name in view.logstores():
            shards, layout = logstore_shards(name)
            check(shards == after and layout and layout[-1][0] == after,
                  f"{label}: LogStore {name} has the layout: {shards} {layout}")
        cc.shards = after
        cc.full_comparison(label, traversals=label == "B")
        cc.compare_replicas(label, SERVERS)

    # ---- A ------------------------------------------------------------------------------------
    section("A. writes, a compaction, more writes")
    for k in range(150):
        cc.write(random_write(model, w, hot, universe), k)
    rc, summary, err = admin("compact", "--connect", aggs[0])
    check(rc == 0, f"A: admin compact: {short(summary)} {err[-300:]!r}")
    for k in range(100):
        cc.write(random_write(model, w, hot, universe), k)

    # ---- B ------------------------------------------------------------------------------------
    section("B. admin split 2 -> 4 under the loaders")
    split("B", 2, 4)
    updates = os.path.join(STORE, "updates", "server-0")
    try:
        with open(os.path.join(updates, "layout.json")) as f:
            layout = json.load(f)
    except (OSError, ValueError) as e:
        layout = repr(e)
    check(layout == {"shards": 4, "dir": "split-4", "hosted": members()["shard-0"]["shards"]},
          f"B: server-0's layout.json: {layout}")

    # ---- C ------------------------------------------------------------------------------------
    section("C. writes after the split; kill -9 of a shard server and its restart")
    for k in range(100):
        cc.write(random_write(model, w, hot, universe), k)
    victim = members()["shard-1"]
    had = victim.get("shards")
    argv = cluster_procs.cmdline(victim["pid"])
    os.kill(victim["pid"], signal.SIGKILL)
    for k in range(100):
        cc.write(random_write(model, w, hot, universe), k)
    procs.start_server(argv, os.path.join(STORE, "run", "shard-1.log"))
    time.sleep(0.5)
    cc.wait_serving(SERVERS, 60)
    m = members().get("shard-1", {})
    check(m.get("num_shards") == 4 and m.get("shards") == had,
          f"C: the restarted shard-1 registers its halves {had}: {short(m, 300)}")
    cc.full_comparison("C", traversals=False)
    cc.compare_replicas("C", SERVERS)

    # ---- D ------------------------------------------------------------------------------------
    section("D. kill -9 of the LogStore leader: the standby takes over with the layout")
    leader = view.leader_name()
    lm = members().get(leader, {})
    largv = cluster_procs.cmdline(lm.get("pid", 0))
    os.kill(lm["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and view.leader_name() in (leader, None):
        time.sleep(0.1)
    new_leader = view.leader_name()
    check(new_leader not in (leader, None), f"D: a new leader: {new_leader}")
    shards, layout = logstore_shards(new_leader)
    check(shards == 4, f"D: the new leader fans out by 4: {shards} {layout}")
    for k in range(150):
        cc.write(random_write(model, w, hot, universe), k)
    procs.start_server(largv, os.path.join(STORE, "run", f"{leader}.log"))
    view.wait_in_sync(new_leader, 60)
    cc.full_comparison("D", traversals=False)

    # ---- E ------------------------------------------------------------------------------------
    section("E. a second split, 4 -> 8, under the loaders; a half moved")
    split("E", 4, 8)
    current = members()
    half = 7
    holders = [n for n in SERVERS if half in current[n].get("shards", [])]
    lacking = [n for n in SERVERS if half not in current[n].get("shards", [])]
    if check(len(holders) == 2 and len(lacking) == 1, f"E: shard {half} on {holders}"):
        loaders.start(model)
        t0 = time.monotonic()
        rc, summary, err = admin("move", "--connect", aggs[0], "--shard", str(half), "--from",
                                 holders[0], "--to", lacking[0])
        took = time.monotonic() - t0
        stats, _ = loaders.stop(model)
        check(rc == 0, f"E: move of shard {half}: rc {rc} {short(summary)} {err[-300:]!r}")
        check(stats["wrong"] == 0, f"E: the loaders during the move: {stats['wrong']} wrong; "
                                   + "\n      ".join(loaders.first_wrong))
        now = members()
        check(half in now[lacking[0]].get("shards", []) and
              half not in now[holders[0]].get("shards", []),
              f"E: after the move: {now[lacking[0]].get('shards')} "
              f"{now[holders[0]].get('shards')}")
        note(f"E: moved shard {half} from {holders[0]} to {lacking[0]} in {took:.2f} s under "
             f"{stats['writes']} loader writes, slowest call {stats['slowest_ms']:.0f} ms")
        cc.full_comparison("E moved", traversals=False)
        cc.compare_replicas("E moved", SERVERS)

    # ---- F ------------------------------------------------------------------------------------
    section("F. a split while shard-1 is down: it splits its own copies when it is back")
    victim = members()["shard-1"]
    had = victim.get("shards", [])
    argv = cluster_procs.cmdline(victim["pid"])
    procs.kill_and_wait([victim["pid"]], signal.SIGKILL)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and "shard-1" in members():
        time.sleep(0.1)  # its lease lapses
    rc, summary, err = admin("split", "--connect", aggs[0])
    check(rc == 0 and (summary or {}).get("shards") == 16 and
          sorted((summary or {}).get("prepared", {})) == ["shard-0", "shard-2"],
          f"F: split with shard-1 down: rc {rc} {short(summary)} {err[-300:]!r}")
    for k in range(100):
        cc.write(random_write(model, w, hot, universe), k)
    procs.start_server(argv, os.path.join(STORE, "run", "shard-1.log"))
    time.sleep(0.5)
    cc.wait_serving(SERVERS, 120)
    m = members().get("shard-1", {})
    want = sorted(t for s in had for t in (s, s + 8))
    check(m.get("num_shards") == 16 and m.get("shards") == want,
          f"F: shard-1 split its copies {had} on its return: {short(m, 300)}")
    cc.shards = 16
    cc.full_comparison("F")
    cc.compare_replicas("F", SERVERS)
    procs.local_stop(check, STORE, ZIPG)


if __name__ == "__main__":
    cluster_procs.run_test("split_test", main, report, procs.cleanup)
