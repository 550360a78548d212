"""The library API behind every command: one Swarm per repository.

Commands stay thin: they parse, call one method here, and print the plain
data it returns.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gitswarm.engine import recovery
from gitswarm.engine.config import load_config
from gitswarm.engine.results import Changed
from gitswarm.model import codec
from gitswarm.model.approval import BY_FLAG, BY_SPEC, PILOT_REQUEST, Approval
from gitswarm.model.artifacts import Check, Patch, Run, Summary, describe
from gitswarm.model.audit_names import looks_like_audit
from gitswarm.model.coupling import coupled_tasks, refusal
from gitswarm.model.errors import BadInput, NotFound, SpecError
from gitswarm.model.ids import check_prefix, new_id, resolve_prefix, split_task_ref
from gitswarm.model.ops import subject
from gitswarm.model.paths import quote_path
from gitswarm.model.records import FINISHED, runs_in_users_tree
from gitswarm.model.spec import AdapterFacts, parse_spec
from gitswarm.store import layout, reffiles
from gitswarm.store.gitrepo import GitRepo
from gitswarm.store.index import Index, index_path
from gitswarm.store.jobs import JobRefs, Snapshot
from gitswarm.store.leases import Ledger, awaiting_person, why_not
from gitswarm.store.repoconfig import person
from gitswarm.store.trust import Trust
from gitswarm.store.workspace import has_tracked_changes
from gitswarm.store.worktrees import check_includes

if TYPE_CHECKING:
    from gitswarm.model.provenance import Weighed
    from gitswarm.store.verdicts import VerdictNotes

Clock = Callable[[], float]


def load_actor(common_dir: Path) -> str:
    """This clone's actor id, created once and kept in the git common dir."""
    path = common_dir / "gitswarm" / "actor"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    actor = new_id()
    try:
        with open(path, "x") as handle:
            handle.write(actor + "\n")
    except FileExistsError:
        return path.read_text().strip()
    return actor


class _LazyActorRefs(JobRefs):
    """JobRefs whose actor id is read, or created, when an operation first needs it: opening
    a repository to read it writes no actor file."""

    def __init__(self, repo: GitRepo) -> None:
        self._actor = ""
        super().__init__(repo, "")

    @property
    def actor(self) -> str:
        if not self._actor:
            self._actor = load_actor(self.repo.common_dir)
        return self._actor

    @actor.setter
    def actor(self, value: str) -> None:
        self._actor = value


