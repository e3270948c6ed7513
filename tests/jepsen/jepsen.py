#!/usr/bin/python3
"""Jepsen-style histories against a real local zipg cluster, checked by zipg-check (checker/).

Concurrent client threads (each with its own connection to an aggregator, through the Python
client) run reads and writes on a small set of keys while a nemesis injects faults; every
operation is recorded with its invoke and completion times as one history (README.md, "History
format"), which zipg-check checks for linearizability.

    jepsen.py --zipg BIN --nemesis NAME --seconds S [--read-consistency linearizable|replica]
              [--logstores 1|2] [--keep DIR] [--seed N] [--workers N] [--profile P]
    jepsen.py --zipg BIN --nemeses none,pause-replica,kill-replica --seconds 15 [--minutes M]

One cluster (`zipg local start --servers 2 --replicas 2 --aggregators 2 --lease-ttl 2`) runs every
history of a run; each history has its own keys (fresh node ids, edge records not used before),
so histories are independent. With --minutes M the list of nemeses is repeated until M minutes
have passed. Exit status 0 iff every history is linearizable and every run check held (each
nemesis acted, each history has enough ok operations, each fault was undone and the cluster
healthy again).

Keys and operations (checker/README.md): node keys `node:<id>` (new ids, absent at the start):
obj_add / obj_update / obj_delete / obj_get with properties {"v": <unique string>}; edge keys
`edge:<src>:<type>` (records of the generated graph with fewer than 30 edges, read with
assoc_range before the nemesis starts: the `init` lines): assoc_add / assoc_delete / assoc_range /
assoc_count, dsts from a small set (some of the record's own and a few new ones), unique
timestamps. A value is the canonical JSON of the whole property map.

Outcomes: a read that raises is "fail" (it constrains nothing); a write that raises
INVALID_ARGUMENT is "fail" (nothing happened); NOT_FOUND / ALREADY_EXISTS of obj_update / obj_add
are "ok" answers; any other error (UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, a transport error)
of a write is "info": its outcome is unknown, it is never retried, and the worker goes on with a
new connection under a new process number.

Nemeses (each acts until shortly before the history's end, undoes what it did in any case, and
the history ends only once the cluster is whole again):

  none             nothing
  pause-replica    SIGSTOP a random shard server for 0.2-1.5 s (one pause in four: 3 s, past the
                   2 s lease), SIGCONT; waits for it to serve again before the next
  kill-replica     kill -9 a random shard server, restart it 1-2 s later with its own argv,
                   environment and cwd; it must be serving again (zipg status) within 30 s
  kill-logstore    (--logstores 2) kill -9 the LogStore leader; once the standby leads, restart
                   the killed one: it must rejoin as the standby and be in sync within 30 s
  pause-logstore   SIGSTOP the LogStore leader for 0.5-3 s, SIGCONT; a leader that lost its term
                   exits: it is restarted and must rejoin in sync
  kill-aggregator  kill -9 an aggregator, restart it 1-2 s later on its old port (it was started
                   with --port 0); its workers reconnect, to the other one while it is down
"""
import argparse
import collections
import csv
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
REPO = os.path.dirname(TESTS)
sys.path.insert(0, TESTS)
sys.path.insert(0, os.path.join(REPO, "client", "python", "tests"))
import cluster_procs  # noqa: E402
from cluster_procs import Report, cmdline  # noqa: E402

NEMESES = ["none", "pause-replica", "kill-replica", "kill-logstore", "pause-logstore",
           "kill-aggregator", "pause-aggregator"]
MIN_OK = 50               # a history with fewer ok operations proves nothing
LEASE_TTL = 2             # --lease-ttl of the cluster (membership and the LogStore leader key)
CALL_TIMEOUT = 5.0        # the clients' timeout per network wait
HEAL_TIMEOUT = 30.0       # how long a restarted process may take to serve / be in sync again
NODE_BASE = 1_000_000_000  # node keys: NODE_BASE + 1000 * history + k (absent from the graph)
NEW_DST_BASE = 900_000_000  # dsts that no edge of the generated graph has
TS_BASE = 2_000_000_000   # written timestamps: unique, above every timestamp of the graph
ERROR_BACKOFF = (0.1, 0.3)  # a worker's pause after an operation that did not complete ok


def canon(props):
    """The history's value of a node or an edge: its whole property map, canonical JSON."""
    return json.dumps(props, sort_keys=True, separators=(",", ":"))


# ------------------------------------------------------------------------------------------------
# Environment: the checker, the Python client


def build_checker(out_dir):
    """Builds zipg-check into out_dir; returns its path. Raises RuntimeError (with what to do)
    when Go is missing or the build fails: the test must fail, not skip."""
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("`go` is not on PATH: the linearizability checker (tests/jepsen/checker,"
                           " Go >= 1.16) cannot be built; install Go and rerun")
    path = os.path.join(out_dir, "zipg-check")
    env = dict(os.environ)
    if not env.get("HOME") and not env.get("XDG_CACHE_HOME"):  # go needs a cache and a GOPATH
        base = os.path.join(tempfile.gettempdir(), "zipg-go")
        env.setdefault("GOCACHE", os.path.join(base, "cache"))
        env.setdefault("GOPATH", os.path.join(base, "path"))
    r = subprocess.run([go, "build", "-o", path, "."], cwd=os.path.join(HERE, "checker"),
                       capture_output=True, timeout=600, env=env)
    if r.returncode != 0 or not os.path.exists(path):
        raise RuntimeError("go build of tests/jepsen/checker failed:\n" +
                           (r.stdout + r.stderr).decode(errors="replace")[-3000:])
    return path


