#!/usr/bin/python3
"""End-to-end test of the metrics (docs/operations.md, "Metrics" and "Prometheus and Grafana")
with a real Prometheus server, on a real local cluster: `zipg local start --replicas 2
--logstores 2 --metrics --http --merge-width 2 --merge-ratio 100` (etcd, 2 shard servers that
each serve both shards, the LogStore and its standby, 2 aggregators). The test starts its own
Prometheus (Debian's `prometheus`: scrape interval 1 s, a free port, a storage directory in the
test's directory) with a configuration it writes from the `metrics ROLE NAME URL` lines that
`local start` prints; the queries go through Prometheus' HTTP API (/api/v1/query).

A. Every server's /metrics is valid text exposition (each sample under its # TYPE, histogram
   buckets cumulative and ending in +Inf = _count, counters named _total), and passes
   `promtool check metrics` (Prometheus' linter; the config passes `promtool check config`);
   zipg_build_info{role, name} = 1 names the server as `local start` printed it; Prometheus
   scrapes every server (up = 1).
B. Before any load: the aggregators' calls/s (sum of rate(zipg_rpc_calls_total) over the
   aggregators, selected by joining zipg_build_info{role="aggregator"}), their p99
   (histogram_quantile(0.99) of zipg_rpc_call_duration_seconds) and the LogStore leader's
   writes/s (rate(zipg_logstore_writes_total)) are 0 or absent.
C. Under `zipg bench --mix linkbench-rw --connections 4 --duration 8` (the LinkBench mix with its
   writes: `--mix linkbench` is read-only), with two `zipg admin compact` meanwhile: the same
   queries are positive, evaluated 1 s before the bench's end over a 6 s window inside its
   measured seconds. The reference is the bench's own report: the calls/s are within 1.5x of its
   overall ops/s, and per operation of its ops/s (one client operation is one aggregator call);
   the writes/s within 1.5x of its write operations' ops/s; the p99 (server side, interpolated
   in buckets 2.5x apart) between 1/10 and 2.5x of its client-side p99.
D. A rebuild, HTTP API requests (200, 404) and an assoc_range with limit -1 (INVALID_ARGUMENT),
   so that every metric has had its event; then the table of docs/operations.md ("Metrics")
   against the servers' own /metrics: every metric it names is exported with its type and
   labels (and the label values it lists) on every server of the role(s) its source column
   names (a row without one: the row above's), and nowhere else;
   zipg_shard_rebuild_duration_seconds on at least one shard server (one replica builds, the
   others adopt its files); and every zipg_ metric a server exports is in the table. Any
   difference between the table and the code fails the test.
E. docs/grafana-dashboard.json: a Grafana dashboard JSON model (unique panel ids, a 24-column grid
   without overlaps, every panel on the `${datasource}` variable of type datasource / query
   prometheus, the panels an operator needs); every metric name in its PromQL exists on some
   server; every expression evaluates through Prometheus (Grafana's $__rate_interval as 1m,
   $role as aggregator) to a non-empty result, and so does every ```promql example of
   docs/operations.md.
F. Prometheus stopped, `zipg local stop` leaves no process.
Without Debian's `prometheus` (scripts/setup.sh installs it) the test fails: it does not skip.

Usage: prometheus_test.py PATH/TO/zipg        (exit status 0 if everything passed)"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_procs  # noqa: E402

T = cluster_procs.TestSetup("prometheus_test", __doc__)
check, section, note = T.check, T.section, T.note
TMP, ZIPG, STORE, procs, report = T.tmp, T.zipg, T.store, T.procs, T.report
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPERATIONS_MD = os.path.join(ROOT, "docs", "operations.md")
DASHBOARD = os.path.join(ROOT, "docs", "grafana-dashboard.json")
ROLES = ("aggregator", "logstore", "shard")
BENCH_SECONDS = 8
WINDOW = "6s"       # rate() window of the checks under load: inside the bench's measured seconds
FACTOR = 1.5        # Prometheus' rates against the bench's report
WRITE_OPS = {"assoc_add", "assoc_update", "obj_update", "assoc_delete", "obj_add", "obj_delete"}
ON_ONE = {"zipg_shard_rebuild_duration_seconds"}  # observed only where the event ran

AGGREGATORS = 'on(instance) group_left() zipg_build_info{role="aggregator"}'
CALLS = f"sum(rate(zipg_rpc_calls_total[{WINDOW}]) * {AGGREGATORS})"
CALLS_BY_OP = f"sum by (op) (rate(zipg_rpc_calls_total[{WINDOW}]) * {AGGREGATORS})"
P99 = (f"histogram_quantile(0.99, sum by (le) "
       f"(rate(zipg_rpc_call_duration_seconds_bucket[{WINDOW}]) * {AGGREGATORS}))")
WRITES = (f"sum(rate(zipg_logstore_writes_total[{WINDOW}]) * "
          f"on(instance) group_left() zipg_logstore_leader)")


def zipg(*args, timeout=120):
    return subprocess.run([ZIPG, *args], capture_output=True, text=True, timeout=timeout)


def http(url, data=None, timeout=10):
    """(status, body text) of a GET (or a POST of `data`); status 0 if the request failed."""
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except OSError as e:
        return 0, str(e)


# ------------------------------------------------------------------------------------------------
# The text exposition format (0.0.4).
SAMPLE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?[ \t]+(\S+)(?:[ \t]+-?\d+)?$")
LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')


def parse_labels(text):
    labels, pos = {}, 0
    while pos < len(text):
        m = LABEL_RE.match(text, pos)
        if not m:
            return None
        labels[m.group(1)] = m.group(2)
        pos = m.end()
    return labels


def parse_exposition(text):
    """(families: name -> {"type", "samples": [(sample name, labels, value)]}, errors)."""
    families, errors, current = {}, [], None
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                current = parts[2]
                if current in families:
                    errors.append(f"line {n}: a second # TYPE for {current}")
                families[current] = {"type": parts[3].strip(), "samples": []}
            continue
        m = SAMPLE_RE.match(line)
        labels = parse_labels(m.group(2) or "") if m else None
        if not m or labels is None:
            errors.append(f"line {n}: not a sample: {line[:120]!r}")
            continue
        name = m.group(1)
        try:
            value = float(m.group(3))
        except ValueError:
            errors.append(f"line {n}: bad value: {line[:120]!r}")
            continue
        fam = families.get(current) if current else None
        suffixes = ("_bucket", "_sum", "_count") if fam and fam["type"] == "histogram" else ("",)
        if not fam or not any(name == current + s for s in suffixes):
            errors.append(f"line {n}: {name} is not under its # TYPE (current: {current})")
            continue
        fam["samples"].append((name, labels, value))
    for name, fam in families.items():
        if fam["type"] == "histogram":
            series = {}
            for sname, labels, value in fam["samples"]:
                key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
                series.setdefault(key, {"buckets": [], "count": None})
                if sname.endswith("_bucket"):
                    le = labels.get("le")
                    if le is None:
                        errors.append(f"{name}: a bucket without le")
                        continue
                    series[key]["buckets"].append((float(le), value))
                elif sname.endswith("_count"):
                    series[key]["count"] = value
            for key, s in series.items():
                b = s["buckets"]
                if not b or b[-1][0] != math.inf or b[-1][1] != s["count"]:
                    errors.append(f"{name}{dict(key)}: +Inf bucket {b[-1:] if b else None} vs "
                                  f"_count {s['count']}")
                if any(b[k][0] >= b[k + 1][0] or b[k][1] > b[k + 1][1] for k in range(len(b) - 1)):
                    errors.append(f"{name}{dict(key)}: buckets not cumulative: {b}")
        if fam["type"] == "counter" and not name.endswith("_total"):
            errors.append(f"{name}: a counter not named _total")
    return families, errors


def scrape(url):
    status, text = http(url)
    if status != 200:
        return None, [f"GET {url}: {status} {text[:200]}"]
    return parse_exposition(text)


def present(families):
    """Names of the families with at least one sample."""
    return {n for n, f in families.items() if f["samples"]}


# ------------------------------------------------------------------------------------------------
# The table of docs/operations.md.
def metric_table():
    """[(names, type, {label: [values]}, roles, row text)] of the "Metrics" section's table, and
    the problems found reading it."""
    with open(OPERATIONS_MD) as f:
        text = f.read()
    m = re.search(r"^## Metrics\n(.*?)(?=^## )", text, re.S | re.M)
    if not m:
        return [], ["docs/operations.md has no \"## Metrics\" section"]
    rows, problems, previous_roles = [], [], None
    for line in m.group(1).splitlines():
        if not line.startswith("| `zipg_"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]  # not "\|"
        if len(cells) != 4:
            problems.append(f"a row of {len(cells)} cells: {line}")
            continue
        names = re.findall(r"`(zipg_[a-z0-9_]+)`", cells[0])
        labels = {}
        for lm in re.finditer(r"`([a-z_]+)`(?:\s*\(([^)]*)\))?", cells[2]):
            labels[lm.group(1)] = re.findall(r"`([^`]+)`", lm.group(2) or "")
        roles = source_roles(cells[3]) or previous_roles
        if roles is None:
            problems.append(f"no role in the source column: {line}")
            continue
        previous_roles = roles
        rows.append((names, cells[1], labels, roles, line))
    if not rows:
        problems.append("the Metrics table has no rows")
    return rows, problems


def source_roles(source):
    """The server roles a source cell names: a set of "aggregator", "logstore", "leader" (the
    LogStore leader only), "shard"; None if it names none."""
    s = source.split(":")[0].lower()  # "shard server: LogStore's applied id ..." is a shard's
    if s.startswith("every server"):
        return {"aggregator", "logstore", "shard"}
    if "shard servers and the logstore" in s:
        return {"shard", "logstore"}
    if "logstore leader" in s:
        return {"leader"}
    if "logstore" in s:
        return {"logstore"}
    if "shard server" in s:
        return {"shard"}
    if "aggregator" in s:
        return {"aggregator"}
    return None


# ------------------------------------------------------------------------------------------------
class Prometheus:
    def __init__(self, url):
        self.url = url

    def query(self, expr, at=None):
        """(ok, [(labels, value)], error text) of an instant query."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        status, body = http(self.url + "api/v1/query?" + urllib.parse.urlencode(params))
        try:
            doc = json.loads(body)
        except ValueError:
            return False, [], f"{status}: {body[:300]}"
        if doc.get("status") != "success":
            return False, [], f"{status}: {doc.get('errorType')}: {doc.get('error')}"
        data = doc["data"]
        if data["resultType"] == "scalar":
            return True, [({}, float(data["result"][1]))], ""
        return True, [(r["metric"], float(r["value"][1])) for r in data["result"]], ""

    def value(self, expr, at=None):
        """The single value of a query; None if absent or NaN (and a failed check if it errs)."""
        ok, result, err = self.query(expr, at)
        check(ok, f"query {expr}: {err}")
        if not result:
            return None
        check(len(result) == 1, f"query {expr}: {len(result)} series: {result[:4]}")
        v = result[0][1]
        return None if math.isnan(v) else v


