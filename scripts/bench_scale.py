#!/usr/bin/python3
"""Scale-out measurements on the namespace rig (docs/scale.md, issue 32 step 5): the same store
deployed with `zipg deploy` on 2, 4, 6 ... hosts (Linux network namespaces on a bridge, TLS on,
R = 2, an aggregator and a shard server on every host, the LogStore and its standby on the first
two, etcd on the first three), and for each: TAO, Graph Search and durable single writes through
every aggregator (`zipg bench`, from the client namespace), and bfs shipped to the shards
(`--mix traversal`). Per operation: throughput, p50 / p99, the CPU microseconds of each role
(from /proc of every process, the bench client included), and the calls and bytes each role's
servers received and sent (their status documents). These per-operation costs are what the
model in docs/scale.md is built from.

With --delays D1,D2,... (microseconds, one way) each host count runs the mixes once per delay:
every packet leaving a namespace over the bridge is held D (netns_rig.Network.delay, through
NFQUEUE and build/tests/net_delay, since this kernel has no netem), so a round trip between hosts
gains 2D. Mixes with one connection (e.g. tao:1,write:1) measure the latency the model predicts.

Usage (root, for the namespaces):
  /usr/bin/python3 scripts/bench_scale.py --zipg build/client/zipg --store STORE
      [--hosts 2,4,6] [--mixes tao:8,graphsearch:8,write:16] [--duration 10] [--out FILE.json]
      [--delays 0,200,1000 [--net-delay build/tests/net_delay]]
STORE: a compressed store whose shard count the host counts divide well (e.g. 12 shards).
Each configuration takes about a minute (deploy, measure, stop). Prints one line per run and,
with --out, writes every run as JSON."""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "jepsen"))
from netns_rig import Network, RigError, place_host_stores, planned_files  # noqa: E402

BASE_PORT = 22000


def run(argv, timeout=300, **kw):
    return subprocess.run(argv, capture_output=True, timeout=timeout, **kw)


def cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except OSError:
        return 0


def role_of(name):
    for role in ("shard", "aggregator", "logstore", "etcd"):
        if name.startswith(role):
            return role
    return name


class Deployment:
    """The store deployed on `hosts` namespaces; stop() removes everything."""

    def __init__(self, zipg, store, hosts, work):
        self.zipg, self.store, self.work = zipg, store, work
        self.net = Network([f"h{k + 1}" for k in range(hosts)])
        self.net.setup()
        self.tls = os.path.join(work, "tls")
        self.spec_path = os.path.join(work, "cluster.json")
        self.tls_args = ["--tls-ca", os.path.join(self.tls, "ca.pem"), "--tls-cert",
                         os.path.join(self.tls, "client.pem"), "--tls-key",
                         os.path.join(self.tls, "client.key")]
        self.started = False

    def client(self, argv, timeout=300):
        """Runs zipg ARGV in the client namespace."""
        return run(["ip", "netns", "exec", self.net.client_ns, self.zipg, *argv], timeout=timeout)

    def start(self):
        hosts = self.net.hosts
        addrs = ",".join(self.net.addresses[h] for h in hosts)
        r = run([self.zipg, "deploy", "certs", "--hosts", ",".join(hosts), "--addresses", addrs,
                 "--out", self.tls, "--days", "2"])
        if r.returncode != 0:
            sys.exit(f"deploy certs: {r.stderr.decode()}")
        r = run([self.zipg, "deploy", "plan", "--hosts", ",".join(hosts), "--addresses", addrs,
                 "--replicas", "2", "--logstores", "2", "--etcd-members", "3", "--store",
                 self.store, "--tls-dir", self.tls, "--base-port", str(BASE_PORT)])
        if r.returncode != 0:
            sys.exit(f"deploy plan: {r.stderr.decode()}")
        spec = json.loads(r.stdout)
        # Each host's files, hard-linked: a store directory per host.
        place_host_stores(spec, planned_files(r.stderr), self.store, self.work, os.link)
        with open(self.spec_path, "w") as f:
            json.dump(spec, f, indent=2)
        self.spec = spec
        self.aggregators = [f"{self.net.addresses[h['name']]}:{h['aggregator']['port']}"
                            for h in spec["hosts"] if "aggregator" in h]
        t = time.monotonic()
        r = run([self.zipg, "deploy", "start", "--spec", self.spec_path, "--exec",
                 self.net.exec_prefix, "--zipg", self.zipg, "--wait", "180"], timeout=400)
        self.started = True
        if r.returncode != 0:
            sys.exit(f"deploy start: {r.stdout.decode()[-2000:]} {r.stderr.decode()[-2000:]}")
        return time.monotonic() - t

    def processes(self):
        """{pid: (name, endpoint or None)} of every process of every host's node file."""
        out = {}
        for h in self.spec["hosts"]:
            path = os.path.join(h["store"], "run", f"node-{h['name']}.json")
            with open(path) as f:
                for p in json.load(f)["processes"]:
                    out[p["pid"]] = p["name"]
        return out

    def member_traffic(self):
        """{name: (calls, bytes_in, bytes_out)} of every registered server, from its status."""
        r = self.client(["status", "--connect", self.aggregators[0], "--json", *self.tls_args],
                        timeout=60)
        out = {}
        for m in json.loads(r.stdout).get("servers", []):
            s = self.client(["status", "--connect", m["endpoint"], "--json", *self.tls_args],
                            timeout=60)
            try:
                doc = json.loads(s.stdout)
            except ValueError:
                continue
            out[m["name"]] = (doc.get("calls", 0), doc.get("bytes_in", 0), doc.get("bytes_out", 0))
        return out

    def stop(self):
        if self.started:
            run([self.zipg, "deploy", "stop", "--spec", self.spec_path, "--exec",
                 self.net.exec_prefix, "--zipg", self.zipg], timeout=200)
        self.net.cleanup()