class Swarm:
    """gitswarm on one repository: the refs, the index and the ledger over both.

    `create=False` is for commands that only read: with no index on disk yet,
    one is built in memory from the refs, so that they write nothing. When the
    index on disk holds every job at the tip its ref points to (the refs read
    from their files, store/reffiles.py), the repository is opened (pygit2,
    ~50 ms of imports) only when a record is read from it: `status` of such a
    job answers from the index alone.
    """

    def __init__(self, path: str | os.PathLike[str] = ".", clock: Clock = time.time, create: bool = True) -> None:
        self.clock = clock
        self.notices: list[str] = []  # things the user should know that are not errors
        self._path = path
        self._repo: GitRepo | None = None
        self._refs: _LazyActorRefs | None = None
        self._ledger: Ledger | None = None
        self._trust: Trust | None = None
        fresh = None if create else _fresh_index(Path(path))
        if fresh is not None:
            self.common_dir, self.index = fresh
            return
        self._repo = _open_repo(path)
        self.common_dir = self._repo.common_dir
        self.index = Index(self.common_dir, create=create)
        self.index.refresh(self.refs)

    @property
    def repo(self) -> GitRepo:
        if self._repo is None:
            self._repo = _open_repo(self._path)
        return self._repo

    @property
    def refs(self) -> _LazyActorRefs:
        if self._refs is None:
            self._refs = _LazyActorRefs(self.repo)
        return self._refs

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            self._ledger = Ledger(self.refs, self.index)
        return self._ledger

    @property
    def trust(self) -> Trust:
        """Which jobs may run here (read by `status`; the ledger keeps its own for claims)."""
        if self._trust is None:
            self._trust = Trust(self.common_dir)
        return self._trust

    @property
    def actor(self) -> str:
        """This clone's actor id (created on first use)."""
        return self.refs.actor

    def close(self) -> None:
        self.index.close()

    # -- names ----------------------------------------------------------------------------

    def known_adapters(self) -> list[str]:
        from gitswarm.engine import adapter_facts  # deferred for start-up speed: reading commands never load adapters

        return adapter_facts.known_adapters(self.repo.workdir)

    def adapter_facts(self) -> AdapterFacts:
        """What job specs are checked against: adapter names, their capabilities, routing."""
        from gitswarm.engine import adapter_facts  # deferred for start-up speed: reading commands never load adapters

        return adapter_facts.adapter_facts(self.repo.workdir)

    def resolve_job(self, prefix: str) -> str:
        """The job a prefix names; a job whose records cannot be read raises why."""
        job_id = resolve_prefix(prefix, [*self.index.job_ids(), *self.index.invalid], "job")
        if job_id in self.index.invalid:
            raise self.index.invalid[job_id]
        return job_id

    def resolve_task(self, ref: str) -> tuple[str, str]:
        """`JOB/TASK`, or `TASK` alone when exactly one unfinished job has it."""
        job_prefix, task_id = split_task_ref(ref)
        if job_prefix is not None:
            job_id = self.resolve_job(job_prefix)
            if self.index.task_state(job_id, task_id) is None:
                raise NotFound(f"job {job_id} has no task {task_id!r}")
            return job_id, task_id
        jobs = self.index.jobs_with_task(task_id, unfinished=True)
        if len(jobs) == 1:
            return jobs[0], task_id
        if not jobs:
            raise NotFound(f"no unfinished job has a task {task_id!r}; name it as JOB/{task_id}")
        raise BadInput(f"task {task_id!r} is in {len(jobs)} unfinished jobs; name it as JOB/{task_id}")

    def resolve_target(self, target: str) -> tuple[str, str | None]:
        """A job (prefix) or a task reference, as cancel takes them."""
        if "/" in target:
            return self.resolve_task(target)
        check_prefix(target, "job")
        try:
            return self.resolve_job(target), None
        except NotFound:
            return self.resolve_task(target)

    # -- commands -------------------------------------------------------------------------

    def submit_text(
        self, text: str, source: str = "spec", approve: bool = False, allow_overlap: bool = False,
        approved_how: str | None = None,
    ) -> str:
        """Submit a job spec. Its tasks that act outside the repository are approved by the person
        submitting (`approve`, or `approve = true` in the spec; `approved_how` says how, when another
        way), and recorded so; with `approved_how` PILOT_REQUEST they wait for a person instead
        (model/approval.py)."""
        load_config(self.repo.workdir)  # all of the configuration checked before anything is written (BadInput)
        spec = parse_spec(text, self.adapter_facts(), source, approve=approve)
        coupled = [] if allow_overlap else coupled_tasks(spec.tasks)
        if coupled:
            raise SpecError(f"{Path(source).name}: {refusal(coupled)}")
        # Implement tasks branch from the base; agents' analyze tasks read a checkout of it (engine/delegation/readonly.py).
        # Only shell analyze tasks run in the user's tree.
        base, base_ref = self.pin_base(spec.base, any(not runs_in_users_tree(t.mode, t.adapter) for t in spec.tasks))
        if base is not None and any(t.mode == "implement" for t in spec.tasks):
            check_includes(self.repo.workdir, base)
        # The file's name is recorded as `source`: text, in git's quoted form when it is not UTF-8 (model/paths.py).
        name = quote_path(os.fsencode(Path(source).name))
        now = self.clock()
        side_effects = tuple(t.id for t in spec.tasks if t.approved)
        approval: Approval | None = None
        awaits: tuple[str, ...] = ()
        if side_effects and approved_how == PILOT_REQUEST:
            awaits = side_effects
        elif side_effects:
            how = approved_how or (BY_FLAG if approve else BY_SPEC)
            approval = Approval(tasks=side_effects, by=person(self.repo.workdir or self.common_dir), how=how, at=now)
        return self.ledger.submit(
            spec, now, source=name, base=base, base_ref=base_ref, approval=approval, awaits_approval=awaits
        )

    def pin_base(self, rev: str | None, needed: bool) -> tuple[str | None, str | None]:
        """The commit (and branch) implement tasks will branch from and agents' analyze tasks will read:
        REV, else the checked-out tip."""
        if rev is None and not needed:
            return None, None
        commit = self.repo.resolve(rev or "HEAD")
        if commit is None:
            raise BadInput(f"base: {rev or 'HEAD'} does not name a commit" + ("" if rev else " (no commits yet?)"))
        workdir = self.repo.workdir
        if workdir is not None and has_tracked_changes(workdir):
            self.notices.append(
                f"uncommitted changes in {workdir} are not part of the base {commit[:12]}; commit them if the agents need them"
            )
        if rev is None:
            return commit, self.repo.head_branch()
        branch = f"refs/heads/{rev}"
        return commit, branch if self.repo.resolve(branch) == commit else None

    def submit_file(self, path: str | os.PathLike[str], approve: bool = False, allow_overlap: bool = False) -> str:
        try:
            text = Path(path).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(f"cannot read spec {os.fspath(path)}: {getattr(exc, 'strerror', None) or exc}") from None
        return self.submit_text(text, os.fspath(path), approve=approve, allow_overlap=allow_overlap)

    def status(self, job: str | None = None) -> dict:
        if job is None:
            jobs = self.index.jobs()
            waiting = self.awaiting_approval([j["id"] for j in jobs if j["status"] not in FINISHED])
            for found_job in jobs:
                found_job["awaiting_approval"] = found_job["id"] in waiting
                found_job["audit"] = looks_like_audit(found_job["goal"]) and self.looks_like_audit_job(found_job["id"])
            return {"jobs": jobs, "awaiting_approval": waiting}
        job_id = self.resolve_job(job)
        found = self.index.job(job_id)
        assert found is not None
        waiting = self.awaiting_approval([job_id] if found["status"] not in FINISHED else [])
        view = {**found, "awaiting_approval": waiting.get(job_id), "tasks": self.index.tasks(job_id)}
        # The job's records are read only for a job with patches (their verdicts) or agent tasks (steers):
        # a job of shell tasks is read from the index alone.
        patches = [a for a, _, kind in self.index.artifacts(job_id) if kind == "patch"]
        agents = any(t["adapter"] != "shell" for t in view["tasks"])
        snapshot = self.refs.snapshot(job_id, self.index.job_tip(job_id)) if patches or agents else None
        reviews = self._reviews(snapshot, patches) if snapshot is not None else {}
        if reviews:
            view["reviews"] = reviews
        unverified = self._unverified_tasks(snapshot, reviews) if snapshot is not None and reviews else set()
        for task in view["tasks"]:
            task["unverified"] = task["id"] in unverified
        refused = self._refused_steers(snapshot) if snapshot is not None and agents else []
        if refused:
            view["refused"] = refused
        return view

    def _refused_steers(self, snapshot: Snapshot) -> list[dict]:
        """The steers waiting in the job that this clone did not make: data, never delivered to an agent here."""
        mine = self.ledger.trust.ops_made_here()
        waiting = [(None, g) for g in snapshot.state.steering] + [(t.spec.id, g) for t in snapshot.tasks() for g in t.steering]
        why = "a steer made elsewhere: its text never reaches an agent here"
        return [{"op": g.op, "kind": "steered", "task": task, "why": why} for task, g in waiting if g.op not in mine]

    def _unverified_tasks(self, snapshot: Snapshot, reviews: dict[str, list[dict]]) -> set[str]:
        """Tasks that succeeded with a patch gitswarm never judged (no checks, no auditor): done, not verified."""
        found = set()
        for task in snapshot.tasks():
            if task.state != "succeeded":
                continue
            patches = [p for p in map(snapshot.artifact, task.artifacts) if isinstance(p, Patch)]
            if patches and not any(v["producer"] == "gitswarm" for v in reviews.get(patches[-1].head, [])):
                found.add(task.spec.id)
        return found

    def looks_like_audit_job(self, job_id: str) -> bool:
        """Whether a job whose goal reads like the post-commit hook's has its shape too: one shell
        task `audit`. From the index alone: `status` reads no record (model/audit_names.py)."""
        tasks = self.index.tasks(job_id)
        return len(tasks) == 1 and tasks[0]["id"] == "audit" and tasks[0]["adapter"] == "shell"

    def awaiting_approval(self, jobs: list[str]) -> dict[str, str]:
        """Those of `jobs` that may not run here until approved, and why (pulled, say)."""
        index, trust = self.index, self.trust
        waiting = trust.untrusted(jobs) | (awaiting_person(index, trust) & set(jobs))
        return {job: why_not(index, trust, job) or "" for job in sorted(waiting)}

    def _reviews(self, snapshot: Snapshot, patches: list[str]) -> dict[str, list[dict]]:
        """Every verdict (gitswarm's, an auditor's, a person's) noted on the head of each of the job's patches."""
        notes = self.verdict_notes()
        found: dict[str, list[dict]] = {}
        for patch_id in patches:
            head = snapshot.artifact(patch_id, Patch).head
            found[head] = [verdict_view(w) for w in notes.weigh(head)]
        return found

    def verdict_notes(self) -> VerdictNotes:
        """The verdicts noted on commits, weighed as this clone sees them."""
        from gitswarm.store.verdicts import VerdictNotes  # deferred for start-up speed: only jobs with patches need it

        return VerdictNotes(self.repo, self.repo.workdir or self.repo.common_dir)

    def show(self, job: str) -> dict:
        """The job's summary once it has one; until then its tasks and artifacts."""
        view = self.status(job)
        rows = self.index.artifacts(view["id"])
        view["artifacts"] = []
        if not rows:  # nothing to read from the refs (the tip of a new job holds every task spec: ~10 ms per 10,000)
            return view
        snapshot = self.refs.snapshot(view["id"], self.index.job_tip(view["id"]))
        view["artifacts"] = _artifact_views(snapshot, rows)
        kinds = {a: kind for a, _, kind in rows}
        latest = next((a for a in reversed(snapshot.state.artifacts) if kinds.get(a) == "summary"), None)
        if latest is not None:
            summary = snapshot.artifact(latest, Summary)
            view["summary"] = {"id": latest, "text": summary.text, **summary.data}
        return view

    def log(self, job: str) -> dict:
        job_id = self.resolve_job(job)
        events = []
        for commit, op in self.refs.history(job_id):
            events.append(
                {
                    "commit": commit.oid,
                    "op": op.__struct_config__.tag,
                    "task": subject(op),
                    "clock": op.clock,
                    "at": op.at,
                    "actor": op.actor,
                    "record": codec.to_builtins(op),
                }
            )
        return {"id": job_id, "events": events}

    def artifacts(self, job: str) -> dict:
        job_id = self.resolve_job(job)
        rows = self.index.artifacts(job_id)
        if not rows:
            return {"id": job_id, "artifacts": []}
        return {"id": job_id, "artifacts": _artifact_views(self.refs.snapshot(job_id, self.index.job_tip(job_id)), rows)}

    def artifact(self, prefix: str) -> dict:
        check_prefix(prefix, "artifact")
        rows = self.index.artifact_ids(prefix)
        found = resolve_prefix(prefix, sorted({artifact_id_ for artifact_id_, _ in rows}), "artifact")
        job_id = next(job for artifact_id_, job in rows if artifact_id_ == found)
        artifact = self.refs.snapshot(job_id, self.index.job_tip(job_id)).artifact(found)
        return {"id": found, "job": job_id, "record": codec.to_builtins(artifact)}

    def task_output(self, ref: str, attempt: int | None = None, stderr: bool = False) -> dict:
        """The output of a task's last run or check (of attempt N, numbered as the task's
        attempts since its last retry): {"job", "task", "artifact", "kind", "attempt", "truncated", "data"}."""
        job_id, task_id = self.resolve_task(ref)
        snapshot = self.refs.snapshot(job_id, self.index.job_tip(job_id))
        task = snapshot.task(task_id)
        runs = [(a, found) for a in task.artifacts if isinstance(found := snapshot.artifact(a), (Run, Check))]
        if attempt is not None:
            runs = [(a, found) for a, found in runs if found.attempt == attempt]
        if not runs:
            which = f"no attempt {attempt}" if attempt is not None else f"no output yet (it is {task.state.value})"
            raise NotFound(f"task {job_id[:12]}/{task_id} has {which}")
        artifact_id, found = runs[-1]
        blob = found.stderr if stderr else found.stdout
        return {
            "job": job_id,
            "task": task_id,
            "artifact": artifact_id,
            "kind": "run" if isinstance(found, Run) else "check",
            "attempt": found.attempt,
            "truncated": blob.truncated if blob else 0,
            "data": self.repo.read_blob(blob.oid) if blob else b"",
        }

    def cancel(self, target: str, reason: str | None = None) -> Changed:
        job_id, task_id = self.resolve_target(target)
        change = self.ledger.cancel(job_id, task_id, self.clock(), reason)
        return Changed(job=job_id, task=task_id, changed=_changed(change.tasks))

    def retry(self, target: str) -> dict:
        job_id, task_id = self.resolve_task(target)
        change = self.ledger.retry(job_id, task_id, self.clock())
        return {"job": job_id, "task": task_id, "changed": _changed(change.tasks)}

    def release_dead(self, job_id: str | None = None) -> list[dict]:
        """Requeue, with no attempt used, the tasks whose worker died on this machine; what happened to each."""
        return recovery.release_dead(self.index, lambda: self.ledger, self.clock(), job_id)

    def recover(self) -> dict:
        """End the leases whose holder died on this machine, then those that ran out; what became of each task."""
        return recovery.recover(self.index, lambda: self.ledger, self.clock())

    def rebuild_index(self) -> dict:
        """Throw the index away and rebuild it from the refs."""
        self.index.destroy()
        self.index = Index(self.repo.common_dir)
        self._ledger = Ledger(self.refs, self.index)
        self.index.refresh(self.refs)
        jobs = self.index.job_ids()
        return {"jobs": len(jobs), "tasks": self.index.task_count(), "invalid": sorted(self.index.invalid), "path": str(self.index.path)}


