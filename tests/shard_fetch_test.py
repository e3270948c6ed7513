#!/usr/bin/python3
"""End-to-end test of a shard server that fetches its shard's files from a serving replica
(docs/cluster-changes.md, step 1) on a real local cluster: `zipg local start --servers 2` (2 shards,
one copy each), the LogStore, one aggregator, lease TTL 2 s. Answers are compared with the
plain-Python model of the contract with writes (write_model.WriteModel).

A. 150 writes through the aggregator, every one acknowledged.
B. A third shard server for shard 0 on an empty store directory, with --fetch-rate set so that the
   fetch takes about 4 s, while writes go on: stopped by SIGTERM part-way (it exits at once),
   started again, killed with SIGKILL part-way through, one of its
   fetched files corrupted on disk, then started again with the same command line. It resumes
   (its status document's `fetched.0`: resumed bytes > 0, the corrupted file fetched again, the
   bytes fetched add up exactly), registers as serving, and its shard directory and MANIFEST are
   byte-identical to the source store's.
C. The original server of shard 0 killed (SIGKILL; its lease lapses): shard 0 is now served only
   by the fetched copy. Every node's reads through the aggregator and asked of the new server
   directly answer as the model, writes acknowledged before and during the fetch included; more
   writes, compared again.
D. store_chunk of a path outside the MANIFEST ("../../etc/passwd", an absolute path, a file of a
   shard the server does not host) is refused with NOT_FOUND.
E. `zipg local stop` (and the test's own servers stopped) leaves no process.

Usage: shard_fetch_test.py PATH/TO/zipg        (exit status 0 if everything passed)"""
import filecmp
import json
import os
import random
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_procs  # noqa: E402
import write_model  # noqa: E402
from write_model import random_write, raw_status, recv_exact, tframe, tstr  # noqa: E402

SEED = 20261201
rnd = random.Random(SEED)
T = cluster_procs.TestSetup("shard_fetch_test", __doc__)
check, section, note = T.check, T.section, T.note
TMP, ZIPG, STORE, procs, report = T.tmp, T.zipg, T.store, T.procs, T.report
RUN = os.path.join(STORE, "run")
SHARDS = 2
NEW = os.path.join(TMP, "fetched-store")  # the new server's store directory, empty at first


def Session(endpoint, label, seed=0):
    return write_model.Session(ZIPG, TMP, procs.sessions, endpoint, label, seed)


def shard0_files():
    """{path relative to the store: bytes} of shard 0's files, from the source MANIFEST."""
    with open(os.path.join(STORE, "MANIFEST")) as f:
        m = json.load(f)
    return {e["path"]: e["bytes"] for e in m["files"] if e["path"].startswith("shard-0000/")}


def store_chunk(endpoint, path, offset=0, length=100):
    """Raw Thrift store_chunk(path, offset, length): ("ok", bytes) or ("error", message)."""
    host, port = endpoint.rsplit(":", 1)
    args = (b"\x0b\x00\x01" + tstr(path) + b"\x0a\x00\x02" + struct.pack(">q", offset) +
            b"\x08\x00\x03" + struct.pack(">i", length) + b"\x00")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(tframe(struct.pack(">I", 0x80010001) + tstr("store_chunk") +
                         struct.pack(">i", 5) + args))
        head = recv_exact(s, 4)
        p = recv_exact(s, struct.unpack(">I", head)[0])
    name_len = struct.unpack(">i", p[4:8])[0]
    body = p[12 + name_len:]
    if body[:3] == b"\x0b\x00\x00":  # field 0: the binary result
        n = struct.unpack(">i", body[3:7])[0]
        return "ok", body[7:7 + n]
    return "error", body.decode("latin-1")