def import_client(tmp):
    """The Python client package (client/python), pip-installed into tmp as
    client/python/tests/test_client.py does; returns the module."""
    from test_client import _build_package
    site = _build_package(tmp)
    sys.path.insert(0, site)
    import zipg
    if not os.path.abspath(zipg.__file__).startswith(site + os.sep):
        raise RuntimeError(f"imported zipg from {zipg.__file__}, not from {site}")
    return zipg


class Env:
    """What every history needs: the private zipg binary, a scratch directory, the checker, the
    client package, the report (failed checks and progress lines)."""

    def __init__(self, zipg_binary, report, check_bin=None):
        self.tmp, self.zipg = cluster_procs.private_binary(zipg_binary, "zipg-jepsen-")
        self.report = report
        self.check, self.note, self.section = report.check, report.note, report.section
        try:
            self.check_bin = check_bin or build_checker(self.tmp)
            self.client = import_client(self.tmp)
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise

    def cleanup(self):
        if os.environ.get("ZIPG_KEEP_TEST_DIR"):
            print("test directory kept:", self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


# ------------------------------------------------------------------------------------------------
# The cluster


def proc_spec(pid):
    """What restarting the process `pid` as it was needs: argv, environment, cwd (None if gone)."""
    try:
        argv = cmdline(pid)
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        env = {k.decode(errors="surrogateescape"): v.decode(errors="surrogateescape")
               for k, v in env.items()}
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
    if not argv:
        return None
    return {"argv": argv, "env": env, "cwd": cwd, "pid": pid}


def logstore_problems(members, logstores):
    """What keeps the LogStores from being whole: every one registered, one leader, and with two
    its standby in sync."""
    out = []
    ls = [m for m in members.values() if m["role"] == "logstore"]
    leaders = [m for m in ls if m.get("leader")]
    if len(ls) != logstores:
        out.append(f"logstores registered: {sorted(m['name'] for m in ls)}")
    if len(leaders) != 1:
        out.append(f"logstore leaders: {[m['name'] for m in leaders]}")
    elif logstores == 2 and leaders[0].get("sync") != "in_sync":
        out.append(f"{leaders[0]['name']} leads with sync {leaders[0].get('sync')!r}")
    return out


class Cluster:
    """One local cluster: a generated graph compressed into `dir`/store, started with `zipg local
    start`, its members as `zipg status` lists them, restarts of killed members, `zipg local
    stop`. Every process is stopped at exit whatever happens (cluster_procs.Procs)."""

    def __init__(self, env, name, logstores=2, read_consistency="linearizable", servers=2,
                 nodes=2000):
        self.env, self.name = env, name
        self.logstores, self.read_consistency = logstores, read_consistency
        self.servers, self.nodes = servers, nodes
        self.dir = os.path.join(env.tmp, name)
        os.makedirs(self.dir)
        self.store = os.path.join(self.dir, "store")
        self.procs = cluster_procs.Procs(f"jepsen {name}", self.dir, env.zipg, self.store)
        self.aggregators = []
        self.logs = {}          # member name -> its log file
        self.records = []       # edge-record candidates: (src, type), in a seeded order
        self.base_edges = {}    # (src, type) -> [(dst, ts)] in the CSV
        self.started = False

    def zipg(self, *args, timeout=120):
        return subprocess.run([self.env.zipg, *args], capture_output=True, timeout=timeout)

    def create(self, rnd):
        """The graph and its store; the edge records usable as keys (fewer than 30 edges, no dst
        twice, no two edges with one timestamp, so the store's order is unambiguous)."""
        g = os.path.join(self.dir, "graph")
        r = self.zipg("gen", "graph", "--nodes", str(self.nodes), "--out", g, "--properties", "4",
                      "--seed", str(rnd.randrange(1, 1 << 30)))
        if not self.env.check(r.returncode == 0, f"gen graph: {r.stderr[-500:]!r}"):
            return False
        r = self.zipg("compress", "--nodes", os.path.join(g, "nodes.csv"), "--edges",
                      os.path.join(g, "edges.csv"), "--out", self.store, "--shards", "4",
                      timeout=300)
        if not self.env.check(r.returncode == 0, f"compress: {r.stderr[-500:]!r}"):
            return False
        with open(os.path.join(g, "edges.csv"), newline="") as f:
            for row in csv.DictReader(f):
                key = (int(row["src"]), int(row["type"]))
                self.base_edges.setdefault(key, []).append((int(row["dst"]), int(row["timestamp"])))
        for key, es in sorted(self.base_edges.items()):
            if 3 <= len(es) < 30 and len({d for d, _ in es}) == len(es) and \
                    len({t for _, t in es}) == len(es):
                self.records.append(key)
        rnd.shuffle(self.records)
        return self.env.check(len(self.records) >= 100,
                              f"only {len(self.records)} usable edge records in the graph")

    def start(self):
        args = ["--servers", str(self.servers), "--replicas", "2", "--aggregators", "2",
                "--lease-ttl", str(LEASE_TTL), "--logstores", str(self.logstores),
                "--read-consistency", self.read_consistency, "--no-verify"]
        t = time.monotonic()
        r, state = self.procs.local_start(self.env.check, *args)
        if state is None:
            return False
        self.started = True
        self.aggregators = list(state["aggregators"])
        self.logs = {p["name"]: p["log"] for p in state["processes"]}
        self.env.note(f"cluster {self.name} up in {time.monotonic() - t:.1f} s: zipg local start "
                      f"{' '.join(args)}; aggregators {self.aggregators}")
        return self.wait_healthy(60) is not None

    def stop(self):
        if self.started:
            self.procs.local_stop(self.env.check, self.store, self.env.zipg)
            self.started = False

    # ---- members --------------------------------------------------------------------------------

    def status(self):
        """The status document of the first aggregator that answers `zipg status --json`, or
        None."""
        for a in self.aggregators:
            try:
                r = self.zipg("status", "--connect", a, "--json", timeout=15)
            except subprocess.TimeoutExpired:
                continue
            if r.returncode == 0:
                try:
                    return json.loads(r.stdout)
                except ValueError:
                    continue
        return None

    def members(self):
        st = self.status() or {}
        out = {m["name"]: m for m in st.get("servers", [])}
        for m in out.values():
            if m.get("pid"):
                self.procs.known_pids.add(m["pid"])
        return out

    def problems(self, members):
        """What keeps the cluster from being whole: [] when every shard server serves, every
        aggregator is registered, and the LogStore leads (with its standby in sync)."""
        out = []
        for k in range(self.servers):
            m = members.get(f"shard-{k}")
            if m is None or not m.get("serving"):
                out.append(f"shard-{k} {'absent' if m is None else 'not serving'}")
        aggs = [m for m in members.values() if m["role"] == "aggregator"]
        if len(aggs) != len(self.aggregators):
            out.append(f"{len(aggs)} aggregators registered")
        return out + logstore_problems(members, self.logstores)

    def wait_healthy(self, timeout=HEAL_TIMEOUT, what="the cluster"):
        """Members once the cluster is whole; None (and a failed check) after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            ms = self.members()
            bad = self.problems(ms)
            if not bad:
                return ms
            if time.monotonic() > deadline:
                self.env.check(False, f"{what}: not whole after {timeout:.0f} s: {bad}")
                return None
            time.sleep(0.2)

    def restart(self, name, spec, argv=None):
        """Starts member `name` again as `spec` (proc_spec) had it, output appended to its log.
        Returns the new pid."""
        log_path = self.logs.get(name) or os.path.join(self.store, "run", f"{name}.log")
        with open(log_path, "ab") as log:
            p = subprocess.Popen(argv or spec["argv"], env=spec["env"], cwd=spec["cwd"],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        self.procs.children[p.pid] = p
        self.procs.known_pids.add(p.pid)
        return p.pid

    def alive(self, pid):
        return self.procs.alive(pid)


# ------------------------------------------------------------------------------------------------
# Nemeses


class NemesisError(Exception):
    pass


class Nemesis:
    """Acts on the cluster until `act_until` (monotonic seconds) from its own thread, then undoes
    what it did and waits until the cluster is whole. actions counts the faults injected; log
    lists them; errors what went wrong (each fails the run)."""

    name = "none"

    def __init__(self, cluster, rnd, profile):
        self.cluster, self.rnd, self.profile = cluster, rnd, profile
        self.actions = 0
        self.log = []
        self.errors = []
        self.t0 = time.monotonic()
        self.stopped = {}   # pid -> name: SIGSTOPped and not yet resumed
        self.down = {}      # name -> spec: killed and not yet restarted

    def say(self, text, at=None):
        """Logs an action; `at` (monotonic) is when it began, default now."""
        self.log.append(f"{(at or time.monotonic()) - self.t0:.1f}s {text}")

    def run(self, act_until):
        try:
            self.act(act_until)
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"{self.name}: {e!r}\n{traceback.format_exc()}")
        finally:
            try:
                self.heal()
            except Exception as e:  # noqa: BLE001
                self.errors.append(f"{self.name}: undoing its faults: {e!r}\n"
                                   f"{traceback.format_exc()}")

    def act(self, act_until):
        pass

    def heal(self):
        """Resumes every stopped process, restarts every killed one, waits for a whole cluster."""
        for pid, name in list(self.stopped.items()):
            self._cont(pid, name)
        for name, spec in list(self.down.items()):
            if self.cluster.alive(spec["pid"]):  # never two of one member
                self.errors.append(f"{self.name}: {name} (pid {spec['pid']}) did not exit")
                self.down.pop(name)
            else:
                self._restart(name, spec)
        if self.name != "none" and self.cluster.wait_healthy(
                HEAL_TIMEOUT, f"after the {self.name} nemesis") is None:
            self.errors.append(f"{self.name}: the cluster is not whole again: "
                               f"{self.cluster.problems(self.cluster.members())}")

    # ---- helpers --------------------------------------------------------------------------------

    def _stop(self, pid, name):
        self.stopped[pid] = name
        os.kill(pid, signal.SIGSTOP)

    def _cont(self, pid, name):
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        self.stopped.pop(pid, None)

    def _pause(self, member, seconds):
        """SIGSTOP `member` for `seconds`, then SIGCONT; counted and logged."""
        t = time.monotonic()
        self._stop(member["pid"], member["name"])
        self.actions += 1
        time.sleep(seconds)
        self._cont(member["pid"], member["name"])
        self.say(f"paused {member['name']} {seconds:.2f}s", t)

    def _kill(self, member):
        spec = proc_spec(member["pid"])
        if spec is None:
            raise NemesisError(f"cannot read /proc of {member['name']} (pid {member['pid']})")
        self.down[member["name"]] = spec
        os.kill(member["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while self.cluster.alive(member["pid"]) and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.cluster.alive(member["pid"]):
            raise NemesisError(f"{member['name']} (pid {member['pid']}) survived kill -9")
        return spec

    def _restart(self, name, spec, argv=None):
        pid = self.cluster.restart(name, spec, argv)
        self.down.pop(name, None)
        return pid

    def _sleep_until(self, t):
        while time.monotonic() < t:
            time.sleep(min(0.05, max(0.0, t - time.monotonic())))

    def _wait(self, cond, timeout, what):
        """Polls cond() (returning a true value when done) until timeout; returns its value or
        raises NemesisError naming `what`."""
        deadline = time.monotonic() + timeout
        while True:
            v = cond()
            if v:
                return v
            if time.monotonic() > deadline:
                raise NemesisError(f"{what}: not within {timeout:.0f} s")
            time.sleep(0.1)

    def _members(self, role):
        return {n: m for n, m in self.cluster.members().items() if m["role"] == role}

    def _leader(self):
        ls = [m for m in self._members("logstore").values() if m.get("leader")]
        return ls[0] if len(ls) == 1 else None


class NoNemesis(Nemesis):
    name = "none"


class PauseReplica(Nemesis):
    name = "pause-replica"

    def act(self, act_until):
        lo, hi = self.profile["pause"]
        while time.monotonic() < act_until:
            servers = self._members("shard")
            serving = [m for m in servers.values() if m.get("serving")]
            if len(serving) < self.cluster.servers:  # the last pause's victim is catching up
                time.sleep(0.1)
                continue
            m = self.rnd.choice(sorted(serving, key=lambda m: m["name"]))
            long_pause = self.rnd.random() < self.profile["long_pause"]
            d = LEASE_TTL + 1.0 if long_pause else self.rnd.uniform(lo, hi)
            self._pause(m, d)
            time.sleep(self.rnd.uniform(*self.profile["pause_gap"]))


class KillReplica(Nemesis):
    name = "kill-replica"

    def act(self, act_until):
        while time.monotonic() < act_until:
            servers = self._members("shard")
            if len(servers) < self.cluster.servers or \
                    not all(m.get("serving") for m in servers.values()):
                time.sleep(0.1)
                continue
            m = self.rnd.choice(sorted(servers.values(), key=lambda m: m["name"]))
            name = m["name"]
            spec = self._kill(m)
            self.actions += 1
            t = time.monotonic()
            time.sleep(self.rnd.uniform(1.0, 2.0))
            pid = self._restart(name, spec)
            self._wait(lambda: (self._members("shard").get(name, {}).get("pid") == pid and
                                self._members("shard")[name].get("serving")),
                       HEAL_TIMEOUT, f"{name} restarted (pid {pid}) serving again")
            self.say(f"killed {name}, restarted, serving again after {time.monotonic() - t:.1f}s",
                     t)
            time.sleep(self.rnd.uniform(0.5, 1.0))


class KillLogStore(Nemesis):
    name = "kill-logstore"

    def act(self, act_until):
        if self.cluster.logstores != 2:
            raise NemesisError("kill-logstore needs --logstores 2")
        while time.monotonic() < act_until:
            leader = self._wait(self._leader, HEAL_TIMEOUT, "a LogStore leader")
            name = leader["name"]
            spec = self._kill(leader)
            self.actions += 1
            t = time.monotonic()
            new = self._wait(lambda: (lambda m: m if m and m["name"] != name else None)(
                self._leader()), HEAL_TIMEOUT, f"a new LogStore leader after killing {name}")
            took = time.monotonic() - t
            time.sleep(self.rnd.uniform(1.0, 2.0))
            pid = self._restart(name, spec)
            self._wait(lambda: (lambda ls: ls.get(name, {}).get("pid") == pid and
                                not ls[name].get("leader") and
                                ls.get(new["name"], {}).get("sync") == "in_sync")(
                self._members("logstore")),
                HEAL_TIMEOUT, f"{name} (pid {pid}) rejoined as the standby, in sync")
            self.say(f"killed leader {name}, {new['name']} led after {took:.1f}s, {name} back as "
                     f"standby in sync after {time.monotonic() - t:.1f}s", t)
            time.sleep(self.rnd.uniform(0.5, 1.0))


class PauseLogStore(Nemesis):
    name = "pause-logstore"

    def act(self, act_until):
        while time.monotonic() < act_until:
            leader = self._wait(self._leader, HEAL_TIMEOUT, "a LogStore leader")
            name, pid = leader["name"], leader["pid"]
            spec = proc_spec(pid)
            d = self.rnd.uniform(0.5, 3.0)
            t_pause = time.monotonic()
            self._stop(pid, name)
            self.actions += 1
            time.sleep(d)
            self._cont(pid, name)
            t = time.monotonic()
            # A leader paused past its term stops and exits (docs/logstore-ha.md): give it the
            # time to notice, then restart it if it is gone.
            what = "kept the lead"
            while time.monotonic() < t + LEASE_TTL + 1.0:
                if not self.cluster.alive(pid):
                    break
                lead = self._leader()
                if lead and lead["name"] == name and lead["pid"] == pid and \
                        (self.cluster.logstores == 1 or lead.get("sync") == "in_sync"):
                    break
                time.sleep(0.1)
            if not self.cluster.alive(pid) or \
                    self._wait(self._leader, HEAL_TIMEOUT, "a LogStore leader")["name"] != name:
                if spec is None:
                    raise NemesisError(f"no /proc of {name} read before the pause")
                self.down[name] = spec  # heal() restarts it if what follows fails
                self._wait(lambda: not self.cluster.alive(pid), 10.0,
                           f"the paused old leader {name} exits")
                self._restart(name, spec)
                what = "lost the lead, exited, restarted"
            self.cluster.wait_healthy(HEAL_TIMEOUT, f"after pausing {name}")
            self.say(f"paused leader {name} {d:.2f}s: {what}; whole again "
                     f"{time.monotonic() - t:.1f}s after SIGCONT", t_pause)
            time.sleep(self.rnd.uniform(0.5, 1.0))


class KillAggregator(Nemesis):
    name = "kill-aggregator"

    def act(self, act_until):
        while time.monotonic() < act_until:
            aggs = self._members("aggregator")
            if len(aggs) < len(self.cluster.aggregators):
                time.sleep(0.1)
                continue
            m = self.rnd.choice(sorted(aggs.values(), key=lambda m: m["name"]))
            name, endpoint = m["name"], m["endpoint"]
            spec = self._kill(m)
            self.actions += 1
            t = time.monotonic()
            time.sleep(self.rnd.uniform(1.0, 2.0))
            # Started with --port 0: restarted on its old port, so that clients find it again.
            argv = list(spec["argv"])
            port = endpoint.rsplit(":", 1)[1]
            if "--port" in argv:
                argv[argv.index("--port") + 1] = port
            else:
                argv += ["--port", port]
            pid = self._restart(name, spec, argv)
            self.down.pop(name, None)
            self._wait(lambda: self._members("aggregator").get(name, {}).get("pid") == pid,
                       HEAL_TIMEOUT, f"{name} (pid {pid}) registered again")
            self.say(f"killed {name}, back on {endpoint} after {time.monotonic() - t:.1f}s", t)
            time.sleep(self.rnd.uniform(0.5, 1.0))


class PauseAggregator(Nemesis):
    name = "pause-aggregator"

    def act(self, act_until):
        while time.monotonic() < act_until:
            aggs = self._members("aggregator")
            if not aggs:
                time.sleep(0.1)
                continue
            m = self.rnd.choice(sorted(aggs.values(), key=lambda m: m["name"]))
            self._pause(m, self.rnd.uniform(0.5, 3.0))
            time.sleep(self.rnd.uniform(0.5, 1.0))


NEMESIS_CLASSES = {c.name: c for c in (NoNemesis, PauseReplica, KillReplica, KillLogStore,
                                        PauseLogStore, KillAggregator, PauseAggregator)}

# Writes that leave the same state however often they apply: with --retries N, sent again after
# an unknown outcome, up to N times (docs/consistency.md, "What an error means for a write"). Off
# by default: every attempt of unknown outcome stays open in the history, and a few hundred open
# writes make the checker's search explode (a kill-logstore history with retries: 223 open writes,
# not decided in 300 s; without: about 150, decided in a second).
IDEMPOTENT = ("assoc_add", "assoc_delete", "obj_delete")


# ------------------------------------------------------------------------------------------------
# Workload and history

PROFILES = {
    # The default: a few keys of each kind, half reads; edge writes to some of the record's own
    # dsts (replacing base edges) and to new ones, each with a fresh timestamp.
    "default": {"workers": 8, "node_keys": 6, "edge_keys": 4, "reads": 0.5, "own_dsts": 3,
                "new_dsts": 3, "stable_edges": False,
                "pause": (0.2, 1.5), "long_pause": 0.25, "pause_gap": (0.3, 1.0)},
    # The negative control (tests/jepsen_test.py): few keys and mostly reads, so that reads of a
    # key right after a write, through both replicas, are common. Stable edges: a violation it
    # finds is a stale read, not one of the known anomalies of replaced edges.
    "stale-reads": {"workers": 10, "node_keys": 2, "edge_keys": 1, "reads": 0.75, "own_dsts": 0,
                    "new_dsts": 3, "stable_edges": True,
                    "pause": (0.2, 1.5), "long_pause": 0.25, "pause_gap": (0.3, 1.0)},
}


class Recorder:
    """The history: init lines, then invoke / completion lines as they happen."""

    def __init__(self):
        self.lines = []
        self.lock = threading.Lock()
        self.counts = collections.Counter()
        self.errors = collections.Counter()   # (f, outcome, code) -> n

    def add(self, rec):
        with self.lock:
            self.lines.append(rec)
            if rec["type"] in ("ok", "fail", "info"):
                self.counts[rec["type"]] += 1
                if rec["type"] != "ok" or "error" in rec["result"]:
                    self.errors[(rec["f"], rec["type"], rec["result"].get("code", "?"))] += 1

    def write(self, path):
        with open(path, "w") as f:
            for rec in self.lines:
                f.write(json.dumps(rec, separators=(",", ":")) + "\n")


class Keys:
    """The keys of one history: node ids and edge records with their dst sets."""

    def __init__(self, cluster, index, profile, rnd):
        self.nodes = [NODE_BASE + 1000 * index + k for k in range(profile["node_keys"])]
        n = profile["edge_keys"]
        start = index * n
        if start + n > len(cluster.records):
            raise RuntimeError(f"history {index}: no unused edge records left")
        self.records = cluster.records[start:start + n]
        self.dsts = {}
        self.stable_ts = None
        for key in self.records:
            own = sorted(d for d, _ in cluster.base_edges[key])
            own = [] if profile["stable_edges"] else \
                sorted(rnd.sample(own, min(profile["own_dsts"], len(own))))
            self.dsts[key] = own + [NEW_DST_BASE + 1000 * index + j
                                    for j in range(profile["new_dsts"])]
        if profile["stable_edges"]:
            # No write replaces a base edge, and every write of one dst has one timestamp: no
            # assoc_add changes a live edge's timestamp (README.md, "Known anomalies").
            self.stable_ts = {key: {d: TS_BASE + 1_000_000 * index + 1000 * n + j
                                    for j, d in enumerate(self.dsts[key])}
                              for n, key in enumerate(self.records)}

    def names(self):
        return [f"node:{i}" for i in self.nodes] + [f"edge:{s}:{t}" for s, t in self.records]


def edges_value(edges):
    return [[e["dst"], e["timestamp"], canon(e["properties"])] for e in edges]


RANGE_LIMIT = 10_000  # larger than any record can get (< 30 base edges plus a few new dsts)


class Worker:
    """One client thread: its own connection (to aggregator `home`, or the other while that one
    is down), random operations on the history's keys until `stop` is set."""

    def __init__(self, wid, nworkers, env, cluster, keys, rec, profile, seed, ts_counter, stop):
        self.wid, self.nworkers = wid, nworkers
        self.process = wid
        self.zipg = env.client
        self.cluster, self.keys, self.rec, self.profile = cluster, keys, rec, profile
        self.rnd = random.Random(seed)
        self.ts = ts_counter
        self.stop = stop
        self.g = None
        self.seq = 0
        self.reconnects = 0
        self.crash = None
        self.retry = None  # an idempotent write to send again
        self.retries = 0   # of the current write

    def connect(self):
        aggs = self.cluster.aggregators
        order = aggs[self.wid % len(aggs):] + aggs[:self.wid % len(aggs)]
        while not self.stop.is_set():
            for a in order:
                try:
                    self.g = self.zipg.connect(a, timeout=CALL_TIMEOUT, connect_timeout=1.0)
                    return True
                except self.zipg.Error:
                    continue
            time.sleep(0.05)
        return False

    def drop(self):
        if self.g is not None:
            try:
                self.g.close()
            except Exception:  # noqa: BLE001
                pass
        self.g = None
        self.reconnects += 1

    def value(self):
        self.seq += 1
        return canon({"v": f"w{self.wid}-{self.seq}"}), {"v": f"w{self.wid}-{self.seq}"}

    def next_op(self):
        """(f, key, args for the history, the call: a function of the connection)."""
        r = self.rnd
        read = r.random() < self.profile["reads"]
        nk = len(self.keys.nodes)
        k = r.randrange(nk + len(self.keys.records))
        if k < nk:
            i = self.keys.nodes[k]
            key = f"node:{i}"
            if read:
                return "obj_get", key, {}, lambda g: g.obj_get(id=i)
            x = r.random()
            v, props = self.value()
            if x < 0.35:
                return "obj_add", key, {"value": v}, lambda g: g.obj_add(id=i, properties=props)
            if x < 0.8:
                return "obj_update", key, {"value": v}, \
                    lambda g: g.obj_update(id=i, properties=props)
            return "obj_delete", key, {}, lambda g: g.obj_delete(id=i)
        s, t = self.keys.records[k - nk]
        key = f"edge:{s}:{t}"
        if read:
            if r.random() < 0.6:
                return "assoc_range", key, {}, \
                    lambda g: g.assoc_range(id=s, type=t, pos=0, limit=RANGE_LIMIT)
            return "assoc_count", key, {}, lambda g: g.assoc_count(id=s, type=t)
        dst = r.choice(self.keys.dsts[(s, t)])
        if r.random() < 0.65:
            ts = self.keys.stable_ts[(s, t)][dst] if self.keys.stable_ts else next(self.ts)
            v, props = self.value()
            return "assoc_add", key, {"dst": dst, "ts": ts, "value": v}, \
                lambda g: g.assoc_add(src=s, type=t, dst=dst, timestamp=ts, properties=props)
        return "assoc_delete", key, {"dst": dst}, lambda g: g.assoc_delete(src=s, type=t, dst=dst)

    @staticmethod
    def result(f, got):
        if f == "obj_get":
            return {"value": None if got is None else canon(got["properties"])}
        if f in ("obj_add", "obj_update"):
            return {"code": "OK"}
        if f in ("obj_delete", "assoc_delete"):
            return {"deleted": got["deleted"]}
        if f == "assoc_add":
            return {"replaced": got["replaced"]}
        if f == "assoc_range":
            return {"edges": edges_value(got)}
        return {"count": got}  # assoc_count

    def run(self):
        try:
            while not self.stop.is_set():
                if self.g is None and not self.connect():
                    break
                self.one()
        except Exception as e:  # noqa: BLE001
            self.crash = f"worker {self.wid}: {e!r}\n{traceback.format_exc()}"
        finally:
            if self.g is not None:
                self.g.close()

    def one(self):
        # An idempotent write of unknown outcome is sent again, as docs/consistency.md tells
        # clients to resolve it (each attempt is its own operation in the history).
        if self.retry is not None:
            f, key, args, call = self.retry
            self.retry = None
        else:
            f, key, args, call = self.next_op()
        read = f in ("obj_get", "assoc_range", "assoc_count")
        p = self.process
        t0 = time.monotonic_ns()
        self.rec.add({"type": "invoke", "process": p, "f": f, "key": key, "args": args,
                      "time": t0})
        outcome, result, reconnect = "ok", None, False
        try:
            got = call(self.g)
            t1 = time.monotonic_ns()
            result = self.result(f, got)
        except self.zipg.Error as e:
            t1 = time.monotonic_ns()
            code = e.code
            if (f, code) in (("obj_add", "ALREADY_EXISTS"), ("obj_update", "NOT_FOUND")):
                result = {"code": code}
            else:
                result = {"code": code, "error": str(e)[:200]}
                if read or code == "INVALID_ARGUMENT":
                    outcome = "fail"
                else:
                    outcome = "info"
                reconnect = code in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "INTERNAL")
        except Exception as e:  # noqa: BLE001  a transport error the client did not map
            t1 = time.monotonic_ns()
            result = {"code": "EXCEPTION", "error": repr(e)[:200]}
            outcome = "fail" if read else "info"
            reconnect = True
        self.rec.add({"type": outcome, "process": p, "f": f, "key": key, "result": result,
                      "time": t1})
        if outcome == "info":
            # Its operation stays open for ever (outcome unknown): go on as a new process.
            self.process += self.nworkers
            if f in IDEMPOTENT and self.retries < self.profile.get("retries", 0):
                self.retry = (f, key, args, call)
                self.retries += 1
        else:
            self.retries = 0
        if reconnect:
            self.drop()
        if outcome != "ok":
            # The cluster is failing over or a member is down: do not flood the history with
            # operations of unknown outcome (each makes the check of its key more expensive).
            time.sleep(self.rnd.uniform(*ERROR_BACKOFF))


