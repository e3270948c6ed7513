#!/usr/bin/python3
"""End-to-end test of `zipg compress` under a memory limit (docs/graph-layout.md, "Memory model").

1. A one-shard build of a generated graph gives the planned peak of the whole graph in one shard.
2. Under a cgroup v1 memory limit (or, where no cgroup can be made, --memory-limit) too small for
   that, a compress with no options must succeed with more shards or fewer parallel builds, stay
   under its planned peak, never meet the OOM killer, and answer like the CSV says.
3. Under the same limit a given --shards that cannot fit fails before building, naming a --shards
   that fits (which then works), and leaves no store and no temporary directory.
4. A budget below what compress needs before building fails at once.
5. A compress killed with SIGKILL in its build phase leaves OUT.tmp-PID behind; the next run
   removes it, says so, and succeeds.

In an AddressSanitizer build the process's memory is the sanitizer's, not the plan's: steps 2 and
3 then use --memory-limit and do not compare resident memory with the plan (said in the output).

Usage: compress_memory_test.py PATH/TO/zipg"""
import csv
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_procs import Report, sanitized  # noqa: E402

ZIPG = sys.argv[1]
R = Report(30)
check = R.check
BASELINE = 128 << 20  # graph/memory_plan.h kProcessBaseline
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def parse_bytes(text):
    value, unit = text.split()
    return int(float(value) * UNITS[unit])


def run(args, cgroup=None, timeout=600):
    cmd = [ZIPG, *args]
    if cgroup:
        # Join the cgroup first, then become zipg: every byte it uses is charged to the cgroup.
        cmd = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroup, *cmd]
    return subprocess.run(cmd, capture_output=True, timeout=timeout)


def memory_line(stdout):
    """(parallel builds, planned peak, peak RSS, budget) from compress's report."""
    m = re.search(r"memory +(\d+) parallel builds, planned peak ([\d.]+ \w+), peak RSS "
                  r"([\d.]+ \w+), budget ([\d.]+ \w+)", stdout)
    if not m:
        return None
    return int(m.group(1)), parse_bytes(m.group(2)), parse_bytes(m.group(3)), parse_bytes(m.group(4))


def plan_line(stderr):
    m = re.search(r"plan: (\d+) shards \((chosen|given)\), (\d+) parallel builds?", stderr)
    return (int(m.group(1)), m.group(2), int(m.group(3))) if m else None


def make_cgroup(limit):
    """A child of this process's v1 memory cgroup with `limit` bytes, or None if none can be made."""
    try:
        with open("/proc/self/cgroup") as f:
            path = next(line.split(":", 2)[2].strip() for line in f
                        if "memory" in line.split(":")[1].split(","))
    except (OSError, StopIteration, IndexError):
        return None
    base = "/sys/fs/cgroup/memory" + ("" if path == "/" else path)
    child = os.path.join(base, f"zipg-compress-test-{os.getpid()}")
    try:
        os.mkdir(child)
        with open(os.path.join(child, "memory.limit_in_bytes"), "w") as f:
            f.write(str(limit))
        return child
    except OSError:
        try:
            os.rmdir(child)
        except OSError:
            pass
        return None


def oom_kills(cgroup):
    with open(os.path.join(cgroup, "memory.oom_control")) as f:
        for line in f:
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    return 0


def leftovers(directory, name):
    return sorted(e for e in os.listdir(directory) if e.startswith(name + ".tmp-")
                  or e.startswith(name + ".old-"))


