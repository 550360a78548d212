"""`gitswarm mcp` on the wire: the handshake, errors, progress and cancellation, as raw JSON-RPC lines.

The server runs with the MCP SDK and pydantic made unimportable, which
proves it needs neither (only the tests' reference client uses the SDK).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitswarm.pilot import watch
from gitswarm.pilot.server import MAX_RUNNING_CALLS
from tests.conftest import git, register_scripted, swarm_refs
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
    assert len(tools) == 17 and all(t["inputSchema"]["type"] == "object" and t["description"] for t in tools)
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
    client.write(b'{"jsonrpc": "2.0", "id": 8, "method": "tools/list", "x": ' + b"[" * 1000 + b"]" * 1000 + b"}\n")
    assert client.read()["error"]["code"] == -32700  # nested too deep to read: a parse error, not the end
    deep = 'goal = "g"\n[[tasks]]\nid = "a"\ncommand = "true"\nenv = ' + "{a = " * 500 + "1" + "}" * 500
    refused = client.call("submit_job", {"spec": deep})
    assert refused["isError"] is True and "nested more than" in refused["content"][0]["text"]
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


def read_to_the_end(client: RawClient, timeout: float = 20) -> list[dict]:
    """Every answer until the server closes stdout (stdin already closed)."""
    answers = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            message = client.read()
        except EOFError:
            return answers
        if "method" not in message:
            answers.append(message)
    raise AssertionError("the server did not close stdout")


def test_calls_still_running_when_stdin_closes_are_answered(project: Path, no_sdk: dict[str, str]) -> None:
    raw = RawClient(project, no_sdk)
    submitting = raw.ask("tools/call", {"name": "submit_job", "arguments": {
        "goal": "g", "tasks": [{"id": "a", "command": "true"}], "start": False}})
    missing = raw.ask("tools/call", {"name": "wait", "arguments": {"target": "0123abcd", "timeout": 30}})
    assert raw.process.stdin is not None
    raw.process.stdin.close()
    answers = {a["id"]: a for a in read_to_the_end(raw)}
    assert raw.process.wait(10) == 0
    job = answers[submitting]["result"]["structuredContent"]["id"]
    assert f"refs/swarm/jobs/{job}" in swarm_refs(project)  # written, and the client was told
    assert answers[missing]["result"]["isError"]


def test_a_wait_running_when_stdin_closes_returns_at_once_and_is_answered(client: RawClient) -> None:
    job = submit(client)
    waiting = client.ask("tools/call", {"name": "wait", "arguments": {"target": job, "timeout": 600}})
    time.sleep(0.3)
    started = time.monotonic()
    assert client.process.stdin is not None
    client.process.stdin.close()
    (answer,) = read_to_the_end(client)
    assert answer["id"] == waiting and answer["result"]["structuredContent"]["timed_out"]
    assert client.process.wait(10) == 0 and time.monotonic() - started < 5


def test_an_internal_error_outside_a_tool_fails_that_request_not_the_session(client: RawClient, project: Path) -> None:
    index = project / ".git" / "gitswarm" / "index.sqlite"
    index.unlink(missing_ok=True)
    index.parent.mkdir(exist_ok=True)
    index.mkdir()  # the index cannot be opened
    failed = client.request("resources/read", {"uri": "gitswarm://jobs/0123abcd/summary"})["error"]
    assert failed["code"] == -32603 and "internal error in resources/read" in failed["message"] and "traceback is in" in failed["message"]
    tool = client.call("show", {"job": "0123abcd"})
    assert tool["isError"] and "internal error in show" in tool["content"][0]["text"]
    assert client.request("ping")["result"] == {}


def test_an_id_still_in_use_is_refused_and_cancelling_by_a_bool_cancels_nothing(client: RawClient) -> None:
    job = submit(client)
    client.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "wait", "arguments": {"target": job, "timeout": 1.5}}})
    time.sleep(0.2)
    client.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "status", "arguments": {}}})
    refused = client.answer_to(1)
    assert refused["error"]["code"] == -32600 and "still in use" in refused["error"]["message"]
    client.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": True}})
    waited = client.answer_to(1)  # the wait itself, answered when its timeout passed
    assert waited["result"]["structuredContent"]["timed_out"]


@pytest.mark.parametrize("arguments", [[], False, 0, "", "x"])
def test_arguments_that_are_not_an_object_are_invalid_params(client: RawClient, arguments: object) -> None:
    assert client.request("tools/call", {"name": "status", "arguments": arguments})["error"]["code"] == -32602


def test_past_the_running_calls_limit_a_call_is_refused_not_queued(client: RawClient) -> None:
    job = submit(client)
    ids = [client.ask("tools/call", {"name": "wait", "arguments": {"target": job, "timeout": 60}}) for _ in range(MAX_RUNNING_CALLS + 1)]
    busy = client.answer_to(ids[-1])
    assert busy["error"]["code"] == -32000 and f"{MAX_RUNNING_CALLS} calls are running" in busy["error"]["message"]


def test_an_interrupted_server_stops_its_waits_and_exits(client: RawClient) -> None:
    job = submit(client)
    client.ask("tools/call", {"name": "wait", "arguments": {"target": job, "timeout": 600}})
    time.sleep(0.3)
    started = time.monotonic()
    client.process.send_signal(signal.SIGINT)
    assert client.process.wait(10) == 130 and time.monotonic() - started < 5


def test_a_long_uri_is_refused_without_being_quoted_back(client: RawClient) -> None:
    failed = client.request("resources/read", {"uri": "gitswarm://jobs/" + "a" * 100_000 + "/summary"})["error"]
    assert failed["code"] == -32002 and len(failed["message"]) < 300


def test_wait_reads_a_loose_job_refs_tip_from_its_file(client: RawClient, project: Path) -> None:
    job = submit(client)
    assert watch.tip(project / ".git", job) == git(project, "rev-parse", f"refs/swarm/jobs/{job}").strip()
