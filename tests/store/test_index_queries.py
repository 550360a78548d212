"""The index's queries return rows with named fields (store/index/queries.py)."""

from __future__ import annotations

import time

from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Finding
from gitswarm.store.index import ArtifactMatch, ArtifactRow, ChangedTask, HeldLease, LeaseRow
from tests.conftest import spec_text


def test_rows_name_their_fields(swarm: Swarm) -> None:
    job = swarm.submit_text(spec_text('id = "a"\ncommand = "true"', 'id = "b"\ncommand = "true"'))
    now = time.time()
    lease = swarm.ledger.claim("w", 30, now)
    assert lease is not None

    held = swarm.index.lease(job, lease.task)
    assert held == HeldLease(owner="w", token=lease.token, expires=held.expires, heartbeat=held.heartbeat)
    assert held.expires >= now + 29
    assert swarm.index.leases() == [LeaseRow(job=job, task=lease.task, owner="w", token=lease.token, expires=held.expires)]

    changed = swarm.index.changed_tasks(0.0, job)
    assert all(isinstance(row, ChangedTask) for row in changed)
    assert {(row.task, row.state, row.attempts, row.error) for row in changed} == {
        (lease.task, "running", 1, None),
        ("b" if lease.task == "a" else "a", "queued", 0, None),
    }
    assert changed == sorted(changed, key=lambda row: row.updated)

    swarm.ledger.finish(lease, True, now + 1, artifacts=[Finding(job=job, task=lease.task, created=now, title="seen")])
    rows = swarm.index.artifacts(job)
    assert rows and all(isinstance(row, ArtifactRow) and row.task == lease.task for row in rows)
    first = rows[0]
    assert swarm.index.artifact_ids(first.id[:8]) == [ArtifactMatch(id=first.id, job=job)]
    assert swarm.index.lease(job, lease.task) is None and swarm.index.leases() == []
