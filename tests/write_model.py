"""Shared pieces of the end-to-end tests that write through a real cluster (writes_test.py,
replicas_test.py): a raw Thrift status() call, the partition function (xxh3 of the id, as
graph/partition.h), a client session (`zipg query --connect A --batch -`), and the model of the
contract with writes (WriteModel, on graph_model.Model) with random write requests.
"""
import json
import os
import random
import socket
import struct
import subprocess
import threading
import time
from collections import defaultdict

from graph_model import (CODES, COMMON, EDGE_PROPS, INT64_MAX, NODE_PROPS, TYPES, Input,  # noqa: F401
                         Model, load_model, same, search_requests, value)

# Raw Thrift status() (framed, strict binary protocol): a cheap poll that counts as one call.
def tstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack(">i", len(b)) + b


def tframe(payload):
    return struct.pack(">I", len(payload)) + payload


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def raw_status(endpoint, timeout=5.0):
    """status() of one server over a raw socket: the JSON document, or None."""
    host, port = endpoint.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(tframe(struct.pack(">I", 0x80010001) + tstr("status") + struct.pack(">i", 77) +
                             b"\x00"))
            head = recv_exact(s, 4)
            if head is None:
                return None
            p = recv_exact(s, struct.unpack(">I", head)[0])
    except OSError:
        return None
    if p is None or (struct.unpack(">I", p[:4])[0] & 0xFF) != 2:
        return None
    ln = struct.unpack(">i", p[4:8])[0]
    body = p[12 + ln:]
    if body[:3] != b"\x0b\x00\x00":
        return None
    n = struct.unpack(">i", body[3:7])[0]
    return json.loads(body[7:7 + n])


# ------------------------------------------------------------------------------------------------
# graph/partition.h: ShardOf(id) = XXH3_64bits(8 little-endian bytes of id) % shards. For an
# 8-byte input XXH3 is XXH3_len_4to8_64b with the default secret (xxhash.h).
_SECRET_8_24 = bytes([0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
                      0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb])
M64 = (1 << 64) - 1


def xxh3_8(data):
    def rotl(x, r):
        return ((x << r) | (x >> (64 - r))) & M64
    input1 = int.from_bytes(data[0:4], "little")
    input2 = int.from_bytes(data[4:8], "little")
    bitflip = int.from_bytes(_SECRET_8_24[0:8], "little") ^ int.from_bytes(_SECRET_8_24[8:16], "little")
    keyed = ((input2 + (input1 << 32)) & M64) ^ bitflip
    h = keyed ^ rotl(keyed, 49) ^ rotl(keyed, 24)
    h = (h * 0x9FB21C651E98DF25) & M64
    h ^= (h >> 35) + 8
    h = (h * 0x9FB21C651E98DF25) & M64
    return h ^ (h >> 28)


def shard_of(i, shards=4):
    return xxh3_8((i & M64).to_bytes(8, "little")) % shards


