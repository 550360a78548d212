"""`gitswarm mcp` on the wire: the handshake, errors, progress and cancellation, as raw JSON-RPC lines.

The server runs with the MCP SDK and pydantic made unimportable, which
proves it needs neither (only the tests' reference client uses the SDK).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import register_scripted, swarm_refs
from tests.pilot.rawclient import RawClient

BLOCKED = ("mcp", "mcp_types", "pydantic", "pydantic_core", "anyio")


@pytest.fixture
def no_sdk(tmp_path: Path) -> dict[str, str]:
    """PYTHONPATH that makes the SDK and its dependencies fail to import."""
    shadow = tmp_path / "shadow"
    for name in BLOCKED:
        (shadow / name).mkdir(parents=True)
        (shadow / name / "__init__.py").write_text(f"raise ModuleNotFoundError('{name} blocked by the test', name='{name}')\n")
    return {"PYTHONPATH": str(shadow)}


@pytest.fixture
def project(repo: Path) -> Path:
    return register_scripted(repo)


@pytest.fixture
def client(project: Path, no_sdk: dict[str, str]) -> Iterator[RawClient]:
    raw = RawClient(project, no_sdk)
    yield raw
    raw.close()


def submit(client: RawClient) -> str:
    result = client.call("submit_job", {"goal": "one", "tasks": [{"id": "a", "command": "true"}], "start": False})
    assert not result["isError"], result
    job: str = result["structuredContent"]["id"]
    return job


def test_the_handshake_names_the_server_and_what_it_offers(client: RawClient) -> None:
    result = client.initialized["result"]
    assert result["protocolVersion"] == "2025-11-25"
    assert result["serverInfo"]["name"] == "gitswarm" and result["instructions"]
    assert set(result["capabilities"]) == {"tools", "resources"}
    assert client.request("ping") == {"jsonrpc": "2.0", "id": client.next_id, "result": {}}
    tools = client.request("tools/list")["result"]["tools"]
    assert len(tools) == 16 and all(t["inputSchema"]["type"] == "object" and t["description"] for t in tools)
    templates = client.request("resources/templates/list")["result"]["resourceTemplates"]
    assert {t["uriTemplate"] for t in templates} == {"gitswarm://jobs/{job}/summary", "gitswarm://patches/{patch}/diff"}


@pytest.mark.parametrize(("asked", "given"), [("2025-06-18", "2025-06-18"), ("2024-11-05", "2024-11-05"), ("2099-01-01", "2025-11-25")])
def test_the_version_is_the_clients_when_known_else_the_newest(project: Path, no_sdk: dict[str, str], asked: str, given: str) -> None:
    raw = RawClient(project, no_sdk, version=asked)
    try:
        assert raw.initialized["result"]["protocolVersion"] == given
    finally:
        raw.close()


def test_structured_content_only_from_the_revision_that_has_it(project: Path, no_sdk: dict[str, str]) -> None:
    old = RawClient(project, no_sdk, version="2025-03-26")
    try:
        result = old.call("status", {})
        assert "structuredContent" not in result and result["content"][0]["text"].startswith("{")
    finally:
        old.close()


def test_malformed_messages_get_json_rpc_errors_and_the_session_goes_on(client: RawClient, project: Path) -> None:
    before = swarm_refs(project)
    client.write(b"{not json\n")
    assert client.read()["error"]["code"] == -32700
    client.write(b"[1, 2]\n")
    assert client.read()["error"]["code"] == -32600
    client.send({"jsonrpc": "2.0", "id": 7, "method": 5})
    assert client.answer_to(7)["error"]["code"] == -32600
    assert client.request("server/discover")["error"]["code"] == -32601  # the 2026 era: the client falls back
    assert client.request("no/such")["error"]["code"] == -32601
    assert client.request("tools/call", {"name": "nope", "arguments": {}})["error"]["code"] == -32602
    assert client.request("tools/call", {"name": "status", "arguments": [1]})["error"]["code"] == -32602
    unknown = client.request("resources/read", {"uri": "gitswarm://jobs/0123abcd/summary"})["error"]
    assert unknown["code"] == -32002 and "0123abcd" in unknown["message"]
    assert client.request("resources/read", {"uri": "file:///etc/passwd"})["error"]["code"] == -32002
    assert client.call("status", {})["isError"] is False  # still serving
    assert swarm_refs(project) == before


def test_bad_arguments_say_which_and_why(client: RawClient) -> None:
    for arguments, says in (({"job": 5}, "$.job"), ({}, "`job`"), ({"job": "x" * 201}, "length <= 200")):
        result = client.call("show", arguments)
        assert result["isError"] and says in result["content"][0]["text"], result
        assert result["content"][0]["text"].startswith("show: bad arguments: ")


def test_a_wait_reports_progress_to_the_token_it_was_given(client: RawClient, project: Path) -> None:
    job = submit(client)
    ident = client.ask("tools/call", {"name": "wait", "arguments": {"target": job, "until": "done", "timeout": 30},
                                      "_meta": {"progressToken": "tok-1"}})
    time.sleep(0.3)  # the wait is under way; a worker makes the changes
    done = subprocess.run([sys.executable, "-m", "gitswarm", "work", "--job", job, "-j", "1"], cwd=project, capture_output=True, timeout=60)
    assert done.returncode == 0
    answer = client.answer_to(ident)["result"]["structuredContent"]
    assert answer["done"] and answer["status"] == "succeeded"
    progress = [m["params"] for m in client.notifications if m["method"] == "notifications/progress"]
    assert progress and all(p["progressToken"] == "tok-1" for p in progress)
    assert [p["progress"] for p in progress] == list(range(1, len(progress) + 1))


def test_a_cancelled_wait_gets_no_answer_and_the_next_call_does(client: RawClient) -> None:
    job = submit(client)
    ident = client.ask("tools/call", {"name": "wait", "arguments": {"target": job, "timeout": 60}})
    time.sleep(0.3)
    started = time.monotonic()
    client.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": ident, "reason": "enough"}})
    answer = client.request("tools/call", {"name": "status", "arguments": {"job": job}})
    assert answer["result"]["structuredContent"]["id"] == job
    assert time.monotonic() - started < 5
    assert ident not in client.answered


def test_closing_stdin_ends_the_server_even_while_a_wait_runs(client: RawClient) -> None:
    job = submit(client)
    client.ask("tools/call", {"name": "wait", "arguments": {"target": job, "timeout": 600}})
    time.sleep(0.3)
    started = time.monotonic()
    assert client.close(timeout=10) == 0
    assert time.monotonic() - started < 5
