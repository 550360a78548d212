"""The endpoint proxy (adapters/proxy.py), on real sockets: what it allows, what it refuses and records,
and that it ends with its run. Loopback only."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from gitswarm.adapters.hosts import Dest
from gitswarm.adapters.proxy import Proxy, Request
from gitswarm.model.artifacts import MAX_REFUSED


def ask(proxy: Proxy, request: bytes) -> tuple[socket.socket, bytes]:
    """Send `request` to the proxy; the connection and the answer's head (with what came after it)."""
    conn = socket.socket(socket.AF_UNIX)
    conn.settimeout(10)
    conn.connect(str(proxy.path))
    conn.sendall(request)
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = conn.recv(4096)
        if not chunk:
            break
        answer += chunk
    return conn, answer


def read_all(conn: socket.socket, got: bytes = b"") -> bytes:
    while chunk := conn.recv(4096):
        got += chunk
    return got


def cut(conn: socket.socket) -> bool:
    """Whether the other end has gone: end of file, or reset (a connection not yet accepted when it closed)."""
    try:
        return conn.recv(10) == b""
    except ConnectionResetError:
        return True


def test_connect_to_an_allowed_destination_is_a_tunnel(echo: int) -> None:
    with Proxy({Dest("127.0.0.1", echo)}) as proxy:
        conn, answer = ask(proxy, f"CONNECT 127.0.0.1:{echo} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        with conn:
            assert answer == b"HTTP/1.1 200 Connection established\r\n\r\n"
            conn.sendall(b"any bytes at all\x00\xff")
            assert conn.recv(100) == b"any bytes at all\x00\xff"
        assert proxy.refused == ()


def test_any_other_destination_is_refused_with_403_and_recorded_once(echo: int) -> None:
    with Proxy({Dest("api.anthropic.com", 443)}) as proxy:
        for target in (f"127.0.0.1:{echo}", "example.invalid:443", f"127.0.0.1:{echo}", "api.anthropic.com:80"):
            conn, answer = ask(proxy, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
            with conn:
                answer = read_all(conn, answer)
            assert answer.startswith(b"HTTP/1.1 403 Forbidden\r\n") and target.encode() in answer
        assert proxy.refused == (f"127.0.0.1:{echo}", "example.invalid:443", "api.anthropic.com:80")


def test_what_is_refused_is_kept_up_to_the_cap() -> None:
    with Proxy(()) as proxy:
        for n in range(MAX_REFUSED + 5):
            conn, _ = ask(proxy, f"CONNECT host{n}.example:443 HTTP/1.1\r\n\r\n".encode())
            conn.close()
        assert len(proxy.refused) == MAX_REFUSED and proxy.refused[0] == "host0.example:443"


def test_plain_http_to_an_allowed_host_is_sent_on_in_origin_form(echo: int) -> None:
    with Proxy({Dest("127.0.0.1", echo)}) as proxy:
        request = (f"GET http://127.0.0.1:{echo}/v1/models?x=1 HTTP/1.1\r\nHost: 127.0.0.1:{echo}\r\n"
                   "Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic c2VjcmV0\r\nAccept: */*\r\n\r\n")
        conn, answer = ask(proxy, request.encode())
        with conn:
            answer = read_all(conn, answer)
    seen = answer.split(b"\r\n\r\n", 1)[1].decode()
    assert seen.startswith("GET /v1/models?x=1 HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{echo}" in seen and "Accept: */*" in seen and "Connection: close" in seen
    assert "Proxy-" not in seen and "keep-alive" not in seen


def test_plain_http_to_another_host_is_refused(echo: int) -> None:
    with Proxy(()) as proxy:
        conn, answer = ask(proxy, f"GET http://127.0.0.1:{echo}/ HTTP/1.1\r\n\r\n".encode())
        conn.close()
        assert answer.startswith(b"HTTP/1.1 403") and proxy.refused == (f"127.0.0.1:{echo}",)


@pytest.mark.parametrize("request_line", ["GET / HTTP/1.1", "CONNECT api.example.com HTTP/1.1", "GET https://a.example/ HTTP/1.1",
                                          "CONNECT a.example:443", "NONSENSE", "CONNECT a b:443 HTTP/1.1"])
def test_what_is_no_proxy_request_is_a_400_and_no_refusal(request_line: str) -> None:
    with Proxy(()) as proxy:
        conn, answer = ask(proxy, request_line.encode() + b"\r\n\r\n")
        conn.close()
        assert answer.startswith(b"HTTP/1.1 400") and proxy.refused == ()


def test_an_allowed_destination_that_does_not_answer_is_a_502() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: a connection is refused
        with Proxy({Dest("127.0.0.1", port)}) as proxy:
            conn, answer = ask(proxy, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
            conn.close()
    assert answer.startswith(b"HTTP/1.1 502") and proxy.refused == ()


def test_close_cuts_what_is_open_and_leaves_nothing(echo: int) -> None:
    proxy = Proxy({Dest("127.0.0.1", echo)}).start()
    directory = proxy.directory
    conn, answer = ask(proxy, f"CONNECT 127.0.0.1:{echo} HTTP/1.1\r\n\r\n".encode())
    idle = socket.socket(socket.AF_UNIX)  # a connection that never sends its request
    idle.connect(str(proxy.path))
    assert answer.startswith(b"HTTP/1.1 200")
    proxy.close()
    proxy.close()  # twice is fine
    assert cut(conn) and cut(idle)
    conn.close()
    idle.close()
    assert [t.name for t in threading.enumerate() if t.name.startswith("gitswarm-proxy")] == []
    assert not directory.exists()


def test_the_socket_path_fits_a_unix_socket(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 90)
    deep.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(deep))
    with Proxy(()) as proxy:
        assert len(str(proxy.path)) <= 100 and proxy.path.is_socket()


@pytest.mark.parametrize(("head", "dest", "connect"), [
    (b"CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com:443", Dest("api.openai.com", 443), True),
    (b"CONNECT [::1]:8080 HTTP/1.1", Dest("::1", 8080), True),
    (b"CONNECT API.OpenAI.com.:443 HTTP/1.0", Dest("api.openai.com", 443), True),
    (b"GET http://localhost/v1 HTTP/1.1\r\nHost: localhost", Dest("localhost", 80), False),
    (b"POST http://[::1]:9000/x HTTP/1.1", Dest("::1", 9000), False),
])
def test_a_proxy_request_names_its_destination(head: bytes, dest: Dest, connect: bool) -> None:
    request = Request.parse(head)
    assert request is not None and request.dest == dest and request.connect is connect
