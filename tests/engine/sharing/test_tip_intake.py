"""Planning a pulled tip (engine/sharing/tip_intake.py): what a sync of many machines' work costs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitswarm.engine.sharing import tip_intake
from gitswarm.engine.swarm import Swarm
from gitswarm.model.ops import Cancelled
from gitswarm.store import layout
from gitswarm.store.pulled_jobs import Intake
from tests.conftest import spec_text


def test_a_remote_job_ref_the_local_history_holds_is_planned_with_no_merge_base(
    swarm: Swarm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(*(f'id = "t{i}"\ncommand = "true"' for i in range(3))))
    job = swarm.submit_file(spec)
    submitted = swarm.repo.read_ref(layout.job_ref(job))
    for _ in range(3):  # the local history moves on, as claims and finishes of many machines are merged in
        lease = swarm.ledger.claim("w1", 30.0, swarm.clock(), job_id=job)
        swarm.ledger.finish(lease, True, swarm.clock())
    tip = swarm.repo.read_ref(layout.job_ref(job))
    tip_intake.held_here(swarm.repo, job, tip)  # a job whose claim tips this process merges
    try:
        # The remote's job ref still names the submitted commit (claims go to their own refs): held, so unchanged,
        # with no merge base sought (libgit2 would read back through the whole history to find it).
        monkeypatch.setattr(type(swarm.repo), "merge_base", lambda *args: pytest.fail("merge base sought"))
        plan = tip_intake.plan_tip(swarm, Intake(swarm.repo), job, submitted)
        assert (plan.outcome, plan.tip) == ("unchanged", submitted)
    finally:
        tip_intake.forget(swarm.repo, job)


def test_a_remote_job_ref_the_local_history_lacks_is_still_merged(swarm: Swarm, tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(*(f'id = "t{i}"\ncommand = "true"' for i in range(2))))
    job = swarm.submit_file(spec)
    submitted = swarm.refs.snapshot(job)
    lease = swarm.ledger.claim("w1", 30.0, swarm.clock(), job_id=job)
    swarm.ledger.finish(lease, True, swarm.clock())
    # Another clone cancelled the job from the submitted commit and published it: a history this one does not hold.
    theirs, _ = swarm.refs.commit_ops(submitted, swarm.refs.next_op(Cancelled, submitted, swarm.clock()))
    tip_intake.held_here(swarm.repo, job, swarm.repo.read_ref(layout.job_ref(job)))
    try:
        plan = tip_intake.plan_tip(swarm, Intake(swarm.repo), job, theirs)
        assert plan.outcome == "merged" and plan.merged is not None and plan.merged.state.cancelled
    finally:
        tip_intake.forget(swarm.repo, job)
