#!/usr/bin/python3
"""`zipg deploy start|stop|status` reach every host first and fail fast, naming each host they
cannot reach and why (docs/deploy.md, "Transport"), as a new user would meet it: no servers are
started; the hosts h1, h2 are 127.0.0.1 and 127.0.0.2 (no traffic leaves this machine).

A. `--exec env` without `--zipg`: this zipg's own path is used through the transport; every
   host answers `zipg node check`, and `deploy status` reports each host.
B. `--exec env --zipg /nonexistent/zipg`: refused at once, each host named with exit 127 and the
   hint to pass --zipg.
C. A transport that cannot be started: each host named, with the hint to fix --exec.
D. A transport that hangs: `--reach-timeout 2` ends the command within a few seconds, each host
   named with "no answer within 2 s", and the hanging commands are killed (none left running);
   `deploy start` through it starts nothing (no node state file appears).
E. The default transport (ssh, BatchMode, ConnectTimeout 10) to hosts without an ssh server
   answering: refused within 30 s, each host named (reached or not, the check cannot pass: no
   zipg runs there for this spec).
F. `zipg node check` of a host the spec does not name: INVALID_ARGUMENT naming it; of one it
   names: exit 0.
G. `--reach-timeout 0`: a usage error (exit 2).
H. The transport is kept in the spec once it reached every host: after `--exec env --zipg Z`,
   the spec names them and a command without the flags goes through env; a transport that
   fails does not replace them; a spec whose transport is not strings is refused naming the
   field.

Usage: deploy_transport_test.py PATH/TO/zipg        (exit status 0 if everything passed)"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_procs  # noqa: E402

T = cluster_procs.TestSetup("deploy_transport_test", __doc__)
check, section, note = T.check, T.section, T.note
TMP, ZIPG, STORE, procs, report = T.tmp, T.zipg, T.store, T.procs, T.report
HOSTS = [("h1", "127.0.0.1"), ("h2", "127.0.0.2")]


def run(argv, timeout=120):
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    return r, time.monotonic() - t0


def names_every_host(text, *words):
    """Each host is named with its address, and each of `words` appears in the message."""
    return all(f"{h} ({a})" in text for h, a in HOSTS) and all(w in text for w in words)


def running_with(word):
    """Pids of the processes whose command line holds `word` (from /proc)."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if word.encode() in f.read():
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


