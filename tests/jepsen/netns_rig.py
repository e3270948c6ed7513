"""The multi-host Jepsen rig: a zipg cluster deployed on Linux network namespaces, and nemeses
that partition the network between its hosts (README.md, "Multi-host rig and partitions").

Hosts h1..h4 are network namespaces <tag>-h1..h4 on a bridge <tag>br, with addresses
<subnet>.1-4; a client namespace <tag>-c has <subnet>.100, and the root namespace <subnet>.254
(as tests/deploy_test.py builds them). The cluster is deployed as docs/deploy.md describes:
`zipg deploy certs`, `zipg deploy plan --replicas 2 --logstores 2 --etcd-members 3` (4 shards on
two hosts each, LogStores on h1 and h2 electing their leader, etcd members on h1..h3), aggregators
only on h3 and h4, TLS everywhere, `zipg deploy start --exec "ip netns exec <tag>-{host}"`.

The workload and the history recording are jepsen.py's (run_history): NetnsCluster is a
jepsen.Cluster whose members are the deployed processes, whose restarts go through `zipg node
start` in the host's namespace, and whose clients use the cluster's client certificate. The
workers run in the root namespace, which reaches every host over the bridge whatever the
partition (a partition only cuts host <-> host traffic); `zipg status` calls run from the client
namespace. jepsen.py's process nemeses (pause-replica, kill-replica, kill-logstore,
pause-logstore, kill-aggregator) work on this cluster unchanged; this module adds:

  partition-one     one random host cut off from the three others (both directions)
  partition-halves  {m, h4} | the two other etcd hosts, m a random etcd host: etcd 2/1
  partition-bridge  a random middle host M; the other three split 1 | 2; the two sides cannot
                    reach each other, both reach M
  etcd-member-loss  kill -9 a random etcd member, `zipg node start --roles etcd` 3-5 s later

A cut between hosts a and b is a route `<type> <address of b>/32` in a's namespace and
`<type> <address of a>/32` in b's (type: blackhole by default, or prohibit / unreachable). Each
fault lasts 3-5 s; then every route is removed, every process that exited meanwhile is started
again (`zipg node start` on its host: a LogStore leader that lost its term exits by design; any
other exit is reported as unexpected) and the nemesis waits until the etcd members agree on a
leader and the cluster is whole, and stays whole for SETTLE seconds, before the next fault.
Routes are also removed when the nemesis ends in any way, by Rig.cleanup(), and at interpreter
exit; the namespaces (and every process in them) are removed at exit.
"""
import atexit
import json
import os
import random
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import jepsen  # noqa: E402
from jepsen import HEAL_TIMEOUT, LEASE_TTL, Nemesis, NemesisError  # noqa: E402

HOSTS = ["h1", "h2", "h3", "h4"]
AGGREGATOR_HOSTS = ["h3", "h4"]
SHARDS = 4
BASE_PORT = 21000          # ports are per namespace: no clash with anything else on the machine
ROUTE_TYPES = ("blackhole", "prohibit", "unreachable")
HOLD = (3.0, 5.0)          # how long a fault lasts, seconds
GAP = (0.5, 1.5)           # pause between the recovery from one fault and the next fault
SETTLE = 2.0               # the cluster must stay whole this long to count as recovered (a healed
                           # etcd member can depose the etcd leader a moment later)


class RigError(RuntimeError):
    """The rig cannot be built here (no namespaces, no bridge, no reachability): the test fails
    with this message."""


def run(argv, timeout=60, **kw):
    return subprocess.run(argv, capture_output=True, timeout=timeout, **kw)


def planned_files(plan_stderr):
    """{host: [paths]}: the store files `zipg deploy plan` lists for each host on its stderr
    ("# HOST (ADDRESS): FILE FILE ...")."""
    needs = {}
    for line in plan_stderr.decode().splitlines():
        if line.startswith("# "):
            needs[line[2:].split(" ", 1)[0]] = line.split(": ", 1)[1].split()
    return needs


def place_host_stores(spec, needs, store, work, place):
    """Gives every host of `spec` its own store directory WORK/hosts/NAME/store holding the files
    `needs` lists for it (paths under `store`), each put there by place(src, dst) (shutil.copy2,
    os.link), and sets the host's "store" to it."""
    for h in spec["hosts"]:
        own = os.path.join(work, "hosts", h["name"], "store")
        for path in needs.get(h["name"], []):
            dst = os.path.join(own, os.path.relpath(path, store))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            place(path, dst)
        h["store"] = own


