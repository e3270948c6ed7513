"""The Python client against a real local cluster, checked against the embedded engine.

Run:  ZIPG_BIN=build/client/zipg /usr/bin/python3 -m unittest discover -s client/python/tests -v

The test builds the package the way pip installs it (`pip install --no-build-isolation --no-deps
--target TMP` from a copy of client/python and thrift/zipg.thrift, so the source tree is left
untouched) and imports that. With ZIPG_PYTHON_INSTALLED=1 it tests the `zipg` the interpreter
already imports instead (e.g. a venv where the package was installed).

It generates a graph (`zipg gen graph`), adds a few nodes and edges with awkward values (U+0000,
newlines, quotes, emoji, ...), compresses it into 2 shards, starts a cluster with `zipg local
start` (etcd, 2 shard servers, the LogStore, 2 aggregators) and compares every operation's result
for many arguments with `zipg query --store DIR --batch -` (the same JSON shapes). Then errors,
argument checks, reconnection (through a TCP proxy that the test cuts, blackholes and takes down),
the pure-Python protocol, threads, close(). search_node_ids is also checked against a stand-in
server that decodes its calls (the SearchRequest each argument combination becomes) and against
Python's own string tests over the loaded values, and read back after writes.

Snapshot reads (interface.md, "Consistency and snapshots"): reads at each of several snapshots
taken between writes, through both aggregators, see exactly the writes before it. SnapshotWireTest
needs no cluster (nor zipg): stand-in servers decode what the client sends, with the C encoder and
the pure-Python one, and check it byte for byte (every read's `at` in the call context, field 32766
after the deadline's 32767, for that one call only), snapshot()'s answers, and the checks of `at`:
  cd client/python/tests && /usr/bin/python3 -m unittest -v test_client.SnapshotWireTest

Writes (docs/writes.md) go into the same cluster: every acknowledged write is read back at once
through the OTHER aggregator (read-your-writes). They use node ids from FRESH_IDS (outside the
loaded data and every id the comparisons ask about), except one test that changes a loaded node and
its edges and puts them back exactly (checked against the embedded answers before it returns) and
one that writes node INT64_MAX (a missing node of the comparisons) and deletes it again, so the
comparison tests see the loaded graph whatever order the tests run in. The embedded store
(`zipg query --store`) is read-only and never sees a write.

The zipg binary is $ZIPG_BIN (default: <repo>/build/client/zipg).
"""
# SPDX-License-Identifier: GPL-3.0-or-later

import collections
import csv
import importlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DIR = os.path.dirname(HERE)                      # client/python
REPO = os.path.dirname(os.path.dirname(PACKAGE_DIR))     # the repository root
ZIPG_BIN = os.environ.get("ZIPG_BIN") or os.path.join(REPO, "build", "client", "zipg")
INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)
# Node ids the write tests own: no loaded node or edge and no comparison request touches them.
FRESH_IDS = range(7_000_000_000, 7_001_000_000)
# search_node_ids's match kinds and what each means on one value (model/search.h ValueMatches);
# on str, the same as on the UTF-8 bytes.
SEARCH_MATCHES = {"contains": lambda v, p: p in v, "prefix": str.startswith,
                  "suffix": str.endswith, "exact": str.__eq__}

zipg = None          # the package under test, set by setUpModule
_module_tmp = None   # where setUpModule built it


def _build_package(tmp):
    """pip-installs client/python (copied with the IDL, same relative layout) into tmp/site."""
    src = os.path.join(tmp, "src")
    shutil.copytree(PACKAGE_DIR, os.path.join(src, "client", "python"),
                    ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "rpc",
                                                  "__pycache__", "tests"))
    os.makedirs(os.path.join(src, "thrift"))
    shutil.copyfile(os.path.join(REPO, "thrift", "zipg.thrift"),
                    os.path.join(src, "thrift", "zipg.thrift"))
    site = os.path.join(tmp, "site")
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1")
    env.pop("ZIPG_THRIFT_IDL", None)
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation",
                        "--no-deps", "--no-index", "--target", site,
                        os.path.join(src, "client", "python")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    if r.returncode != 0:
        raise RuntimeError("pip install of client/python failed:\n" +
                           r.stdout.decode("utf-8", "replace"))
    return site


def setUpModule():
    global zipg, _module_tmp
    if os.environ.get("ZIPG_PYTHON_INSTALLED") == "1":
        zipg = importlib.import_module("zipg")
        return
    _module_tmp = tempfile.mkdtemp(prefix="zipg-py-pkg-")
    try:
        site = _build_package(_module_tmp)
        sys.path.insert(0, site)
        for name in [m for m in sys.modules if m == "zipg" or m.startswith("zipg.")]:
            del sys.modules[name]
        zipg = importlib.import_module("zipg")
        if not os.path.abspath(zipg.__file__).startswith(site + os.sep):
            raise RuntimeError("imported zipg from %s, not from %s" % (zipg.__file__, site))
    except BaseException:
        shutil.rmtree(_module_tmp, ignore_errors=True)
        raise


def tearDownModule():
    if _module_tmp:
        shutil.rmtree(_module_tmp, ignore_errors=True)


def _stand_in_server(respond):
    """A stand-in Thrift server on 127.0.0.1 for the wire tests: each framed call's message
    header is read, then respond(name, proto) reads the arguments from proto (the whole frame is
    proto.trans.getvalue()) and returns the *_result struct to send back, or None to close the
    connection without answering. Returns (endpoint, close)."""
    from thrift.protocol import TBinaryProtocol
    from thrift.Thrift import TMessageType
    from thrift.transport import TTransport
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()

    def read_exactly(conn, n):
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def serve():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            conn.settimeout(10)
            with conn:
                while True:
                    size = read_exactly(conn, 4)
                    if size is None:
                        break
                    frame = read_exactly(conn, int.from_bytes(size, "big"))
                    proto = TBinaryProtocol.TBinaryProtocol(TTransport.TMemoryBuffer(frame))
                    name, _, seqid = proto.readMessageBegin()
                    result = respond(name, proto)
                    if result is None:
                        break
                    out = TTransport.TMemoryBuffer()
                    reply = TBinaryProtocol.TBinaryProtocol(out)
                    reply.writeMessageBegin(name, TMessageType.REPLY, seqid)
                    result.write(reply)
                    reply.writeMessageEnd()
                    body = out.getvalue()
                    conn.sendall(len(body).to_bytes(4, "big") + body)

    server = threading.Thread(target=serve, daemon=True)
    server.start()

    def close():
        stop.set()
        server.join(timeout=10)
        listener.close()
    return "127.0.0.1:%d" % listener.getsockname()[1], close


