"""What the cluster benchmarks share: starting a local cluster on a store with its writes removed,
running `zipg bench` against its aggregators, and CPU time per operation by process from /proc."""
import argparse
import json
import os
import resource
import shutil
import statistics
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
    """{pid: name} of the cluster's servers (etcd and a Prometheus server left out)."""
    return {p["pid"]: p.get("name", p.get("role")) for p in state["processes"]
            if p.get("role") not in ("etcd", "prometheus")}


def run_bench(zipg, state, mix, seconds, connections, count_cpu=True, extra=(),
              allow_errors=False):
    """`zipg bench` through every aggregator for `seconds` (+1 s warm-up). Returns ops_per_s,
    p50_us, p99_us, errors, and with count_cpu the CPU microseconds per operation by process
    kind (`cpu_per`, the bench itself as "client") and in all (`cpu_us`); the warm-up second's
    CPU is counted against warm-up operations at the measured rate. Exits if the bench fails
    (with allow_errors, only if it printed no report: failed calls are counted, and the first
    one is `first_error`). `report` is the bench's whole report.
    `--json -` prints the report as one line; a `zipg` from before `--json FILE` (a --before
    binary) takes `--json` as a flag and ignores the `-`."""
    procs = server_pids(state)
    before = {pid: cpu_ticks(pid) for pid in procs}
    u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([zipg, "bench", "--connect", ",".join(state["aggregators"]), "--mix", mix,
                        "--connections", str(connections), "--duration", str(seconds),
                        "--warmup", "1", "--json", "-", *extra], capture_output=True, text=True)
    u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    after = {pid: cpu_ticks(pid) for pid in procs}
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    if (r.returncode != 0 and not allow_errors) or not lines:
        sys.exit(f"bench failed:\n{r.stdout}{r.stderr}")
    report = json.loads(lines[-1])
    o = report["ops"]["overall"]
    out = {"ops_per_s": o["ops_per_s"], "p50_us": o["p50_us"], "p99_us": o["p99_us"],
           "errors": report["errors"], "cpu_us": None, "cpu_per": None, "report": report,
           "first_error": next((x for x in r.stdout.splitlines() if x.startswith("first error")),
                               "")}
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


def parse_workloads(text):
    """"tao:4,write:16" -> [("tao", 4), ("write", 16)]."""
    return [(w.split(":")[0], int(w.split(":")[1])) for w in text.split(",") if w]


def compare(configs, workloads, store, local, rounds, duration):
    """Runs each workload (mix, connections) on a fresh cluster per configuration (name, zipg,
    extra local start arguments) and round, configurations alternating within a round so that
    drift of the machine hits them alike; prints each run, then per workload and configuration
    the medians of op/s, p50, p99 and CPU per operation and the ratios to the first one."""
    results = {}
    for mix, conns in workloads:
        for rnd in range(rounds):
            for name, zipg, extra in configs:
                r = None
                for attempt in range(2):  # a server that died under load (printed) is run again
                    state = start_cluster(zipg, store, local + extra)
                    try:
                        r = run_bench(zipg, state, mix, duration, conns)
                    except OSError as e:  # a server's /proc entry vanished: it exited
                        print(f"round {rnd + 1} {mix}:{conns} {name}: a server died ({e}); "
                              f"logs in {store}/run", flush=True)
                    finally:
                        stop_cluster(zipg, store)
                    if r is not None:
                        break
                if r is None:
                    sys.exit("a server died twice; see the logs")
                results.setdefault((mix, conns, name), []).append(r)
                print(f"round {rnd + 1} {mix}:{conns} {name}: {r['ops_per_s']:.0f} op/s "
                      f"p50 {r['p50_us']:.0f} us p99 {r['p99_us']:.0f} us "
                      f"CPU {r['cpu_us']:.0f} us/op errors {r['errors']}", flush=True)
    if not workloads:
        return
    first = configs[0][0]
    print()
    print(f"| workload | config | op/s | p50 us | p99 us | CPU us/op | op/s vs {first} | "
          f"p99 vs {first} | median of per-round op/s ratios |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mix, conns in workloads:
        base = None
        base_runs = results[(mix, conns, first)]
        for name, _, _ in configs:
            runs = results[(mix, conns, name)]
            m = {k: statistics.median(r[k] for r in runs)
                 for k in ("ops_per_s", "p50_us", "p99_us", "cpu_us")}
            if base is None:
                base = m
            print(f"| {mix}, {conns} conn | {name} | {m['ops_per_s']:.0f} | {m['p50_us']:.0f} | "
                  f"{m['p99_us']:.0f} | {m['cpu_us']:.0f} | "
                  f"{m['ops_per_s'] / base['ops_per_s']:.3f} | "
                  f"{m['p99_us'] / base['p99_us']:.3f} | {paired(runs, base_runs):.3f} |",
                  flush=True)


def paired(runs, base_runs):
    """The median over rounds of a configuration's op/s divided by the first configuration's in
    the same round: the runs of one round are next to each other in time, so a slow spell of the
    machine hits both, and an outlier round moves this median little."""
    return statistics.median(r["ops_per_s"] / b["ops_per_s"] for r, b in zip(runs, base_runs))


def comparison_parser(doc, workloads):
    """The arguments of a before/after comparison: --zipg, --before, --store, --workloads,
    --duration, --rounds (add more to the parser it returns)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--zipg", required=True)
    p.add_argument("--before", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--workloads", default=workloads)
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--rounds", type=int, default=2)
    return p
