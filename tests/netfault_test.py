#!/usr/bin/python3
"""End-to-end test of a real cluster behind a faulty network (issue 17, docs/testing.md, "Fault
injection"): etcd, 2 shard servers for 4 shards, the LogStore and an aggregator, started by the
test with `--advertise` (and `--advertise-update`) naming TCP proxies (tests/netfault_proxy.py) in
front of every Thrift port and every update channel. So every call between processes goes
through a proxy: the client's to the aggregator, the aggregator's to the shard servers and the
LogStore, the LogStore's to the shard servers (Thrift reads and the update channel), the shard
servers' to each other and to the LogStore (catch-up). Only etcd is reached directly.

Fault modes, in turn, each for PHASE_S seconds while WORKERS clients send a mix of writes and
reads through the aggregator's proxy (MODES below; a strike hits one chunk read by a proxy,
usually one frame): none; delay (every chunk 30 ms late); stall (1.5% of the chunks 2.5 s late:
past the servers' call timeout); drop (1.5% of the chunks turn their connection into a black hole
in one direction or both); cut (5% of the chunks end their connection partway through: mid-frame);
reset (the same with an RST); duplicate (3% of the chunks sent twice). The update channels are
struck at a fifth of those rates (see MODES). Each mode prints its writes tried / acknowledged /
failed, reads answered / failed, the error codes, the wrong answers, the faults the proxies
injected and the call latencies.

What must hold, checked against a plain-Python model (write_model.WriteModel):
* while the fault is on, every answer is the model's or an error with a transient code
  (UNAVAILABLE, DEADLINE_EXCEEDED; without faults, none): never a wrong answer, never another
  code. Duplicated chunks included: the clients number their calls and drop a connection whose
  reply is out of step or unreadable (UNAVAILABLE), and the servers refuse a repeated request. A write that failed may or may not
  have happened: its node is left alone (no reads, no writes) until the faults stop; then its
  outcome must be exactly the old or the new state, and the model takes it;
* no server process dies, and no client call outlives its timeout by more than 10 s;
* once the faults stop, the cluster recovers within RECOVERY_S: a write and a read through every
  shard succeed; then every node written during the mode reads exactly as the model says;
* at the end every node (every read operation; traversals for a sample) equals the model, and the
  servers stop cleanly on SIGTERM (exit status 0); no proxy thread is left.

Every write names a key of its own (a fresh edge or id, or an existing edge or node of a node no
other request holds), and a node is reserved by the client that reads or writes it, so every
expected answer is known when its request is sent. get_node_ids, which reads every node, accepts
either state of the nodes whose properties change meanwhile.

Then, once every mode recovered, a lagging replica: shard-0's update channel alone black-holed,
so its lease holds and it keeps answering while a write of one of its nodes fails after the
LogStore's update timeout and is applied in the LogStore anyway. Reads of that node on shard-0
must be refused (UNAVAILABLE, counted in its status commits.disagreements), never answered
without the edge; once the channel is back the write is delivered and read.

NETFAULT_MODES=drop,cut runs only those modes (to reproduce one).

Usage: netfault_test.py PATH/TO/zipg        (exit status 0 if everything passed)"""
import dataclasses
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_procs  # noqa: E402
import netfault_proxy as nf  # noqa: E402
import write_model  # noqa: E402
from graph_model import INT64_MAX, INT64_MIN, TYPES, timestamp  # noqa: E402
from write_model import (edge_props, node_props, node_reads, normalize, raw_status,  # noqa: E402
                         shard_of, short)

