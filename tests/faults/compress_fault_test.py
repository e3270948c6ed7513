#!/usr/bin/env python3
"""`zipg compress` as a whole process under disk faults armed from the environment (the shim of
tests/faults/shim.h, preloaded): for each fault, compress --force over an existing store must exit
non-zero with an error naming the file, leave the existing store answering as before and nothing
else in the directory; the same command without the fault then replaces the store.

Usage: compress_fault_test.py PATH/TO/zipg PATH/TO/libzipg_fault_shim.so"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ZIPG, SHIM = sys.argv[1], sys.argv[2]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def run(args, env=None):
    return subprocess.run([ZIPG, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def name_of(store, node):
    r = run(["query", "--store", store, "obj_get", "--id", str(node)])
    if r.returncode != 0:
        return "error: " + r.stderr.strip()
    node = json.loads(r.stdout).get("ok")  # {"ok": {"id", "properties"}} or {"ok": null}
    return node["properties"].get("name") if node else None


tmp = tempfile.mkdtemp(prefix="zipg_compress_fault_")
try:
    nodes_old, nodes_new, edges = (os.path.join(tmp, f) for f in ("old.csv", "new.csv", "e.csv"))
    with open(nodes_old, "w") as f:
        f.write("id,name\n" + "".join(f"{i},old{i}\n" for i in range(200)))
    with open(nodes_new, "w") as f:
        f.write("id,name\n" + "".join(f"{i},new{i}\n" for i in range(200)))
    with open(edges, "w") as f:
        f.write("src,dst,type,timestamp\n" + "".join(f"{i},{(i * 7) % 200},{i % 3},{i}\n"
                                                      for i in range(200)))
    out = os.path.join(tmp, "store")
    for op, nth, errno_name in (("any-write", 1, "EIO"), ("any-write", 5, "ENOSPC"),
                                ("any-sync", 3, "EIO"), ("rename", 1, "EIO"),
                                ("rename", 1000, "EIO"), ("mmap", 2, "ENOMEM")):
        label = f"{op}#{nth} {errno_name}"
        shutil.rmtree(out, ignore_errors=True)
        r = run(["compress", "--nodes", nodes_old, "--edges", edges, "--out", out])
        check(r.returncode == 0, f"{label}: the old store builds: {r.stderr}")
        log = os.path.join(tmp, "faults.log")
        if os.path.exists(log):
            os.remove(log)
        env = {"LD_PRELOAD": SHIM, "ZIPG_FAULT_OP": op, "ZIPG_FAULT_PATH": out,
               "ZIPG_FAULT_NTH": str(nth), "ZIPG_FAULT_ERRNO": errno_name, "ZIPG_FAULT_LOG": log}
        r = run(["compress", "--nodes", nodes_new, "--edges", edges, "--out", out, "--force"], env)
        fired = os.path.exists(log)
        error = [line for line in r.stderr.splitlines() if "error" in line]
        print(f"{label}: exit {r.returncode}; fired {fired}; {error[-1] if error else 'no error'}")
        if nth == 1000:
            # Past the last rename: never fires, so the run must succeed (the env is read).
            check(not fired and r.returncode == 0, f"{label}: a fault that never fires failed it")
            check(name_of(out, 7) == "new7", f"{label}: the new store replaced the old one")
            continue
        check(fired, f"{label}: the fault never fired (the shim did not read the environment)")
        check(r.returncode != 0 and out in r.stderr, f"{label}: exit {r.returncode}, {r.stderr!r}")
        check(name_of(out, 7) == "old7", f"{label}: the old store changed: {name_of(out, 7)}")
        left = sorted(set(os.listdir(tmp)) - {"old.csv", "new.csv", "e.csv", "store",
                                              "faults.log"})
        check(not left, f"{label}: left behind: {left}")
        r = run(["compress", "--nodes", nodes_new, "--edges", edges, "--out", out, "--force"])
        check(r.returncode == 0 and name_of(out, 7) == "new7",
              f"{label}: without the fault the store is replaced: {r.stderr}")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print("compress_fault_test:", "OK" if not failures else f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
