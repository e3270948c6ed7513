#!/usr/bin/python3
"""End-to-end test of moving a shard's copy between running shard servers (`zipg admin move`,
docs/cluster-changes.md, step 2) on a real local cluster: `zipg local start --servers 2` over a
4-shard store (shard-0 serves shards 0 and 2, shard-1 serves 1 and 3), the LogStore, one
aggregator, lease TTL 2 s. Answers are compared with the plain-Python model of the contract with
writes (write_model.WriteModel); three loader clients write and count edges the whole time (one of
them on a node of shard 0), each checking every answer against its own state.

A. WRITES writes through the aggregator (ZIPG_MOVE_WRITES, default 300; the long variant of
   docs/testing.md runs 10,000), every one acknowledged; a third of them on nodes of shard 0.
B. Shard 0 moves from shard-0 to shard-1 (same store directory: nothing to fetch) while the
   loaders run and the test reads and writes: no read or write fails or answers wrongly, the
   map ends with shard-0 serving [2] and shard-1 [0, 1, 3], and every node reads as the model,
   through the aggregator and asked of shard-1 directly.
C. A third server (shard-new) on an empty store directory for shard 3 (it fetches shard 3); then
   shard 0 moves from shard-1 to shard-new, whose store lacks shard 0's files: admin_serve
   fetches them (rate-limited to about 2 s). The move command is killed (SIGKILL) during the
   fetch and run again: it completes once, the files are byte-identical to the source's, the
   summary reports the bytes fetched, and every acknowledged write reads back.
D. Shard 0 moves back to shard-0, which served it before B: it serves its old copy again after
   catching up with the writes of B and C. Compared as in B.
E. Reruns and refusals: the last move run again changes nothing; a move to a server that does
   not exist is NOT_FOUND, from a server to itself INVALID_ARGUMENT, of shard 99 INVALID_ARGUMENT;
   `admin unserve` of a shard no other server serves is refused with FAILED_PRECONDITION and
   changes nothing. Then shard-new's last shard (3, also on shard-1) is withdrawn: a drained
   server, registered with no shard, and every read still answers as the model.
F. `zipg local stop` (and the test's own server stopped) leaves no process.

Usage: move_test.py PATH/TO/zipg        (exit status 0 if everything passed)"""
import filecmp
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
from write_model import random_write, raw_status, shard_of  # noqa: E402

SEED = 20261202
rnd = random.Random(SEED)
T = cluster_procs.TestSetup("move_test", __doc__)
check, section, note = T.check, T.section, T.note
TMP, ZIPG, STORE, procs, report = T.tmp, T.zipg, T.store, T.procs, T.report
RUN = os.path.join(STORE, "run")
SHARDS = 4
WRITES = int(os.environ.get("ZIPG_MOVE_WRITES", "300"))
LOADERS = 3  # loader 0 writes node 9_000_000, on shard 0 of 4
NEW = os.path.join(TMP, "new-store")  # shard-new's store directory, empty at first


def Session(endpoint, label, seed=0):
    return write_model.Session(ZIPG, TMP, procs.sessions, endpoint, label, seed)


def admin(*args, timeout=120):
    """Runs `zipg admin ARGS --store STORE`: (exit status, parsed stdout or None, stderr)."""
    r = subprocess.run([ZIPG, "admin", *args, "--store", STORE], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=timeout)
    try:
        out = json.loads(r.stdout) if r.stdout.strip() else None
    except ValueError:
        out = None
    return r.returncode, out, r.stderr


def shard_files(shard):
    """{path relative to the store: bytes} of the shard's files, from the source MANIFEST."""
    with open(os.path.join(STORE, "MANIFEST")) as f:
        m = json.load(f)
    prefix = "shard-%04d/" % shard
    return {e["path"]: e["bytes"] for e in m["files"] if e["path"].startswith(prefix)}