def measure(dep, mix, connections, duration):
    """One bench run: its report plus CPU, calls and bytes per operation by role."""
    procs = dep.processes()
    traffic0 = dep.member_traffic()  # before the CPU is read: its own calls are not counted
    ticks0 = {pid: cpu_ticks(pid) for pid in procs}
    u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if mix == "traversal":
        argv = ["--mix", "traversal", "--depths", "2,3", "--starts", "100", "--pulled-starts",
                "0"]
    else:
        argv = ["--mix", mix, "--connections", str(connections), "--duration", str(duration),
                "--warmup", "1"]
    r = dep.client(["bench", "--connect", ",".join(dep.aggregators), *argv, "--json", "-",
                    *dep.tls_args], timeout=duration + 600)
    u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    ticks1 = {pid: cpu_ticks(pid) for pid in procs}
    traffic1 = dep.member_traffic()  # its status calls count one each: negligible per op
    lines = [ln for ln in r.stdout.decode().splitlines() if ln.startswith("{")]
    if not lines:
        sys.exit(f"bench {mix}: {r.stdout.decode()[-1000:]} {r.stderr.decode()[-1000:]}")
    report = json.loads(lines[-1])
    if mix == "traversal":
        ops = sum(c["queries"] for c in report["cases"])
        out = {"cases": [{k: c[k] for k in ("case", "mode", "queries", "p50_ms", "p99_ms",
                                            "calls", "bytes", "answers")}
                         for c in report["cases"]]}
    else:
        o = report["ops"]["overall"]
        ops = o["ops_per_s"] * (duration + 1)  # the warm-up second counted at the same rate
        out = {"ops_per_s": o["ops_per_s"], "p50_us": o["p50_us"], "p99_us": o["p99_us"],
               "errors": report["errors"]}
    hz = os.sysconf("SC_CLK_TCK")
    cpu = {}
    for pid, name in procs.items():
        cpu[role_of(name)] = cpu.get(role_of(name), 0.0) + \
            (ticks1[pid] - ticks0[pid]) / hz * 1e6 / max(ops, 1)
    cpu["client"] = ((u1.ru_utime - u0.ru_utime) + (u1.ru_stime - u0.ru_stime)) * 1e6 / max(ops, 1)
    out["cpu_us_per_op"] = {k: round(v, 1) for k, v in cpu.items()}
    out["cpu_us_per_op_total"] = round(sum(cpu.values()), 1)
    calls, nbytes = {}, {}
    for name, (c1, i1, o1) in traffic1.items():
        c0, i0, o0 = traffic0.get(name, (0, 0, 0))
        role = role_of(name)
        calls[role] = calls.get(role, 0.0) + (c1 - c0) / max(ops, 1)
        nbytes[role] = nbytes.get(role, 0.0) + ((i1 - i0) + (o1 - o0)) / max(ops, 1)
    out["calls_per_op"] = {k: round(v, 2) for k, v in calls.items()}
    out["bytes_per_op"] = {k: round(v) for k, v in nbytes.items()}
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--zipg", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--hosts", default="2,4,6")
    p.add_argument("--mixes", default="tao:8,graphsearch:8,write:16,traversal:1")
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--out")
    p.add_argument("--delays", default="0", help="one-way delays in microseconds")
    p.add_argument("--net-delay", help="the delay daemon (default: tests/net_delay beside zipg's "
                   "build)")
    a = p.parse_args()
    zipg, store = os.path.abspath(a.zipg), os.path.abspath(a.store)
    delays = [int(d) for d in a.delays.split(",")]
    tool = os.path.abspath(a.net_delay or os.path.join(os.path.dirname(os.path.dirname(zipg)),
                                                       "tests", "net_delay"))
    if any(delays) and not os.access(tool, os.X_OK):
        sys.exit(f"--delays needs the delay daemon: {tool} is not there (ninja net_delay)")
    results = []
    for hosts in [int(h) for h in a.hosts.split(",")]:
        work = tempfile.mkdtemp(prefix=f"zipg-scale-{hosts}-")
        dep = None
        try:
            dep = Deployment(zipg, store, hosts, work)
            took = dep.start()
            print(f"{hosts} hosts: deployed in {took:.1f} s; aggregators {dep.aggregators}",
                  flush=True)
            for delay in delays:
                dep.net.delay(tool, delay)
                for item in a.mixes.split(","):
                    mix, conns = item.split(":")
                    res = measure(dep, mix, int(conns), a.duration)
                    res.update({"hosts": hosts, "mix": mix, "connections": int(conns),
                                "delay_us": delay})
                    results.append(res)
                    print(json.dumps(res), flush=True)
                held = dep.net.undelay()
                if held:
                    print(f"   delay {delay} us: {sorted(held.values())[-1]}", flush=True)
        except RigError as e:
            sys.exit(f"the namespace rig cannot be built here: {e}")
        finally:
            if dep is not None:
                dep.stop()
            shutil.rmtree(work, ignore_errors=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