def read_init(env, cluster, keys, rec):
    """The keys' states before the history (init lines), read through an aggregator: every node
    key absent, every edge record as the store has it (its base edges)."""
    g = env.client.connect(cluster.aggregators[0], timeout=30.0)
    try:
        for i in keys.nodes:
            got = g.obj_get(id=i)
            if got is not None:
                raise RuntimeError(f"node key {i} exists before its history: {got}")
            rec.add({"type": "init", "key": f"node:{i}", "state": {"value": None}})
        for s, t in keys.records:
            edges = g.assoc_range(id=s, type=t, pos=0, limit=RANGE_LIMIT)
            base = cluster.base_edges[(s, t)]
            if sorted((e["dst"], e["timestamp"]) for e in edges) != sorted(base):
                raise RuntimeError(f"edge record {s}:{t} reads {edges}, the graph has {base}")
            rec.add({"type": "init", "key": f"edge:{s}:{t}",
                     "state": {"edges": edges_value(edges)}})
    finally:
        g.close()


class Result:
    def __init__(self, index, nemesis):
        self.index, self.nemesis = index, nemesis
        self.ops = 0
        self.counts = collections.Counter()
        self.actions = 0
        self.log = []
        self.errors = []        # run checks that failed (not the verdict)
        self.verdict = None     # the checker's exit code: 0, 1, 2, 3
        self.check = {}         # its --json output
        self.history = self.html = None
        self.seconds = 0.0
        self.check_seconds = 0.0

    @property
    def linearizable(self):
        return self.verdict == 0

    def summary(self):
        verdict = {0: "linearizable", 1: "NOT linearizable", 2: "checker error",
                   3: "unknown (checker timeout)"}.get(self.verdict, f"exit {self.verdict}")
        bad = f" bad keys {self.check.get('bad_keys')}" if self.check.get("bad_keys") else ""
        acts = "; ".join(self.log)
        if len(acts) > 400:
            acts = acts[:400] + " ..."
        return (f"history {self.index} [{self.nemesis}] {self.seconds:.1f}s: {self.ops} ops (ok "
                f"{self.counts['ok']}, fail {self.counts['fail']}, info {self.counts['info']}); "
                f"nemesis: {self.actions} actions{': ' + acts if acts else ''}; verdict {verdict}"
                f"{bad} (checked in {self.check_seconds:.1f}s)"
                + (f"; RUN CHECKS FAILED: {len(self.errors)}" if self.errors else ""))


