#!/usr/bin/python3
"""End-to-end test of the traversals (bfs, rpq; docs/traversal.md) on a real local cluster and on
the embedded store, against the plain-Python model (graph_model.Model: a Thompson NFA searched over
the product graph, independent of the engine's Glushkov automata; write_model.WriteModel after
writes).

A. A random edge-case graph (write_model.compressed_input: 400 ids, 3000 edges over 4 types, with
   cycles, self-loops, ghost ids, ids up to INT64_MAX) in 4 shards, 2 shard servers. About 370
   traversal requests (graph_model.traversal_requests: depths 0-10, type lists, unknown types,
   limits hit, every source, empty results, argument errors, malformed expressions) through the
   aggregator and embedded, each compared with the model.
B. 400 random writes (edges added and deleted, nodes added, updated and deleted), then the same
   kind of requests again through the aggregator: traversals see the LogStore's writes.
C. Function shipping: one bfs of depth 3 costs each shard server at most 3 traverse_expand calls
   (one per round), counted by the servers' status (calls, bytes_in, bytes_out).
D. Budgets: an aggregator started with --traversal-memory 4K answers a whole-graph rpq with
   RESOURCE_EXHAUSTED and one with --traversal-deadline-ms 1 with DEADLINE_EXCEEDED (naming the
   budget), and both still answer small traversals; `zipg query --store` with the same flags
   does the same; a single `zipg query ... rpq --expr 0` takes its expression as text.
E. `zipg local stop` leaves no process.

Usage: traversal_test.py PATH/TO/zipg        (exit status 0 if everything passed)"""
import json
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_procs  # noqa: E402
import write_model  # noqa: E402
from graph_model import traversal_requests  # noqa: E402
from write_model import acceptable, random_write, raw_status, short  # noqa: E402

SEED = 20261127
rnd = random.Random(SEED)
T = cluster_procs.TestSetup("traversal_test", __doc__)
check, section, note = T.check, T.section, T.note
TMP, ZIPG, STORE, procs, report = T.tmp, T.zipg, T.store, T.procs, T.report
SHARDS = 4


def embedded(reqs, *flags):
    """The answers of `zipg query --store STORE FLAGS --batch -` to reqs, in order."""
    data = b"".join(json.dumps(q).encode() + b"\n" for q in reqs)
    r = subprocess.run([ZIPG, "query", "--store", STORE, *flags, "--batch", "-"], input=data,
                       capture_output=True, timeout=600)
    check(r.returncode == 0, f"query --store: {r.stderr[-300:]!r}")
    return [json.loads(line) for line in r.stdout.splitlines()]


def compare(label, reqs, answers, model):
    bad = 0
    for q, got in zip(reqs, answers):
        want = model.run(q)
        if not acceptable(got, want):
            bad += 1
            check(False, f"{label}: {short(q, 200)}\n      got  {short(got)}\n      want "
                         f"{short(want)}")
    check(len(answers) == len(reqs), f"{label}: {len(answers)} answers to {len(reqs)} requests")
    note(f"{label}: {len(reqs)} traversals, {bad} wrong")


