#!/usr/bin/python3
"""End-to-end, model-based randomized test of the write path (docs/writes.md) on a real local
cluster (`zipg local start`: etcd, 2 shard servers for 4 shards, the LogStore, 2 aggregators with
one write_batch in flight each, so that concurrent writes are batched, lease TTL 2 s). Every answer is compared with a plain-Python model of the contract
(../shared/spec/interface.md) that also takes writes (WriteModel below, built on graph_model.Model).
Fixed seeds; the request streams are deterministic, crash outcomes depend on timing and are
checked as "old or new state" and then fed into the model.

A. a loaded edge-case store (graph_model.Input: ~300 nodes, ~2,600 edges, hot nodes with ~150
   edges, equal and INT64-extreme timestamps, values with commas, quotes, CR/LF, U+0000, ...), then
   a 6,000-request fixed-seed random sequence of every write op (obj_add incl. ALREADY_EXISTS,
   obj_update incl. NOT_FOUND, obj_delete, assoc_add as insert and as upsert, assoc_update incl.
   NOT_FOUND, assoc_delete of present and absent keys, negative ids: INVALID_ARGUMENT) mixed with
   every read op (filters also with overwritten values), alternating between the two aggregators
   (read-your-writes across them); EVERY answer (results and error codes) is checked right away.
   Writes are concentrated on a few hot nodes, so their data spreads over the base shard, several
   log shards and the live memtable. Along the sequence: `zipg admin compact` 5 times (one of a
   generation of deletes only, which makes no log shard; the summary's generation / nodes / edges,
   the LogStore status - generation, log shards, memtable counts - and the etcd registration are
   checked against the model), LogStore restarts with its own command line after SIGTERM (twice;
   while it is down, reads of unwritten nodes and assoc_count of written ones still answer, writes /
   reads of written nodes' LogStore data / get_node_ids are UNAVAILABLE) and after SIGKILL (idle, and right after a compaction, followed by
   a compaction of the empty log); full comparisons after every event; the base shard servers'
   "touched_nodes" equal the model's written nodes per shard.
B. RPC counting (the servers' status "calls"): a read of a node never written since the load
   reaches its aggregator and its owning shard server only (owner from xxh3, as graph/partition.h);
   a read of a written node reaches the LogStore once if its answer holds data that lives there,
   and its "fragment_reads" grow exactly for the generations of that data (a hot node with base
   data and data in 3+ LogStore generations); assoc_count of a written node and any read of a node
   touched only by a delete that found nothing do not reach it.
C. crash: 4 concurrent writers (assoc_add of new keys, upserts of existing edges, obj_add of new
   ids), SIGKILL of the LogStore in the middle, restart: every acknowledged write is present, every
   unacknowledged one is wholly present (exact timestamp and properties) or wholly absent (an
   upserted key holds exactly its old or its new version, never none or both).
C2. 3 writers racing obj_add on the same new ids (exactly one wins, the others ALREADY_EXISTS) and
   assoc_add on the same keys (exactly one version survives).
D. 330 bulk writes from 6 writers on one aggregator, which must reach the LogStore in fewer
   write_batch calls than writes; SIGKILL of the LogStore during a compaction (a ~3 MB generation;
   killed while STATE lists two logs), with writers overwriting / deleting the frozen generation's data and older data at the
   time and readers of untouched nodes checking every answer: recovery gives exactly the model's
   data, before and after the resumed compaction completes.
F. writes of one node while two clients read another node whose data is in a log shard: each write
   must be answered within 2 s (this fails: the LogStore's writers starve on its data lock).
G. `zipg query --batch --write-batch 64`: 400 random lines (writes of every kind, bad ones, reads)
   answered in order exactly as the model applies them one by one, the writes in far fewer LogStore
   calls than writes.
E. the size threshold (LogStore restarted with --memtable-mb 1: one compaction by itself), a last
   compaction, get_node_ids for many filters, a full comparison of every node's obj_get /
   get_neighbor_ids and every (node, type)'s assoc_range(0, big) / assoc_count through both
   aggregators, then `zipg local stop` (no process left).

Usage: writes_test.py PATH/TO/zipg        (exit status 0 if everything passed)"""
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_procs  # noqa: E402
from graph_model import (COMMON, INT64_MAX, INT64_MIN, TYPES, Input, load_model,  # noqa: E402
                         timestamp)
import write_model  # noqa: E402
from write_model import (PROP_NAMES, WRITE_OPS, WriteModel, acceptable, edge_props,  # noqa: E402
                         node_props, normalize, raw_status, shard_of, short)

SEED = 20241122
rnd = random.Random(SEED)
report = cluster_procs.Report(max_printed=80)
check = report.check
section = report.section
note = report.note

if len(sys.argv) != 2:
    print(__doc__)
    sys.exit(2)
TMP, ZIPG = cluster_procs.private_binary(sys.argv[1], "zipg-writes-test-")
STORE = os.path.join(TMP, "store")
RUN = os.path.join(STORE, "run")
STATE = os.path.join(RUN, "cluster.json")
LOGSTORE_STATE = os.path.join(STORE, "logstore", "STATE")


# ------------------------------------------------------------------------------------------------
# Processes: everything this test starts is stopped again, whatever happens (tests/cluster_procs.py).
procs = cluster_procs.Procs("writes_test", TMP, ZIPG, STORE)
known_pids = procs.known_pids
children = procs.children
sessions_open = procs.sessions
alive = procs.alive
cmdline = cluster_procs.cmdline
ours = procs.ours
kill_and_wait = procs.kill_and_wait
cleanup = procs.cleanup


def zipg(*args, stdin=None, timeout=120):
    return subprocess.run([ZIPG, *args], capture_output=True, input=stdin, timeout=timeout)


def log_tail(name, n=800):
    try:
        with open(os.path.join(RUN, name + ".log"), "rb") as f:
            return f.read()[-n:].decode("utf-8", "replace").strip()
    except OSError:
        return "(no log)"


def Session(endpoint, label, seed=0, extra=()):
    return write_model.Session(ZIPG, TMP, sessions_open, endpoint, label, seed, extra)


def start_server(argv, name):
    """Starts one server as `zipg local start` does (own session, output appended to its log)."""
    log = open(os.path.join(RUN, name + ".log"), "ab")
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True)
    log.close()
    children[p.pid] = p
    known_pids.add(p.pid)
    return p.pid


