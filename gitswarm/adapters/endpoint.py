"""A sandboxed run's command line, and for network `endpoint` its way out: the proxy and the bridge.

With `endpoint` the sandbox has a network namespace of its own (as with `none`): a direct connection
to any host fails. The run's destinations are its spec's and the repository's `[sandbox] hosts`, and
the host:port of each base URL its environment sets in a variable the spec's `endpoint_env` names. A
proxy outside the sandbox (adapters/proxy.py) reaches those and refuses the rest; inside, the bridge
(adapters/netbridge.py, run by this interpreter ahead of the agent) listens where the agent's proxy
variables point, and at the loopback destinations' own addresses, and carries every connection to
the proxy's socket. docs/sandbox.md.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

from gitswarm.adapters import netbridge
from gitswarm.adapters.hosts import Dest, from_url, parse_host
from gitswarm.adapters.proxy import Proxy
from gitswarm.adapters.sandbox import Sandbox, program_paths, wrap
from gitswarm.model.errors import BadInput

PROXY_PORT = 3128  # where the bridge listens for the agent's proxy requests (in the sandbox's own loopback)
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
NO_PROXY_VARS = ("NO_PROXY", "no_proxy")  # removed: every connection goes through the proxy
BRIDGE = Path(netbridge.__file__)


class Wrapped(msgspec.Struct, frozen=True):
    """A sandboxed command line, its environment, and the proxy it needs (started; None for `open`, `none`)."""

    argv: list[str]
    env: dict[str, str]
    proxy: Proxy | None = None


def destinations(hosts: Sequence[str], endpoint_env: Sequence[str], env: Mapping[str, str]) -> frozenset[Dest]:
    """What an `endpoint` run may reach: `hosts`, and the base URL in each `endpoint_env` variable `env`
    sets (a value that is no http(s) URL adds nothing)."""
    found: set[Dest] = set()
    for host in hosts:
        try:
            found.add(parse_host(host))
        except ValueError as exc:  # checked when the table was read; said again should one slip through
            raise BadInput(f"[sandbox] hosts: {host!r} {exc}") from None
    for name in endpoint_env:
        dest = from_url(env.get(name, ""))
        if dest is not None:
            found.add(dest)
    return frozenset(found)


def sandboxed(box: Sandbox, argv: Sequence[str], cwd: Path, env: Mapping[str, str], home: str | None,
              endpoint_env: Sequence[str] = ()) -> Wrapped:
    """`argv` run in `cwd` inside `box`; for network `endpoint`, behind its proxy, which is started here
    (the caller closes it when the run ends)."""
    if box.network != "endpoint":
        return Wrapped(wrap(box, argv, cwd, env, home), dict(env))
    if not sys.executable:
        raise BadInput('[sandbox] network = "endpoint": this Python does not know the path of its interpreter, '
                       "which runs the sandbox's network bridge")
    allowed = destinations(box.hosts, endpoint_env, env)
    port = proxy_port(allowed)
    inner = {k: v for k, v in env.items() if k not in NO_PROXY_VARS}
    inner.update(dict.fromkeys(PROXY_VARS, f"http://127.0.0.1:{port}"))
    inner["NODE_USE_ENV_PROXY"] = "1"  # Node's own fetch honours the proxy variables only when asked (Node >= 24)
    proxy = Proxy(allowed).start()
    try:
        bridge = [sys.executable, "-I", "-S", str(BRIDGE), str(proxy.path), str(port), *directs(allowed), "--"]
        seen = box.adding(read=[*program_paths(sys.executable, None), BRIDGE.parent, proxy.directory])
        return Wrapped(wrap(seen, argv, cwd, inner, home, prefix=bridge), inner, proxy)
    except BaseException:
        proxy.close()
        raise


def proxy_port(allowed: frozenset[Dest]) -> int:
    """PROXY_PORT, or the next port no loopback destination uses."""
    taken = {dest.port for dest in allowed if dest.loopback}
    return next(port for port in range(PROXY_PORT, 65536) if port not in taken)


def directs(allowed: frozenset[Dest]) -> list[str]:
    """The bridge's `ADDRESS,PORT,DEST` words: each loopback destination, listened for at its own address."""
    words = []
    for dest in sorted(allowed):
        if not dest.loopback:
            continue
        for address in ("127.0.0.1", "::1") if dest.named_loopback else (dest.host,):
            words.append(f"{address},{dest.port},{dest}")
    return words
