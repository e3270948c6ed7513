#!/usr/bin/python3
"""End-to-end test of `zipg file ...` and `zipg gen text`: runs the real binary and checks every answer
against a plain-Python reference over the same input."""
import json
import os
import random
import subprocess
import sys
import tempfile

ZIPG = sys.argv[1]
failures = 0


def run(*args, stdin=None):
    return subprocess.run([ZIPG, *args], capture_output=True, input=stdin)


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def occurrences(text, pat):
    out, i = [], text.find(pat)
    while i >= 0:
        out.append(i)
        i = text.find(pat, i + 1)
    return out


with tempfile.TemporaryDirectory() as d:
    txt, zcf = os.path.join(d, "t.txt"), os.path.join(d, "t.zcf")
    r = run("gen", "text", "--bytes", "300000", "--seed", "5", "--out", txt)
    check(r.returncode == 0, "gen text exit code")
    data = open(txt, "rb").read()
    check(len(data) == 300000, "gen text size")
    r2 = run("gen", "text", "--bytes", "300000", "--seed", "5", "--out", txt + "2")
    check(open(txt + "2", "rb").read() == data, "gen text is deterministic")

    # Binary data with every byte value, so extract/search go through bytes 0 and 255 too.
    rnd = random.Random(11)
    data = data[:200000] + bytes(rnd.randrange(256) for _ in range(5000)) + data[200000:]
    open(txt, "wb").write(data)
    for opts in ([], ["--sa-rate", "4", "--isa-rate", "8", "--psi-block", "16"]):
        r = run("file", "build", txt, zcf, *opts)
        check(r.returncode == 0, f"build {opts}: {r.stderr}")
        for _ in range(30):
            off = rnd.randrange(len(data) + 1)
            ln = rnd.randrange(700)
            r = run("file", "extract", zcf, str(off), str(ln))
            check(r.returncode == 0 and r.stdout == data[off:off + ln], f"extract {off} {ln} {opts}")
        for _ in range(20):
            off = rnd.randrange(len(data) - 12)
            pat = data[off:off + rnd.randrange(1, 12)]
            if b"\0" in pat:  # argv cannot carry a zero byte
                continue
            want = occurrences(data, pat)
            r = run("file", "count", zcf, pat)
            check(r.returncode == 0 and int(r.stdout) == len(want), f"count {pat!r} {opts}")
            r = run("file", "search", zcf, pat)
            got = [int(x) for x in r.stdout.split()]
            check(r.returncode == 0 and got == want, f"search {pat!r} {opts}")
        r = run("file", "stats", zcf)
        st = json.loads(r.stdout)
        check(st["input_bytes"] == len(data), "stats input bytes")
        check(st["stored_bytes"] == os.path.getsize(zcf), "stats stored bytes = file size")
        check(sum(st["breakdown"].values()) == st["stored_bytes"], "stats breakdown sums to stored bytes")

    # Errors: usage errors exit 2, failures exit 1, both with a message on stderr.
    r = run("file", "extract", zcf, "x", "5")
    check(r.returncode == 2 and b"OFFSET" in r.stderr, "non-numeric offset is a usage error")
    r = run("file", "build", txt, zcf, "--sa-rate", "3")
    check(r.returncode == 2 and b"sa_sampling_rate" in r.stderr, "bad sampling rate is a usage error")
    r = run("file", "count", zcf, "")
    check(r.returncode == 1 and b"INVALID_ARGUMENT" in r.stderr, "empty pattern")
    r = run("file", "extract", zcf, str(len(data) + 1), "1")
    check(r.returncode == 1 and b"INVALID_ARGUMENT" in r.stderr, "offset past the end")
    r = run("file", "stats", os.path.join(d, "missing.zcf"))
    check(r.returncode == 1 and b"missing.zcf" in r.stderr, "missing file names the file")
    blob = bytearray(open(zcf, "rb").read())
    blob[len(blob) // 2] ^= 0x10
    open(zcf + ".bad", "wb").write(bytes(blob))
    r = run("file", "count", zcf + ".bad", "the")
    check(r.returncode == 1 and b"CORRUPTION" in r.stderr and b"checksum" in r.stderr, "corrupted file")
    open(zcf + ".short", "wb").write(bytes(blob[:1000]))
    r = run("file", "count", zcf + ".short", "the")
    check(r.returncode == 1 and b"truncated" in r.stderr, "truncated file")
    r = run("file", "build", os.path.join(d, "nope.txt"), zcf)
    check(r.returncode == 1 and b"nope.txt" in r.stderr, "missing input names the file")
    r = run("frobnicate")
    check(r.returncode == 2, "unknown command")
    r = run("help")
    check(r.returncode == 0 and b"zipg file" in r.stdout, "help lists file commands")

print(f"{'FAILED' if failures else 'passed'}: {failures} failures")
sys.exit(1 if failures else 0)