def _run(args, stdin=None, timeout=300):
    r = subprocess.run([ZIPG_BIN] + args, input=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("zipg %s failed (%d): %s" % (" ".join(args), r.returncode,
                                                        r.stderr.decode("utf-8", "replace")))
    return r.stdout


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _csv_field(value):
    return '"' + value.replace('"', '""') + '"'


# Nodes and edges with awkward values, appended to the generated graph.
TRICKY_NODES = {
    1000: {"p00": "nul\x00in the middle", "p01": "line1\nline2\r\nline3",
           "p02": 'comma, "quote"', "p03": "\U0001F600 emoji \u00fcn\u00efc\u00f6d\u00e9",
           "p04": "\x01\x1f\x7f control", "p05": "\u2028\ufeff\u00f5\u00fd\u00ff"},
    1001: {"p00": "nul\x00in the middle", "p01": "trailing space ", "p39": "\x00"},
}
TRICKY_EDGES = [  # src, dst, type, timestamp, data
    (1000, 3, 2, 5, "edge\x00nul \u2603"),
    (1000, 1001, 2, 5, ""),
    (1000, 1002, 2, 6, "to a missing node"),
    (1001, 1000, 0, -7, "negative timestamp"),
]


class _Proxy:
    """A TCP proxy to an aggregator that a test can cut, blackhole or take down."""

    def __init__(self, upstream):
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.blackhole = False
        self.duplicate_replies = False  # send every chunk from the server twice
        self._lock = threading.Lock()
        self._sockets = []
        self._listener = None
        self.port = 0
        self.up()

    @property
    def endpoint(self):
        return "127.0.0.1:%d" % self.port

    def up(self):
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def down(self):
        """Stops listening (connecting is refused) and cuts every connection."""
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        self.cut()

    def cut(self):
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _accept(self, listener):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with self._lock:
                self._sockets.append(client)
            if self.blackhole:
                continue  # accepted, never answered
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.append(upstream)
            for a, b, replies in ((client, upstream, False), (upstream, client, True)):
                threading.Thread(target=self._pump, args=(a, b, replies), daemon=True).start()

    def _pump(self, a, b, replies):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
                if replies and self.duplicate_replies:
                    b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class ClientTest(unittest.TestCase):
    tmp = None
    store = None
    started = False

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="zipg-py-test-")
        try:
            cls._set_up()
        except BaseException:
            cls._tear_down()
            raise

    @classmethod
    def tearDownClass(cls):
        cls._tear_down()

    @classmethod
    def _tear_down(cls):
        try:
            for attr in ("g", "g2"):
                if getattr(cls, attr, None) is not None:
                    getattr(cls, attr).close()
            if cls.started:
                cls.started = False
                try:
                    _run(["local", "stop", "--store", cls.store], timeout=120)
                except Exception as e:  # reported, but the temp dir still goes
                    sys.stderr.write("test_client: %s\n" % e)
                    raise
        finally:
            if cls.tmp:
                shutil.rmtree(cls.tmp, ignore_errors=True)
                cls.tmp = None

    @classmethod
    def _set_up(cls):
        graph = os.path.join(cls.tmp, "g")
        _run(["gen", "graph", "--nodes", "300", "--out", graph, "--seed", "5"])
        nodes_csv = os.path.join(graph, "nodes.csv")
        edges_csv = os.path.join(graph, "edges.csv")
        cls.nodes, cls.header = cls._read_nodes(nodes_csv)
        cls.edges = cls._read_edges(edges_csv)
        with open(nodes_csv, "a", encoding="utf-8", newline="") as f:
            for node_id, props in TRICKY_NODES.items():
                f.write(",".join([str(node_id)] + [_csv_field(props[h]) if h in props else ""
                                                   for h in cls.header[1:]]) + "\n")
                cls.nodes[node_id] = dict(props)
        with open(edges_csv, "a", encoding="utf-8", newline="") as f:
            for src, dst, typ, ts, data in TRICKY_EDGES:
                f.write("%d,%d,%d,%d,%s\n" % (src, dst, typ, ts, _csv_field(data)))
                cls.edges[(src, typ)].append((ts, dst))

        cls.store = os.path.join(cls.tmp, "store")
        _run(["compress", "--nodes", nodes_csv, "--edges", edges_csv, "--out", cls.store,
              "--shards", "2"])
        cls.requests = cls._make_requests()
        touched = set(cls.nodes) | {d for lst in cls.edges.values() for _, d in lst}
        touched |= {src for src, _ in cls.edges}
        touched |= {r[k] for r in cls.requests for k in ("id", "src", "dst") if k in r}
        touched |= {i for r in cls.requests for i in r.get("ids", []) + r.get("sources", [])}
        assert not touched & set(FRESH_IDS), "FRESH_IDS must be outside the test data"
        cls._next_fresh = iter(FRESH_IDS)
        # The reference: the embedded engine, except for the valid searches, whose answers come
        # from Python's string tests over the loaded values (the engine's locate of a short
        # pattern walks every occurrence, which made this batch 40 s of an ASan run; their
        # argument errors still come from the engine, whose codes the client must match).
        by_python = [r["op"] == "search_node_ids" and cls._search_reference(r) is not None
                     for r in cls.requests]
        engine = [r for r, py in zip(cls.requests, by_python) if not py]
        batch = "".join(json.dumps(r) + "\n" for r in engine).encode("utf-8")
        out = _run(["query", "--store", cls.store, "--batch", "-"], stdin=batch)
        # Split on "\n" only: str.splitlines() would also split inside values at U+2028 etc.
        answers = iter([json.loads(line) for line in out.decode("utf-8").split("\n") if line])
        cls.expected = [{"ok": cls._search_reference(r)} if py else next(answers)
                        for r, py in zip(cls.requests, by_python)]
        assert next(answers, None) is None, "one answer per request"

        cls.started = True  # `local stop` cleans up what a failed start left running
        try:
            _run(["local", "start", "--store", cls.store], timeout=180)
        except RuntimeError as e:  # add the servers' logs before `local stop` removes them
            raise RuntimeError(str(e) + cls._run_logs()) from None
        with open(os.path.join(cls.store, "run", "cluster.json"), encoding="utf-8") as f:
            cls.cluster = json.load(f)
        cls.aggregators = cls.cluster["aggregators"]
        cls.g = zipg.connect(cls.aggregators[0], timeout=30.0)
        cls.g2 = zipg.connect(cls.aggregators[-1], timeout=30.0)

    @classmethod
    def _run_logs(cls):
        run = os.path.join(cls.store, "run")
        text = ""
        for name in sorted(os.listdir(run)) if os.path.isdir(run) else []:
            if name.endswith(".log"):
                with open(os.path.join(run, name), encoding="utf-8", errors="replace") as f:
                    text += "\n--- %s (end):\n%s" % (name, f.read()[-2000:])
        return text

    # ---- the data, read back from the CSV files -------------------------------------------------

    @staticmethod
    def _read_nodes(path):
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
        header = rows[0]
        nodes = {}
        for row in rows[1:]:
            nodes[int(row[0])] = {h: v for h, v in zip(header[1:], row[1:]) if v != ""}
        return nodes, header

    @staticmethod
    def _read_edges(path):
        edges = collections.defaultdict(list)  # (src, type) -> [(timestamp, dst)]
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
        for row in rows[1:]:
            src, dst, typ, ts = (int(x) for x in row[:4])
            edges[(src, typ)].append((ts, dst))
        return edges

    # ---- the requests: every operation, many arguments ------------------------------------------

    @classmethod
    def _make_requests(cls):
        rng = random.Random(7)
        nodes, edges = cls.nodes, cls.edges
        names = cls.header[1:]
        out_degree = collections.Counter()
        for (src, _), lst in edges.items():
            out_degree[src] += len(lst)
        ids = [0, 1, 2, 299] + [n for n, _ in out_degree.most_common(3)]
        ids += rng.sample(range(300), 25) + sorted(TRICKY_NODES)
        ids += [300, 999, 1002, 123456789, INT64_MAX]            # missing nodes
        ids = list(dict.fromkeys(ids))
        reqs = []
        for node in ids + [-1, INT64_MIN]:
            reqs.append({"op": "get_node_property", "id": node})
            reqs.append({"op": "get_node_property", "id": node,
                         "properties": rng.sample(names, 2) + ["no_such_property"]})
            reqs.append({"op": "get_node_property", "id": node, "properties": []})
            reqs.append({"op": "obj_get", "id": node})
            reqs.append({"op": "get_neighbor_ids", "id": node})
            reqs.append({"op": "get_neighbor_ids", "id": node,
                         "properties": {"p00": "no such value"}})
        for node in ids:
            dsts = sorted({d for t in range(6) for _, d in edges.get((node, t), [])})
            with_props = [d for d in dsts if nodes.get(d)]
            if with_props:
                d = rng.choice(with_props)
                k = rng.choice(sorted(nodes[d]))
                reqs.append({"op": "get_neighbor_ids", "id": node, "properties": {k: nodes[d][k]}})
                typ = next(t for t in range(6) if any(x == d for _, x in edges.get((node, t), [])))
                reqs.append({"op": "get_neighbor_ids", "id": node, "type": typ,
                             "properties": {k: nodes[d][k]}})
                if len(nodes[d]) >= 2:
                    k1, k2 = rng.sample(sorted(nodes[d]), 2)
                    reqs.append({"op": "get_neighbor_ids", "id": node,
                                 "properties": {k1: nodes[d][k1], k2: nodes[d][k2]}})
            for typ in range(6):
                reqs += cls._edge_requests(rng, node, typ, edges.get((node, typ), []))
        for typ in (-1, 0):
            reqs.append({"op": "get_edge_record", "id": -1, "type": typ})
            reqs.append({"op": "get_edge_record", "id": 1, "type": typ})
            reqs.append({"op": "assoc_count", "id": 1, "type": typ})
        reqs.append({"op": "get_neighbor_ids", "id": 1, "type": -1})
        reqs += cls._node_id_requests(rng)
        reqs += cls._traversal_requests(rng, ids)
        reqs += cls._search_requests(rng)
        return reqs

    @classmethod
    def _search_requests(cls, rng):
        """search_node_ids: pieces of the generated and the awkward values cut at random code-point
        boundaries, whole values, prefixes and suffixes, single awkward characters and common words;
        every match kind (None: the default); the value's own property, none, another one or one
        no node has; small limits (truncated) and the largest; then argument errors (the client
        refuses them before sending, the embedded engine after parsing: the codes must agree)."""
        nodes = cls.nodes
        names = cls.header[1:]
        values = sorted({(k, v) for n in nodes.values() for k, v in n.items()})
        kinds = list(SEARCH_MATCHES)

        def search(pattern, prop=None, match=None, limit=None):
            q = {"op": "search_node_ids", "pattern": pattern}
            for k, v in (("property", prop), ("match", match), ("limit", limit)):
                if v is not None or rng.random() < 0.1:  # an explicit None is the default too
                    q[k] = v
            return q

        def prop_for(k):
            x = rng.random()
            return k if x < 0.4 else None if x < 0.8 else \
                rng.choice(names + ["no_such_property", ""])

        reqs = []
        for _ in range(150):
            k, v = rng.choice(values)
            i = rng.randrange(len(v))
            j = rng.randint(i + 1, min(len(v), i + rng.choice([1, 2, 4, 8, 30])))
            reqs.append(search(v[i:j], prop_for(k), rng.choice(kinds + [None]),
                               rng.choice([None, None, None, 1, 3, 50])))
        for k, v in rng.sample(values, 20) + [(k, v) for props in TRICKY_NODES.values()
                                              for k, v in props.items()]:
            for m in kinds:
                reqs.append(search(v, prop_for(k), m))
            reqs.append(search(v[:rng.randint(1, len(v))], prop_for(k), "prefix"))
            reqs.append(search(v[-rng.randint(1, len(v)):], prop_for(k), "suffix"))
            reqs.append(search(v + "x", prop_for(k), rng.choice(kinds)))
        for p in ["\x00", "\n", "\r\n", '"', ",", " ", "\U0001F600", "\u00fc", "\u2028", "\ufeff",
                  "\x7f", "Pmmk", "pmmk", "PMMK", "Tea", "e", "orip", "no such value"]:
            for m in kinds:
                reqs.append(search(p, rng.choice([None, None, "p00", "p39"]), m,
                                   rng.choice([None, 1, 2, 1000000])))
        reqs += [search("a" * 4096), search("\u00fc" * 2048, None, "prefix"),
                 search("\U0001F600" * 1024, "p03", "exact")]
        # Argument errors.
        reqs += [search(""), search("", "p00", "exact"), search("a", None, "regex"),
                 search("a", None, "EXACT"), search("a", None, ""), search("a", None, None, 0),
                 search("a", "p00", "prefix", 1000001), search("a", None, None, -1),
                 search("a", None, None, INT64_MAX), search("a" * 4097),
                 search("\u00fc" * 2049, "p00"), search("\U0001F600" * 1024 + "a")]
        return reqs

    @classmethod
    def _search_reference(cls, q):
        """What search_node_ids must answer for request q, by Python's string tests over the
        loaded values (on str, the same as on the UTF-8 bytes); None for a request the contract
        refuses (interface.md: a pattern of 1..4096 bytes, a known match kind, a limit of
        1..1000000)."""
        pattern, prop = q["pattern"], q.get("property")
        match = "contains" if q.get("match") is None else q["match"]
        limit = 10000 if q.get("limit") is None else q["limit"]
        if not 1 <= len(pattern.encode("utf-8")) <= 4096 or match not in SEARCH_MATCHES or \
                isinstance(limit, bool) or not 1 <= limit <= 1000000:
            return None
        test = SEARCH_MATCHES[match]
        ids = sorted(i for i, n in cls.nodes.items()
                     if any(test(v, pattern) for k, v in n.items() if prop is None or k == prop))
        return {"ids": ids[:limit], "truncated": len(ids) > limit}

    @staticmethod
    def _traversal_requests(rng, ids):
        """bfs and rpq (the generated graph has types 0..5; 9 is a type no edge has): depths,
        type lists, limits, sources with missing ids and duplicates, every source with small
        limits (truncated), argument errors and malformed expressions."""
        reqs = []
        for node in ids[:12] + [1000, 1002, 123456789, INT64_MAX]:
            reqs.append({"op": "bfs", "id": node, "max_depth": rng.choice([0, 1, 2, 3])})
        hub = ids[4]  # the node with the most edges
        reqs += [{"op": "bfs", "id": hub, "max_depth": 10},
                 {"op": "bfs", "id": hub, "max_depth": 10, "limit": 7},
                 {"op": "bfs", "id": hub, "max_depth": 3, "types": [0, 2]},
                 {"op": "bfs", "id": hub, "max_depth": 3, "types": []},
                 {"op": "bfs", "id": 1000, "max_depth": 2, "types": [2, 2, 9]},
                 {"op": "bfs", "id": hub, "max_depth": 2, "limit": 1000000}]
        for expr, sources, limit in [
                ("2", [1000], None), ("2/0", [1000, 1001], None), ("2/0*", [1000], None),
                ("(0|1)/_*", ids[:5], None), ("_+", [hub, 300, 999, hub], 20),
                ("0*", [300, 123456789, INT64_MAX], None), ("9?", ids[:3], None),
                ("_/_ | 3+", ids[5:9], 2), ("(1 /2)?/_", [hub], None), ("_*", [], None),
                ("_", None, 5), ("_*", None, 50), ("3/4?", None, None), ("0/1*", None, 1)]:
            q = {"op": "rpq", "expr": expr}
            if sources is not None:
                q["sources"] = sources
            if limit is not None:
                q["limit"] = limit
            reqs.append(q)
        for bad in [{"max_depth": -1}, {"max_depth": 11}, {"max_depth": 2, "limit": 0},
                    {"max_depth": 2, "limit": 1000001}, {"max_depth": 2, "types": [0, -1]}]:
            reqs.append(dict({"op": "bfs", "id": hub}, **bad))
        reqs.append({"op": "bfs", "id": -1, "max_depth": 1})
        for expr in ["1/", "", "()", "1||2", "a", "99999999999999999999"]:
            reqs.append({"op": "rpq", "expr": expr, "sources": [hub]})
        reqs += [{"op": "rpq", "expr": "_", "sources": [hub], "limit": 0},
                 {"op": "rpq", "expr": "_", "limit": 1000001},
                 {"op": "rpq", "expr": "_", "sources": [hub, -1]}]
        return reqs

    @staticmethod
    def _edge_requests(rng, node, typ, record):
        ts = sorted((t for t, _ in record), reverse=True)
        reqs = [{"op": "get_edge_record", "id": node, "type": typ},
                {"op": "assoc_count", "id": node, "type": typ},
                {"op": "get_neighbor_ids", "id": node, "type": typ}]
        count = len(ts)
        lo, hi = (min(ts), max(ts)) if ts else (0, 1 << 40)
        mid = ts[count // 2] if ts else 1 << 39
        one = rng.choice(ts) if ts else 5
        for a, b in [(0, INT64_MAX), (INT64_MIN, INT64_MAX), (mid, hi), (lo, mid), (mid, mid),
                     (one, one), (hi + 1, hi + 100), (hi, lo), (lo - 100, lo - 1)]:
            reqs.append({"op": "get_edge_range", "id": node, "type": typ, "t_lo": a, "t_hi": b})
        for order in sorted({0, 1, count // 2, count - 1, count, count + 5, -1, INT64_MAX}):
            reqs.append({"op": "get_edge_data", "id": node, "type": typ, "time_order": order})
        for pos, limit in [(0, 10), (1, 3), (max(count - 1, 0), 5), (count, 5), (0, 0),
                           (0, 1000), (-1, 5), (0, -1), (INT64_MAX, 1), (2, INT64_MAX)]:
            reqs.append({"op": "assoc_range", "id": node, "type": typ, "pos": pos,
                         "limit": limit})
        for a, b, limit in [(lo, hi, 1000), (mid, hi, 2), (lo, mid, 3), (hi + 1, hi + 10, 5),
                            (lo, hi, 0), (one, one, 10), (INT64_MIN, INT64_MAX, 7),
                            (lo, hi, -1)]:
            reqs.append({"op": "assoc_time_range", "id": node, "type": typ, "low": a, "high": b,
                         "limit": limit})
        dsts = [d for _, d in record]
        some = rng.sample(dsts, min(len(dsts), 4)) + [999999]
        for want, a, b in [(some, lo, hi), (some, mid, hi), ([], lo, hi), (some + some, lo, hi),
                           (dsts, INT64_MIN, INT64_MAX), (some, hi, lo)]:
            reqs.append({"op": "assoc_get", "id": node, "type": typ, "ids": want, "low": a,
                         "high": b})
        return reqs

    @classmethod
    def _node_id_requests(cls, rng):
        nodes = cls.nodes
        generated = sorted(n for n in nodes if n < 300)
        reqs = [{"op": "get_node_ids", "properties": {}},
                {"op": "get_node_ids", "properties": {"no_such_property": "x"}},
                {"op": "get_node_ids", "properties": {"p00": ""}}]
        for n in rng.sample(generated, 20):
            props = sorted(nodes[n].items())
            k, v = rng.choice(props)
            reqs.append({"op": "get_node_ids", "properties": {k: v}})
            reqs.append({"op": "get_node_ids", "properties": {k: v[:-1]}})   # a prefix
            reqs.append({"op": "get_node_ids", "properties": {k: v + " "}})   # an extension
            if len(props) >= 2:
                (k1, v1), (k2, v2) = rng.sample(props, 2)
                reqs.append({"op": "get_node_ids", "properties": {k1: v1, k2: v2}})
            m = rng.choice(generated)
            k2, v2 = rng.choice(sorted(nodes[m].items()))
            if k2 != k:
                reqs.append({"op": "get_node_ids", "properties": {k: v, k2: v2}})
        # Values several nodes share, alone and with a second pair.
        values = collections.Counter((k, v) for n in generated for k, v in nodes[n].items())
        for (k, v), _ in values.most_common(8):
            reqs.append({"op": "get_node_ids", "properties": {k: v}})
            holders = [n for n in generated if nodes[n].get(k) == v]
            n = holders[0]
            k2 = next((x for x in sorted(nodes[n]) if x != k), None)
            if k2:
                reqs.append({"op": "get_node_ids", "properties": {k: v, k2: nodes[n][k2]}})
        for props in TRICKY_NODES.values():
            for k, v in props.items():
                reqs.append({"op": "get_node_ids", "properties": {k: v}})
        reqs.append({"op": "get_node_ids", "properties": {"p00": "nul"}})
        return reqs

    # ---- helpers --------------------------------------------------------------------------------

    def _call(self, g, request):
        args = {k: v for k, v in request.items() if k != "op"}
        return getattr(g, request["op"])(**args)

    def _compare(self, g, pairs):
        """Calls every request on g; returns descriptions of the differences."""
        failures = []
        for request, expected in pairs:
            try:
                got = {"ok": self._call(g, request)}
            except zipg.Error as e:
                got = {"error": {"code": e.code, "message": e.message}}
            if "ok" in expected:
                same = got == expected
            else:  # the codes must match; messages may be worded differently by the servers
                same = "error" in got and got["error"]["code"] == expected["error"]["code"]
            if not same:
                failures.append("%s\n  python:   %r\n  embedded: %r" % (request, got, expected))
        return failures

    def _assert_none_differ(self, failures, total):
        if failures:
            self.fail("%d of %d requests differ; the first ones:\n%s"
                      % (len(failures), total, "\n".join(failures[:10])))

    def _assert_error(self, code, fn, *args, **kwargs):
        with self.assertRaises(zipg.Error) as cm:
            fn(*args, **kwargs)
        self.assertEqual(cm.exception.code, code, str(cm.exception))
        self.assertIsInstance(cm.exception.message, str)
        return cm.exception

    def _fresh(self):
        """A node id no other test and no comparison uses; deleted again when the test ends."""
        node = next(self._next_fresh)
        self.addCleanup(self._delete_quietly, node)
        return node

    def _delete_quietly(self, node):
        try:
            self.g.obj_delete(node)
        except zipg.Error as e:  # the test's own failure is the interesting one
            sys.stderr.write("test_client: cleanup obj_delete(%d): %s\n" % (node, e))

    @staticmethod
    def _live(props):
        """What a written property list reads back as: an empty value is an absent property (as in
        the CSV loader)."""
        return {k: v for k, v in props.items() if v != ""}

    def _edge_reads(self, g, src, typ):
        """The whole record of (src, typ), newest first, as assoc_range returns it."""
        return g.assoc_range(src, typ, 0, 1 << 20)

    # ---- tests ----------------------------------------------------------------------------------

    def test_every_operation_matches_the_embedded_engine(self):
        self.assertGreater(len(self.requests), 5000)
        ops = {r["op"] for r in self.requests}
        self.assertEqual(ops, {"get_node_property", "get_node_ids", "get_neighbor_ids",
                               "get_edge_record", "get_edge_range", "get_edge_data", "obj_get",
                               "assoc_range", "assoc_count", "assoc_get", "assoc_time_range",
                               "bfs", "rpq", "search_node_ids"})
        # The reference itself must not be trivial: real answers, real nulls, real errors.
        oks = [e["ok"] for e in self.expected if "ok" in e]
        self.assertTrue(any(isinstance(x, list) and x and isinstance(x[0], dict) for x in oks))
        self.assertTrue(any(x is None for x in oks))
        self.assertTrue(any("error" in e for e in self.expected))
        failures = self._compare(self.g, zip(self.requests, self.expected))
        self._assert_none_differ(failures, len(self.requests))

    def test_second_aggregator_agrees(self):
        pairs = list(zip(self.requests, self.expected))[::7]
        failures = self._compare(self.g2, pairs)
        self._assert_none_differ(failures, len(pairs))

    def test_awkward_values_round_trip(self):
        for node_id, props in TRICKY_NODES.items():
            self.assertEqual(self.g.obj_get(id=node_id), {"id": node_id, "properties": props})
            self.assertEqual(self.g.get_node_property(id=node_id), props)
        self.assertEqual(self.g.get_node_ids(properties={"p00": "nul\x00in the middle"}),
                         [1000, 1001])
        self.assertEqual(self.g.get_node_ids(properties={"p39": "\x00"}), [1001])
        self.assertEqual(self.g.assoc_range(id=1000, type=2, pos=0, limit=10), [
            {"src": 1000, "type": 2, "dst": 1002, "timestamp": 6,
             "properties": {"data": "to a missing node"}},
            {"src": 1000, "type": 2, "dst": 3, "timestamp": 5,
             "properties": {"data": "edge\x00nul \u2603"}},
            {"src": 1000, "type": 2, "dst": 1001, "timestamp": 5, "properties": {}},
        ])

    def test_pure_python_protocol(self):
        from thrift.protocol import TBinaryProtocol
        saved = zipg.client._PROTOCOL
        zipg.client._PROTOCOL = TBinaryProtocol.TBinaryProtocol
        try:
            with zipg.connect(self.aggregators[0]) as g:
                searches = [(r, e) for r, e in zip(self.requests, self.expected)
                            if r["op"] == "search_node_ids"]
                pairs = [(r, e) for r, e in zip(self.requests, self.expected)
                         if r.get("id") in TRICKY_NODES or r["op"] == "get_node_ids"]
                pairs += searches[::3] + [p for p in searches if "error" in p[1]]
                pairs += list(zip(self.requests, self.expected))[::31]
                failures = self._compare(g, pairs)
                self._assert_none_differ(failures, len(pairs))
                self.assertEqual(g.obj_get(1001)["properties"]["p39"], "\x00")
        finally:
            zipg.client._PROTOCOL = saved

    def test_every_call_tells_the_server_how_long_the_client_waits(self):
        # The call context (docs/limits.md, "Deadlines"): field 32767 (i64) of a call's arguments
        # holds the client's timeout in milliseconds, written by the C encoder and by the pure
        # Python one alike, after the real arguments; no timeout, no field. A stand-in server
        # decodes each call field by field and answers assoc_count with 42.
        from thrift.protocol import TBinaryProtocol
        from thrift.Thrift import TType
        from zipg.rpc import GraphService
        calls = []

        def respond(name, proto):
            proto.readStructBegin()
            fields = {}
            while True:
                _, ftype, fid = proto.readFieldBegin()
                if ftype == TType.STOP:
                    break
                fields[fid] = proto.readI64() if ftype == TType.I64 else None
                proto.readFieldEnd()
            calls.append((name, fields))
            return GraphService.assoc_count_result(success=42)
        endpoint, close = _stand_in_server(respond)
        saved = zipg.client._PROTOCOL
        self.assertIs(saved, TBinaryProtocol.TBinaryProtocolAccelerated,
                      "the C encoder (thrift.protocol.fastbinary) is not there to test")
        try:
            for protocol in (saved, TBinaryProtocol.TBinaryProtocol):
                zipg.client._PROTOCOL = protocol
                for timeout, want in ((2.5, 2500), (1e9, 86400000), (None, None)):
                    del calls[:]
                    with zipg.connect(endpoint, timeout=timeout, connect_timeout=5) as g:
                        self.assertEqual(g.assoc_count(4, 2), 42)
                        self.assertEqual(g.assoc_count(5, 3), 42)
                    expected = [{1: 4, 2: 2}, {1: 5, 2: 3}]
                    if want is not None:
                        for e in expected:
                            e[32767] = want
                    self.assertEqual(calls, [("assoc_count", e) for e in expected],
                                     "%s, timeout %r" % (protocol.__name__, timeout))
        finally:
            zipg.client._PROTOCOL = saved
            close()

    def test_result_shapes_and_positional_arguments(self):
        g = self.g
        node = max(self.nodes, key=lambda n: len(self.edges.get((n, 0), [])))
        self.assertEqual(g.obj_get(node), g.obj_get(id=node))
        rec = g.get_edge_record(node, 0)
        self.assertEqual(set(rec), {"src", "type", "count"})
        self.assertEqual(rec["count"], len(self.edges[(node, 0)]))
        self.assertIsInstance(g.assoc_count(node, 0), int)
        r = g.get_edge_range(node, 0, INT64_MIN, INT64_MAX)
        self.assertEqual(r, [0, rec["count"]])
        e = g.get_edge_data(node, 0, 0)
        self.assertEqual(set(e), {"src", "type", "dst", "timestamp", "properties"})
        self.assertEqual(e["timestamp"], max(t for t, _ in self.edges[(node, 0)]))
        self.assertIsNone(g.get_edge_data(node, 0, rec["count"]))
        self.assertIsNone(g.obj_get(123456789))
        self.assertIsNone(g.get_node_property(123456789, ["p00"]))
        self.assertEqual(g.get_node_property(0, []), {})
        self.assertEqual(g.assoc_get(node, 0, [], INT64_MIN, INT64_MAX), [])
        self.assertEqual(g.assoc_get(node, 0, {e["dst"]}, INT64_MIN, INT64_MAX)[0]["dst"],
                         e["dst"])
        self.assertEqual(g.get_neighbor_ids(node, None, None), g.get_neighbor_ids(node))
        # Traversals: lists of plain dicts / lists; positional arguments; None is the default.
        reached = g.bfs(node, 1)
        self.assertEqual(reached[0], {"id": node, "depth": 0})
        self.assertEqual([x["id"] for x in reached[1:]],
                         [d for d in g.get_neighbor_ids(node) if d != node])
        self.assertEqual({x["depth"] for x in reached[1:]}, {1})
        self.assertEqual(g.bfs(node, 1, None, None), g.bfs(id=node, max_depth=1))
        self.assertEqual(g.bfs(node, 2, [0]), g.bfs(id=node, max_depth=2, types=[0]))
        self.assertEqual(g.bfs(node, 3, []), [{"id": node, "depth": 0}])
        self.assertEqual(g.bfs(123456789, 0), [{"id": 123456789, "depth": 0}])
        self.assertEqual(g.bfs(node, 3, limit=1), [{"id": node, "depth": 0}])
        r = g.rpq("0", [node])
        self.assertEqual(r, {"pairs": [[node, d] for d in g.get_neighbor_ids(node, 0)],
                             "truncated": False})
        self.assertEqual(g.rpq(expr="0", sources={node}), r)
        self.assertEqual(g.rpq("0", (node, node), None), r)
        self.assertEqual(g.rpq("0", [node], limit=1),
                         {"pairs": r["pairs"][:1], "truncated": len(r["pairs"]) > 1})
        self.assertEqual(g.rpq("9*", [123456789]), {"pairs": [[123456789, 123456789]],
                                                    "truncated": False})
        self.assertEqual(g.rpq("_", []), {"pairs": [], "truncated": False})
        # search_node_ids: a dict of a list of ints and a bool; positional arguments; None is the
        # default (match "contains", limit 10000).
        r = g.search_node_ids("Pmmk")
        self.assertEqual(set(r), {"ids", "truncated"})
        self.assertIsInstance(r["ids"], list)
        self.assertTrue(r["ids"] and all(isinstance(i, int) for i in r["ids"]))
        self.assertIs(r["truncated"], False)
        self.assertEqual(g.search_node_ids("Pmmk", None, None, None), r)
        self.assertEqual(g.search_node_ids(pattern="Pmmk", match="contains", limit=10000), r)
        self.assertEqual(g.search_node_ids("Pmmk", None, "contains", 2),
                         {"ids": r["ids"][:2], "truncated": len(r["ids"]) > 2})
        self.assertEqual(g.search_node_ids("Pmmk", "no_such_property"),
                         {"ids": [], "truncated": False})

    def test_search_node_ids_against_python(self):
        # An independent reference: Python's own string tests over the loaded values (the
        # comparisons above use the embedded engine, the same C++ as the servers).
        g = self.g
        values = sorted({(k, v) for n in self.nodes.values() for k, v in n.items()})
        rng = random.Random(11)
        cases = [("Pmmk", None), ("pmmk", None), ("\x00", None), ("\x00", "p39"), (" ", "p01"),
                 ("e", "p02"), ("nul\x00in", "p00"), ("\U0001F600", None), ("T", "p00")]
        for _ in range(40):
            k, v = rng.choice(values)
            i = rng.randrange(len(v))
            cases.append((v[i:i + rng.randint(1, 6)], rng.choice([k, None])))
        for pattern, prop in cases:
            for match, test in SEARCH_MATCHES.items():
                want = sorted(i for i, n in self.nodes.items() if any(
                    test(v, pattern) for k, v in n.items() if prop is None or k == prop))
                for limit in (rng.choice((1, 3)), 1000000):
                    with self.subTest(pattern=pattern, property=prop, match=match, limit=limit):
                        self.assertEqual(g.search_node_ids(pattern, prop, match, limit),
                                         {"ids": want[:limit], "truncated": len(want) > limit})

    def test_search_node_ids_on_the_wire(self):
        # A stand-in server decodes each search_node_ids call (its SearchRequest and the call
        # context, field 32767) and answers with a SearchAnswer, or with a declared error for the
        # pattern "fail": each argument combination becomes the request it should, with either
        # encoder, and calls the client refuses never reach the server.
        from thrift.protocol import TBinaryProtocol
        from thrift.Thrift import TType
        from zipg.rpc import GraphService
        from zipg.rpc.ttypes import ErrorCode, GraphError, SearchAnswer, SearchRequest
        calls = []

        def respond(name, proto):
            proto.readStructBegin()
            req, deadline = None, None
            while True:
                _, ftype, fid = proto.readFieldBegin()
                if ftype == TType.STOP:
                    break
                if fid == 1 and ftype == TType.STRUCT:
                    req = SearchRequest()
                    req.read(proto)
                elif fid == 32767 and ftype == TType.I64:
                    deadline = proto.readI64()
                else:
                    proto.skip(ftype)
                proto.readFieldEnd()
            calls.append((name, req, deadline))
            if req is not None and req.pattern == "fail":
                return GraphService.search_node_ids_result(error=GraphError(
                    code=ErrorCode.RESOURCE_EXHAUSTED, message="too many"))
            return GraphService.search_node_ids_result(success=SearchAnswer(
                ids=[3, 7, INT64_MAX], truncated=req is not None and req.limit == 3))
        endpoint, close = _stand_in_server(respond)
        saved = zipg.client._PROTOCOL

        def want(pattern, prop, match, limit):
            return SearchRequest(pattern=pattern, any_property=prop is None,
                                 property="" if prop is None else prop, match=match, limit=limit)
        cases = [  # (args, kwargs, the request the server must see)
            (("red",), {}, want("red", None, "contains", 10000)),
            (("red", "p00"), {}, want("red", "p00", "contains", 10000)),
            (("red", None, "prefix", 3), {}, want("red", None, "prefix", 3)),
            ((), {"pattern": "nul\x00 \U0001F600", "property": "", "match": "exact",
                  "limit": 1000000}, want("nul\x00 \U0001F600", "", "exact", 1000000)),
            (("\u00fc" * 2048,), {"match": "suffix", "limit": 1}, want("\u00fc" * 2048, None,
                                                                       "suffix", 1)),
            (("x",), {"property": "\u540d", "match": None, "limit": None},
             want("x", "\u540d", "contains", 10000)),
        ]
        try:
            for protocol in (saved, TBinaryProtocol.TBinaryProtocol):
                zipg.client._PROTOCOL = protocol
                del calls[:]
                with zipg.connect(endpoint, timeout=2.5, connect_timeout=5) as g:
                    for args, kwargs, _ in cases:
                        limit = kwargs.get("limit", args[3] if len(args) > 3 else None)
                        self.assertEqual(g.search_node_ids(*args, **kwargs),
                                         {"ids": [3, 7, INT64_MAX], "truncated": limit == 3})
                    e = self._assert_error("RESOURCE_EXHAUSTED", g.search_node_ids, "fail")
                    self.assertEqual(e.message, "too many")
                    for args, kwargs in [(("",), {}), (("a",), {"match": "regex"}),
                                         (("a",), {"limit": 0}), (("a" * 4097,), {})]:
                        self._assert_error("INVALID_ARGUMENT", g.search_node_ids, *args, **kwargs)
                    # The connection is still in step after the declared error and the refusals.
                    self.assertEqual(g.search_node_ids("red")["ids"], [3, 7, INT64_MAX])
                self.assertEqual(
                    calls, [("search_node_ids", c[2], 2500) for c in cases] +
                    [("search_node_ids", want("fail", None, "contains", 10000), 2500),
                     ("search_node_ids", want("red", None, "contains", 10000), 2500)],
                    protocol.__name__)
        finally:
            zipg.client._PROTOCOL = saved
            close()

    def test_search_node_ids_sees_writes(self):
        # Nodes written through one aggregator are found through the other: added, updated (the
        # old values no longer match), given no properties, deleted, added again.
        w, r = self.g, self.g2
        a, b, c = self._fresh(), self._fresh(), self._fresh()
        token = "wsearch-%d-" % a
        self.assertEqual(r.search_node_ids(token), {"ids": [], "truncated": False})
        w.obj_add(a, {"ws1": token + "alpha", "ws2": "\x00" + token + "\u00fc"})
        w.obj_add(b, {"ws1": token + "beta", "ws3": token})
        w.obj_add(c, {"ws2": "x" + token + "alpha"})

        def ids(*args, **kwargs):
            got = r.search_node_ids(*args, **kwargs)
            self.assertFalse(got["truncated"], got)
            return got["ids"]
        self.assertEqual(ids(token), [a, b, c])
        self.assertEqual(ids(token, "ws1"), [a, b])
        self.assertEqual(ids(token, match="prefix"), [a, b])
        self.assertEqual(ids(token, match="exact"), [b])
        self.assertEqual(ids("alpha", match="suffix"), [a, c])
        self.assertEqual(ids("\x00" + token, match="prefix"), [a])
        self.assertEqual(ids(token + "\u00fc", "ws2", "suffix"), [a])
        self.assertEqual(r.search_node_ids(token, limit=2), {"ids": [a, b], "truncated": True})
        self.assertEqual(r.search_node_ids(token, limit=3), {"ids": [a, b, c], "truncated": False})
        # obj_update replaces the whole list: the old values do not match any more.
        r.obj_update(a, {"ws1": "gone", "ws4": token + "gamma"})
        self.assertEqual(ids("alpha", match="suffix"), [c])
        self.assertEqual(ids(token + "gamma", "ws4", "exact"), [a])
        self.assertEqual(ids(token, "ws1"), [b])
        self.assertEqual(ids(token, "ws2"), [c])
        w.obj_update(b, {})
        self.assertEqual(ids(token), [a, c])
        self.assertEqual(w.obj_delete(c), {"deleted": True})
        self.assertEqual(ids(token), [a])
        self.assertEqual(ids("x" + token), [])
        w.obj_add(c, {"ws5": token})
        self.assertEqual(ids(token), [a, c])
        self.assertEqual(ids(token, "ws5", "exact"), [c])
        for node in (a, c):
            self.assertEqual(w.obj_delete(node), {"deleted": True})
        self.assertEqual(ids(token), [])

    def test_snapshot_reads_answer_as_of_their_sequence(self):
        # Writes through one aggregator between snapshots; reads through either aggregator at
        # each snapshot see exactly the writes before it (interface.md, "Consistency and
        # snapshots"), while reads without `at` (or at=0) see the latest state.
        w = self.g
        node, d1, d2 = self._fresh(), self._fresh(), self._fresh()
        token = "snap-%d-" % node
        s0 = w.snapshot()
        self.assertEqual(set(s0), {"seq"})
        self.assertIsInstance(s0["seq"], int)
        w.obj_add(node, {"sp": token + "one"})
        w.assoc_add(node, 5, d1, 100, {"e": "1"})
        s1 = self.g2.snapshot()["seq"]
        self.assertGreater(s1, s0["seq"])
        w.obj_update(node, {"sp": token + "two"})
        w.assoc_add(node, 5, d2, 200)
        w.assoc_update(node, 5, d1, 100, {"e": "changed"})
        s2 = w.snapshot()["seq"]
        self.assertGreater(s2, s1)
        s0 = s0["seq"]
        e1 = {"src": node, "type": 5, "dst": d1, "timestamp": 100, "properties": {"e": "1"}}
        e1b = dict(e1, properties={"e": "changed"})
        e2 = {"src": node, "type": 5, "dst": d2, "timestamp": 200, "properties": {}}
        for g in (self.g, self.g2):
            for at, props, edges in [(s0, None, []), (s1, {"sp": token + "one"}, [e1]),
                                     (s2, {"sp": token + "two"}, [e2, e1b]),
                                     (None, {"sp": token + "two"}, [e2, e1b]),
                                     (0, {"sp": token + "two"}, [e2, e1b])]:
                with self.subTest(endpoint=g.endpoint, at=at):
                    node_json = None if props is None else {"id": node, "properties": props}
                    self.assertEqual(g.obj_get(node, at=at), node_json)
                    self.assertEqual(g.get_node_property(node, at=at), props)
                    self.assertEqual(g.assoc_range(node, 5, 0, 10, at=at), edges)
                    self.assertEqual(g.assoc_count(node, 5, at=at), len(edges))
                    self.assertEqual(g.get_edge_record(node, 5, at=at)["count"], len(edges))
                    self.assertEqual(g.get_edge_range(node, 5, 0, 1000, at=at), [0, len(edges)])
                    self.assertEqual(g.get_edge_data(node, 5, 0, at=at),
                                     edges[0] if edges else None)
                    self.assertEqual(g.assoc_get(node, 5, [d1, d2], 0, 1000, at=at), edges)
                    self.assertEqual(g.assoc_time_range(node, 5, 0, 1000, 10, at=at), edges)
                    dsts = sorted(e["dst"] for e in edges)
                    self.assertEqual(g.get_neighbor_ids(node, 5, at=at), dsts)
                    self.assertEqual(g.get_node_ids({"sp": token + "one"}, at=at),
                                     [node] if at == s1 else [])
                    self.assertEqual(g.search_node_ids(token, at=at)["ids"],
                                     [] if props is None else [node])
                    self.assertEqual(g.bfs(node, 1, [5], at=at),
                                     [{"id": node, "depth": 0}] +
                                     [{"id": d, "depth": 1} for d in dsts])
                    self.assertEqual(g.rpq("5", [node], at=at)["pairs"],
                                     [[node, d] for d in dsts])

    def test_status(self):
        st = self.g.status()
        self.assertIsInstance(st, dict)
        self.assertEqual(st.get("num_shards"), 2)
        self.assertTrue(st.get("healthy"))
        self.assertIn("servers", st)
        # The LogStore is a member: role "logstore", the endpoint cluster.json names.
        logstores = [m for m in st["servers"] if m.get("role") == "logstore"]
        self.assertEqual(len(logstores), 1, st["servers"])
        self.assertEqual(st.get("logstore"), logstores[0]["name"])
        self.assertEqual(logstores[0]["endpoint"], self.cluster["logstore"])
        self.assertEqual(sorted(p["role"] for p in self.cluster["processes"]),
                         ["aggregator", "aggregator", "etcd", "logstore", "shard", "shard"])

    def test_server_errors(self):
        g = self.g
        self._assert_error("INVALID_ARGUMENT", g.obj_get, id=-1)
        self._assert_error("INVALID_ARGUMENT", g.get_node_property, id=-5)
        self._assert_error("INVALID_ARGUMENT", g.get_node_ids, properties={})
        self._assert_error("INVALID_ARGUMENT", g.assoc_range, id=1, type=-1, pos=0, limit=1)
        self._assert_error("INVALID_ARGUMENT", g.assoc_range, id=1, type=0, pos=-1, limit=1)
        self._assert_error("INVALID_ARGUMENT", g.bfs, id=1, max_depth=11)
        self._assert_error("INVALID_ARGUMENT", g.bfs, id=1, max_depth=2, limit=0)
        self._assert_error("INVALID_ARGUMENT", g.bfs, id=1, max_depth=2, types=[-1])
        self._assert_error("INVALID_ARGUMENT", g.rpq, expr="_", limit=1000001)
        self._assert_error("INVALID_ARGUMENT", g.rpq, expr="_", sources=[-1])
        e = self._assert_error("INVALID_ARGUMENT", g.rpq, expr="1/(2|", sources=[1])
        self.assertIn("position", e.message)
        self.assertIsNotNone(g.obj_get(id=1))  # a declared error leaves the connection usable

    # ---- writes: each acknowledged write is read back through the other aggregator -------------

    def test_write_node_lifecycle_read_through_the_other_aggregator(self):
        w, r = self.g, self.g2
        node = self._fresh()
        token = "tok-%d" % node
        props = {"wa": "nul\x00inside", "we": "", "": "empty name", "wm": "\U0001F600 \u2028",
                 "wn": "l1\nl2,\"q\"", "wtok": token}
        live = self._live(props)
        self.assertEqual(sorted(live), ["", "wa", "wm", "wn", "wtok"])
        self.assertIsNone(r.obj_get(node))

        self.assertIsNone(w.obj_add(node, props))
        self.assertEqual(r.obj_get(node), {"id": node, "properties": live})
        self.assertEqual(r.get_node_property(node), live)
        self.assertEqual(r.get_node_property(node, ["wa", "we", "nope"]), {"wa": "nul\x00inside"})
        self.assertEqual(r.get_node_property(node, []), {})
        self.assertEqual(r.get_node_ids({"wtok": token}), [node])
        self.assertEqual(r.get_node_ids({"wtok": token, "wa": "nul\x00inside"}), [node])
        self.assertEqual(r.get_node_ids({"wtok": token, "wa": "nul"}), [])
        with zipg.connect(self.cluster["logstore"]) as log:  # the LogStore answers reads too
            self.assertEqual(log.obj_get(node), {"id": node, "properties": live})

        # A live node cannot be added again, through either aggregator; nothing changes.
        self._assert_error("ALREADY_EXISTS", r.obj_add, node, {"wtok": "other"})
        self._assert_error("ALREADY_EXISTS", w.obj_add, id=node)
        self.assertEqual(w.obj_get(node), {"id": node, "properties": live})

        # obj_update replaces the whole list (written through r, read through w).
        new = {"wtok2": token, "wb": "\x00"}
        self.assertIsNone(r.obj_update(node, new))
        self.assertEqual(w.obj_get(node), {"id": node, "properties": new})
        self.assertEqual(w.get_node_ids({"wtok": token}), [])
        self.assertEqual(w.get_node_ids({"wtok2": token}), [node])
        self.assertIsNone(r.obj_update(id=node, properties={"we": ""}))
        self.assertEqual(w.obj_get(node), {"id": node, "properties": {}})  # live, no properties
        self.assertEqual(w.get_node_property(node), {})
        self.assertEqual(w.get_node_ids({"wtok2": token}), [])

        # obj_delete: {"deleted": True} once, then False; the node is gone everywhere.
        self.assertEqual(w.obj_delete(node), {"deleted": True})
        self.assertIsNone(r.obj_get(node))
        self.assertIsNone(r.get_node_property(node))
        self.assertEqual(r.obj_delete(node), {"deleted": False})
        self._assert_error("NOT_FOUND", r.obj_update, node, {"wtok": token})
        self.assertIsNone(w.obj_get(node))

        # A deleted node can be added again.
        self.assertIsNone(r.obj_add(node, {"wtok": token}))
        self.assertEqual(w.obj_get(node), {"id": node, "properties": {"wtok": token}})
        self.assertEqual(w.get_node_ids({"wtok": token}), [node])
        self.assertEqual(r.obj_delete(node), {"deleted": True})
        self.assertEqual(w.get_node_ids({"wtok": token}), [])

    def test_write_the_largest_node_id(self):
        # INT64_MAX is also a "missing node" of the comparisons: it is missing again afterwards.
        w, r = self.g2, self.g
        self.addCleanup(self._delete_quietly, INT64_MAX)
        self.assertIsNone(r.obj_get(INT64_MAX))
        self.assertIsNone(w.obj_add(INT64_MAX, {"wmax": "1"}))
        self.assertEqual(r.obj_get(INT64_MAX), {"id": INT64_MAX, "properties": {"wmax": "1"}})
        self.assertEqual(w.assoc_add(INT64_MAX, 0, INT64_MAX, INT64_MIN, {}), {"replaced": False})
        self.assertEqual(r.get_neighbor_ids(INT64_MAX), [INT64_MAX])
        self.assertEqual(r.get_neighbor_ids(INT64_MAX, 0, {"wmax": "1"}), [INT64_MAX])
        self.assertEqual(w.obj_delete(INT64_MAX), {"deleted": True})
        self.assertIsNone(r.obj_get(INT64_MAX))
        self.assertEqual(r.assoc_count(INT64_MAX, 0), 0)
        self.assertEqual(r.get_neighbor_ids(INT64_MAX), [])

    def test_write_batch_applies_in_order_with_an_outcome_each(self):
        w, r = self.g, self.g2
        a, b = self._fresh(), self._fresh()
        writes = [
            {"op": "obj_add", "id": a, "properties": {"wb": "1"}},
            {"op": "obj_add", "id": a},                                  # ALREADY_EXISTS now
            {"op": "assoc_add", "src": a, "type": 2, "dst": b, "timestamp": 5},
            {"op": "assoc_add", "src": a, "type": 2, "dst": b, "timestamp": 6,
             "properties": {"v": "x"}},                                  # replaces the one above
            {"op": "assoc_update", "src": a, "type": 2, "dst": b + 1, "timestamp": 1,
             "properties": {}},                                          # NOT_FOUND
            {"op": "assoc_delete", "src": a, "type": 3, "dst": b},       # nothing to delete
            {"op": "obj_update", "id": b, "properties": {}},             # NOT_FOUND
            {"op": "assoc_add", "src": a, "type": 2, "dst": -1, "timestamp": 0},  # bad dst
            {"op": "assoc_add", "src": a, "type": 2, "dst": "x", "timestamp": 0},  # caught here
            {"op": "no_such_write", "id": 1},
            {"op": "assoc_add", "src": a, "type": 2, "dst": b + 2, "timestamp": 4},
            {"op": "assoc_delete", "src": a, "type": 2, "dst": b + 2},
            {"op": "obj_add", "id": b, "properties": {"wb": "2"}},
            {"op": "obj_delete", "id": b},
        ]
        got = w.write_batch(writes)
        self.assertEqual(len(got), len(writes))
        codes = [o.code if isinstance(o, zipg.Error) else o for o in got]
        self.assertEqual(codes, [
            None, "ALREADY_EXISTS", {"replaced": False}, {"replaced": True}, "NOT_FOUND",
            {"deleted": False}, "NOT_FOUND", "INVALID_ARGUMENT", "INVALID_ARGUMENT",
            "INVALID_ARGUMENT", {"replaced": False}, {"deleted": True}, None, {"deleted": True}])
        # The state is what the writes did, in order, read through the other aggregator.
        self.assertEqual(r.obj_get(a), {"id": a, "properties": {"wb": "1"}})
        self.assertIsNone(r.obj_get(b))
        self.assertEqual(r.assoc_range(a, 2, 0, 10), [
            {"src": a, "type": 2, "dst": b, "timestamp": 6, "properties": {"v": "x"}}])
        self.assertEqual(w.write_batch([]), [])
        self._assert_error("INVALID_ARGUMENT", w.write_batch, {"op": "obj_delete", "id": a})

        # A batch larger than one call's worth: every write lands, in order.
        many = [{"op": "assoc_add", "src": a, "type": 4, "dst": k, "timestamp": k}
                for k in range(5000)]
        many.append({"op": "assoc_add", "src": a, "type": 4, "dst": 0, "timestamp": 99999})
        got = w.write_batch(many)
        self.assertEqual(got[:5000], [{"replaced": False}] * 5000)
        self.assertEqual(got[5000], {"replaced": True})
        self.assertEqual(r.assoc_count(a, 4), 5000)
        self.assertEqual(r.assoc_range(a, 4, 0, 1)[0]["dst"], 0)  # the last write, newest

    def test_write_edge_lifecycle_read_through_the_other_aggregator(self):
        w, r = self.g, self.g2
        src, f1 = self._fresh(), self._fresh()
        token = "tok-%d" % f1
        self.assertIsNone(w.obj_add(src))
        self.assertIsNone(w.obj_add(f1, {"wtok": token}))
        self.assertEqual(r.obj_get(src), {"id": src, "properties": {}})
        k0, v0 = sorted(self.nodes[0].items())[0]  # a loaded node as a destination

        def edge(dst, ts, props, typ=1):
            return {"src": src, "type": typ, "dst": dst, "timestamp": ts, "properties": props}

        adds = [edge(f1, 5, {"w": "nul\x00 \u2603", "we": ""}), edge(0, 5, {}),
                edge(INT64_MAX, INT64_MIN, {"lo": "1"}), edge(1, INT64_MAX, {"": "x"}),
                edge(f1, 0, {}, typ=3)]
        for e in adds:
            self.assertEqual(w.assoc_add(e["src"], e["type"], e["dst"], e["timestamp"],
                                         e["properties"]), {"replaced": False})
            want = dict(e, properties=self._live(e["properties"]))
            self.assertEqual(r.assoc_get(src, e["type"], [e["dst"]], INT64_MIN, INT64_MAX),
                             [want])
        # Newest first, equal timestamps by dst ascending, never collapsed.
        rec = [edge(1, INT64_MAX, {"": "x"}), edge(0, 5, {}), edge(f1, 5, {"w": "nul\x00 \u2603"}),
               edge(INT64_MAX, INT64_MIN, {"lo": "1"})]
        self.assertEqual(self._edge_reads(r, src, 1), rec)
        self.assertEqual(r.assoc_count(src, 1), 4)
        self.assertEqual(r.get_edge_record(src, 1), {"src": src, "type": 1, "count": 4})
        self.assertEqual(r.get_edge_range(src, 1, 5, 5), [1, 3])
        self.assertEqual(r.get_edge_range(src, 1, INT64_MIN, INT64_MIN), [3, 4])
        self.assertEqual(r.get_edge_data(src, 1, 3), rec[3])
        self.assertIsNone(r.get_edge_data(src, 1, 4))
        self.assertEqual(r.assoc_range(src, 1, 1, 2), rec[1:3])
        self.assertEqual(r.assoc_time_range(src, 1, 0, INT64_MAX, 2), rec[:2])
        self.assertEqual(r.assoc_time_range(src, 1, INT64_MIN, 4, 10), rec[3:])
        self.assertEqual(r.get_neighbor_ids(src), sorted([0, 1, f1, INT64_MAX]))
        self.assertEqual(r.get_neighbor_ids(src, 3), [f1])
        self.assertEqual(r.get_neighbor_ids(src, properties={"wtok": token}), [f1])
        self.assertEqual(r.get_neighbor_ids(src, 1, {k0: v0}),
                         [d for d in (0, 1) if self.nodes[d].get(k0) == v0])
        # Traversals see the writes.
        self.assertEqual(r.bfs(src, 1), [{"id": src, "depth": 0}] +
                         [{"id": d, "depth": 1} for d in sorted([0, 1, f1, INT64_MAX])])
        self.assertEqual(r.rpq("3", [src]), {"pairs": [[src, f1]], "truncated": False})
        self.assertEqual(r.rpq("1/_*", [src], 4)["pairs"][:2], [[src, 0], [src, 1]])

        # assoc_add of an existing key replaces it (upsert): still 4 edges, new place in the order.
        self.assertEqual(r.assoc_add(src, 1, 0, 7, {"v": "2"}), {"replaced": True})
        rec = [rec[0], edge(0, 7, {"v": "2"}), rec[2], rec[3]]
        self.assertEqual(self._edge_reads(w, src, 1), rec)

        # assoc_update replaces an existing edge; a missing key (or type) is NOT_FOUND.
        self.assertIsNone(w.assoc_update(src, 1, f1, -3, {"u": "\x00"}))
        rec = [rec[0], rec[1], edge(f1, -3, {"u": "\x00"}), rec[3]]
        self.assertEqual(self._edge_reads(r, src, 1), rec)
        self._assert_error("NOT_FOUND", w.assoc_update, src, 1, 2, 0, {})
        self._assert_error("NOT_FOUND", r.assoc_update, src, 2, f1, 0, {})
        self._assert_error("NOT_FOUND", r.assoc_update, f1, 1, src, 0, {})
        self.assertEqual(self._edge_reads(w, src, 1), rec)
        self.assertEqual(w.assoc_count(src, 2), 0)

        # assoc_delete: {"deleted": True} once, then False.
        self.assertEqual(r.assoc_delete(src, 1, INT64_MAX), {"deleted": True})
        self.assertEqual(self._edge_reads(w, src, 1), rec[:3])
        self.assertEqual(w.assoc_delete(src, 1, INT64_MAX), {"deleted": False})
        self.assertEqual(w.assoc_delete(src, 4, 0), {"deleted": False})
        self.assertEqual(r.assoc_count(src, 1), 3)
        self.assertEqual(r.get_neighbor_ids(src), sorted([0, 1, f1]))

        # obj_delete also deletes the outgoing edges, not the nodes they point to.
        self.assertEqual(w.obj_delete(src), {"deleted": True})
        for typ in (1, 3):
            self.assertEqual(r.assoc_count(src, typ), 0)
            self.assertEqual(r.assoc_range(src, typ, 0, 10), [])
        self.assertEqual(r.get_neighbor_ids(src), [])
        self.assertEqual(r.bfs(src, 2), [{"id": src, "depth": 0}])
        self.assertEqual(w.rpq("_*", [src]), {"pairs": [[src, src]], "truncated": False})
        self.assertEqual(r.obj_get(f1), {"id": f1, "properties": {"wtok": token}})
        self.assertEqual(r.obj_get(0), {"id": 0, "properties": self.nodes[0]})
        # The key can be written again after the delete.
        self.assertEqual(r.assoc_add(src, 1, f1, 9, {}), {"replaced": False})
        self.assertEqual(self._edge_reads(w, src, 1), [edge(f1, 9, {})])
        self.assertEqual(r.obj_delete(src), {"deleted": True})
        self.assertEqual(w.assoc_count(src, 1), 0)

    def test_writes_to_loaded_data_then_restored(self):
        w, r = self.g2, self.g
        asked = {q["id"] for q in self.requests if "id" in q}
        out_degree = collections.Counter()
        for (s, _), lst in self.edges.items():
            out_degree[s] += len(lst)
        # A loaded node the comparisons ask about, with edges of several types, and a loaded node
        # with an edge to it (whose filtered get_neighbor_ids sees the node's properties).
        node = max((n for n in asked if n in self.nodes and n < 300),
                   key=lambda n: (len({t for (s, t) in self.edges if s == n}), out_degree[n], -n))
        into = sorted(s for (s, t), lst in self.edges.items() if any(d == node for _, d in lst)
                      and s in self.nodes and s != node)
        self.assertTrue(into, "test data: a loaded node with an edge to %d" % node)
        pred = next((s for s in into if s in asked), into[0])
        k, v = sorted(self.nodes[node].items())[0]
        types = sorted({t for (s, t) in self.edges if s == node})
        self.assertGreaterEqual(len(types), 2)
        props = r.obj_get(node)["properties"]
        self.assertEqual(props, self.nodes[node])
        saved = {t: self._edge_reads(r, node, t) for t in types}
        self.assertEqual({t: len(es) for t, es in saved.items()},
                         {t: len(self.edges[(node, t)]) for t in types})
        token = "tok-loaded-%d" % node
        restored = []

        def restore():
            if restored:
                return
            restored.append(True)
            if self.g.obj_get(node) is None:
                self.g.obj_add(node, props)
            else:
                self.g.obj_update(node, props)
            for t in types:
                now = {e["dst"] for e in self._edge_reads(self.g, node, t)}
                for e in saved[t]:
                    self.g.assoc_add(node, t, e["dst"], e["timestamp"], e["properties"])
                for d in now - {e["dst"] for e in saved[t]}:
                    self.g.assoc_delete(node, t, d)
        self.addCleanup(restore)

        self._assert_error("ALREADY_EXISTS", w.obj_add, node, {"wtok": token})
        self.assertEqual(r.obj_get(node), {"id": node, "properties": props})

        # Replace the loaded properties: the old ones are gone from every read.
        self.assertIsNone(w.obj_update(node, {"wtok": token}))
        self.assertEqual(r.obj_get(node), {"id": node, "properties": {"wtok": token}})
        self.assertNotIn(node, r.get_node_ids({k: v}))
        self.assertEqual(r.get_node_ids({"wtok": token}), [node])
        # search_node_ids sees the LogStore's list, not the loaded one that it replaces.
        self.assertNotIn(node, r.search_node_ids(v, k, "exact", 1000000)["ids"])
        self.assertEqual(r.search_node_ids(token, match="exact"), {"ids": [node],
                                                                   "truncated": False})
        self.assertEqual(w.search_node_ids(token[4:], "wtok"), {"ids": [node], "truncated": False})
        self.assertNotIn(node, r.get_neighbor_ids(pred, properties={k: v}))
        self.assertIn(node, r.get_neighbor_ids(pred, properties={"wtok": token}))
        for t in types:  # the edges are not touched by obj_update
            self.assertEqual(self._edge_reads(r, node, t), saved[t])
        # The embedded store reads only the compressed store: it still has the loaded node.
        out = _run(["query", "--store", self.store, "obj_get", "--id", str(node)])
        self.assertEqual(json.loads(out), {"ok": {"id": node, "properties": props}})

        # Update, delete and add loaded edges.
        t0, t1 = types[0], types[1]
        self.assertGreaterEqual(len(saved[t1]), 3)
        oldest = saved[t0][-1]
        self.assertIsNone(w.assoc_update(node, t0, oldest["dst"], INT64_MAX, {"wu": "\x00"}))
        moved = dict(oldest, timestamp=INT64_MAX, properties={"wu": "\x00"})
        self.assertEqual(r.assoc_range(node, t0, 0, 1), [moved])
        self.assertEqual(r.assoc_count(node, t0), len(saved[t0]))
        gone = saved[t1][0]
        self.assertEqual(w.assoc_delete(node, t1, gone["dst"]), {"deleted": True})
        self.assertEqual(r.assoc_get(node, t1, [gone["dst"]], INT64_MIN, INT64_MAX), [])
        self.assertEqual(self._edge_reads(r, node, t1), saved[t1][1:])
        self.assertEqual(r.assoc_delete(node, t1, gone["dst"]), {"deleted": False})
        fresh_dst = self._fresh()
        self._assert_error("NOT_FOUND", w.assoc_update, node, t1, fresh_dst, 0, {})
        self.assertEqual(w.assoc_add(node, t1, fresh_dst, INT64_MIN, {"wnew": "1"}),
                         {"replaced": False})
        self.assertEqual(r.assoc_range(node, t1, len(saved[t1]) - 1, 5), [
            {"src": node, "type": t1, "dst": fresh_dst, "timestamp": INT64_MIN,
             "properties": {"wnew": "1"}}])
        self.assertIn(fresh_dst, r.get_neighbor_ids(node, t1))
        # A new edge with the timestamp of loaded ones merges into their order (ts desc, dst asc),
        # and an upsert of a loaded key replaces it in place.
        mid = saved[t1][len(saved[t1]) // 2]
        dst = min(n for n in self.nodes if n not in {e["dst"] for e in saved[t1]})
        self.assertEqual(w.assoc_add(node, t1, dst, mid["timestamp"], {"wmid": "1"}),
                         {"replaced": False})
        upsert = saved[t1][-1]
        self.assertEqual(w.assoc_add(node, t1, upsert["dst"], upsert["timestamp"], {"wup": "1"}),
                         {"replaced": True})
        want = saved[t1][1:-1] + [
            dict(upsert, properties={"wup": "1"}),
            {"src": node, "type": t1, "dst": fresh_dst, "timestamp": INT64_MIN,
             "properties": {"wnew": "1"}},
            {"src": node, "type": t1, "dst": dst, "timestamp": mid["timestamp"],
             "properties": {"wmid": "1"}}]
        want.sort(key=lambda e: (-e["timestamp"], e["dst"]))
        self.assertEqual(self._edge_reads(r, node, t1), want)
        self.assertEqual(r.assoc_count(node, t1), len(want))
        same = [i for i, e in enumerate(want) if e["timestamp"] == mid["timestamp"]]
        self.assertEqual(r.get_edge_range(node, t1, mid["timestamp"], mid["timestamp"]),
                         [same[0], same[-1] + 1])
        for i in same:
            self.assertEqual(r.get_edge_data(node, t1, i), want[i])

        # Delete the loaded node: properties and every outgoing edge; incoming edges stay.
        self.assertEqual(w.obj_delete(node), {"deleted": True})
        self.assertIsNone(r.obj_get(node))
        self.assertIsNone(r.get_node_property(node, [k]))
        for t in types:
            self.assertEqual(r.assoc_count(node, t), 0)
            self.assertEqual(r.get_edge_record(node, t)["count"], 0)
        self.assertEqual(r.get_neighbor_ids(node), [])
        self.assertEqual(r.get_node_ids({"wtok": token}), [])
        self.assertEqual(r.search_node_ids(token), {"ids": [], "truncated": False})
        self.assertNotIn(node, r.search_node_ids(v, k, "exact", 1000000)["ids"])
        self.assertIn(node, r.get_neighbor_ids(pred))  # the edge into it is pred's
        self.assertNotIn(node, r.get_neighbor_ids(pred, properties={"wtok": token}))
        self.assertEqual(w.obj_delete(node), {"deleted": False})

        # Put everything back, then every request about these nodes answers as before.
        restore()
        self.assertEqual(r.obj_get(node), {"id": node, "properties": props})
        for t in types:
            self.assertEqual(self._edge_reads(r, node, t), saved[t])
            self.assertEqual(self._edge_reads(w, node, t), saved[t])
        def about_node(k, q, e):
            """Whether q is asked again here: the searches whose answer e has the node, and one
            in ten of the others (every search is compared in the test above; asked twice here,
            the 440 took 30 s under ASan, most of it locating short patterns' occurrences, before
            such searches read the values instead: docs/search.md)."""
            if q["op"] != "search_node_ids":
                return True
            return node in e.get("ok", {}).get("ids", []) or k % 10 == 0

        pairs = [(q, e) for k, (q, e) in enumerate(zip(self.requests, self.expected))
                 if (q.get("id") in (node, pred) or
                     q["op"] in ("get_node_ids", "search_node_ids") or
                     (q["op"] == "get_neighbor_ids" and q.get("properties"))) and
                 about_node(k, q, e)]
        self.assertGreater(len(pairs), 100)
        self.assertGreater(sum(1 for q, e in pairs if q["op"] == "search_node_ids" and
                               node in e.get("ok", {}).get("ids", [])), 0)
        for g in (self.g, self.g2):
            self._assert_none_differ(self._compare(g, pairs), len(pairs))

    def test_write_errors(self):
        w, r = self.g, self.g2
        node = self._fresh()
        # Ids below 0 are the server's INVALID_ARGUMENT (any id position, both aggregators).
        for g in (w, r):
            for name, args in [
                    ("obj_add", (-1, {})), ("obj_add", (INT64_MIN, {"p": "x"})),
                    ("obj_update", (-1, {})), ("obj_delete", (-1,)), ("obj_delete", (INT64_MIN,)),
                    ("assoc_add", (-1, 0, 1, 0, {})), ("assoc_add", (node, -1, 1, 0, {})),
                    ("assoc_add", (node, 0, -1, 0, {})), ("assoc_add", (node, INT64_MIN, 1, 0)),
                    ("assoc_update", (-1, 0, 1, 0, {})), ("assoc_update", (node, -1, 1, 0, {})),
                    ("assoc_update", (node, 0, INT64_MIN, 0, {})),
                    ("assoc_delete", (-1, 0, 1)), ("assoc_delete", (node, -1, 1)),
                    ("assoc_delete", (node, 0, -1))]:
                with self.subTest(endpoint=g.endpoint, op=name, args=args):
                    self._assert_error("INVALID_ARGUMENT", getattr(g, name), *args)
        # Non-string keys / values, wrong types and out-of-range ints: refused before sending
        # (a Graph on a dead endpoint would say UNAVAILABLE if the check reached the network).
        dead = zipg.Graph("127.0.0.1:%d" % _free_port(), timeout=2.0)
        for g in (dead, w):
            for name, args in [
                    ("obj_add", (node, {"p": 1})), ("obj_add", (node, {1: "p"})),
                    ("obj_add", (node, {"p": None})), ("obj_add", (node, {"p": b"x"})),
                    ("obj_add", (node, {"p": "\ud800"})), ("obj_add", (node, [("p", "x")])),
                    ("obj_add", (1 << 63, {})), ("obj_add", (str(node), {})),
                    ("obj_update", (node, None)), ("obj_update", (node, {"p": 1.5})),
                    ("obj_delete", (True,)), ("obj_delete", (None,)),
                    ("assoc_add", (node, 0, 1, 0, {"p": 1})), ("assoc_add", (node, "0", 1, 0)),
                    ("assoc_add", (node, 0, 1, 1.5)), ("assoc_add", (node, 0, 1, INT64_MAX + 1)),
                    ("assoc_add", (node, 0, 1, 0, {b"p": "x"})),
                    ("assoc_update", (node, 0, 1, 0, None)), ("assoc_update", (node, 0, 1, 0, "p")),
                    ("assoc_delete", (node, None, 1)), ("assoc_delete", (node, 0, [1]))]:
                with self.subTest(endpoint=g.endpoint, op=name, args=args):
                    self._assert_error("INVALID_ARGUMENT", getattr(g, name), *args)
        dead.close()
        self.assertIsNone(r.obj_get(node))  # nothing of the above was written
        self.assertEqual(r.assoc_count(node, 0), 0)
        # Conditional writes that fail leave the data as it was.
        self._assert_error("ALREADY_EXISTS", w.obj_add, 0, {"p00": "x"})
        self.assertEqual(r.obj_get(0), {"id": 0, "properties": self.nodes[0]})
        self._assert_error("NOT_FOUND", w.obj_update, node, {"p": "x"})
        self.assertIsNone(r.obj_get(node))
        dst = self.edges[(1000, 2)][0][1]
        self._assert_error("NOT_FOUND", w.assoc_update, 1000, 2, node, 0, {})
        self._assert_error("NOT_FOUND", w.assoc_update, 1000, 5, dst, 0, {})
        self._assert_error("NOT_FOUND", w.assoc_update, node, 2, dst, 0, {})
        self.assertEqual(r.assoc_count(1000, 2), len(self.edges[(1000, 2)]))
        self.assertEqual(r.assoc_count(node, 2), 0)
        self.assertEqual(w.obj_delete(node), {"deleted": False})
        self.assertEqual(w.assoc_delete(node, 0, 1), {"deleted": False})
        self.assertEqual(w.assoc_delete(1000, 2, node), {"deleted": False})
        self.assertEqual(r.assoc_count(1000, 2), len(self.edges[(1000, 2)]))
        self.assertEqual(w.obj_get(1), r.obj_get(1))  # the connections are still usable

    def test_concurrent_writes_through_both_aggregators(self):
        conns = [zipg.connect(self.aggregators[i % 2], timeout=30.0) for i in range(8)]
        for c in conns:
            self.addCleanup(c.close)
        barrier = threading.Barrier(len(conns))

        def race(fn):
            results = [None] * len(conns)

            def work(i):
                barrier.wait()
                try:
                    results[i] = ("ok", fn(i, conns[i]))
                except zipg.Error as e:
                    results[i] = ("error", e.code)
            threads = [threading.Thread(target=work, args=(i,)) for i in range(len(conns))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return results

        # The same node from 8 connections: exactly one obj_add wins, the others ALREADY_EXISTS;
        # exactly one obj_delete finds it.
        for _ in range(3):
            node = self._fresh()
            got = race(lambda i, c: c.obj_add(node, {"wwho": str(i)}))
            winners = [i for i, x in enumerate(got) if x == ("ok", None)]
            self.assertEqual(len(winners), 1, got)
            self.assertEqual(sorted(x for x in got if x[0] == "error"),
                             [("error", "ALREADY_EXISTS")] * 7)
            for g in (self.g, self.g2):
                self.assertEqual(g.obj_get(node),
                                 {"id": node, "properties": {"wwho": str(winners[0])}})
            got = race(lambda i, c: c.obj_delete(node))
            self.assertEqual(sorted(x[1]["deleted"] for x in got), [False] * 7 + [True], got)
            self.assertIsNone(self.g2.obj_get(node))

        # Many distinct writes at once: every one is there afterwards, through both aggregators.
        src = self._fresh()
        dsts = [[self._fresh() for _ in range(10)] for _ in conns]
        token = "tok-batch-%d" % src

        def add_many(i, c):
            for k, d in enumerate(dsts[i]):
                c.obj_add(d, {"wbatch": token})
                c.assoc_add(src, 0, d, k, {"wi": str(i)})
        self.assertEqual(race(add_many), [("ok", None)] * len(conns))
        every = sorted(d for lst in dsts for d in lst)
        for g in (self.g, self.g2):
            self.assertEqual(g.get_node_ids({"wbatch": token}), every)
            self.assertEqual(g.assoc_count(src, 0), len(every))
            self.assertEqual(g.get_neighbor_ids(src, 0, {"wbatch": token}), every)
        got = race(lambda i, c: [c.obj_delete(d)["deleted"] for d in dsts[i]])
        self.assertEqual(got, [("ok", [True] * 10)] * len(conns))
        self.assertEqual(self.g.obj_delete(src), {"deleted": True})
        for g in (self.g, self.g2):
            self.assertEqual(g.get_node_ids({"wbatch": token}), [])
            self.assertEqual(g.assoc_count(src, 0), 0)

    def test_argument_types_are_checked_before_sending(self):
        # A Graph on a dead endpoint: a check that reached the network would say UNAVAILABLE.
        dead = zipg.Graph("127.0.0.1:%d" % _free_port(), timeout=2.0)
        for g in (dead, self.g):
            for name, args, kwargs in [
                    ("obj_get", (), {"id": True}),
                    ("obj_get", (), {"id": "1"}),
                    ("obj_get", (), {"id": 1.0}),
                    ("obj_get", (), {"id": None}),
                    ("obj_get", (), {"id": 1 << 63}),
                    ("obj_get", (), {"id": INT64_MIN - 1}),
                    ("get_node_property", (1,), {"properties": "p00"}),
                    ("get_node_property", (1,), {"properties": [1]}),
                    ("get_node_property", (1,), {"properties": {"p00": "x"}}),
                    ("get_node_ids", (), {"properties": [("p00", "x")]}),
                    ("get_node_ids", (), {"properties": {"p00": 1}}),
                    ("get_node_ids", (), {"properties": {1: "x"}}),
                    ("get_node_ids", (), {"properties": {"p00": b"x"}}),
                    ("get_node_ids", (), {"properties": {"p00": "\ud800"}}),
                    ("get_node_ids", (), {"properties": None}),
                    ("get_neighbor_ids", (1,), {"type": "0"}),
                    ("get_neighbor_ids", (1,), {"type": False}),
                    ("get_neighbor_ids", (1,), {"properties": ["p00"]}),
                    ("get_edge_record", (1, 0.5), {}),
                    ("get_edge_range", (1, 0, 0, "9"), {}),
                    ("get_edge_data", (1, 0, None), {}),
                    ("assoc_range", (1, 0, 0, None), {}),
                    ("assoc_count", (1, True), {}),
                    ("assoc_get", (1, 0, "12", 0, 1), {}),
                    ("assoc_get", (1, 0, [1, "2"], 0, 1), {}),
                    ("assoc_get", (1, 0, [True], 0, 1), {}),
                    ("assoc_get", (1, 0, 5, 0, 1), {}),
                    ("assoc_time_range", (1, 0, 0, 1, 2.0), {}),
                    ("obj_add", (1, {"p00": b"x"}), {}),
                    ("obj_update", (1, None), {}),
                    ("obj_delete", ("1",), {}),
                    ("assoc_add", (1, 0, 2, False, {}), {}),
                    ("assoc_update", (1, 0, 2, 3, {"a": None}), {}),
                    ("assoc_delete", (1, 0, [2]), {}),
                    ("bfs", (1,), {"max_depth": "2"}),
                    ("bfs", ("1", 2), {}),
                    ("bfs", (1, 2.0), {}),
                    ("bfs", (1, 1 << 40), {}),
                    ("bfs", (1, 2), {"types": "0"}),
                    ("bfs", (1, 2), {"types": 0}),
                    ("bfs", (1, 2), {"types": [0, "1"]}),
                    ("bfs", (1, 2), {"types": [True]}),
                    ("bfs", (1, 2), {"limit": 1.0}),
                    ("rpq", (5,), {}),
                    ("rpq", (b"1",), {}),
                    ("rpq", (None,), {}),
                    ("rpq", ("\ud800",), {}),
                    ("rpq", ("1",), {"sources": 1}),
                    ("rpq", ("1",), {"sources": "1"}),
                    ("rpq", ("1",), {"sources": [1, "2"]}),
                    ("rpq", ("1",), {"limit": "5"}),
                    ("rpq", ("1",), {"limit": 1 << 63}),
                    # search_node_ids checks its value ranges too (a type error first).
                    ("search_node_ids", (), {"pattern": ""}),
                    ("search_node_ids", ("",), {"property": "p00", "match": "exact"}),
                    ("search_node_ids", (None,), {}),
                    ("search_node_ids", (b"abc",), {}),
                    ("search_node_ids", (5,), {}),
                    ("search_node_ids", (["a"],), {}),
                    ("search_node_ids", ("\ud800",), {}),
                    ("search_node_ids", ("a\udfff",), {"match": "prefix"}),
                    ("search_node_ids", ("a" * 4097,), {}),
                    ("search_node_ids", ("\u00fc" * 2049,), {}),   # 2049 chars, 4098 bytes
                    ("search_node_ids", ("\U0001F600" * 1024 + "a",), {}),
                    ("search_node_ids", ("a",), {"property": 1}),
                    ("search_node_ids", ("a",), {"property": b"p00"}),
                    ("search_node_ids", ("a",), {"property": ["p00"]}),
                    ("search_node_ids", ("a",), {"property": "\ud800"}),
                    ("search_node_ids", ("a",), {"match": "regex"}),
                    ("search_node_ids", ("a",), {"match": "Contains"}),
                    ("search_node_ids", ("a",), {"match": ""}),
                    ("search_node_ids", ("a",), {"match": b"exact"}),
                    ("search_node_ids", ("a",), {"match": 0}),
                    ("search_node_ids", ("a", None, "exact", 0), {}),
                    ("search_node_ids", ("a",), {"limit": 0}),
                    ("search_node_ids", ("a",), {"limit": -1}),
                    ("search_node_ids", ("a",), {"limit": 1000001}),
                    ("search_node_ids", ("a",), {"limit": 1 << 63}),
                    ("search_node_ids", ("a",), {"limit": 5.0}),
                    ("search_node_ids", ("a",), {"limit": "5"}),
                    ("search_node_ids", ("a",), {"limit": True})]:
                with self.subTest(endpoint=g.endpoint, op=name, args=args, kwargs=kwargs):
                    self._assert_error("INVALID_ARGUMENT", getattr(g, name), *args, **kwargs)
        dead.close()
        self.assertEqual(self.g.obj_get(2)["id"], 2)

    def test_request_too_large(self):
        dead = zipg.Graph("127.0.0.1:%d" % _free_port())
        self._assert_error("RESOURCE_EXHAUSTED", dead.assoc_get, 1, 0,
                           list(range(zipg.MAX_REQUEST_BYTES // 8 + 1)), 0, 1)
        self._assert_error("RESOURCE_EXHAUSTED", dead.get_node_ids,
                           {"p00": "x" * zipg.MAX_REQUEST_BYTES})
        big = {"p00": "x" * zipg.MAX_REQUEST_BYTES}
        self._assert_error("RESOURCE_EXHAUSTED", dead.obj_add, 1, big)
        self._assert_error("RESOURCE_EXHAUSTED", dead.obj_update, 1, big)
        self._assert_error("RESOURCE_EXHAUSTED", dead.assoc_add, 1, 0, 2, 3, big)
        self._assert_error("RESOURCE_EXHAUSTED", dead.assoc_update, 1, 0, 2, 3, big)
        self._assert_error("RESOURCE_EXHAUSTED", dead.search_node_ids, "a",
                           "p" * zipg.MAX_REQUEST_BYTES)

    def test_dead_endpoint_is_unavailable_quickly(self):
        endpoint = "127.0.0.1:%d" % _free_port()
        start = time.monotonic()
        self._assert_error("UNAVAILABLE", zipg.connect, endpoint, timeout=5.0)
        lazy = zipg.Graph(endpoint, timeout=5.0)
        self._assert_error("UNAVAILABLE", lazy.obj_get, id=1)
        self._assert_error("UNAVAILABLE", lazy.obj_add, id=1, properties={})
        self.assertLess(time.monotonic() - start, 2.0)

    def test_bad_endpoints(self):
        for endpoint in ["", "localhost", "localhost:", ":80", "host:0", "host:65536",
                         "host:http", "host:\u00b2", 8080, None]:
            with self.subTest(endpoint=endpoint):
                self._assert_error("INVALID_ARGUMENT", zipg.connect, endpoint)
        for timeout in [0, -1, "5", True, float("nan"), float("inf")]:
            with self.subTest(timeout=timeout):
                self._assert_error("INVALID_ARGUMENT", zipg.connect, self.aggregators[0],
                                   timeout=timeout)

    def test_reconnects_after_failures(self):
        proxy = _Proxy(self.aggregators[0])
        node = self._fresh()
        try:
            g = zipg.connect(proxy.endpoint, timeout=0.5)
            self.assertEqual(g.obj_get(1)["id"], 1)

            # The connection dies between calls: a read is retried once on a new connection.
            proxy.cut()
            self.assertEqual(g.obj_get(2)["id"], 2)

            # A server that accepts but never answers: DEADLINE_EXCEEDED, then reconnect.
            proxy.blackhole = True
            proxy.cut()
            start = time.monotonic()
            self._assert_error("DEADLINE_EXCEEDED", g.obj_get, 3)
            self.assertLess(time.monotonic() - start, 5.0)
            proxy.blackhole = False
            self.assertEqual(g.obj_get(3)["id"], 3)

            # The server goes away: UNAVAILABLE (also for a write, which is not retried) ...
            proxy.down()
            self._assert_error("UNAVAILABLE", g.obj_get, 4)
            self._assert_error("UNAVAILABLE", g.assoc_count, 4, 0)
            self._assert_error("UNAVAILABLE", g.obj_add, node, {"wp": "1"})
            # ... and comes back: the next call reconnects.
            proxy.up()
            self.assertEqual(g.obj_get(4)["id"], 4)

            # A write is not retried on a dead connection: the error surfaces, and the write was
            # not sent again on a new connection (it is not in the cluster) ...
            proxy.cut()
            self._assert_error("UNAVAILABLE", g.obj_add, node, {"wp": "2"})
            self.assertIsNone(self.g2.obj_get(node))
            self.assertEqual(g.obj_get(5)["id"], 5)
            # ... and the next write goes through on a new connection, exactly once.
            proxy.cut()
            self.assertEqual(g.obj_get(5)["id"], 5)
            self.assertIsNone(g.obj_add(node, {"wp": "3"}))
            self.assertEqual(self.g2.obj_get(node), {"id": node, "properties": {"wp": "3"}})
            self.assertEqual(g.obj_delete(node), {"deleted": True})
            self.assertIsNone(self.g2.obj_get(node))
            g.close()
        finally:
            proxy.down()

    def test_a_repeated_reply_never_answers_another_call(self):
        # Every reply arrives twice (a duplicating network): the client numbers its calls and
        # skips a reply of an earlier call, so each call gets its own answer (docs/serving.md,
        # "Sequence ids"). A chunk holding part of a frame garbles the stream instead: that is
        # UNAVAILABLE and a new connection, never a wrong answer.
        proxy = _Proxy(self.aggregators[0])
        proxy.duplicate_replies = True
        answered = 0
        try:
            with zipg.connect(proxy.endpoint, timeout=5.0) as g:
                for i in range(1, 30):
                    # Two calls of one method in a row: a stale reply of the first would fit
                    # the second.
                    for name, *args in (("obj_get", i), ("obj_get", i + 1000000),
                                        ("assoc_count", i, 0)):
                        want = getattr(self.g, name)(*args)
                        try:
                            got = getattr(g, name)(*args)
                        except zipg.Error as e:
                            self.assertEqual(e.code, "UNAVAILABLE", str(e))
                            continue
                        answered += 1
                        self.assertEqual(got, want, "%s%r got another call's answer" % (name, args))
        finally:
            proxy.down()
        self.assertGreater(answered, 60)

    def test_close_and_context_manager(self):
        with zipg.connect(self.aggregators[0]) as g:
            self.assertEqual(g.obj_get(id=7)["id"], 7)
        self._assert_error("INVALID_ARGUMENT", g.obj_get, id=7)
        g.close()  # twice is fine
        self.assertIn("closed", repr(g))

    def test_threads_share_a_connection(self):
        pairs = [(r, e) for r, e in zip(self.requests, self.expected) if "ok" in e][:400]
        failures = []

        def work(part):
            failures.extend(self._compare(self.g, pairs[part::4]))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self._assert_none_differ(failures, len(pairs))

    def test_error_is_an_exception_with_code_and_message(self):
        e = zipg.Error("NOT_FOUND", "no such node")
        self.assertIsInstance(e, Exception)
        self.assertEqual((e.code, e.message), ("NOT_FOUND", "no such node"))
        self.assertEqual(str(e), "NOT_FOUND: no such node")
        self.assertEqual(set(zipg.CODES), {"INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS",
                                           "UNAVAILABLE", "DEADLINE_EXCEEDED",
                                           "RESOURCE_EXHAUSTED", "INTERNAL",
                                           "FAILED_PRECONDITION"})


# The read operations (every one takes `at`) and the rest (none does).
READ_OPS = ("get_node_property", "get_node_ids", "search_node_ids", "get_neighbor_ids",
            "get_edge_record", "get_edge_range", "get_edge_data", "obj_get", "assoc_range",
            "assoc_count", "assoc_get", "assoc_time_range", "bfs", "rpq")
OTHER_OPS = ("obj_add", "obj_update", "obj_delete", "assoc_add", "assoc_update", "assoc_delete",
             "write_batch", "snapshot", "status")
DEADLINE_FIELD, SNAPSHOT_FIELD = 32767, 32766  # the call context (docs/limits.md, interface.md)


def _read_cases():
    """(op, args, kwargs, the *_args struct a server must decode, the success it answers, what
    the method returns) for each read operation."""
    from zipg.rpc import GraphService as S
    from zipg.rpc import ttypes as T
    edge = T.Edge(src=4, type=2, dst=9, timestamp=77, properties={"k": "v\x00"})
    e = {"src": 4, "type": 2, "dst": 9, "timestamp": 77, "properties": {"k": "v\x00"}}
    return [
        ("get_node_property", (4, ["p", "q"]), {},
         S.get_node_property_args(id=4, all_properties=False, properties=["p", "q"]),
         T.MaybeProperties(properties={"p": "x"}), {"p": "x"}),
        ("get_node_ids", ({"p": "x"},), {}, S.get_node_ids_args(properties={"p": "x"}),
         [3, 4], [3, 4]),
        ("search_node_ids", ("red", "p"), {"match": "prefix", "limit": 5},
         S.search_node_ids_args(search=T.SearchRequest(pattern="red", any_property=False,
                                                       property="p", match="prefix", limit=5)),
         T.SearchAnswer(ids=[3, INT64_MAX], truncated=True),
         {"ids": [3, INT64_MAX], "truncated": True}),
        ("get_neighbor_ids", (4,), {"type": 2, "properties": {"p": "x"}},
         S.get_neighbor_ids_args(id=4, any_type=False, type=2, properties={"p": "x"}),
         [9], [9]),
        ("get_edge_record", (4, 2), {}, S.get_edge_record_args(id=4, type=2),
         T.EdgeRecord(src=4, type=2, count=3), {"src": 4, "type": 2, "count": 3}),
        ("get_edge_range", (4, 2, INT64_MIN, INT64_MAX), {},
         S.get_edge_range_args(id=4, type=2, t_lo=INT64_MIN, t_hi=INT64_MAX),
         T.EdgeRange(begin_order=0, end_order=3), [0, 3]),
        ("get_edge_data", (4, 2, 0), {}, S.get_edge_data_args(id=4, type=2, time_order=0),
         T.MaybeEdge(edge=edge), e),
        ("obj_get", (4,), {}, S.obj_get_args(id=4),
         T.MaybeNode(node=T.Node(id=4, properties={"p": "x"})),
         {"id": 4, "properties": {"p": "x"}}),
        ("assoc_range", (4, 2, 0, 10), {}, S.assoc_range_args(id=4, type=2, pos=0, limit=10),
         [edge], [e]),
        ("assoc_count", (4, 2), {}, S.assoc_count_args(id=4, type=2), 3, 3),
        ("assoc_get", (4, 2, [9, 10], 0, 100), {},
         S.assoc_get_args(id=4, type=2, ids=[9, 10], low=0, high=100), [edge], [e]),
        ("assoc_time_range", (4, 2, 0, 100, 10), {},
         S.assoc_time_range_args(id=4, type=2, low=0, high=100, limit=10), [edge], [e]),
        ("bfs", (4, 2), {"types": [2, 3]},
         S.bfs_args(id=4, any_type=False, types=[2, 3], max_depth=2, limit=10000),
         T.BfsResult(ids=[4, 9], depths=[0, 1]), [{"id": 4, "depth": 0}, {"id": 9, "depth": 1}]),
        ("rpq", ("2*", [4]), {"limit": 7},
         S.rpq_args(expr="2*", all_sources=False, sources=[4], limit=7),
         T.RpqResult(srcs=[4], dsts=[9], truncated=False), {"pairs": [[4, 9]], "truncated": False}),
    ]


class _RecordingServer:
    """A stand-in server that records every call: its name, its whole frame, its top-level fields
    as decoded one by one with the pure-Python TBinaryProtocol ((id, type, value): the value of the
    call context's i64 fields, None for the others), and its arguments as the generated *_args
    reader decodes them (it skips the context's fields, unknown to it). answer(name, args) returns
    the *_result struct, or None to drop the connection."""

    def __init__(self, answer):
        self.calls = []
        self._answer = answer
        self.endpoint, self.close = _stand_in_server(self._respond)

    def _respond(self, name, proto):
        from thrift.protocol import TBinaryProtocol
        from thrift.Thrift import TType
        from thrift.transport import TTransport
        from zipg.rpc import GraphService
        frame = proto.trans.getvalue()
        fields = []
        proto.readStructBegin()
        while True:
            _, ftype, fid = proto.readFieldBegin()
            if ftype == TType.STOP:
                break
            if fid in (DEADLINE_FIELD, SNAPSHOT_FIELD) and ftype == TType.I64:
                fields.append((fid, ftype, proto.readI64()))
            else:
                proto.skip(ftype)
                fields.append((fid, ftype, None))
            proto.readFieldEnd()
        proto.readStructEnd()
        again = TBinaryProtocol.TBinaryProtocol(TTransport.TMemoryBuffer(frame))
        again.readMessageBegin()
        args = getattr(GraphService, name + "_args")()
        args.read(again)
        self.calls.append((name, frame, fields, args))
        return self._answer(name, args)

    def context(self, i):
        """The call context of call i: {field id: value}, and the ids in the order sent."""
        fields = [(fid, v) for fid, _, v in self.calls[i][2] if fid in (DEADLINE_FIELD,
                                                                        SNAPSHOT_FIELD)]
        return dict(fields), [fid for fid, _ in fields]


def _expected_frame(name, seqid, args, context):
    """The call's frame as the pure-Python TBinaryProtocol writes it on its own: the message
    header, the *_args struct `args` without its stop byte, then the context's i64 fields
    [(id, value), ...] in order, then the stop byte."""
    from thrift.protocol import TBinaryProtocol
    from thrift.Thrift import TMessageType, TType
    from thrift.transport import TTransport
    body = TTransport.TMemoryBuffer()
    args.write(TBinaryProtocol.TBinaryProtocol(body))
    body = body.getvalue()
    assert body[-1:] == b"\x00", "a struct ends in its stop byte"
    out = TTransport.TMemoryBuffer()
    proto = TBinaryProtocol.TBinaryProtocol(out)
    proto.writeMessageBegin(name, TMessageType.CALL, seqid)
    out.write(body[:-1])
    for fid, value in context:
        proto.writeFieldBegin("", TType.I64, fid)
        proto.writeI64(value)
        proto.writeFieldEnd()
    proto.writeFieldStop()
    proto.writeMessageEnd()
    return out.getvalue()


class SnapshotWireTest(unittest.TestCase):
    """Snapshot reads on the wire, against stand-in servers (no cluster): snapshot() and every
    read's `at`, which travels in the call context as field 32766 (i64) after the deadline's
    32767, for that one call only, written alike by the C encoder and the pure-Python one."""

    def setUp(self):
        from thrift.protocol import TBinaryProtocol
        self.saved = zipg.client._PROTOCOL
        self.assertIs(self.saved, TBinaryProtocol.TBinaryProtocolAccelerated,
                      "the C encoder (thrift.protocol.fastbinary) is not there to test")
        self.encoders = (self.saved, TBinaryProtocol.TBinaryProtocol)
        self.addCleanup(setattr, zipg.client, "_PROTOCOL", self.saved)

    def _server(self, answer):
        server = _RecordingServer(answer)
        self.addCleanup(server.close)
        return server

    def _assert_error(self, code, fn, *args, **kwargs):
        with self.assertRaises(zipg.Error) as cm:
            fn(*args, **kwargs)
        self.assertEqual(cm.exception.code, code, str(cm.exception))
        return cm.exception

    def test_read_operations_take_at_and_the_others_do_not(self):
        import inspect
        self.assertEqual(sorted(c[0] for c in _read_cases()), sorted(READ_OPS))
        public = {n for n, f in inspect.getmembers(zipg.Graph, inspect.isfunction)
                  if not n.startswith("_") and n not in ("close", "connect")}
        self.assertEqual(public, set(READ_OPS) | set(OTHER_OPS))
        for op in READ_OPS:
            at = inspect.signature(getattr(zipg.Graph, op)).parameters.get("at")
            self.assertIsNotNone(at, op)
            self.assertEqual((at.kind, at.default), (inspect.Parameter.KEYWORD_ONLY, None), op)
        for op in OTHER_OPS:
            self.assertNotIn("at", inspect.signature(getattr(zipg.Graph, op)).parameters, op)

    def test_every_read_sends_at_in_the_call_context(self):
        # Every read, with either encoder, with and without a deadline, for each `at`: the frame
        # is exactly the arguments, then 32767 = the deadline (if any), then 32766 = at (if not
        # None or 0), then the stop byte; the arguments decode as they should, and the answer
        # comes back as the method's result.
        cases = _read_cases()
        answers = {op: success for op, _, _, _, success, _ in cases}
        from zipg.rpc import GraphService
        server = self._server(lambda name, args: getattr(GraphService, name + "_result")(
            success=answers[name]))
        ats = (None, 0, 1, 123456789012345, INT64_MAX)
        frames = {}
        for encoder in self.encoders:
            zipg.client._PROTOCOL = encoder
            for timeout, deadline in ((2.5, 2500), (None, None)):
                del server.calls[:]
                with zipg.connect(server.endpoint, timeout=timeout, connect_timeout=5) as g:
                    for op, args, kwargs, _, _, result in cases:
                        for at in ats:
                            self.assertEqual(getattr(g, op)(*args, at=at, **kwargs), result,
                                             (op, at))
                want_calls = [(op, want_args, at) for op, _, _, want_args, _, _ in cases
                              for at in ats]
                self.assertEqual(len(server.calls), len(want_calls))
                for seqid, ((op, want_args, at), (name, frame, fields, got_args)) in enumerate(
                        zip(want_calls, server.calls), 1):
                    what = "%s at=%r, %s, timeout %r" % (op, at, encoder.__name__, timeout)
                    context = ([(DEADLINE_FIELD, deadline)] if deadline is not None else []) + \
                        ([(SNAPSHOT_FIELD, at)] if at else [])
                    self.assertEqual(name, op, what)
                    self.assertEqual(got_args, want_args, what)
                    # Decoded field by field: the context's fields come last, in order, as i64.
                    n = len(context)
                    self.assertEqual([(fid, value) for fid, _, value in fields[len(fields) - n:]],
                                     context, what)
                    self.assertTrue(all(fid not in (DEADLINE_FIELD, SNAPSHOT_FIELD)
                                        for fid, _, _ in fields[:len(fields) - n]), what)
                    self.assertEqual(frame, _expected_frame(op, seqid, want_args, context), what)
                    frames.setdefault((timeout, seqid), set()).add(frame)
        # And the two encoders wrote the very same bytes.
        self.assertEqual({len(f) for f in frames.values()}, {1})

    def test_at_is_for_one_call_only(self):
        # `at` is sent with the call it was given to and no other: not with the next call, after
        # an answer, a declared error, a refused argument or a retry on a new connection (which
        # sends it again); never with a write or snapshot().
        from zipg.rpc import GraphService
        from zipg.rpc.ttypes import ErrorCode, GraphError, MaybeNode, Node
        dropped = set()

        def answer(name, args):
            if name == "snapshot":
                return GraphService.snapshot_result(success=77)
            if name == "obj_add":
                return GraphService.obj_add_result()
            if args.id == 13:
                return GraphService.obj_get_result(error=GraphError(
                    code=ErrorCode.FAILED_PRECONDITION, message="snapshot 5 is no longer held"))
            if args.id == 666 and 666 not in dropped:  # the connection dies during the call
                dropped.add(666)
                return None
            return GraphService.obj_get_result(success=MaybeNode(node=Node(id=args.id,
                                                                            properties={})))
        server = self._server(answer)
        for encoder in self.encoders:
            zipg.client._PROTOCOL = encoder
            del server.calls[:]
            dropped.clear()
            with zipg.connect(server.endpoint, timeout=2.5, connect_timeout=5) as g:
                def idle():  # between calls, the connection holds no snapshot
                    self.assertIsNone(g._conn.protocol.at)
                self.assertEqual(g.obj_get(1, at=5), {"id": 1, "properties": {}})
                idle()
                g.obj_get(2)
                e = self._assert_error("FAILED_PRECONDITION", g.obj_get, 13, at=5)
                self.assertEqual(e.message, "snapshot 5 is no longer held")
                idle()
                g.obj_get(3)
                self._assert_error("INVALID_ARGUMENT", g.obj_get, 99, at=-5)
                g.obj_get(4)
                first = g._conn
                self.assertEqual(g.obj_get(666, at=9), {"id": 666, "properties": {}})
                self.assertIsNot(g._conn, first)  # retried on a new connection
                self.assertIsNone(first.protocol.at)
                idle()
                g.obj_get(5)
                g.obj_get(6, at=0)
                g.obj_get(7, at=8)
                self.assertIsNone(g.obj_add(8, {}))
                self.assertEqual(g.snapshot(), {"seq": 77})
                g.obj_get(9)
            got = [(name, args.id if name != "snapshot" else None, server.context(i))
                   for i, (name, _, _, args) in enumerate(server.calls)]

            def ctx(at=None):
                return ({DEADLINE_FIELD: 2500, SNAPSHOT_FIELD: at}, [DEADLINE_FIELD,
                                                                     SNAPSHOT_FIELD]) \
                    if at else ({DEADLINE_FIELD: 2500}, [DEADLINE_FIELD])
            self.assertEqual(got, [
                ("obj_get", 1, ctx(5)), ("obj_get", 2, ctx()), ("obj_get", 13, ctx(5)),
                ("obj_get", 3, ctx()), ("obj_get", 4, ctx()),
                ("obj_get", 666, ctx(9)), ("obj_get", 666, ctx(9)),  # dropped, then retried
                ("obj_get", 5, ctx()), ("obj_get", 6, ctx()), ("obj_get", 7, ctx(8)),
                ("obj_add", 8, ctx()), ("snapshot", None, ctx()), ("obj_get", 9, ctx())],
                encoder.__name__)

    def test_snapshot_parses_the_answer(self):
        # snapshot() sends no arguments (the deadline only) and returns {"seq": n}; a declared
        # error is raised with its code; an answer that is not a sequence is INTERNAL.
        from zipg.rpc import GraphService
        from zipg.rpc.ttypes import ErrorCode, GraphError
        answers = []

        def answer(name, args):
            a = answers.pop(0)
            if isinstance(a, GraphError):
                return GraphService.snapshot_result(error=a)
            return GraphService.snapshot_result(success=a)
        server = self._server(answer)
        for encoder in self.encoders:
            zipg.client._PROTOCOL = encoder
            del server.calls[:]
            answers[:] = [0, 1, 123456789012345, INT64_MAX,
                          GraphError(code=ErrorCode.UNAVAILABLE, message="no LogStore"),
                          GraphError(code=ErrorCode.FAILED_PRECONDITION, message="gone"), -1, 5]
            with zipg.connect(server.endpoint, timeout=2.5, connect_timeout=5) as g:
                for seq in (0, 1, 123456789012345, INT64_MAX):
                    self.assertEqual(g.snapshot(), {"seq": seq})
                e = self._assert_error("UNAVAILABLE", g.snapshot)
                self.assertEqual(e.message, "no LogStore")
                self._assert_error("FAILED_PRECONDITION", g.snapshot)
                e = self._assert_error("INTERNAL", g.snapshot)
                self.assertIn("-1", e.message)
                self.assertEqual(g.snapshot(), {"seq": 5})  # still in step
            self.assertEqual(len(server.calls), 8)
            for seqid, (name, frame, fields, args) in enumerate(server.calls, 1):
                self.assertEqual(name, "snapshot")
                self.assertEqual(fields, [(DEADLINE_FIELD, 10, 2500)])  # 10: TType.I64
                self.assertEqual(frame, _expected_frame(
                    "snapshot", seqid, GraphService.snapshot_args(), [(DEADLINE_FIELD, 2500)]))
        # Through a dispatcher of JSON-like requests ({"op": ..., <arguments>}), as the tests
        # of the cluster call the client: "snapshot" and "at" are plain names.
        from zipg.rpc.ttypes import MaybeNode
        server = self._server(lambda name, args: GraphService.snapshot_result(success=41)
                              if name == "snapshot" else
                              GraphService.obj_get_result(success=MaybeNode()))
        with zipg.connect(server.endpoint, timeout=None, connect_timeout=5) as g:
            for request, want in [({"op": "snapshot"}, {"seq": 41}),
                                  ({"op": "obj_get", "id": 3, "at": 41}, None)]:
                args = {k: v for k, v in request.items() if k != "op"}
                self.assertEqual(getattr(g, request["op"])(**args), want)
        self.assertEqual([server.context(i) for i in range(2)],
                         [({}, []), ({SNAPSHOT_FIELD: 41}, [SNAPSHOT_FIELD])])

    def test_at_is_checked_before_sending(self):
        # A Graph on a dead endpoint: a check that reached the network would say UNAVAILABLE.
        dead = zipg.Graph("127.0.0.1:%d" % _free_port(), timeout=2.0)
        self.addCleanup(dead.close)
        for op, args, kwargs, _, _, _ in _read_cases():
            for at, why in [(-1, "a sequence returned by snapshot, not -1"),
                            (INT64_MIN, "a sequence returned by snapshot, not %d" % INT64_MIN),
                            (1 << 63, "out of the int64 range"), (True, "not bool"),
                            (False, "not bool"), ("5", "not str"), (5.0, "not float"),
                            ([5], "not list"), ({"seq": 5}, "not dict")]:
                with self.subTest(op=op, at=at):
                    e = self._assert_error("INVALID_ARGUMENT", getattr(dead, op), *args, at=at,
                                           **kwargs)
                    self.assertTrue(e.message.startswith("%s: argument 'at' " % op), e.message)
                    self.assertIn(why, e.message)
            # Valid values pass the checks and reach the network.
            for at in (None, 0, 1, INT64_MAX):
                with self.subTest(op=op, at=at):
                    self._assert_error("UNAVAILABLE", getattr(dead, op), *args, at=at, **kwargs)


if __name__ == "__main__":
    # Also runnable as `python3 test_client.py PATH/TO/zipg [unittest options]`, like tests/*.py.
    if len(sys.argv) > 1 and os.path.isfile(sys.argv[1]):
        ZIPG_BIN = os.path.abspath(sys.argv.pop(1))
    unittest.main()