SEED = 20261127
rnd = random.Random(SEED)
T = cluster_procs.TestSetup("netfault_test", __doc__)
check, section, note = T.check, T.section, T.note
TMP, ZIPG, STORE, procs, report = T.tmp, T.zipg, T.store, T.procs, T.report
RUN = os.path.join(STORE, "run")
SHARDS = 4
CLUSTER = "netfault"
CALL_TIMEOUT_MS = 1500    # the servers' calls to each other (default 10 s: too slow for a test)
CLIENT_TIMEOUT_MS = 3000  # the test's clients' calls to the aggregator
TRANSIENT = ("UNAVAILABLE", "DEADLINE_EXCEEDED")
PHASE_S = 4.0             # each fault mode is on this long
RECOVERY_S = 20.0         # bound on the recovery after the faults stop
WORKERS = 6
# (name, the fault of the Thrift connections, the probability of a strike on the update
# channels). A request crosses 2 to 5 proxied Thrift connections, so a few percent of the chunks
# struck fail a fair share of the calls. A strike on an update channel holds every write to its
# shards for the lane's retry interval (1 s, shard/update_channel.h): at the Thrift rate, writes
# would hardly move; a fifth of it still strikes each channel a few times per mode.
MODES = [
    ("none", nf.NONE, 0.0),
    ("delay", nf.Fault("delay", delay_ms=30), 1.0),
    ("stall", nf.Fault("delay", delay_ms=2500, probability=0.015), 0.003),
    ("drop", nf.Fault("drop", probability=0.015, direction="any"), 0.003),
    ("cut", nf.Fault("cut", probability=0.05), 0.01),
    ("reset", nf.Fault("reset", probability=0.05), 0.01),
    # Last, so that a later mode is not blamed if a repeated frame ever got through (the clients
    # and servers check sequence ids: docs/serving.md, "Sequence ids").
    ("duplicate", nf.Fault("duplicate", probability=0.03), 0.006),
]
if os.environ.get("NETFAULT_MODES"):
    MODES = [m for m in MODES if m[0] in os.environ["NETFAULT_MODES"].split(",")]
# Ids of nothing: past the input's (graph_model.Input: below 5000, and a few extremes), below the
# ids and dsts the writes make up.
MISSING = [5_000_003, 999_999_999]


class Watchdog:
    """Kills a client whose call outlives its own timeout by far (its session then fails with
    "ended"), so that a call that never returns fails the test instead of hanging it."""

    def __init__(self, bound_s):
        self.bound_s = bound_s
        self.lock = threading.Lock()
        self.calls = {}  # session -> (start, request)
        threading.Thread(target=self._run, daemon=True).start()

    def call(self, session, call, req):
        with self.lock:
            self.calls[session] = (time.monotonic(), req)
        try:
            return call(req)
        finally:
            with self.lock:
                self.calls.pop(session, None)

    def _run(self):
        while True:
            time.sleep(0.5)
            with self.lock:
                late = [(s, req) for s, (t, req) in self.calls.items()
                        if time.monotonic() - t > self.bound_s]
                for s, _ in late:
                    self.calls.pop(s)
            for s, req in late:
                check(False, f"{s.label}: no answer to {short(req, 200)} within {self.bound_s} s "
                             f"(its timeout is {CLIENT_TIMEOUT_MS} ms); client killed")
                s.p.kill()


WATCHDOG = Watchdog(CLIENT_TIMEOUT_MS / 1000 + 10)


def Session(label, seed):
    """A client of the aggregator's proxy (`zipg query --batch -`) whose calls the watchdog
    guards."""
    s = write_model.Session(ZIPG, TMP, procs.sessions, CLUSTER_STATE["client"], label, seed,
                            ("--timeout-ms", str(CLIENT_TIMEOUT_MS)))
    raw = s.call
    s.call = lambda req: WATCHDOG.call(s, raw, req)
    return s


CLUSTER_STATE = {}  # "client": the aggregator's proxy endpoint


def log_tail(name, n=600):
    try:
        with open(os.path.join(RUN, name + ".log"), "rb") as f:
            return f.read()[-n:].decode("utf-8", "replace").strip()
    except OSError:
        return "(no log)"


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else 0.0


