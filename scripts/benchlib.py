"""What the cluster benchmarks share: starting a local cluster on a store with its writes removed,
running `zipg bench` against its aggregators, and CPU time per operation by process from /proc."""
import json
import os
import resource
import shutil
import subprocess
import sys


def cpu_ticks(pid):
    """utime + stime of a process, in clock ticks (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def kind(name):
    """A process's kind for CPU totals: shard-1 -> shard, aggregator-0 -> aggregator."""
    for prefix in ("shard", "aggregator"):
        if name.startswith(prefix):
            return prefix
    return name


def split_args(argv):
    """(the script's own arguments, the `zipg local start` options after `--`)."""
    if "--" in argv:
        return argv[:argv.index("--")], argv[argv.index("--") + 1:]
    return argv, []


def start_cluster(zipg, store, local_args):
    """Removes the store's writes (updates/ and the LogStores' directories), runs `zipg local
    start`, and returns its run/cluster.json state; exits if it fails."""
    for d in ("updates", "logstore", "logstore-standby"):
        shutil.rmtree(os.path.join(store, d), ignore_errors=True)
    start = subprocess.run([zipg, "local", "start", "--store", store, *local_args],
                           capture_output=True, text=True)
    if start.returncode != 0:
        sys.exit(f"local start failed:\n{start.stdout}{start.stderr}")
    with open(os.path.join(store, "run", "cluster.json")) as f:
        return json.load(f)


def stop_cluster(zipg, store):
    subprocess.run([zipg, "local", "stop", "--store", store], capture_output=True)


def server_pids(state):
    """{pid: name} of the cluster's servers (etcd left out)."""
    return {p["pid"]: p.get("name", p.get("role")) for p in state["processes"]
            if p.get("role") != "etcd"}


def run_bench(zipg, state, mix, seconds, connections, count_cpu=True, extra=()):
    """`zipg bench` through every aggregator for `seconds` (+1 s warm-up). Returns ops_per_s,
    p50_us, p99_us, errors, and with count_cpu the CPU microseconds per operation by process
    kind (`cpu_per`, the bench itself as "client") and in all (`cpu_us`); the warm-up second's
    CPU is counted against warm-up operations at the measured rate. Exits if the bench fails."""
    procs = server_pids(state)
    before = {pid: cpu_ticks(pid) for pid in procs}
    u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([zipg, "bench", "--connect", ",".join(state["aggregators"]), "--mix", mix,
                        "--connections", str(connections), "--duration", str(seconds),
                        "--warmup", "1", "--json", *extra], capture_output=True, text=True)
    u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    after = {pid: cpu_ticks(pid) for pid in procs}
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    if r.returncode != 0 or not lines:
        sys.exit(f"bench failed:\n{r.stdout}{r.stderr}")
    report = json.loads(lines[-1])
    o = report["ops"]["overall"]
    out = {"ops_per_s": o["ops_per_s"], "p50_us": o["p50_us"], "p99_us": o["p99_us"],
           "errors": report["errors"], "cpu_us": None, "cpu_per": None}
    if count_cpu:
        ops = o["ops_per_s"] * (seconds + 1)
        hz = os.sysconf("SC_CLK_TCK")
        per = {}
        for pid, name in procs.items():
            per[kind(name)] = per.get(kind(name), 0.0) + (after[pid] - before[pid]) / hz * 1e6 / ops
        per["client"] = ((u1.ru_utime - u0.ru_utime) + (u1.ru_stime - u0.ru_stime)) * 1e6 / ops
        out["cpu_per"] = per
        out["cpu_us"] = sum(per.values())
    return out