def main():
    section("setup: a 200-node store in 2 shards, a spec for h1, h2 on 127.0.0.1, 127.0.0.2")
    graph = os.path.join(TMP, "g")
    r, _ = run([ZIPG, "gen", "graph", "--nodes", "200", "--out", graph])
    if not check(r.returncode == 0, f"gen graph: {r.stderr[-300:]!r}"):
        return
    r, _ = run([ZIPG, "compress", "--nodes", os.path.join(graph, "nodes.csv"), "--edges",
                os.path.join(graph, "edges.csv"), "--out", STORE, "--shards", "2"])
    if not check(r.returncode == 0, f"compress: {r.stderr[-300:]!r}"):
        return
    r, _ = run([ZIPG, "deploy", "plan", "--hosts", ",".join(h for h, _ in HOSTS), "--addresses",
                ",".join(a for _, a in HOSTS), "--replicas", "1", "--store", STORE])
    if not check(r.returncode == 0, f"deploy plan: {r.stderr[-300:]!r}"):
        return
    planned = r.stdout
    spec = os.path.join(TMP, "spec.json")
    with open(spec, "w") as f:
        f.write(planned)
    deploy = [ZIPG, "deploy"]

    section("A. --exec env, no --zipg: this binary through the transport")
    r, took = run(deploy + ["status", "--spec", spec, "--exec", "env"])
    # Nothing runs: status says so per host (exit 1), after every host answered the check.
    check(r.returncode == 1 and all(f"host {h} ({a}):" in r.stdout for h, a in HOSTS) and
          "cannot reach" not in r.stderr,
          f"status through env: rc {r.returncode}, {r.stdout[-300:]!r} {r.stderr[-300:]!r}")
    note(f"A: status through env answered in {took:.2f} s")

    section("B. --exec env --zipg /nonexistent/zipg")
    r, took = run(deploy + ["status", "--spec", spec, "--exec", "env", "--zipg",
                            "/nonexistent/zipg"])
    check(r.returncode == 1 and names_every_host(r.stderr, "exit 127", "--zipg PATH"),
          f"a zipg that is not there: rc {r.returncode}, {r.stderr[-600:]!r}")
    check(took < 10, f"B took {took:.1f} s")

    section("C. a transport that cannot be started")
    r, took = run(deploy + ["status", "--spec", spec, "--exec", "/nonexistent/transport {host}"])
    check(r.returncode == 1 and names_every_host(r.stderr, "could not be started", "--exec"),
          f"a transport that is not there: rc {r.returncode}, {r.stderr[-600:]!r}")

    section("D. a transport that hangs, --reach-timeout 2")
    hang = os.path.join(TMP, "hang.sh")
    marker = f"zipg-deploy-transport-test-{os.getpid()}"
    with open(hang, "w") as f:
        f.write(f"exec -a {marker} sleep 600\n")
    for action in ("status", "start"):
        r, took = run(deploy + [action, "--spec", spec, "--exec", f"/bin/bash {hang}",
                                "--reach-timeout", "2"])
        check(r.returncode == 1 and names_every_host(r.stderr, "no answer within 2 s"),
              f"{action} through a hanging transport: rc {r.returncode}, {r.stderr[-600:]!r}")
        check(2 <= took < 10, f"{action} through a hanging transport took {took:.1f} s")
        left = running_with(marker)
        check(not left, f"{action}: hanging transports left running: {left}")
    started = [h for h, _ in HOSTS if os.path.exists(os.path.join(STORE, "run", f"node-{h}.json"))]
    check(not started, f"start through a hanging transport started hosts {started}")

    section("E. the default transport (ssh) to hosts without an ssh server for us")
    fresh = os.path.join(TMP, "fresh.json")  # A kept `env` in spec.json (H tests that)
    with open(fresh, "w") as f:
        f.write(planned)
    r, took = run(deploy + ["status", "--spec", fresh], timeout=60)
    check(r.returncode == 1 and names_every_host(r.stderr, "cannot reach every host through `ssh"),
          f"default ssh: rc {r.returncode}, {r.stderr[-600:]!r}")
    check(took < 30, f"the default ssh transport took {took:.1f} s")
    note(f"E: {took:.2f} s: {r.stderr.strip()[-300:]}")

    section("F. zipg node check")
    r, _ = run([ZIPG, "node", "check", "--spec", spec, "--host", "nope"])
    check(r.returncode == 1 and "the spec has no host 'nope'" in r.stderr,
          f"node check of an unknown host: rc {r.returncode}, {r.stderr[-300:]!r}")
    r, _ = run([ZIPG, "node", "check", "--spec", spec, "--host", "h2"])
    check(r.returncode == 0 and "h2 (127.0.0.2)" in r.stdout,
          f"node check of h2: rc {r.returncode}, {r.stdout!r} {r.stderr[-300:]!r}")

    section("G. --reach-timeout 0")
    r, _ = run(deploy + ["status", "--spec", spec, "--reach-timeout", "0"])
    check(r.returncode == 2 and "--reach-timeout must be 1..3600" in r.stderr,
          f"--reach-timeout 0: rc {r.returncode}, {r.stderr[-300:]!r}")

    section("H. the transport kept in the spec")
    kept = os.path.join(TMP, "kept.json")
    with open(spec) as f, open(kept, "w") as g:
        g.write(f.read())
    r, _ = run(deploy + ["status", "--spec", kept, "--exec", "env", "--zipg", ZIPG])
    check(r.returncode == 1 and f"kept the transport in {kept}" in r.stderr,
          f"status --exec env --zipg: rc {r.returncode}, {r.stderr[-400:]!r}")
    with open(kept) as f:
        transport = json.load(f).get("transport")
    check(transport == {"exec": "env", "zipg": ZIPG}, f"the spec's transport: {transport}")
    r, _ = run(deploy + ["status", "--spec", kept])
    check(r.returncode == 1 and "cannot reach" not in r.stderr and
          all(f"host {h} ({a}):" in r.stdout for h, a in HOSTS),
          f"status with the kept transport: rc {r.returncode}, {r.stdout[-300:]!r} "
          f"{r.stderr[-300:]!r}")
    r, _ = run(deploy + ["status", "--spec", kept, "--exec", f"/bin/bash {hang}",
                         "--reach-timeout", "2"])
    with open(kept) as f:
        after = json.load(f).get("transport")
    check(r.returncode == 1 and after == transport,
          f"a failing transport must not be kept: rc {r.returncode}, transport now {after}")
    r, _ = run([ZIPG, "node", "check", "--spec", kept, "--host", "h1"])
    check(r.returncode == 0, f"node check with a kept transport: {r.stderr[-300:]!r}")
    bad = os.path.join(TMP, "bad.json")
    with open(kept) as f:
        j = json.load(f)
    j["transport"]["exec"] = 5
    with open(bad, "w") as f:
        json.dump(j, f)
    r, _ = run(deploy + ["status", "--spec", bad])
    check(r.returncode == 1 and "transport.exec" in r.stderr,
          f"a spec whose transport.exec is a number: rc {r.returncode}, {r.stderr[-300:]!r}")


if __name__ == "__main__":
    cluster_procs.run_test("deploy_transport_test", main, report, procs.cleanup)
