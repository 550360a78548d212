"""The endpoint proxy of one sandboxed run: outside the sandbox, the only way its agent reaches a host.

A Unix socket in a directory of its own, bound into the sandbox, where the run's network bridge
(adapters/netbridge.py) brings the agent's connections. It speaks the two requests an HTTP proxy
gets: `CONNECT host:port` (HTTPS, or any stream: the bytes are relayed as they are) and a plain-HTTP
request with an absolute URI (`GET http://host:port/path`, sent on with `Connection: close`). A
destination the run may reach is connected to from here (its name resolved here, outside the
sandbox); any other is answered 403 and remembered, once each and at most MAX_REFUSED, for the run's
record. One thread accepts, one more serves each connection; `close()` ends them all and removes the
socket: a proxy lives no longer than its run.
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

from gitswarm.adapters.hosts import Dest, from_url, parse_host
from gitswarm.adapters.netbridge import EVENTS, read_head, relay
from gitswarm.model.artifacts import MAX_REFUSED

SOCKET_NAME = "proxy.sock"
MAX_SOCKET_PATH = 100  # a Unix socket's path must fit in 108 bytes
CONNECT_SECONDS = 10.0
JOIN_SECONDS = 2.0
HOP_HEADERS = (b"connection", b"proxy-connection", b"keep-alive", b"proxy-authorization", b"proxy-authenticate")


class Proxy:
    """The proxy of one run, allowing `allowed`; serving from `start()` to `close()`."""

    def __init__(self, allowed: Iterable[Dest]) -> None:
        self.allowed = frozenset(allowed)
        self.directory = _socket_dir()
        self.path = self.directory / SOCKET_NAME
        self._refused: list[str] = []
        self._lock = threading.Lock()
        self._stop_r, self._stop_w = os.pipe()
        self._threads: set[threading.Thread] = set()
        self._listener = socket.socket(socket.AF_UNIX)
        self._accepting: threading.Thread | None = None
        self._closed = False
        self._stopped = False  # closed, and its threads told to end

    def start(self) -> Proxy:
        try:
            self._listener.bind(str(self.path))
            self._listener.listen(64)
        except OSError:
            self.close()
            raise
        self._accepting = threading.Thread(target=self._accept, name="gitswarm-proxy", daemon=True)
        self._accepting.start()
        return self

    @property
    def refused(self) -> tuple[str, ...]:
        """The destinations refused so far (`host:port`), in the order first tried."""
        with self._lock:
            return tuple(self._refused)

    def close(self) -> None:
        """Stop serving: every connection is cut, the threads end, the socket and its directory go."""
        if self._closed:
            return
        self._closed = True
        os.write(self._stop_w, b"x")
        deadline = time.monotonic() + JOIN_SECONDS  # for them all: a thread still connecting ends on its own
        if self._accepting is not None:
            self._accepting.join(JOIN_SECONDS)
        with self._lock:
            serving = list(self._threads)
        for thread in serving:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._listener.close()
        shutil.rmtree(self.directory, ignore_errors=True)
        with self._lock:
            self._stopped = True
            if not self._threads:  # else the last thread out closes the pipe (one still connecting, say)
                self._close_pipe()

    def __enter__(self) -> Proxy:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()

    def _accept(self) -> None:
        poller = _poller(self._listener.fileno(), self._stop_r)
        while True:
            if self._stop_r in [fd for fd, _ in poller.poll()]:
                return
            try:
                conn, _ = self._listener.accept()
            except OSError:
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), name="gitswarm-proxy-conn", daemon=True)
            with self._lock:
                if self._stopped:
                    conn.close()
                    return
                self._threads.add(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn:
                self._answer(conn)
        finally:
            with self._lock:
                self._threads.discard(threading.current_thread())
                if self._stopped and not self._threads:
                    self._close_pipe()

    def _close_pipe(self) -> None:
        """Close the stop pipe, once no thread polls it (the lock held)."""
        if self._stop_w >= 0:
            os.close(self._stop_r)
            os.close(self._stop_w)
            self._stop_r = self._stop_w = -1

    def _answer(self, conn: socket.socket) -> None:
        got = read_head(conn, self._stop_r)
        if got is None:
            return
        head, rest = got
        request = Request.parse(head)
        if request is None:
            return _reply(conn, 400, "not a proxy request (CONNECT host:port, or an absolute http:// URI)")
        if request.dest not in self.allowed:
            self._refuse(request.dest)
            return _reply(conn, 403, f"{request.dest} is not this run's endpoint (gitswarm's sandbox, docs/sandbox.md)")
        try:
            upstream = socket.create_connection((request.dest.host, request.dest.port), timeout=CONNECT_SECONDS)
        except OSError as exc:
            return _reply(conn, 502, f"{request.dest}: {exc.strerror or exc}")
        with upstream:
            upstream.settimeout(None)
            try:
                if request.connect:
                    conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    if rest:
                        upstream.sendall(rest)
                else:
                    upstream.sendall(request.forwarded + rest)
            except OSError:
                return
            relay(conn, upstream, self._stop_r)

    def _refuse(self, dest: Dest) -> None:
        with self._lock:
            if str(dest) not in self._refused and len(self._refused) < MAX_REFUSED:
                self._refused.append(str(dest))


class Request:
    """What a proxy request asks: its destination; for plain HTTP, the request to send there."""

    def __init__(self, dest: Dest, connect: bool, forwarded: bytes = b"") -> None:
        self.dest = dest
        self.connect = connect
        self.forwarded = forwarded

    @classmethod
    def parse(cls, head: bytes) -> Request | None:
        """The request in an HTTP head, or None when it is no proxy request."""
        line, _, headers = head.partition(b"\r\n")
        words = line.split(b" ")
        if len(words) != 3 or not words[2].startswith(b"HTTP/"):
            return None
        method, target, version = words
        try:
            text = target.decode("ascii")
        except UnicodeDecodeError:
            return None
        if method == b"CONNECT":
            try:
                tunnelled = parse_host(text, default_port=0)
            except ValueError:
                return None
            return cls(tunnelled, connect=True) if tunnelled.port else None
        try:
            url = urlsplit(text)
        except ValueError:
            return None
        dest = from_url(text) if url.scheme == "http" else None
        if dest is None:
            return None
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        kept = [h for h in headers.split(b"\r\n") if h and h.split(b":", 1)[0].strip().lower() not in HOP_HEADERS]
        forwarded = b"\r\n".join([b" ".join([method, path.encode(), version]), *kept, b"Connection: close", b"", b""])
        return cls(dest, connect=False, forwarded=forwarded)


def _reply(conn: socket.socket, status: int, why: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = f"gitswarm: {why}\n".encode()
    try:
        conn.sendall(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
                     f"Connection: close\r\n\r\n".encode() + body)
    except OSError:
        pass


def _poller(*fds: int) -> select.poll:
    poller = select.poll()
    for fd in fds:
        poller.register(fd, EVENTS)
    return poller


def _socket_dir() -> Path:
    """A directory of its own for the socket, with a path short enough for one (else under /tmp)."""
    directory = Path(tempfile.mkdtemp(prefix="gitswarm-net-"))
    if len(str(directory / SOCKET_NAME)) <= MAX_SOCKET_PATH:
        return directory
    directory.rmdir()
    return Path(tempfile.mkdtemp(prefix="gitswarm-net-", dir="/tmp"))