# ------------------------------------------------------------------------------------------------
class Cluster:
    """etcd and the servers, each Thrift port and update channel behind its own proxy."""

    def __init__(self):
        self.proxies = {}   # name -> Proxy
        self.pids = {}      # server name -> pid
        os.makedirs(RUN, exist_ok=True)
        port, peer = cluster_procs.free_port(), cluster_procs.free_port()
        self.etcd = f"127.0.0.1:{port}"
        peer_url = f"http://127.0.0.1:{peer}"
        self.pids["etcd"] = procs.start_server(
            ["etcd", "--name", "netfault", "--data-dir", os.path.join(RUN, "etcd"),
             "--listen-client-urls", f"http://{self.etcd}", "--advertise-client-urls",
             f"http://{self.etcd}", "--listen-peer-urls", peer_url,
             "--initial-advertise-peer-urls", peer_url, "--initial-cluster", f"netfault={peer_url}",
             "--log-level", "warn"], os.path.join(RUN, "etcd.log"))

    def proxy(self, name, target_port):
        p = nf.Proxy(target_port, name=name, seed=SEED + len(self.proxies))
        self.proxies[name] = p
        procs.sessions.append(p)  # closed before the servers stop, whatever happens
        return p

    def start(self, role, name, extra):
        """Starts `zipg serve ROLE` on a port of its own, advertising a proxy in front of it (and,
        for a shard server, one in front of its update channel). Returns the proxy."""
        port = cluster_procs.free_port()
        front = self.proxy(name, port)
        argv = [ZIPG, "serve", role, *extra, "--etcd", self.etcd, "--cluster", CLUSTER,
                "--name", name, "--host", "127.0.0.1", "--port", str(port),
                "--advertise", front.endpoint, "--lease-ttl", "2",
                "--call-timeout-ms", str(CALL_TIMEOUT_MS), "--traversal-deadline-ms", "1000"]
        if role == "shard":
            update_port = cluster_procs.free_port()
            updates = self.proxy(name + "-updates", update_port)
            argv += ["--update-port", str(update_port), "--advertise-update", updates.endpoint]
        self.pids[name] = procs.start_server(argv, os.path.join(RUN, name + ".log"))
        return front

    def set_fault(self, fault, update_probability=None):
        """`fault` on every proxy; on the update channels' with `update_probability` if given."""
        for name, p in self.proxies.items():
            if update_probability is not None and name.endswith("-updates"):
                p.set_fault(dataclasses.replace(fault, probability=update_probability))
            else:
                p.set_fault(fault)

    def stats(self):
        total = Counter()
        for p in self.proxies.values():
            total.update(p.stats())
        return total

    def drained(self, timeout):
        """True once no proxy holds bytes back (delayed chunks are all delivered)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sum(p.pending_bytes() for p in self.proxies.values()) == 0:
                return True
            time.sleep(0.02)
        return False

    def dead(self):
        """The servers (and etcd) that are not running any more, with the end of their logs."""
        return {n: log_tail(n) for n, pid in self.pids.items() if not procs.alive(pid)}


# ------------------------------------------------------------------------------------------------
class Workload:
    """The shared model and what the clients hold: nodes reserved by reads (a count each) and by
    writes, nodes with a write of unknown outcome, and the properties a node may have while an
    obj_* write of it is unresolved (for get_node_ids)."""

    def __init__(self, model, universe):
        self.model = model
        self.lock = threading.Lock()
        self.universe = list(universe)     # ids the clients read and write
        self.reading = Counter()
        self.writing = set()
        self.uncertain = {}                # node -> (write, outcome requests, before, after)
        self.obj_pending = {}              # node -> its properties if its obj_* write (sent,
                                           # or failed) happened; None: deleted
        self.obj_log = []                  # (node, properties before, after) of each obj_* write
        self.next_dst = 90_000_000         # assoc_add: a fresh dst each
        self.next_id = 80_000_000          # obj_add: a fresh id each
        self.touched = set()               # nodes written during the current mode
        self.stats = Counter()
        self.codes = Counter()
        self.wrong = 0
        self.allowed = TRANSIENT           # the error codes the current mode may cause

    # -- choosing requests (under the lock) --------------------------------------------------------
    def free(self, r, for_write):
        for _ in range(20):
            i = r.choice(self.universe)
            if i in self.writing or i in self.uncertain or (for_write and self.reading[i]):
                continue
            return i
        return None

    def plan_write(self, r):
        m = self.model
        x = r.random()
        if x < 0.12:
            i = self.next_id
            self.next_id += 1
            self.universe.append(i)
            q = {"op": "obj_add", "id": i, "properties": node_props(r)}
        else:
            i = self.free(r, True)
            if i is None:
                return None
            edges = [(t, d) for t in sorted(m.types.get(i, ())) for d in sorted(m.edges[(i, t)])]
            if x < 0.45 or (x < 0.7 and not edges):
                self.next_dst += 1
                q = {"op": "assoc_add", "src": i, "type": r.choice(TYPES), "dst": self.next_dst,
                     "timestamp": timestamp(r), "properties": edge_props(r)}
            elif x < 0.6:
                t, d = r.choice(edges)
                q = {"op": "assoc_delete", "src": i, "type": t, "dst": d}
            elif x < 0.7:
                t, d = r.choice(edges)
                q = {"op": "assoc_update", "src": i, "type": t, "dst": d,
                     "timestamp": timestamp(r), "properties": edge_props(r)}
            elif x < 0.95:
                op = "obj_update" if i in m.nodes else "obj_add"
                q = {"op": op, "id": i, "properties": node_props(r)}
            else:
                q = {"op": "obj_delete", "id": i}
        node = q.get("id", q.get("src"))
        self.writing.add(node)
        self.touched.add(node)
        outcome, before, after = self.outcome(q)
        if q["op"].startswith("obj_"):
            props = [a[0]["ok"]["properties"] if a[0]["ok"] else None for a in (before, after)]
            self.obj_log.append((node, *props))
            self.obj_pending[node] = props[1]
        return {"kind": "write", "req": q, "node": node, "outcome": outcome, "before": before,
                "after": after, "want": None}

    def outcome(self, q):
        """The reads that show whether write q happened, their answers now and after it."""
        m = self.model
        if q["op"].startswith("obj_"):
            i = q["id"]
            reqs = [{"op": "obj_get", "id": i}]
            if q["op"] == "obj_delete":
                reqs.append({"op": "get_neighbor_ids", "id": i})
                after = [{"ok": None}, {"ok": []}]
            else:
                after = [{"ok": {"id": i, "properties": normalize(q["properties"])}}]
        else:
            reqs = [{"op": "assoc_get", "id": q["src"], "type": q["type"], "ids": [q["dst"]],
                     "low": INT64_MIN, "high": INT64_MAX}]
            after = [{"ok": [] if q["op"] == "assoc_delete" else
                      [{"src": q["src"], "type": q["type"], "dst": q["dst"],
                        "timestamp": q["timestamp"], "properties": normalize(q["properties"])}]}]
        return reqs, [m.run(x) for x in reqs], after

    def plan_read(self, r):
        m = self.model
        x = r.random()
        if x < 0.08:
            # A filter some node matches now; nodes whose properties change meanwhile may or
            # may not be in the answer.
            withprops = [i for i in r.sample(self.universe, 20) if m.nodes.get(i)]
            if not withprops:
                return None
            props = m.nodes[withprops[0]]
            k = r.choice(sorted(props))
            q = {"op": "get_node_ids", "properties": {k: props[k]}}
            # The properties each node being written may have: now, or after its write.
            states = {i: [self.node_props_now(i), self.obj_pending[i]] for i in self.obj_pending}
            return {"kind": "node_ids", "req": q, "want": m.run(q), "nodes": [],
                    "log_at": len(self.obj_log), "states": states}
        i = r.choice(MISSING) if x < 0.12 else self.free(r, False)
        if i is None:
            return None
        types = sorted(m.types.get(i, ()))
        t = r.choice(types) if types and r.random() < 0.85 else r.choice(TYPES)
        nodes = [i]
        if x < 0.3:
            q = {"op": "obj_get", "id": i}
        elif x < 0.37:
            q = {"op": "get_node_property", "id": i, "properties": ["name", "tag", "fresh"]}
        elif x < 0.5:
            q = {"op": "get_neighbor_ids", "id": i}
        elif x < 0.7:
            q = {"op": "assoc_range", "id": i, "type": t, "pos": 0, "limit": INT64_MAX}
        elif x < 0.78:
            q = {"op": "assoc_count", "id": i, "type": t}
        elif x < 0.88:
            dsts = m.neighbors(i, t)
            q = {"op": "assoc_get", "id": i, "type": t,
                 "ids": r.sample(dsts, min(3, len(dsts))) + [5], "low": INT64_MIN,
                 "high": INT64_MAX}
        else:
            # A traversal reads the edges of every node it reaches: all of them must be settled
            # (and few, so that writers keep finding free nodes).
            q = {"op": "bfs", "id": i, "max_depth": 2}
            nodes = sorted(m.bfs_depths(q))
            if len(nodes) > 40 or any(n in self.writing or n in self.uncertain for n in nodes):
                q, nodes = {"op": "obj_get", "id": i}, [i]
        for n in nodes:
            self.reading[n] += 1
        return {"kind": "read", "req": q, "want": m.run(q), "nodes": nodes}

    def node_props_now(self, i):
        n = self.model.nodes.get(i)
        return None if n is None else dict(n)

    def plan(self, r):
        with self.lock:
            for _ in range(5):
                op = self.plan_write(r) if r.random() < 0.45 else self.plan_read(r)
                if op is not None:
                    return op
        return None

    # -- settling answers (under the lock) ---------------------------------------------------------
    def settle(self, op, got, mode):
        with self.lock:
            q = op["req"]
            if op["kind"] == "write":
                self.writing.discard(op["node"])
                self.stats["writes tried"] += 1
                if "ok" in got:
                    self.obj_pending.pop(op["node"], None)  # the model has it now
                    self.stats["writes acked"] += 1
                    want = self.model.write(q)
                    self.expect(got == want, mode, q, got, want)
                    return
                self.stats["writes failed"] += 1
                code = (got.get("error") or {}).get("code")
                self.codes[code] += 1
                self.expect(code in self.allowed, mode, q, got,
                            "ok or " + "/".join(self.allowed))
                self.uncertain[op["node"]] = (q, op["outcome"], op["before"], op["after"])
                return
            for n in op["nodes"]:
                self.reading[n] -= 1
            if "error" in got:
                self.stats["reads error"] += 1
                code = (got.get("error") or {}).get("code")
                self.codes[code] += 1
                self.expect(code in self.allowed, mode, q, got,
                            f"{short(op['want'])} or " + "/".join(self.allowed))
                return
            self.stats["reads ok"] += 1
            if op["kind"] == "node_ids":
                self.expect(self.node_ids_ok(op, got), mode, q, got,
                            f"{short(op['want'])}, give or take the nodes being written "
                            f"{sorted(op['states'])}")
            else:
                self.expect(got == op["want"], mode, q, got, op["want"])

    def node_ids_ok(self, op, got):
        """get_node_ids: the model's answer, except for the nodes whose properties were being
        written meanwhile: each of those is in it if one of its possible states matches."""
        ids = got.get("ok")
        if not isinstance(ids, list) or ids != sorted(set(ids)):
            return False
        filt = op["req"]["properties"]

        def matches(props):
            return props is not None and all(props.get(k) == v for k, v in filt.items())
        states = {i: list(v) for i, v in op["states"].items()}
        for i, before, after in self.obj_log[op["log_at"]:]:  # writes sent since
            states.setdefault(i, []).extend([before, after])
        changing = set(states)
        if set(ids) - changing != set(op["want"]["ok"]) - changing:
            return False
        return all((i in ids) in {matches(p) for p in states[i]} for i in changing)

    def expect(self, ok, mode, q, got, want):
        if not ok:
            self.wrong += 1
            check(False, f"{mode}: {short(q, 200)}\n      got  {short(got)}\n      want "
                         f"{short(want)}")


# ================================================================================================
def main():
    section("setup: compress (4 shards); etcd, 2 shard servers, the LogStore, an aggregator, "
            "each behind proxies")
    made = write_model.compressed_input(ZIPG, TMP, STORE, rnd, SHARDS, check)
    if made is None:
        return
    inp, nodes_csv, edges_csv, model = made
    # A bad --advertise is a usage error (exit 2, naming the flag) before anything starts.
    for flags, want in ((["--advertise", "127.0.0.1:0"], "--advertise: "),
                        (["--advertise", "tcp://127.0.0.1:7000"], "--advertise: "),
                        (["--advertise", "nohost"], "--advertise: "),
                        (["--advertise-update", "127.0.0.1:70000"], "--advertise-update: ")):
        bad = subprocess.run([ZIPG, "serve", "shard", "--store", STORE, "--shards", "0",
                              "--etcd", "127.0.0.1:1", *flags], capture_output=True, text=True,
                             timeout=30)
        check(bad.returncode == 2 and want in bad.stderr,
              f"serve shard {' '.join(flags)}: rc {bad.returncode}, {bad.stderr[-200:]!r}")
    bad = subprocess.run([ZIPG, "serve", "aggregator", "--etcd", "127.0.0.1:1",
                          "--advertise-update", "127.0.0.1:7000"], capture_output=True, text=True,
                         timeout=30)
    check(bad.returncode == 2 and "--advertise-update is for shard servers" in bad.stderr,
          f"serve aggregator --advertise-update: rc {bad.returncode}, {bad.stderr[-200:]!r}")
    c = Cluster()
    t = time.monotonic()
    c.start("shard", "shard-0", ["--store", STORE, "--shards", "0,2", "--no-verify"])
    c.start("shard", "shard-1", ["--store", STORE, "--shards", "1,3", "--no-verify"])
    c.start("logstore", "logstore", ["--store", STORE, "--memtable-mb", "0"])
    front = c.start("aggregator", "aggregator", [])
    CLUSTER_STATE["client"] = front.endpoint
    aggregator = f"127.0.0.1:{front.target[1]}"
    deadline = time.monotonic() + 60
    st = None
    while time.monotonic() < deadline:
        st = raw_status(aggregator)
        if st and st.get("healthy") is True and st.get("logstore"):
            break
        if c.dead():
            break
        time.sleep(0.1)
    if not check(st and st.get("healthy") is True and st.get("logstore"),
                 f"cluster healthy within 60 s: {short(st, 600)}; dead: {c.dead()}"):
        return
    servers = {m["name"]: m for m in st.get("servers", [])}
    advertised = {n: m.get("endpoint") for n, m in servers.items()}
    want_adv = {n: c.proxies[n].endpoint for n in ("shard-0", "shard-1", "logstore", "aggregator")}
    check(advertised == want_adv, f"registered endpoints {advertised}; want the proxies {want_adv}")
    updates = {n: m.get("update_endpoint") for n, m in servers.items() if m["role"] == "shard"}
    want_upd = {n: "tcp://" + c.proxies[n + "-updates"].endpoint for n in ("shard-0", "shard-1")}
    check(updates == want_upd, f"registered update endpoints {updates}; want {want_upd}")
    note(f"cluster up in {time.monotonic() - t:.1f} s; {len(c.proxies)} proxies; "
         f"{len(model.nodes)} nodes, {sum(len(m) for m in model.edges.values())} edges")

    # Per shard, a node of the base graph only the recovery probes write (a fresh edge each time):
    # an acknowledged write to a shard means the LogStore's queue to it delivered everything
    # before it (its lane is in order), so the unresolved writes are settled by then.
    barrier = {}
    for i in sorted(model.nodes):
        barrier.setdefault(shard_of(i, SHARDS), i)
    check(len(barrier) == SHARDS, f"a base node per shard: {barrier}")
    universe = [i for i in sorted(model.ids_ever) if i not in barrier.values()]
    work = Workload(model, universe)
    probe = Session("probe", SEED + 7)
    next_barrier_dst = [95_000_000]

    barrier_unknown = []  # recovery writes of unknown outcome, settled with the others

    def wrong_reads(reqs, label):
        """Runs the reads through the probe client; each answer unlike the model's is a failure."""
        bad = 0
        for q in reqs:
            got, want = probe.call(q), model.run(q)
            if got != want:
                bad += 1
                check(False, f"{label}: {short(q, 200)}\n      got  {short(got)}\n      want "
                             f"{short(want)}")
        return bad

    def recover():
        """One write and one read through every shard until all succeed; the seconds it took,
        or None after RECOVERY_S."""
        t0 = time.monotonic()
        pending = dict(barrier)
        while pending and time.monotonic() - t0 < RECOVERY_S:
            for s, i in list(pending.items()):
                next_barrier_dst[0] += 1
                q = {"op": "assoc_add", "src": i, "type": 9, "dst": next_barrier_dst[0],
                     "timestamp": 1, "properties": {}}
                got = probe.call(q)
                if "ok" not in got:
                    if not check((got.get("error") or {}).get("code") in TRANSIENT,
                                 f"recovery write {short(q)}: {short(got)}"):
                        continue
                    barrier_unknown.append(q)
                    continue
                want = model.write(q)
                check(got == want, f"recovery write {short(q)}: {short(got)}; want {want}")
                read = {"op": "obj_get", "id": i}
                got = probe.call(read)
                if got == model.run(read):
                    del pending[s]
                else:
                    check("error" in got, f"recovery read {short(read)}: {short(got)}; want "
                                          f"{model.run(read)}")
            if pending:
                time.sleep(0.05)
        return None if pending else time.monotonic() - t0

    def run_mode(name, fault, update_probability):
        section(f"mode {name}: {fault}, on the update channels with probability "
                f"{update_probability}")
        work.stats, work.codes, work.wrong = Counter(), Counter(), 0
        # Without faults, nothing may fail.
        work.allowed = () if fault.kind == "none" else TRANSIENT
        work.touched = set()
        before_stats = c.stats()
        sessions = [Session(f"{name}-{k}", SEED + 100 + k) for k in range(WORKERS)]
        # Connected before the fault: `zipg query` gives up at once if its first call fails.
        for k, x in enumerate(sessions):
            got = x.call({"op": "obj_get", "id": MISSING[0]})
            check(got == {"ok": None}, f"{name}: client {k} before the fault: {short(got)}")
        c.set_fault(fault, update_probability)
        end = time.monotonic() + PHASE_S
        latencies = []

        def worker(k):
            r = random.Random(f"{SEED}-{name}-{k}")
            while time.monotonic() < end:
                op = work.plan(r)
                if op is None:
                    time.sleep(0.01)
                    continue
                t1 = time.monotonic()
                try:
                    got = sessions[k].call(op["req"])
                    with work.lock:
                        latencies.append(time.monotonic() - t1)
                    work.settle(op, got, name)
                except Exception as e:  # the client process died, or a bug here: never silent
                    check(False, f"{name}: client {k}: {type(e).__name__}: {e}")
                    return
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(WORKERS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        phase_s = time.monotonic() - (end - PHASE_S)
        c.set_fault(nf.NONE)
        t_off = time.monotonic()
        for s in sessions:
            s.close()
            procs.sessions.remove(s)
        moved = c.stats()
        moved.subtract(before_stats)
        faults = {k: v for k, v in moved.items() if k in ("delayed", "dropped_bytes", "duplicated",
                                                           "cuts", "resets") and v}
        st = work.stats
        note(f"{name}: {phase_s:.1f} s; writes {st['writes tried']} tried, {st['writes acked']} "
             f"acked, {st['writes failed']} failed; reads {st['reads ok']} ok, "
             f"{st['reads error']} error; error codes {dict(work.codes) or '-'}; wrong answers "
             f"{work.wrong}; proxies: {moved['connections']} connections, {faults or 'no faults'}"
             f"; call latency p50 {percentile(latencies, 0.5):.3f} s, p90 "
             f"{percentile(latencies, 0.9):.3f} s, max {percentile(latencies, 1.0):.3f} s")
        if fault.kind != "none":
            check(faults, f"{name}: the proxies injected no fault")
        check(st["writes tried"] > 0 and st["reads ok"] + st["reads error"] > 0,
              f"{name}: no calls ran: {dict(st)}")
        dead = c.dead()
        if not check(not dead, f"{name}: servers died: {dead}"):
            return False

        # Recovery: delayed chunks delivered, then writes and reads through every shard succeed.
        check(c.drained(10), f"{name}: the proxies still hold bytes 10 s after the faults stopped")
        took = recover()
        if not check(took is not None, f"{name}: no recovery within {RECOVERY_S} s of the faults "
                                       f"stopping; aggregator status "
                                       f"{short(raw_status(aggregator), 800)}"):
            return False
        # A write the aggregator sent before the faults stopped may reach the LogStore until its
        # call times out; after that, one more round settles everything it queued.
        time.sleep(max(0.0, t_off + CALL_TIMEOUT_MS / 1000 + 0.3 - time.monotonic()))
        check(recover() is not None, f"{name}: the second recovery round failed")

        # Every write of unknown outcome happened wholly or not at all; the model takes it.
        seen_counts = Counter()
        for node, (q, reqs, before, after) in sorted(work.uncertain.items()):
            seen = [probe.call(x) for x in reqs]
            if seen == after:
                seen_counts["present"] += 1
                model.write(q)
            elif seen == before:
                seen_counts["absent"] += 1
            else:
                check(False, f"{name}: unacknowledged {short(q, 200)}: reads {short(seen)}; want "
                             f"{short(before)} (not applied) or {short(after)} (applied)")
        for q in barrier_unknown:
            reqs, before, after = work.outcome(q)
            seen = [probe.call(x) for x in reqs]
            if seen == after:
                model.write(q)
            else:
                check(seen == before, f"{name}: unacknowledged recovery write {short(q)}: "
                                      f"{short(seen)}; want {short(before)} or {short(after)}")
        barrier_unknown.clear()
        work.uncertain.clear()
        work.obj_pending.clear()
        work.obj_log.clear()
        # Every node written during the mode reads as the model says, through a fresh client.
        reqs = node_reads(model, sorted(work.touched | set(barrier.values())))
        bad = wrong_reads(reqs, f"{name}, after recovery")
        note(f"{name}: recovered {took:.2f} s after the faults stopped; unacknowledged writes "
             f"{dict(seen_counts) or '-'}; {len(reqs)} reads of the {len(work.touched)} written "
             f"nodes, {bad} wrong")
        return True

    def lagging_replica():
        """shard-0 cut off from the LogStore's updates only: etcd and the aggregator still reach
        it, so its lease holds and it keeps answering. A write of a node of shard 0 then waits
        the LogStore's update timeout, fails UNAVAILABLE and is applied in the LogStore anyway
        (it is logged: the lane delivers it later), so the LogStore holds a newer version of an
        edge than the one shard-0's committed pointer names. A read there must refuse (the
        answer would lack the edge, docs/consistency.md "Fragment reads"), never answer without
        it; once the channel is back, the write is delivered and read everywhere."""
        section("lagging replica: shard-0 cut off from the LogStore's updates, its lease held")
        i = next(x for x in sorted(model.nodes)
                 if shard_of(x, SHARDS) == 0 and x not in barrier.values())
        edge = {"op": "assoc_add", "src": i, "type": 8, "dst": 96_000_001, "timestamp": 1,
                "properties": {"v": "first"}}
        read = {"op": "assoc_range", "id": i, "type": 8, "pos": 0, "limit": INT64_MAX}
        got = probe.call(edge)
        if not check(got == model.write(edge), f"lagging replica: first write {short(got)}"):
            return
        before = model.run(read)
        check(probe.call(read) == before and before["ok"], f"lagging replica: read {short(before)}")
        status_of = lambda: raw_status(f"127.0.0.1:{c.proxies['shard-0'].target[1]}") or {}
        disagreed = lambda: sum(x.get("disagreements", 0)
                                for x in (status_of().get("commits") or {}).values())
        disagreed_before = disagreed()
        updates = c.proxies["shard-0-updates"]
        updates.set_fault(nf.Fault("drop", probability=1.0, direction="both"))
        second = dict(edge, timestamp=2, properties={"v": "second"})
        t0 = time.monotonic()
        got = probe.call(second)
        code = (got.get("error") or {}).get("code")
        check(code in TRANSIENT, f"lagging replica: the write shard-0 cannot get: {short(got)}; "
                                 f"want one of {TRANSIENT}")
        # The LogStore applies it once its update timeout passed (at most the call timeout).
        time.sleep(max(0.0, t0 + CALL_TIMEOUT_MS / 1000 + 0.5 - time.monotonic()))
        answers = Counter()
        for _ in range(10):
            got = probe.call(read)
            if "error" in got:
                answers[got["error"].get("code")] += 1
                check(got["error"].get("code") == "UNAVAILABLE",
                      f"lagging replica: read {short(read)}: {short(got)}")
            else:
                answers["ok"] += 1
                edges = got["ok"]
                check(len(edges) == 1 and edges[0]["dst"] == edge["dst"],
                      f"lagging replica: read {short(read)} answered {short(got)}: the edge "
                      f"must be there (first or second version)")
        refused = disagreed() - disagreed_before
        note(f"lagging replica: the write failed {code} after {time.monotonic() - t0:.1f} s; "
             f"10 reads of the node on shard-0: {dict(answers)}; shard-0 refused {refused} "
             f"for a version the LogStore no longer holds")
        check(refused > 0, "lagging replica: shard-0 never found the LogStore ahead of it (its "
                           "commits.disagreements did not grow): the scenario did not happen")
        updates.set_fault(nf.NONE)
        model.write(second)  # logged: the lane delivers it once the channel is back
        want = model.run(read)
        deadline = time.monotonic() + RECOVERY_S
        got = None
        while time.monotonic() < deadline:
            got = probe.call(read)
            if got == want:
                break
            time.sleep(0.1)
        check(got == want, f"lagging replica: after the channel is back: {short(got)}; want "
                           f"{short(want)}")
        check(recover() is not None, "lagging replica: no recovery after the channel is back")

    for name, fault, update_probability in MODES:
        if not run_mode(name, fault, update_probability):
            break
    else:  # every mode ran and recovered
        lagging_replica()

    section("final: every node, traversals, get_node_ids; the servers stop cleanly")
    t = time.monotonic()
    ids = sorted(model.ids_ever | set(MISSING))
    reqs = node_reads(model, ids)
    reqs += [q for q in node_reads(model, random.Random(SEED).sample(ids, 25), traversals=True)
             if q["op"] in ("bfs", "rpq")]
    for i in random.Random(SEED + 1).sample(sorted(model.nodes), 10):
        if model.nodes[i]:
            k = sorted(model.nodes[i])[0]
            reqs.append({"op": "get_node_ids", "properties": {k: model.nodes[i][k]}})
    bad = wrong_reads(reqs, "final")
    note(f"final: {len(reqs)} reads, {bad} wrong, {time.monotonic() - t:.1f} s")
    check(not c.dead(), f"final: servers died: {c.dead()}")

    probe.close()
    procs.sessions.remove(probe)
    left = []
    for p in list(c.proxies.values()):
        left += p.close()
        procs.sessions.remove(p)
    check(not left, f"proxy threads still running after close: {left}")
    # Stopped in the order `zipg local stop` uses; each must exit 0 on SIGTERM.
    for name in ("aggregator", "logstore", "shard-0", "shard-1", "etcd"):
        pid = c.pids[name]
        still = procs.kill_and_wait([pid], signal.SIGTERM, 15.0)
        rc = procs.children[pid].poll()
        check(not still and (rc == 0 or name == "etcd"),
              f"{name} on SIGTERM: {'still running' if still else f'exit {rc}'}; {log_tail(name)}")


if __name__ == "__main__":
    cluster_procs.run_test("netfault_test", main, report, procs.cleanup)
