"""A result that crosses a layer has one type (engine/results.py): what `--json` prints and what the MCP
tool returns and advertises as its outputSchema are the same Struct."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from gitswarm.engine.results import Changed, MergeResult, Reviewed, SteerRecorded, TrainResult, Verified, output_schema
from tests.conftest import cli, register_scripted
from tests.pilot.rawclient import RawClient

FIX = "edit README.md: replace hello with world"
CHECK = "grep -qx world README.md"


@pytest.fixture
def project(repo: Path) -> Path:
    return register_scripted(repo)


def tools_listed(project: Path, version: str) -> dict[str, dict]:
    client = RawClient(project, version=version)
    try:
        return {tool["name"]: tool for tool in client.request("tools/list")["result"]["tools"]}
    finally:
        client.close()


def test_verify_and_merge_advertise_the_schema_of_their_result_type(project: Path) -> None:
    tools = tools_listed(project, "2025-11-25")
    assert tools["verify"]["outputSchema"] == output_schema(Verified)
    assert tools["merge"]["outputSchema"] == output_schema(MergeResult)
    assert tools["merge_job"]["outputSchema"] == output_schema(TrainResult)
    assert tools["verify"]["outputSchema"]["type"] == "object"
    assert set(tools["verify"]["outputSchema"]["required"]) == set(Verified.__struct_fields__)
    assert "CheckView" in tools["verify"]["outputSchema"]["$defs"]
    assert tools["cancel"]["outputSchema"] == output_schema(Changed)
    assert tools["steer"]["outputSchema"] == output_schema(SteerRecorded)
    assert tools["review"]["outputSchema"] == output_schema(Reviewed)
    assert set(tools["review"]["outputSchema"]["required"]) == {"commit", "reviewer", "accepted", "note", "signed"}


def test_a_client_of_a_revision_without_structured_content_is_given_no_output_schema(project: Path) -> None:
    tools = tools_listed(project, "2025-03-26")
    assert all("outputSchema" not in tool for tool in tools.values())


def test_the_json_of_verify_and_merge_is_their_result_type(project: Path) -> None:
    delegated = cli(project, "--json", "delegate", FIX, "--adapter", "scripted", "--check", CHECK)
    assert delegated.code == 0, delegated.err
    [patch] = [a["id"] for a in delegated.json()["artifacts"] if a["kind"] == "patch"]
    verified = cli(project, "--json", "verify", patch)
    assert verified.code == 0, verified.err
    typed = msgspec.json.decode(verified.out, type=Verified, strict=True)  # every field, of its type
    assert typed.patch == patch and typed.accepted and typed.checks[0].passed and typed.checks[0].tail == []
    assert set(verified.json()) == set(Verified.__struct_fields__)
    merged = cli(project, "--json", "merge", patch)
    assert merged.code == 0, merged.err
    assert msgspec.json.decode(merged.out, type=MergeResult).into == "main"
    assert set(merged.json()) == set(MergeResult.__struct_fields__)
    reviewed = cli(project, "--json", "review", patch, "--accept")
    assert reviewed.code == 0, reviewed.err
    assert msgspec.json.decode(reviewed.out, type=Reviewed).accepted and "artifact" not in reviewed.json()
    job = delegated.json()["id"]
    cancelled = cli(project, "--json", "cancel", job)
    assert cancelled.code in (0, 2), cancelled.err  # a finished job has nothing left to cancel
    if cancelled.code == 0:
        assert set(cancelled.json()) == set(Changed.__struct_fields__)