def reference(graph_dir, rng):
    """Sampled nodes (id -> properties) and (src, type) -> live edge count, from the CSV files."""
    with open(os.path.join(graph_dir, "nodes.csv"), newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header, rows = rows[0], rows[1:]
    nodes = {}
    for row in rng.sample(rows, 40):
        nodes[int(row[0])] = {header[i]: v for i, v in enumerate(row) if i > 0 and v != ""}
    dsts = {}
    with open(os.path.join(graph_dir, "edges.csv"), newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        next(reader)
        for row in reader:
            dsts.setdefault((int(row[0]), int(row[2])), set()).add(int(row[1]))
    keys = rng.sample(sorted(dsts), 40)
    return nodes, {k: len(dsts[k]) for k in keys}


def answers_match(store, nodes, counts, what):
    lines = [json.dumps({"op": "obj_get", "id": i}) for i in nodes]
    lines += [json.dumps({"op": "assoc_count", "id": s, "type": t}) for s, t in counts]
    r = subprocess.run([ZIPG, "query", "--store", store, "--batch", "-"], capture_output=True,
                       input="\n".join(lines).encode(), timeout=300)
    out = [json.loads(line) for line in r.stdout.decode().splitlines()]
    if not check(r.returncode == 0 and len(out) == len(lines), f"{what}: query failed: {r.stderr!r}"):
        return
    bad = 0
    for (i, props), got in zip(nodes.items(), out):
        bad += got != {"ok": {"id": i, "properties": props}}
    for (key, n), got in zip(counts.items(), out[len(nodes):]):
        bad += got != {"ok": n}
    check(bad == 0, f"{what}: {bad} of {len(lines)} answers differ from the CSV")


def main():
    asan = sanitized(ZIPG)
    d = tempfile.mkdtemp(prefix="zipg_compress_memory.")
    cgroups = []
    try:
        R.section("generate a graph")
        g = os.path.join(d, "g")
        r = run(["gen", "graph", "--nodes", "30000", "--seed", "5", "--out", g])
        if not check(r.returncode == 0, f"gen graph: {r.stderr!r}"):
            return
        nodes_csv, edges_csv = os.path.join(g, "nodes.csv"), os.path.join(g, "edges.csv")
        inputs = ["--nodes", nodes_csv, "--edges", edges_csv]
        sample_nodes, sample_counts = reference(g, random.Random(5))

        R.section("1. one shard, one build: the graph's planned peak")
        r = run(["compress", *inputs, "--out", os.path.join(d, "one"), "--shards", "1",
                 "--threads", "1"])
        mem = memory_line(r.stdout.decode())
        if not check(r.returncode == 0 and mem, f"one-shard compress: {r.stdout!r} {r.stderr!r}"):
            return
        one_peak = mem[1] - BASELINE
        R.note(f"one shard: planned peak {mem[1] >> 20} MiB, peak RSS {mem[2] >> 20} MiB")
        if not asan:
            check(mem[2] <= mem[1], f"one shard: peak RSS {mem[2]} above the planned {mem[1]}")
        answers_match(os.path.join(d, "one"), sample_nodes, sample_counts, "one shard")

        # A budget for about a third of that: one or two shards cannot fit, three or four can.
        budget = BASELINE + one_peak * 10 // 26
        cgroup = None if asan else make_cgroup(int(budget / 0.8))
        if cgroup:
            cgroups.append(cgroup)
            limit_args = []
            R.note(f"cgroup {cgroup}: limit {int(budget / 0.8) >> 20} MiB "
                   f"(budget {budget >> 20} MiB at 80%)")
        else:
            limit_args = ["--memory-limit", str(budget)]
            R.note("no cgroup" + (" (AddressSanitizer build)" if asan else " can be made here") +
                   f": --memory-limit {budget >> 20} MiB instead")

        R.section("2. no options, under the limit: more shards or fewer builds")
        auto = os.path.join(d, "auto")
        r = run(["compress", *inputs, "--out", auto, *limit_args], cgroup=cgroup)
        err, out = r.stderr.decode(), r.stdout.decode()
        plan, mem = plan_line(err), memory_line(out)
        if check(r.returncode == 0 and plan and mem, f"compress under the limit: rc {r.returncode} "
                 f"{err[-600:]!r}"):
            shards, how, parallel = plan
            R.note(f"plan: {shards} shards ({how}), {parallel} parallel; planned peak "
                   f"{mem[1] >> 20} MiB, peak RSS {mem[2] >> 20} MiB, budget {mem[3] >> 20} MiB")
            check(how == "chosen" and shards >= 3, f"expected at least 3 chosen shards: {plan}")
            check(mem[1] <= mem[3], f"planned peak {mem[1]} above the budget {mem[3]}")
            if cgroup:
                check("cgroup v1 limit of" in err, f"the budget comes from the cgroup: {err[:300]!r}")
                check(abs(mem[3] - budget) < 16 << 20, f"budget {mem[3]} is not 80% of the limit")
                check(oom_kills(cgroup) == 0, "the OOM killer ran in the cgroup")
            if not asan:
                check(mem[2] <= mem[1], f"peak RSS {mem[2]} above the planned {mem[1]}")
            answers_match(auto, sample_nodes, sample_counts, "under the limit")
        check(leftovers(d, "auto") == [], f"leftovers: {leftovers(d, 'auto')}")

        R.section("3. a given --shards that cannot fit fails before building")
        given = os.path.join(d, "given")
        t0 = time.monotonic()
        r = run(["compress", *inputs, "--out", given, "--shards", "2", *limit_args], cgroup=cgroup)
        err = r.stderr.decode()
        m = re.search(r"more than the [\d.]+ \w+ budget; --shards (\d+) would fit", err)
        check(r.returncode != 0 and m, f"--shards 2 under the limit: rc {r.returncode} {err!r}")
        check("build ..." not in err, "it started building")
        check(not os.path.exists(given) and leftovers(d, "given") == [],
              f"a store or temporary directory was left: {os.listdir(d)}")
        R.note(f"failed in {time.monotonic() - t0:.1f} s: {err.strip().splitlines()[-1]}")
        if m:
            r = run(["compress", *inputs, "--out", given, "--shards", m.group(1), *limit_args],
                    cgroup=cgroup)
            mem = memory_line(r.stdout.decode())
            check(r.returncode == 0 and mem, f"the suggested --shards {m.group(1)}: {r.stderr!r}")
            if mem and not asan:
                check(mem[2] <= mem[1] <= mem[3], f"suggested --shards: peak/plan/budget {mem}")
            if cgroup:
                check(oom_kills(cgroup) == 0, "the OOM killer ran in the cgroup")

        R.section("4. a budget below the baseline fails at once")
        t0 = time.monotonic()
        r = run(["compress", *inputs, "--out", os.path.join(d, "tiny"), "--memory-limit", "64M"])
        took = time.monotonic() - t0
        err = r.stderr.decode()
        check(r.returncode != 0 and "is not enough: compress needs" in err, f"tiny budget: {err!r}")
        check(took < 5 and "load nodes" not in err, f"tiny budget: read the input first ({took:.1f} s)")
        check(not os.path.exists(os.path.join(d, "tiny")) and leftovers(d, "tiny") == [],
              f"tiny budget left something: {os.listdir(d)}")

        R.section("5. SIGKILL in the build phase; the next run cleans up")
        killed = os.path.join(d, "killed")
        p = subprocess.Popen([ZIPG, "compress", *inputs, "--out", killed, "--shards", "4",
                              "--threads", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        seen = b""
        deadline = time.monotonic() + 120
        while b"build ..." not in seen and time.monotonic() < deadline:
            line = p.stderr.readline()
            if not line:
                break
            seen += line
        tmp = f"{killed}.tmp-{p.pid}"
        check(b"build ..." in seen and os.path.isdir(tmp), f"no build phase / {tmp}: {seen!r}")
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        p.stderr.close()
        check(os.path.isdir(tmp), "the killed run left no temporary directory to clean")
        r = run(["compress", *inputs, "--out", killed, "--shards", "2"])
        err = r.stderr.decode()
        check(r.returncode == 0, f"compress after the kill: {err!r}")
        check(f"removed {tmp}, left behind by compress process {p.pid}, which is gone" in err,
              f"the cleanup was not reported: {err[:500]!r}")
        check(leftovers(d, "killed") == [], f"leftovers after the kill: {leftovers(d, 'killed')}")
        answers_match(killed, sample_nodes, sample_counts, "after the kill")
    finally:
        for c in cgroups:
            for _ in range(50):
                try:
                    os.rmdir(c)
                    break
                except OSError:
                    time.sleep(0.1)
        shutil.rmtree(d, ignore_errors=True)


main()
print("compress_memory_test:", "OK" if R.failures == 0 else f"{R.failures} failure(s)")
sys.exit(1 if R.failures else 0)
