#!/usr/bin/python3
"""End-to-end test of `zipg bench --json FILE` (docs/serving.md, "The JSON report") and of the
report readers of scripts/plot.py: runs the TAO and graphsearch mixes embedded on a tiny generated
store for a few seconds and checks the file against references computed here:

* the intervals: one per second of --duration, starting at 0, 1, 2, ...; per operation they sum
  to the operation's count, and per interval the operations sum to the overall line;
* the histograms: the bucket bounds are the E24 series from 1 us to 62 s (built here
  independently), each operation's counts sum to its count, the overall counts are the sum of
  the operations';
* the percentiles: for p50/p95/p99, the k-th smallest latency (k = floor(q * count)) lies in the
  bucket whose cumulative counts pass k, and the value is within that bucket's bounds; the max is
  in the last non-empty bucket; the table's figures ("ops") are the histogram's;
* `--json -` prints the same shape as one line; usage errors for a missing file name and for a
  write mix embedded; the traversal mix writes its report to a file too;
* scripts/plot.py's cdf() and throughput() read the file as the reference says.

Drawing the PNGs needs matplotlib, which the system Python of CI does not have: that part runs
only if ZIPG_PLOT_PYTHON names an interpreter with it (e.g. a venv made as scripts/plot.py says),
or /usr/bin/python3 has it, and is reported as skipped otherwise.
"""
import bisect
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile

ZIPG = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
PLOT = os.path.join(HERE, "..", "scripts", "plot.py")
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)
    return cond


def run(*args, timeout=300):
    return subprocess.run([ZIPG, *args], capture_output=True, text=True, timeout=timeout)


def e24_bounds():
    """1, 1.1, 1.2, ... 9.1, 10, 11, ... up to 62 s, in microseconds."""
    mantissas = [1.0, 1.1, 1.2, 1.3, 1.5, 1.6, 1.8, 2.0, 2.2, 2.4, 2.7, 3.0,
                 3.3, 3.6, 3.9, 4.3, 4.7, 5.1, 5.6, 6.2, 6.8, 7.5, 8.2, 9.1]
    out = []
    for exp in range(9):
        for m in mantissas:
            v = round(m * 10 ** exp, 6)
            if v <= 62e6:
                out.append(v)
    return out


