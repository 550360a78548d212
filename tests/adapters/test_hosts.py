"""`[sandbox] hosts` entries and base URLs, read as destinations (adapters/hosts.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitswarm.adapters.hosts import Dest, from_url, parse_host


@pytest.mark.parametrize(("entry", "dest"), [
    ("api.anthropic.com", Dest("api.anthropic.com", 443)),
    ("API.Anthropic.com.", Dest("api.anthropic.com", 443)),
    ("127.0.0.1:8765", Dest("127.0.0.1", 8765)),
    ("localhost:11434", Dest("localhost", 11434)),
    ("[::1]:8080", Dest("::1", 8080)),
    ("[::1]", Dest("::1", 443)),
    ("::1", Dest("::1", 443)),
    ("my_host.internal:80", Dest("my_host.internal", 80)),
])
def test_an_entry_names_a_host_and_a_port_443_unless_it_says(entry: str, dest: Dest) -> None:
    assert parse_host(entry) == dest


@pytest.mark.parametrize("entry", ["", " api.example.com", "a b", "https://api.example.com", "user@host", "host:",
                                   "host:0", "host:65536", "host:\uff18\uff10", "[::1", "[::1]x", "[127.0.0.1]:80", "-bad.example",
                                   "a..b", "x" * 300, "host:port", "1::2::3"])
def test_a_malformed_entry_is_refused_saying_why(entry: str) -> None:
    with pytest.raises(ValueError, match=r"host|port"):
        parse_host(entry)


@pytest.mark.parametrize(("url", "dest"), [
    ("http://127.0.0.1:8765/v1", Dest("127.0.0.1", 8765)),
    ("https://api.anthropic.com", Dest("api.anthropic.com", 443)),
    ("http://LOCALHOST/", Dest("localhost", 80)),
    ("http://[::1]:9000/v1beta", Dest("::1", 9000)),
    (" https://gw.example.com:8443/openai ", Dest("gw.example.com", 8443)),
])
def test_a_base_url_names_its_host_and_port(url: str, dest: Dest) -> None:
    assert from_url(url) == dest


@pytest.mark.parametrize("url", ["", "api.example.com", "ftp://host/", "http://", "http://host:99999/", "http://[::1/"])
def test_what_is_no_http_url_names_nothing(url: str) -> None:
    assert from_url(url) is None


@pytest.mark.parametrize(("dest", "loopback"), [
    (Dest("127.0.0.1", 1), True), (Dest("127.4.5.6", 1), True), (Dest("::1", 1), True), (Dest("localhost", 1), True),
    (Dest("model.localhost", 1), True), (Dest("10.0.0.1", 1), False), (Dest("api.openai.com", 1), False),
    (Dest("localhost.example.com", 1), False),
])
def test_loopback_destinations_are_known(dest: Dest, loopback: bool) -> None:
    assert dest.loopback is loopback


labels = st.from_regex(r"[a-z0-9][a-z0-9-]{0,20}", fullmatch=True)
names = st.lists(labels, min_size=1, max_size=4).map(".".join)
addresses = st.ip_addresses().map(str)
dests = st.builds(Dest, st.one_of(names, addresses), st.integers(1, 65535))


@given(dests)
def test_a_destination_written_out_reads_back_the_same(dest: Dest) -> None:
    assert parse_host(str(dest)) == dest
    assert from_url(f"http://{dest}/") == dest
