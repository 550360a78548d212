"""Network destinations (`host:port`): `[sandbox] hosts` entries, a base URL's host, and which are loopback.

An entry is `host` or `host:port`: a DNS name, an IPv4 address, or an IPv6 address in brackets
(`[::1]:8080`; without a port the brackets may be left out). A `host` without a port means port 443,
where model endpoints are. Names are compared without case and without a trailing dot; nothing is
resolved here (the endpoint proxy resolves what it allows, outside the sandbox: adapters/proxy.py).
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

import msgspec

DEFAULT_PORT = 443
URL_PORTS = {"http": 80, "https": 443}
_NAME = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,62})(?:\.[a-z0-9_](?:[a-z0-9_-]{0,62}))*$")
MAX_NAME = 253


class Dest(msgspec.Struct, frozen=True, order=True):
    """One destination: a host (lower case, no brackets, no trailing dot) and a port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def named_loopback(self) -> bool:
        """Whether its host is a loopback name (`localhost`, `*.localhost`) rather than an address."""
        return self.host == "localhost" or self.host.endswith(".localhost")

    @property
    def loopback(self) -> bool:
        """Whether it is on this machine's loopback (`localhost`, 127.0.0.0/8, ::1)."""
        if self.named_loopback:
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_host(entry: str, default_port: int = DEFAULT_PORT) -> Dest:
    """The destination an entry names; ValueError saying why it names none."""
    text = entry.strip()
    if text != entry or not text or any(c.isspace() for c in text):
        raise ValueError("is not a host or host:port")
    if "/" in text or "@" in text:
        raise ValueError("is not a host or host:port (a URL's host:port alone, such as api.example.com:443)")
    if text.startswith("["):
        inside, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError("is not a host or host:port ([IPv6] or [IPv6]:port)")
        return Dest(_address(inside, ipv6=True), _port(rest[1:]) if rest else default_port)
    if text.count(":") > 1:  # an IPv6 address without brackets: no port
        return Dest(_address(text, ipv6=True), default_port)
    name, colon, port = text.partition(":")
    return Dest(host_name(name), _port(port) if colon else default_port)


def host_name(name: str) -> str:
    """A host name or IPv4 address, normalized; ValueError when it is neither."""
    host = name.lower().removesuffix(".")
    if not host or len(host) > MAX_NAME or not _NAME.match(host):
        raise ValueError("is not a host or host:port")
    return host


def from_url(url: str) -> Dest | None:
    """The destination of an http(s) base URL (`http://127.0.0.1:8765/v1`), or None when it is not one."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
        host = parts.hostname
    except ValueError:
        return None
    if parts.scheme not in URL_PORTS or not host:
        return None
    try:
        return Dest(_address(host, ipv6=True) if ":" in host else host_name(host), port or URL_PORTS[parts.scheme])
    except ValueError:
        return None


def _address(text: str, ipv6: bool) -> str:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError("is not a host or host:port (an IPv6 address is written [::1]:port)") from None
    if ipv6 and address.version != 6:
        raise ValueError("is not a host or host:port (brackets are for IPv6 addresses)")
    return str(address)


def _port(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"has port {text!r}: a port is a number from 1 to 65535")
    return int(text)
