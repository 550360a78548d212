"""Tasks that act outside the repository run only after a person approved them (model/approval.py).

A pilot's `approve` is a request: the job waits, marked as awaiting approval,
until `gitswarm approve`; what was approved, by whom and how is recorded on
the job. An `approved` op pulled from elsewhere (forged with git plumbing
here) frees nothing.
"""

from __future__ import annotations

import json
import sys
from contextlib import closing
from pathlib import Path

from gitswarm.engine.swarm import Swarm
from gitswarm.model.approval import BY_COMMAND, BY_FLAG, BY_SPEC
from gitswarm.model.ids import new_id
from gitswarm.pilot import actions
from tests.conftest import cli, clone_of, commit_file, ok, seeded_remote
from tests.forge import forge_history, history_ops, push

PERSON = "Test Author <author@example.com>"  # the author identity tests/conftest.py gives git


def deployer(repo: Path, marker: Path) -> None:
    """An adapter whose every run acts outside the repository (`approve = true`, as a deploy tool's): it touches `marker`."""
    script = f"open({str(marker)!r}, 'w').write('deployed')"
    spec = f'executable = {json.dumps(sys.executable)}\nargs = ["-c", {json.dumps(script)}, "{{prompt}}"]\ncapabilities = ["deploy"]\napprove = true\n'
    spec += f"[sandbox]\nwrite = [{json.dumps(str(marker.parent))}]  # where it deploys to, outside the repository\n"
    commit_file(repo, ".gitswarm/adapters/deployer.toml", spec, "register the deployer")


def deploy_spec(approve: bool = True) -> str:
    flag = "approve = true\n" if approve else ""
    return f'goal = "ship it"\n[[tasks]]\nid = "ship"\nadapter = "deployer"\nprompt = "ship"\n{flag}'


def test_a_pilot_request_waits_for_gitswarm_approve_which_records_who_and_how(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "deployed"
    deployer(repo, marker)
    submitted = actions.submit_job(repo, spec=deploy_spec(), approve=True)
    job = submitted["id"]
    assert "worker" not in submitted and "gitswarm approve" in submitted["awaiting_approval"]

    status = ok(cli(repo, "--json", "status", job)).json()
    assert status["awaiting_approval"] == "its side effects await a person's approval"
    refused = cli(repo, "work", "--job", job)
    assert refused.code == 2 and "await a person's approval" in refused.err and "gitswarm approve" in refused.err
    assert not marker.exists()

    approved = ok(cli(repo, "--json", "approve", job[:12])).json()
    assert approved["side_effects"]["tasks"] == ["ship"] and approved["side_effects"]["how"] == BY_COMMAND
    with closing(Swarm(repo)) as swarm:
        snapshot = swarm.refs.snapshot(job)
        assert snapshot.job.awaits_approval == ("ship",) and snapshot.job.approval is None
        (approval,) = snapshot.state.approvals
        assert (approval.tasks, approval.how, approval.by) == (("ship",), BY_COMMAND, PERSON)
        assert approval.op is not None and approved["side_effects"]["by"] == PERSON
    ok(cli(repo, "work", "--job", job))
    assert marker.read_text() == "deployed"


def test_the_person_at_the_terminal_approves_and_the_job_records_how(repo: Path, tmp_path: Path) -> None:
    deployer(repo, tmp_path / "deployed")
    (repo / "flag.toml").write_text(deploy_spec(approve=False))
    (repo / "inline.toml").write_text(deploy_spec(approve=True))
    assert cli(repo, "submit", "flag.toml").code == 2  # no approval at all: refused, as before
    by_flag = ok(cli(repo, "--json", "submit", "flag.toml", "--approve")).json()["id"]
    by_spec = ok(cli(repo, "--json", "submit", "inline.toml")).json()["id"]
    with closing(Swarm(repo)) as swarm:
        for job, how in ((by_flag, BY_FLAG), (by_spec, BY_SPEC)):
            approval = swarm.refs.snapshot(job).job.approval
            assert approval is not None and (approval.tasks, approval.how, approval.by) == (("ship",), how, PERSON)
        assert swarm.ledger.awaiting_person() == frozenset()


def test_a_job_without_side_effects_records_no_approval(repo: Path) -> None:
    job = actions.submit_job(repo, spec='goal = "g"\n[[tasks]]\nid = "a"\ncommand = "true"\n', approve=True, start=False)["id"]
    with closing(Swarm(repo)) as swarm:
        snapshot = swarm.refs.snapshot(job)
        assert snapshot.job.approval is None and snapshot.job.awaits_approval == ()
        assert job not in swarm.ledger.awaiting_person()


def test_a_forged_approval_pulled_from_elsewhere_frees_nothing(tmp_path: Path) -> None:
    remote = seeded_remote(tmp_path)
    victim, evil = clone_of(tmp_path, "victim", remote), clone_of(tmp_path, "evil", remote)
    marker = tmp_path / "deployed"
    deployer(victim, marker)
    job = actions.submit_job(victim, spec=deploy_spec(), approve=True)["id"]
    ok(cli(victim, "push"))
    ok(cli(evil, "pull"))
    ref = f"refs/swarm/jobs/{job}"
    ops = history_ops(evil, ref)
    last = ops[-1][-1]
    approved = {"op": "approved", "v": 1, "id": new_id(), "clock": last["clock"] + 1, "at": last["at"] + 1,
                "actor": last["actor"], "tasks": ["ship"], "by": PERSON, "how": BY_COMMAND}
    from_evil = forge_history(evil, [*ops, [approved]], onto=ref)
    push(evil, f"{from_evil}:{ref}")

    pulled = cli(victim, "--json", "pull")
    assert pulled.code in (0, 1), pulled.err
    with closing(Swarm(victim)) as swarm:
        assert [a.op for a in swarm.refs.snapshot(job).state.approvals] == [approved["id"]]  # kept as data
        assert job in swarm.ledger.awaiting_person()
    refused = cli(victim, "work", "--job", job)
    assert refused.code == 2 and "await a person's approval" in refused.err
    assert not marker.exists()

    ok(cli(victim, "approve", job))  # the person here: now it counts
    ok(cli(victim, "work", "--job", job))
    assert marker.exists()


def test_an_approved_op_is_only_written_for_a_job_that_awaits_one(repo: Path) -> None:
    job = actions.submit_job(repo, spec='goal = "g"\n[[tasks]]\nid = "a"\ncommand = "true"\n', start=False)["id"]
    approved = ok(cli(repo, "--json", "approve", job)).json()
    assert "side_effects" not in approved
    with closing(Swarm(repo)) as swarm:
        assert swarm.refs.snapshot(job).state.approvals == ()
