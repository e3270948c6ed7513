#!/usr/bin/env python3
"""The HTTP/JSON API of the aggregators (docs/operations.md, "HTTP/JSON API") against the CLI and
against the contract's status codes, on real local clusters.

A. One list of about 620 request lines: every read operation with its edge cases
   (graph_model.requests, searches, traversals), random writes of every kind
   (write_model.random_write), reads of what was written, a snapshot and reads at it, and
   malformed lines. Cluster A (plain, --http) answers the list as JSON lines of one POST
   /v1/query; cluster B (TLS, --http), started from a copy of the same store, answers it
   through `zipg query --connect --batch -`. The two outputs must be byte for byte the same, and
   their reads of the compressed base must equal the model's.
B. The GET routes equal the POST lines of the same operations.
C. Status codes on A: a malformed body 400, NOT_FOUND 404, ALREADY_EXISTS 409, a snapshot no
   longer held 412, more than 4096 lines 413, a body over 16 MiB 413 (refused on its
   Content-Length), a body that arrives too slowly 408 (A runs with --http-read-timeout-ms 1000),
   a call past its X-Zipg-Timeout-Ms 504, no such route 404, a wrong method 405.
D. TLS on B: HTTPS with a client certificate of the cluster's CA answers; without one, or with
   plain HTTP, nothing is answered.

Usage: http_api_test.py PATH/TO/zipg        (exit status 0 if everything passed)"""
import http.client
import json
import os
import random
import shutil
import socket
import ssl
import subprocess
import time
import urllib.parse

import cluster_procs
from graph_model import Model, load_model, requests as read_requests, same
from write_model import compressed_input, random_write

setup = cluster_procs.TestSetup("http_api_test", __doc__)
ZIPG, TMP, STORE_A = setup.zipg, setup.tmp, setup.store
check, section, note = setup.check, setup.section, setup.note
STORE_B = os.path.join(TMP, "store-b")
procs_b = cluster_procs.Procs("http_api_test (TLS cluster)", TMP, ZIPG, STORE_B)


def http_lines(out):
    """The `http URL` lines of `zipg local start`: [(host, port)]."""
    hosts = []
    for line in out.splitlines():
        if line.startswith("http "):
            u = urllib.parse.urlparse(line.split()[1])
            hosts.append((u.hostname, u.port))
    return hosts


def aggregators(out):
    return [line.split()[1] for line in out.splitlines() if line.startswith("aggregator ")]


def request(host, port, method, path, body=None, headers=None, context=None, timeout=30):
    """(status, body bytes) of one HTTP(S) request."""
    if context is None:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    else:
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def raw_exchange(host, port, data, wait):
    """Sends `data` on a plain socket and returns what comes back within `wait` seconds."""
    s = socket.create_connection((host, port), timeout=wait)
    try:
        s.sendall(data)
        s.settimeout(wait)
        got = b""
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            got += chunk
            if b"\r\n\r\n" in got:
                head, _, rest = got.partition(b"\r\n\r\n")
                length = [int(h.split(b":")[1]) for h in head.split(b"\r\n")
                          if h.lower().startswith(b"content-length:")]
                if length and len(rest) >= length[0]:
                    break
        return got
    finally:
        s.close()


def the_list(model, wmodel, inp, rnd):
    """The request lines of part A."""
    lines = []
    reads = read_requests(model, inp, rnd)
    rnd.shuffle(reads)
    universe = sorted(inp.ids)[:200] + [10_001, 10_002, 10_003]
    hot = universe[:5]
    for req in reads[:420]:
        lines.append(json.dumps(req))
    for k in range(160):
        w = random_write(wmodel, rnd, hot, universe)
        lines.append(json.dumps(w))
        if k % 8 == 0:  # read back what a write touched
            i = w.get("src", w.get("id"))
            lines.append(json.dumps({"op": "obj_get", "id": i}))
            if "type" in w:
                lines.append(json.dumps({"op": "assoc_range", "id": i, "type": w["type"],
                                         "pos": 0, "limit": 20}))
        if k == 80:
            lines.append(json.dumps({"op": "snapshot"}))
    lines += ["{not json", "[]", "{\"op\": 7}", "{\"op\": \"obj_get\"}",
              "{\"op\": \"obj_get\", \"id\": \"x\"}", "{\"op\": \"assoc_range\", \"id\": 1}",
              "{\"op\": \"nope\"}", "{\"op\": \"rpq\", \"expr\": \"0/(\"}", "   ", ""]
    return lines


