"""A pilot's `approve` asks the person through the client (MCP elicitation), checked with the SDK's own client.

Yes: the job runs, recording that the person approved it through the client.
No: nothing is submitted. No answer, or a client that cannot ask: the job
waits for `gitswarm approve` (tests/engine/sharing/test_approval_from_a_person.py).
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from gitswarm.engine.swarm import Swarm
from gitswarm.model.approval import BY_ELICITATION
from tests.conftest import cli, ok
from tests.engine.sharing.test_approval_from_a_person import PERSON, deploy_spec, deployer
from tests.pilot.mcpclient import Session
from tests.pilot.rawclient import RawClient


def answering(action: str, approve: bool | None = None) -> Any:
    def person(question: str, schema: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        assert schema["properties"]["approve"]["type"] == "boolean"
        return action, ({"approve": approve} if approve is not None else None)

    return person


def submit(repo: Path, person: Any) -> tuple[Session, Any]:
    session = Session(repo, person=person)
    return session, session.call("submit_job", {"spec": deploy_spec(), "approve": True, "start": False})


def test_a_yes_through_the_client_approves_and_is_recorded(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "deployed"
    deployer(repo, marker)
    session, called = submit(repo, answering("accept", True))
    try:
        assert not called.is_error, called.text
        assert len(session.asked) == 1 and "ship (deployer" in session.asked[0] and str(repo) in session.asked[0]
    finally:
        session.close()
    job = called.data["id"]
    assert "awaiting_approval" not in called.data
    with closing(Swarm(repo)) as swarm:
        approval = swarm.refs.snapshot(job).job.approval
        assert approval is not None and (approval.tasks, approval.how, approval.by) == (("ship",), BY_ELICITATION, PERSON)
    ok(cli(repo, "work", "--job", job))
    assert marker.exists()


@pytest.mark.parametrize("action, approve", [("decline", None), ("accept", False)])
def test_a_no_through_the_client_submits_nothing(repo: Path, tmp_path: Path, action: str, approve: bool | None) -> None:
    deployer(repo, tmp_path / "deployed")
    session, called = submit(repo, answering(action, approve))
    session.close()
    assert called.is_error and "did not approve" in called.text
    assert ok(cli(repo, "--json", "status")).json()["jobs"] == []


def test_a_dismissed_question_leaves_the_job_waiting_for_gitswarm_approve(repo: Path, tmp_path: Path) -> None:
    deployer(repo, tmp_path / "deployed")
    session, called = submit(repo, answering("cancel"))
    session.close()
    assert not called.is_error and "gitswarm approve" in called.data["awaiting_approval"]
    assert ok(cli(repo, "--json", "status", called.data["id"])).json()["awaiting_approval"]


def test_a_client_without_elicitation_is_never_asked(repo: Path, tmp_path: Path) -> None:
    deployer(repo, tmp_path / "deployed")
    client = RawClient(repo)  # declares no capabilities
    try:
        result = client.call("submit_job", {"spec": deploy_spec(), "approve": True, "start": False})
        assert not any(n.get("method") == "elicitation/create" for n in client.notifications)
    finally:
        client.close()
    assert result["isError"] is False and "gitswarm approve" in result["structuredContent"]["awaiting_approval"]
