#!/usr/bin/python3
"""The namespace rig's network delay (tests/net_delay.cc, netns_rig.Network.delay): with a delay
d on every namespace's egress, a TCP round trip between two host namespaces takes 2d longer than
without, bytes arrive whole and in order (a 4 MiB transfer's SHA-256 is compared), the client
namespace is delayed too, traffic inside a namespace is not, and removing the delay removes the
rules and the daemons (which say how many packets they held) and gives the old round trip back.
The reference is the round trip measured on the same namespaces without the delay.

Usage (root): net_delay_test.py BUILD/tests/net_delay"""
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "jepsen"))
from netns_rig import Network  # noqa: E402

ROUND_TRIPS = 300
BULK = 4 << 20

SERVER = r"""
import hashlib, socket, sys
s = socket.create_server((sys.argv[1], 0))
print(s.getsockname()[1], flush=True)
s.settimeout(60)
while True:
    try:
        c, _ = s.accept()
    except OSError:
        break
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    kind = c.recv(1)
    if kind == b"p":        # ping-pong: echo each byte
        while True:
            b = c.recv(1)
            if not b:
                break
            c.sendall(b)
    elif kind == b"b":      # bulk: read until the sender closes, answer the digest
        h = hashlib.sha256()
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            h.update(b)
        c.sendall(h.hexdigest().encode())
    c.close()
"""

CLIENT = r"""
import hashlib, os, socket, sys, time
addr, port, mode, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
c = socket.create_connection((addr, port), timeout=30)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
if mode == "p":
    c.sendall(b"p")
    rtts = []
    for _ in range(n):
        t = time.perf_counter()
        c.sendall(b"x")
        assert c.recv(1) == b"x"
        rtts.append((time.perf_counter() - t) * 1e6)
    print(" ".join("%.1f" % r for r in rtts))
else:
    data = os.urandom(n)
    c.sendall(b"b" + data)
    c.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        b = c.recv(100)
        if not b:
            break
        got += b
    print(got.decode(), hashlib.sha256(data).hexdigest())
"""


def run_in(net, ns, argv, timeout=120):
    r = subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        raise AssertionError(f"{argv[:3]} in {ns}: {r.stderr.strip()}")
    return r.stdout.strip()


def main():
    tool = os.path.abspath(sys.argv[1])
    failures = []

    def check(ok, what):
        print(("ok    " if ok else "FAIL  ") + what, flush=True)
        if not ok:
            failures.append(what)

    bad = subprocess.run([tool, "--delay-us", "-5"], capture_output=True, text=True)
    check(bad.returncode == 2 and "usage" in bad.stderr, "a negative delay is a usage error")

    net = Network(["h1", "h2"])
    net.setup()
    servers = {}
    try:
        for host in ("h1", "h2"):
            servers[host] = subprocess.Popen(
                net.exec_argv(host, [sys.executable, "-c", SERVER, net.addresses[host]]),
                stdout=subprocess.PIPE, text=True)
        ports = {h: int(p.stdout.readline()) for h, p in servers.items()}

        def rtt(src_ns, host):
            out = run_in(net, src_ns, [sys.executable, "-c", CLIENT, net.addresses[host],
                                       str(ports[host]), "p", str(ROUND_TRIPS)])
            return statistics.median(float(x) for x in out.split()[20:])  # after warm-up

        def bulk_ok(src_ns, host):
            got, sent = run_in(net, src_ns, [sys.executable, "-c", CLIENT, net.addresses[host],
                                             str(ports[host]), "b", str(BULK)]).split()
            return got == sent

        h1 = net.ns("h1")
        # The first connections between namespaces are slower (neighbour discovery, the bridge
        # learning addresses): the least of three runs.
        base = min(rtt(h1, "h2") for _ in range(3))
        base_client = min(rtt(net.client_ns, "h1") for _ in range(3))
        base_local = min(rtt(h1, "h1") for _ in range(3))
        print(f"no delay: round trip h1->h2 {base:.0f} us, client->h1 {base_client:.0f} us, "
              f"inside h1 {base_local:.0f} us", flush=True)

        for d in (1000, 200):
            net.delay(tool, d)
            got = rtt(h1, "h2")
            added = got - base
            print(f"delay {d} us: round trip h1->h2 {got:.0f} us (+{added:.0f})", flush=True)
            # Each direction leaves one namespace: 2d more (and the daemon's own hop, about 40
            # us each way here). Bounds: the timer's slack below; above, the scheduling of the
            # daemons on two cores that other tests of the suite keep busy.
            high = 3 * d + 3000
            check(2 * d * 0.9 <= added <= high,
                  f"delay {d} us adds 2d to a round trip between hosts (+{added:.0f} us)")
            added_client = rtt(net.client_ns, "h1") - base_client
            check(2 * d * 0.9 <= added_client <= high,
                  f"delay {d} us adds 2d from the client namespace too (+{added_client:.0f} us)")
            local = rtt(h1, "h1")
            check(local < base_local + d / 2,
                  f"delay {d} us leaves traffic inside a namespace alone ({local:.0f} us)")
            check(bulk_ok(h1, "h2"), f"delay {d} us: 4 MiB arrive whole and in order")

        said = net.undelay()
        for ns in (net.ns("h1"), net.ns("h2"), net.client_ns):
            line = said.get(ns, "")
            held = int(line.split()[1]) if line.startswith("delayed ") else 0
            check(held > 0, f"the daemon of {ns} held packets and said so ({line!r})")
        rules = run_in(net, h1, ["iptables-legacy", "-w", "-S", "OUTPUT"])
        check("NFQUEUE" not in rules, "no NFQUEUE rule is left once the delay is removed")
        after = rtt(h1, "h2")
        check(after < base + 300, f"the round trip is back without the delay ({after:.0f} us)")
    finally:
        for p in servers.values():
            p.kill()
            p.wait()
        net.cleanup()

    if failures:
        print(f"net_delay_test: {len(failures)} failed")
        sys.exit(1)
    print("net_delay_test: all passed")


if __name__ == "__main__":
    main()
