#!/usr/bin/env python3
"""Plots of `zipg bench --json FILE` reports: several runs overlaid, one line per run.

Draws
  PREFIX-throughput.png  operations per second in each 1 s interval of the measured phase
  PREFIX-latency.png     the latency CDF (log x), from the reports' histograms; with --ccdf the
                         fraction slower than x (1 - CDF, log y): the tail
for the whole mix, or for one operation with --op NAME (e.g. obj_get; GS1..GS5 for graphsearch;
`search_node_ids` for the throughput part of --mix search, whose report nests it under
"throughput"). Runs given the same label (repeats of one configuration) share a colour and a
legend entry with the range of their figures. The report format is described in docs/serving.md
("The JSON report").

Usage: scripts/plot.py --run LABEL=FILE [--run LABEL=FILE ...] [--op NAME] --out PREFIX
                       [--title TEXT] [--ccdf] [--dpi 100]
       scripts/plot.py FILE[:LABEL] ... --out PREFIX
e.g.   zipg bench --store s --mix tao --connections 4 --duration 10 --json r1.json
       ... (another configuration) ... --json r2.json
       scripts/plot.py --run R=1=r1.json --run R=2=r2.json --out docs/img/replicas

Needs matplotlib, which is not a Debian package the build installs; in a virtual environment:
    python3 -m venv .venv && .venv/bin/pip install matplotlib
    .venv/bin/python scripts/plot.py ...
Reading the reports (load, cdf, throughput) does not need it: tests/plot_test.py uses them with
the system Python.
"""
import argparse
import json
import os
import sys


def load(path):
    """The part of a report that holds "intervals" and "latency": the report itself, or its
    "throughput" part (--mix search). ValueError if neither has them (a report of a build before
    them, or of a mix without them)."""
    with open(path) as f:
        report = json.load(f)
    for part in (report, report.get("throughput") or {}):
        if "intervals" in part and "latency" in part:
            return part
    raise ValueError("no intervals and latency histogram (written by zipg bench "
                     "--json FILE of the tao, linkbench, linkbench-rw, write, graphsearch or "
                     "search mixes)")


def op_name(part, op):
    """`op`, or for the default "overall" the single operation of a one-operation report."""
    ops = part["latency"]["ops"]
    if op in ops:
        return op
    if op == "overall" and len(ops) == 1:
        return next(iter(ops))
    raise KeyError(f"no operation {op!r}; the report has {', '.join(sorted(ops))}")


def throughput(part, op="overall"):
    """(interval start seconds, ops/s) of `op`."""
    op = op_name(part, op)
    iv = part["intervals"]
    return iv["start_s"], iv["ops_per_s"][op]


def cdf(part, op="overall"):
    """(latency us, fraction of operations at or below it) at each bucket's upper bound that
    holds operations, starting from the bucket below the first; operations over the last bound
    are left out (the curve ends below 1)."""
    op = op_name(part, op)
    bounds = part["latency"]["bounds_us"]
    counts = part["latency"]["ops"][op]["counts"]
    total = sum(counts)
    xs, ys, seen = [], [], 0
    for i, b in enumerate(bounds):
        if counts[i] and not xs and i > 0:
            xs.append(bounds[i - 1])
            ys.append(0.0)
        seen += counts[i]
        if xs or counts[i]:
            xs.append(b)
            ys.append(seen / total if total else 0.0)
        if total and seen == total:
            break
    return xs, ys


def us_label(us):
    """1 -> "1 us", 1000 -> "1 ms", 2e6 -> "2 s"."""
    for unit, scale in (("s", 1e6), ("ms", 1e3)):
        if us >= scale:
            return f"{us / scale:g} {unit}"
    return f"{us:g} us"