# ------------------------------------------------------------------------------------------------
# One long-lived `zipg query --connect A --batch -` per client: a JSON line in, a JSON line out.
class Session:
    """`zipg` binary, test directory (for its stderr file), the list of open sessions to add
    itself to (closed before the servers stop), then the aggregator and a label."""

    def __init__(self, zipg, tmp, sessions, endpoint, label, seed=0, extra=()):
        self.endpoint, self.label = endpoint, label
        self.rnd = random.Random(seed)
        self.err = open(os.path.join(tmp, f"session-{label}.err"), "ab")
        self.p = subprocess.Popen([zipg, "query", "--connect", endpoint, *extra, "--batch", "-"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err)
        self.calls = 0
        sessions.append(self)

    def call(self, req):
        line = json.dumps(req, ensure_ascii=self.rnd.random() < 0.5).encode("utf-8") + b"\n"
        self.p.stdin.write(line)
        self.p.stdin.flush()
        out = self.p.stdout.readline()
        self.calls += 1
        if not out:
            raise RuntimeError(f"session {self.label} ({self.endpoint}) ended; exit "
                               f"{self.p.poll()}")
        try:
            return json.loads(out)
        except ValueError:
            return {"unparsable": out[:300].decode("utf-8", "replace")}

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.close()
                self.p.wait(timeout=10)
            except Exception:  # noqa: BLE001
                self.p.kill()
        self.err.close()


def acceptable(got, want):
    if not isinstance(got, dict):
        return False
    if "error" in got:
        e = got["error"]
        if not (isinstance(e, dict) and e.get("code") in CODES and e.get("message")):
            return False
    return same(got, want)


def short(x, n=400):
    s = json.dumps(x, ensure_ascii=True) if not isinstance(x, str) else x
    return s if len(s) <= n else s[:n] + "..."


# ------------------------------------------------------------------------------------------------
# The model with writes. graph_model.Model answers the reads from `nodes`, rec() and neighbors().
def normalize(props):
    """docs/writes.md / NormalizeProperties: a written empty value is stored as absent."""
    return {k: v for k, v in props.items() if v != ""}


class WriteModel(Model):
    def __init__(self, nodes, records):
        self.nodes = nodes                      # id -> {name: value}
        self.edges = {}                         # (src, type) -> {dst: edge}
        self.types = defaultdict(set)           # src -> types with at least one edge
        for (s, t), lst in records.items():
            self.edges[(s, t)] = {e["dst"]: e for e in lst}
            self.types[s].add(t)
        self.cache = {}
        self.keys_ever = set(self.edges)        # every (src, type) that ever had an edge
        self.ids_ever = set(nodes) | {s for s, _ in self.edges}
        self.gen = 1                            # the LogStore's live generation
        self.shard_gens = []                    # generations compacted into log shards
        self.origin = {}                        # ("n", id) / ("e", s, t, d) -> generation; 0 = base
        self.ptrs = defaultdict(set)            # node -> generations holding data written for it
        self.touched = set()                    # nodes whose base shard got an update
        self.named = set()                      # nodes named by any write request
        self.exact = True                       # generations of all writes known
        self.history = []                       # property lists written (for stale filters)

    def rec(self, i, t):
        r = self.cache.get((i, t))
        if r is None:
            r = sorted(self.edges.get((i, t), {}).values(), key=lambda e: (-e["timestamp"], e["dst"]))
            self.cache[(i, t)] = r
        return r

    def neighbors(self, i, t=None):
        out = set()
        for typ in ([t] if t is not None else self.types.get(i, ())):
            out.update(self.edges.get((i, typ), {}))
        return sorted(out)

    def live_ids(self):
        out = set(self.nodes)
        for (s, _), m in self.edges.items():
            if m:
                out.add(s)
                out.update(m)
        return sorted(out)

    def edge(self, s, t, d):
        return self.edges.get((s, t), {}).get(d)

    def _put_node(self, i, props):
        self.nodes[i] = normalize(props)
        if self.nodes[i]:
            self.history.append(self.nodes[i])
        self.origin[("n", i)] = self.gen
        self.ptrs[i].add(self.gen)
        self.touched.add(i)
        self.ids_ever.add(i)

    def _put_edge(self, s, t, d, ts, props):
        self.edges.setdefault((s, t), {})[d] = {"src": s, "type": t, "dst": d, "timestamp": ts,
                                               "properties": normalize(props)}
        self.types[s].add(t)
        self.cache.pop((s, t), None)
        self.keys_ever.add((s, t))
        self.ids_ever.add(s)
        self.origin[("e", s, t, d)] = self.gen
        self.ptrs[s].add(self.gen)
        self.touched.add(s)

    def _del_edge(self, s, t, d):
        m = self.edges.get((s, t))
        if not m or d not in m:
            return False
        del m[d]
        self.origin.pop(("e", s, t, d), None)
        self.cache.pop((s, t), None)
        if not m:
            del self.edges[(s, t)]
            self.types[s].discard(t)
        return True

    def write(self, req):
        """Applies a write request; returns the expected answer ({"ok": ..} or {"error": CODE})."""
        op = req["op"]
        if op.startswith("obj_"):
            i = req["id"]
            self.named.add(i)
            if i < 0:
                return {"error": "INVALID_ARGUMENT"}
            if op == "obj_add":
                if i in self.nodes:
                    return {"error": "ALREADY_EXISTS"}
                self._put_node(i, req["properties"])
                return {"ok": None}
            if op == "obj_update":
                if i not in self.nodes:
                    return {"error": "NOT_FOUND"}
                self._put_node(i, req["properties"])
                return {"ok": None}
            assert op == "obj_delete", op
            self.touched.add(i)
            found = i in self.nodes or bool(self.types.get(i))
            self.nodes.pop(i, None)
            self.origin.pop(("n", i), None)
            for t in list(self.types.get(i, ())):
                for d in list(self.edges.get((i, t), {})):
                    self._del_edge(i, t, d)
            return {"ok": {"deleted": found}}
        s, t, d = req["src"], req["type"], req["dst"]
        self.named.add(s)
        if s < 0 or t < 0 or d < 0:
            return {"error": "INVALID_ARGUMENT"}
        if op == "assoc_add":
            replaced = self.edge(s, t, d) is not None
            self._put_edge(s, t, d, req["timestamp"], req["properties"])
            return {"ok": {"replaced": replaced}}
        if op == "assoc_update":
            if self.edge(s, t, d) is None:
                return {"error": "NOT_FOUND"}
            self._put_edge(s, t, d, req["timestamp"], req["properties"])
            return {"ok": None}
        assert op == "assoc_delete", op
        self.touched.add(s)
        return {"ok": {"deleted": self._del_edge(s, t, d)}}

    def live_in(self, g):
        """(nodes with live properties, live edges) written in generation g."""
        n = sum(1 for k, v in self.origin.items() if v == g and k[0] == "n")
        e = sum(1 for k, v in self.origin.items() if v == g and k[0] == "e")
        return n, e

    def origins_of(self, i):
        """The generations (0 = base shard) holding node i's live data."""
        out = set()
        if i in self.nodes:
            out.add(self.origin.get(("n", i), 0))
        for t in self.types.get(i, ()):
            for d in self.edges.get((i, t), {}):
                out.add(self.origin.get(("e", i, t, d), 0))
        return out


WRITE_OPS = {"obj_add", "obj_update", "obj_delete", "assoc_add", "assoc_update", "assoc_delete"}
PROP_NAMES = NODE_PROPS + ["fresh", "x y"]
EDGE_NAMES = EDGE_PROPS + ["extra"]


def wvalue(r):
    x = r.random()
    if x < 0.15:
        return ""  # stored as absent
    if x < 0.5:
        return r.choice(COMMON)
    return value(r)


def node_props(r):
    return {n: wvalue(r) for n in r.sample(PROP_NAMES, r.randint(0, 4))}


def compressed_input(zipg, tmp, store, rnd, shards, check, scale=1):
    """A random edge-case input (graph_model.Input: 300 nodes, 3000 edges, times `scale`) written
    to `tmp` and compressed into `store` with `shards` shards: (input, nodes.csv, edges.csv, its
    WriteModel), or None after a failed check."""
    inp = Input(rnd, num_ids=400 * scale, num_nodes=300 * scale, num_edges=3000 * scale,
                id_range=5000 * scale)
    nodes_csv, edges_csv = inp.write(tmp)
    r = subprocess.run([zipg, "compress", "--nodes", nodes_csv, "--edges", edges_csv, "--out",
                        store, "--shards", str(shards)], capture_output=True, timeout=300)
    if not check(r.returncode == 0, f"compress: {r.stderr[-500:]!r}"):
        return None
    return inp, nodes_csv, edges_csv, WriteModel(*load_model(nodes_csv, edges_csv))


def random_write(model, w, hot, universe):
    """A random write request as a client would send it, half of them on one of the `hot` ids,
    the others anywhere in `universe`; deletes mostly name existing edges of `model`."""
    x = w.random()
    s = w.choice(hot) if w.random() < 0.5 else w.choice(universe)
    if x < 0.45:
        return {"op": "assoc_add", "src": s, "type": w.choice(TYPES), "dst": w.choice(universe),
                "timestamp": w.randrange(1_600_000_000, 1_700_000_000),
                "properties": edge_props(w)}
    if x < 0.6:
        ts = sorted(model.types.get(s, ()))
        if ts:
            t = w.choice(ts)
            return {"op": "assoc_delete", "src": s, "type": t,
                    "dst": w.choice(sorted(model.edges[(s, t)]))}
        return {"op": "assoc_delete", "src": s, "type": 0, "dst": 5}
    if x < 0.8:
        return {"op": "obj_update" if s in model.nodes else "obj_add", "id": s,
                "properties": node_props(w)}
    if x < 0.85:
        return {"op": "obj_delete", "id": w.choice(universe)}
    return {"op": "obj_add", "id": w.choice(universe), "properties": node_props(w)}


# node_reads' rpq: a type, `_` and a star.
TRAVERSAL_EXPR = "(0|1)/_*"


def value_searches(model, ids):
    """search_node_ids requests cut from the live values of every 3rd node of `ids`, cycling
    through the match kinds (a middle piece, the first or last 3 characters, the whole value),
    every other one restricted to the value's property: after writes, deletes, compactions,
    merges and rebuilds, the search index and the LogStore must find exactly the model's nodes."""
    reqs = []
    kinds = ["contains", "prefix", "suffix", "exact"]
    for k, i in enumerate(ids[::3]):
        props = model.nodes.get(i) or {}
        values = [(n, v) for n, v in sorted(props.items()) if v]
        if not values:
            continue
        name, v = values[k % len(values)]
        match = kinds[k % 4]
        pattern = {"contains": v[len(v) // 3:len(v) // 3 + 4], "prefix": v[:3], "suffix": v[-3:],
                   "exact": v}[match]
        req = {"op": "search_node_ids", "pattern": pattern, "match": match}
        if k % 2:
            req["property"] = name
        reqs.append(req)
    return reqs


# node_reads' rpqs: this many sources each (the answer's pairs say which source reached what, so
# one rpq answers for all of them; a server searches them together, in a fraction of the time of
# one call each: 2.0 s instead of 3.2 s for 400 ids under ASan, 2026-12-07).
RPQ_SOURCES = 25


def node_reads(model, ids, traversals=False):
    """Every read that shows a node's state in `model`: its properties, its neighbors, and each of
    its edge lists whole with its count; with `traversals`, also a bfs (depth 3, any type) from
    each, an rpq (TRAVERSAL_EXPR) from each, RPQ_SOURCES sources per request, which read other
    nodes' edges too, and value searches, which read every shard and the LogStore (so none of
    these for a server asked directly about its own shards, nor while some shard is down)."""
    reqs = value_searches(model, ids) if traversals else []
    for i in ids:
        reqs.append({"op": "obj_get", "id": i})
        reqs.append({"op": "get_neighbor_ids", "id": i})
        for t in sorted(model.types.get(i, ())):
            reqs.append({"op": "assoc_range", "id": i, "type": t, "pos": 0, "limit": INT64_MAX})
            reqs.append({"op": "assoc_count", "id": i, "type": t})
        if traversals:
            reqs.append({"op": "bfs", "id": i, "max_depth": 3})
    if traversals:
        ids = list(ids)
        for k in range(0, len(ids), RPQ_SOURCES):
            reqs.append({"op": "rpq", "expr": TRAVERSAL_EXPR, "sources": ids[k:k + RPQ_SOURCES]})
    return reqs


class ClusterView:
    """The cluster as the aggregator at `aggregator` reports it (its status "servers"): members
    by name, the LogStores, the leader's name, a LogStore's own status. `check` is the test's."""

    def __init__(self, aggregator, check):
        self.aggregator, self.check = aggregator, check

    def members(self):
        return {m["name"]: m for m in (raw_status(self.aggregator) or {}).get("servers", [])}

    def logstores(self):
        return {n: m for n, m in self.members().items() if m["role"] == "logstore"}

    def leader_name(self):
        return (raw_status(self.aggregator) or {}).get("logstore")

    def logstore_status(self, name):
        m = self.members().get(name)
        return (raw_status(m["endpoint"]) or {}).get("logstore", {}) if m else {}

    def wait_in_sync(self, leader, timeout=30):
        """True once `leader` leads with its standby in sync; else a failed check naming the
        leader's view of its standby."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ls = self.logstores()
            if self.leader_name() == leader and ls.get(leader, {}).get("sync") == "in_sync" and \
                    len(ls) == 2:
                return True
            time.sleep(0.1)
        return self.check(False, f"{leader} leads with its standby in sync: {self.logstores()}; "
                                 f"its status says {self.logstore_status(leader).get('standby')}")


class ClusterCheck:
    """Checks a running cluster against `model` (replicas_test.py, deploy_test.py): writes through
    `sessions` (taken in turn), every node's reads through them or asked of each replica directly.
    new_session(endpoint, label) opens a Session; members() returns the aggregator's status
    "servers" by name; check/note are the test's report functions."""

    def __init__(self, model, sessions, new_session, members, shards, check, note):
        self.model, self.sessions, self.new_session = model, sessions, new_session
        self.members, self.shards, self.check, self.note = members, shards, check, note

    def write(self, req, k=0):
        want = self.model.write(req)
        got = self.sessions[k % len(self.sessions)].call(req)
        self.check(acceptable(got, want), f"write {short(req, 200)}: got {short(got)} want {want}")
        return got

    def compare(self, session, reqs, label):
        """Asks every request of `session`; the number of answers that differ from the model."""
        bad = 0
        for q in reqs:
            got, want = session.call(q), self.model.run(q)
            if not acceptable(got, want):
                bad += 1
                self.check(False, f"{label}: {short(q, 200)}\n      got  {short(got)}\n      "
                                  f"want {short(want)}")
        return bad

    def ids(self):
        return sorted(self.model.ids_ever | {3, 999_999})

    def _compare_all(self, work):
        """compare() of each (session, reqs, label) of `work` at once, one thread each (the
        cluster has two cores to answer with; nothing writes meanwhile): the sum of the bad."""
        bad = [0] * len(work)

        def one(k):
            try:
                bad[k] = self.compare(*work[k])
            except Exception as e:  # a failed check, not a traceback the test would not see
                bad[k] = 1
                self.check(False, f"{work[k][2]}: the comparison stopped: {e!r}")
        threads = [threading.Thread(target=one, args=(k,)) for k in range(len(work))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sum(bad)

    def full_comparison(self, label, traversals=True):
        t = time.monotonic()
        reqs = node_reads(self.model, self.ids(), traversals=traversals)
        n = len(self.sessions)
        bad = self._compare_all([(s, reqs[k::n], label) for k, s in enumerate(self.sessions)])
        self.check(bad == 0, f"{label}: {bad} of {len(reqs)} answers through the aggregators differ")
        self.note(f"{label}: {len(reqs)} reads through the aggregators, {bad} wrong "
                  f"({time.monotonic() - t:.1f} s)")

    def compare_replicas(self, label, names):
        """Each replica, asked directly, answers the model for every node of its shards, and for
        40 searches (a server answers a search from its own copies of the shards it serves and
        asks the others for the rest: a copy of its own that lacks a match shows)."""
        t = time.monotonic()
        current = self.members()
        total = 0
        work = []
        searches = [q for q in search_requests(self.model, None, random.Random(label))
                    if "ok" in self.model.run(q)]
        searches = random.Random(label).sample(searches, min(40, len(searches)))
        for name in names:
            m = current.get(name)
            if not self.check(m and m.get("serving"), f"{label}: {name} registered and serving: "
                                                      f"{m}"):
                continue
            mine = [i for i in self.ids() if shard_of(i, self.shards) in m["shards"]]
            reqs = node_reads(self.model, mine) + searches
            total += len(reqs)
            work.append((self.new_session(m["endpoint"], f"direct-{name}-{label}"), reqs,
                         f"{label}: {name} directly"))
        bad = self._compare_all(work)
        for s, _, _ in work:
            s.close()
        self.check(bad == 0, f"{label}: {bad} of {total} direct replica answers differ")
        self.note(f"{label}: {total} reads asked of {names} directly, {bad} wrong "
                  f"({time.monotonic() - t:.1f} s)")

    def wait_serving(self, names, timeout):
        """The members once every one of `names` serves (a failed check after `timeout` s)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            current = self.members()
            if all(current.get(n, {}).get("serving") for n in names):
                return current
            time.sleep(0.1)
        self.check(False, f"{names} serving within {timeout} s: {self.members()}")
        return self.members()


def edge_props(r):
    return {n: wvalue(r) for n in r.sample(EDGE_NAMES, r.randint(0, 3))}


class EdgeLoaders:
    """`count` clients writing while a test does something else (merge_test.py, rebuild_test.py):
    client k, through endpoints[k % len], adds edges (9_000_000 + k, load_type, n) and deletes
    some it added, and asks its node's count after each write; its own state says every answer
    (a wrong one is a failed check). stop() joins them and applies every acknowledged write to
    `model`. new_session(endpoint, label, seed) opens a Session."""

    def __init__(self, count, endpoints, new_session, seed, check, load_type=9):
        self.count, self.endpoints, self.new_session = count, endpoints, new_session
        self.seed, self.check, self.load_type = seed, check, load_type
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.loaded = []  # acknowledged writes
        self.stats = {"writes": 0, "reads": 0, "wrong": 0}
        self.threads = []

    def start(self):
        self.started = time.monotonic()
        self.threads = [threading.Thread(target=self._run, args=(k,)) for k in range(self.count)]
        for th in self.threads:
            th.start()

    def stop(self, model):
        """Joins the clients, applies their writes to `model`; (stats, seconds they ran)."""
        self.halt.set()
        for th in self.threads:
            th.join()
        for q in self.loaded:
            model.write(q)
        return self.stats, time.monotonic() - self.started

    def _run(self, k):
        s = self.new_session(self.endpoints[k % len(self.endpoints)], f"loader-{k}",
                             self.seed + 10 + k)
        lw = random.Random(self.seed + 20 + k)
        src, held, n, mine = 9_000_000 + k, set(), 0, []
        while not self.halt.is_set():
            if held and lw.random() < 0.35:
                d = lw.choice(sorted(held))
                q = {"op": "assoc_delete", "src": src, "type": self.load_type, "dst": d}
                want = {"ok": {"deleted": True}}
                held.discard(d)
            else:
                n += 1
                q = {"op": "assoc_add", "src": src, "type": self.load_type, "dst": n,
                     "timestamp": n, "properties": {"n": str(n)}}
                want = {"ok": {"replaced": False}}
                held.add(n)
            got = s.call(q)
            ok = acceptable(got, want)
            mine.append(q)
            count = s.call({"op": "assoc_count", "id": src, "type": self.load_type})
            counted = acceptable(count, {"ok": len(held)})
            with self.lock:
                self.stats["writes"] += 1
                self.stats["reads"] += 1
                if not ok or not counted:
                    self.stats["wrong"] += 1
                    self.check(False, f"loader {k}: {short(q)} -> {short(got)}; count "
                                      f"{short(count)} want {len(held)}")
        with self.lock:
            self.loaded.extend(mine)
        s.close()
