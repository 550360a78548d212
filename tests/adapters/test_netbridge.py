"""The network bridge (adapters/netbridge.py), run as the sandbox runs it but on this machine's loopback:
it carries connections to the proxy, runs its command as its child, passes signals, exits as the child did."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from gitswarm.adapters import netbridge
from gitswarm.adapters.hosts import Dest
from gitswarm.adapters.proxy import Proxy


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


BRIDGE = Path(netbridge.__file__)


def bridge(*words: str) -> list[str]:
    """The bridge's command line, as adapters/endpoint.py gives it to the sandbox."""
    return [sys.executable, "-I", "-S", str(BRIDGE), *words]


CLIENT = """
import socket, sys
proxy, direct, dest = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
with socket.create_connection(("127.0.0.1", direct), timeout=5) as c:
    c.sendall(b"straight")
    print("direct:", c.recv(100).decode())
with socket.create_connection(("127.0.0.1", proxy), timeout=5) as c:
    c.sendall(f"CONNECT {dest} HTTP/1.1\\r\\n\\r\\n".encode())
    head = b""
    while b"\\r\\n\\r\\n" not in head:
        head += c.recv(100)
    c.sendall(b"tunnelled")
    print("proxied:", head.split(b"\\r\\n")[0].decode(), c.recv(100).decode())
with socket.create_connection(("127.0.0.1", proxy), timeout=5) as c:
    c.sendall(b"CONNECT example.invalid:443 HTTP/1.1\\r\\n\\r\\n")
    print("far:", c.recv(100).split(b"\\r\\n")[0].decode())
"""


def test_it_carries_the_childs_connections_to_the_proxy(echo: int) -> None:
    proxy_port, direct = free_port(), free_port()
    dest = f"127.0.0.1:{echo}"
    with Proxy({Dest("127.0.0.1", echo)}) as proxy:
        done = subprocess.run(bridge(str(proxy.path), str(proxy_port), f"127.0.0.1,{direct},{dest}", "--",
                                     sys.executable, "-c", CLIENT, str(proxy_port), str(direct), dest),
                              capture_output=True, text=True, timeout=30)
        refused = proxy.refused
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["direct: straight", "proxied: HTTP/1.1 200 Connection established tunnelled",
                                        "far: HTTP/1.1 403 Forbidden"]
    assert refused == ("example.invalid:443",)


def test_it_exits_as_its_child_did() -> None:
    assert subprocess.run(bridge("/nowhere", str(free_port()), "--", "sh", "-c", "exit 7")).returncode == 7
    killed = subprocess.run(bridge("/nowhere", str(free_port()), "--", "sh", "-c", "kill -TERM $$"))
    assert killed.returncode == -signal.SIGTERM
    missing = subprocess.run(bridge("/nowhere", str(free_port()), "--", "no-such-program-here"), capture_output=True, text=True)
    assert missing.returncode == 127 and "no-such-program-here" in missing.stderr
    assert subprocess.run(bridge("/nowhere"), capture_output=True).returncode == 2  # no command: usage


def test_it_passes_its_signals_to_its_child() -> None:
    script = 'trap "exit 3" TERM; echo ready; while :; do sleep 0.05; done'
    proc = subprocess.Popen(bridge("/nowhere", str(free_port()), "--", "sh", "-c", script), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)  # the bridge alone, not its group: the child hears it from the bridge
    assert proc.wait(timeout=10) == 3


def test_a_direct_port_it_cannot_listen_on_is_skipped(echo: int) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        start = time.monotonic()
        done = subprocess.run(bridge("/nowhere", str(free_port()), f"127.0.0.1,{port},127.0.0.1:{echo}", "--", "true"))
    assert done.returncode == 0 and time.monotonic() - start < 10
