"""`gitswarm recover` offers kept results again (store/kept_results.py).

A result kept because its job's ref was gone is recorded once the job is
back (restored, or pulled again): its artifacts join the task's, as an
`artifacts` operation, and the file goes. The task itself is not finished
by it: its lease ran out meanwhile, and fencing decides who runs it next.
"""

from __future__ import annotations

from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import artifact_id
from gitswarm.model.errors import BadInput
from gitswarm.store.kept_results import KeptResults


def offer_kept(swarm: Swarm) -> list[dict[str, object]]:
    """Each kept result: recorded (its job is back), waiting (not yet), or unreadable."""
    offered: list[dict[str, object]] = []
    for path, kept in KeptResults(swarm.common_dir).all():
        if kept is None:
            offered.append({"file": str(path), "outcome": "unreadable: not a kept result this gitswarm reads"})
            continue
        entry: dict[str, object] = {"file": str(path), "job": kept.job, "task": kept.task, "token": kept.token, "ok": kept.ok}
        if swarm.index.job(kept.job) is None:
            offered.append({**entry, "outcome": f"waiting: job {kept.job} is still gone"})
            continue
        try:
            have = set(swarm.refs.snapshot(kept.job).task(kept.task).artifacts)
            new = [a for a in kept.artifacts if artifact_id(a) not in have]
            if new:
                swarm.ledger.record_artifacts(kept.job, kept.task, new, swarm.clock())
        except BadInput as exc:  # the job is back without that task, or its record does not read
            offered.append({**entry, "outcome": f"not recorded: {exc}"})
            continue
        path.unlink(missing_ok=True)
        offered.append({**entry, "outcome": f"recorded {len(new)} artifacts on the task"})
    return offered
