"""Push and pull of swarm state: the job refs and the verdict notes, with any git remote.

The git CLI does the transport (credentials, ssh config, atomic push);
everything else is pygit2. A pull fetches into a shadow namespace, never
into the live refs, and then moves each live job ref by compare-and-swap,
inside the index's write lock: adopt a new job, fast-forward one that is
behind, keep one that is ahead, merge one that diverged (store/oplog.py).
A job whose pulled records do not decode or break an invariant is kept out
and named. A push never forces: when the remote moved, it pulls, merges and
tries again, a bounded number of times.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import BadInput, CorruptRecord, GitswarmError, WorkFailed
from gitswarm.model.ids import TASK_ID
from gitswarm.store import layout
from gitswarm.store.gitcli import GitCommandError, git, git_run
from gitswarm.store.jobs import COMMITTER, Snapshot
from gitswarm.store.notes import merge_notes
from gitswarm.store.oplog import Merged, check_tip, merge_job
from gitswarm.store.trust import Trust

SHADOW = "refs/gitswarm/shadow/"
PUSH_ATTEMPTS = 3
_REMOTE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass
class PullReport:
    remote: str
    new: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    invalid: dict[str, str] = field(default_factory=dict)
    notes: str = "unchanged"

    def view(self) -> dict:
        return {
            "remote": self.remote, "new": self.new, "updated": self.updated, "merged": self.merged,
            "unchanged": self.unchanged, "invalid": self.invalid, "notes": self.notes,
        }


def remote_key(swarm: Swarm, remote: str) -> str:
    """The name state from `remote` is kept and trusted under: the remote's name, or a
    digest of a URL or path given directly."""
    workdir = swarm.repo.workdir or swarm.repo.common_dir
    names = git(["remote"], workdir).decode().split()
    if remote in names:
        return remote
    if not remote or remote.startswith("-"):
        raise BadInput(f"invalid remote {remote!r}")
    return "url-" + hashlib.sha256(remote.encode()).hexdigest()[:12]


def _shadow(key: str) -> str:
    if not _REMOTE_NAME.fullmatch(key):
        raise BadInput(f"remote name {key!r} cannot name a ref namespace")
    return f"{SHADOW}{key}/"


def fetch(swarm: Swarm, remote: str, key: str) -> None:
    prefix = _shadow(key)
    workdir = swarm.repo.workdir or swarm.repo.common_dir
    try:
        # No automatic gc in the middle of a pull (git would start one once gitswarm's
        # loose objects pass gc.auto): housekeeping is left to the user's own git commands.
        git(
            ["-c", "gc.auto=0", "-c", "maintenance.auto=false",
             "fetch", "--quiet", "--no-tags", "--prune", "--no-write-fetch-head", remote,
             f"+{layout.JOBS_PREFIX}*:{prefix}jobs/*", f"+{layout.NOTES_REF}*:{prefix}notes/swarm*"],
            workdir,
        )
    except GitCommandError as exc:
        raise WorkFailed(f"fetch from {remote} failed: {exc}") from None


def pull(swarm: Swarm, remote: str) -> PullReport:
    key = remote_key(swarm, remote)
    fetch(swarm, remote, key)
    prefix = _shadow(key)
    report = PullReport(remote=remote)
    repo, index = swarm.repo, swarm.index
    adopted: dict[str, str] = {}
    with index.immediate():
        for ref, theirs in sorted(repo.list_refs(prefix + "jobs/").items()):
            job_id = ref[len(prefix + "jobs/"):]
            try:
                outcome, merged = _pull_job(swarm, job_id, theirs)
            except GitswarmError as exc:
                report.invalid[job_id] = str(exc)
                continue
            getattr(report, outcome).append(job_id)
            if outcome == "new":
                adopted[job_id] = key
            if merged is not None:
                # Only the task records that differ from the local tip need re-indexing.
                job = swarm.refs.snapshot(job_id, merged.tip).job
                index.record(job, merged.state, merged.tip, merged.tasks)
            elif outcome != "unchanged":
                index.reindex(swarm.refs.snapshot(job_id, repo.read_ref(layout.job_ref(job_id))))
        report.notes = _pull_notes(swarm, repo.read_ref(f"{prefix}notes/swarm"))
    if adopted:
        Trust(repo.common_dir).adopted(adopted)
    return report


def _pull_job(swarm: Swarm, job_id: str, theirs: str) -> tuple[str, Merged | None]:
    repo = swarm.repo
    if not TASK_ID.fullmatch(job_id):
        raise CorruptRecord(f"ref name {job_id!r} is not a job id")
    where = layout.job_ref(job_id)
    ours = repo.read_ref(where)
    base = repo.merge_base(ours, theirs) if ours is not None and ours != theirs else ours
    if ours == theirs or base == theirs:
        return "unchanged", None
    if base == ours or ours is None:
        check_history(swarm, job_id, theirs, ours)
    else:
        Snapshot(repo, job_id, theirs)  # the tip's records decode; the merge decodes every new op
    if ours is None:
        repo.cas_ref(where, theirs, None, "gitswarm: pull (new job)")
        return "new", None
    if base == ours:
        repo.cas_ref(where, theirs, ours, "gitswarm: pull (fast-forward)")
        return "updated", None
    merged = merge_job(repo, job_id, ours, theirs, swarm.actor, base)
    repo.cas_ref(where, merged.tip, ours, "gitswarm: pull (merge)")
    return "merged", merged


def check_history(swarm: Swarm, job_id: str, theirs: str, ours: str | None) -> None:
    """Refuse pulled history that does not decode or breaks an invariant: it must start
    with this job's `job_created`, and its tip must record exactly the canonical replay
    of its operations (every task record and the state, compared by blob id)."""
    Snapshot(swarm.repo, job_id, theirs)  # the tip's job and state records decode
    check_tip(swarm.repo, job_id, theirs)


def _pull_notes(swarm: Swarm, theirs: str | None) -> str:
    repo = swarm.repo
    if theirs is None:
        return "unchanged"
    ours = repo.read_ref(layout.NOTES_REF)
    if ours == theirs or (ours is not None and repo.is_ancestor(theirs, ours)):
        return "unchanged"
    if ours is None or repo.is_ancestor(ours, theirs):
        repo.cas_ref(layout.NOTES_REF, theirs, ours, "gitswarm: pull notes")
        return "updated"
    merged = merge_notes(repo, ours, theirs, (COMMITTER, f"{swarm.actor}@gitswarm"), swarm.clock())
    repo.cas_ref(layout.NOTES_REF, merged, ours, "gitswarm: merge notes")
    return "merged"


def push(swarm: Swarm, remote: str) -> dict:
    """Push every job ref and the notes, never forced; pull and merge when the remote moved."""
    workdir = swarm.repo.workdir or swarm.repo.common_dir
    refspecs = [f"{layout.JOBS_PREFIX}*:{layout.JOBS_PREFIX}*"]
    pulls = []
    for attempt in range(PUSH_ATTEMPTS):
        specs = refspecs + ([f"{layout.NOTES_REF}:{layout.NOTES_REF}"] if swarm.repo.read_ref(layout.NOTES_REF) else [])
        done = git_run(["push", "--atomic", "--porcelain", remote, *specs], workdir)
        out = done.stdout.decode(errors="replace")
        if done.returncode != 0:
            rejected = [line for line in out.splitlines() if line.startswith("!")]
            if not any(_moved(line) for line in rejected) or attempt == PUSH_ATTEMPTS - 1:
                said = rejected[0] if rejected else _last_line(done.stderr.decode(errors="replace"))
                raise WorkFailed(f"push to {remote} failed: {said}")
            pulled = pull(swarm, remote)  # the remote moved: merge its state, then try again
            pulls.append(pulled.view())
            if pulled.invalid:
                named = "; ".join(f"{job}: {why}" for job, why in sorted(pulled.invalid.items()))
                raise WorkFailed(f"push to {remote}: the remote holds state that cannot be merged ({named})")
            continue
        pushed = [line.split("\t")[1].split(":")[0] for line in out.splitlines() if line[:1] in ("*", "+", " ")]
        return {"remote": remote, "pushed": sorted(pushed), "attempts": attempt + 1, "pulls": pulls}
    raise WorkFailed(f"push to {remote}: the remote kept moving")


def _moved(message: str) -> bool:
    return "non-fast-forward" in message or "fetch first" in message or "stale info" in message


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