# ------------------------------------------------------------------------------------------------
# The machines and the partitions


class Network:
    """Namespaces <tag>-<host> and <tag>-c on the bridge <tag>br; cuts between hosts as routes.
    setup() raises RigError saying why the namespaces cannot be used. cleanup() removes the
    routes, kills every process left inside the namespaces (only ours live there) and removes
    the namespaces and links; it runs at exit too."""

    def __init__(self, hosts=HOSTS, route_type="blackhole"):
        if route_type not in ROUTE_TYPES:
            raise ValueError(f"route type {route_type!r}: one of {ROUTE_TYPES}")
        self.hosts = list(hosts)
        self.route_type = route_type
        self.tag = f"zj{os.getpid() % 100000}"
        self.subnet = None
        self.addresses = {}
        self.client_ns = f"{self.tag}-c"
        self.made, self.links = [], []
        self.devices = {}            # namespace -> its end of its veth pair
        self.delayers = {}           # namespace -> the net_delay process holding its egress
        self.cuts = set()            # frozenset({a, b}) of the host pairs cut now
        self.lock = threading.Lock()
        self.log = []                # every route added and removed: (monotonic, text)
        self.cleaned = False
        atexit.register(self.cleanup)

    def ns(self, host):
        return f"{self.tag}-{host}"

    @property
    def exec_prefix(self):
        return f"ip netns exec {self.tag}-{{host}}"

    def exec_argv(self, host, argv):
        return ["ip", "netns", "exec", self.ns(host), *argv]

    def _ip(self, *args):
        r = run(["ip", *args], timeout=30)
        if r.returncode != 0:
            raise OSError(f"ip {' '.join(args)}: {r.stderr.decode().strip()}")
        return r.stdout.decode()

    def _pick_subnet(self):
        used = run(["ip", "-4", "-o", "addr", "show"]).stdout.decode()
        for k in range(250):
            cand = f"10.214.{(os.getpid() + k) % 250}"
            if f" {cand}." not in used:
                return cand
        raise RigError("no free 10.214.x.0/24 subnet in the root namespace")

    def setup(self):
        if os.geteuid() != 0:
            raise RigError("the multi-host rig needs root (network namespaces, a bridge, routes); "
                           f"running as uid {os.geteuid()}")
        if shutil.which("ip") is None:
            raise RigError("the `ip` command (iproute2) is not on PATH")
        self.subnet = self._pick_subnet()
        self.addresses = {h: f"{self.subnet}.{k + 1}" for k, h in enumerate(self.hosts)}
        bridge = f"{self.tag}br"
        try:
            self._ip("link", "add", bridge, "type", "bridge")
            self.links.append(bridge)
            self._ip("addr", "add", f"{self.subnet}.254/24", "dev", bridge)
            self._ip("link", "set", bridge, "up")
            for k, name in [(i + 1, h) for i, h in enumerate(self.hosts)] + [(100, "c")]:
                ns, veth, peer = f"{self.tag}-{name}", f"{self.tag}v{k}", f"{self.tag}p{k}"
                self._ip("netns", "add", ns)
                self.made.append(ns)
                self._ip("link", "add", veth, "type", "veth", "peer", "name", peer)
                self.links.append(veth)
                self._ip("link", "set", peer, "netns", ns)
                self._ip("link", "set", veth, "master", bridge)
                self._ip("link", "set", veth, "up")
                self.devices[ns] = peer
                self._ip("-n", ns, "addr", "add", f"{self.subnet}.{k}/24", "dev", peer)
                self._ip("-n", ns, "link", "set", peer, "up")
                self._ip("-n", ns, "link", "set", "lo", "up")
        except OSError as e:
            raise RigError(f"cannot make the network namespaces and bridge: {e}") from None
        # From the root namespace (the workers) and the client namespace (status calls) to a
        # host, and from host to host (the cluster's own traffic).
        a, b = (self.hosts[1], self.hosts[2]) if len(self.hosts) > 2 else self.hosts[::-1][:2]
        for src, dst in ((None, self.hosts[0]), (self.client_ns, self.hosts[-1]),
                         (self.ns(a), b)):
            why = self._probe(src, dst)
            if why:
                raise RigError(f"{src or 'the root namespace'} cannot reach {dst} "
                               f"({self.addresses[dst]}) over the bridge (a firewall?): {why}")

    def _probe(self, src_ns, dst_host, timeout=3.0):
        """"" if a TCP connection from src_ns (None: the root namespace) reaches a listener in
        dst_host's namespace, else what happened."""
        address = self.addresses[dst_host]
        server = subprocess.Popen(
            self.exec_argv(dst_host, [
                sys.executable, "-c",
                "import socket\n"
                f"s=socket.create_server(('{address}', 0)); print(s.getsockname()[1], flush=True)\n"
                f"s.settimeout({timeout + 2})\n"
                "try:\n c,_=s.accept(); c.sendall(b'ok')\n"
                "except OSError: pass\n"]),
            stdout=subprocess.PIPE, text=True)
        try:
            port = server.stdout.readline().strip()
            prefix = ["ip", "netns", "exec", src_ns] if src_ns else []
            probe = run([*prefix, sys.executable, "-c",
                         "import socket\n"
                         f"c=socket.create_connection(('{address}', {port or 0}), "
                         f"timeout={timeout})\n"
                         "assert c.recv(2)==b'ok'\n"], timeout=timeout + 10)
            if probe.returncode != 0:
                return (probe.stderr.decode().strip().splitlines() or ["?"])[-1]
            return ""
        finally:
            server.kill()
            server.wait()

    # ---- partitions -----------------------------------------------------------------------------

    def _route(self, action, host, other):
        return run(["ip", "-n", self.ns(host), "route", action, self.route_type,
                    f"{self.addresses[other]}/32"], timeout=30)

    def cut(self, pairs):
        """Cuts every (a, b) in pairs in both directions: a route to b in a's namespace and one
        to a in b's. Raises OSError if a route cannot be added (what was added stays recorded,
        so heal() removes it)."""
        with self.lock:
            for a, b in pairs:
                pair = frozenset((a, b))
                if pair in self.cuts:
                    continue
                self.cuts.add(pair)
                for x, y in ((a, b), (b, a)):
                    r = self._route("add", x, y)
                    if r.returncode != 0:
                        raise OSError(f"ip -n {self.ns(x)} route add {self.route_type} "
                                      f"{self.addresses[y]}/32: {r.stderr.decode().strip()}")
                self.log.append((time.monotonic(), f"cut {a}<->{b}"))
        bad = [(x, y) for a, b in pairs for x, y in ((a, b), (b, a))
               if self.addresses[y] not in self.routes_in(x)]
        if bad:
            raise OSError(f"routes added but not listed by `ip route show`: {bad}")

    def routes_in(self, host):
        """The destinations of the partition routes (of our type) in host's namespace."""
        r = run(["ip", "-n", self.ns(host), "route", "show", "type", self.route_type], timeout=30)
        return {line.split()[1] if line.startswith(self.route_type) else line.split()[0]
                for line in r.stdout.decode().splitlines() if line.strip()}

    def partition_routes(self):
        """{namespace: [route lines]} of every route of the partition types in our namespaces."""
        out = {}
        for ns in self.made:
            lines = []
            for t in ROUTE_TYPES:
                r = run(["ip", "-n", ns, "route", "show", "type", t], timeout=30)
                lines += [f"{t} {line.strip()}" if not line.startswith(t) else line.strip()
                          for line in r.stdout.decode().splitlines() if line.strip()]
            if lines:
                out[ns] = lines
        return out

    def heal(self):
        """Removes every cut (and any other partition route left in our namespaces). Returns the
        number of host pairs that were cut."""
        with self.lock:
            n = len(self.cuts)
            for pair in list(self.cuts):
                a, b = sorted(pair)
                for x, y in ((a, b), (b, a)):
                    self._route("del", x, y)
                self.cuts.discard(pair)
                self.log.append((time.monotonic(), f"healed {a}<->{b}"))
            for ns, lines in self.partition_routes().items():
                for line in lines:
                    t, dst = line.split()[:2]
                    run(["ip", "-n", ns, "route", "del", t, dst], timeout=30)
            left = self.partition_routes()
            if left:
                raise OSError(f"partition routes left after healing: {left}")
            return n

    # ---- delay ----------------------------------------------------------------------------------

    def _egress_rule(self, ns, action):
        return run(["ip", "netns", "exec", ns, "iptables-legacy", "-w", action, "OUTPUT", "-o",
                    self.devices[ns], "-j", "NFQUEUE", "--queue-num", "0", "--queue-bypass"],
                   timeout=30)

    def delay(self, tool, us):
        """Every packet leaving each namespace (hosts and client) over the bridge is held `us`
        microseconds (one way; a round trip between two namespaces gains 2 us): an iptables
        NFQUEUE rule on its veth and `tool` (build/tests/net_delay) releasing the packets, since
        this kernel has no netem. Traffic inside a namespace is not delayed. Replaces any delay
        in place; raises OSError if a rule or a daemon cannot be set up."""
        self.undelay()
        if us <= 0:
            return
        for ns in self.made:
            proc = subprocess.Popen(["ip", "netns", "exec", ns, tool, "--delay-us", str(us)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.delayers[ns] = proc
            line = proc.stdout.readline().strip()
            if line != "ready":
                raise OSError(f"net_delay in {ns}: {line or proc.stderr.read().strip()}")
            r = self._egress_rule(ns, "-A")
            if r.returncode != 0:
                raise OSError(f"iptables in {ns}: {r.stderr.decode().strip()}")
        self.log.append((time.monotonic(), f"delay {us} us"))

    def undelay(self):
        """Removes the delay: the rules, then the daemons (which release what they hold).
        Returns {namespace: the daemon's last line (packets delayed, lateness)}."""
        out = {}
        for ns, proc in list(self.delayers.items()):
            self._egress_rule(ns, "-D")
            proc.terminate()
            try:
                rest, err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                rest, err = proc.communicate()
            out[ns] = (rest.strip().splitlines() or [err.strip()])[-1]
            del self.delayers[ns]
        if out:
            self.log.append((time.monotonic(), "delay removed"))
        return out

    # ---- the end --------------------------------------------------------------------------------

    def pids_inside(self):
        out = []
        for ns in self.made:
            r = run(["ip", "netns", "pids", ns], timeout=30)
            out += [int(p) for p in r.stdout.split()]
        return out

    def cleanup(self):
        if self.cleaned:
            return
        self.cleaned = True
        try:
            self.heal()
        except Exception as e:  # noqa: BLE001
            print(f"netns rig cleanup: healing the partitions: {e}", flush=True)
        try:
            self.undelay()
        except Exception as e:  # noqa: BLE001
            print(f"netns rig cleanup: removing the delay: {e}", flush=True)
        for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            pids = self.pids_inside()
            for p in pids:
                try:
                    os.kill(p, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace
            while pids and self.pids_inside() and time.monotonic() < deadline:
                time.sleep(0.05)
        for ns in self.made:
            run(["ip", "netns", "del", ns], timeout=30)
        for link in self.links:
            run(["ip", "link", "del", link], timeout=30)
        self.made, self.links = [], []


# ------------------------------------------------------------------------------------------------
# The client package with the cluster's client certificate


ANSWERS = ("ALREADY_EXISTS", "NOT_FOUND", "INVALID_ARGUMENT")  # errors that are answers
BACKOFF = (0.2, 0.4)   # seconds a client waits after a failed call before it reports the failure


class TlsClient:
    """The zipg module as jepsen.py's workers use it (connect, Error), with the cluster's client
    certificate on every connection, and connections that back off (BackoffGraph)."""

    def __init__(self, module, ca, cert, key, backoff=BACKOFF):
        self._module = module
        self._tls = {"tls_ca": ca, "tls_cert": cert, "tls_key": key}
        self._backoff = backoff
        self.Error = module.Error

    def connect(self, endpoint, **kw):
        g = self._module.connect(endpoint, **{**self._tls, **kw})
        return BackoffGraph(g, self.Error, self._backoff) if self._backoff else g

    def __getattr__(self, name):
        return getattr(self._module, name)


class BackoffGraph:
    """A connection whose calls, when they fail other than with an answer (UNAVAILABLE,
    DEADLINE_EXCEEDED, a transport error), wait BACKOFF seconds before raising, as a real client
    backs off. jepsen.py records a failed write as info (open for ever) and goes on at once:
    while a partition makes the LogStore unavailable, its workers would otherwise add hundreds of
    open writes a second, which the checker cannot search in any useful time. The wait falls
    inside the operation (before its completion is recorded), so the history stays exact."""

    def __init__(self, g, error, backoff):
        self._g, self._error, self._backoff = g, error, backoff
        self._rnd = random.Random()

    def close(self):
        return self._g.close()

    def __getattr__(self, name):
        attr = getattr(self._g, name)
        if not callable(attr):
            return attr

        def call(*args, **kw):
            try:
                return attr(*args, **kw)
            except Exception as e:
                if not (isinstance(e, self._error) and e.code in ANSWERS):
                    time.sleep(self._rnd.uniform(*self._backoff))
                raise
        return call


# ------------------------------------------------------------------------------------------------
# The deployed cluster


class NetnsCluster(jepsen.Cluster):
    """jepsen.Cluster on the namespaces: the same generated graph and store (create()), deployed
    with `zipg deploy` (start()); members from `zipg status` over TLS; restarts through `zipg
    node start` on the member's host."""

    def __init__(self, env, net, name="cluster", logstores=2, lease_ttl=LEASE_TTL):
        super().__init__(env, name, logstores=logstores, servers=len(net.hosts))
        self.net = net
        self.lease_ttl = lease_ttl
        self.tls = os.path.join(self.dir, "tls")
        self.spec = None
        self.spec_path = os.path.join(self.dir, "cluster.json")
        self.exits = []   # (name, expected?, log tail) of every process found dead by restart_dead

    # ---- deploying ------------------------------------------------------------------------------

    def tls_args(self):
        return ["--tls-ca", os.path.join(self.tls, "ca.pem"), "--tls-cert",
                os.path.join(self.tls, "client.pem"), "--tls-key",
                os.path.join(self.tls, "client.key")]

    def client_module(self, module):
        return TlsClient(module, *self.tls_args()[1::2])

    def deploy(self, action, *extra, timeout=240):
        return self.zipg("deploy", action, "--spec", self.spec_path, "--exec",
                         self.net.exec_prefix, "--zipg", self.env.zipg, *extra, timeout=timeout)

    def start(self):
        check, note = self.env.check, self.env.note
        hosts, addrs = self.net.hosts, [self.net.addresses[h] for h in self.net.hosts]
        r = self.zipg("deploy", "certs", "--hosts", ",".join(hosts), "--addresses",
                      ",".join(addrs), "--out", self.tls, "--days", "2")
        if not check(r.returncode == 0, f"deploy certs: {r.stderr[-800:]!r}"):
            return False
        r = self.zipg("deploy", "plan", "--hosts", ",".join(hosts), "--addresses", ",".join(addrs),
                      "--replicas", "2", "--logstores", str(self.logstores), "--etcd-members", "3",
                      "--store", self.store, "--tls-dir", self.tls, "--base-port", str(BASE_PORT))
        if not check(r.returncode == 0, f"deploy plan: {r.stderr[-800:]!r}"):
            return False
        spec = json.loads(r.stdout)
        needs = planned_files(r.stderr)
        if not check(sorted(needs) == sorted(hosts), f"deploy plan lists files per host: {needs}"):
            return False
        place_host_stores(spec, needs, self.store, self.dir, shutil.copy2)
        for h in spec["hosts"]:
            if h["name"] not in AGGREGATOR_HOSTS:
                h.pop("aggregator", None)
        spec["lease_ttl"] = self.lease_ttl
        with open(self.spec_path, "w") as f:
            json.dump(spec, f, indent=2)
        self.spec = spec
        placed = {h["name"]: h.get("shard_server", {}).get("shards", []) for h in spec["hosts"]}
        ls = [h["name"] for h in spec["hosts"] if "logstore" in h]
        if not check(len(ls) == self.logstores, f"LogStores planned on {ls}"):
            return False
        t = time.monotonic()
        r = self.deploy("start", "--wait", "120")
        self.started = True
        self.node_processes()
        if not check(r.returncode == 0, f"deploy start: {r.stdout[-1500:]!r} "
                                        f"{r.stderr[-1500:]!r}"):
            return False
        self.aggregators = [f"{self.net.addresses[h]}:{spec_host(spec, h)['aggregator']['port']}"
                            for h in AGGREGATOR_HOSTS]
        self.logs = {}
        note(f"cluster deployed in {time.monotonic() - t:.1f} s on {self.net.tag}-h1..h4 "
             f"({self.net.subnet}.0/24), TLS: shards per host {placed}; LogStores on {ls}; etcd "
             f"on {self.etcd_hosts()}; aggregators {self.aggregators}; lease TTL "
             f"{self.lease_ttl} s; partitions are {self.net.route_type} routes")
        return self.wait_healthy(60) is not None and not self.etcd_problems()

    def stop(self):
        if not self.started:
            return
        self.started = False
        self.net.heal()
        r = self.deploy("stop", timeout=120)
        self.env.check(r.returncode == 0, f"deploy stop: {r.stderr[-500:]!r}")
        time.sleep(0.3)
        inside = self.net.pids_inside()
        self.env.check(not inside, f"processes left in the namespaces after deploy stop: "
                                   f"{[(p, jepsen.cmdline(p)) for p in inside]}")

    # ---- members --------------------------------------------------------------------------------

    def hosts_of(self, role):
        return [h["name"] for h in self.spec["hosts"] if role in h]

    def etcd_hosts(self):
        return [m["host"] for m in self.spec["etcd"]["members"]]

    def host_of(self, name):
        return name.rsplit("-", 1)[1]

    def node_file(self, host):
        return os.path.join(spec_host(self.spec, host)["store"], "run", f"node-{host}.json")

    def node_processes(self):
        """{name: {"name", "role", "pid", "log", "host"}} of every process the hosts' node files
        list (alive or not)."""
        out = {}
        for h in self.net.hosts:
            try:
                with open(self.node_file(h)) as f:
                    for p in json.load(f)["processes"]:
                        out[p["name"]] = dict(p, host=h)
                        self.procs.known_pids.add(p["pid"])
            except (OSError, ValueError):
                continue
        return out

    def status(self):
        """`zipg status --json` of the first aggregator that answers, asked from the client
        namespace. `zipg status` exits 1 when the cluster is not healthy, with the same document:
        that is an answer too (else problems() would say every member is absent)."""
        for a in self.aggregators:
            try:
                r = run(["ip", "netns", "exec", self.net.client_ns, self.env.zipg, "status",
                         "--connect", a, "--json", *self.tls_args()], timeout=15)
            except subprocess.TimeoutExpired:
                continue
            try:
                doc = json.loads(r.stdout)
            except ValueError:
                continue
            if isinstance(doc, dict) and "servers" in doc:
                return doc
        return None

    def problems(self, members):
        out = []
        for h in self.hosts_of("shard_server"):
            m = members.get(f"shard-{h}")
            if m is None or not m.get("serving"):
                out.append(f"shard-{h} {'absent' if m is None else 'not serving'}")
        aggs = sorted(n for n, m in members.items() if m["role"] == "aggregator")
        if aggs != sorted(f"aggregator-{h}" for h in AGGREGATOR_HOSTS):
            out.append(f"aggregators registered: {aggs}")
        return out + jepsen.logstore_problems(members, self.logstores)

    def restart(self, name, spec=None, argv=None):
        """Starts `name` again with `zipg node start` on its host (the argv of a jepsen nemesis
        is not needed: ports are fixed by the spec). Returns its new pid."""
        host = self.host_of(name)
        roles = "etcd" if name.startswith("etcd-") else "servers"
        r = run(self.net.exec_argv(host, [self.env.zipg, "node", "start", "--spec",
                                          self.spec_path, "--host", host, "--roles", roles]),
                timeout=120)
        p = self.node_processes().get(name)
        if r.returncode != 0 or p is None or not self.alive(p["pid"]):
            raise NemesisError(f"zipg node start --host {host} --roles {roles} did not start "
                               f"{name}: {r.stdout[-500:]!r} {r.stderr[-1000:]!r}")
        return p["pid"]

    def restart_dead(self):
        """Starts again, with `zipg node start --roles all` on its host, every process of the
        node files that is not running. Returns their names. A LogStore exits by design when it
        loses its term; every other exit is recorded as unexpected (self.exits)."""
        dead = {}
        for name, p in self.node_processes().items():
            if not self.alive(p["pid"]):
                dead.setdefault(p["host"], []).append(name)
                tail = log_tail(p.get("log"))
                self.exits.append((name, p["role"] == "logstore", tail))
        for host, names in dead.items():
            r = run(self.net.exec_argv(host, [self.env.zipg, "node", "start", "--spec",
                                              self.spec_path, "--host", host]), timeout=120)
            if r.returncode != 0:
                raise NemesisError(f"zipg node start --host {host} (to restart {names}): "
                                   f"{r.stdout[-500:]!r} {r.stderr[-1000:]!r}")
        return [n for names in dead.values() for n in names]

    # ---- etcd -----------------------------------------------------------------------------------

    def _ssl(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.load_verify_locations(os.path.join(self.tls, "ca.pem"))
        ctx.load_cert_chain(os.path.join(self.tls, "client.pem"),
                            os.path.join(self.tls, "client.key"))
        return ctx

    def etcd_status(self, timeout=2.0):
        """{host: maintenance status} of every etcd member that answers (from the root
        namespace)."""
        out, ctx = {}, self._ssl()
        for m in self.spec["etcd"]["members"]:
            url = (f"https://{self.net.addresses[m['host']]}:{m['client_port']}"
                   "/v3/maintenance/status")
            try:
                with urllib.request.urlopen(urllib.request.Request(url, data=b"{}"), context=ctx,
                                            timeout=timeout) as resp:
                    out[m["host"]] = json.load(resp)
            except (OSError, ValueError, ssl.SSLError):
                continue
        return out

    def etcd_leader(self):
        """The host of the etcd leader, if the members that answer agree on one."""
        st = self.etcd_status()
        ids = {s["header"]["member_id"]: h for h, s in st.items()}
        leaders = {s.get("leader") for s in st.values()}
        return ids.get(leaders.pop()) if len(leaders) == 1 else None

    def etcd_problems(self):
        st = self.etcd_status()
        out = [f"etcd-{h} does not answer" for h in self.etcd_hosts() if h not in st]
        leaders = {s.get("leader") for s in st.values()}
        ids = {s["header"]["member_id"] for s in st.values()}
        if len(leaders) != 1 or not leaders <= ids:
            out.append(f"etcd members do not agree on a leader: {leaders}")
        return out


def spec_host(spec, name):
    return next(h for h in spec["hosts"] if h["name"] == name)


def log_tail(path, n=4000):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read().decode(errors="replace")
    except (OSError, TypeError):
        return ""


# ------------------------------------------------------------------------------------------------
# Nemeses


class RigNemesis(Nemesis):
    """A fault, held HOLD seconds, then recovered from (recover()), again and again until
    act_until. heal() (run whatever happens) removes every route and waits for a whole cluster."""

    def fault(self):
        """Injects one fault; returns what it did (text)."""
        raise NotImplementedError

    def undo(self):
        """Ends the fault in place (routes are removed by recover() in any case)."""

    def act(self, act_until):
        while time.monotonic() < act_until:
            self.whole = False
            what = self.fault()
            self.actions += 1
            self.say(what)
            hold = self.rnd.uniform(*HOLD)
            time.sleep(hold)
            self.undo()
            took, restarted = self.recover()
            self.whole = True  # and stayed so for SETTLE: heal() need not wait that again
            self.say(f"undone after {hold:.1f}s; whole again {took:.1f}s later"
                     + (f"; restarted {restarted}" if restarted else "") + self.waited_for())
            if time.monotonic() >= act_until:
                break  # the history is over: no gap before a fault that will not come
            time.sleep(self.rnd.uniform(*GAP))

    def recover(self, timeout=HEAL_TIMEOUT, settle=SETTLE):
        """Removes every route, starts what exited, waits until etcd agrees on a leader and the
        cluster is whole, and stays whole for `settle` seconds. Returns (seconds taken, names
        restarted)."""
        t = time.monotonic()
        self.cluster.net.heal()
        restarted = []
        deadline = t + timeout
        whole_since = None
        self.waited = {}   # each problem seen -> the last time (s after the heal) it was seen
        while True:
            restarted += self.cluster.restart_dead()
            bad = self.cluster.etcd_problems()
            bad = bad or self.cluster.problems(self.cluster.members())
            for b in bad:
                self.waited[b] = time.monotonic() - t
            if bad:
                whole_since = None
            elif whole_since is None:
                whole_since = time.monotonic()
            if whole_since is not None and time.monotonic() - whole_since >= settle:
                return whole_since - t, restarted
            if time.monotonic() > deadline:
                raise NemesisError(f"not whole {timeout:.0f} s after the fault ended: {bad}")
            time.sleep(0.2)

    def waited_for(self, n=4):
        """The problems recover() waited for longest: '; waited for: P until +Xs, ...'."""
        last = sorted(self.waited.items(), key=lambda kv: -kv[1])[:n]
        return "; waited for: " + ", ".join(f"{p} until +{s:.1f}s" for p, s in last) if last else ""

    def heal(self):
        try:
            self.undo()
        finally:
            try:
                # After a recovery that already stayed whole for SETTLE, whole once is enough.
                took, restarted = self.recover(settle=0 if getattr(self, "whole", False)
                                               else SETTLE)
                if restarted:
                    self.say(f"at the end: restarted {restarted}")
            except NemesisError as e:
                self.errors.append(f"{self.name}: {e}")
            super().heal()


class Partition(RigNemesis):
    def groups(self):
        """(description, [(a, b) pairs to cut])."""
        raise NotImplementedError

    def fault(self):
        what, pairs = self.groups()
        ls = [m["name"] for m in self._members("logstore").values() if m.get("leader")]
        etcd = self.cluster.etcd_leader()
        self.cluster.net.cut(pairs)
        return f"{what} (leaders: {ls[0] if ls else '?'}, etcd-{etcd})"


class PartitionOne(Partition):
    name = "partition-one"

    def groups(self):
        hosts = self.cluster.net.hosts
        x = self.rnd.choice(hosts)
        return f"cut {x} off from {[h for h in hosts if h != x]}", \
            [(x, y) for y in hosts if y != x]


class PartitionHalves(Partition):
    name = "partition-halves"

    def groups(self):
        hosts, etcd = self.cluster.net.hosts, self.cluster.etcd_hosts()
        m = self.rnd.choice(etcd)
        minority = sorted({m} | (set(hosts) - set(etcd)))
        majority = sorted(set(hosts) - set(minority))
        return f"halves {majority} | {minority}", [(a, b) for a in majority for b in minority]


class PartitionBridge(Partition):
    name = "partition-bridge"

    def groups(self):
        hosts = list(self.cluster.net.hosts)
        self.rnd.shuffle(hosts)
        middle, left, right = hosts[0], sorted(hosts[1:2]), sorted(hosts[2:])
        return f"bridge {left} - {middle} - {right}", [(a, b) for a in left for b in right]


class EtcdMemberLoss(RigNemesis):
    name = "etcd-member-loss"

    def fault(self):
        host = self.rnd.choice(self.cluster.etcd_hosts())
        name = f"etcd-{host}"
        leader = self.cluster.etcd_leader()
        p = self.cluster.node_processes().get(name)
        if p is None or not self.cluster.alive(p["pid"]):
            raise NemesisError(f"{name} is not running before the fault: {p}")
        self.down[name] = None
        os.kill(p["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while self.cluster.alive(p["pid"]) and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.cluster.alive(p["pid"]):
            raise NemesisError(f"{name} (pid {p['pid']}) survived kill -9")
        self.victim = name
        return f"kill -9 {name} ({'the leader' if leader == host else f'leader: etcd-{leader}'})"

    def undo(self):
        for name in list(self.down):
            self._restart(name, None)


NEMESES = {c.name: c for c in (PartitionOne, PartitionHalves, PartitionBridge, EtcdMemberLoss)}
# jepsen.run_history finds a nemesis by name in jepsen.NEMESIS_CLASSES.
jepsen.NEMESIS_CLASSES.update(NEMESES)
ALL_NEMESES = list(NEMESES) + [n for n in jepsen.NEMESES if n != "none"] + ["none"]


# ------------------------------------------------------------------------------------------------
# The rig


class Rig:
    """The namespaces and the deployed cluster, for jepsen.run_history. cleanup() undoes
    everything (also at exit)."""

    def __init__(self, env, route_type="blackhole", logstores=2):
        self.env = env
        self.net = Network(route_type=route_type)
        self.cluster = None
        self.logstores = logstores

    def start(self, rnd):
        """Builds the namespaces (RigError if it cannot) and deploys the cluster; False after a
        failed check."""
        self.net.setup()
        self.env.note(f"namespaces {self.net.tag}-h1..h4 and {self.net.client_ns} on bridge "
                      f"{self.net.tag}br, {self.net.subnet}.0/24 (root namespace .254)")
        self.cluster = NetnsCluster(self.env, self.net, logstores=self.logstores)
        if not self.cluster.create(rnd):
            return False
        if not self.cluster.start():
            return False
        if not isinstance(self.env.client, TlsClient):
            self.env.client = self.cluster.client_module(self.env.client)
        return True

    def save_logs(self, out_dir):
        """Copies every process's log (each host's store/run/*.log) to out_dir/logs/HOST/."""
        if self.cluster is None or self.cluster.spec is None:
            return
        for h in self.cluster.spec["hosts"]:
            run_dir = os.path.join(h["store"], "run")
            if not os.path.isdir(run_dir):
                continue
            dst = os.path.join(out_dir, "logs", h["name"])
            os.makedirs(dst, exist_ok=True)
            for f in os.listdir(run_dir):
                if f.endswith(".log") or f.endswith(".json"):
                    shutil.copy2(os.path.join(run_dir, f), dst)

    def cleanup(self):
        try:
            self.net.heal()
        except Exception as e:  # noqa: BLE001
            print(f"netns rig: healing: {e}", flush=True)
        if self.cluster is not None:
            try:
                self.cluster.stop()
            except Exception as e:  # noqa: BLE001
                print(f"netns rig: deploy stop: {e}", flush=True)
            self.cluster.procs.cleanup()
        self.net.cleanup()
