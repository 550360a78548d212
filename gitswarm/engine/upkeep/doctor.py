"""`gitswarm doctor`: check the repository, the index and every job's records."""

from __future__ import annotations

import os
from pathlib import Path

from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import BadInput
from gitswarm.store.gitcli import git, git_version
from gitswarm.store.holders import describe
from gitswarm.store.index import INDEX_FORMAT
from gitswarm.store.job_merge import check_tip
from gitswarm.store.lease_ends import dead_holders


def _check(name: str, ok: bool, detail: str) -> dict:
    return {"name": name, "ok": ok, "detail": detail}


def diagnose(swarm: Swarm) -> dict:
    """Every check's result; `ok` is true only when all passed."""
    checks = [_check("repository", True, str(swarm.repo.workdir or swarm.repo.common_dir))]
    version = git_version()
    if version is not None:
        checks.append(_check("git", True, version))
    else:
        checks.append(_check("git", False, "the git CLI is not on PATH (needed for push, pull and worktrees)"))
    jobs = swarm.index.job_ids()
    checks.append(_check("index", True, _index_detail(swarm, len(jobs))))
    for job_id, message in sorted(swarm.index.invalid.items()):
        checks.append(_check(f"job {job_id}", False, str(message)))
    bad = 0
    for job_id in jobs:
        try:
            snapshot = swarm.refs.snapshot(job_id)
            snapshot.tasks()
            for artifact_id in snapshot.artifact_ids():
                snapshot.artifact(artifact_id)
            check_tip(swarm.repo, job_id, snapshot.tip)  # the records are what the operations made
        except BadInput as exc:
            bad += 1
            checks.append(_check(f"job {job_id}", False, str(exc)))
    checks.append(_check("records", bad == 0, f"{len(jobs) - bad} of {len(jobs)} jobs decode cleanly"))
    checks.append(_check("leases", True, _leases(swarm)))
    checks += _remote_checks(swarm)
    return {"ok": all(c["ok"] for c in checks), "checks": checks}


def _index_detail(swarm: Swarm, jobs: int) -> str:
    """Where the index is; doctor writes none (a read-only repository, a clone that has none yet):
    one read from the refs into memory is checked instead."""
    index = swarm.index
    if index.read_only is not None:
        return f"read-only repository, {index.read_only}: {jobs} jobs read from the refs into memory; commands that write refuse"
    if index.in_memory:
        return f"none yet at {index.path}: {jobs} jobs read from the refs into memory; the first command that writes makes it"
    return f"{index.path} (format v{INDEX_FORMAT}, {jobs} jobs)"


def _leases(swarm: Swarm) -> str:
    """What the held leases are like: held by dead workers of this machine (said first: nothing waits for
    them to run out), run out, or fine. Said, never a failure: the next work or recover ends them."""
    now, held = swarm.clock(), swarm.index.leases()
    dead = dead_holders(swarm.index)
    gone = {(row.job, row.task) for row in dead}
    stale = [f"{row.job}/{row.task}" for row in held if row.expires < now and (row.job, row.task) not in gone]
    said = []
    if dead:
        names = ", ".join(f"{row.job}/{row.task} ({describe(row.holder)})" for row in dead[:5])
        said.append(f"{len(dead)} held by dead workers: {names}; the next work, run, recover or status requeues them, no attempt used")
    if stale:
        said.append(f"{len(stale)} expired (run gitswarm recover): {', '.join(stale[:5])}")
    return "; ".join(said) or f"{len(held)} held, none expired, no holder dead on this host"


def _remote_checks(swarm: Swarm) -> list[dict]:
    """For each remote this machine can read the configuration of (a path on disk): whether it refuses
    forced pushes, without which anyone with push access can rewind shared history (docs/sharing.md).
    A warning in the detail, never a failure: the remote is not this clone's to configure."""
    here = swarm.repo.workdir or swarm.repo.common_dir
    found = []
    names = git(["remote"], here, check=False).decode().split()
    for name in names:
        url = os.fsdecode(git(["config", "--get", f"remote.{name}.url"], here, check=False).strip())  # a path, maybe not UTF-8
        if not url or ("://" in url and not url.startswith("file://")) or ":" in url.split("/", 1)[0]:
            continue  # a network remote (or scp-like host:path): its configuration is not readable from here
        path = Path(url.removeprefix("file://")).expanduser()
        path = path if path.is_absolute() else here / path
        if not path.is_dir():
            continue
        deny = git(["config", "--bool", "--get", "receive.denyNonFastForwards"], path, check=False).decode().strip()
        detail = (
            f"{url}: refuses forced pushes" if deny == "true" else
            f"{url}: accepts forced pushes, so shared history can be rewound; "
            f"run: git -C {path} config receive.denyNonFastForwards true"
        )
        found.append(_check(f"remote {name}", True, detail))
    return found
