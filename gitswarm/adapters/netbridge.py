"""The network bridge inside an `endpoint` sandbox: the agent's only way out, to gitswarm's proxy.

    python -I -S netbridge.py SOCKET PORT [ADDRESS,PORT,DEST ...] -- COMMAND [ARG ...]

Run by the sandbox in place of the agent (adapters/endpoint.py), in the sandbox's own network
namespace, where nothing but loopback exists. It listens on 127.0.0.1:PORT, where the agent's proxy
variables point, and passes each connection's bytes to the proxy's Unix socket SOCKET (bound into
the sandbox; the proxy runs outside: adapters/proxy.py). For each loopback endpoint the run may reach
(ADDRESS,PORT,DEST: a model server on the machine's loopback), it also listens at that address in the
sandbox and tunnels there through the proxy (`CONNECT DEST`), so a CLI that ignores proxy variables
still reaches it at its own address. Then it starts COMMAND as its child, passes it the signals it
gets, and exits as the child did.

It is started for every such run, so it starts fast: run by path with `-I -S`, it imports only the
interpreter's built-in modules (`_socket`, `_thread`, `_signal`, `posix`: `socket`, `threading`,
`signal` and `os` would take longer than the rest of its start-up together). The proxy imports
`relay` and `read_head` from it.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # no stub; signal.py's enums cost 4 ms of start-up
import _socket
import _thread
import posix
import select
import sys

CHUNK = 65536
HEAD_LIMIT = 16384  # bytes of a request or response head
HEAD_SECONDS = 30.0
FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
EVENTS = select.POLLIN | select.POLLHUP | select.POLLERR


def relay(a: _socket.socket, b: _socket.socket, stop: int | None = None) -> None:
    """Move bytes both ways between two connected sockets until both ends are done, either fails, or the
    file descriptor `stop` turns readable. A side that ends its sending has the other's sending ended too."""
    peer = {a.fileno(): (a, b), b.fileno(): (b, a)}
    poller = select.poll()
    for fd in peer:
        poller.register(fd, EVENTS)
    if stop is not None:
        poller.register(stop, EVENTS)
    while peer:
        for fd, _ in poller.poll():
            if fd == stop:
                return
            if fd not in peer:
                continue
            source, target = peer[fd]
            try:
                data = source.recv(CHUNK)
            except OSError:
                return
            if data:
                try:
                    target.sendall(data)
                except OSError:
                    return
                continue
            poller.unregister(fd)
            del peer[fd]
            try:
                target.shutdown(_socket.SHUT_WR)
            except OSError:
                pass


def read_head(sock: _socket.socket, stop: int | None = None, seconds: float = HEAD_SECONDS) -> tuple[bytes, bytes] | None:
    """An HTTP head (up to its blank line, which is left out) and the bytes read past it; None when the
    peer closed, went quiet for `seconds`, sent more than HEAD_LIMIT, or `stop` turned readable."""
    poller = select.poll()
    poller.register(sock.fileno(), EVENTS)
    if stop is not None:
        poller.register(stop, EVENTS)
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > HEAD_LIMIT:
            return None
        ready = [fd for fd, _ in poller.poll(int(seconds * 1000))]
        if not ready or stop in ready:
            return None
        try:
            chunk = sock.recv(4096)
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _tunnel(conn: _socket.socket, path: str, dest: str | None) -> None:
    """One connection of the agent's, to the proxy: as it is (the proxy port), or through `CONNECT dest`."""
    up = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        up.connect(path)
        if dest is not None:
            up.sendall(f"CONNECT {dest} HTTP/1.1\r\nHost: {dest}\r\n\r\n".encode())
            answer = read_head(up)
            if answer is None or answer[0].split(b" ", 2)[1:2] != [b"200"]:
                return
            if answer[1]:
                conn.sendall(answer[1])
        relay(conn, up)
    except OSError:
        return
    finally:
        up.close()
        conn.close()


def _serve(listener: _socket.socket, path: str, dest: str | None) -> None:
    while True:
        try:
            fd, _ = listener._accept()  # type: ignore[attr-defined]  # _socket's accept: (fd, address)
        except OSError:
            return
        conn = _socket.socket(listener.family, _socket.SOCK_STREAM, 0, fd)
        _thread.start_new_thread(_tunnel, (conn, path, dest))


def _listen(address: str, port: int) -> _socket.socket:
    listener = _socket.socket(_socket.AF_INET6 if ":" in address else _socket.AF_INET, _socket.SOCK_STREAM)
    try:
        listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        listener.bind((address, port))
        listener.listen(64)
    except OSError:
        listener.close()
        raise
    return listener


def main(argv: list[str]) -> int:
    split = argv.index("--") if "--" in argv else -1
    if split < 2 or split == len(argv) - 1:
        print("usage: netbridge.py SOCKET PORT [ADDRESS,PORT,DEST ...] -- COMMAND [ARG ...]", file=sys.stderr)
        return 2
    path, port, directs, command = argv[0], int(argv[1]), argv[2:split], argv[split + 1 :]
    served: list[tuple[_socket.socket, str | None]] = [(_listen("127.0.0.1", port), None)]
    for direct in directs:
        address, number, dest = direct.split(",", 2)
        try:
            served.append((_listen(address, int(number)), dest))
        except OSError:
            continue  # a port below 1024 (no capability to bind it here), or an address this namespace lacks
    # The handlers first: a signal that comes while the child is being started is kept and passed on once it runs
    # (a handler installed after the spawn left a window where the bridge died of it, the child orphaned).
    child: list[int] = []
    pending: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if not child:
            pending.append(signum)
            return
        try:
            posix.kill(child[0], signum)
        except ProcessLookupError:
            pass

    signals = {getattr(_signal, name) for name in FORWARDED}
    for signum in signals:
        _signal.signal(signum, forward)
    try:
        child.append(posix.posix_spawnp(command[0], command, posix.environ))
    except OSError as exc:
        print(f"gitswarm: cannot start {command[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    for signum in pending:
        forward(signum, None)
    # The serving threads never take a forwarded signal: one the kernel handed to a thread blocked in accept()
    # left the main thread asleep in waitpid, its handler never run, the child never told (seen under load).
    # A thread starts with its creator's mask: blocked while they are started, then open again here alone.
    _signal.pthread_sigmask(_signal.SIG_BLOCK, signals)
    for listener, tunnel_to in served:
        _thread.start_new_thread(_serve, (listener, path, tunnel_to))
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, signals)
    _, status = posix.waitpid(child[0], 0)
    if posix.WIFSIGNALED(status):  # die of the same signal, as the child did
        died = posix.WTERMSIG(status)
        _signal.signal(died, _signal.SIG_DFL)
        posix.kill(posix.getpid(), died)
        return 128 + died
    return posix.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stderr.flush()
    posix._exit(code)