def check_report(rep, name, duration, mix_ops):
    bounds = rep["latency"]["bounds_us"]
    check(len(bounds) == 188 and all(math.isclose(a, b, rel_tol=1e-12)
                                     for a, b in zip(bounds, e24_bounds())),
          f"{name}: bounds are the E24 series 1 us .. 62 s: {bounds[:5]}..{bounds[-3:]}")
    ops = rep["ops"]
    hist = rep["latency"]["ops"]
    iv = rep["intervals"]
    check(set(ops) == set(hist) == set(iv["ops"]) == set(iv["ops_per_s"]),
          f"{name}: the same operations everywhere: {sorted(ops)} {sorted(hist)}")
    check(set(ops) - {"overall"} <= set(mix_ops) and "overall" in ops,
          f"{name}: operations of the mix: {sorted(ops)}")
    check(iv["seconds"] == 1 and iv["start_s"] == list(range(duration)),
          f"{name}: intervals 0..{duration - 1}: {iv['seconds']} {iv['start_s']}")
    total = ops["overall"]["count"]
    check(total > 0, f"{name}: operations ran")
    check(total == sum(o["count"] for k, o in ops.items() if k != "overall"),
          f"{name}: overall count is the sum of the operations'")
    for op, o in ops.items():
        n = o["count"]
        check(math.isclose(o["ops_per_s"], n / duration), f"{name} {op}: ops_per_s = count / s")
        per = iv["ops"][op]
        check(len(per) == duration and sum(per) == n,
              f"{name} {op}: intervals sum to the count: {sum(per)} vs {n}")
        check(all(math.isclose(r, c) for r, c in zip(iv["ops_per_s"][op], per)),
              f"{name} {op}: ops_per_s of 1 s intervals")
        h = hist[op]
        counts = h["counts"]
        check(len(counts) == len(bounds) + 1, f"{name} {op}: one count per bucket and one over")
        check(h["count"] == n and sum(counts) == n,
              f"{name} {op}: histogram holds every operation: {sum(counts)} vs {n}")
        for q, key in ((0.50, "p50_us"), (0.95, "p95_us"), (0.99, "p99_us")):
            check(o[key] == h[key], f"{name} {op}: {key} of the table and the histogram")
            v = h[key]
            k = min(n - 1, int(q * n))
            i = bisect.bisect_left(bounds, v)  # v in (bounds[i-1], bounds[i]]
            before = sum(counts[:i])
            check(before <= k < before + counts[i],
                  f"{name} {op}: {key} {v} us in bucket {i}, which holds ranks "
                  f"{before}..{before + counts[i] - 1}, not rank {k}")
            check(h["p50_us"] <= h["p95_us"] <= h["p99_us"] <= h["max_us"],
                  f"{name} {op}: percentiles in order")
        last = max(i for i, c in enumerate(counts) if c)
        check(bisect.bisect_left(bounds, h["max_us"]) == last and o["max_us"] == h["max_us"],
              f"{name} {op}: max {h['max_us']} us in the last non-empty bucket {last}")
    for i in range(duration):
        check(iv["ops"]["overall"][i] == sum(iv["ops"][op][i] for op in ops if op != "overall"),
              f"{name}: interval {i} overall is the sum of the operations")
    for b in range(len(bounds) + 1):
        check(hist["overall"]["counts"][b] == sum(hist[op]["counts"][b] for op in ops
                                                  if op != "overall"),
              f"{name}: bucket {b} overall is the sum of the operations")


def check_plot_readers(rep, name):
    spec = importlib.util.spec_from_file_location("plot", PLOT)
    plot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot)
    xs, ys = plot.cdf(rep)
    n = rep["ops"]["overall"]["count"]
    bounds = rep["latency"]["bounds_us"]
    counts = rep["latency"]["ops"]["overall"]["counts"]
    check(ys and (ys[0] == 0 or counts[0] > 0) and math.isclose(ys[-1], 1.0) and ys == sorted(ys),
          f"{name}: plot.cdf rises from 0 to 1")
    for x, y in zip(xs, ys):
        i = bounds.index(x)
        check(math.isclose(y, sum(counts[:i + 1]) / n), f"{name}: plot.cdf at {x} us")
    t, r = plot.throughput(rep, "overall")
    check(t == rep["intervals"]["start_s"] and r == rep["intervals"]["ops_per_s"]["overall"],
          f"{name}: plot.throughput")


def matplotlib_python():
    candidates = [os.environ.get("ZIPG_PLOT_PYTHON"), "/usr/bin/python3"]
    for py in filter(None, candidates):
        r = subprocess.run([py, "-c", "import matplotlib"], capture_output=True)
        if r.returncode == 0:
            return py
    return None