def run_history(env, cluster, nemesis, seconds, index, out_dir, profile="default", seed=0,
                workers=None, stable_edges=None, retries=None):
    """One history of `seconds` (longer if the nemesis needs the time to undo its faults) with
    `nemesis` on `cluster`; writes history-<index>-<nemesis>.jsonl and .html to out_dir and checks
    it. Returns a Result; run checks that failed are in result.errors (and the report)."""
    prof = dict(PROFILES[profile])
    if workers:
        prof["workers"] = workers
    if stable_edges is not None:
        prof["stable_edges"] = stable_edges
    if retries is not None:
        prof["retries"] = retries
    res = Result(index, nemesis)
    rnd = random.Random(seed * 1_000_003 + index)
    keys = Keys(cluster, index, prof, rnd)
    rec = Recorder()
    read_init(env, cluster, keys, rec)
    stop = threading.Event()
    ts_counter = itertools.count(TS_BASE + 1_000_000 * index)
    ws = [Worker(w, prof["workers"], env, cluster, keys, rec, prof, rnd.randrange(1 << 30),
                 ts_counter, stop) for w in range(prof["workers"])]
    threads = [threading.Thread(target=w.run, daemon=True) for w in ws]
    nem = NEMESIS_CLASSES[nemesis](cluster, random.Random(rnd.randrange(1 << 30)), prof)
    t0 = time.monotonic()
    for th in threads:
        th.start()
    # The nemesis starts a second in and starts no new fault in the last two seconds; it then
    # undoes its faults, and the history ends once both the time is up and it is done.
    act_until = t0 + max(1.5, seconds - 2.0)
    nem_thread = threading.Thread(target=lambda: (time.sleep(1.0), nem.run(act_until)),
                                  daemon=True)
    nem_thread.start()
    nem_thread.join(timeout=seconds + 120)
    if nem_thread.is_alive():
        res.errors.append(f"the {nemesis} nemesis did not finish within {seconds + 120} s")
    while time.monotonic() < t0 + seconds:
        time.sleep(0.05)
    stop.set()
    for th in threads:
        th.join(timeout=4 * CALL_TIMEOUT + 10)
        if th.is_alive():
            res.errors.append("a worker did not stop")
    res.seconds = time.monotonic() - t0
    res.errors += nem.errors + [w.crash for w in ws if w.crash]
    res.actions, res.log = nem.actions, nem.log
    if nemesis != "none" and nem.actions == 0:
        res.errors.append(f"the {nemesis} nemesis did nothing")

    res.ops = sum(1 for r in rec.lines if r["type"] == "invoke")
    res.counts = rec.counts
    if rec.counts["ok"] < MIN_OK:
        res.errors.append(f"only {rec.counts['ok']} ok operations (at least {MIN_OK} needed)")
    base = os.path.join(out_dir, f"history-{index:03d}-{nemesis}")
    res.history, res.html = base + ".jsonl", base + ".html"
    rec.write(res.history)
    t = time.monotonic()
    r = subprocess.run([env.check_bin, "--json", "--timeout", "300s", "--html", res.html,
                        res.history], capture_output=True, timeout=900)
    res.check_seconds = time.monotonic() - t
    res.verdict = r.returncode
    try:
        res.check = json.loads(r.stdout)
    except ValueError:
        res.check = {}
    if r.returncode not in (0, 1):
        res.errors.append(f"zipg-check exit {r.returncode}: {r.stdout[-500:]!r} "
                          f"{r.stderr[-1500:]!r}")
    elif res.check.get("ok") != rec.counts["ok"]:
        res.errors.append(f"zipg-check counted {res.check} but the history has {rec.counts}")
    errs = ", ".join(f"{f} {o} {c} x{n}" for (f, o, c), n in sorted(rec.errors.items()))
    res.error_summary = errs
    for e in res.errors:
        env.check(False, f"history {index} [{nemesis}]: {e}")
    return res


