"""What `work --remote` adds to a supervisor and its workers, in one place.

The supervisor of a remote run decides its leases through a RemoteLedger,
seats its workers as one crew (engine/machines/crew.py), names each worker
after its machine, and watches the remote (engine/machines/remote_watch.py).
Each worker claims through its own RemoteLedger and, in a crew, claims ahead
(engine/machines/claim_ahead.py). A local run loads none of this: the
supervisor imports this module only when it is given a remote.
"""

from __future__ import annotations

import functools
import time

from gitswarm.engine.machines.arbiter import Arbiter, machine_name, machine_owner
from gitswarm.engine.machines.claim_ahead import Claiming, Pipeline
from gitswarm.engine.machines.crew import Crew, Siblings
from gitswarm.engine.machines.remote_leases import RemoteLedger
from gitswarm.engine.machines.remote_watch import RemoteState, RemoteWatch
from gitswarm.engine.swarm import Swarm
from gitswarm.store.group_slots import Seat
from gitswarm.store.leases import Ask

__all__ = ["Crew", "RemoteState", "RemoteWatch", "Siblings", "machine_name", "machine_owner", "remote_leases", "worker_leases"]


def remote_leases(swarm: Swarm, remote: str, clock_skew: float) -> RemoteLedger:
    """Leases of `swarm` that the remote decides."""
    return RemoteLedger(swarm.ledger, Arbiter(swarm, remote), clock_skew)


def worker_leases(
    swarm: Swarm, remote: str, clock_skew: float, ask: Ask, crew: Crew | None, group: Seat | None = None,
) -> tuple[RemoteLedger, Pipeline | None]:
    """A worker's leases through the remote and, in a crew, the pipeline that claims ahead for it; the
    crew hears why its pushes do not land. With `group` (its slot among its siblings'), its finishes are
    pushed together with theirs (engine/machines/finish_group.py)."""
    leases = remote_leases(swarm, remote, clock_skew)
    if crew is None:
        return leases, None
    leases.group = group
    leases.busy_siblings = functools.partial(crew.siblings.busy_others, crew.slot)
    claiming = Claiming(ask.owner, ask.ttl, ask.job, ask.exclude, ask.skip_jobs, crew.siblings.slots)
    leases.report_problems(functools.partial(crew.siblings.report, crew.slot), functools.partial(crew.siblings.lost_race, crew.slot))
    return leases, Pipeline(leases, claiming, crew, time.time)
