#!/usr/bin/python3
"""End-to-end test of snapshot reads (docs/consistency.md, "Snapshots"; the contract's
"Consistency and snapshots") on real local clusters, against the plain-Python model of the
contract with writes (write_model.WriteModel): a copy of the model is kept for every snapshot the
test takes, and every read at that snapshot must answer exactly what that copy answers.

The store: `zipg gen graph --nodes 300 --properties 4 --degree 5` compressed into 2 shards.

A. Embedded (`zipg query --store DIR`, read-only): `snapshot` answers {"seq": 0}; reads with `at`
   (0, small, huge; --at and the batch's "at") answer the store; a negative `at` is
   INVALID_ARGUMENT.
B. The main cluster: `zipg local start --servers 2 --replicas 2 --aggregators 2 --logstores 2
   --lease-ttl 2 --memtable-mb 1 --merge-width 2 --merge-ratio 100 --rebuild-delta 0
   --snapshot-retention 900`. Rounds of random writes (obj_add / obj_update / obj_delete /
   assoc_add / assoc_update / assoc_delete) on a few hot ids (base nodes, whose base properties
   and edges get replaced and deleted, and new ids), through both aggregators, one client, one
   write at a time (so the model after every acknowledged write is exact); a snapshot (through
   either aggregator) every few writes, with a copy of the model. During the rounds, in turn: a
   compaction, a compaction followed by a log shard merge, a rebuild of the base shards
   (`zipg admin rebuild`; these three run while the writes go on), kill -9 of the LogStore leader
   (the standby takes over; writes continue, an unknown outcome is resolved by sending the write
   again; the old leader restarted rejoins as the standby), then a compaction and a rebuild on the
   new leader. After the merge, the rebuild and the failover, and at the end, every snapshot taken
   so far is read through both aggregators: obj_get, get_node_property, get_neighbor_ids (plain,
   by type, filtered) of the hot ids; assoc_range / assoc_count / get_edge_record / assoc_get /
   assoc_time_range / get_edge_range / get_edge_data of their (src, type) records; get_node_ids
   and search_node_ids of values the test writes (and base values it overwrites); bfs and rpq from
   hot ids and an rpq over every source; and the same reads without `at` against the model now.
   Snapshot sequences must never go back, and must grow over writes. A wrong answer is reported
   with the snapshot's seq, the events before it and since, and the writes to its node or record
   around the snapshot.
C. A seq not reached yet: reads at (last snapshot + 2**40) with `--timeout-ms 1000` are
   DEADLINE_EXCEEDED after waiting for it (each of the two replicas waits half the time it is
   given, so that a retry on the other fits: about 0.75 s; docs/consistency.md), and the cluster
   answers at once afterwards; a read at
   (snapshot + 3), started before the writes, waits, and once 5 single-edge writes are
   acknowledged answers exactly the first 3 (docs/consistency.md: seq = update id, one per write,
   generation << 32 | index + 1; a write first, so that the snapshot is in the live generation).
D. Traversals without `at` during writes: a writer thread keeps adding A->X and then B->X, and
   deleting B->X and then A->X, for new X (so B's targets are always a subset of A's), on the
   chain R->A->B; bfs and rpq from R (through both aggregators, no `at`) must each equal the model
   at one state between the last write acknowledged before the call and the first write sent
   after it returned (a traversal that read A and B at different moments would show a B target
   that A lacks). A compaction runs in the middle. The control: a bfs put together from separate
   reads of R, A and B (what a traversal without a snapshot does) is told apart now and then
   (counted, not checked: it depends on timing).
E. `zipg local stop` leaves no process.
F. An expired snapshot, on a second small cluster with `--snapshot-retention 2`: a snapshot read
   at once answers; after 3.5 s of writes (the horizon moves with applied writes) every kind of
   read at it is FAILED_PRECONDITION, and a fresh snapshot answers the model.

Usage: snapshot_test.py [--long] PATH/TO/zipg        (exit status 0 if everything passed)
  --long   more rounds (12: two of each event, and a second failover back to the restarted old
           leader, after which a snapshot taken before that LogStore's restart may also be
           FAILED_PRECONDITION: docs/consistency.md, "Snapshots", what is given up and when),
           more writes per round, 20 s of traversals during writes.
Environment: ZIPG_SNAPSHOT_SEED=N changes the seed; ZIPG_SNAPSHOT_PLAN=compact,rebuild,failover
(a comma-separated list of rounds, each of compact, compact+merge, rebuild, compact+rebuild,
failover, or none) replaces the rounds' events; ZIPG_KEEP_TEST_DIR=1 keeps the test directory
(cluster logs in store/run/)."""
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict

LONG = "--long" in sys.argv[1:]
if LONG:
    sys.argv.remove("--long")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cluster_procs  # noqa: E402
import write_model  # noqa: E402
from graph_model import INT64_MAX, Model, load_model  # noqa: E402
from write_model import WriteModel, acceptable, short  # noqa: E402

SEED = int(os.environ.get("ZIPG_SNAPSHOT_SEED", "20261128"))
T = cluster_procs.TestSetup("snapshot_test", __doc__)
check, section, note = T.check, T.section, T.note
TMP, ZIPG, STORE, procs, report = T.tmp, T.zipg, T.store, T.procs, T.report
RET_TMP = os.path.join(TMP, "retention")
os.makedirs(RET_TMP)
RET_STORE = os.path.join(RET_TMP, "store")
procs_ret = cluster_procs.Procs("snapshot_test (retention cluster)", RET_TMP, ZIPG, RET_STORE)

SHARDS = 2
TYPES = [0, 1, 2, 3, 4]           # zipg gen graph's edge types
UNKNOWN = ("UNAVAILABLE", "DEADLINE_EXCEEDED")  # a write's outcome is unknown (consistency.md)
if LONG:
    PLAN = ["compact", "compact+merge", "rebuild", "failover", "compact+rebuild", "compact",
            "compact+merge", "rebuild", "failover", "compact", "rebuild", "compact+merge"]
    WRITES, SNAP_EVERY, TRAVERSAL_SECONDS = 150, 15, 20.0
else:
    PLAN = ["compact", "compact+merge", "rebuild", "failover", "compact+rebuild"]
    WRITES, SNAP_EVERY, TRAVERSAL_SECONDS = 60, 12, 5.0