def main():
    section(f"setup: edge-case input, compress ({SHARDS} shards), local start --servers 2")
    check(shard_of(9_000_000, SHARDS) == 0, "loader 0's node is on shard 0")
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

    def placement():
        return {n: (m.get("shards"), m.get("catching_up", []), m.get("serving"))
                for n, m in members().items() if m["role"] == "shard"}

    sess = [Session(agg, "agg", SEED + 1)]
    universe = sorted(set(inp.ids) | {7_000_001 + k for k in range(20)})
    on_zero = [i for i in universe if shard_of(i, SHARDS) == 0]
    hot = inp.node_ids[:8]
    cc = write_model.ClusterCheck(model, sess, Session, members, SHARDS, check, note)
    w = random.Random(SEED + 2)
    writes = [0]
    moves = [0]

    def write_some(n):
        for _ in range(n):
            # A third on nodes of shard 0, the shard that moves.
            pool = on_zero if writes[0] % 3 == 0 else hot
            cc.write(random_write(model, w, pool, universe), writes[0])
            writes[0] += 1

    def sample_reads(label, k=12):
        # Not the loaders' nodes: the model learns their writes when they stop.
        quiet = [i for i in cc.ids() if not 9_000_000 <= i < 9_000_000 + LOADERS]
        ids = rnd.sample(quiet, min(k, len(quiet)))
        reqs = write_model.node_reads(model, ids)
        return cc.compare(sess[0], reqs, label), len(reqs)

    def move(label, shard, src, dst, kill_after=None):
        """Runs `admin move` while the loaders run and the test reads and writes; its summary.
        With kill_after (s), the first run is killed then and the command run again."""
        # Each move's loaders write edges of their own type: their nodes start without any.
        moves[0] += 1
        loaders = write_model.EdgeLoaders(LOADERS, [agg], Session, SEED + writes[0], check,
                                          load_type=8 + moves[0])
        loaders.start()
        bad = reads = 0
        argv = [ZIPG, "admin", "move", "--store", STORE, "--shard", str(shard), "--from", src,
                "--to", dst]
        t0 = time.monotonic()
        runs = 0
        out = None
        while out is None and runs < 2:
            runs += 1
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            killed = False
            while p.poll() is None:
                if kill_after is not None and runs == 1 and time.monotonic() - t0 > kill_after:
                    p.kill()
                    killed = True
                    break
                write_some(1)
                b, n = sample_reads(f"{label}, during the move")
                bad, reads = bad + b, reads + n
            stdout, stderr = p.communicate(timeout=300)
            if killed:
                note(f"{label}: the move command killed after {time.monotonic() - t0:.1f} s")
                continue
            check(p.returncode == 0, f"{label}: admin move exits 0: {p.returncode} {stderr}")
            out = json.loads(stdout) if p.returncode == 0 else {}
        seconds = time.monotonic() - t0
        for _ in range(5):  # a little after the switch too
            write_some(1)
            b, n = sample_reads(f"{label}, after the move")
            bad, reads = bad + b, reads + n
        stats, ran = loaders.stop(model)
        check(stats["wrong"] == 0, f"{label}: the loaders saw no wrong answer: {stats}")
        check(bad == 0, f"{label}: {bad} of {reads} reads during the move answered wrongly")
        note(f"{label}: shard {shard} {src} -> {dst} in {seconds:.2f} s ({runs} run(s)); "
             f"{reads} reads and the loaders' {stats} meanwhile ({ran:.1f} s); summary {out}")
        return out or {}

    # ---- A ------------------------------------------------------------------------------------
    section(f"A. {WRITES} writes through the aggregator")
    write_some(WRITES)
    check(placement() == {"shard-0": ([0, 2], [], True), "shard-1": ([1, 3], [], True)},
          f"A: shard-0 serves 0 and 2, shard-1 serves 1 and 3: {placement()}")
    note(f"A: {writes[0]} writes")

    # ---- B ------------------------------------------------------------------------------------
    section("B. shard 0 moves from shard-0 to shard-1 (no fetch) under load")
    out = move("B", 0, "shard-0", "shard-1")
    check(out.get("shard") == 0 and "fetched" not in out, f"B: summary {out}")
    check(placement() == {"shard-0": ([2], [], True), "shard-1": ([0, 1, 3], [], True)},
          f"B: shard-0 serves [2], shard-1 [0, 1, 3]: {placement()}")
    cc.full_comparison(f"B ({writes[0]} writes)")
    cc.compare_replicas("B", ["shard-1"])

    # ---- C ------------------------------------------------------------------------------------
    section("C. a new server on an empty store; shard 0 moves there (fetched), the move "
            "command killed and run again")
    original = members()["shard-1"]
    argv = cluster_procs.cmdline(original["pid"])
    argv = argv[:argv.index("--store") + 1] + [NEW] + argv[argv.index("--store") + 2:]
    argv[argv.index("--name") + 1] = "shard-new"
    argv[argv.index("--shards") + 1] = "3"
    files = shard_files(0)
    total = sum(files.values())
    rate = max(total // 2, 4096)  # about 2 s for shard 0
    argv += ["--updates-dir", os.path.join(TMP, "new-updates"), "--fetch-rate", str(rate)]
    procs.start_server(argv, os.path.join(RUN, "shard-new.log"))
    deadline = time.monotonic() + 60
    while not members().get("shard-new", {}).get("serving") and time.monotonic() < deadline:
        write_some(1)
        time.sleep(0.05)
    cc.wait_serving(["shard-new"], 5)
    write_some(WRITES // 3)
    out = move("C", 0, "shard-1", "shard-new", kill_after=0.6)
    fetched = out.get("fetched") or {}
    check(fetched.get("bytes", 0) + fetched.get("resumed_bytes", 0) == total,
          f"C: the summary reports shard 0's {total} bytes fetched: {out}")
    same = all(filecmp.cmp(os.path.join(NEW, p), os.path.join(STORE, p), shallow=False)
               for p in files)
    check(same, "C: the fetched files of shard 0 are byte-identical to the source's")
    check(placement() == {"shard-0": ([2], [], True), "shard-1": ([1, 3], [], True),
                          "shard-new": ([0, 3], [], True)},
          f"C: shard-new serves [0, 3], shard-1 [1, 3]: {placement()}")
    cc.full_comparison(f"C ({writes[0]} writes)")
    cc.compare_replicas("C", ["shard-new"])

    # ---- D ------------------------------------------------------------------------------------
    section("D. shard 0 moves back to shard-0, which served it before")
    write_some(WRITES // 3)
    out = move("D", 0, "shard-new", "shard-0")
    check(placement() == {"shard-0": ([0, 2], [], True), "shard-1": ([1, 3], [], True),
                          "shard-new": ([3], [], True)},
          f"D: shard-0 serves [0, 2] again: {placement()}")
    cc.full_comparison(f"D ({writes[0]} writes)")
    cc.compare_replicas("D", ["shard-0", "shard-new"])

    # ---- E ------------------------------------------------------------------------------------
    section("E. reruns and refusals")
    before = placement()
    code, out, err = admin("move", "--shard", "0", "--from", "shard-new", "--to", "shard-0")
    check(code == 0 and out and out.get("shard") == 0, f"E: the move run again: {code} {err}")
    for args, want in [
            (("move", "--shard", "0", "--from", "shard-0", "--to", "shard-9"), "NOT_FOUND"),
            (("move", "--shard", "0", "--from", "shard-0", "--to", "shard-0"), "INVALID_ARGUMENT"),
            (("move", "--shard", "99", "--from", "shard-0", "--to", "shard-1"),
             "INVALID_ARGUMENT"),
            (("unserve", "--shard", "2", "--server", "shard-0"), "FAILED_PRECONDITION"),
            (("unserve", "--shard", "0", "--server", "shard-9"), "NOT_FOUND")]:
        code, out, err = admin(*args)
        check(code != 0 and want in err, f"E: {' '.join(args)}: {want}: {code} {err.strip()}")
    code, out, err = admin("unserve", "--shard", "2", "--server", "shard-0")
    check("no other member serves shard 2" in err, f"E: the reason is given: {err.strip()}")
    check(placement() == before, f"E: nothing changed: {placement()} (was {before})")
    code, out, err = admin("unserve", "--shard", "3", "--server", "shard-new")
    check(code == 0, f"E: shard-new's last shard withdrawn: {code} {err.strip()}")
    # The aggregator's view follows etcd through a watch: give it a moment.
    drained = {"shard-0": ([0, 2], [], True), "shard-1": ([1, 3], [], True),
               "shard-new": ([], [], True)}
    until = time.time() + 5
    while placement() != drained and time.time() < until:
        time.sleep(0.05)
    check(placement() == drained, f"E: shard-new is drained: {placement()}")
    write_some(20)
    cc.full_comparison(f"E ({writes[0]} writes)")

    # ---- F ------------------------------------------------------------------------------------
    section("F. stop")
    procs.local_stop(check, STORE, ZIPG)


cluster_procs.run_test("move_test", main, report, procs.cleanup)
