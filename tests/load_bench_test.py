#!/usr/bin/env python3
"""`zipg bench --mix load` (docs/writes.md, "Node batches in LinkBench terms") on a real local
cluster with the standby LogStore: a LinkBench-style bulk load of nodes (obj_add in write
batches), then links (assoc_add).

A. The load reports every node and link written and none failed; every node it wrote reads back
   with LinkBench's fields (type 2048, version 1, its time, 1368 characters of base64 data) at the
   ids the bench documents (connection k's node i: 2^41 + k * 2^36 + i), and every source's
   links are counted.
B. A batch of node writes is one commit group: the LogStore's groups grow by at most the number
   of batches the node phase sent (each of 2 connections sends ceil(n / 2 / batch)).
C. The same load again: every obj_add is refused (ALREADY_EXISTS), the bench says so and exits
   non-zero, and the nodes are unchanged.
D. `--mix linkbench-rw` reports reads and writes apart (counts adding up to the operations') and
   CPU per operation by role and by process, adding up to the cluster's, and at most the CPU the
   test itself reads from /proc over the whole run.
E. A loader sends LinkBench-shaped nodes in write batches of 256 (each one commit group); the
   LogStore leader is killed with SIGKILL once four batches are answered. After the standby takes
   over, every node whose write was acknowledged reads back with its data.

Usage: load_bench_test.py PATH/TO/zipg        (exit status 0 if everything passed)"""
import json
import math
import os
import random
import re
import signal
import subprocess
import time

import cluster_procs
from write_model import compressed_input

setup = cluster_procs.TestSetup("load_bench_test", __doc__)
ZIPG, TMP, STORE = setup.zipg, setup.tmp, setup.store
check, section, note = setup.check, setup.section, setup.note

NODES, LINKS, BATCH, CONNECTIONS = 300, 200, 64, 2


def query(endpoint, op, **args):
    argv = [ZIPG, "query", "--connect", endpoint, op]
    for k, v in args.items():
        argv += ["--" + k.replace("_", "-"), str(v)]
    r = subprocess.run(argv, capture_output=True, timeout=60)
    return json.loads(r.stdout) if r.returncode == 0 else {"error": r.stderr.decode()[-300:]}


def batch(endpoint, requests):
    """The answers to JSON request lines, from one `zipg query --batch -`."""
    lines = "".join(json.dumps(q) + "\n" for q in requests).encode()
    r = subprocess.run([ZIPG, "query", "--connect", endpoint, "--batch", "-"], input=lines,
                       capture_output=True, timeout=120)
    answers = [json.loads(line) for line in r.stdout.decode().splitlines()]
    return answers if len(answers) == len(requests) else [{"error": r.stderr.decode()[-300:]}] * len(requests)


def groups(logstore):
    r = subprocess.run([ZIPG, "status", "--connect", logstore, "--json"], capture_output=True,
                       timeout=60)
    return json.loads(r.stdout)["logstore"]["commit"]["groups"]


def bench(endpoint):
    return subprocess.run([ZIPG, "bench", "--connect", endpoint, "--mix", "load", "--nodes",
                           str(NODES), "--links", str(LINKS), "--write-batch", str(BATCH),
                           "--connections", str(CONNECTIONS)], capture_output=True, timeout=300)


def node_ids():
    """The ids the bench's node phase writes: connection k takes i = k, k + 2, ..."""
    return [(1 << 41) + (i % CONNECTIONS) * (1 << 36) + i for i in range(NODES)]


