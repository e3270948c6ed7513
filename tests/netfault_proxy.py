"""A fault-injecting TCP proxy for the end-to-end tests (tests/netfault_test.py): it listens on
127.0.0.1:<port> and forwards every connection to a target, byte for byte, until told to misbehave.
Servers advertise the proxy's port instead of their own (`zipg serve --advertise HOST:PORT`), so
the calls other processes make to them go through it.

The fault can be changed at any time with set_fault(); it applies to the chunks read from then on
(a chunk: what one recv returns, usually one whole Thrift frame or update frame), on old and new
connections alike. Each chunk is struck with `probability`, and a strike does:

    none       nothing: everything is forwarded (the default)
    delay      the chunk is held delay_ms before it is sent on (the chunks behind it wait too:
               the order is kept)
    drop       a black hole: the connection stops forwarding `direction` ("up": to the target,
               "down": back, "both", or "any": one of the three drawn at the strike) from this
               chunk on, without closing; what arrives is read and thrown away
    duplicate  the chunk is sent twice in a row: the receiver must find the stream corrupt or the
               frame repeated, never act on the copy as new data
    cut        the connection is closed on both sides after a random part of the chunk: mostly
               mid-frame
    reset      the same, with an RST (SO_LINGER 0) instead of an orderly close

A closed source is passed on (a shutdown of the other side's write half) in every mode, so that a
client that gives up on a black-holed call frees the server's connection too. A black hole lasts
until the fault changes.

Bounded: one thread per connection and one accepting thread, each waiting at most POLL_S between
looks at the stop flag; close() stops them all and joins them within a few seconds. Queued bytes
per direction are capped (a full queue stops reading the source: back-pressure, as TCP does).

Thread-safety: set_fault, stats, pending_bytes and close may be called from any thread.
Python 3 standard library only.
"""
import random
import select
import socket
import struct
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass

POLL_S = 0.05            # longest wait between looks at the stop flag and the delay queues
CHUNK = 65536            # bytes read at once
MAX_QUEUED = 1 << 20     # bytes queued per direction before the proxy stops reading its source
CONNECT_TIMEOUT_S = 1.0
UP, DOWN = 0, 1          # client -> target, target -> client
KINDS = ("none", "delay", "drop", "duplicate", "cut", "reset")
DIRECTIONS = ("both", "up", "down", "any")  # drop: which directions; "any": one drawn per strike


@dataclass(frozen=True)
class Fault:
    """What a proxy does to the chunks it reads (the module's comment); immutable."""
    kind: str = "none"
    probability: float = 1.0   # of a strike, per chunk
    delay_ms: int = 0          # delay
    direction: str = "both"    # drop

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"fault kind {self.kind!r}: one of {KINDS}")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"fault probability {self.probability}: 0..1")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"fault direction {self.direction!r}: one of {DIRECTIONS}")
        if self.delay_ms < 0:
            raise ValueError(f"fault delay_ms {self.delay_ms}: >= 0")


NONE = Fault()