with tempfile.TemporaryDirectory() as d:
    g, store = os.path.join(d, "g"), os.path.join(d, "store")
    r = run("gen", "graph", "--nodes", "2000", "--out", g, "--seed", "3")
    check(r.returncode == 0, f"gen graph: {r.stderr}")
    r = run("compress", "--nodes", f"{g}/nodes.csv", "--edges", f"{g}/edges.csv", "--out", store)
    check(r.returncode == 0, f"compress: {r.stderr}")

    duration = 3
    reports = {}
    for mix, ops in (("tao", ["assoc_range", "obj_get", "assoc_get", "assoc_count",
                              "assoc_time_range"]),
                     ("graphsearch", ["GS1", "GS2", "GS3", "GS4", "GS5"])):
        path = os.path.join(d, f"{mix}.json")
        r = run("bench", "--store", store, "--embedded", "--mix", mix, "--connections", "2",
                "--duration", str(duration), "--warmup", "0", "--json", path)
        if not check(r.returncode == 0, f"bench {mix}: exit {r.returncode}: {r.stderr}"):
            continue
        check(not any(l.startswith("{") for l in r.stdout.splitlines()),
              f"bench {mix} --json FILE prints no JSON line")
        with open(path) as f:
            rep = json.load(f)
        check(rep["mix"] == mix and rep["mode"] == "embedded" and rep["connections"] == 2
              and rep["duration_s"] == duration and rep["errors"] == 0,
              f"bench {mix}: settings in the report")
        check_report(rep, mix, duration, ops)
        check_plot_readers(rep, mix)
        reports[mix] = path

    # --json -: one JSON line on stdout, the same shape.
    r = run("bench", "--store", store, "--embedded", "--duration", "1", "--warmup", "0",
            "--json", "-")
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    if check(r.returncode == 0 and len(lines) == 1, f"--json -: {r.returncode} {r.stderr}"):
        rep = json.loads(lines[0])
        check_report(rep, "stdout", 1, ["assoc_range", "obj_get", "assoc_get", "assoc_count",
                                        "assoc_time_range"])

    # Usage errors.
    r = run("bench", "--store", store, "--embedded", "--duration", "1", "--json")
    check(r.returncode == 2 and "--json" in r.stderr, f"--json without a file: {r.returncode}")
    r = run("bench", "--store", store, "--embedded", "--json", "--duration", "1")
    check(r.returncode == 2 and "--json" in r.stderr, f"--json followed by an option: {r.stderr}")
    r = run("bench", "--store", store, "--embedded", "--mix", "linkbench-rw", "--duration", "1")
    check(r.returncode == 2 and "read-only" in r.stderr, f"a write mix embedded: {r.stderr}")

    # The traversal mix writes its own report to the file.
    path = os.path.join(d, "traversal.json")
    r = run("bench", "--store", store, "--embedded", "--mix", "traversal", "--depths", "2",
            "--starts", "5", "--pulled-starts", "1", "--json", path)
    if check(r.returncode == 0, f"traversal bench: {r.stderr}"):
        with open(path) as f:
            rep = json.load(f)
        check(rep["mix"] == "traversal" and len(rep["cases"]) >= 2, f"traversal report: {rep}")

    py = matplotlib_python()
    if py is None:
        print("plot_test: the PNGs are not drawn (no matplotlib; set ZIPG_PLOT_PYTHON to a "
              "Python that has it)")
    elif len(reports) == 2:
        prefix = os.path.join(d, "plot")
        r = subprocess.run([py, PLOT, "--run", f"TAO={reports['tao']}",
                            f"{reports['graphsearch']}:graph search", "--out", prefix],
                           capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, f"plot.py: {r.stdout}{r.stderr}")
        for suffix in ("throughput", "latency"):
            png = f"{prefix}-{suffix}.png"
            ok = os.path.exists(png)
            if check(ok, f"plot.py wrote {png}"):
                with open(png, "rb") as f:
                    check(f.read(8) == b"\x89PNG\r\n\x1a\n", f"{png} is a PNG")
        r = subprocess.run([py, PLOT, "--run", f"TAO={reports['tao']}", "--op", "obj_get",
                            "--out", prefix + "-op"], capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, f"plot.py --op obj_get: {r.stderr}")
        r = subprocess.run([py, PLOT, "--run", f"TAO={reports['tao']}", "--op", "nosuch",
                            "--out", prefix + "-bad"], capture_output=True, text=True, timeout=300)
        check(r.returncode != 0 and "nosuch" in r.stderr, f"plot.py --op nosuch: {r.stderr}")
        print(f"plot_test: drew the PNGs with {py}")

if failures:
    print(f"{failures} check(s) failed")
    sys.exit(1)
print("plot_test: OK")
