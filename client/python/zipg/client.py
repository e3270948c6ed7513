"""The client: one connection to an aggregator, the contract's operations as methods.

Wire settings match the C++ servers: TSocket + TFramedTransport + TBinaryProtocol (the C-accelerated
binary protocol when Thrift's extension is present; same bytes on the wire).
"""
# SPDX-License-Identifier: GPL-3.0-or-later

import json
import math
import numbers
import socket
import ssl
import struct
import threading

from thrift.Thrift import TApplicationException, TException, TType
from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport

try:  # generated at build time from thrift/zipg.thrift (see setup.py)
    from zipg.rpc import GraphService
    from zipg.rpc.ttypes import BatchedWrite, ErrorCode, GraphError, SearchRequest, WriteKind
except ImportError as _e:  # pragma: no cover - a broken install, reported clearly
    raise ImportError(
        "zipg.rpc (the Thrift code generated from thrift/zipg.thrift) is missing: install the "
        "package with pip (it is generated at build time, not kept in the source tree): %s" % _e
    ) from _e

__all__ = ["Error", "Graph", "connect", "CODES"]

#: The contract's error codes.
CODES = (
    "INVALID_ARGUMENT",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "UNAVAILABLE",
    "DEADLINE_EXCEEDED",
    "RESOURCE_EXHAUSTED",
    "INTERNAL",
    "FAILED_PRECONDITION",
)

# Requests larger than this are refused before sending (RESOURCE_EXHAUSTED), as the C++ client
# does (rpc/remote_graph.h kMaxRequestBytes); the servers drop frames above 64 MiB.
MAX_REQUEST_BYTES = 16 << 20

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1

# The traversals' default limits (interface.md, "Traversals").
_BFS_LIMIT = 10000
_RPQ_LIMIT = 100000

# search_node_ids (interface.md, "Search inside values"; model/search.h): its match kinds, its
# default and largest limit, and the longest pattern (in bytes, UTF-8 encoded).
SEARCH_MATCHES = ("contains", "prefix", "suffix", "exact")
_SEARCH_LIMIT = 10000
_SEARCH_MAX_LIMIT = 1000000
_SEARCH_MAX_PATTERN = 4096


class Error(Exception):
    """A failed operation: `code` is one of CODES, `message` says what happened."""

    def __init__(self, code, message):
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self):
        return "%s: %s" % (self.code, self.message)

    def __repr__(self):
        return "zipg.Error(%r, %r)" % (self.code, self.message)


def _protocol_factory():
    try:
        from thrift.protocol import fastbinary  # noqa: F401  (the C extension)

        return TBinaryProtocol.TBinaryProtocolAccelerated
    except ImportError:
        return TBinaryProtocol.TBinaryProtocol


_PROTOCOL = _protocol_factory()


# ---- argument checks (all INVALID_ARGUMENT, raised before anything is sent) ----------------------


def _bad(op, name, expected, value):
    return Error("INVALID_ARGUMENT",
                 "%s: argument '%s' must be %s, not %s"
                 % (op, name, expected, type(value).__name__))