class Proxy:
    """Forwards 127.0.0.1:port (port 0: any free port; see .port) to target_host:target_port.
    `seed` makes the fault draws reproducible for a given arrival order of chunks."""

    def __init__(self, target_port, target_host="127.0.0.1", port=0, name="proxy", seed=0):
        self.name = name
        self.target = (target_host, target_port)
        self._rnd = random.Random(seed)
        self._lock = threading.Lock()
        self._fault = (0, NONE)  # (generation, Fault): replaced whole, read without the lock
        self._stats = Counter()
        self._conns = set()
        self._stop = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(256)
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept_loop, name=f"{name}-accept",
                                          daemon=True)
        self._acceptor.start()

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.port}"

    def set_fault(self, fault):
        with self._lock:
            self._fault = (self._fault[0] + 1, fault)

    def fault(self):
        return self._fault

    def stats(self):
        """Counters: connections, bytes_up / bytes_down (forwarded), duplicated (chunks),
        dropped_bytes, delayed (chunks), cuts, resets, connect_failures."""
        with self._lock:
            return dict(self._stats)

    def count(self, key, n=1):
        with self._lock:
            self._stats[key] += n

    def rand(self):
        with self._lock:
            return self._rnd.random()

    def randint(self, lo, hi):
        with self._lock:
            return self._rnd.randint(lo, hi)

    def pending_bytes(self):
        """Bytes read from one side and not yet sent on (delayed or waiting for the receiver)."""
        with self._lock:
            conns = list(self._conns)
        return sum(c.pending() for c in conns)

    def open_connections(self):
        with self._lock:
            return len(self._conns)

    def close(self, timeout=5.0):
        """Stops accepting, closes every connection (both sides) and joins every thread; returns
        the names of threads still running after `timeout` seconds (none, normally)."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        self._acceptor.join(max(0.0, deadline - time.monotonic()))
        try:
            self._listener.close()
        except OSError:
            pass
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            c.thread.join(max(0.0, deadline - time.monotonic()))
        left = [c.thread.name for c in conns if c.thread.is_alive()]
        if self._acceptor.is_alive():
            left.append(self._acceptor.name)
        return left

    # -- inside ------------------------------------------------------------------------------------
    def _accept_loop(self):
        while not self._stop.is_set():
            try:
                poller = select.poll()
                poller.register(self._listener.fileno(), select.POLLIN)
                if not poller.poll(POLL_S * 1000.0):
                    continue
            except (OSError, ValueError):
                return
            try:
                client, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                return
            conn = _Connection(self, client)
            with self._lock:
                self._conns.add(conn)
                self._stats["connections"] += 1
            conn.thread.start()

    def _forget(self, conn):
        with self._lock:
            self._conns.discard(conn)


class _Connection:
    """One proxied connection, served by one thread that multiplexes both directions."""

    def __init__(self, proxy, client):
        self.proxy = proxy
        self.client = client
        self.server = None
        self.queues = (deque(), deque())   # per direction: [due time, bytes] in order
        self.queued = [0, 0]
        self.eof = [False, False]          # the direction's source has closed
        self.shut = [False, False]         # the direction's destination got our FIN
        self.generation = None             # the fault generation `black` is for
        self.black = [False, False]        # drop: the directions thrown away
        self._plock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name=f"{proxy.name}-conn", daemon=True)

    def pending(self):
        with self._plock:
            return self.queued[UP] + self.queued[DOWN]

    def _run(self):
        try:
            try:
                self.server = socket.create_connection(self.proxy.target, timeout=CONNECT_TIMEOUT_S)
            except OSError:
                self.proxy.count("connect_failures")
                return
            for s in (self.client, self.server):
                s.setblocking(False)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._pump()
        finally:
            for s in (self.client, self.server):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass
            self.proxy._forget(self)

    def _fault(self):
        """The current fault; a new one ends the black holes of the previous one."""
        generation, fault = self.proxy.fault()
        if generation != self.generation:
            self.generation = generation
            self.black = [False, False]
        return fault

    def _pump(self):
        src = (self.client, self.server)
        dst = (self.server, self.client)
        while not self.proxy._stop.is_set():
            now = time.monotonic()
            # poll, not select: the test process may hold file descriptors past FD_SETSIZE.
            events = {}
            for d in (UP, DOWN):
                if not self.eof[d] and self.queued[d] < MAX_QUEUED:
                    events[src[d].fileno()] = events.get(src[d].fileno(), 0) | select.POLLIN
                if self.queues[d] and self.queues[d][0][0] <= now:
                    events[dst[d].fileno()] = events.get(dst[d].fileno(), 0) | select.POLLOUT
            timeout = POLL_S
            for d in (UP, DOWN):
                if self.queues[d] and self.queues[d][0][0] > now:
                    timeout = min(timeout, self.queues[d][0][0] - now)
            poller = select.poll()
            for fd, ev in events.items():
                poller.register(fd, ev)
            try:
                ready = dict(poller.poll(max(0.0, timeout) * 1000.0))
            except OSError:
                return
            for d in (UP, DOWN):
                ev = ready.get(src[d].fileno(), 0)
                if ev & (select.POLLIN | select.POLLHUP | select.POLLERR) and \
                        events.get(src[d].fileno(), 0) & select.POLLIN:
                    if not self._read(d, src[d]):
                        return
            for d in (UP, DOWN):
                ev = ready.get(dst[d].fileno(), 0)
                if ev & (select.POLLOUT | select.POLLERR) and \
                        events.get(dst[d].fileno(), 0) & select.POLLOUT:
                    if not self._write(d, dst[d]):
                        return
            for d in (UP, DOWN):
                if self.eof[d] and not self.queues[d] and not self.shut[d]:
                    self.shut[d] = True
                    try:
                        dst[d].shutdown(socket.SHUT_WR)
                    except OSError:
                        return
            if all(self.shut):
                return

    def _read(self, d, sock):
        """Reads one chunk from direction d's source and queues what the fault lets through;
        False once the connection is over."""
        try:
            data = sock.recv(CHUNK)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False  # reset by the peer: close both sides
        if not data:
            self.eof[d] = True
            return True
        fault = self._fault()
        now = time.monotonic()
        strike = fault.kind != "none" and self.proxy.rand() < fault.probability
        if strike and fault.kind == "drop":
            which = fault.direction
            if which == "any":
                which = ("both", "up", "down")[self.proxy.randint(0, 2)]
            self.black[UP] |= which in ("both", "up")
            self.black[DOWN] |= which in ("both", "down")
        if self.black[d]:
            self.proxy.count("dropped_bytes", len(data))
            return True
        if strike and fault.kind in ("cut", "reset"):
            self._enqueue(d, data[:self.proxy.randint(0, len(data) - 1)], now)
            self.proxy.count("cuts" if fault.kind == "cut" else "resets")
            self._end(fault.kind == "reset")
            return False
        due = now
        if strike and fault.kind == "delay":
            due = now + fault.delay_ms / 1000.0
            self.proxy.count("delayed")
        self._enqueue(d, data, due)
        if strike and fault.kind == "duplicate":
            self._enqueue(d, data, due)
            self.proxy.count("duplicated")
        return True

    def _enqueue(self, d, data, due):
        if not data:
            return
        q = self.queues[d]
        if q:
            due = max(due, q[-1][0])  # never overtake an earlier (delayed) chunk
        q.append([due, data])
        with self._plock:
            self.queued[d] += len(data)

    def _write(self, d, sock):
        q = self.queues[d]
        while q and q[0][0] <= time.monotonic():
            data = q[0][1]
            try:
                n = sock.send(data)
            except (BlockingIOError, InterruptedError):
                return True
            except OSError:
                return False
            with self._plock:
                self.queued[d] -= n
            self.proxy.count("bytes_up" if d == UP else "bytes_down", n)
            if n < len(data):
                q[0][1] = data[n:]
                return True
            q.popleft()
        return True

    def _end(self, reset):
        """Ends the connection on both sides: an RST, or a FIN after what is queued (best effort,
        up to 0.2 s)."""
        socks = (self.client, self.server)
        if reset:
            for s in socks:
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except OSError:
                    pass
            return  # the caller closes them
        deadline = time.monotonic() + 0.2
        dst = (self.server, self.client)
        while any(self.queues) and time.monotonic() < deadline:
            for d in (UP, DOWN):
                if self.queues[d]:
                    self.queues[d][0][0] = 0.0  # a cut does not wait for delays
                    if not self._write(d, dst[d]):
                        return
            if any(self.queues):
                time.sleep(0.005)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