# ================================================================================================
def main():
    section("setup: generate edge-case input, compress (4 shards), start the cluster")
    inp = Input(rnd, num_ids=400, num_nodes=300, num_edges=3000, id_range=5000)
    nodes_csv, edges_csv = inp.write(TMP)
    r = zipg("compress", "--nodes", nodes_csv, "--edges", edges_csv, "--out", STORE, "--shards", "4")
    if not check(r.returncode == 0, f"compress: {r.stderr[-500:]!r}"):
        return
    model = WriteModel(*load_model(nodes_csv, edges_csv))
    n_edges = sum(len(m) for m in model.edges.values())
    t = time.monotonic()
    # One write_batch in flight per aggregator: concurrent writes through one aggregator go to the
    # LogStore together (docs/writes.md, "Write batches"), so every concurrent section below (the
    # crashes included) also tests batches.
    # No merges (--merge-width 0): this test follows each generation's log shard exactly;
    # merge_test.py covers merges (which change the list of log shards, not any answer).
    r = zipg("local", "start", "--store", STORE, "--servers", "2", "--aggregators", "2",
             "--lease-ttl", "2", "--no-verify", "--memtable-mb", "0", "--write-batches", "1",
             "--merge-width", "0", timeout=180)
    if os.path.exists(STATE):
        with open(STATE) as f:
            state = json.load(f)
        known_pids.update(p["pid"] for p in state.get("processes", []))
    if not check(r.returncode == 0 and os.path.exists(STATE),
                 f"local start: exit {r.returncode}: {r.stdout[-500:]!r} {r.stderr[-1500:]!r}"):
        return
    aggs = state["aggregators"]
    procs = {p["name"]: p for p in state["processes"]}
    check(sorted(p["role"] for p in state["processes"]) ==
          ["aggregator", "aggregator", "etcd", "logstore", "shard", "shard"],
          f"cluster.json processes: {sorted(procs)}")
    note(f"{len(model.nodes)} nodes, {n_edges} edges, {len(model.keys_ever)} (node, type) records; "
         f"cluster up in {time.monotonic() - t:.2f} s: aggregators {aggs}, LogStore {state.get('logstore')}")

    def members(a=None):
        st = raw_status(a or aggs[0])
        out = {m["name"]: m for m in (st or {}).get("servers", [])}
        for m in out.values():
            known_pids.add(m.get("pid", 0))
        return out

    by_name = members()
    agg_name = {m["endpoint"]: n for n, m in by_name.items() if m["role"] == "aggregator"}
    check(sorted(agg_name) == sorted(aggs), f"aggregators in status: {sorted(agg_name)} vs {aggs}")
    shard_server = {}  # shard -> server name
    for n, m in by_name.items():
        if m["role"] == "shard":
            for s in m["shards"]:
                shard_server[s] = n
    check(sorted(shard_server) == [0, 1, 2, 3], f"shards served: {shard_server}")
    check(by_name.get("logstore", {}).get("role") == "logstore" and
          by_name["logstore"]["endpoint"] == state.get("logstore"),
          f"LogStore member: {by_name.get('logstore')} vs cluster.json {state.get('logstore')}")

    def owner(i):
        return shard_server[shard_of(i)]

    # The partition function reproduced here agrees with the servers: a shard server answers
    # for the ids it hosts and refuses the others with UNAVAILABLE.
    direct = {n: Session(by_name[n]["endpoint"], f"direct-{n}") for n in ("shard-0", "shard-1")}
    probe = sorted(inp.node_ids)[:30] + [0, 1, INT64_MAX, 2**62]
    wrong = 0
    for i in probe:
        for n, s in direct.items():
            got = s.call({"op": "obj_get", "id": i})
            hosted = "ok" in got
            refused = got.get("error", {}).get("code") == "UNAVAILABLE"
            if not ((n == owner(i) and hosted) or (n != owner(i) and refused)):
                wrong += 1
                check(False, f"id {i}: xxh3 owner {owner(i)}, but {n} answered {short(got, 200)}")
    for s in direct.values():
        s.close()
    check(wrong == 0, "the test's shard_of() matches the servers' partitioning")

    sess = [Session(aggs[0], "agg0", SEED + 1), Session(aggs[1], "agg1", SEED + 2)]

    # ---- node pools ---------------------------------------------------------------------------
    ghost_src = sorted({s for s, _ in model.edges if s not in model.nodes},
                       key=lambda s: -len(model.neighbors(s)))
    new_ids = [7_000_001, 2**62 + 11] + [8_000_000 + 7 * k for k in range(30)] + \
              [INT64_MAX - 2 - k for k in range(3)]
    HOT = inp.node_ids[:6] + ghost_src[:2] + new_ids[:2]
    PROTECTED = inp.node_ids[:3]  # never obj_deleted: their base data stays
    universe = sorted(set(inp.ids) | set(new_ids))
    missing = [i for i in (3, 999_999_999, 123_456_789) if i not in universe]
    # Reserved: base nodes with edges that no write names (until section B), 3 per shard server.
    reserved = []
    for server in ("shard-0", "shard-1"):
        reserved += [i for i in inp.node_ids[6:] if owner(i) == server and model.nodes.get(i) and
                     len(model.neighbors(i)) >= 2][:3]
    wuniverse = [i for i in universe if i not in reserved]  # what writes may name
    note(f"hot nodes: {HOT}; reserved (unwritten) nodes: {reserved}")

    # ---- comparisons --------------------------------------------------------------------------
    def run_list(reqs, label, both=False):
        """Sends reqs (split over the two aggregators, or all to both) in two threads; returns
        the number of mismatching answers."""
        wants = [model.run(q) for q in reqs]
        bad = [0]
        parts = [(0, list(range(len(reqs)))), (1, list(range(len(reqs))))] if both else \
            [(0, list(range(0, len(reqs), 2))), (1, list(range(1, len(reqs), 2)))]

        def worker(k, idx):
            for j in idx:
                got = sess[k].call(reqs[j])
                if not acceptable(got, wants[j]):
                    bad[0] += 1
                    check(False, f"{label}: agg{k}: {short(reqs[j], 200)}\n      got  {short(got)}\n"
                                 f"      want {short(wants[j])}")
        threads = [threading.Thread(target=worker, args=p) for p in parts]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        return bad[0]

    def full_comparison(label, both=False):
        t = time.monotonic()
        reqs = []
        for i in sorted(model.ids_ever | set(missing)):
            reqs.append({"op": "obj_get", "id": i})
            reqs.append({"op": "get_neighbor_ids", "id": i})
        for (s, typ) in sorted(model.keys_ever):
            reqs.append({"op": "assoc_range", "id": s, "type": typ, "pos": 0, "limit": INT64_MAX})
            reqs.append({"op": "assoc_count", "id": s, "type": typ})
        bad = run_list(reqs, f"full comparison {label}", both)
        check(bad == 0, f"full comparison {label}: {bad} of {len(reqs)} answers differ from the model")
        note(f"full comparison {label}: {len(reqs)} requests{' through both aggregators' if both else ''}, "
             f"{bad} wrong, {time.monotonic() - t:.2f} s")

    # ---- LogStore helpers ---------------------------------------------------------------------
    def logstore_member(a=None):
        return members(a).get("logstore")

    def logstore_status():
        m = logstore_member()
        if not m:
            return None
        st = raw_status(m["endpoint"])
        return st.get("logstore") if st else None

    def check_logstore_state(label):
        """The LogStore's status and registration agree with the model."""
        ls = logstore_status()
        if not check(ls is not None, f"{label}: LogStore status"):
            return
        gens = [x["generation"] for x in ls["log_shards"]]
        check(ls["generation"] == model.gen and gens == model.shard_gens and ls["frozen"] is None,
              f"{label}: LogStore generation {ls['generation']} log shards {gens} frozen "
              f"{ls['frozen']}; model: generation {model.gen}, log shards {model.shard_gens}")
        if model.exact:
            n, e = model.live_in(model.gen)
            check(ls["memtable"]["nodes"] == n and ls["memtable"]["edges"] == e,
                  f"{label}: memtable holds {ls['memtable']}; model: {n} nodes with properties, "
                  f"{e} edges written in generation {model.gen}")
        deadline = time.monotonic() + 5
        while True:  # the etcd registration follows the publish
            regs = [(logstore_member(a) or {}).get("generations") for a in aggs]
            if all(g == model.shard_gens for g in regs) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        check(all(g == model.shard_gens for g in regs),
              f"{label}: registered generations {regs}, want {model.shard_gens}")

    def compact(label, agg=0, exact_counts=True):
        want_nodes, want_edges = model.live_in(model.gen)
        t = time.monotonic()
        r = zipg("admin", "compact", "--connect", aggs[agg], timeout=120)
        secs = time.monotonic() - t
        try:
            summary = json.loads(r.stdout)
        except ValueError:
            summary = {}
        empty = want_nodes + want_edges == 0
        ok = check(r.returncode == 0 and summary.get("compacted") is True and
                   summary.get("generation") == model.gen,
                   f"{label}: admin compact: exit {r.returncode} {r.stdout[-300:]!r} "
                   f"{r.stderr[-300:]!r}; want generation {model.gen} compacted")
        if ok and exact_counts and model.exact:
            check(summary.get("nodes") == want_nodes and summary.get("edges") == want_edges,
                  f"{label}: compacted {summary.get('nodes')} nodes, {summary.get('edges')} edges; "
                  f"model: {want_nodes}, {want_edges} live in generation {model.gen}")
        if not empty:
            model.shard_gens.append(model.gen)
        model.gen += 1
        note(f"{label}: compacted generation {summary.get('generation')} "
             f"({summary.get('nodes')} nodes, {summary.get('edges')} edges, "
             f"{summary.get('log_bytes')} log bytes -> {summary.get('stored_bytes')} stored) in "
             f"{secs:.2f} s")
        check_logstore_state(label)

    def wait_logstore(pid, label, timeout=30):
        """Waits until both aggregators are healthy with the LogStore of `pid` registered."""
        t = time.monotonic()
        last = None
        for a in aggs:
            while time.monotonic() - t < timeout:
                st = raw_status(a)
                last = st
                if st and st.get("healthy") is True and st.get("logstore") and any(
                        m.get("role") == "logstore" and m.get("pid") == pid
                        for m in st.get("servers", [])):
                    break
                time.sleep(0.02)
            else:
                check(False, f"{label}: {a} not healthy with LogStore pid {pid} after {timeout} s: "
                             f"{short(last, 600)}; log: {log_tail('logstore')}")
                return False
        return True

    def kill_logstore(sig):
        m = logstore_member()
        pid = m["pid"]
        argv = cmdline(pid)
        check(argv[:3] == [ZIPG, "serve", "logstore"], f"LogStore command line: {argv}")
        os.kill(pid, sig)
        deadline = time.monotonic() + 15
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.005)
        check(not alive(pid), f"LogStore pid {pid} stops on signal {sig}")
        return argv

    def restart_logstore(argv, label):
        t = time.monotonic()
        pid = start_server(argv, "logstore")
        ok = wait_logstore(pid, label)
        note(f"{label}: LogStore restarted (pid {pid}), cluster healthy again after "
             f"{time.monotonic() - t:.2f} s")
        return ok

    # ---- random requests ----------------------------------------------------------------------
    def pick_src(r):
        return r.choice(HOT) if r.random() < 0.7 else r.choice(wuniverse)

    def existing_key(r, s):
        ts = sorted(model.types.get(s, ()))
        if not ts:
            return None
        t = r.choice(ts)
        return s, t, r.choice(sorted(model.edges[(s, t)]))

    def absent_key(r, s):
        for _ in range(20):
            t, d = r.choice(TYPES + [3]), r.choice(universe)
            if model.edge(s, t, d) is None:
                return s, t, d
        return s, 3, 10**15 + r.randrange(1000)

    def write_request(r):
        x = r.random()
        if x < 0.30:  # assoc_add: insert or upsert
            s = pick_src(r)
            k = existing_key(r, s) if r.random() < 0.4 else None
            if k is None:
                k = (s, r.choice(TYPES + [3]), r.choice(universe))
            return {"op": "assoc_add", "src": k[0], "type": k[1], "dst": k[2],
                    "timestamp": timestamp(r), "properties": edge_props(r)}
        if x < 0.40:
            s = pick_src(r)
            k = (existing_key(r, s) if r.random() < 0.75 else None) or absent_key(r, s)
            return {"op": "assoc_update", "src": k[0], "type": k[1], "dst": k[2],
                    "timestamp": timestamp(r), "properties": edge_props(r)}
        if x < 0.55:
            s = pick_src(r)
            k = (existing_key(r, s) if r.random() < 0.65 else None) or absent_key(r, s)
            return {"op": "assoc_delete", "src": k[0], "type": k[1], "dst": k[2]}
        if x < 0.67:
            cands = HOT + r.sample(wuniverse, 20)
            pool = [i for i in cands if (i in model.nodes) == (r.random() < 0.35)]
            i = r.choice(pool or cands)
            return {"op": "obj_add", "id": i, "properties": node_props(r)}
        if x < 0.82:
            cands = HOT + r.sample(wuniverse, 10)
            pool = [i for i in cands if (i in model.nodes) == (r.random() < 0.75)]
            i = r.choice(pool or cands)
            return {"op": "obj_update", "id": i, "properties": node_props(r)}
        if x < 0.86:
            if r.random() < 0.5:
                i = r.choice([h for h in HOT if h not in PROTECTED])
            else:
                i = r.choice(wuniverse + missing)
            return {"op": "obj_delete", "id": i}
        if x < 0.88:
            return r.choice([
                {"op": "obj_add", "id": -1, "properties": {"name": "x"}},
                {"op": "obj_update", "id": -3, "properties": {}},
                {"op": "obj_delete", "id": -4},
                {"op": "assoc_add", "src": HOT[0], "type": 0, "dst": -5, "timestamp": 1, "properties": {}},
                {"op": "assoc_add", "src": HOT[0], "type": -1, "dst": 5, "timestamp": 1, "properties": {}},
                {"op": "assoc_update", "src": -2, "type": 0, "dst": 5, "timestamp": 1, "properties": {}},
                {"op": "assoc_delete", "src": HOT[1], "type": -7, "dst": 1}])
        # A write on a node that is not hot: spreads touched nodes over every shard.
        i = r.choice(wuniverse)
        if i in model.nodes:
            return {"op": "obj_update", "id": i, "properties": node_props(r)}
        return {"op": "assoc_add", "src": i, "type": r.choice(TYPES), "dst": r.choice(universe),
                "timestamp": timestamp(r), "properties": edge_props(r)}

    READ_OPS = ["get_node_property", "get_node_property", "get_node_ids", "get_neighbor_ids",
                "get_neighbor_ids", "get_edge_record", "get_edge_range", "get_edge_data", "obj_get",
                "assoc_range", "assoc_range", "assoc_count", "assoc_get", "assoc_time_range"]

    def read_request(r):
        x = r.random()
        i = r.choice(HOT) if x < 0.55 else r.choice(missing) if x < 0.6 else r.choice(universe)
        ts = sorted(model.types.get(i, ()))
        t = r.choice(ts) if ts and r.random() < 0.85 else r.choice(TYPES + [3])
        op = r.choice(READ_OPS)
        edges = model.rec(i, t)
        c = len(edges)
        times = sorted({e["timestamp"] for e in edges} | {INT64_MIN, INT64_MAX, 0})
        if op == "get_node_property":
            if r.random() < 0.4:
                return {"op": op, "id": i}
            return {"op": op, "id": i, "properties": r.sample(PROP_NAMES + ["nope"], r.randint(0, 3))}
        if op == "obj_get":
            return {"op": op, "id": i}
        if op == "get_node_ids":
            src = r.choice(HOT) if r.random() < 0.6 else r.choice(universe)
            items = sorted(model.nodes.get(src, {}).items())
            if model.history and r.random() < 0.35:  # possibly a value that was overwritten
                items = sorted(r.choice(model.history[-300:]).items())
            if items and r.random() < 0.8:
                flt = dict(r.sample(items, r.randint(1, min(2, len(items)))))
            else:
                flt = {r.choice(PROP_NAMES): r.choice(COMMON)}
            return {"op": op, "properties": flt}
        if op == "get_neighbor_ids":
            req = {"op": op, "id": i}
            if r.random() < 0.5:
                req["type"] = t
            if r.random() < 0.5:
                nb = model.neighbors(i, req.get("type"))
                d = r.choice(nb) if nb else None
                items = sorted(model.nodes.get(d, {}).items()) if d is not None else []
                if model.history and r.random() < 0.3:
                    items = sorted(r.choice(model.history[-300:]).items())
                req["properties"] = dict(r.sample(items, 1)) if items else \
                    r.choice([{"city": "red"}, {"nope": "x"}, {"fresh": r.choice(COMMON)}])
            return req
        if op in ("get_edge_record", "assoc_count"):
            return {"op": op, "id": i, "type": t}
        if op == "get_edge_range":
            lo, hi = r.choice(times), r.choice(times)
            if r.random() < 0.7:
                lo, hi = min(lo, hi), max(lo, hi)
            return {"op": op, "id": i, "type": t, "t_lo": lo, "t_hi": hi}
        if op == "get_edge_data":
            return {"op": op, "id": i, "type": t,
                    "time_order": r.choice([0, c - 1, c, r.randint(0, c + 1), INT64_MAX]) if c else
                    r.choice([0, 1])}
        if op == "assoc_range":
            return {"op": op, "id": i, "type": t, "pos": r.choice([0, 0, r.randint(0, c + 1), c, INT64_MAX]),
                    "limit": r.choice([0, 1, 3, 10, r.randint(0, c + 2), INT64_MAX])}
        if op == "assoc_get":
            dsts = [e["dst"] for e in edges]
            want = r.sample(dsts, min(len(dsts), r.randint(0, 4))) + [r.choice(universe)]
            if r.random() < 0.3:
                want.append(want[0])
            lo, hi = sorted((r.choice(times), r.choice(times)))
            if r.random() < 0.3:
                lo, hi = INT64_MIN, INT64_MAX
            return {"op": op, "id": i, "type": t, "ids": want, "low": lo, "high": hi}
        lo, hi = sorted((r.choice(times), r.choice(times)))
        return {"op": "assoc_time_range", "id": i, "type": t, "low": lo, "high": hi,
                "limit": r.choice([0, 1, 3, r.randint(0, c + 1), INT64_MAX])}

    # ============================================================================================
    section("A. random writes and reads through both aggregators, checked one by one")
    stats = defaultdict(lambda: [0, 0])  # op -> [requests, wrong]
    codes = defaultdict(int)

    def downtime_checks(label):
        """The LogStore is down: unwritten nodes and counts of written ones still answer; writes,
        reads of data in the LogStore and get_node_ids are UNAVAILABLE (never a wrong answer)."""
        t = time.monotonic()
        clean = [i for i in reserved if i not in model.named][:3]
        ptr = [h for h in HOT if model.ptrs.get(h)][:2]
        for k, s in enumerate(sess):
            for req in ([{"op": "obj_get", "id": i} for i in clean] +
                        [{"op": "assoc_count", "id": h, "type": 0} for h in ptr]):
                got = s.call(req)
                check(acceptable(got, model.run(req)), f"{label}: agg{k} {req} with the LogStore down: "
                                                       f"{short(got)}")
            for req in ([{"op": "obj_get", "id": h} for h in ptr if ("n", h) in model.origin] +
                        [{"op": "get_node_ids", "properties": {"city": "red"}},
                         {"op": "assoc_add", "src": HOT[0], "type": 3, "dst": 31337, "timestamp": 5,
                          "properties": {"w": "down"}},
                         {"op": "obj_update", "id": HOT[1], "properties": {"name": "down"}}]):
                got = s.call(req)
                if not check(got.get("error", {}).get("code") == "UNAVAILABLE",
                             f"{label}: agg{k} {short(req)} with the LogStore down: {short(got)} "
                             f"(want UNAVAILABLE)"):
                    if "ok" in got and req["op"] in WRITE_OPS:
                        model.write(req)  # keep the model in step with what happened
        note(f"{label}: with the LogStore down, {len(clean)} unwritten nodes and counts of {len(ptr)} "
             f"written ones answered, writes / LogStore data / get_node_ids UNAVAILABLE "
             f"({time.monotonic() - t:.2f} s)")

    def event(step):
        if step in (1000, 2500, 4000, 5400):
            compact(f"step {step}", agg=step // 1000 % 2)
            if step == 1000:
                full_comparison(f"after compaction at step {step}")
            if step == 2500:
                # A generation of deletes only: it compacts into no log shard.
                r = random.Random(SEED + 5)
                for k in range(30):
                    s = r.choice([h for h in HOT if h not in PROTECTED] + wuniverse)
                    key = existing_key(r, s)
                    req = {"op": "obj_delete", "id": s} if key is None or k % 10 == 0 else \
                        {"op": "assoc_delete", "src": key[0], "type": key[1], "dst": key[2]}
                    want = model.write(req)
                    got = sess[k % 2].call(req)
                    check(acceptable(got, want), f"step {step} deletes: {short(req)}: {short(got)}, "
                                                 f"want {short(want)}")
                check(model.live_in(model.gen) == (0, 0), "a generation of deletes only")
                compact(f"step {step}, deletes only", agg=0)
                full_comparison(f"after the deletes-only compaction at step {step}")
            if step == 5400:
                # Restart with an empty live log, then a compaction with nothing to compact.
                label = f"step {step}: SIGKILL right after a compaction"
                argv = kill_logstore(signal.SIGKILL)
                restart_logstore(argv, label)
                check_logstore_state(f"{label} restart")
                r = zipg("admin", "compact", "--connect", aggs[1], timeout=120)
                try:
                    summary = json.loads(r.stdout)
                except ValueError:
                    summary = {}
                # "started": false (admin compact follows the LogStore's status since aecb713).
                check(r.returncode == 0 and (summary.get("compacted") is False or
                                             summary.get("started") is False),
                      f"{label}: compaction of an empty log: exit {r.returncode} {r.stdout[-300:]!r} "
                      f"{r.stderr[-300:]!r}; want nothing compacted")
                check_logstore_state(f"{label}, empty compaction")
        elif step in (1800, 4800):
            label = f"step {step}: SIGTERM"
            argv = kill_logstore(signal.SIGTERM)
            t = time.monotonic()
            for a in aggs:  # a stopping LogStore leaves membership at once
                while time.monotonic() - t < 5:
                    st = raw_status(a)
                    if st and st.get("logstore") is None:
                        break
                    time.sleep(0.02)
                check(st and st.get("logstore") is None and st.get("healthy") is False,
                      f"{label}: {a} shows no LogStore and not healthy: {short(st, 300)}")
            downtime_checks(label)
            restart_logstore(argv, label)
            check_logstore_state(f"{label} restart")
            full_comparison(f"after the {label} restart")
        elif step == 3300:
            label = f"step {step}: SIGKILL (idle)"
            argv = kill_logstore(signal.SIGKILL)
            got = sess[0].call({"op": "assoc_delete", "src": HOT[0], "type": 0, "dst": 31337})
            check(got.get("error", {}).get("code") == "UNAVAILABLE",
                  f"{label}: a write with the LogStore killed: {short(got)} (want UNAVAILABLE)")
            restart_logstore(argv, label)
            check_logstore_state(f"{label} restart")
            full_comparison(f"after the {label} restart")

    N_STEPS = 6000
    t_a = time.monotonic()
    t_ops = 0.0
    for step in range(N_STEPS):
        event(step)
        is_write = rnd.random() < 0.45
        req = write_request(rnd) if is_write else read_request(rnd)
        want = model.write(req) if is_write else model.run(req)
        t = time.monotonic()
        got = sess[step % 2].call(req)
        t_ops += time.monotonic() - t
        st = stats[req["op"]]
        st[0] += 1
        if "error" in want:
            codes[f"{req['op']} {want['error']}"] += 1
        if not acceptable(got, want):
            st[1] += 1
            check(False, f"step {step} agg{step % 2}: {short(req, 300)}\n      got  {short(got)}\n"
                         f"      want {short(want)}")
        if step % 1500 == 1499:
            note(f"{step + 1} steps, {time.monotonic() - t_a:.1f} s")
    note(f"{N_STEPS} requests in {time.monotonic() - t_a:.1f} s ({t_ops / N_STEPS * 1000:.2f} ms per "
         f"request); per op (requests / wrong): " +
         ", ".join(f"{op} {n}/{w}" for op, (n, w) in sorted(stats.items())))
    note("expected errors: " + ", ".join(f"{k} {n}" for k, n in sorted(codes.items())))
    for op in WRITE_OPS | set(READ_OPS):
        check(stats[op][0] > 0, f"the sequence has {op}")
    for k in ("obj_add ALREADY_EXISTS", "obj_update NOT_FOUND", "assoc_update NOT_FOUND"):
        check(codes[k] > 0, f"the sequence has {k}")
    check_logstore_state("end of A")
    full_comparison("end of A")

    # Data of hot nodes spread over the base shard and 3+ LogStore generations.
    spread = {h: sorted(model.origins_of(h)) for h in HOT}
    note("generations holding each hot node's live data (0 = base): " +
         ", ".join(f"{h}: {g}" for h, g in spread.items()))
    multi = [h for h, g in spread.items() if 0 in g and len([x for x in g if x > 0]) >= 3]
    check(multi, f"some hot node has live data in its base shard and 3+ LogStore generations: {spread}")
    ls = logstore_status()
    check(ls and len(ls["log_shards"]) >= 3 and all(x["touched_nodes"] >= 0 for x in ls["log_shards"]),
          f"3+ log shards: {short(ls, 600)}")
    sh = {n: raw_status(by_name[n]["endpoint"]) for n in ("shard-0", "shard-1")}
    touched = {n: (s or {}).get("touched_nodes") for n, s in sh.items()}
    want_touched = defaultdict(int)
    for i in model.touched:
        want_touched[shard_of(i)] += 1
    got_touched = {int(k): v for s in touched.values() for k, v in (s or {}).items()}
    check(got_touched == dict(want_touched),
          f"shard servers' touched_nodes {got_touched}; model (nodes that got an update, by shard): "
          f"{dict(want_touched)}")
    note(f"log shards {[(x['generation'], x['touched_nodes']) for x in ls['log_shards']]}; base "
         f"shards' touched nodes {got_touched}")

    # ============================================================================================
    section("B. RPC counting: who serves a read of an unwritten / written node")
    names = ["aggregator-0", "aggregator-1", "shard-0", "shard-1", "logstore"]

    def endpoints():
        m = members()
        return {n: m[n]["endpoint"] for n in names}

    eps = endpoints()
    sess_name = [agg_name[aggs[0]], agg_name[aggs[1]]]

    def counted(k, req):
        """Runs req through aggregator k; (answer, calls per server, fragment_reads delta)."""
        before = {n: raw_status(e) for n, e in eps.items()}
        got = sess[k].call(req)
        # A server counts a call before it replies (rpc/server.cc, CallCounter), so every call
        # that led to this answer, or to the write before it, is already counted.
        after = {n: raw_status(e) for n, e in eps.items()}
        calls = {n: after[n]["calls"] - before[n]["calls"] - 1 for n in names}  # -1: the status call
        fb = before["logstore"]["logstore"]["fragment_reads"]
        fa = after["logstore"]["logstore"]["fragment_reads"]
        frag = {int(g): fa[g] - fb.get(g, 0) for g in fa if fa[g] != fb.get(g, 0)}
        return got, calls, frag

    clean = [i for i in reserved if i not in model.named and i not in model.touched and
             model.types.get(i)]
    clean_by_server = {}
    for i in clean:
        clean_by_server.setdefault(owner(i), i)
    check(len(clean_by_server) == 2, f"unwritten nodes with edges on both servers: {clean_by_server}")
    for n, i in sorted(clean_by_server.items()):
        t = sorted(model.types[i])[0]
        for k, req in ((0, {"op": "obj_get", "id": i}),
                       (1, {"op": "assoc_range", "id": i, "type": t, "pos": 0, "limit": 5}),
                       (0, {"op": "get_neighbor_ids", "id": i})):
            got, calls, frag = counted(k, req)
            want = {x: 0 for x in names}
            want[sess_name[k]] = 1
            want[n] = 1
            check(acceptable(got, model.run(req)), f"B: {req}: {short(got)}")
            check(calls == want and not frag,
                  f"B: unwritten node {i} (owner {n}) {req['op']} via {sess_name[k]}: calls {calls}, "
                  f"fragment reads {frag}; want {want} and none")
        note(f"unwritten node {i} (shard {shard_of(i)} on {n}): aggregator + {n} only")

    # A written node: one more call, to the LogStore, if the answer holds data that lives there,
    # reading exactly the generations of that data.
    best = max((h for h in HOT if h in model.nodes and model.types.get(h)),
               key=lambda h: (len(model.ptrs.get(h, ())), 0 in model.origins_of(h)), default=None)
    check(best is not None and len(model.ptrs[best]) >= 3,
          f"a hot node written in 3+ generations: {best} {model.ptrs.get(best)}")
    if best is not None:
        n = owner(best)
        t = sorted(model.types[best])[0]
        for k, req in ((0, {"op": "obj_get", "id": best}),
                       (1, {"op": "assoc_range", "id": best, "type": t, "pos": 1, "limit": 7}),
                       (1, {"op": "get_node_property", "id": best, "properties": ["name"]}),
                       (0, {"op": "assoc_count", "id": best, "type": t})):
            got, calls, frag = counted(k, req)
            want = {x: 0 for x in names}
            want[sess_name[k]] = 1
            want[n] = 1
            expected = model.run(req)
            check(acceptable(got, expected), f"B: {req}: {short(got)}")
            if req["op"] == "assoc_range":
                gens = {model.origin.get(("e", e["src"], e["type"], e["dst"]), 0)
                        for e in expected["ok"]}
            elif req["op"] == "assoc_count":
                gens = set()
            else:
                gens = {model.origin.get(("n", best), 0)}
            want_frag = {g: 1 for g in gens - {0}}
            want["logstore"] = 1 if want_frag else 0
            check(calls == want and frag == want_frag,
                  f"B: written node {best} (owner {n}) {req['op']} via {sess_name[k]}: calls {calls}, "
                  f"fragment reads {frag}; want {want} and {want_frag}")
        note(f"written node {best} (on {n}; live data in generations {sorted(model.origins_of(best))}, "
             f"written in {sorted(model.ptrs[best])}): aggregator + {n}, + LogStore for the "
             f"generations of the answer's data")

    # A node touched only by a delete that found nothing: no pointer, so no LogStore call.
    cand = [i for i in clean if i not in clean_by_server.values()]
    if check(cand, "an unwritten node for the delete-only case"):
        i = cand[0]
        req = {"op": "assoc_delete", "src": i, "type": 3, "dst": 10**15}
        got = sess[0].call(req)
        check(acceptable(got, model.write(req)), f"B: {req}: {short(got)}")
        for k, req in ((1, {"op": "obj_get", "id": i}),
                       (0, {"op": "assoc_range", "id": i, "type": sorted(model.types[i])[0],
                            "pos": 0, "limit": INT64_MAX})):
            got, calls, frag = counted(k, req)
            want = {x: 0 for x in names}
            want[sess_name[k]] = 1
            want[owner(i)] = 1
            check(acceptable(got, model.run(req)), f"B: {req}: {short(got)}")
            check(calls == want and not frag,
                  f"B: delete-only node {i} {req['op']} via {sess_name[k]}: calls {calls}, fragment "
                  f"reads {frag}; want {want} and none")
        note(f"node {i} touched only by a delete that found nothing: no LogStore call")

    # ============================================================================================
    section("C. crash: concurrent writers, SIGKILL of the LogStore in the middle, restart")

    def outcome_request(req):
        if req["op"].startswith("obj_"):
            return {"op": "obj_get", "id": req["id"]}
        return {"op": "assoc_get", "id": req["src"], "type": req["type"], "ids": [req["dst"]],
                "low": INT64_MIN, "high": INT64_MAX}

    def state_after(req):
        """What outcome_request(req) answers if req took effect (from a scratch copy of the model
        state of that one key)."""
        if req["op"] == "obj_delete":
            return None
        if req["op"].startswith("obj_"):
            return {"id": req["id"], "properties": normalize(req["properties"])}
        if req["op"] == "assoc_delete":
            return []
        return [{"src": req["src"], "type": req["type"], "dst": req["dst"],
                 "timestamp": req["timestamp"], "properties": normalize(req["properties"])}]

    def state_now(req):
        if req["op"].startswith("obj_"):
            i = req["id"]
            return {"id": i, "properties": dict(model.nodes[i])} if i in model.nodes else None
        e = model.edge(req["src"], req["type"], req["dst"])
        return [dict(e)] if e else []

    def run_writers(streams, label, action, trigger, pace=0.0):
        """Runs one writer session per stream concurrently (`pace` s between requests); calls
        action() once `trigger` of all requests were answered. Returns [(req, answer, state
        before, state after)]."""
        total = sum(len(s) for s in streams)
        done = [0]
        lock = threading.Lock()
        results = []
        ws = [Session(aggs[w % 2], f"{label}-writer{w}", SEED + 100 + w) for w in range(len(streams))]
        befores = [[(q, state_now(q), state_after(q)) for q in s] for s in streams]

        slowest = [0.0, None, None, 0.0]
        timeline = open(os.path.join(TMP, f"timeline-{label}.txt"), "w")

        def writer(w):
            for q, before, after in befores[w]:
                t1 = time.monotonic()
                got = ws[w].call(q)
                secs = time.monotonic() - t1
                with lock:
                    results.append((q, got, before, after))
                    done[0] += 1
                    if secs > slowest[0]:
                        slowest[:] = [secs, q, got, t1 - t]
                    timeline.write(f"{t1 - t:8.3f} {secs:7.3f} w{w} {short(q, 100)} -> {short(got, 200)}\n")
                if "ok" not in got:
                    time.sleep(0.02)
                elif pace:
                    time.sleep(pace)
        threads = [threading.Thread(target=writer, args=(w,)) for w in range(len(streams))]
        t = time.monotonic()
        for th in threads:
            th.start()
        while done[0] < trigger * total and any(th.is_alive() for th in threads):
            time.sleep(0.002)
        at = done[0]
        action()
        note(f"{label}: kill and restart done {time.monotonic() - t:.2f} s after the writers started")
        for th in threads:
            th.join()
        timeline.close()
        for s in ws:
            s.close()
            sessions_open.remove(s)
        note(f"{label}: {len(streams)} writers, {total} writes in {time.monotonic() - t:.2f} s; the "
             f"kill came after {at} answers; slowest write {slowest[0]:.2f} s (at {slowest[3]:.2f} s): "
             f"{short(slowest[1], 150)} -> {short(slowest[2], 200)}")
        return results

    def verify_outcomes(results, label):
        """Acknowledged: present exactly. Unacknowledged: exactly the old or the new state. The
        model takes what happened."""
        counts = defaultdict(int)
        for k, (q, got, before, after) in enumerate(results):
            oreq = outcome_request(q)
            seen = sess[k % 2].call(oreq)
            if "ok" in got:
                counts["acknowledged"] += 1
                if q["op"].endswith("delete"):
                    want_answer = {"ok": {"deleted": bool(before)}}
                elif q["op"] == "assoc_add":
                    want_answer = {"ok": {"replaced": bool(before)}}
                else:
                    want_answer = {"ok": None}
                check(got == want_answer, f"{label}: {short(q, 200)} answered {short(got)}")
                if not check(seen == {"ok": after},
                             f"{label}: ACKNOWLEDGED {short(q, 200)} is not there: {short(seen)}; "
                             f"want {short(after)} (before: {short(before)})"):
                    continue
            else:
                code = got.get("error", {}).get("code")
                check(code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"),
                      f"{label}: unacknowledged {short(q, 200)}: {short(got)} (want UNAVAILABLE or "
                      f"DEADLINE_EXCEEDED)")
                if seen == {"ok": after} and after != before:
                    counts["unacknowledged, present"] += 1
                elif seen == {"ok": before}:
                    counts["unacknowledged, absent"] += 1
                    continue
                else:
                    check(False, f"{label}: unacknowledged {short(q, 200)} left a HALF state: "
                                 f"{short(seen)}; want {short(before)} (not applied) or {short(after)}")
                    continue
            model.write(q)
        note(f"{label}: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
        return counts

    crng = random.Random(SEED + 3)
    live_keys = sorted((s, t, d) for (s, t), m in model.edges.items() for d in m)
    crng.shuffle(live_keys)
    W, PER = 4, 260
    streams = [[] for _ in range(W)]
    up_keys = live_keys[:W * 45]
    used = set(up_keys)
    for w in range(W):
        for k in range(PER):
            x = crng.random()
            if x < 0.17 and up_keys:
                s, t, d = up_keys.pop()
                q = {"op": "assoc_add", "src": s, "type": t, "dst": d}
            elif x < 0.3:
                streams[w].append({"op": "obj_add", "id": 50_000_000 + w * 100_000 + k,
                                   "properties": node_props(crng)})
                continue
            else:
                q = {"op": "assoc_add", "src": pick_src(crng), "type": crng.choice(TYPES),
                     "dst": 40_000_000 + w * 100_000 + k}
            q["timestamp"] = timestamp(crng)
            q["properties"] = edge_props(crng)
            streams[w].append(q)
    crash_argv = [None]

    def crash():
        crash_argv[0] = kill_logstore(signal.SIGKILL)
        restart_logstore(crash_argv[0], "C")

    results = run_writers(streams, "C", crash, 0.35)
    counts = verify_outcomes(results, "C")
    check(counts["acknowledged"] > 0 and (counts["unacknowledged, present"] +
                                          counts["unacknowledged, absent"]) > 0,
          f"C: both acknowledged and failed writes: {dict(counts)}")
    check_logstore_state("C after recovery")
    full_comparison("after the crash")

    # ============================================================================================
    section("C2. racing writers on the same nodes and edge keys")
    race_ids = [70_000_000 + k for k in range(60)]
    race_keys = [(HOT[k % 3], 9, 71_000_000 + k) for k in range(60)]
    rs = [Session(aggs[w % 2], f"race{w}", SEED + 300 + w) for w in range(3)]
    answers = [[] for _ in range(3)]

    def racer(w):
        for k in range(60):
            answers[w].append(rs[w].call({"op": "obj_add", "id": race_ids[k],
                                          "properties": {"name": f"writer {w}", "tag": str(k)}}))
            s_, t_, d_ = race_keys[k]
            answers[w].append(rs[w].call({"op": "assoc_add", "src": s_, "type": t_, "dst": d_,
                                          "timestamp": 1000 + w, "properties": {"w": f"writer {w}"}}))
    t = time.monotonic()
    threads = [threading.Thread(target=racer, args=(w,)) for w in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for x in rs:
        x.close()
        sessions_open.remove(x)
    wins = defaultdict(int)
    for k in range(60):
        node_ans = [answers[w][2 * k] for w in range(3)]
        winners = [w for w in range(3) if node_ans[w] == {"ok": None}]
        losers = [w for w in range(3) if node_ans[w].get("error", {}).get("code") == "ALREADY_EXISTS"]
        if check(len(winners) == 1 and len(losers) == 2,
                 f"C2: 3 racing obj_add of {race_ids[k]}: {short(node_ans)} (want one ok, two "
                 f"ALREADY_EXISTS)"):
            w = winners[0]
            wins[w] += 1
            model.write({"op": "obj_add", "id": race_ids[k],
                         "properties": {"name": f"writer {w}", "tag": str(k)}})
        got = sess[k % 2].call({"op": "obj_get", "id": race_ids[k]})
        check(got == model.run({"op": "obj_get", "id": race_ids[k]}),
              f"C2: node {race_ids[k]} after the race: {short(got)} (winner {winners})")
        # A new key: exactly one of the racing upserts created it, the others replaced it.
        check(sorted(json.dumps(answers[w][2 * k + 1]) for w in range(3)) ==
              sorted([json.dumps({"ok": {"replaced": False}})] +
                     [json.dumps({"ok": {"replaced": True}})] * 2),
              f"C2: racing assoc_add of {race_keys[k]}: {[answers[w][2 * k + 1] for w in range(3)]}")
        s_, t_, d_ = race_keys[k]
        got = sess[k % 2].call({"op": "assoc_get", "id": s_, "type": t_, "ids": [d_],
                                "low": INT64_MIN, "high": INT64_MAX})
        versions = [{"src": s_, "type": t_, "dst": d_, "timestamp": 1000 + w,
                     "properties": {"w": f"writer {w}"}} for w in range(3)]
        if check("ok" in got and len(got["ok"]) == 1 and got["ok"][0] in versions,
                 f"C2: edge {race_keys[k]} after 3 racing upserts: {short(got)} (want exactly one "
                 f"of the writers' versions)"):
            e = got["ok"][0]
            model.write({"op": "assoc_add", "src": s_, "type": t_, "dst": d_,
                         "timestamp": e["timestamp"], "properties": e["properties"]})
    note(f"C2: 3 writers raced on 60 new ids and 60 edge keys in {time.monotonic() - t:.2f} s; "
         f"obj_add wins per writer {dict(wins)}")
    for h in HOT[:3]:
        req = {"op": "assoc_range", "id": h, "type": 9, "pos": 0, "limit": INT64_MAX}
        got = sess[0].call(req)
        check(acceptable(got, model.run(req)), f"C2: {req}: {short(got)}")

    # ============================================================================================
    section("D. SIGKILL of the LogStore during a compaction")
    drng = random.Random(SEED + 4)
    bulk_src = [60_000_000 + j for j in range(10)] + PROTECTED[:2]
    alphabet = "abcdefghijklmnopqrstuvwxyz ,\"\n日é"
    # 6 concurrent writers on one aggregator, which has one write_batch in flight: its writes go to
    # the LogStore several per batch.
    bulk = [[] for _ in range(6)]
    for k in range(330):
        bulk[k % 6].append({"op": "assoc_add", "src": bulk_src[k % len(bulk_src)], "type": k % 3,
                            "dst": 61_000_000 + k, "timestamp": 1_700_000_000 + k % 7,
                            "properties": {"w": "".join(drng.choice(alphabet) for _ in range(8000)),
                                           "data": str(k)}})
    t = time.monotonic()
    batched_before = (raw_status(aggs[0]) or {}).get("write_batches", {})
    bs = [Session(aggs[0], f"bulk{w}", SEED + 200 + w) for w in range(len(bulk))]
    bad = [0]

    def bulk_writer(w):
        for q in bulk[w]:
            got = bs[w].call(q)
            if got != {"ok": {"replaced": False}}:  # every key is new
                bad[0] += 1
                check(False, f"D: bulk write {q['src']} {q['dst']}: {short(got)}")
    threads = [threading.Thread(target=bulk_writer, args=(w,)) for w in range(len(bulk))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for s in bs:
        s.close()
        sessions_open.remove(s)
    batched_after = (raw_status(aggs[0]) or {}).get("write_batches", {})
    d_writes = batched_after.get("writes", 0) - batched_before.get("writes", 0)
    d_batches = batched_after.get("batches", 0) - batched_before.get("batches", 0)
    check(d_writes == 330 and 0 < d_batches < d_writes,
          f"D: aggregator write batches for 330 bulk writes: {d_batches} batches of {d_writes} "
          f"writes (want 330 writes, fewer batches)")
    note(f"D: {len(bulk)} writers on one aggregator: {d_writes} writes in {d_batches} write_batch calls")
    for w in range(len(bulk)):
        for q in bulk[w]:
            model.write(q)
    note(f"D: {sum(len(b) for b in bulk)} edges with 8 KB values written in {time.monotonic() - t:.2f} s")

    # Writers during the compaction: overwrite and delete frozen data (the bulk edges), older log
    # shards' and base data; new edges and nodes; obj_update of existing nodes.
    frozen_gen = model.gen
    # Readers during the compaction and the crash: nodes no writer of D touches (two bulk nodes
    # whose data is in the generation being compacted, and non-hot nodes with older log data).
    readers = bulk_src[8:10] + sorted(i for i in model.ptrs if i not in HOT and i in model.nodes and
                                      model.types.get(i) and i < 50_000_000)[:4]
    d_hot = [h for h in HOT if h not in readers]
    bulk_keys = [(q["src"], q["type"], q["dst"]) for b in bulk for q in b if q["src"] not in readers]
    drng.shuffle(bulk_keys)
    older = [k for k in sorted((s, t, d) for (s, t), m in model.edges.items() for d in m)
             if k not in used and k[2] < 61_000_000 and k[0] not in readers]
    drng.shuffle(older)
    upd_nodes = sorted(i for i in model.nodes if i < 50_000_000 and i not in readers)
    drng.shuffle(upd_nodes)
    streams = [[] for _ in range(2)]
    for w in range(2):
        for k in range(200):
            x = drng.random()
            if x < 0.25 and bulk_keys:
                s, t, d = bulk_keys.pop()
                if drng.random() < 0.5:
                    streams[w].append({"op": "assoc_delete", "src": s, "type": t, "dst": d})
                    continue
                q = {"op": "assoc_add", "src": s, "type": t, "dst": d}
            elif x < 0.45 and older:
                s, t, d = older.pop()
                if drng.random() < 0.4:
                    streams[w].append({"op": "assoc_delete", "src": s, "type": t, "dst": d})
                    continue
                q = {"op": drng.choice(["assoc_add", "assoc_update"]), "src": s, "type": t, "dst": d}
            elif x < 0.6 and upd_nodes:
                streams[w].append({"op": "obj_update", "id": upd_nodes.pop(),
                                   "properties": node_props(drng)})
                continue
            elif x < 0.7:
                streams[w].append({"op": "obj_add", "id": 55_000_000 + w * 100_000 + k,
                                   "properties": node_props(drng)})
                continue
            else:
                q = {"op": "assoc_add", "src": drng.choice(d_hot), "type": drng.choice(TYPES),
                     "dst": 45_000_000 + w * 100_000 + k}
            q["timestamp"] = timestamp(drng)
            q["properties"] = edge_props(drng)
            streams[w].append(q)
    mid = {}

    def crash_in_compaction():
        ls_ep = logstore_member()["endpoint"]
        comp = subprocess.Popen([ZIPG, "admin", "compact", "--connect", aggs[0]],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        t = time.monotonic()
        frozen = None
        while time.monotonic() - t < 20:
            st = raw_status(ls_ep)
            if st and st["logstore"]["frozen"] is not None:
                frozen = st["logstore"]["frozen"]
                break
            time.sleep(0.002)
        mid["frozen_seen"] = frozen
        mid["freeze_secs"] = time.monotonic() - t
        # Into the build of the ~3 MB generation (~0.4 s), but not past it: seeing the freeze
        # can take 0.2 s on a busy machine (the suite under ASan once saw it 0.17 s late, slept
        # 0.12 s more and killed a LogStore that had already installed the compaction).
        time.sleep(0.04)
        argv = kill_logstore(signal.SIGKILL)
        with open(LOGSTORE_STATE) as f:
            mid["state"] = json.load(f)
        out, err = comp.communicate(timeout=60)
        mid["compact"] = (comp.returncode, out.decode("utf-8", "replace")[-300:],
                          err.decode("utf-8", "replace")[-300:])
        restart_logstore(argv, "D")

    read_reqs = []
    for i in readers:
        read_reqs.append({"op": "obj_get", "id": i})
        read_reqs.append({"op": "get_neighbor_ids", "id": i})
        for t in sorted(model.types.get(i, ())):
            read_reqs.append({"op": "assoc_range", "id": i, "type": t, "pos": 0, "limit": INT64_MAX})
            read_reqs.append({"op": "assoc_count", "id": i, "type": t})
    read_wants = [model.run(q) for q in read_reqs]
    stop_reading = threading.Event()
    reads = defaultdict(int)

    def reader(k):
        # Reader 0 reads everything, paced (a log-shard read of a bulk node holds the LogStore's
        # data lock for ~0.1 s: see section F); reader 1 only the small nodes, unpaced.
        rsess = Session(aggs[k], f"D-reader{k}", SEED + 400 + k)
        mine = [j for j, q in enumerate(read_reqs) if k == 0 or q["id"] not in bulk_src]
        j = 0
        while not stop_reading.is_set():
            q, want = read_reqs[mine[j % len(mine)]], read_wants[mine[j % len(mine)]]
            got = rsess.call(q)
            j += 1
            if k == 0:
                time.sleep(0.03)
            if got.get("error", {}).get("code") == "UNAVAILABLE":
                reads["UNAVAILABLE"] += 1
                time.sleep(0.01)
            elif check(acceptable(got, want), f"D: read during compaction / crash: {short(q, 200)}\n"
                                              f"      got  {short(got)}\n      want {short(want)}"):
                reads["right"] += 1
            else:
                reads["wrong"] += 1
        rsess.close()
        sessions_open.remove(rsess)
    read_threads = [threading.Thread(target=reader, args=(k,)) for k in range(2)]
    for th in read_threads:
        th.start()
    results = run_writers(streams, "D", crash_in_compaction, 0.2, pace=0.003)
    stop_reading.set()
    for th in read_threads:
        th.join()
    note(f"D: concurrent reads of {len(readers)} nodes not written in D: {dict(reads)}")
    note(f"D: frozen generation {mid.get('frozen_seen')} seen {mid.get('freeze_secs', 0):.3f} s after "
         f"admin compact; STATE at the kill: {mid.get('state')}; admin compact: {mid.get('compact')}")
    check(mid.get("frozen_seen") == frozen_gen,
          f"D: the compaction froze generation {mid.get('frozen_seen')}, want {frozen_gen}")
    check(mid.get("state", {}).get("logs") == [frozen_gen, frozen_gen + 1],
          f"D: killed in the middle of the compaction (STATE lists logs [{frozen_gen}, "
          f"{frozen_gen + 1}]): {mid.get('state')}")
    check(mid.get("compact", (0,))[0] != 0, f"D: the interrupted admin compact fails: {mid.get('compact')}")
    model.exact = False  # writes around the freeze: their generation is not known exactly
    model.gen = frozen_gen + 1
    counts = verify_outcomes(results, "D")
    full_comparison("after the kill during compaction (recovered, compaction resuming)")
    t = time.monotonic()
    ls = None
    while time.monotonic() - t < 60:
        ls = logstore_status()
        if ls and ls["frozen"] is None and frozen_gen in [x["generation"] for x in ls["log_shards"]]:
            break
        time.sleep(0.05)
    model.shard_gens.append(frozen_gen)
    check(ls and ls["frozen"] is None and [x["generation"] for x in ls["log_shards"]] == model.shard_gens,
          f"D: the restarted LogStore finishes the interrupted compaction: {short(ls, 600)}")
    note(f"D: the interrupted compaction of generation {frozen_gen} completed "
         f"{time.monotonic() - t:.2f} s after recovery: {short((ls or {}).get('last_compaction'), 300)}")
    with open(LOGSTORE_STATE) as f:
        st = json.load(f)
    check(st.get("logs") == [frozen_gen + 1] and st.get("shards") == model.shard_gens,
          f"D: STATE after the resumed compaction: {st}")
    check_logstore_state("D after the resumed compaction")
    full_comparison("after the resumed compaction")

    # ============================================================================================
    section("F. writes while two clients read a node whose data is in a log shard")
    # Node bulk_src[8] (33 edges with 8 KB values, not written since section D's bulk load) is in
    # the log shard of generation frozen_gen: every read of it makes the LogStore extract ~270 KB
    # from that shard in Fragment(). Writes of other nodes must still be answered promptly.
    big = bulk_src[8]
    stop_f = threading.Event()
    f_reads = defaultdict(int)
    f_req = {"op": "get_neighbor_ids", "id": big}
    f_want = model.run(f_req)
    check(len(f_want["ok"]) >= 25, f"F: node {big} has its bulk edges: {short(f_want)}")

    def f_reader(k):
        rsess = Session(aggs[k], f"F-reader{k}", SEED + 500 + k)
        while not stop_f.is_set():
            got = rsess.call(f_req)
            if check(acceptable(got, f_want), f"F: reader {k}: {f_req}: {short(got)}"):
                f_reads["right"] += 1
            else:
                f_reads["wrong"] += 1
        rsess.close()
        sessions_open.remove(rsess)
    f_threads = [threading.Thread(target=f_reader, args=(k,)) for k in range(2)]
    for th in f_threads:
        th.start()
    time.sleep(0.3)
    fw = Session(aggs[0], "F-writer", SEED + 510, extra=("--timeout-ms", "3000"))
    writes0 = logstore_status()["writes"]
    f_results, lat = [], []
    for k in range(5):
        q = {"op": "assoc_add", "src": HOT[0], "type": 7, "dst": 80_000_000 + k, "timestamp": k,
             "properties": {"w": "F"}}
        before, after = state_now(q), state_after(q)
        t1 = time.monotonic()
        got = fw.call(q)
        lat.append(time.monotonic() - t1)
        f_results.append((q, got, before, after))
        check("ok" in got and lat[-1] < 2.0,
              f"F: WRITE STARVED by 2 concurrent readers of log-shard node {big}: assoc_add "
              f"({q['src']}, 7, {q['dst']}) answered {short(got, 200)} after {lat[-1]:.2f} s (want ok "
              f"within 2 s; LogStore::Write waits for data_mu_ exclusively while LogStore::Fragment "
              f"holds it shared for every read, logstore/logstore.cc)")
    fw.close()
    sessions_open.remove(fw)
    stop_f.set()
    for th in f_threads:
        th.join()
    note(f"F: 5 writes (another node) during 2 readers' {dict(f_reads)} reads of node {big}: "
         f"latencies {', '.join(f'{x:.2f}' for x in lat)} s")
    # A write the client gave up on (DEADLINE_EXCEEDED) may still be running in the LogStore:
    # let every one of them finish before looking at the outcomes.
    t = time.monotonic()
    while time.monotonic() - t < 15 and logstore_status()["writes"] < writes0 + len(f_results):
        time.sleep(0.05)
    note(f"F: the LogStore finished the {logstore_status()['writes'] - writes0} writes "
         f"{time.monotonic() - t:.2f} s after the readers stopped")
    verify_outcomes(f_results, "F")
    for req in ({"op": "assoc_range", "id": HOT[0], "type": 7, "pos": 0, "limit": INT64_MAX}, f_req):
        got = sess[1].call(req)
        check(acceptable(got, model.run(req)), f"F: {req}: {short(got)}")

    # ============================================================================================
    section("G. zipg query --batch --write-batch: writes go as write_batch calls, each answered")
    # 400 random lines (writes of every kind, bad ones among them, and reads): answered one line
    # each, in order, exactly as the model applies them one after the other; the runs of writes
    # reach the LogStore in far fewer calls than writes.
    grng = random.Random(SEED + 700)
    g_reqs = [write_request(grng) if grng.random() < 0.8 else read_request(grng) for _ in range(400)]
    g_reqs.insert(7, {"op": "assoc_add", "src": HOT[0], "type": 2, "dst": "not an int",
                      "timestamp": 1, "properties": {}})
    g_file = os.path.join(TMP, "g-batch.jsonl")
    with open(g_file, "w", encoding="utf-8") as f:
        for q in g_reqs:
            f.write(json.dumps(q) + "\n")
    # The aggregator serves one call per read line and one write_batch per run of up to 64
    # consecutive write lines.
    want_calls, run = 0, 0
    for q in g_reqs:
        if q["op"] in WRITE_OPS:
            run += 1
            if run == 64:
                want_calls, run = want_calls + 1, 0
        else:
            want_calls += 1 + (1 if run else 0)
            run = 0
    want_calls += (1 if run else 0) + 1  # + 1: zipg::Connect's check that the aggregator answers
    calls_before = raw_status(aggs[1])["calls"]
    r = subprocess.run([ZIPG, "query", "--connect", aggs[1], "--batch", g_file, "--write-batch",
                        "64"], capture_output=True, timeout=300)
    calls = raw_status(aggs[1])["calls"] - calls_before - 1  # -1: this status call
    lines = r.stdout.decode("utf-8").split("\n")[:-1]
    n_writes = sum(1 for q in g_reqs if q["op"] in WRITE_OPS)
    if check(r.returncode == 0 and len(lines) == len(g_reqs),
             f"G: {len(lines)} answers for {len(g_reqs)} lines, exit {r.returncode}: "
             f"{r.stderr[-300:]!r}"):
        wrong = 0
        for q, line in zip(g_reqs, lines):
            got = json.loads(line)
            if any(not isinstance(q.get(k, 0), int) for k in ("id", "src", "type", "dst")):
                want = {"error": "INVALID_ARGUMENT"}  # refused before it is sent
            else:
                want = model.write(q) if q["op"] in WRITE_OPS else model.run(q)
            if not check(acceptable(got, want), f"G: {short(q)}: {short(got)}, want {short(want)}"):
                wrong += 1
        note(f"G: {len(g_reqs)} lines ({n_writes} writes), {wrong} wrong, in {calls} calls to the "
             f"aggregator")
        check(calls == want_calls, f"G: {calls} aggregator calls, want {want_calls} (a read each, a "
                                   f"write_batch per run of up to 64 writes)")
    full_comparison("after the batched writes")

    # ============================================================================================
    section("E. a last compaction, full comparison through both aggregators, zipg local stop")
    # The size threshold: restart the LogStore with --memtable-mb 1 (its command line otherwise
    # unchanged) and write ~1.3 MB: one compaction starts by itself.
    argv = kill_logstore(signal.SIGTERM)
    argv = list(argv)
    argv[argv.index("--memtable-mb") + 1] = "1"
    restart_logstore(argv, "E (--memtable-mb 1)")
    ls0 = logstore_status()
    erng = random.Random(SEED + 6)
    t = time.monotonic()
    for k in range(160):
        req = {"op": "assoc_add", "src": 62_000_000 + k % 4, "type": 0, "dst": 63_000_000 + k,
               "timestamp": k, "properties": {"w": "".join(erng.choice(alphabet) for _ in range(8000))}}
        want = model.write(req)
        got = sess[k % 2].call(req)
        check(acceptable(got, want), f"E: bulk {short(req, 100)}: {short(got)}")
    ls = None
    while time.monotonic() - t < 60:
        ls = logstore_status()
        if ls and ls["compactions"] > ls0["compactions"] and ls["frozen"] is None:
            break
        time.sleep(0.05)
    auto_gen = model.gen
    check(ls and ls["compactions"] == ls0["compactions"] + 1 and ls["generation"] == auto_gen + 1 and
          [x["generation"] for x in ls["log_shards"]] == model.shard_gens + [auto_gen],
          f"E: one compaction on the size threshold: before {short(ls0, 300)}; after {short(ls, 600)}")
    model.shard_gens.append(auto_gen)
    model.gen = auto_gen + 1
    note(f"E: 160 writes of 8 KB with --memtable-mb 1: generation {auto_gen} compacted by itself "
         f"({short((ls or {}).get('last_compaction'), 250)}) {time.monotonic() - t:.2f} s after the "
         f"first write")
    check_logstore_state("E after the size-triggered compaction")
    full_comparison("after the size-triggered compaction")
    # A few more writes on hot nodes, so the last generation is not empty.
    for k in range(60):
        req = write_request(rnd)
        want = model.write(req)
        got = sess[k % 2].call(req)
        check(acceptable(got, want), f"E: {short(req, 300)}\n      got  {short(got)}\n      want {short(want)}")
    compact("E", agg=1, exact_counts=False)
    flt_reqs = []
    for i in HOT + sorted(model.nodes)[:40]:
        for name, v in sorted(model.nodes.get(i, {}).items()):
            flt_reqs.append({"op": "get_node_ids", "properties": {name: v}})
    flt_reqs.append({"op": "get_node_ids", "properties": {"fresh": "red"}})
    bad = run_list(flt_reqs, "E get_node_ids")
    check(bad == 0, f"E: {bad} of {len(flt_reqs)} get_node_ids differ")
    full_comparison("final", both=True)

    for s in list(sessions_open):
        s.close()
        sessions_open.remove(s)
    mine = [p for p in children if alive(p)]
    left = kill_and_wait(mine, signal.SIGTERM, 10)
    check(not left, f"the restarted LogStore stops on SIGTERM: {left}")
    pids = [p["pid"] for p in state["processes"]]
    t = time.monotonic()
    r = zipg("local", "stop", "--store", STORE, timeout=120)
    check(r.returncode == 0, f"local stop: exit {r.returncode}: {r.stderr[-500:]!r}")
    note(f"local stop: {time.monotonic() - t:.2f} s")
    left = [p for p in pids if alive(p)] + ours()
    check(not left, f"processes left after stop: {[(p, cmdline(p)) for p in left]}")


cluster_procs.run_test("writes_test", main, report, cleanup)