def _int(op, name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _bad(op, name, "an int", value)
    value = int(value)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise Error("INVALID_ARGUMENT", "%s: argument '%s' (%d) is out of the int64 range"
                    % (op, name, value))
    return value


def _str(op, name, value, what):
    if not isinstance(value, str):
        raise _bad(op, name, what, value)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:  # lone surrogates cannot be sent as UTF-8
        raise Error("INVALID_ARGUMENT", "%s: argument '%s' holds a string that is not valid "
                    "Unicode (%s)" % (op, name, e.reason)) from None
    return value


def _props(op, name, value):
    if not isinstance(value, dict):
        raise _bad(op, name, "a dict of str -> str", value)
    out = {}
    for k, v in value.items():
        _str(op, name, k, "a dict of str -> str (a key is not a str)")
        _str(op, name, v, "a dict of str -> str (the value of %r is not a str)" % (k,))
        out[k] = v
    return out


def _names(op, name, value):
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise _bad(op, name, "a list of property names", value)
    return [_str(op, name, v, "a list of property names (str)") for v in value]


def _ids(op, name, value):
    if not isinstance(value, (list, tuple, set, frozenset, range)):
        raise _bad(op, name, "a list of ints", value)
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise _bad(op, name, "a list of ints (an element is not an int)", v)
        out.append(_int(op, name, v))
    return out


def _int32(op, name, value):
    """An int that must fit Thrift's i32 (its range is the server's to check)."""
    value = _int(op, name, value)
    if not -(1 << 31) <= value < (1 << 31):
        raise Error("INVALID_ARGUMENT", "%s: argument '%s' (%d) is out of range"
                    % (op, name, value))
    return value


def _at(op, value):
    """A read's `at`: None (also for 0: the latest state) or a sequence, an int >= 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _bad(op, "at", "an int (the \"seq\" of snapshot()) or None", value)
    value = _int(op, "at", value)
    if value < 0:
        raise Error("INVALID_ARGUMENT", "%s: argument 'at' must be a sequence returned by "
                    "snapshot, not %d" % (op, value))
    return value or None


def _request_bytes(ids=0, props=None, names=None):
    n = 8 * ids
    for k, v in (props or {}).items():
        n += 8 + len(k.encode("utf-8")) + len(v.encode("utf-8"))
    for k in names or ():
        n += 4 + len(k.encode("utf-8"))
    return n


def _check_size(op, n):
    if n > MAX_REQUEST_BYTES:
        raise Error("RESOURCE_EXHAUSTED", "%s: request of ~%d bytes exceeds the limit of %d"
                    % (op, n, MAX_REQUEST_BYTES))


# ---- results as plain values (the JSON shapes of `zipg query`) -----------------------------------


def _edge(e):
    return {
        "src": e.src,
        "type": e.type,
        "dst": e.dst,
        "timestamp": e.timestamp,
        "properties": dict(e.properties or {}),
    }


def _edges(edges):
    return [_edge(e) for e in edges or ()]


def _parse_endpoint(endpoint):
    if not isinstance(endpoint, str):
        raise Error("INVALID_ARGUMENT", "endpoint must be a 'host:port' str, not %s"
                    % type(endpoint).__name__)
    host, sep, port = endpoint.rpartition(":")
    if host.startswith("[") and host.endswith("]"):  # [::1]:port
        host = host[1:-1]
    valid_port = port.isascii() and port.isdigit() and len(port) <= 5 and 1 <= int(port) <= 65535
    if not sep or not host or not valid_port:
        raise Error("INVALID_ARGUMENT", "'%s' is not HOST:PORT (port 1..65535)" % endpoint)
    return host, int(port)


def _tls_context(ca, cert, key):
    """Mutual TLS as the servers expect it (docs/deploy.md): the cluster's CA, our certificate and
    key; names in certificates are not checked, the CA's signature is. None: plaintext."""
    if ca is None and cert is None and key is None:
        return None
    if not (ca and cert and key):
        raise Error("INVALID_ARGUMENT", "TLS needs all of tls_ca, tls_cert and tls_key")
    try:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(cafile=ca)
        ctx.load_cert_chain(certfile=cert, keyfile=key)
    except (OSError, ssl.SSLError) as e:
        raise Error("INVALID_ARGUMENT", "TLS set-up failed: %s" % e) from None
    return ctx


def _timeout(name, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not 0 < value < math.inf:
        raise Error("INVALID_ARGUMENT", "%s must be a positive number of seconds or None, not %r"
                    % (name, value))
    return float(value)


# The call context (docs/limits.md, "Deadlines"): an i64 field with this id appended to every
# call's arguments holds the milliseconds the server has to answer.
_DEADLINE_FIELD_ID = 32767
# ... and one with this id, after it, the snapshot a read answers at (interface.md, "Consistency
# and snapshots"; rpc/connection_pool.h kSnapshotFieldId): sent only for a read given `at`; absent
# (as 0) means the latest state.
_SNAPSHOT_FIELD_ID = 32766


class _CheckedProtocol:
    """Numbers the calls on a connection and checks each reply's method and number.

    The generated client sends sequence id 0 and does not look at the reply's: a frame repeated on
    the way would answer the next call with another call's result (docs/serving.md, "Sequence
    ids"). A reply of an earlier call is skipped; any other mismatch is a transport error, which
    drops the connection. With `deadline_ms`, every call's arguments also carry the call context
    (_DEADLINE_FIELD_ID), so that the server's sub-calls stop when this client stops waiting; with
    `at` set (by Graph._call, for one call, under its lock), they carry the snapshot the read
    answers at (_SNAPSHOT_FIELD_ID), after the deadline. Everything else goes to the wrapped
    protocol.
    """

    def __init__(self, inner, deadline_ms=None):
        self._inner = inner
        self._seqid = 0
        self._name = None
        self._deadline_ms = deadline_ms
        self._depth = 0
        self.at = None  # the snapshot of the call being written; None (or 0): none sent
        fast = getattr(inner, "_fast_encode", None)
        # The C encoder writes a call's whole argument struct at once, ending in its stop byte.
        self._fast_encode = None if fast is None else self._encode_args

    def _context(self):
        """The call context's fields as (name, id, value), in the order they are written."""
        fields = []
        if self._deadline_ms is not None:
            fields.append(("deadline_ms", _DEADLINE_FIELD_ID, self._deadline_ms))
        if self.at:
            fields.append(("at", _SNAPSHOT_FIELD_ID, self.at))
        return fields

    def _encode_args(self, obj, spec):
        data = self._inner._fast_encode(obj, spec)
        context = b"".join(struct.pack("!bhq", TType.I64, fid, value)
                           for _, fid, value in self._context())
        return data[:-1] + context + data[-1:] if context else data

    def writeStructBegin(self, name):
        self._depth += 1
        self._inner.writeStructBegin(name)

    def writeStructEnd(self):
        self._depth -= 1
        self._inner.writeStructEnd()

    def writeFieldStop(self):
        if self._depth == 1:  # the end of a call's arguments (a struct argument's is deeper)
            for name, fid, value in self._context():
                self._inner.writeFieldBegin(name, TType.I64, fid)
                self._inner.writeI64(value)
                self._inner.writeFieldEnd()
        self._inner.writeFieldStop()

    def __getattr__(self, attr):
        return getattr(self._inner, attr)

    def writeMessageBegin(self, name, mtype, seqid):
        self._seqid += 1  # 1 first: 0 means "unnumbered" to the servers
        self._name = name
        self._depth = 0
        self._inner.writeMessageBegin(name, mtype, self._seqid)

    def readMessageBegin(self):
        while True:
            name, mtype, seqid = self._inner.readMessageBegin()
            if 0 < seqid < self._seqid:  # a repeated reply of an earlier call
                self._inner.skip(TType.STRUCT)
                self._inner.readMessageEnd()
                continue
            if seqid != self._seqid or name != self._name:
                raise TTransport.TTransportException(
                    TTransport.TTransportException.UNKNOWN,
                    "reply out of step: got %s #%d, expected %s #%d"
                    % (name, seqid, self._name, self._seqid))
            return name, mtype, seqid


class _Connection:
    # Past this many calls a connection is not reused (sequence ids are 32-bit).
    MAX_CALLS = 2**31 - 2

    def __init__(self, sock, deadline_ms=None):
        tsocket = TSocket.TSocket()
        tsocket.setHandle(sock)
        self.transport = TTransport.TFramedTransport(tsocket)
        self.protocol = _CheckedProtocol(_PROTOCOL(self.transport), deadline_ms)
        self.client = GraphService.Client(self.protocol)

    def used_up(self):
        return self.protocol._seqid >= self.MAX_CALLS

    def close(self):
        try:
            self.transport.close()
        except Exception:  # closing a broken socket: nothing to report
            pass


def _is_timeout(exc):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (socket.timeout, TimeoutError)):
            return True
        if isinstance(exc, TTransport.TTransportException) and \
                exc.type == TTransport.TTransportException.TIMED_OUT:
            return True
        exc = getattr(exc, "inner", None) or exc.__cause__ or exc.__context__
    return False


def _describe(exc):
    inner = getattr(exc, "inner", None)
    text = str(exc) or type(exc).__name__
    if inner is not None:
        text += " (%s)" % (inner,)
    return text


class Graph:
    """A connection to one aggregator; create it with zipg.connect().

    Every method is one operation of the contract, with its name and keyword arguments, returning
    plain Python values shaped like the JSON results of `zipg query`; failures raise zipg.Error.
    Every read also takes the keyword `at`: a sequence from snapshot(), to answer as of exactly
    the writes up to it (None or 0: the latest state); one the cluster no longer holds is
    FAILED_PRECONDITION. Writes take no `at`.
    After a connection failure the next call reconnects; reads that fail on a connection that had
    already been used (e.g. the aggregator restarted meanwhile) are retried once on a new one.
    A Graph may be shared by threads (calls are serialized); close() it when done, or use `with`.
    """

    def __init__(self, endpoint, timeout=10.0, connect_timeout=None, tls_ca=None, tls_cert=None,
                 tls_key=None):
        self._host, self._port = _parse_endpoint(endpoint)
        self._endpoint = endpoint
        self._tls = _tls_context(tls_ca, tls_cert, tls_key)
        self._timeout = _timeout("timeout", timeout)
        connect_timeout = _timeout("connect_timeout", connect_timeout)
        self._connect_timeout = connect_timeout if connect_timeout is not None else self._timeout
        self._lock = threading.Lock()
        self._conn = None
        self._closed = False

    @property
    def endpoint(self):
        return self._endpoint

    def __repr__(self):
        return "<zipg.Graph %s%s>" % (self._endpoint, " closed" if self._closed else "")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()

    def close(self):
        """Closes the connection; later calls raise INVALID_ARGUMENT. Closing twice is fine."""
        with self._lock:
            self._closed = True
            self._drop()

    # ---- connection handling --------------------------------------------------------------------

    def _drop(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _open(self):
        try:
            sock = socket.create_connection((self._host, self._port), timeout=self._connect_timeout)
        except (socket.timeout, TimeoutError):
            raise Error("UNAVAILABLE", "cannot connect to %s: no answer within %gs"
                        % (self._endpoint, self._connect_timeout)) from None
        except OSError as e:
            raise Error("UNAVAILABLE", "cannot connect to %s: %s"
                        % (self._endpoint, e.strerror or e)) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock)  # the handshake, within connect_timeout
            sock.settimeout(self._timeout)
        except ssl.SSLError as e:
            sock.close()
            raise Error("UNAVAILABLE", "TLS handshake with %s failed: %s"
                        % (self._endpoint, e)) from None
        except OSError as e:
            sock.close()
            raise Error("UNAVAILABLE", "cannot connect to %s: %s"
                        % (self._endpoint, e.strerror or e)) from None
        # The server learns how long this client waits for each call (None: no deadline).
        # At most a day, as servers take it.
        deadline_ms = None if self._timeout is None else \
            max(1, min(int(self._timeout * 1000), 86400000))
        return _Connection(sock, deadline_ms)

    def connect(self):
        """Opens the connection now (zipg.connect does) instead of at the first call."""
        with self._lock:
            self._check_open()
            if self._conn is None:
                self._conn = self._open()

    def _check_open(self):
        if self._closed:
            raise Error("INVALID_ARGUMENT", "the connection to %s is closed" % self._endpoint)

    def _call(self, method, *args, read=True, at=None):
        """Calls `method`; `at` (a read's, checked by _at): the snapshot this one call reads at."""
        with self._lock:
            self._check_open()
            for attempt in (0, 1):
                reused = self._conn is not None
                if not reused:
                    self._conn = self._open()
                if self._conn.used_up():
                    self._drop()
                    self._conn = self._open()
                protocol = self._conn.protocol
                protocol.at = at
                try:
                    return getattr(self._conn.client, method)(*args)
                except GraphError as e:  # declared error: the connection stays usable
                    code = ErrorCode._VALUES_TO_NAMES.get(e.code)
                    if code not in CODES:
                        raise Error("INTERNAL", "unknown error code %r: %s"
                                    % (e.code, e.message)) from None
                    raise Error(code, e.message if e.message is not None else "") from None
                except TApplicationException as e:
                    self._drop()
                    raise Error("INTERNAL", "%s rejected %s: %s"
                                % (self._endpoint, method, _describe(e))) from None
                except (TTransport.TTransportException, OSError) as e:
                    self._drop()
                    if _is_timeout(e):
                        raise Error("DEADLINE_EXCEEDED", "%s did not answer %s within %gs"
                                    % (self._endpoint, method, self._timeout)) from None
                    if reused and read and attempt == 0:
                        continue  # a stale connection (e.g. the server restarted): once more
                    raise Error("UNAVAILABLE", "%s failed during %s: %s"
                                % (self._endpoint, method, _describe(e))) from None
                except TException as e:  # a reply that does not parse: a damaged stream
                    self._drop()
                    raise Error("UNAVAILABLE", "%s: unreadable reply from %s: %s"
                                % (method, self._endpoint, _describe(e))) from None
                except Exception as e:  # e.g. a reply that is not valid UTF-8
                    self._drop()
                    raise Error("INTERNAL", "%s: bad reply from %s: %s: %s"
                                % (method, self._endpoint, type(e).__name__, e)) from None
                except BaseException:  # KeyboardInterrupt mid-call: the stream is out of step
                    self._drop()
                    raise
                finally:  # `at` is this call's only (a retry sets it again)
                    protocol.at = None

    # ---- paper primitives (ZipG Table 1) --------------------------------------------------------

    def get_node_property(self, id, properties=None, *, at=None):
        """{name: value} of the requested (all if None) present properties; None if no node."""
        op = "get_node_property"
        id = _int(op, "id", id)
        names = None if properties is None else _names(op, "properties", properties)
        at = _at(op, at)
        _check_size(op, _request_bytes(names=names))
        r = self._call(op, id, names is None, names or [], at=at)
        return None if r.properties is None else dict(r.properties)

    def get_node_ids(self, properties, *, at=None):
        """Sorted ids of the nodes matching ALL pairs; an empty dict is INVALID_ARGUMENT."""
        op = "get_node_ids"
        props = _props(op, "properties", properties)
        at = _at(op, at)
        _check_size(op, _request_bytes(props=props))
        return list(self._call(op, props, at=at))

    def search_node_ids(self, pattern, property=None, match="contains", limit=None, *, at=None):
        """{"ids": [id, ...], "truncated": bool}: the sorted ids of the live nodes with a property
        value (of `property`, or of any property if None) that contains `pattern` (match
        "contains", also if None), starts with it ("prefix"), ends with it ("suffix") or equals it
        ("exact"), comparing the UTF-8 bytes, case-sensitive; each node once. At most `limit`
        (1..1000000, default 10000) ids, the smallest; `truncated` says whether more match. An
        empty pattern, one over 4096 bytes (UTF-8), an unknown `match` or a limit out of range is
        INVALID_ARGUMENT, raised before anything is sent."""
        op = "search_node_ids"
        pattern = _str(op, "pattern", pattern, "a str")
        size = len(pattern.encode("utf-8"))
        if size == 0:
            raise Error("INVALID_ARGUMENT", "%s: argument 'pattern' must not be empty" % op)
        if size > _SEARCH_MAX_PATTERN:
            raise Error("INVALID_ARGUMENT", "%s: argument 'pattern' has %d bytes (UTF-8), at most "
                        "%d" % (op, size, _SEARCH_MAX_PATTERN))
        prop = None if property is None else _str(op, "property", property, "a str or None")
        match = "contains" if match is None else _str(op, "match", match, "a str")
        if match not in SEARCH_MATCHES:
            raise Error("INVALID_ARGUMENT", "%s: argument 'match' must be one of %s, not %r"
                        % (op, ", ".join(SEARCH_MATCHES), match))
        limit = _SEARCH_LIMIT if limit is None else _int(op, "limit", limit)
        if not 1 <= limit <= _SEARCH_MAX_LIMIT:
            raise Error("INVALID_ARGUMENT", "%s: argument 'limit' must be in 1..%d, not %d"
                        % (op, _SEARCH_MAX_LIMIT, limit))
        at = _at(op, at)
        _check_size(op, _request_bytes(names=[pattern, match] + ([prop] if prop else [])))
        r = self._call(op, SearchRequest(pattern=pattern, any_property=prop is None,
                                         property=prop or "", match=match, limit=limit), at=at)
        return {"ids": list(r.ids or []), "truncated": bool(r.truncated)}

    def get_neighbor_ids(self, id, type=None, properties=None, *, at=None):
        """Sorted distinct dst of the node's edges (of `type`, or all), kept if dst matches."""
        op = "get_neighbor_ids"
        id = _int(op, "id", id)
        t = None if type is None else _int(op, "type", type)
        props = {} if properties is None else _props(op, "properties", properties)
        at = _at(op, at)
        _check_size(op, _request_bytes(props=props))
        return list(self._call(op, id, t is None, 0 if t is None else t, props, at=at))

    def get_edge_record(self, id, type, *, at=None):
        """{"src", "type", "count"} of the node's edges of `type`."""
        op = "get_edge_record"
        r = self._call(op, _int(op, "id", id), _int(op, "type", type), at=_at(op, at))
        return {"src": r.src, "type": r.type, "count": r.count}

    def get_edge_range(self, id, type, t_lo, t_hi, *, at=None):
        """[begin, end): the TimeOrder range of the edges with t_lo <= timestamp <= t_hi."""
        op = "get_edge_range"
        r = self._call(op, _int(op, "id", id), _int(op, "type", type), _int(op, "t_lo", t_lo),
                       _int(op, "t_hi", t_hi), at=_at(op, at))
        return [r.begin_order, r.end_order]

    def get_edge_data(self, id, type, time_order, *, at=None):
        """The edge at `time_order` (0 = newest), or None if out of range."""
        op = "get_edge_data"
        r = self._call(op, _int(op, "id", id), _int(op, "type", type),
                       _int(op, "time_order", time_order), at=_at(op, at))
        return None if r.edge is None else _edge(r.edge)

    # ---- TAO / LinkBench ------------------------------------------------------------------------

    def obj_get(self, id, *, at=None):
        """{"id", "properties"}, or None if there is no such node."""
        op = "obj_get"
        r = self._call(op, _int(op, "id", id), at=_at(op, at))
        if r.node is None:
            return None
        return {"id": r.node.id, "properties": dict(r.node.properties or {})}

    def obj_add(self, id, properties=None):
        """Adds a node (ALREADY_EXISTS if live); properties default to none."""
        op = "obj_add"
        id = _int(op, "id", id)
        props = {} if properties is None else _props(op, "properties", properties)
        _check_size(op, _request_bytes(props=props))
        self._call(op, id, props, read=False)

    def obj_update(self, id, properties):
        """Replaces the node's whole property list (NOT_FOUND if absent)."""
        op = "obj_update"
        id = _int(op, "id", id)
        props = _props(op, "properties", properties)
        _check_size(op, _request_bytes(props=props))
        self._call(op, id, props, read=False)

    def obj_delete(self, id):
        """Deletes the node and its outgoing edges: {"deleted": bool}."""
        op = "obj_delete"
        return {"deleted": bool(self._call(op, _int(op, "id", id), read=False))}

    def assoc_add(self, src, type, dst, timestamp, properties=None):
        """Adds or replaces the edge (src, type, dst); properties default to none.
        {"replaced": bool}: whether a live edge was replaced."""
        op = "assoc_add"
        args = (_int(op, "src", src), _int(op, "type", type), _int(op, "dst", dst),
                _int(op, "timestamp", timestamp))
        props = {} if properties is None else _props(op, "properties", properties)
        _check_size(op, _request_bytes(props=props))
        return {"replaced": bool(self._call(op, *args, props, read=False))}

    def assoc_update(self, src, type, dst, timestamp, properties):
        """Replaces an existing edge (NOT_FOUND if absent)."""
        op = "assoc_update"
        args = (_int(op, "src", src), _int(op, "type", type), _int(op, "dst", dst),
                _int(op, "timestamp", timestamp))
        props = _props(op, "properties", properties)
        _check_size(op, _request_bytes(props=props))
        self._call(op, *args, props, read=False)

    def assoc_delete(self, src, type, dst):
        """Deletes the edge (src, type, dst): {"deleted": bool}."""
        op = "assoc_delete"
        deleted = self._call(op, _int(op, "src", src), _int(op, "type", type),
                             _int(op, "dst", dst), read=False)
        return {"deleted": bool(deleted)}

    def assoc_range(self, id, type, pos, limit, *, at=None):
        """The edges at TimeOrder pos .. pos+limit-1 (newest first)."""
        op = "assoc_range"
        return _edges(self._call(op, _int(op, "id", id), _int(op, "type", type),
                                 _int(op, "pos", pos), _int(op, "limit", limit), at=_at(op, at)))

    def assoc_count(self, id, type, *, at=None):
        """The number of the node's edges of `type`."""
        op = "assoc_count"
        return self._call(op, _int(op, "id", id), _int(op, "type", type), at=_at(op, at))

    def assoc_get(self, id, type, ids, low, high, *, at=None):
        """The edges whose dst is in `ids` and low <= timestamp <= high, newest first."""
        op = "assoc_get"
        args = (_int(op, "id", id), _int(op, "type", type), _ids(op, "ids", ids),
                _int(op, "low", low), _int(op, "high", high))
        at = _at(op, at)
        _check_size(op, _request_bytes(ids=len(args[2])))
        return _edges(self._call(op, *args, at=at))

    def assoc_time_range(self, id, type, low, high, limit, *, at=None):
        """Up to `limit` edges with low <= timestamp <= high, newest first."""
        op = "assoc_time_range"
        return _edges(self._call(op, _int(op, "id", id), _int(op, "type", type),
                                 _int(op, "low", low), _int(op, "high", high),
                                 _int(op, "limit", limit), at=_at(op, at)))

    def write_batch(self, writes):
        """Sends many writes in few round trips: `writes` is a list of dicts {"op": <a write
        operation>, <its arguments by name>}, applied in order, each as its own call would be (not
        atomically: a failed write stops nothing). Returns one outcome per write, in order: what
        its call returns (None, {"deleted": bool} or {"replaced": bool}), or a zipg.Error for a
        write that failed (never raised). A batch over the request size goes as several calls."""
        if isinstance(writes, (str, bytes, dict)) or not isinstance(writes, (list, tuple)):
            raise _bad("write_batch", "writes", "a list of dicts", writes)
        outcomes = [None] * len(writes)
        pending = []  # (index, BatchedWrite, bytes)
        for i, w in enumerate(writes):
            try:
                pending.append((i,) + _batched(w))
            except Error as e:
                outcomes[i] = e
        chunk, size = [], 0
        for item in pending:
            if chunk and (len(chunk) == _BATCH_WRITES or size + item[2] > MAX_REQUEST_BYTES // 2):
                self._send_batch(chunk, writes, outcomes)
                chunk, size = [], 0
            chunk.append(item)
            size += item[2]
        if chunk:
            self._send_batch(chunk, writes, outcomes)
        return outcomes

    def _send_batch(self, chunk, writes, outcomes):
        try:
            results = self._call("write_batch", [b for _, b, _ in chunk], read=False)
        except Error as e:  # the whole call failed: so did each of its writes
            for i, _, _ in chunk:
                outcomes[i] = e
            return
        if len(results) != len(chunk):
            e = Error("INTERNAL", "write_batch answered %d outcomes for %d writes"
                      % (len(results), len(chunk)))
            for i, _, _ in chunk:
                outcomes[i] = e
            return
        for (i, _, _), r in zip(chunk, results):
            if r.error is not None:
                code = ErrorCode._VALUES_TO_NAMES.get(r.error.code)
                outcomes[i] = Error(code if code in CODES else "INTERNAL", r.error.message or "")
                continue
            op = writes[i]["op"]
            if op in ("obj_delete", "assoc_delete"):
                outcomes[i] = {"deleted": bool(r.found)}
            elif op == "assoc_add":
                outcomes[i] = {"replaced": bool(r.found)}
            else:
                outcomes[i] = None

    # ---- traversals (ZipG appendix B) -----------------------------------------------------------

    def bfs(self, id, max_depth, types=None, limit=None, *, at=None):
        """[{"id", "depth"}, ...]: every id reachable from `id` over live outgoing edges (of the
        listed `types`, or of any type if None; [] allows none) in at most `max_depth` (0..10)
        hops, each once at its smallest depth, `id` itself at depth 0; ordered by (depth, id), at
        most `limit` (1..1000000, default 10000) entries, the first of that order."""
        op = "bfs"
        id = _int(op, "id", id)
        max_depth = _int32(op, "max_depth", max_depth)
        type_list = None if types is None else _ids(op, "types", types)
        limit = _BFS_LIMIT if limit is None else _int(op, "limit", limit)
        at = _at(op, at)
        _check_size(op, _request_bytes(ids=len(type_list or ())))
        r = self._call(op, id, type_list is None, type_list or [], max_depth, limit, at=at)
        ids, depths = r.ids or [], r.depths or []
        if len(ids) != len(depths):
            raise Error("INTERNAL", "bfs: the server answered %d ids and %d depths"
                        % (len(ids), len(depths)))
        return [{"id": i, "depth": d} for i, d in zip(ids, depths)]

    def rpq(self, expr, sources=None, limit=None, *, at=None):
        """{"pairs": [[src, dst], ...], "truncated": bool}: the distinct pairs such that some path
        from src to dst over live outgoing edges spells a word of the regular path expression
        `expr` over edge types (`1`, `_` any type, `a/b`, `a|b`, `a*`, `a+`, `a?`, parentheses;
        spaces ignored). Sources: the listed ids, or (None) every id with a node entry or a live
        edge. Sorted by (src, dst); at most `limit` (1..1000000, default 100000) pairs, the first
        of that order; `truncated` says whether more exist. A malformed expression is
        INVALID_ARGUMENT naming the position; a query over the server's time or memory budget is
        DEADLINE_EXCEEDED or RESOURCE_EXHAUSTED, never a partial answer."""
        op = "rpq"
        expr = _str(op, "expr", expr, "a str")
        source_list = None if sources is None else _ids(op, "sources", sources)
        limit = _RPQ_LIMIT if limit is None else _int(op, "limit", limit)
        at = _at(op, at)
        _check_size(op, _request_bytes(ids=len(source_list or ()), names=[expr]))
        r = self._call(op, expr, source_list is None, source_list or [], limit, at=at)
        srcs, dsts = r.srcs or [], r.dsts or []
        if len(srcs) != len(dsts):
            raise Error("INTERNAL", "rpq: the server answered %d sources and %d destinations"
                        % (len(srcs), len(dsts)))
        return {"pairs": [[s, d] for s, d in zip(srcs, dsts)], "truncated": bool(r.truncated)}

    # ---- snapshots (interface.md, "Consistency and snapshots") ----------------------------------

    def snapshot(self):
        """{"seq": n}: a sequence that covers every write acknowledged before the call. A read
        given `at=n` answers as of exactly the writes with sequence <= n, however many writes
        follow, while the cluster holds it (for its --snapshot-retention, 60 s by default; after
        that, or once a merge, rebuild or restart gave it up, FAILED_PRECONDITION)."""
        op = "snapshot"
        seq = self._call(op)
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise Error("INTERNAL", "%s: the server answered %r, not a sequence" % (op, seq))
        return {"seq": seq}

    # ---- the cluster ----------------------------------------------------------------------------

    def status(self):
        """The cluster as the aggregator sees it: its status JSON document, parsed."""
        text = self._call("status")
        try:
            return json.loads(text)
        except ValueError as e:
            raise Error("INTERNAL", "status: the server's answer is not JSON: %s" % e) from None


# Writes per write_batch call (as the C++ client, rpc/remote_graph.h kBatchWrites).
_BATCH_WRITES = 4096

# A write's kind and the arguments it takes (all of them required, but `properties` where marked).
_WRITE_ARGS = {
    "obj_add": (WriteKind.OBJ_ADD, ("id",), "optional"),
    "obj_update": (WriteKind.OBJ_UPDATE, ("id",), "required"),
    "obj_delete": (WriteKind.OBJ_DELETE, ("id",), None),
    "assoc_add": (WriteKind.ASSOC_ADD, ("src", "type", "dst", "timestamp"), "optional"),
    "assoc_update": (WriteKind.ASSOC_UPDATE, ("src", "type", "dst", "timestamp"), "required"),
    "assoc_delete": (WriteKind.ASSOC_DELETE, ("src", "type", "dst"), None),
}


def _batched(w):
    """(BatchedWrite, request bytes) for one write of a batch; Error if it is malformed."""
    if not isinstance(w, dict) or not isinstance(w.get("op"), str):
        raise Error("INVALID_ARGUMENT", "write_batch: a write must be a dict with \"op\"")
    op = w["op"]
    if op not in _WRITE_ARGS:
        raise Error("INVALID_ARGUMENT", "write_batch: %r is not a write operation" % (op,))
    kind, names, props_rule = _WRITE_ARGS[op]
    allowed = set(names) | {"op"} | ({"properties"} if props_rule else set())
    extra = sorted(set(w) - allowed)
    if extra:
        raise Error("INVALID_ARGUMENT", "%s: unknown argument %r" % (op, extra[0]))
    values = {}
    for name in names:
        if name not in w:
            raise Error("INVALID_ARGUMENT", "%s: missing argument '%s'" % (op, name))
        values[name] = _int(op, name, w[name])
    props = {}
    if props_rule == "required" and "properties" not in w:
        raise Error("INVALID_ARGUMENT", "%s: missing argument 'properties'" % op)
    if props_rule and w.get("properties") is not None:
        props = _props(op, "properties", w["properties"])
    b = BatchedWrite(kind=kind, id=values.get("id", values.get("src", 0)),
                     type=values.get("type", 0), dst=values.get("dst", 0),
                     timestamp=values.get("timestamp", 0), properties=props)
    size = 48 + _request_bytes(props=props)  # 48: the fixed fields (as rpc::RequestBytes)
    _check_size(op, size)
    return b, size


def connect(endpoint, timeout=10.0, connect_timeout=None, tls_ca=None, tls_cert=None,
            tls_key=None):
    """Connects to the aggregator at "host:port".

    `timeout` (seconds, None = wait forever) bounds each network wait of a call (a call that gets
    no answer in time raises DEADLINE_EXCEEDED); `connect_timeout` bounds connecting (default:
    `timeout`). `tls_ca`, `tls_cert`, `tls_key` (files, all three or none): mutual TLS with a
    cluster that runs it. Raises zipg.Error UNAVAILABLE if the aggregator cannot be reached.
    """
    g = Graph(endpoint, timeout=timeout, connect_timeout=connect_timeout, tls_ca=tls_ca,
              tls_cert=tls_cert, tls_key=tls_key)
    g.connect()
    return g
