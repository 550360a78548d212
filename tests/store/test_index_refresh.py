"""Index freshness against writers that are between their ref CAS and their commit."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from gitswarm.engine.swarm import Swarm
from gitswarm.model.ops import TaskClaimed
from tests.conftest import spec_text


def test_refresh_never_reindexes_from_a_tip_read_before_the_lock(repo: Path) -> None:
    """A process that opens the index while a writer holds the lock must not undo that writer's work.

    Seen as a task stuck `running` for a whole lease: a worker starting up read
    the ref tips mid-transaction, waited for the lock, then re-indexed the job
    from the tip it had read, dropping a claim made meanwhile (and its lease).
    """
    writer = Swarm(repo)
    job = writer.submit_text(spec_text('id = "t1"\ncommand = "true"', 'id = "t2"\ncommand = "true"'))
    now = time.time()

    def claim(task: str):
        def build(snapshot):
            token = snapshot.task(task).claims + 1
            op = writer.refs.next_op(TaskClaimed, snapshot, now, task=task, token=token, owner="w", lease_expires=now + 60)
            return op, ()

        return build

    opened: list[Swarm] = []
    with writer.index.immediate():
        writer.ledger._transition(job, claim("t1"))  # the ref moved; the index commit is still to come
        reader = threading.Thread(target=lambda: opened.append(Swarm(repo)))
        reader.start()
        time.sleep(0.3)  # the reader saw the ref ahead of the index and now waits for the lock
        writer.ledger._transition(job, claim("t2"))
    reader.join(timeout=30)
    assert len(opened) == 1
    # Read the shared index as it stands: opening another Swarm would repair it from the refs.
    states = {t["id"]: t["state"] for t in writer.index.tasks(job)}
    assert states == {"t1": "running", "t2": "running"}
    assert writer.index.lease(job, "t2") is not None  # the claim's lease: its worker's finish needs it
    assert writer.index.job_tip(job) == writer.repo.read_ref(f"refs/swarm/jobs/{job}")
