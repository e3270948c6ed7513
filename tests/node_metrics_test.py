#!/usr/bin/python3
"""`zipg node start` with the metrics and HTTP ports of a cluster spec and `--prometheus`
(docs/deploy.md, docs/operations.md), on a one-host cluster on 127.0.0.1 with TLS on.

A. `zipg deploy plan --metrics` gives the shard server, the LogStore and the aggregator a
   metrics_port and the aggregator an http_port, at the offsets the usage names.
B. `--prometheus` is refused, before anything starts, for a spec without metrics ports and for a
   --prometheus-port that is a port of the spec.
C. `zipg node start --prometheus`: it prints `metrics ROLE NAME URL` per process, `http URL` and
   `prometheus URL`, as the spec says; every metrics URL answers (HTTPS with the client
   certificate), the aggregator's /v1/status answers; Prometheus' /api/v1/targets lists every
   metrics endpoint as up within 15 s; `zipg node status` shows Prometheus running and ready.
D. `zipg node stop` stops every process it started, Prometheus included.

Usage: node_metrics_test.py PATH/TO/zipg        (exit status 0 if everything passed)"""
import json
import os
import random
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cluster_procs  # noqa: E402
import write_model  # noqa: E402

T = cluster_procs.TestSetup("node_metrics_test", __doc__)
check, section, note = T.check, T.section, T.note
TMP, ZIPG, STORE, procs = T.tmp, T.zipg, T.store, T.procs
TLS = os.path.join(TMP, "tls")
HOST = "local"
ADDRESS = "127.0.0.1"


def run(argv, timeout=180):
    return subprocess.run(argv, capture_output=True, timeout=timeout)


def ports_free(ports):
    for p in ports:
        s = socket.socket()
        try:
            s.bind((ADDRESS, p))
        except OSError:
            return False
        finally:
            s.close()
    return True


