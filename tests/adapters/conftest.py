"""The adapter tests look specs up in the user's folder too: keep them off the real one."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def no_user_config_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    """XDG_CONFIG_HOME unset: the user's folder is ~/.config/gitswarm under the test's own HOME."""
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)


class Echo(socketserver.BaseRequestHandler):
    """Echoes what it gets; a plain-HTTP request is answered with the request it got, as the body."""

    def handle(self) -> None:
        data = self.request.recv(65536)
        if data.startswith((b"GET ", b"POST ")):
            self.request.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
            return
        while data:
            self.request.sendall(data)
            data = self.request.recv(65536)


@pytest.fixture
def echo() -> Iterator[int]:
    """A loopback echo server (an agent's endpoint, an allowed destination of the proxy): its port."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