def parse_runs(args):
    """[(label, path)] from --run LABEL=FILE (the last '=' splits: labels may hold '=') and
    positional FILE[:LABEL] (label: the file's name without .json)."""
    runs = []
    for r in args.run or []:
        if "=" not in r:
            sys.exit(f"--run {r}: expected LABEL=FILE")
        label, path = r.rsplit("=", 1)
        runs.append((label, path))
    for f in args.files:
        path, _, label = f.partition(":") if not os.path.exists(f) else (f, "", "")
        runs.append((label or os.path.splitext(os.path.basename(path))[0], path))
    if not runs:
        sys.exit("no runs: give --run LABEL=FILE or FILE[:LABEL]")
    return runs


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("files", nargs="*", help="FILE[:LABEL]")
    p.add_argument("--run", action="append", help="LABEL=FILE (repeatable)")
    p.add_argument("--op", default="overall", help="an operation of the mix (default: overall)")
    p.add_argument("--out", required=True, help="PREFIX of PREFIX-throughput.png, -latency.png")
    p.add_argument("--title", default="", help="prefix of both titles")
    p.add_argument("--ccdf", action="store_true",
                   help="latency as 1 - CDF on a log y axis (the tail), not the CDF")
    p.add_argument("--dpi", type=int, default=100)
    args = p.parse_args()
    runs = parse_runs(args)
    parts = []
    for label, path in runs:
        try:
            parts.append((label, load(path)))
        except OSError as e:
            sys.exit(str(e))
        except ValueError as e:  # not JSON, or not such a report
            sys.exit(f"{path}: {e}")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    what = "all operations" if args.op == "overall" else args.op
    title = f"{args.title}: " if args.title else ""
    # Runs with the same label (repeats of one configuration) share a colour and a legend entry,
    # which gives the range of their figures.
    labels = list(dict.fromkeys(label for label, _ in parts))
    colors = {label: f"C{i % 10}" for i, label in enumerate(labels)}
    repeats = {label: sum(1 for l, _ in parts if l == label) for label in labels}
    written = []

    def span(values, fmt):
        lo, hi = fmt(min(values)), fmt(max(values))
        return lo if lo == hi else f"{lo} - {hi}"

    def legend_label(label, text):
        n = repeats[label]
        return f"{label}{f' ({n} runs)' if n > 1 else ''}: {text}"

    def save(fig, ax, suffix):
        handles, names = ax.get_legend_handles_labels()
        seen = {}
        for h, n in zip(handles, names):
            seen.setdefault(n, h)
        ax.legend(list(seen.values()), list(seen.keys()), loc="best", fontsize="small")
        fig.tight_layout()
        out = f"{args.out}-{suffix}.png"
        fig.savefig(out, dpi=args.dpi)
        written.append(out)
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 3.6))
    for label in labels:
        rates = []
        for l, part in parts:
            if l != label:
                continue
            try:
                xs, ys = throughput(part, args.op)
            except KeyError as e:
                sys.exit(f"{label}: {e.args[0]}")
            rates.append(sum(ys) / len(ys) if ys else 0)
        text = legend_label(label, span(rates, lambda r: f"{r:,.0f}") + " ops/s")
        for l, part in parts:
            if l != label:
                continue
            xs, ys = throughput(part, args.op)
            # Each interval drawn as a step over [start, start + width).
            width = part["intervals"]["seconds"]
            ax.step(list(xs) + [xs[-1] + width], list(ys) + [ys[-1]], where="post",
                    color=colors[label], label=text, linewidth=1.5 if repeats[label] == 1 else 1)
    ax.set_xlabel("seconds into the measured phase")
    ax.set_ylabel("operations / s")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:,.0f}"))
    ax.set_ylim(bottom=0)
    ax.set_title(f"{title}throughput per second, {what}")
    ax.grid(True, alpha=0.3)
    save(fig, ax, "throughput")

    fig, ax = plt.subplots(figsize=(7, 3.6))
    for label in labels:
        mine = [part for l, part in parts if l == label]
        hs = [part["latency"]["ops"][op_name(part, args.op)] for part in mine]
        fmt = lambda us: us_label(round(us))  # noqa: E731
        text = legend_label(label, f"p50 {span([h['p50_us'] for h in hs], fmt)}, "
                                   f"p99 {span([h['p99_us'] for h in hs], fmt)}")
        for part in mine:
            xs, ys = cdf(part, args.op)
            if args.ccdf:
                total = sum(part["latency"]["ops"][op_name(part, args.op)]["counts"])
                ys = [max(1 - y, 0.5 / total) for y in ys]
            ax.plot(xs, ys, color=colors[label], label=text,
                    linewidth=1.5 if repeats[label] == 1 else 1)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: us_label(x)))
    ax.set_xlabel("latency")
    if args.ccdf:
        ax.set_yscale("log")
        ax.set_ylabel("fraction of operations slower")
        ax.set_title(f"{title}latency tail (1 - CDF), {what}")
    else:
        ax.set_ylabel("fraction of operations")
        ax.set_ylim(0, 1.01)
        ax.set_title(f"{title}latency CDF, {what}")
    ax.grid(True, which="both", alpha=0.3)
    save(fig, ax, "latency")
    for w in written:
        print(w)


if __name__ == "__main__":
    main()