def get(url, context, timeout=3):
    """(status, body) of a GET (never through a proxy), or (None, the error)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                         urllib.request.HTTPSHandler(context=context))
    try:
        with opener.open(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (OSError, ssl.SSLError) as e:
        return None, repr(e)


def node(action, spec_path, *extra, timeout=180):
    return run([ZIPG, "node", action, "--spec", spec_path, "--host", HOST, *extra],
               timeout=timeout)


def main():
    section("setup: compress (2 shards), deploy certs")
    if write_model.compressed_input(ZIPG, TMP, STORE, random.Random(20261201), 2, check) is None:
        return
    r = run([ZIPG, "deploy", "certs", "--hosts", HOST, "--addresses", ADDRESS, "--out", TLS,
             "--days", "2"])
    if not check(r.returncode == 0, f"deploy certs: {r.stderr[-500:]!r}"):
        return
    # Eleven ports from the base (0..10) and Prometheus', all free now.
    rnd = random.Random(os.getpid())
    for _ in range(50):
        base = 24000 + rnd.randrange(0, 3000) * 11
        prometheus_port = base + 11
        if ports_free(range(base, base + 12)):
            break
    else:
        check(False, "no free range of 12 ports")
        return

    section("A. deploy plan --metrics")
    plan = [ZIPG, "deploy", "plan", "--hosts", HOST, "--addresses", ADDRESS, "--replicas", "1",
            "--store", STORE, "--etcd-members", "1", "--base-port", str(base), "--tls-dir", TLS,
            "--cluster", f"node-metrics-{os.getpid()}"]
    r = run(plan + ["--metrics"])
    if not check(r.returncode == 0, f"deploy plan --metrics: {r.stderr[-500:]!r}"):
        return
    spec = json.loads(r.stdout)
    h = spec["hosts"][0]
    check(h["shard_server"].get("metrics_port") == base + 7 and
          h["aggregator"].get("metrics_port") == base + 8 and
          h["logstore"].get("metrics_port") == base + 9 and
          h["aggregator"].get("http_port") == base + 10, f"planned ports: {h}")
    spec["lease_ttl"] = 3
    spec_path = os.path.join(TMP, "cluster.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f, indent=2)

    section("B. --prometheus refused before anything starts")
    r = run(plan)
    plain_path = os.path.join(TMP, "no-metrics.json")
    with open(plain_path, "wb") as f:
        f.write(r.stdout)
    r = node("start", plain_path, "--prometheus", "--prometheus-port", str(prometheus_port))
    check(r.returncode != 0 and b"no process of the spec has a metrics_port" in r.stderr,
          f"--prometheus without metrics ports: {r.returncode} {r.stderr[-300:]!r}")
    r = node("start", spec_path, "--prometheus", "--prometheus-port", str(base + 8))
    check(r.returncode != 0 and b"is a port of the spec" in r.stderr,
          f"--prometheus-port on a port of the spec: {r.returncode} {r.stderr[-300:]!r}")
    check(not os.path.exists(os.path.join(STORE, "run", f"node-{HOST}.json")),
          "nothing started by the refused commands")

    section("C. node start --prometheus")
    t0 = time.monotonic()
    r = node("start", spec_path, "--prometheus", "--prometheus-port", str(prometheus_port))
    state_path = os.path.join(STORE, "run", f"node-{HOST}.json")
    if os.path.exists(state_path):
        with open(state_path) as f:
            procs.known_pids.update(p["pid"] for p in json.load(f)["processes"])
    out = r.stdout.decode()
    if not check(r.returncode == 0, f"node start: {out[-800:]!r} {r.stderr[-1500:]!r}"):
        return
    note(f"node start returned after {time.monotonic() - t0:.1f} s")
    lines = [line.split() for line in out.splitlines()]
    metrics = {(w[1], w[2]): w[3] for w in lines if w[0] == "metrics" and len(w) == 4}
    want = {("shard", f"shard-{HOST}"): f"https://{ADDRESS}:{base + 7}/metrics",
            ("aggregator", f"aggregator-{HOST}"): f"https://{ADDRESS}:{base + 8}/metrics",
            ("logstore", "logstore"): f"https://{ADDRESS}:{base + 9}/metrics"}
    check(metrics == want, f"metrics lines: {metrics} != {want}")
    http = [w[1] for w in lines if w[0] == "http"]
    check(http == [f"https://{ADDRESS}:{base + 10}/"], f"http lines: {http}")
    prometheus = [w[1] for w in lines if w[0] == "prometheus"]
    check(prometheus == [f"http://{ADDRESS}:{prometheus_port}/"], f"prometheus lines: {prometheus}")

    tls = ssl.create_default_context(cafile=os.path.join(TLS, "ca.pem"))
    tls.load_cert_chain(os.path.join(TLS, "client.pem"), os.path.join(TLS, "client.key"))
    # The servers wait for etcd's quorum before they serve: give them time.
    deadline = time.monotonic() + 60
    pending = dict(want)
    while pending and time.monotonic() < deadline:
        for key, url in list(pending.items()):
            status, body = get(url, tls)
            if status == 200 and b"zipg_build_info" in body:
                del pending[key]
        time.sleep(0.2)
    check(not pending, f"metrics URLs that do not answer: {pending}")
    note(f"every metrics URL answers {time.monotonic() - t0:.1f} s after node start")
    status = body = None
    while time.monotonic() < deadline:
        status, body = get(f"https://{ADDRESS}:{base + 10}/v1/status", tls)
        if status == 200:
            break
        time.sleep(0.2)
    check(status == 200 and json.loads(body).get("servers"),
          f"aggregator /v1/status: {status} {body!r:.300}")

    targets = {f"{ADDRESS}:{p}" for p in (base + 7, base + 8, base + 9)}
    up, seen = set(), None
    t1 = time.monotonic()
    while time.monotonic() < t1 + 15:
        status, body = get(f"http://{ADDRESS}:{prometheus_port}/api/v1/targets", None)
        if status == 200:
            seen = json.loads(body)["data"]["activeTargets"]
            up = {t["labels"]["instance"] for t in seen if t["health"] == "up"}
            if up == targets and len(seen) == len(targets):
                break
        time.sleep(0.5)
    check(up == targets and seen is not None and len(seen) == len(targets),
          f"Prometheus' targets: {json.dumps(seen)[:1000] if seen else (status, body)}")
    note(f"Prometheus: every target up after {time.monotonic() - t1:.1f} s")

    r = node("status", spec_path, "--json", timeout=60)
    doc = json.loads(r.stdout) if r.stdout.strip() else {}
    roles = {p["name"]: p for p in doc.get("processes", [])}
    check(r.returncode == 0, f"node status: {r.returncode} {r.stdout[-500:]!r}")
    p = roles.get(f"prometheus-{HOST}", {})
    check(p.get("role") == "prometheus" and p.get("running") and p.get("ready") and
          p.get("endpoint") == f"{ADDRESS}:{prometheus_port}", f"node status of Prometheus: {p}")

    section("D. node stop")
    pids = [p["pid"] for p in doc.get("processes", [])]
    r = node("stop", spec_path, timeout=120)
    check(r.returncode == 0, f"node stop: {r.stderr[-500:]!r}")
    time.sleep(0.2)
    left = [p for p in pids if procs.alive(p)]
    check(not left and len(pids) == 5,
          f"processes left after node stop: {[(p, cluster_procs.cmdline(p)) for p in left]}; "
          f"{len(pids)} listed")


def cleanup():
    # Whatever happened: node stop, then anything still running from the test's directory.
    spec_path = os.path.join(TMP, "cluster.json")
    if os.path.exists(os.path.join(STORE, "run", f"node-{HOST}.json")):
        try:
            node("stop", spec_path, timeout=60)
        except Exception as e:  # noqa: BLE001
            print("cleanup: node stop:", e)
    procs.cleanup()


cluster_procs.run_test("node_metrics_test", main, T.report, cleanup)