def main():
    section("setup: a small random store, a cluster with the standby LogStore")
    if compressed_input(ZIPG, TMP, STORE, random.Random(7), 2, check) is None:
        return
    r, state = setup.procs.local_start(check, "--logstores", "2")
    if state is None:
        return
    endpoint = state["aggregators"][0]
    logstore = state["logstore"]

    section("A: the load writes every node and link; they read back")
    before = groups(logstore)
    r = bench(endpoint)
    out = r.stdout.decode()
    note(out.strip())
    check(r.returncode == 0, f"bench --mix load: {r.returncode} {out[-500:]!r} {r.stderr[-500:]!r}")
    m = re.search(r"nodes: (\d+) in .* (\d+) failed", out)
    check(m is not None and int(m.group(1)) == NODES and int(m.group(2)) == 0,
          f"the nodes line: {out!r}")
    m = re.search(r"links: (\d+) in .* (\d+) failed", out)
    check(m is not None and int(m.group(1)) == LINKS and int(m.group(2)) == 0,
          f"the links line: {out!r}")
    after = groups(logstore)
    wrong = 0
    answers = batch(endpoint, [{"op": "obj_get", "id": n} for n in node_ids()])
    for i, (node, answer) in enumerate(zip(node_ids(), answers)):
        got = answer.get("ok") or {}
        props = got.get("properties", {})
        good = (props.get("type") == "2048" and props.get("version") == "1" and
                props.get("time") == str(1500000000 + i) and len(props.get("data", "")) == 1368 and
                re.fullmatch(r"[A-Za-z0-9+/]+", props.get("data", "")) is not None)
        if not good:
            wrong += 1
            if wrong <= 3:
                check(False, f"node {node} (i = {i}): {json.dumps(got)[:200]}")
    check(wrong == 0, f"{wrong} of {NODES} nodes wrong")
    # Links: connection k's link i has source 2^42 + k * 2^36 + i // 10, type 0.
    sources = {}
    for i in range(LINKS):
        src = (1 << 42) + (i % CONNECTIONS) * (1 << 36) + i // 10
        sources[src] = sources.get(src, 0) + 1
    answers = batch(endpoint, [{"op": "assoc_count", "id": s, "type": 0} for s in sources])
    counted = {s: a.get("ok") for s, a in zip(sources, answers)}
    # Destinations are random: a repeated (src, dst) is one edge, so a count may be lower.
    check(all(c is not None and 1 <= c <= n for (s, n), c in
              zip(sources.items(), counted.values())),
          f"assoc_count of the loaded sources: {counted}")
    check(sum(counted.values()) >= LINKS * 0.9, f"links counted: {sum(counted.values())}")

    section("B: a batch of node writes is one commit group")
    node_batches = CONNECTIONS * math.ceil(NODES / CONNECTIONS / BATCH)
    link_batches = CONNECTIONS * math.ceil(LINKS / CONNECTIONS / BATCH)
    note(f"commit groups {before} -> {after}: {after - before} for {node_batches} node and "
         f"{link_batches} link batches ({NODES + LINKS} writes)")
    check(after - before <= node_batches + link_batches,
          f"{after - before} commit groups for {node_batches + link_batches} batches")

    section("C: the same load again: every obj_add is refused, nothing changes")
    first = query(endpoint, "obj_get", id=node_ids()[0])
    r = bench(endpoint)
    out = r.stdout.decode()
    m = re.search(r"nodes: (\d+) in .* (\d+) failed", out)
    check(r.returncode != 0 and m is not None and int(m.group(2)) == NODES and
          "ALREADY_EXISTS" in out, f"a second load: {r.returncode} {out[-600:]!r}")
    check(query(endpoint, "obj_get", id=node_ids()[0]) == first, "the node is unchanged")

    section("D: --mix linkbench-rw reports reads and writes apart, and CPU per operation")
    pids = {p["name"]: p["pid"] for p in state["processes"] if p["role"] != "etcd"}

    def cpu_of(pid):
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    cpu0 = {n: cpu_of(p) for n, p in pids.items()}
    report_path = os.path.join(TMP, "rw.json")
    r = subprocess.run([ZIPG, "bench", "--connect", endpoint, "--mix", "linkbench-rw",
                        "--connections", "2", "--duration", "2", "--json", report_path],
                       capture_output=True, timeout=120)
    cpu1 = {n: cpu_of(p) for n, p in pids.items()}
    out = r.stdout.decode()
    note(out.strip()[-900:])
    check(r.returncode == 0, f"linkbench-rw: {r.returncode} {r.stderr[-300:]!r}")
    with open(report_path) as f:
        rep = json.load(f)
    ops, kinds = rep["ops"], rep.get("kinds", {})
    writes = {"obj_add", "obj_update", "obj_delete", "assoc_add", "assoc_update", "assoc_delete"}
    check(set(kinds) == {"reads", "writes"}, f"kinds: {sorted(kinds)}")
    if set(kinds) == {"reads", "writes"}:
        check(kinds["writes"]["count"] == sum(o["count"] for k, o in ops.items() if k in writes),
              "writes = the write operations' counts")
        check(kinds["reads"]["count"] + kinds["writes"]["count"] == ops["overall"]["count"],
              "reads + writes = overall")
        check(re.search(r"^writes\s+\d+\s+\d+\s+\d+\s+\d+\s+\(all writes\)$", out, re.M)
              is not None, "a writes line in the table")
    cpu = rep.get("cpu_us_per_op", {})
    by_process, by_role = cpu.get("by_process", {}), cpu.get("by_role", {})
    check(set(by_process) == set(pids), f"CPU of every server: {sorted(by_process)} {sorted(pids)}")
    check({"shard", "logstore", "aggregator"} <= set(by_role), f"CPU by role: {by_role}")
    check(abs(sum(by_process.values()) - cpu.get("cluster", -1)) < 0.5 and
          abs(sum(by_role.values()) - cpu.get("cluster", -1)) < 0.5,
          f"the roles and processes add up to the cluster's: {cpu}")
    # The measured seconds are within the whole run the test watched: at most its CPU (+ ticks).
    watched = sum(cpu1[n] - cpu0[n] for n in pids)
    reported = cpu.get("cluster", 0) * ops["overall"]["count"] / 1e6
    check(0 < reported <= watched + 0.02 * len(pids),
          f"cluster CPU in the measured seconds {reported:.2f} s, of {watched:.2f} s watched")

    section("E: node batches acknowledged before a kill -9 of the LogStore leader survive it")
    # LinkBench-shaped nodes at fresh ids, 256 per write_batch, from one `query --batch` client;
    # the leader is killed once some batches are answered. The standby takes over.
    fresh = [(1 << 40) + i for i in range(24 * 256)]
    lines = "".join(json.dumps({"op": "obj_add", "id": n,
                                "properties": {"type": "2048", "version": "1",
                                               "data": "d%d" % n}}) + "\n" for n in fresh)
    answers_path = os.path.join(TMP, "kill-answers.jsonl")
    with open(answers_path, "wb") as answers_file:
        loader = subprocess.Popen([ZIPG, "query", "--connect", endpoint, "--batch", "-",
                                   "--write-batch", "256"], stdin=subprocess.PIPE,
                                  stdout=answers_file, stderr=subprocess.DEVNULL)
        loader.stdin.write(lines.encode())
        loader.stdin.close()
        deadline = time.monotonic() + 60
        while os.path.getsize(answers_path) < 4 * 256 * 10 and time.monotonic() < deadline and \
                loader.poll() is None:
            time.sleep(0.01)
        leader = [p["pid"] for p in state["processes"] if p["name"] == "logstore"]
        check(len(leader) == 1, f"the leader's pid: {leader}")
        for pid in leader:
            os.kill(pid, signal.SIGKILL)
        try:
            loader.wait(timeout=300)
        except subprocess.TimeoutExpired:
            loader.kill()
            check(False, "the loader did not finish within 300 s of the kill")
    with open(answers_path) as f:
        answers = [json.loads(line) for line in f]
    check(len(answers) == len(fresh), f"one answer per line: {len(answers)} of {len(fresh)}")
    acked = [n for n, a in zip(fresh, answers) if "ok" in a]
    failed = [n for n, a in zip(fresh, answers) if "ok" not in a]
    check(len(acked) >= 4 * 256, f"batches acknowledged before the kill: {len(acked)}")
    # Reads come back once the standby leads.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if batch(endpoint, [{"op": "obj_get", "id": acked[0]}])[0].get("ok"):
            break
        time.sleep(0.5)
    got = batch(endpoint, [{"op": "obj_get", "id": n} for n in fresh])
    missing = [n for n, a in zip(fresh, got) if n in set(acked) and
               (a.get("ok") or {}).get("properties", {}).get("data") != "d%d" % n]
    present_failed = sum(1 for n, a in zip(fresh, got) if n in set(failed) and a.get("ok"))
    note(f"{len(acked)} nodes acknowledged, {len(failed)} failed (of them {present_failed} "
         f"present: outcome unknown), {len(missing)} acknowledged missing")
    check(not missing, f"acknowledged nodes lost or wrong after kill -9: {missing[:5]}")

    setup.procs.local_stop(check, STORE, ZIPG)


def cleanup():
    setup.procs.cleanup()


cluster_procs.run_test("load_bench_test", main, setup.report, cleanup)