def main():
    section("setup: a random input, compressed; a copy for the second cluster; certificates")
    rnd = random.Random(31)
    got = compressed_input(ZIPG, TMP, STORE_A, rnd, 2, check)
    if got is None:
        return
    inp, nodes_csv, edges_csv, wmodel = got
    model = Model(*load_model(nodes_csv, edges_csv))
    shutil.copytree(STORE_A, STORE_B)
    certs = os.path.join(TMP, "tls")
    r = subprocess.run([ZIPG, "deploy", "certs", "--hosts", "local", "--addresses", "127.0.0.1",
                        "--out", certs], capture_output=True, timeout=60)
    if not check(r.returncode == 0, f"deploy certs: {r.stderr[-300:]!r}"):
        return
    tls_server = ["--tls-ca", f"{certs}/ca.pem", "--tls-cert", f"{certs}/local.pem",
                  "--tls-key", f"{certs}/local.key"]
    tls_client = ["--tls-ca", f"{certs}/ca.pem", "--tls-cert", f"{certs}/client.pem",
                  "--tls-key", f"{certs}/client.key"]
    lines = the_list(model, wmodel, inp, rnd)

    section("A: cluster A (plain, --http): the list as one POST /v1/query")
    r, state = setup.procs.local_start(check, "--http", "--http-read-timeout-ms", "1000",
                                       "--snapshot-retention", "1")
    if state is None:
        return
    (host, port), = http_lines(r.stdout.decode())[:1]
    status, via_http = request(host, port, "POST", "/v1/query", "\n".join(lines) + "\n")
    check(status == 200, f"POST of the list: {status} {via_http[:200]!r}")
    note(f"{len(lines)} lines, {len(via_http)} bytes answered")
    seqs = [json.loads(x)["ok"]["seq"] for x in via_http.splitlines() if b'"seq"' in x]
    check(len(seqs) == 1, f"one snapshot answer: {seqs}")

    section("B: the GET routes equal the POST lines of their operations")
    for i in sorted(inp.ids)[:25] + [10_001, 999_999]:
        status, body = request(host, port, "GET", f"/v1/nodes/{i}")
        s2, line = request(host, port, "POST", "/v1/query", json.dumps({"op": "obj_get", "id": i}))
        check(body == line, f"GET /v1/nodes/{i}: {body[:200]!r} != {line[:200]!r}")
        check(status == (404 if json.loads(body)["ok"] is None else 200),
              f"GET /v1/nodes/{i}: status {status}")
        for t in (0, 1):
            q = rnd.choice(["", "?pos=1&limit=3", "?limit=1", "?pos=0&limit=1000"])
            params = dict(urllib.parse.parse_qsl(q[1:]))
            status, body = request(host, port, "GET", f"/v1/nodes/{i}/edges/{t}{q}")
            req = {"op": "assoc_range", "id": i, "type": t, "pos": int(params.get("pos", 0)),
                   "limit": int(params.get("limit", 100))}
            _, line = request(host, port, "POST", "/v1/query", json.dumps(req))
            check(status == 200 and body == line, f"GET edges {i}/{t}{q}: {status} {body[:200]!r}")

    section("C: status codes")
    time.sleep(2.5)  # past the retention of the snapshot taken in the list
    one = lambda body, headers=None: request(host, port, "POST", "/v1/query", body, headers)  # noqa: E731
    existing = sorted(inp.node_ids)[0]
    cases = [
        ("malformed JSON", "{\"op\": ", 400, "INVALID_ARGUMENT"),
        ("unknown op", "{\"op\": \"nope\"}", 400, "INVALID_ARGUMENT"),
        ("obj_update of a missing node", json.dumps({"op": "obj_update", "id": 777_777,
                                                      "properties": {"a": "b"}}), 404, "NOT_FOUND"),
        ("obj_add of a live node", json.dumps({"op": "obj_add", "id": existing, "properties": {}}),
         409, "ALREADY_EXISTS"),
        ("a snapshot no longer held (retention 1 s)",
         json.dumps({"op": "obj_get", "id": existing, "at": seqs[0] if seqs else 1}), 412,
         "FAILED_PRECONDITION"),
        ("4097 lines", "\n".join([json.dumps({"op": "obj_get", "id": 1})] * 4097), 413,
         "RESOURCE_EXHAUSTED"),
    ]
    for what, body, want, code in cases:
        status, answer = one(body)
        check(status == want, f"{what}: status {status}, want {want}: {answer[:200]!r}")
        check(json.loads(answer.splitlines()[0]).get("error", {}).get("code") == code,
              f"{what}: {answer[:200]!r}")
    status, answer = one(json.dumps({"op": "rpq", "expr": "_*"}), {"X-Zipg-Timeout-Ms": "0"})
    check(status == 504 and b"DEADLINE_EXCEEDED" in answer, f"timeout 0: {status} {answer[:200]!r}")
    status, answer = one(json.dumps({"op": "rpq", "expr": "0", "limit": 5}),
                         {"X-Zipg-Timeout-Ms": "5000"})
    check(status == 200, f"timeout 5000: {status} {answer[:200]!r}")
    big = raw_exchange(host, port, b"POST /v1/query HTTP/1.1\r\nHost: x\r\n"
                       b"Content-Length: 17000000\r\n\r\n{\"op\"", 10)
    check(big.startswith(b"HTTP/1.1 413"), f"17 MB body: {big[:200]!r}")
    t0 = time.monotonic()
    slow = raw_exchange(host, port, b"POST /v1/query HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Length: 40\r\n\r\n{\"op\": ", 10)
    took = time.monotonic() - t0
    check(slow.startswith(b"HTTP/1.1 408") and took < 5,
          f"slow body: {slow[:200]!r} after {took:.1f} s")
    for method, path, want in [("GET", "/v1/nope", 404), ("GET", "/v1/query", 405),
                               ("DELETE", "/v1/status", 405), ("GET", "/v1/nodes/-3", 400),
                               ("GET", "/static/nope.js", 404)]:
        status, answer = request(host, port, method, path)
        check(status == want, f"{method} {path}: {status}, want {want}: {answer[:200]!r}")
    status, index = request(host, port, "GET", "/")
    check(status == 200 and b"<html" in index.lower(), f"GET /: {status} {index[:100]!r}")
    status, doc = request(host, port, "GET", "/v1/status")
    doc = json.loads(doc)
    check(status == 200 and doc.get("healthy") is True and
          all("status" in m for m in doc.get("servers", [])),
          f"GET /v1/status: {status} {json.dumps(doc)[:300]}")
    setup.procs.local_stop(check, STORE_A, ZIPG)

    section("A': cluster B (TLS, --http): the same list through zipg query --batch")
    r, state = procs_b.local_start(check, "--http", *tls_server)
    if state is None:
        return
    agg = aggregators(r.stdout.decode())[0]
    got = subprocess.run([ZIPG, "query", "--connect", agg, *tls_client, "--batch", "-"],
                         input="\n".join(lines).encode() + b"\n", capture_output=True, timeout=300)
    check(got.returncode == 0, f"query --batch: {got.stderr[-300:]!r}")
    via_cli = got.stdout
    check(via_cli == via_http, "the HTTP and CLI answers differ")
    if via_cli != via_http:
        a, b = via_http.splitlines(), via_cli.splitlines()
        note(f"{len(a)} HTTP lines, {len(b)} CLI lines")
        for k, (x, y) in enumerate(zip(a, b)):
            if x != y:
                note(f"first difference at line {k + 1}: {lines[k][:150]}\n   http {x[:200]!r}\n"
                     f"   cli  {y[:200]!r}")
                break
    answers = [json.loads(x) for x in via_http.splitlines()]
    check(len(answers) == len([x for x in lines if x.strip()]), "one answer per request line")
    errors = sum(1 for a in answers if "error" in a)
    note(f"{len(answers)} answers, {errors} errors, byte-identical: {via_cli == via_http}")
    # The reads before the first write answer as the model of the compressed input.
    for line, answer in zip(lines, answers):
        req = json.loads(line)
        if req.get("op") in ("obj_add", "obj_update", "obj_delete", "assoc_add", "assoc_update",
                             "assoc_delete"):
            break
        want = model.run(req)
        check(same(answer, want), f"{line[:150]}: {json.dumps(answer)[:200]} != {json.dumps(want)[:200]}")

    section("D: TLS on cluster B's HTTP port")
    (bhost, bport), = http_lines(r.stdout.decode())[:1]
    ctx = ssl.create_default_context(cafile=f"{certs}/ca.pem")
    ctx.check_hostname = False
    ctx.load_cert_chain(f"{certs}/client.pem", f"{certs}/client.key")
    status, body = request(bhost, bport, "POST", "/v1/query",
                           json.dumps({"op": "obj_get", "id": existing}), context=ctx)
    check(status == 200 and json.loads(body)["ok"]["id"] == existing,
          f"HTTPS with a client certificate: {status} {body[:200]!r}")
    no_cert = ssl.create_default_context(cafile=f"{certs}/ca.pem")
    no_cert.check_hostname = False
    for what, ctx2 in [("HTTPS without a client certificate", no_cert), ("plain HTTP", None)]:
        try:
            status, body = request(bhost, bport, "GET", "/v1/status", context=ctx2, timeout=5)
            check(False, f"{what} was answered: {status} {body[:100]!r}")
        except (ssl.SSLError, ConnectionError, http.client.HTTPException, OSError):
            pass
    procs_b.local_stop(check, STORE_B, ZIPG)


def cleanup():
    procs_b.cleanup()
    setup.procs.cleanup()


cluster_procs.run_test("http_api_test", main, setup.report, cleanup)
