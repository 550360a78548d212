"""What an `endpoint` run may reach, and the command line and environment it is given (adapters/endpoint.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gitswarm.adapters.endpoint import BRIDGE, PROXY_PORT, destinations, directs, proxy_port, sandboxed
from gitswarm.adapters.hosts import Dest
from gitswarm.adapters.sandbox import Sandbox
from gitswarm.model.errors import BadInput


def test_its_destinations_are_the_hosts_and_the_base_urls_its_environment_sets() -> None:
    env = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:8765", "OTHER_URL": "http://10.0.0.1/", "GOOGLE_GEMINI_BASE_URL": ""}
    found = destinations(["api.anthropic.com", "gw.example.com:8443"], ["ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL", "UNSET"], env)
    assert found == {Dest("api.anthropic.com", 443), Dest("gw.example.com", 8443), Dest("127.0.0.1", 8765)}


def test_a_base_url_that_is_no_url_adds_nothing() -> None:
    assert destinations([], ["BASE"], {"BASE": "not a url"}) == frozenset()


def test_a_malformed_host_that_slipped_through_is_bad_input() -> None:
    with pytest.raises(BadInput, match="hosts"):
        destinations(["a b"], [], {})


def test_the_proxy_port_is_one_no_loopback_destination_uses() -> None:
    assert proxy_port(frozenset()) == PROXY_PORT
    assert proxy_port(frozenset({Dest("api.example.com", PROXY_PORT)})) == PROXY_PORT  # not on this loopback
    assert proxy_port(frozenset({Dest("127.0.0.1", PROXY_PORT), Dest("localhost", PROXY_PORT + 1)})) == PROXY_PORT + 2


def test_loopback_destinations_are_listened_for_at_their_own_address() -> None:
    allowed = frozenset({Dest("127.0.0.1", 8765), Dest("localhost", 11434), Dest("::1", 9000), Dest("api.example.com", 443)})
    assert directs(allowed) == ["127.0.0.1,8765,127.0.0.1:8765", "::1,9000,[::1]:9000",
                                "127.0.0.1,11434,localhost:11434", "::1,11434,localhost:11434"]


def test_open_and_none_get_no_proxy() -> None:
    for network in ("open", "none"):
        wrapped = sandboxed(Sandbox(bwrap="bwrap", network=network), ["agent", "x"], Path("/tmp"), {"PATH": "/usr/bin"}, None)
        assert wrapped.proxy is None and wrapped.argv[-2:] == ["agent", "x"] and wrapped.env == {"PATH": "/usr/bin"}


def test_endpoint_runs_the_agent_behind_the_bridge_with_proxy_variables() -> None:
    env = {"PATH": "/usr/bin", "NO_PROXY": "*", "no_proxy": "*", "HTTPS_PROXY": "http://corp:3128", "BASE": "http://127.0.0.1:8765"}
    box = Sandbox(bwrap="bwrap", network="endpoint", hosts=("api.example.com",))
    wrapped = sandboxed(box, ["agent", "--flag"], Path("/tmp"), env, None, ["BASE"])
    assert wrapped.proxy is not None
    try:
        argv = wrapped.argv
        assert "--unshare-net" in argv
        start = argv.index(str(BRIDGE)) - 3
        assert argv[start:start + 4] == [sys.executable, "-I", "-S", str(BRIDGE)]
        assert argv[start + 4:] == [str(wrapped.proxy.path), str(PROXY_PORT), "127.0.0.1,8765,127.0.0.1:8765", "--", "agent", "--flag"]
        assert wrapped.proxy.allowed == {Dest("api.example.com", 443), Dest("127.0.0.1", 8765)}
        for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
            assert wrapped.env[name] == f"http://127.0.0.1:{PROXY_PORT}"
        assert "NO_PROXY" not in wrapped.env and "no_proxy" not in wrapped.env
        assert wrapped.env["BASE"] == "http://127.0.0.1:8765"
    finally:
        wrapped.proxy.close()