def main():
    section("setup: compress (4 shards), local start --servers 2 --aggregators 1")
    made = write_model.compressed_input(ZIPG, TMP, STORE, rnd, SHARDS, check)
    if made is None:
        return
    inp, _, _, model = made
    _, state = procs.local_start(check, "--servers", "2", "--aggregators", "1", "--lease-ttl",
                                 "2", "--no-verify")
    if state is None:
        return
    agg = state["aggregators"][0]

    def Session(endpoint, label, seed=0):
        return write_model.Session(ZIPG, TMP, procs.sessions, endpoint, label, seed)

    session = Session(agg, "agg0", SEED + 1)

    # ---- A --------------------------------------------------------------------------------------
    section("A. traversals on the loaded graph: through the aggregator and embedded")
    reqs = traversal_requests(model, inp, rnd)
    compare("A cluster", reqs, [session.call(q) for q in reqs], model)
    compare("A embedded", reqs, embedded(reqs), model)

    # ---- B --------------------------------------------------------------------------------------
    section("B. 400 random writes, then traversals through the aggregator")
    universe = sorted(set(inp.ids) | {7_000_001 + k for k in range(20)})
    hot = inp.node_ids[:8]
    w = random.Random(SEED + 2)
    wrong = 0
    for _ in range(400):
        q = random_write(model, w, hot, universe)
        want, got = model.write(q), session.call(q)
        if not acceptable(got, want):
            wrong += 1
            check(False, f"B write {short(q, 200)}: got {short(got)} want {want}")
    note(f"B: 400 writes, {wrong} wrong")
    reqs = traversal_requests(model, inp, rnd)
    reqs += [{"op": "bfs", "id": i, "max_depth": 3} for i in hot + universe[-20:]]
    reqs += [{"op": "rpq", "expr": "(0|1)/_*", "sources": [i]} for i in hot + universe[-20:]]
    compare("B cluster after writes", reqs, [session.call(q) for q in reqs], model)

    # ---- C --------------------------------------------------------------------------------------
    section("C. function shipping: a bfs of depth 3 is at most 3 calls per shard server")
    shard_servers = [m for m in (raw_status(agg) or {}).get("servers", []) if m["role"] == "shard"]
    check(len(shard_servers) == 2, f"C: two shard servers: {short(shard_servers)}")
    start = max(hot, key=lambda i: len(model.neighbors(i)))
    before = {m["name"]: raw_status(m["endpoint"]) or {} for m in shard_servers}
    got = session.call({"op": "bfs", "id": start, "max_depth": 3})
    after = {m["name"]: raw_status(m["endpoint"]) or {} for m in shard_servers}
    check(acceptable(got, model.run({"op": "bfs", "id": start, "max_depth": 3})),
          f"C: bfs from {start}: {short(got)}")
    total = 0
    for name in before:
        b, a = before[name], after[name]
        calls = a.get("calls", 0) - b.get("calls", 0) - 1  # less the status read itself
        moved = (a.get("bytes_in", 0) - b.get("bytes_in", 0)) + \
            (a.get("bytes_out", 0) - b.get("bytes_out", 0))
        total += calls
        check(0 <= calls <= 3, f"C: {name} served {calls} calls for one bfs of depth 3")
        check(moved > 0 and "bytes_in" in a and "bytes_out" in a,
              f"C: {name}'s status counts the bytes it served: {short(b)} -> {short(a)}")
        note(f"C: {name}: {calls} calls, {moved} bytes in and out (status reads included)")
    check(total >= 2, f"C: the bfs reached the shard servers ({total} calls)")

    # ---- D --------------------------------------------------------------------------------------
    section("D. budgets: --traversal-memory 4K and --traversal-deadline-ms 1")
    whole = {"op": "rpq", "expr": "_*"}
    few = [i for i in inp.node_ids if 0 < len(model.neighbors(i)) <= 20]
    small = {"op": "bfs", "id": few[0] if few else start, "max_depth": 1}
    for flag, value, code, words in (("--traversal-memory", "4K", "RESOURCE_EXHAUSTED",
                                      "memory budget of 4096 bytes"),
                                     ("--traversal-deadline-ms", "1", "DEADLINE_EXCEEDED",
                                      "deadline of 1 ms")):
        port = cluster_procs.free_port()
        endpoint = f"127.0.0.1:{port}"
        procs.start_server([ZIPG, "serve", "aggregator", "--etcd", state["etcd"], "--cluster",
                            state["cluster"], "--port", str(port), "--name", f"tight{port}",
                            flag, value], os.path.join(TMP, f"tight-{port}.log"))
        deadline = time.monotonic() + 30
        while raw_status(endpoint) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        tight = Session(endpoint, f"tight{port}", SEED + port)
        for label, got in (("aggregator", tight.call(whole)),
                           ("embedded", embedded([whole], flag, value)[0])):
            err = got.get("error", {})
            check(err.get("code") == code and words in err.get("message", ""),
                  f"D: {label} {flag} {value}: rpq _* without sources: {short(got)}")
        if flag == "--traversal-memory":  # a 1-ms deadline may fail any query
            # (The embedded store does not see the writes: it answers as without the flag.)
            got, want = tight.call(small), model.run(small)
            check(acceptable(got, want), f"D: aggregator {flag} {value}: a small bfs still "
                                         f"answers: {short(got)}")
            got, want = embedded([small], flag, value)[0], embedded([small])[0]
            check("ok" in got and got == want, f"D: embedded {flag} {value}: a small bfs still "
                                               f"answers: {short(got)} vs {short(want)}")
        note(f"D: {flag} {value}: {code} through an aggregator and embedded")
    # One operation from the command line: --expr is always text ("0" is the type 0).
    one = subprocess.run([ZIPG, "query", "--store", STORE, "rpq", "--expr", "0", "--sources",
                          json.dumps([start]), "--traversal-memory", "64M"], capture_output=True,
                         timeout=60)
    want = embedded([{"op": "rpq", "expr": "0", "sources": [start]}])[0]
    check(one.returncode == 0 and json.loads(one.stdout) == want,
          f"D: zipg query rpq --expr 0: {one.stdout[-300:]!r} {one.stderr[-300:]!r} vs {want}")
    bad = subprocess.run([ZIPG, "query", "--store", STORE, "--traversal-deadline-ms", "0",
                          "--batch", "-"], input=b"", capture_output=True, timeout=60)
    check(bad.returncode != 0 and b"--traversal-deadline-ms" in bad.stderr,
          f"D: --traversal-deadline-ms 0 is refused: {bad.returncode} {bad.stderr[-200:]!r}")

    # ---- E --------------------------------------------------------------------------------------
    section("E. local stop")
    procs.local_stop(check, STORE, ZIPG)


cluster_procs.run_test("traversal_test", main, report, procs.cleanup)
