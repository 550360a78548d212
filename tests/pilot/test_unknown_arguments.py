"""An argument a tool does not take is a tool error naming it, and the schemas tools/list gives say so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import git, register_scripted, swarm_refs
from tests.pilot.mcpclient import Session
from tests.pilot.rawclient import RawClient


@pytest.fixture
def project(repo: Path) -> Path:
    return register_scripted(repo)


@pytest.fixture
def client(project: Path) -> Iterator[RawClient]:
    raw = RawClient(project)
    yield raw
    raw.close()


def text_of(result: dict) -> str:
    text: str = result["content"][0]["text"]
    return text


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("status", {"target": "x"}, "status: unknown argument 'target' (it takes job, include_all)"),
        ("status", {"jobs": "x"}, "status: unknown argument 'jobs'; did you mean 'job'?"),
        ("show", {"job": "0123abcd", "verbose": True}, "show: unknown argument 'verbose' (it takes job)"),
        ("delegate", {"instruction": "x", "adapter": "scripted", "model": "m", "dry": 1},
         "delegate: unknown arguments 'model', 'dry' (it takes instruction, adapter, checks, base, confirm)"),
        ("submit_job", {"goal": "one", "tasks": [{"id": "a", "command": "true"}], "start": False, "workerz": 1}, "submit_job: unknown argument 'workerz'; did you mean 'workers'?"),
        ("wait", {"target": "x", "line\nbreak": 1}, "wait: unknown argument 'line\\nbreak' (it takes target, timeout, until)"),
    ],
)
def test_an_unknown_argument_is_a_tool_error_naming_it_and_writes_nothing(
    client: RawClient, project: Path, tool: str, arguments: dict, says: str
) -> None:
    before = (swarm_refs(project), git(project, "status", "--porcelain"))
    result = client.call(tool, arguments)
    assert result["isError"] is True, result
    assert text_of(result) == says
    assert (swarm_refs(project), git(project, "status", "--porcelain")) == before


def test_a_long_unknown_name_is_cut_when_quoted_back(client: RawClient) -> None:
    text = text_of(client.call("status", {"x" * 5000: 1}))
    assert text.startswith("status: unknown argument 'xxx") and len(text) < 300 and "…" in text


def test_known_arguments_alone_still_work(client: RawClient) -> None:
    assert client.call("status", {})["isError"] is False
    listed = client.call("status", {"job": None, "include_all": True})
    assert listed["isError"] is False and listed["structuredContent"]["jobs"] == []
    submitted = client.call("submit_job", {"goal": "one", "tasks": [{"id": "a", "command": "true"}], "start": False})
    assert submitted["isError"] is False, submitted
    job = submitted["structuredContent"]["id"]
    shown = client.call("show", {"job": job})
    assert shown["isError"] is False and shown["structuredContent"]["id"] == job


def test_every_listed_schema_forbids_other_properties(client: RawClient) -> None:
    tools = client.request("tools/list")["result"]["tools"]
    assert len(tools) == 17
    assert all(t["inputSchema"]["additionalProperties"] is False for t in tools)


def test_the_sdk_client_sees_the_tool_error(project: Path) -> None:
    session = Session(project)
    try:
        refused = session.call("status", {"target": "x"})
        assert refused.is_error and refused.text == "status: unknown argument 'target' (it takes job, include_all)"
        assert not session.call("status", {"include_all": False}).is_error
    finally:
        session.close()