def _open_repo(path: str | os.PathLike[str]) -> GitRepo:
    from gitswarm.store.git import open_repo  # deferred for start-up speed: reads of a fresh index never load pygit2

    return open_repo(path)


def _fresh_index(path: Path) -> tuple[Path, Index] | None:
    """The common dir and the index on disk, when the index holds every job at the tip its ref
    points to, both read without pygit2; None when that is not certain (then the repository is
    opened and the index refreshed, as for any command)."""
    common = reffiles.common_dir(path)
    if common is None or not index_path(common).exists():
        return None
    refs = reffiles.read_refs(common, layout.JOBS_PREFIX)  # before the index: a writer moves the ref first
    if refs is None:
        return None
    index = Index(common, create=False)
    if index.tips() != {name.removeprefix(layout.JOBS_PREFIX): tip for name, tip in refs.items()}:
        index.close()
        return None
    return common, index


def _artifact_views(snapshot: Snapshot, rows: Sequence[tuple[str, str | None, str]]) -> list[dict]:
    """(id, task, kind) rows of the index as `artifacts` prints them."""
    return [{"id": a, "kind": kind, "task": task, "summary": describe(snapshot.artifact(a))} for a, task, kind in rows]


def _changed(tasks: dict) -> dict[str, str]:
    return {task_id: task.state.value for task_id, task in sorted(tasks.items())}


def verdict_view(weighed: Weighed) -> dict:
    """A verdict as `status`, `show` and `audit` print it: what it says, and whether it counts here."""
    verdict = weighed.verdict
    return {
        "id": weighed.id,
        "reviewer": verdict.reviewer,
        "producer": verdict.producer,
        "accepted": verdict.accepted,
        "verdict": f"{verdict.status}/{verdict.integrity}/{verdict.contract}",
        "created": verdict.created,
        "note": verdict.evidence.get("note"),
        "provenance": weighed.provenance,
        "counted": weighed.counted,
    }
