"""`approve` goes through the engine (engine/sharing/approval.py) and records the job in this clone's trust."""

from __future__ import annotations

import pytest

from gitswarm.engine.sharing.approval import approve
from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import NotFound
from tests.conftest import spec_text


def test_approve_resolves_a_prefix_and_records_the_job(swarm: Swarm) -> None:
    job = swarm.submit_text(spec_text('id = "a"\ncommand = "true"'))
    assert approve(swarm, job[:10]) == {"approved": job}
    assert job in swarm.trust.load().approved
    assert approve(swarm, job) == {"approved": job}
    assert swarm.trust.load().approved.count(job) == 1


def test_approve_of_no_such_job_is_bad_input(swarm: Swarm) -> None:
    with pytest.raises(NotFound):
        approve(swarm, "0123456789ab")
    assert swarm.trust.load().approved == []