if os.environ.get("ZIPG_SNAPSHOT_PLAN"):  # e.g. "compact,rebuild,failover": another order
    PLAN = os.environ["ZIPG_SNAPSHOT_PLAN"].split(",")
# Every snapshot so far is read after each round with a merge, a rebuild or a failover.
VERIFY_AFTER = {k for k, p in enumerate(PLAN[:-1])
                if "merge" in p or "rebuild" in p or "failover" in p}
DETAILS = 6                         # wrong answers shown in full per stage
SNAPSHOTS_SHOWN = 12                # snapshots with wrong answers described per stage
LATEST = 1 << 30                    # verify()'s key for the reads without `at`
RETENTION = 3600 if LONG else 900   # the main cluster's: every snapshot stays within it
SNAP_VALUES = ["snap-a", "snap-b", "snap-c", "snap-d"]
PAD = 6000                          # an edge value this long now and then: the memtable grows
CHAIN_TYPE = 7                      # D's edges: R -> A -> B, A -> X, B -> X
R_ID, A_ID, B_ID, X_BASE = 8_000_000, 8_000_001, 8_000_002, 8_500_000


def zipg(*args, stdin=None, timeout=120):
    return subprocess.run([ZIPG, *args], capture_output=True, input=stdin, timeout=timeout)


def ask_many(session, reqs):
    """The answers of `session` (a write_model.Session) to reqs, pipelined: the lines are written
    by a thread while the answers are read (the batch answers in order)."""
    if not reqs:
        return []
    lines = [json.dumps(q, ensure_ascii=(k % 2 == 0)).encode("utf-8") + b"\n"
             for k, q in enumerate(reqs)]
    failed = []

    def feed():
        try:
            for line in lines:
                session.p.stdin.write(line)
            session.p.stdin.flush()
        except OSError as e:
            failed.append(e)

    th = threading.Thread(target=feed)
    th.start()
    out = []
    for _ in lines:
        raw = session.p.stdout.readline()
        if not raw:
            break
        try:
            out.append(json.loads(raw))
        except ValueError:
            out.append({"unparsable": raw[:300].decode("utf-8", "replace")})
    th.join()
    session.calls += len(out)
    if len(out) < len(reqs):
        raise RuntimeError(f"session {session.label} ended after {len(out)} of {len(reqs)} "
                           f"answers (exit {session.p.poll()}, {failed})")
    return out


def freeze(model):
    """A copy of `model` that later writes do not change (a WriteModel's property lists and edge
    objects are replaced, never changed in place; its maps are)."""
    m = WriteModel.__new__(WriteModel)
    m.nodes = dict(model.nodes)
    m.edges = {k: dict(v) for k, v in model.edges.items() if v}
    m.types = defaultdict(set, {k: set(v) for k, v in model.types.items() if v})
    m.cache = {}
    return m


def code_of(got):
    return got.get("error", {}).get("code") if isinstance(got, dict) else None