def main():
    section("setup: edge-case input, compress (2 shards), local start --servers 2")
    made = write_model.compressed_input(ZIPG, TMP, STORE, rnd, SHARDS, check)
    if made is None:
        return
    inp, _nodes_csv, _edges_csv, model = made
    r, state = procs.local_start(check, "--servers", "2", "--aggregators", "1", "--lease-ttl",
                                 "2", "--write-batches", "1")
    if state is None:
        return
    agg = state["aggregators"][0]

    def members():
        st = raw_status(agg) or {}
        out = {m["name"]: m for m in st.get("servers", [])}
        for m in out.values():
            procs.known_pids.add(m.get("pid", 0))
        return out

    sess = [Session(agg, "agg", SEED + 1)]
    universe = sorted(set(inp.ids) | {7_000_001 + k for k in range(20)})
    hot = inp.node_ids[:8]
    cc = write_model.ClusterCheck(model, sess, Session, members, SHARDS, check, note)
    w = random.Random(SEED + 2)
    writes = [0]

    def write_some(n):
        for _ in range(n):
            cc.write(random_write(model, w, hot, universe), writes[0])
            writes[0] += 1

    # ---- A ------------------------------------------------------------------------------------
    section("A. writes through the aggregator")
    write_some(150)
    by_name = members()
    original = next(n for n, m in by_name.items() if m["role"] == "shard" and 0 in m["shards"])
    note(f"A: {writes[0]} writes; shard 0 is served by {original}")

    # ---- B ------------------------------------------------------------------------------------
    section("B. a new server for shard 0 on an empty store: killed part-way, a file corrupted, "
            "restarted")
    files = shard0_files()
    total = sum(files.values())
    rate = max(total // 4, 4096)  # about 4 s for the whole shard
    argv = cluster_procs.cmdline(by_name[original]["pid"])
    argv = argv[:argv.index("--store") + 1] + [NEW] + argv[argv.index("--store") + 2:]
    argv[argv.index("--name") + 1] = "shard-fetched"
    argv += ["--updates-dir", os.path.join(TMP, "fetched-updates"), "--fetch-rate", str(rate)]
    log = os.path.join(RUN, "shard-fetched.log")
    pid = procs.start_server(argv, log)
    staging = os.path.join(NEW, "shard-0000.fetch")

    def fetched_bytes():
        got = 0
        for root, _dirs, names in os.walk(staging):
            got += sum(os.path.getsize(os.path.join(root, n)) for n in names)
        return got

    # SIGTERM part-way stops the fetch at once (the server is not serving yet).
    t0 = time.monotonic()
    while fetched_bytes() < total * 0.15 and time.monotonic() - t0 < 30:
        time.sleep(0.02)
    # Within 1.5 s: the rest of the fetch alone would take about 3 s.
    os.kill(pid, signal.SIGTERM)
    left = procs.kill_and_wait([pid], signal.SIGTERM, 1.5)
    check(not left, f"B: SIGTERM stops a server while it fetches: {left}")
    procs.kill_and_wait(left, signal.SIGKILL)
    check(not os.path.exists(os.path.join(NEW, "shard-0000")),
          "B: no shard directory after SIGTERM")
    note(f"B: stopped by SIGTERM after {fetched_bytes()} bytes in {time.monotonic() - t0:.1f} s")
    pid = procs.start_server(argv, log)
    t0 = time.monotonic()
    while fetched_bytes() < total * 0.4 and time.monotonic() - t0 < 30:
        write_some(2)  # writes while it fetches
        time.sleep(0.05)
    at_kill = fetched_bytes()
    check(total * 0.4 <= at_kill < total, f"B: part of the shard fetched before the kill: "
                                          f"{at_kill} of {total} bytes")
    os.kill(pid, signal.SIGKILL)
    procs.kill_and_wait([pid], signal.SIGKILL)
    check(not os.path.exists(os.path.join(NEW, "shard-0000")),
          "B: no shard directory after the kill (only the staging one)")
    check(os.path.exists(os.path.join(NEW, "MANIFEST")), "B: the MANIFEST was fetched first")
    # Corrupt the first byte of the largest file fetched so far.
    here = sorted(((os.path.getsize(os.path.join(staging, os.path.relpath(p, "shard-0000"))), p)
                   for p in files
                   if os.path.exists(os.path.join(staging, os.path.relpath(p, "shard-0000")))),
                  reverse=True)
    check(here and here[0][0] > 0, f"B: a fetched file to corrupt: {here}")
    victim_size, victim = here[0][0], here[0][1]
    with open(os.path.join(staging, os.path.relpath(victim, "shard-0000")), "r+b") as f:
        b = f.read(1)
        f.seek(0)
        f.write(bytes([b[0] ^ 0xFF]))
    note(f"B: killed after {at_kill} of {total} bytes ({time.monotonic() - t0:.1f} s at "
         f"{rate} B/s); corrupted the first byte of {victim} ({victim_size} bytes on disk)")
    write_some(20)

    t1 = time.monotonic()
    pid = procs.start_server(argv, log)
    while not members().get("shard-fetched", {}).get("serving") and time.monotonic() - t1 < 60:
        write_some(2)
        time.sleep(0.05)
    current = cc.wait_serving(["shard-fetched"], 5)
    note(f"B: restarted; serving after {time.monotonic() - t1:.1f} s")
    new_endpoint = current["shard-fetched"]["endpoint"]
    doc = raw_status(new_endpoint) or {}
    f0 = (doc.get("fetched") or {}).get("0") or {}
    note(f"B: fetched.0 = {f0}")
    check(f0.get("resumed_bytes", 0) > 0, f"B: the second start resumed: {f0}")
    check(f0.get("refetched") == [victim], f"B: {victim} failed its check and was fetched again: "
                                           f"{f0}")
    # What was on disk counts as resumed (the corrupted file's bytes too); the rest of the shard
    # is fetched, and the corrupted file once more from its start.
    full = files[victim]
    check(f0.get("bytes", 0) + f0.get("resumed_bytes", 0) == total + full,
          f"B: bytes fetched + resumed = the shard + the refetched file ({total} + {full}): {f0}")
    check(f0.get("sources") == [original], f"B: fetched from {original}: {f0}")
    same = filecmp.cmp(os.path.join(NEW, "MANIFEST"), os.path.join(STORE, "MANIFEST"),
                       shallow=False)
    for p in files:
        same = same and filecmp.cmp(os.path.join(NEW, p), os.path.join(STORE, p), shallow=False)
    check(same, "B: the fetched MANIFEST and shard files are byte-identical to the source's")
    check(not os.path.exists(staging), "B: no staging directory left")

    # ---- C ------------------------------------------------------------------------------------
    section("C. the original server of shard 0 killed: the fetched copy serves alone")
    os.kill(by_name[original]["pid"], signal.SIGKILL)
    procs.kill_and_wait([by_name[original]["pid"]], signal.SIGKILL)
    deadline = time.monotonic() + 15
    while original in members() and time.monotonic() < deadline:
        time.sleep(0.1)
    check(original not in members(), f"C: {original} left the map")
    cc.full_comparison(f"C ({writes[0]} writes)")
    cc.compare_replicas("C", ["shard-fetched"])
    write_some(100)
    cc.full_comparison(f"C, after more writes ({writes[0]} writes)")

    # ---- D ------------------------------------------------------------------------------------
    section("D. store_chunk hands out only the MANIFEST and the hosted shard's files")
    kind, data = store_chunk(new_endpoint, "MANIFEST", 0, 64)
    check(kind == "ok" and len(data) == 64, f"D: MANIFEST: {kind} {data[:80]!r}")
    for path in ("../../etc/passwd", "/etc/passwd", "shard-0001/nodes.idx",
                 "shard-0000/../MANIFEST"):
        kind, data = store_chunk(new_endpoint, path)
        check(kind == "error" and "not a file of a shard served here" in data,
              f"D: {path!r} refused: {kind} {data[:200]!r}")

    # ---- E ------------------------------------------------------------------------------------
    section("E. stop")
    procs.local_stop(check, STORE, ZIPG)


cluster_procs.run_test("shard_fetch_test", main, report, procs.cleanup)