# ------------------------------------------------------------------------------------------------
# The command line


def report_totals(report, results):
    """Checks that every history is linearizable and prints the totals per nemesis."""
    for r in results:
        report.check(r.linearizable, f"history {r.index} [{r.nemesis}] is not linearizable "
                                     f"(checker exit {r.verdict}): {r.history}")
    totals = collections.OrderedDict()
    for r in results:
        t = totals.setdefault(r.nemesis, collections.Counter())
        t["histories"] += 1
        t["ops"] += r.ops
        t["ok"] += r.counts["ok"]
        t["fail"] += r.counts["fail"]
        t["info"] += r.counts["info"]
        t["actions"] += r.actions
        t["anomalies"] += 0 if r.linearizable else 1
    print("totals per nemesis:")
    for n, t in totals.items():
        print(f"  {n:18s} histories {t['histories']:3d}  ops {t['ops']:7d}  ok {t['ok']:7d}  "
              f"fail {t['fail']:5d}  info {t['info']:5d}  actions {t['actions']:3d}  "
              f"anomalies {t['anomalies']}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zipg", required=True, help="the zipg binary")
    ap.add_argument("--nemesis", help="one nemesis: " + ", ".join(NEMESES))
    ap.add_argument("--nemeses", help="several, comma-separated, one history each, in order, on "
                                      "one cluster")
    ap.add_argument("--seconds", type=float, default=15.0, help="length of each history")
    ap.add_argument("--minutes", type=float, default=0.0,
                    help="repeat the list of nemeses until this many minutes have passed")
    ap.add_argument("--read-consistency", default="linearizable",
                    choices=["linearizable", "replica"])
    ap.add_argument("--logstores", type=int, default=2, choices=[1, 2])
    ap.add_argument("--keep", help="write the histories, their checks and HTML here (kept); "
                                   "else into a temporary directory, kept only on failure")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--profile", default="default", choices=sorted(PROFILES))
    ap.add_argument("--stable-edges", action="store_true", default=None,
                    help="edge writes only to new dsts, each always with one timestamp: no write "
                         "replaces a base edge or changes a live edge's timestamp (README.md, "
                         "\"Known anomalies\"); the stale-reads profile does this anyway")
    ap.add_argument("--retries", type=int, default=None,
                    help="send an idempotent write of unknown outcome again, up to N times "
                         "(default 0: every unknown outcome stays open in the history)")
    ap.add_argument("--check-bin", help="a zipg-check already built (default: go build it)")
    a = ap.parse_args(argv)
    if bool(a.nemesis) == bool(a.nemeses):
        ap.error("give --nemesis or --nemeses")
    names = [a.nemesis] if a.nemesis else [n.strip() for n in a.nemeses.split(",") if n.strip()]
    for n in names:
        if n not in NEMESIS_CLASSES:
            ap.error(f"unknown nemesis {n!r} (one of {', '.join(NEMESES)})")
        if n == "kill-logstore" and a.logstores != 2:
            ap.error("kill-logstore needs --logstores 2")
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    report = Report(max_printed=60)
    out_dir = a.keep or tempfile.mkdtemp(prefix="zipg-jepsen-out-")
    os.makedirs(out_dir, exist_ok=True)
    results = []
    env = cluster = None
    try:
        env = Env(a.zipg, report, a.check_bin)
        report.section(f"seed {seed}; nemeses {','.join(names)}; {a.seconds:g} s histories"
                       + (f", repeated for {a.minutes:g} min" if a.minutes else "")
                       + f"; --read-consistency {a.read_consistency} --logstores {a.logstores}"
                       + f"; results in {out_dir}")
        cluster = Cluster(env, "cluster", logstores=a.logstores,
                          read_consistency=a.read_consistency)
        if cluster.create(random.Random(seed)) and cluster.start():
            t_end = time.monotonic() + 60 * a.minutes
            index = 0
            while True:
                for n in names:
                    if cluster.wait_healthy(60, f"before history {index}") is None:
                        raise RuntimeError("the cluster is not whole")
                    res = run_history(env, cluster, n, a.seconds, index, out_dir, a.profile,
                                      seed, a.workers, a.stable_edges, a.retries)
                    results.append(res)
                    print(res.summary(), flush=True)
                    if res.error_summary:
                        report.note(f"errors: {res.error_summary}")
                    if res.verdict == 1:
                        report.note(f"NOT linearizable: keys {res.check.get('bad_keys')}; "
                                    f"history {res.history}, visualization {res.html}")
                    elif a.minutes and not a.keep and res.linearizable and not res.errors:
                        os.remove(res.history)  # a long run keeps only what failed
                        os.remove(res.html)
                    index += 1
                if not a.minutes or time.monotonic() >= t_end:
                    break
        cluster.stop()
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        report.check(False, f"run aborted: {e!r}")
    finally:
        if cluster is not None:
            cluster.procs.cleanup()
        if env is not None:
            env.cleanup()
    report_totals(report, results)
    failed = report.failures > 0 or not results
    if failed and (a.keep or os.listdir(out_dir)):
        print(f"results kept in {out_dir}")
    elif not a.keep:
        shutil.rmtree(out_dir, ignore_errors=True)
    return report.finish("jepsen")


if __name__ == "__main__":
    sys.exit(main())