# ------------------------------------------------------------------------------------------------
class Fixture:
    """The generated store, the base model and the ids the test writes to and reads."""

    def __init__(self, rnd):
        gen = os.path.join(TMP, "gen")
        r = zipg("gen", "graph", "--nodes", "300", "--properties", "4", "--degree", "5",
                 "--seed", str(SEED % 1000 + 1), "--out", gen)
        if not check(r.returncode == 0, f"gen graph: {r.stderr[-500:]!r}"):
            raise RuntimeError("zipg gen graph failed")
        self.nodes_csv, self.edges_csv = (os.path.join(gen, "nodes.csv"),
                                          os.path.join(gen, "edges.csv"))
        for store in (STORE, RET_STORE, os.path.join(TMP, "embedded")):
            r = zipg("compress", "--nodes", self.nodes_csv, "--edges", self.edges_csv, "--out",
                     store, "--shards", str(SHARDS), timeout=300)
            if not check(r.returncode == 0, f"compress into {store}: {r.stderr[-500:]!r}"):
                raise RuntimeError("zipg compress failed")
        base = self.model()
        srcs = sorted({s for s, _ in base.edges})
        multi = [s for s in srcs if len(base.types[s]) >= 2 and s in base.nodes]
        self.hot = sorted(rnd.sample(multi, 7))
        self.new = [7_000_001 + k for k in range(4)]
        self.writable = self.hot + self.new
        others = sorted(set(base.nodes) - set(self.hot))
        self.dsts = sorted(set(self.writable) | set(rnd.sample(others, 8)))
        self.controls = [others[0], others[len(others) // 2]]  # read, never written
        self.read_ids = self.hot + self.new + self.controls + [999_999]
        # Base values of the hot nodes: written to other nodes too, so that the answers of
        # get_node_ids / search on them change (base entries deleted, new ones added).
        self.base_values = [base.nodes[i]["p00"] for i in self.hot if base.nodes[i].get("p00")]
        stamps = sorted(e["timestamp"] for m in base.edges.values() for e in m.values())
        self.t_lo, self.t_hi = stamps[0], stamps[-1]
        self.stamps = [self.t_lo + (self.t_hi - self.t_lo) * k // 20 for k in range(21)]
        self.reads = self.snapshot_reads()

    def model(self):
        return WriteModel(*load_model(self.nodes_csv, self.edges_csv))

    def snapshot_reads(self):
        """The reads asked at every snapshot (without `at`): the same list for all of them."""
        mid = (self.t_lo + self.t_hi) // 2
        span = (self.t_hi - self.t_lo) // 4
        reqs = []
        for k, i in enumerate(self.read_ids):
            reqs += [{"op": "obj_get", "id": i},
                     {"op": "get_node_property", "id": i},
                     {"op": "get_node_property", "id": i, "properties": ["p00", "tag", "zz"]},
                     {"op": "get_neighbor_ids", "id": i},
                     {"op": "get_neighbor_ids", "id": i, "type": TYPES[k % len(TYPES)]},
                     {"op": "get_neighbor_ids", "id": i,
                      "properties": {"tag": SNAP_VALUES[k % len(SNAP_VALUES)]}}]
            for t in TYPES:
                reqs += [{"op": "assoc_range", "id": i, "type": t, "pos": 0, "limit": INT64_MAX},
                         {"op": "assoc_count", "id": i, "type": t},
                         {"op": "get_edge_record", "id": i, "type": t}]
                v = (k + t) % 5
                if v == 0:
                    reqs.append({"op": "assoc_get", "id": i, "type": t,
                                 "ids": self.dsts[k % 3::3] + [999_999], "low": mid - span,
                                 "high": self.t_hi})
                elif v == 1:
                    reqs.append({"op": "assoc_time_range", "id": i, "type": t, "low": mid - span,
                                 "high": mid + span, "limit": 3})
                elif v == 2:
                    reqs.append({"op": "get_edge_range", "id": i, "type": t, "t_lo": mid - span,
                                 "t_hi": mid + span})
                elif v == 3:
                    reqs.append({"op": "get_edge_data", "id": i, "type": t, "time_order": 1})
                else:
                    reqs.append({"op": "assoc_range", "id": i, "type": t, "pos": 1, "limit": 2})
        for v in SNAP_VALUES:
            reqs.append({"op": "get_node_ids", "properties": {"tag": v}})
        for v in SNAP_VALUES[:2] + self.base_values[:3]:
            reqs.append({"op": "get_node_ids", "properties": {"p00": v}})
        reqs.append({"op": "get_node_ids", "properties": {"p00": SNAP_VALUES[0],
                                                          "tag": SNAP_VALUES[1]}})
        reqs += [{"op": "search_node_ids", "pattern": "snap-"},
                 {"op": "search_node_ids", "pattern": "snap-b", "match": "exact",
                  "property": "tag"},
                 {"op": "search_node_ids", "pattern": "p-c", "match": "suffix"},
                 {"op": "search_node_ids", "pattern": "snap-d", "match": "prefix",
                  "property": "p00"},
                 {"op": "search_node_ids", "pattern": self.base_values[0][:4], "match": "prefix"},
                 {"op": "search_node_ids", "pattern": self.base_values[1][1:5]}]
        reqs += [{"op": "bfs", "id": self.hot[0], "max_depth": 2},
                 {"op": "bfs", "id": self.new[0], "max_depth": 3, "types": [0, 1]},
                 {"op": "bfs", "id": self.hot[1], "max_depth": 3, "limit": 25},
                 {"op": "rpq", "expr": "(0|1)/_*", "sources": [self.hot[2]]},
                 {"op": "rpq", "expr": "_/_", "sources": self.hot[:3] + self.new[:2]},
                 {"op": "rpq", "expr": "4/4"}]
        return reqs


class WriteGen:
    """Random writes on the fixture's writable ids, from the model's current state."""

    def __init__(self, fx, rnd):
        self.fx, self.r = fx, rnd

    def value(self):
        x = self.r.random()
        if x < 0.6:
            return self.r.choice(SNAP_VALUES)
        if x < 0.85:
            return self.r.choice(self.fx.base_values)
        return ""  # stored as absent

    def node_props(self):
        names = self.r.sample(["p00", "tag", "p01", "p03"], self.r.randint(1, 3))
        return {n: self.value() for n in names}

    def edge_props(self):
        x = self.r.random()
        if x < 0.15:
            return {"data": "pad " + "x" * PAD}
        if x < 0.5:
            return {"data": self.r.choice(SNAP_VALUES + [""])}
        if x < 0.8:
            return {"data": self.r.choice(SNAP_VALUES), "w": str(self.r.randrange(100))}
        return {}

    def next(self, model):
        r, fx = self.r, self.fx
        s = r.choice(fx.writable)
        x = r.random()
        if x < 0.30 or (x >= 0.9):
            dst = r.choice(fx.new) if x >= 0.9 else r.choice(fx.dsts)
            return {"op": "assoc_add", "src": s, "type": r.choice(TYPES), "dst": dst,
                    "timestamp": r.choice(fx.stamps), "properties": self.edge_props()}
        if x < 0.52:
            ts = sorted(model.types.get(s, ()))
            exists = ts and r.random() < 0.85
            op = "assoc_delete" if x < 0.45 else "assoc_update"
            if exists:
                t = r.choice(ts)
                d = r.choice(sorted(model.edges[(s, t)]))
            else:
                t, d = r.choice(TYPES), r.choice(fx.dsts)
            q = {"op": op, "src": s, "type": t, "dst": d}
            if op == "assoc_update":
                q.update(timestamp=r.choice(fx.stamps), properties=self.edge_props())
            return q
        if x < 0.75:
            return {"op": "obj_update" if s in model.nodes else "obj_add", "id": s,
                    "properties": self.node_props()}
        if x < 0.82:
            return {"op": "obj_add", "id": s, "properties": self.node_props()}
        return {"op": "obj_delete", "id": s}


# ------------------------------------------------------------------------------------------------
class Snapshots:
    """The snapshots taken, each with the model's copy at that moment and the events before it;
    the events (compactions, merges, rebuilds, failovers) with their times."""

    def __init__(self, t0):
        self.t0 = t0
        self.list = []    # dicts: seq, via, t, model, events (how many events came before)
        self.events = []  # (seconds since t0, text)
        self.writes = []  # (snapshots taken before it, events before it, request)
        self.lock = threading.Lock()

    def log_write(self, q):
        """Notes an acknowledged write (sent again if its outcome was unknown): its place among
        the snapshots and events, for the reports of wrong answers."""
        with self.lock:
            self.writes.append((len(self.list), len(self.events), q))

    def writes_to(self, i, t, k, n=8, marker=None):
        """Lines describing the writes to node i (t None) or record (i, t) around snapshot k: the
        last n before it and the first n after it."""
        def hits(q):
            if q["op"].startswith("obj_"):
                return q["id"] == i
            return q["src"] == i and (t is None or q["type"] == t)
        with self.lock:
            mine = [(s, e, q) for s, e, q in self.writes if hits(q)]
        before = [w for w in mine if w[0] <= k][-n:]
        after = [w for w in mine if w[0] > k][:n]

        def line(w):
            s, e, q = w
            q = dict(q)
            if "properties" in q:
                q["properties"] = {a: (v if len(v) < 40 else v[:12] + f"...({len(v)} chars)")
                                   for a, v in q["properties"].items()}
            return f"before snapshot #{s}, after E{e}: {json.dumps(q)}"
        return ([f"  ... {len(mine) - len(before) - len(after)} more"] if len(mine) > 2 * n
                else []) + [line(w) for w in before] + [f"  -- {marker or f'snapshot #{k}'} --"] + \
            [line(w) for w in after]

    def event(self, text):
        with self.lock:
            self.events.append((time.monotonic() - self.t0, text))
        note(f"event: {text}")

    def add(self, seq, via, model, label):
        with self.lock:
            self.list.append({"seq": seq, "via": via, "t": time.monotonic() - self.t0,
                              "model": freeze(model), "events": len(self.events),
                              "label": label, "wants": None})
            return len(self.list) - 1

    def context(self, k, upto=None):
        """Snapshot k: its seq, when and where it was taken, the events before it and since
        (as E<n>, numbered as in timeline())."""
        s = self.list[k]
        with self.lock:
            upto = len(self.events) if upto is None else upto
            before = [f"E{n + 1}" for n in range(s["events"])]
            after = [f"E{n + 1}" for n in range(s["events"], upto)]
        return (f"snapshot #{k} seq {s['seq']} ({s['seq'] >> 32}:{s['seq'] & 0xFFFFFFFF}) taken "
                f"at {s['t']:.1f}s through agg{s['via']} in {s['label']}, after "
                f"{','.join(before) or 'no event'}, before {','.join(after) or 'no event'}")

    def timeline(self, upto=None):
        with self.lock:
            return "; ".join(f"E{n + 1} at {t:.1f}s: {e}"
                             for n, (t, e) in enumerate(self.events[:upto]))


def main():
    rnd = random.Random(SEED)
    t_start = time.monotonic()
    section("setup: zipg gen graph --nodes 300, compress (2 shards) x3")
    fx = Fixture(rnd)
    note(f"hot ids {fx.hot}, new ids {fx.new}, {len(fx.reads)} reads per snapshot")

    # ---- A ------------------------------------------------------------------------------------
    section("A. embedded: snapshot is {\"seq\": 0}, reads with `at` answer the store")
    embedded(fx)

    # ---- B ------------------------------------------------------------------------------------
    section(f"B. the main cluster; {len(PLAN)} rounds of {WRITES} writes with snapshots; "
            f"events {PLAN}")
    r, state = procs.local_start(check, "--servers", "2", "--replicas", "2", "--aggregators", "2",
                                 "--logstores", "2", "--lease-ttl", "2", "--memtable-mb", "1",
                                 "--merge-width", "2", "--merge-ratio", "100",
                                 "--rebuild-delta", "0", "--snapshot-retention", str(RETENTION),
                                 "--no-verify")
    if state is None:
        return
    aggs = state["aggregators"]
    view = write_model.ClusterView(aggs[0], check)

    def Session(endpoint, label, seed=0, extra=()):
        return write_model.Session(ZIPG, TMP, procs.sessions, endpoint, label, seed, extra)

    sess = [Session(aggs[0], "agg0", SEED + 1), Session(aggs[1], "agg1", SEED + 2)]
    model = fx.model()
    snaps = Snapshots(t_start)
    counters = defaultdict(int)
    gen = WriteGen(fx, random.Random(SEED + 3))
    check(view.wait_in_sync("logstore"), "B: the LogStores are in sync at the start")

    def write(q, k):
        """One write through aggregator k % 2, checked against the model; an unknown outcome
        (UNAVAILABLE, DEADLINE_EXCEEDED: the LogStore leader died) is resolved by sending the
        same write again until it has a definite answer (consistency.md, "What an error means
        for a write"): every write here leaves the same state whether it took effect once or
        twice; only answers that report a change (replaced, deleted, ALREADY_EXISTS of obj_add)
        may differ from the model's then."""
        want = model.write(q)
        got = sess[k % 2].call(q)
        counters["writes"] += 1
        if "ok" in want:
            snaps.log_write(q)
        if acceptable(got, want):
            return
        if code_of(got) not in UNKNOWN:
            check(False, f"write {short(q, 200)} through agg{k % 2}: got {short(got)}, "
                         f"want {want}")
            return
        counters["unknown"] += 1
        deadline = time.monotonic() + 60
        attempt = k
        while code_of(got) in UNKNOWN and time.monotonic() < deadline:
            time.sleep(0.2)
            attempt += 1
            got = sess[attempt % 2].call(q)
            counters["resent"] += 1
        if "error" in want:
            ok = acceptable(got, want)
        elif q["op"] == "obj_add":
            ok = acceptable(got, want) or code_of(got) == "ALREADY_EXISTS"
        else:
            ok = isinstance(got, dict) and "ok" in got
        check(ok, f"write {short(q, 200)}, sent again after an unknown outcome: got "
                  f"{short(got)}, want {want}")

    last_seq = [0]
    wrote_since = [True]

    def snapshot(k, label):
        """A snapshot through aggregator k % 2 (again while UNAVAILABLE), with the model's copy;
        checks that sequences never go back and grow over writes."""
        deadline = time.monotonic() + 60
        while True:
            got = sess[k % 2].call({"op": "snapshot"})
            if code_of(got) not in UNKNOWN or time.monotonic() > deadline:
                break
            k += 1
            time.sleep(0.2)
        seq = (got.get("ok") or {}).get("seq") if isinstance(got, dict) else None
        if not check(isinstance(seq, int) and seq > 0, f"{label}: snapshot: {short(got)}"):
            return None
        check(seq > last_seq[0] if wrote_since[0] else seq >= last_seq[0],
              f"{label}: snapshot {seq} after {last_seq[0]} (writes in between: "
              f"{wrote_since[0]})")
        last_seq[0], wrote_since[0] = seq, False
        return snaps.add(seq, k % 2, model, label)

    def verify(stage, gone_ok=frozenset()):
        """Reads every snapshot taken so far at its seq, through both aggregators, and compares
        with its model copy; and the same reads without `at` with the model now (LATEST).
        Snapshots in gone_ok may answer FAILED_PRECONDITION (counted)."""
        t0 = time.monotonic()
        upto = len(snaps.events)
        work = [[], []]  # per aggregator: (snapshot index or LATEST, request, want)
        for k, s in enumerate(snaps.list):
            if s["wants"] is None:
                s["wants"] = [s["model"].run(q) for q in fx.reads]
            for q, want in zip(fx.reads, s["wants"]):
                qa = dict(q, at=s["seq"])
                work[0].append((k, qa, want))
                work[1].append((k, qa, want))
        for q in fx.reads:
            want = model.run(q)
            work[0].append((LATEST, q, want))
            work[1].append((LATEST, q, want))
        results = [None, None]

        def run(a):
            results[a] = ask_many(sess[a], [q for _, q, _ in work[a]])

        threads = [threading.Thread(target=run, args=(a,)) for a in (0, 1)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        bad, gone = defaultdict(list), defaultdict(int)
        for a in (0, 1):
            if results[a] is None:
                check(False, f"{stage}: no answers through agg{a}")
                continue
            for (k, q, want), got in zip(work[a], results[a]):
                if acceptable(got, want):
                    continue
                if k in gone_ok and code_of(got) == "FAILED_PRECONDITION":
                    gone[k] += 1
                    continue
                bad[k].append((a, q, got, want))
        total = len(work[0]) + len(work[1])
        note(f"{stage}: {len(snaps.list)} snapshots and the latest state, {total} reads (each "
             f"through both aggregators) in {time.monotonic() - t0:.1f} s: "
             f"{sum(len(b) for b in bad.values())} wrong"
             + (f", {sum(gone.values())} FAILED_PRECONDITION allowed" if gone_ok else ""))

        def kinds_of(entries):
            kinds = defaultdict(int)
            for a, q, got, want in entries:
                kinds[f"{q['op']}: {code_of(got) or 'a wrong answer'}"] += 1
            return dict(kinds)

        if bad:
            snaps_bad = sorted(k for k in bad if k != LATEST)
            check(False, f"{stage}: {sum(len(b) for b in bad.values())} wrong answers at "
                         f"{len(snaps_bad)} snapshots {snaps_bad}"
                         + (f" (seqs {snaps.list[snaps_bad[0]]['seq']}.."
                            f"{snaps.list[snaps_bad[-1]]['seq']})" if snaps_bad else "")
                         + (f" and {len(bad[LATEST])} at the latest state (no `at`)"
                            if LATEST in bad else "")
                         + f": {kinds_of(e for b in bad.values() for e in b)}; events: "
                         f"{snaps.timeline(upto)}")
        for n, k in enumerate(sorted(bad)):
            if n == SNAPSHOTS_SHOWN:
                note(f"  ... and {len(bad) - n} more snapshots")
                break
            where = ("the latest state (no `at`)" if k == LATEST else snaps.context(k, upto))
            note(f"  {len(bad[k])} wrong at {where}: {kinds_of(bad[k])}")
        # Examples: wrong answers first (with the writes to their node or record), then errors.
        entries = [(k, e) for k in sorted(bad) for e in bad[k]]
        values = [(k, e) for k, e in entries if code_of(e[2]) is None]
        errors = [(k, e) for k, e in entries if code_of(e[2]) is not None]
        keyed = set()
        for k, (a, q, got, want) in values[:DETAILS] + errors[:3]:
            where = "latest" if k == LATEST else f"snapshot #{k}"
            note(f"  e.g. at {where} through agg{a}: {short(q, 300)}\n         got  "
                 f"{short(got, 600)}\n         want {short(want, 600)}")
            key = (q.get("id"), q.get("type"))
            if code_of(got) is None and "id" in q and key not in keyed and len(keyed) < 3:
                keyed.add(key)
                note(f"  the writes to {q['id']}"
                     + (f" type {q['type']}" if "type" in q else "") + ":\n         "
                     + "\n         ".join(snaps.writes_to(
                         q["id"], q.get("type"), len(snaps.list) if k == LATEST else k,
                         marker="now" if k == LATEST else None)))
        if gone:
            note(f"  {stage}: gone (allowed): snapshots {sorted(gone)}")

    def leader_status():
        return view.logstore_status(view.leader_name() or "logstore")

    def compact(label):
        r = zipg("admin", "compact", "--connect", aggs[0], timeout=300)
        try:
            summary = json.loads(r.stdout)
        except ValueError:
            summary = {}
        if check(r.returncode == 0 and summary.get("compacted") is True,
                 f"{label}: admin compact: {r.stdout[-300:]!r} {r.stderr[-300:]!r}"):
            snaps.event(f"compaction of generation {summary.get('generation')} ({label})")

    def wait_merge(label, before):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            st = leader_status()
            if st.get("merges", 0) > before and st.get("merging") is None:
                break
            time.sleep(0.1)
        if check(st.get("merges", 0) > before,
                 f"{label}: a merge on the leader: {short(st.get('log_shards'), 300)} "
                 f"merges {st.get('merges')}, last {short(st.get('last_merge'), 300)}"):
            last = st.get("last_merge") or {}
            snaps.event(f"merge of generations {last.get('generations')} ({label})")

    def rebuild(label):
        r = zipg("admin", "rebuild", "--connect", aggs[0], timeout=600)
        try:
            summary = json.loads(r.stdout)
        except ValueError:
            summary = None
        ok = check(r.returncode == 0 and isinstance(summary, dict) and len(summary) == 2,
                   f"{label}: admin rebuild: {r.stdout[-500:]!r} {r.stderr[-300:]!r}")
        if ok:
            versions = {n: {s: v.get("version") for s, v in shards.items()}
                        for n, shards in summary.items()}
            snaps.event(f"rebuild of the base shards, versions {versions} ({label})")

    dead = {}  # the killed leader: name, argv

    def failover(label):
        old = view.leader_name()
        m = view.members().get(old or "")
        if not check(m and m.get("pid"), f"{label}: the LogStore leader: {old}, {m}"):
            return
        dead.update(name=old, argv=cluster_procs.cmdline(m["pid"]), t=time.monotonic())
        os.kill(m["pid"], signal.SIGKILL)
        snaps.event(f"kill -9 of the LogStore leader {old} ({label})")

    def after_failover(label):
        """The standby leads (it took over while the writes went on); the old leader restarted
        rejoins as the standby, in sync."""
        old = dead["name"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            lead = view.leader_name()
            if lead and lead != old:
                break
            time.sleep(0.1)
        if not check(lead and lead != old, f"{label}: a new LogStore leader: {lead}"):
            return
        snaps.event(f"{lead} leads (took over from {old})")
        procs.start_server(dead["argv"], os.path.join(STORE, "run", f"{old}.log"))
        dead["restarted"] = len(snaps.list)  # snapshots before this index predate its restart
        if view.wait_in_sync(lead, timeout=60):
            snaps.event(f"{old} restarted, in sync as the standby")

    # Round 0: the base state, before any write.
    snapshot(0, "the start")
    gone_ok = set()
    failovers = 0
    for rno, plan in enumerate(PLAN):
        label = f"round {rno + 1} ({plan})"
        st0 = leader_status()
        bg = []
        for j in range(WRITES):
            if j == WRITES // 3:
                if "compact" in plan or "rebuild" in plan:
                    def background(plan=plan, label=label, merges=st0.get("merges", 0)):
                        if "compact" in plan:
                            compact(label)
                        if "merge" in plan:
                            wait_merge(label, merges)
                        if "rebuild" in plan:
                            rebuild(label)
                    th = threading.Thread(target=background)
                    th.start()
                    bg.append(th)
                if plan == "failover":
                    failovers += 1
                    prev_restart = dead.get("restarted")
                    failover(label)
            write(gen.next(model), rno + j)
            wrote_since[0] = True
            if (j + 1) % SNAP_EVERY == 0:
                snapshot(rno + j, label)
        for th in bg:
            th.join()
        if plan == "failover":
            after_failover(label)
            if prev_restart is not None:
                # The new leader is the LogStore restarted after the previous failover: it
                # rebuilt its history from its live logs only (docs/consistency.md, "Restarts
                # and failover"), so it may no longer hold snapshots older than its restart.
                gone_ok |= set(range(prev_restart))
        if rno in VERIFY_AFTER:
            verify(f"after {label}", gone_ok=frozenset(gone_ok))
    st = leader_status()
    note(f"B: {counters['writes']} writes ({counters['unknown']} unknown outcomes, resent "
         f"{counters['resent']} times), {len(snaps.list)} snapshots; the leader "
         f"{view.leader_name()}: {st.get('compactions')} compactions, {st.get('merges')} merges, "
         f"generation {st.get('generation')}, log shards "
         f"{[s.get('generation') for s in st.get('log_shards', [])]}")
    section("B. the end: every snapshot through both aggregators")
    verify("final", gone_ok=frozenset(gone_ok))

    # ---- C ------------------------------------------------------------------------------------
    section("C. a seq not reached yet: DEADLINE_EXCEEDED; a read at seq + 3 waits for 3 writes")
    future = snaps.list[-1]["seq"] + 2**40
    reqs = [{"op": "obj_get", "id": fx.hot[0], "at": future},
            {"op": "assoc_range", "id": fx.hot[0], "type": 0, "pos": 0, "limit": 10,
             "at": future},
            {"op": "bfs", "id": fx.hot[0], "max_depth": 2, "at": future},
            {"op": "search_node_ids", "pattern": "snap-", "at": future}]
    for q in reqs:
        t0 = time.monotonic()
        r = zipg("query", "--connect", aggs[1], "--timeout-ms", "1000", "--batch", "-",
                 stdin=json.dumps(q).encode() + b"\n", timeout=60)
        took = time.monotonic() - t0
        try:
            got = json.loads(r.stdout.splitlines()[0])
        except (ValueError, IndexError):
            got = {"unparsable": r.stdout[-300:].decode("utf-8", "replace")}
        check(code_of(got) == "DEADLINE_EXCEEDED" and 0.5 <= took <= 10,
              f"C: {short(q)} with --timeout-ms 1000: {short(got)} after {took:.1f} s "
              f"(want DEADLINE_EXCEEDED after 0.5-1 s)")
    t0 = time.monotonic()
    got = sess[0].call({"op": "obj_get", "id": fx.hot[0]})
    took = time.monotonic() - t0
    check(acceptable(got, model.run({"op": "obj_get", "id": fx.hot[0]})) and took < 2,
          f"C: a read after the waits: {short(got)} in {took:.2f} s")
    waiting_read(Session, aggs, model, write)

    # ---- D ------------------------------------------------------------------------------------
    section(f"D. bfs and rpq without `at` while a writer changes the chain R -> A -> B "
            f"({TRAVERSAL_SECONDS:.0f} s, a compaction in the middle)")
    traversals_during_writes(Session, aggs, model, compact)

    # ---- E ------------------------------------------------------------------------------------
    section("E. zipg local stop")
    procs.local_stop(check, STORE, ZIPG)

    # ---- F ------------------------------------------------------------------------------------
    section("F. --snapshot-retention 2: an expired snapshot is FAILED_PRECONDITION")
    expired(fx)


def embedded(fx):
    base = fx.model()
    store = os.path.join(TMP, "embedded")
    r = zipg("query", "--store", store, "snapshot")
    try:
        got = json.loads(r.stdout)
    except ValueError:
        got = r.stdout[-300:]
    check(r.returncode == 0 and got == {"ok": {"seq": 0}}, f"A: snapshot: {got} {r.stderr!r}")
    i = fx.hot[0]
    for at in ("0", "1", "4294967296", str(2**62)):
        r = zipg("query", "--store", store, "obj_get", "--id", str(i), "--at", at)
        try:
            got = json.loads(r.stdout)
        except ValueError:
            got = r.stdout[-300:]
        check(got == base.run({"op": "obj_get", "id": i}), f"A: obj_get --at {at}: {got}")
    reqs = [{"op": "snapshot"}]
    ats = [0, 7, 2**40]
    for k, q in enumerate(fx.reads):
        reqs.append(dict(q, at=ats[k % 3]))
    reqs.append({"op": "obj_get", "id": i, "at": -1})
    data = b"".join(json.dumps(q).encode() + b"\n" for q in reqs)
    r = zipg("query", "--store", store, "--batch", "-", stdin=data, timeout=300)
    answers = [json.loads(line) for line in r.stdout.splitlines()]
    if not check(len(answers) == len(reqs), f"A: {len(answers)} answers to {len(reqs)} lines: "
                                            f"{r.stderr[-300:]!r}"):
        return
    check(answers[0] == {"ok": {"seq": 0}}, f"A: batch snapshot: {answers[0]}")
    bad = 0
    for q, got in zip(reqs[1:-1], answers[1:-1]):
        want = base.run(q)
        if not acceptable(got, want):
            bad += 1
            check(False, f"A: embedded {short(q, 200)}\n      got  {short(got)}\n      want "
                         f"{short(want)}")
    check(code_of(answers[-1]) == "INVALID_ARGUMENT", f"A: at -1: {short(answers[-1])}")
    note(f"A: {len(reqs) - 2} reads with at in {ats}: {bad} wrong")


def waiting_read(Session, aggs, model, write):
    """C, second part: a read at (snapshot + 3) started before the writes that reach it."""
    src = 7_100_000
    s = Session(aggs[1], "waiter", extra=("--timeout-ms", "20000"))
    # A first write, so that the snapshot lies in the live generation: the snapshot after a
    # compaction is the frozen generation's last id, and the next write is the new one's first
    # (generation << 32 | 1), past every id of the old one.
    write({"op": "assoc_add", "src": src, "type": 6, "dst": 0, "timestamp": 0,
           "properties": {}}, 0)
    seq = s.call({"op": "snapshot"}).get("ok", {}).get("seq")
    if not check(isinstance(seq, int), f"C: snapshot: {seq}"):
        return
    q = {"op": "assoc_range", "id": src, "type": 6, "pos": 0, "limit": 100, "at": seq + 3}
    box = {}

    def reader():
        box["got"] = s.call(q)
        box["t"] = time.monotonic()

    th = threading.Thread(target=reader)
    th.start()
    time.sleep(0.8)
    check("got" not in box, f"C: a read at snapshot + 3 answered before the writes: "
                            f"{short(box.get('got'))}")
    states = []
    for n in range(1, 6):
        write({"op": "assoc_add", "src": src, "type": 6, "dst": n, "timestamp": n,
               "properties": {"n": str(n)}}, n)
        states.append(model.run({k: v for k, v in q.items() if k != "at"}))
    th.join(30)
    got = box.get("got")
    check(got is not None and acceptable(got, states[2]) and len(states[2]["ok"]) == 4,
          f"C: the read at snapshot {seq} + 3, after 5 writes: {short(got)}, want the state "
          f"after exactly 3 writes {short(states[2])} (after k writes: "
          f"{[len(x.get('ok') or []) for x in states]} edges)")
    note(f"C: the read at {seq} + 3 answered {len((got or {}).get('ok') or [])} edges after the "
         f"writes")


def traversals_during_writes(Session, aggs, model, compact):
    """D: see the docstring. The writer's states are kept as (A's targets, B's targets)."""
    setup = [{"op": "assoc_add", "src": R_ID, "type": CHAIN_TYPE, "dst": A_ID, "timestamp": 1,
              "properties": {}},
             {"op": "assoc_add", "src": A_ID, "type": CHAIN_TYPE, "dst": B_ID, "timestamp": 1,
              "properties": {}}]
    ws = Session(aggs[1], "chain-writer", SEED + 7)
    for q in setup:
        want = model.write(q)
        got = ws.call(q)
        check(acceptable(got, want), f"D: setup {short(q)}: {short(got)}")
    lock = threading.Lock()
    states = [(frozenset(), frozenset())]  # states[n]: after the writer's first n writes
    acked = [0]    # writes acknowledged
    invoked = [0]  # writes sent
    halt = threading.Event()
    done_writes = []
    wrong = []

    def writer():
        a, b, k = set(), set(), 0
        while not halt.is_set():
            k += 1
            x = X_BASE + k
            steps = [("add", A_ID, x), ("add", B_ID, x)]
            if k > 4:
                old = X_BASE + k - 4
                steps += [("del", B_ID, old), ("del", A_ID, old)]
            for kind, src, dst in steps:
                if kind == "add":
                    q = {"op": "assoc_add", "src": src, "type": CHAIN_TYPE, "dst": dst,
                         "timestamp": dst, "properties": {}}
                    want = {"ok": {"replaced": False}}
                else:
                    q = {"op": "assoc_delete", "src": src, "type": CHAIN_TYPE, "dst": dst}
                    want = {"ok": {"deleted": True}}
                with lock:
                    invoked[0] += 1
                got = ws.call(q)
                if not acceptable(got, want):
                    wrong.append((q, got))
                    halt.set()
                    return
                target = a if src == A_ID else b
                if kind == "add":
                    target.add(dst)
                else:
                    target.discard(dst)
                with lock:
                    states.append((frozenset(a), frozenset(b)))
                    acked[0] += 1
                done_writes.append(q)

    def chain_model(st):
        sa, sb = st
        recs = {(R_ID, CHAIN_TYPE): [{"dst": A_ID, "timestamp": 1}],
                (A_ID, CHAIN_TYPE): [{"dst": d, "timestamp": 1} for d in sorted(sa | {B_ID})],
                (B_ID, CHAIN_TYPE): [{"dst": d, "timestamp": 1} for d in sorted(sb)]}
        return Model({}, {k: v for k, v in recs.items() if v})

    reqs = [{"op": "bfs", "id": R_ID, "max_depth": 3},
            {"op": "rpq", "expr": "_/_/_?", "sources": [R_ID]},
            {"op": "bfs", "id": R_ID, "max_depth": 4, "types": [CHAIN_TYPE]}]
    readers = [Session(aggs[0], "chain-reader-0", SEED + 8), Session(aggs[1], "chain-reader-1",
                                                                      SEED + 9)]
    th = threading.Thread(target=writer)
    th.start()
    stats = {"calls": 0, "exact_start": 0, "later_state": 0, "wrong": 0, "widest": 0,
             "composed": 0, "composed_caught": 0}

    def composed_bfs(session):
        """The control: the bfs of depth 3 from R as a traversal without a snapshot would read
        it, R's, A's and B's edges each at its own moment (a pause between A and B), put
        together. The check must be able to tell such answers from snapshot answers."""
        seen, out = {R_ID}, [{"id": R_ID, "depth": 0}]
        for depth, node in ((1, R_ID), (2, A_ID), (3, B_ID)):
            if node == B_ID:
                time.sleep(0.002)
            got = session.call({"op": "get_neighbor_ids", "id": node})
            for d in sorted(set(got.get("ok") or []) - seen):
                seen.add(d)
                out.append({"id": d, "depth": depth})
        return {"ok": sorted(out, key=lambda e: (e["depth"], e["id"]))}

    t_end = time.monotonic() + TRAVERSAL_SECONDS
    compacted = None
    n = 0
    while time.monotonic() < t_end and not halt.is_set():
        if compacted is None and time.monotonic() > t_end - TRAVERSAL_SECONDS / 2:
            compacted = threading.Thread(target=compact, args=("D",))
            compacted.start()
        control = n % 4 == 3
        q = reqs[0] if control else reqs[n % len(reqs)]
        with lock:
            lo = acked[0]
        if control:
            got = composed_bfs(readers[n % 2])
        else:
            got = readers[n % 2].call(q)
        with lock:
            hi = invoked[0]
        # The state after a write still in flight may be what the traversal saw (applied, not
        # yet acknowledged): wait for the writer to record it.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not halt.is_set():
            with lock:
                if len(states) > hi:
                    break
            time.sleep(0.0005)
        with lock:
            window = states[lo:hi + 1]
        n += 1
        matches = [j for j, st in enumerate(window) if acceptable(got, chain_model(st).run(q))]
        if control:
            stats["composed"] += 1
            stats["composed_caught"] += not matches
            continue
        stats["calls"] += 1
        stats["widest"] = max(stats["widest"], hi - lo)
        if not matches:
            stats["wrong"] += 1
            if stats["wrong"] > DETAILS:
                continue
            check(False, f"D: {short(q)} through agg{(n - 1) % 2} matches no state of the "
                         f"writer between its writes {lo} and {hi}: got {short(got, 600)}; "
                         f"the model at {lo}: {short(chain_model(window[0]).run(q), 600)} "
                         f"(states (A's, B's targets): "
                         f"{[(sorted(a), sorted(b)) for a, b in window][:6]})")
        elif matches[0] == 0:
            stats["exact_start"] += 1
        else:
            stats["later_state"] += 1
    halt.set()
    th.join()
    if compacted is not None:
        compacted.join()
    check(compacted is not None, "D: the compaction in the middle was started")
    for q, got in wrong:
        check(False, f"D: the writer's {short(q)}: {short(got)}")
    for q in done_writes:
        model.write(q)
    check(stats["calls"] > 20 and acked[0] > 20,
          f"D: too little happened: {stats}, {acked[0]} writes")
    check(stats["wrong"] == 0, f"D: {stats['wrong']} of {stats['calls']} traversals without "
                               f"`at` matched no state of the writer during their call")
    note(f"D: {stats['calls']} traversals during {acked[0]} writes: {stats['wrong']} matched no "
         f"state; {stats['exact_start']} matched the state at their start, "
         f"{stats['later_state']} only a later one; at most {stats['widest']} writes in one "
         f"call's window. The control, bfs put together from separate reads of R, A and B: "
         f"{stats['composed_caught']} of {stats['composed']} matched no state (the check can "
         f"see a traversal without a snapshot)")
    # After the writer: the whole model (chain and everything else) at the latest state.
    for q in reqs:
        got = readers[0].call(q)
        check(acceptable(got, model.run(q)), f"D: after the writes: {short(q)}: {short(got)} want "
                                             f"{short(model.run(q))}")


def expired(fx):
    r, state = procs_ret.local_start(check, "--servers", "1", "--aggregators", "1",
                                     "--lease-ttl", "2", "--memtable-mb", "0",
                                     "--snapshot-retention", "2", "--no-verify")
    if state is None:
        return
    agg = state["aggregators"][0]
    s = write_model.Session(ZIPG, RET_TMP, procs_ret.sessions, agg, "retention", SEED + 11)
    model = fx.model()
    i = fx.hot[0]
    reads = [{"op": "obj_get", "id": i},
             {"op": "assoc_range", "id": i, "type": 0, "pos": 0, "limit": 100},
             {"op": "assoc_count", "id": i, "type": 1},
             {"op": "get_neighbor_ids", "id": i},
             {"op": "get_node_ids", "properties": {"tag": "snap-a"}},
             {"op": "search_node_ids", "pattern": "snap-"},
             {"op": "bfs", "id": i, "max_depth": 2},
             {"op": "rpq", "expr": "_/_", "sources": [i]}]
    n = [0]

    def write():
        n[0] += 1
        q = [{"op": "assoc_add", "src": i, "type": 0, "dst": 7_200_000 + n[0], "timestamp": n[0],
              "properties": {}},
             {"op": "obj_update", "id": i, "properties": {"tag": SNAP_VALUES[n[0] % 4]}},
             {"op": "assoc_add", "src": i, "type": 1, "dst": 7_200_000 + n[0],
              "timestamp": n[0], "properties": {}}][n[0] % 3]
        want = model.write(q)
        got = s.call(q)
        check(acceptable(got, want), f"F: write {short(q)}: {short(got)} want {want}")

    write()
    seq = s.call({"op": "snapshot"}).get("ok", {}).get("seq")
    at_seq = freeze(model)
    write()
    for q in reads:  # at once: held
        got, want = s.call(dict(q, at=seq)), at_seq.run(q)
        check(acceptable(got, want), f"F: {short(q)} at {seq} right away: {short(got)} want "
                                     f"{short(want)}")
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3.5:
        write()
        time.sleep(0.05)
    codes = []
    for q in reads:
        got = s.call(dict(q, at=seq))
        codes.append(code_of(got))
        check(code_of(got) == "FAILED_PRECONDITION",
              f"F: {short(q)} at {seq}, {time.monotonic() - t0:.1f} s and {n[0]} writes later "
              f"with --snapshot-retention 2: {short(got)} (want FAILED_PRECONDITION)")
    fresh = s.call({"op": "snapshot"}).get("ok", {}).get("seq")
    check(isinstance(fresh, int) and fresh > seq, f"F: a fresh snapshot: {fresh} (old {seq})")
    bad = 0
    for q in reads:
        got, want = s.call(dict(q, at=fresh)), model.run(q)
        if not acceptable(got, want):
            bad += 1
            check(False, f"F: {short(q)} at the fresh {fresh}: {short(got)} want {short(want)}")
    note(f"F: at the expired {seq}: {codes}; at the fresh {fresh}: {bad} of {len(reads)} wrong")
    procs_ret.local_stop(check, RET_STORE, ZIPG)


def cleanup():
    procs_ret.cleanup()
    procs.cleanup()


if __name__ == "__main__":
    cluster_procs.run_test("snapshot_test", main, report, cleanup)
