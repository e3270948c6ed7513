"""Shared pieces of the end-to-end tests that run a real local cluster (cluster_test.py,
writes_test.py): failure counting and progress lines (Report), the test directory with a private
copy of the binary (private_binary), whether a binary is sanitized, and process bookkeeping (Procs): which servers are ours,
whether they are alive, and stopping every one of them whatever happens (atexit, SIGTERM, SIGHUP),
then removing the test directory.
"""
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time


class Report:
    """Counts failed checks (printing the first `max_printed`) and prints timed section lines."""

    def __init__(self, max_printed):
        self.t0 = time.monotonic()
        self.failures = 0
        self.max_printed = max_printed
        self._lock = threading.Lock()

    def check(self, cond, what):
        if not cond:
            with self._lock:
                self.failures += 1
                if self.failures <= self.max_printed:
                    print("FAIL:", what, flush=True)
        return bool(cond)

    def section(self, name):
        print(f"[{time.monotonic() - self.t0:5.1f}s] {name}", flush=True)

    def note(self, text):
        print(f"   {text}", flush=True)

    def finish(self, name):
        """Prints the verdict line; returns the exit status."""
        print(f"{name}: {'OK' if self.failures == 0 else f'{self.failures} failure(s)'} "
              f"in {time.monotonic() - self.t0:.1f} s")
        return 1 if self.failures else 0


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def private_binary(binary, prefix):
    """A fresh test directory and a private copy of `binary` in it: the servers run it for the
    whole test (and restarts rerun the same path), so a concurrent rebuild cannot change it
    underneath. Returns (directory, copy)."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    copy = os.path.join(tmp, "zipg")
    shutil.copy2(os.path.abspath(binary), copy)
    return tmp, copy


def sanitized(binary):
    """Whether `binary` was built with AddressSanitizer. Its allocator keeps freed memory in a
    quarantine and never trims, so memory bounds that hold for the real allocator do not apply."""
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode() for a in f.read().split(b"\0")[:-1]]
    except OSError:
        return []


class Procs:
    def __init__(self, name, tmp, zipg, store):
        self.name, self.tmp, self.zipg, self.store = name, tmp, zipg, store
        self.known_pids = set()  # every server pid seen (cluster.json, status, our restarts)
        self.children = {}       # pid -> Popen of the servers the test (re)started itself
        self.sessions = []       # objects with close(), closed before the servers stop
        self.cleaned = False
        atexit.register(self.cleanup)
        signal.signal(signal.SIGTERM, self._interrupted)
        signal.signal(signal.SIGHUP, self._interrupted)

    def _interrupted(self, signum, _frame):
        print(f"{self.name}: interrupted by signal {signum}; stopping the cluster", flush=True)
        sys.exit(1)

    def start_server(self, argv, log_path):
        """Starts one server as `zipg local start` does (own session, output appended to its
        log); the test stops it at the end. Returns its pid."""
        log = open(log_path, "ab")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        log.close()
        self.children[p.pid] = p
        self.known_pids.add(p.pid)
        return p.pid

    def alive(self, pid):
        """True if pid runs (a zombie does not)."""
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except (FileNotFoundError, ProcessLookupError):
            return False
        if pid in self.children:
            self.children[pid].poll()
        return stat[stat.rindex(")") + 2] not in "ZX"

    def ours(self):
        """Pids of live processes whose command line names the test's directory."""
        out = []
        for d in os.listdir("/proc"):
            if d.isdigit() and int(d) != os.getpid():
                if any(self.tmp in a for a in cmdline(int(d))) and self.alive(int(d)):
                    out.append(int(d))
        return out

    def kill_and_wait(self, pids, sig=signal.SIGTERM, grace=5.0):
        for pid in pids:
            if self.alive(pid):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace
        while any(self.alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.01)
        return [p for p in pids if self.alive(p)]

    def local_start(self, check, *args):
        """`zipg local start --store STORE ARGS...`; the pids it started become known. Returns
        (completed process, run/cluster.json as a dict, or None after a failed check)."""
        r = subprocess.run([self.zipg, "local", "start", "--store", self.store, *args],
                           capture_output=True, timeout=180)
        state = {}
        path = os.path.join(self.store, "run", "cluster.json")
        if os.path.exists(path):
            with open(path) as f:
                state = json.load(f)
            self.known_pids.update(p["pid"] for p in state.get("processes", []))
        ok = check(r.returncode == 0, f"local start: {r.stdout[-500:]!r} {r.stderr[-1500:]!r}")
        return r, (state if ok else None)

    def local_stop(self, check, store, zipg):
        """The end of a test: close the sessions, stop the servers the test restarted itself (not
        in run/cluster.json), `zipg local stop`, and check that no process is left."""
        for s in list(self.sessions):
            s.close()
        self.sessions.clear()
        self.kill_and_wait([p for p in self.children if self.alive(p)], signal.SIGTERM, 10.0)
        r = subprocess.run([zipg, "local", "stop", "--store", store], capture_output=True,
                           timeout=60)
        check(r.returncode == 0, f"local stop: {r.stderr[-300:]!r}")
        time.sleep(0.2)
        left = [p for p in self.known_pids if p and self.alive(p)]
        check(not left, f"processes left after stop: {[(p, cmdline(p)) for p in left]}")

    def cleanup(self):
        if self.cleaned:
            return
        self.cleaned = True
        for s in self.sessions:
            s.close()
        # Servers the test restarted are not in run/cluster.json: stop them first.
        self.kill_and_wait([p for p in self.children if self.alive(p)], signal.SIGTERM, 10.0)
        try:
            if os.path.exists(os.path.join(self.store, "run", "cluster.json")):
                subprocess.run([self.zipg, "local", "stop", "--store", self.store],
                               capture_output=True, timeout=60)
        except Exception as e:  # noqa: BLE001
            print("cleanup: zipg local stop:", e)
        left = [p for p in self.known_pids | set(self.ours())
                if self.alive(p) and self.tmp in " ".join(cmdline(p))]
        left = self.kill_and_wait(left, signal.SIGTERM, 5.0)
        self.kill_and_wait(left, signal.SIGKILL, 5.0)
        for p in self.children.values():
            try:
                p.wait(timeout=5)
            except Exception:  # noqa: BLE001
                pass
        if os.environ.get("ZIPG_KEEP_TEST_DIR"):
            print("test directory kept:", self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def run_test(name, main, report, cleanup):
    """Runs main(); an exception fails the test with its traceback; cleanup() runs in any case;
    exits with the report's verdict."""
    try:
        main()
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        report.check(False, f"test aborted: {e!r}")
    finally:
        cleanup()
    sys.exit(report.finish(name))


class TestSetup:
    """The start of an end-to-end test: its usage (`doc`) unless given the zipg binary, a private
    copy of it in a fresh directory, the store's path there, the process bookkeeping and the
    report. `name` names the test in messages."""

    def __init__(self, name, doc, max_printed=60):
        if len(sys.argv) != 2:
            print(doc)
            sys.exit(2)
        self.tmp, self.zipg = private_binary(sys.argv[1], f"zipg-{name.replace('_', '-')}-")
        self.store = os.path.join(self.tmp, "store")
        self.procs = Procs(name, self.tmp, self.zipg, self.store)
        self.report = Report(max_printed=max_printed)
        self.check, self.section, self.note = (self.report.check, self.report.section,
                                               self.report.note)