def parse_bench(text):
    """operation -> (ops/s, p50 us, p95 us, p99 us) of the bench's report table."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+[\d.]+%\s*$", line)
        if m:
            rows[m.group(1)] = tuple(float(x) for x in m.group(2, 3, 4, 5))
    return rows


def within(a, b, factor):
    return a > 0 and b > 0 and 1 / factor <= a / b <= factor


# ================================================================================================
def main():
    # -------------------------------------------------------------------------------------------
    section("setup: gen graph, compress, local start --replicas 2 --logstores 2 --metrics --http")
    prometheus_bin = shutil.which("prometheus")
    if not check(prometheus_bin is not None,
                 "Debian's `prometheus` is not installed (scripts/setup.sh installs it: "
                 "apt-get install prometheus); this test needs a real Prometheus server"):
        return
    data = os.path.join(TMP, "data")
    r = zipg("gen", "graph", "--nodes", "2000", "--out", data)
    if not check(r.returncode == 0, f"gen graph: {r.stderr[-300:]}"):
        return
    r = zipg("compress", "--nodes", os.path.join(data, "nodes.csv"), "--edges",
             os.path.join(data, "edges.csv"), "--out", STORE, "--shards", "2", timeout=300)
    if not check(r.returncode == 0, f"compress: {r.stderr[-300:]}"):
        return
    r, state = procs.local_start(check, "--replicas", "2", "--logstores", "2", "--metrics",
                                 "--http", "--merge-width", "2", "--merge-ratio", "100")
    if state is None:
        return
    out = r.stdout.decode()
    servers = []  # (role, name, metrics URL)
    http_urls = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "metrics":
            servers.append((parts[1], parts[2], parts[3]))
        elif len(parts) == 2 and parts[0] == "http":
            http_urls.append(parts[1])
    roles = sorted(role for role, _, _ in servers)
    if not check(roles == ["aggregator", "aggregator", "logstore", "logstore", "shard", "shard"]
                 and len(http_urls) == 2, f"local start printed: {out[-1500:]}"):
        return
    by_name = {name: (role, url) for role, name, url in servers}
    note("servers: " + ", ".join(f"{name} ({role})" for role, name, _ in servers))

    # -------------------------------------------------------------------------------------------
    section("A. /metrics on every server; our own Prometheus scraping all of them")
    promtool = shutil.which("promtool")  # Debian's prometheus package has it too
    check(promtool is not None, "promtool (Debian's prometheus package) is not installed")
    for role, name, url in servers:
        status, text = http(url)
        families, errors = parse_exposition(text) if status == 200 else (None, [status, text])
        check(families is not None and not errors,
              f"{name}: /metrics is not valid exposition: {errors[:5]}")
        if promtool:  # Prometheus' own linter of the exposition (names, types, help)
            lint = subprocess.run([promtool, "check", "metrics"], input=text,
                                  capture_output=True, text=True, timeout=30)
            check(lint.returncode == 0, f"{name}: promtool check metrics: {lint.stdout[-800:]} "
                                        f"{lint.stderr[-800:]}")
        info = (families or {}).get("zipg_build_info", {"samples": []})["samples"]
        check(len(info) == 1 and info[0][1] == {"role": role, "name": name} and info[0][2] == 1,
              f"{name}: zipg_build_info {info}")
        check(all(n.startswith("zipg_") for n in (families or {})),
              f"{name}: names without the zipg_ prefix: "
              f"{[n for n in families or {} if not n.startswith('zipg_')]}")
    pdir = os.path.join(TMP, "prometheus")
    os.makedirs(os.path.join(pdir, "data"))
    targets = ", ".join(f'"{urllib.parse.urlsplit(u).netloc}"' for _, _, u in servers)
    with open(os.path.join(pdir, "prometheus.yml"), "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: zipg\n    metrics_path: /metrics\n"
                f"    static_configs:\n      - targets: [{targets}]\n")
    if promtool:
        lint = subprocess.run([promtool, "check", "config", os.path.join(pdir, "prometheus.yml")],
                              capture_output=True, text=True, timeout=30)
        check(lint.returncode == 0, f"promtool check config: {lint.stdout} {lint.stderr}")
    port = cluster_procs.free_port()
    ppid = procs.start_server([prometheus_bin,
                               "--config.file=" + os.path.join(pdir, "prometheus.yml"),
                               "--storage.tsdb.path=" + os.path.join(pdir, "data"),
                               f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                              os.path.join(pdir, "prometheus.log"))
    prom = Prometheus(f"http://127.0.0.1:{port}/")

    def prometheus_log():
        with open(os.path.join(pdir, "prometheus.log"), "rb") as f:
            return f.read()[-1500:].decode("utf-8", "replace")

    t = time.monotonic()
    while time.monotonic() - t < 30 and procs.alive(ppid) and http(prom.url + "-/ready")[0] != 200:
        time.sleep(0.1)
    if not check(http(prom.url + "-/ready")[0] == 200,
                 f"prometheus ready on port {port}: {prometheus_log()}"):
        return
    note(f"prometheus ready in {time.monotonic() - t:.1f} s")
    # Enough scrapes of every server for a rate over WINDOW (and none down).
    want = len(servers)
    while time.monotonic() - t < 30:
        ok, res, _ = prom.query("count_over_time(up[6s]) >= 3 and up == 1")
        if ok and len(res) == want:
            break
        time.sleep(0.2)
    ok, res, err = prom.query("up")
    check(ok and len(res) == want and all(v == 1 for _, v in res),
          f"up for every server: {err} {res}")
    ok, res, err = prom.query("count_over_time(up[6s])")
    check(ok and len(res) == want and all(v >= 3 for _, v in res),
          f"3 scrapes of every server within 6 s: {res}")
    ok, res, _ = prom.query("zipg_build_info")
    check(sorted((m.get("role"), m.get("name")) for m, _ in res) ==
          sorted((role, name) for role, name, _ in servers),
          f"zipg_build_info through Prometheus: {[m for m, _ in res]}")

    # -------------------------------------------------------------------------------------------
    section("B. no load: calls/s, p99 and LogStore writes/s are 0 or absent")
    before = {"calls": prom.value(CALLS), "p99": prom.value(P99), "writes": prom.value(WRITES)}
    note(f"before the load: {before}")
    check(before["calls"] is None or before["calls"] <= 1.0, f"calls/s before the load: {before}")
    check(before["p99"] is None or before["p99"] == 0, f"p99 before the load: {before}")
    check(before["writes"] is None or before["writes"] == 0, f"writes/s before the load: {before}")

    # -------------------------------------------------------------------------------------------
    section(f"C. zipg bench --mix linkbench-rw --connections 4 --duration {BENCH_SECONDS}")
    bench_out = open(os.path.join(TMP, "bench.txt"), "w+")
    t_bench = time.monotonic()
    bench = subprocess.Popen([ZIPG, "bench", "--store", STORE, "--mix", "linkbench-rw",
                              "--connections", "4", "--duration", str(BENCH_SECONDS)],
                             stdout=bench_out, stderr=subprocess.STDOUT, text=True)
    procs.children[bench.pid] = bench  # stopped by the cleanup if the test is interrupted
    compactions = []
    for delay in (3.5, 6.5):  # two compactions under the load: a merge of their log shards follows
        time.sleep(max(0.0, t_bench + delay - time.monotonic()))
        c = zipg("admin", "compact", "--store", STORE, timeout=60)
        try:
            compactions.append(json.loads(c.stdout))
        except ValueError:
            compactions.append({"error": c.stdout[-200:] + c.stderr[-300:]})
    try:
        bench.wait(timeout=BENCH_SECONDS + 60)
    except subprocess.TimeoutExpired:
        bench.kill()
        bench.wait()
    t_end = time.time()
    bench_out.seek(0)
    text = bench_out.read()
    bench_out.close()
    check(bench.returncode == 0, f"bench: exit {bench.returncode}: {text[-1500:]}")
    check(all(c.get("compacted") is True for c in compactions),
          f"admin compact under the load: {compactions}")
    rows = parse_bench(text)
    if not check("overall" in rows, f"the bench's report: {text[-1500:]}"):
        return
    print("\n".join("   | " + ln for ln in text.strip().splitlines()[-14:]))
    time.sleep(1.5)  # a scrape after the evaluation time
    at = t_end - 1.0
    under = {"calls": prom.value(CALLS, at), "p99": prom.value(P99, at),
             "writes": prom.value(WRITES, at)}
    bench_ops, bench_p99 = rows["overall"][0], rows["overall"][3] / 1e6
    bench_writes = sum(v[0] for op, v in rows.items() if op in WRITE_OPS)
    note(f"under the load (rate over {WINDOW}, 1 s before the bench's end): calls/s "
         f"{under['calls']}, p99 {under['p99']} s, LogStore writes/s {under['writes']}")
    note(f"the bench's report: {bench_ops:.0f} ops/s, {bench_writes:.0f} writes/s, "
         f"p99 {bench_p99 * 1e3:.2f} ms")
    calls, p99, writes = (under[k] or 0 for k in ("calls", "p99", "writes"))
    check(calls > 0 and within(calls, bench_ops, FACTOR),
          f"aggregators' calls/s {calls} vs the bench's {bench_ops} ops/s (within {FACTOR}x)")
    check(writes > 0 and within(writes, bench_writes, FACTOR),
          f"LogStore leader's writes/s {writes} vs the bench's {bench_writes} write ops/s "
          f"(within {FACTOR}x)")
    check(p99 > 0 and bench_p99 / 10 <= p99 <= bench_p99 * 2.5,
          f"aggregators' p99 {p99} s vs the bench's (client-side) p99 {bench_p99} s")
    ok, res, err = prom.query(CALLS_BY_OP, at)
    per_op = {m.get("op"): v for m, v in res} if ok else {}
    compared = []
    for op, (ops, *_rest) in sorted(rows.items()):
        if op == "overall" or ops < 50:  # too few calls in the window for a steady rate
            continue
        got = per_op.get(op, 0)
        compared.append(f"{op} {got:.0f}/{ops:.0f}")
        check(within(got, ops, FACTOR), f"{op}: aggregators' calls/s {got} vs the bench's {ops}")
    check(len(compared) >= 5, f"operations compared: {compared}")
    note("calls/s per operation, Prometheus/bench: " + ", ".join(compared))

    # -------------------------------------------------------------------------------------------
    section("D. every metric of docs/operations.md's table on the servers of its role")
    r = zipg("admin", "rebuild", "--store", STORE, timeout=120)
    check(r.returncode == 0, f"admin rebuild: {r.stdout[-300:]} {r.stderr[-300:]}")
    for url in http_urls:
        status, body = http(url + "v1/status")
        check(status == 200, f"GET {url}v1/status: {status} {body[:200]}")
        status, _ = http(url + "v1/nodes/1")
        check(status == 200, f"GET {url}v1/nodes/1: {status}")
        status, _ = http(url + "v1/nodes/987654321")
        check(status == 404, f"GET {url}v1/nodes/987654321: {status}")
        status, _ = http(url + "v1/query", data=b'{"op": "obj_get", "id": 2}')
        check(status == 200, f"POST {url}v1/query: {status}")
    for agg in state["aggregators"]:  # an error through Thrift (the errors-by-code panel)
        q = zipg("query", "--connect", agg, "assoc_range", "--id", "1", "--type", "0", "--pos",
                 "0", "--limit", "-1", timeout=30)
        check(q.returncode == 1 and "INVALID_ARGUMENT" in q.stdout,
              f"assoc_range with limit -1: {q.returncode} {q.stdout[-200:]} {q.stderr[-200:]}")
    # Who leads (the status document, not the metrics).
    _, body = http(http_urls[0] + "v1/status")
    try:
        members = json.loads(body).get("servers", [])
    except ValueError:
        members = []
    leaders = [m["name"] for m in members if m.get("role") == "logstore" and m.get("leader")]
    check(len(leaders) == 1, f"one LogStore leader in /v1/status: {members}")
    # The merge of the two compactions' log shards, on both LogStores.
    scraped = {}
    t = time.monotonic()
    while True:
        scraped = {name: scrape(url)[0] or {} for _, name, url in servers}
        merges = {n: [v for _, _, v in f.get("zipg_logstore_merges_total",
                                             {"samples": []})["samples"]]
                  for n, f in scraped.items() if by_name[n][0] == "logstore"}
        if all(v and v[0] >= 1 for v in merges.values()) or time.monotonic() - t > 30:
            break
        time.sleep(0.2)
    check(all(v and v[0] >= 1 for v in merges.values()), f"a merge on each LogStore: {merges}")

    table, problems = metric_table()
    for p in problems:
        check(False, f"docs/operations.md: {p}")
    expected = {}  # metric -> (type, labels, roles, row)
    for names, mtype, labels, roles, line in table:
        for n in names:
            check(n not in expected, f"docs/operations.md names {n} twice")
            expected[n] = (mtype, labels, roles, line)

    def role_of(name):
        role = by_name[name][0]
        return {role, "leader"} if role == "logstore" and name in leaders else {role}

    missing, wrong = [], []
    for metric, (mtype, labels, roles, line) in sorted(expected.items()):
        should = [n for n in scraped if role_of(n) & roles]
        has = [n for n in scraped if metric in present(scraped[n])]
        if metric in ON_ONE:
            if not has or not set(has) <= set(should):
                missing.append(f"{metric}: on {has or 'no server'}, the table says on one of "
                               f"{should}")
        elif sorted(has) != sorted(should):
            lacking = sorted(set(should) - set(has))
            extra = sorted(set(has) - set(should))
            (missing if lacking and not has else wrong).append(
                f"{metric}: the table says on {sorted(should)}; "
                + (f"not exported by {lacking}" if lacking else "")
                + ("; " if lacking and extra else "")
                + (f"also exported by {extra}" if extra else ""))
        for n in has:
            fam = scraped[n][metric]
            if fam["type"] != mtype:
                wrong.append(f"{metric}: the table says {mtype}, {n} exports a {fam['type']}")
            got = {}
            for _, lab, _ in fam["samples"]:
                for k, v in lab.items():
                    if k != "le":
                        got.setdefault(k, set()).add(v)
            if set(got) != set(labels):
                wrong.append(f"{metric}: the table's labels {sorted(labels)}, {n} exports "
                             f"{sorted(got)}")
            for k, values in labels.items():
                if values and got.get(k) and got[k] != set(values):
                    wrong.append(f"{metric}: the table's {k} values {sorted(values)}, {n} "
                                 f"exports {sorted(got[k])}")
    unlisted = {}
    for n, fams in scraped.items():
        for metric in present(fams):
            if metric not in expected:
                unlisted.setdefault(metric, []).append(n)
    # One failure per metric, so that the report is the list of differences.
    for m in missing:
        check(False, f"in the table, not exported: {m}")
    for m in sorted(set(wrong)):
        check(False, f"the table and the code differ: {m}")
    for metric, names in sorted(unlisted.items()):
        check(False, f"exported, not in the table: {metric} ({scraped[names[0]][metric]['type']}, "
                     f"on {', '.join(sorted(names))})")
    note(f"the table: {len(expected)} metrics; not exported: {len(missing)}, differing: "
         f"{len(set(wrong))}, exported but not in the table: {len(unlisted)}")

    # -------------------------------------------------------------------------------------------
    section("E. docs/grafana-dashboard.json")
    exported = set()
    for fams in scraped.values():
        for metric, fam in fams.items():
            exported.add(metric)
            exported.update(s for s, _, _ in fam["samples"])
    try:
        with open(DASHBOARD) as f:
            dash = json.load(f)
    except (OSError, ValueError) as e:
        check(False, f"{DASHBOARD}: {e}")
        dash = {}
    exprs = check_dashboard(dash)
    used = set()
    for _, expr in exprs:
        used.update(re.findall(r"\bzipg_[a-zA-Z0-9_]+", expr))
    for metric in sorted(used - exported):
        check(False, f"the dashboard uses {metric}, which no server exports")
    for metric in ("zipg_rpc_calls_total", "zipg_rpc_call_duration_seconds_bucket",
                   "zipg_logstore_writes_total", "zipg_logstore_commit_groups_total",
                   "zipg_logstore_commit_stage_seconds_total", "zipg_logstore_wal_syncs_total",
                   "zipg_logstore_memtable_bytes", "zipg_logstore_log_shards",
                   "zipg_logstore_compactions_total", "zipg_logstore_merges_total",
                   "zipg_logstore_compaction_duration_seconds_sum",
                   "zipg_logstore_merge_duration_seconds_sum", "zipg_shard_rebuilds_total",
                   "zipg_shard_rebuild_duration_seconds_sum", "zipg_logstore_applied_id",
                   "zipg_shard_committed_id", "zipg_shard_serving",
                   "zipg_logstore_standby_in_sync", "zipg_logstore_epoch",
                   "zipg_process_resident_memory_bytes", "zipg_store_mapped_bytes",
                   "zipg_http_requests_total"):
        check(metric in used, f"the dashboard has no panel on {metric}")
    check(any("histogram_quantile(0.5," in e for _, e in exprs) and
          any("histogram_quantile(0.99," in e for _, e in exprs), "the dashboard: p50 and p99")
    ok, res, err = prom.query("group by (role) (zipg_build_info)")
    check(ok and sorted(m.get("role") for m, _ in res) == list(ROLES),
          f"the role variable's values (label_values(zipg_build_info, role)): {res} {err}")
    # Every expression as Grafana would send it; the newest series need two scrapes first.
    pending = {}
    t = time.monotonic()
    while True:
        pending = {}
        for title, expr in exprs:
            q = expr.replace("$__rate_interval", "1m").replace("${role}", "aggregator")
            q = q.replace("$role", "aggregator")
            ok, res, err = prom.query(q)
            if not ok or not res:
                pending[title] = (q, err or "no data")
        if not pending or time.monotonic() - t > 10:
            break
        time.sleep(0.5)
    for title, (q, err) in pending.items():
        check(False, f"dashboard panel {title!r}: {q}: {err}")
    note(f"the dashboard: {len(exprs)} expressions, {len(used)} metric names, "
         f"{len(exprs) - len(pending)} with data")
    # The PromQL examples of docs/operations.md evaluate too.
    with open(OPERATIONS_MD) as f:
        examples = re.findall(r"^```promql\n(.*?)^```", f.read(), re.S | re.M)
    check(len(examples) >= 3, f"docs/operations.md: {len(examples)} ```promql examples")
    for expr in examples:
        ok, res, err = prom.query(expr)
        check(ok and res, f"docs/operations.md's example {expr.strip()!r}: {err or 'no data'}")

    # -------------------------------------------------------------------------------------------
    section("F. stop Prometheus and the cluster")
    check(not procs.kill_and_wait([ppid], grace=10), "prometheus stops on SIGTERM")
    procs.local_stop(check, STORE, ZIPG)


def check_dashboard(dash):
    """Checks the dashboard's structure; returns [(panel title, expr)]."""
    check(isinstance(dash.get("title"), str) and dash.get("uid") and
          isinstance(dash.get("schemaVersion"), int) and dash["schemaVersion"] >= 30,
          f"dashboard: title, uid, schemaVersion: {dash.get('title')!r} {dash.get('uid')!r} "
          f"{dash.get('schemaVersion')!r}")
    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    ds = variables.get("datasource", {})
    check(ds.get("type") == "datasource" and ds.get("query") == "prometheus",
          f"dashboard: a datasource variable for Prometheus: {ds}")
    ref = {"type": "prometheus", "uid": "${datasource}"}
    for name, v in variables.items():
        if v.get("type") == "query":
            check(v.get("datasource") == ref, f"dashboard variable {name}: datasource "
                                             f"{v.get('datasource')}")
    panels = dash.get("panels")
    if not check(isinstance(panels, list) and panels, "dashboard: panels"):
        return []
    ids, cells, exprs = set(), set(), []
    for p in panels:
        title = p.get("title")
        check(isinstance(p.get("id"), int) and p["id"] not in ids,
              f"panel {title!r}: id {p.get('id')}")
        ids.add(p.get("id"))
        g = p.get("gridPos", {})
        if not check(all(isinstance(g.get(k), int) for k in "hwxy") and g["w"] > 0 and
                     g["h"] > 0 and g["x"] >= 0 and g["x"] + g["w"] <= 24,
                     f"panel {title!r}: gridPos {g}"):
            continue
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                for y in range(g["y"], g["y"] + g["h"])}
        check(not (mine & cells), f"panel {title!r} overlaps another: {g}")
        cells |= mine
        if p.get("type") == "row":
            check(not p.get("targets"), f"row {title!r} has targets")
            continue
        check(p.get("type") in ("timeseries", "stat", "gauge", "table", "bargauge"),
              f"panel {title!r}: type {p.get('type')!r}")
        check(p.get("datasource") == ref, f"panel {title!r}: datasource {p.get('datasource')}")
        targets = p.get("targets") or []
        check(targets, f"panel {title!r} has no targets")
        refs = [tg.get("refId") for tg in targets]
        check(len(set(refs)) == len(refs) and all(refs), f"panel {title!r}: refIds {refs}")
        for tg in targets:
            check(tg.get("datasource") in (None, ref), f"panel {title!r}: target datasource")
            if check(isinstance(tg.get("expr"), str) and tg["expr"].strip(),
                     f"panel {title!r}: a target without expr"):
                exprs.append((f"{title} {tg.get('refId')}", tg["expr"]))
    return exprs


if __name__ == "__main__":
    cluster_procs.run_test("prometheus_test", main, report, procs.cleanup)
