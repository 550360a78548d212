"""Push and pull of swarm state: the job refs and the verdict notes, with any git remote.

The git CLI does the transport (store/remote.py: credentials, ssh config,
atomic push); everything else goes through the store's GitRepo. A pull fetches into a shadow namespace, never
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
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gitswarm.engine.config import load_config
from gitswarm.engine.notify.notifier import Notifier
from gitswarm.engine.sharing.memory_pull import pull_memory
from gitswarm.engine.sharing.tip_intake import apply_plan, forget, held_here, plan_tip, remembered_jobs
from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Patch
from gitswarm.model.errors import BadInput, CorruptRecord, DiskFull, GitswarmError, WorkFailed
from gitswarm.model.ids import GENERATED_ID
from gitswarm.model.records import FINISHED
from gitswarm.store import layout
from gitswarm.store.fetch_gate import coalesced_fetch
from gitswarm.store.gitrepo import GitCommandError
from gitswarm.store.job_merge import check_tip
from gitswarm.store.jobs import COMMITTER
from gitswarm.store.machine_key import allowed_machines
from gitswarm.store.memory import MEMORY_REF
from gitswarm.store.pulled_jobs import Intake, PullLimits
from gitswarm.store.pulled_notes import pull_notes
from gitswarm.store.remote import GitTransport
from gitswarm.store.signing import SigningConfig
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
    invalid_notes: dict[str, str] = field(default_factory=dict)  # note path -> why its lines were dropped
    memory: str = "unchanged"  # the memory ref: unchanged, new, updated, merged, invalid or skipped
    invalid_memory: str | None = None  # why the pulled memory was refused
    # Refs that do not point at a commit (a blob or a tree pushed by hand): skipped by name, with a warning;
    # nothing gitswarm writes looks like that, so they are no job's history to refuse.
    skipped: dict[str, str] = field(default_factory=dict)

    def view(self) -> dict:
        return {
            "remote": self.remote, "new": self.new, "updated": self.updated, "merged": self.merged,
            "unchanged": self.unchanged, "invalid": self.invalid, "notes": self.notes,
            "invalid_notes": self.invalid_notes, "memory": self.memory, "invalid_memory": self.invalid_memory,
            "skipped": self.skipped,
        }


def remote_key(swarm: Swarm, remote: str) -> str:
    """The name state from `remote` is kept and trusted under: the remote's name, or a
    digest of a URL or path given directly. Anything else is bad input."""
    names = transport(swarm).remote_names()
    if remote in names:
        return remote
    if not remote or remote.startswith("-") or "\0" in remote:
        raise BadInput(f"invalid remote {remote!r}")
    if not _looks_like_url(remote) and not Path(remote).expanduser().exists():
        known = ", ".join(names) or "none"
        raise BadInput(f"no remote named {remote!r} (remotes here: {known}) and no repository at that path")
    return "url-" + hashlib.sha256(remote.encode(errors="surrogateescape")).hexdigest()[:12]  # a path's own bytes


def transport(swarm: Swarm) -> GitTransport:
    """Fetch and push for the swarm's repository (store/remote.py)."""
    return GitTransport(swarm.repo.workdir or swarm.repo.common_dir)


def _looks_like_url(remote: str) -> bool:
    """A URL git understands (`scheme://...`, or scp-like `host:path`), as opposed to a path."""
    if "://" in remote:
        return True
    host, colon, _ = remote.partition(":")
    return bool(colon) and "/" not in host


def _shadow(key: str) -> str:
    if not _REMOTE_NAME.fullmatch(key):
        raise BadInput(f"remote name {key!r} cannot name a ref namespace")
    return f"{SHADOW}{key}/"


def fetch_notes(swarm: Swarm, remote: str, key: str) -> None:
    """Fetch the remote's verdict notes alone into its shadow namespace; WorkFailed if it fails."""
    prefix = _shadow(key)
    try:
        transport(swarm).fetch(remote, [f"+{layout.NOTES_REF}*:{prefix}notes/swarm*"])
    except GitCommandError as exc:
        raise WorkFailed(f"fetch from {remote} failed: {exc}") from None


def fetch(swarm: Swarm, remote: str, key: str) -> None:
    prefix = _shadow(key)
    try:
        transport(swarm).fetch(remote, [
            f"+{layout.JOBS_PREFIX}*:{prefix}jobs/*", f"+{layout.CLAIMS_PREFIX}*:{prefix}claims/*",
            f"+{layout.NOTES_REF}*:{prefix}notes/swarm*", f"+{MEMORY_REF}*:{prefix}memory*",
            f"+{layout.BRANCHES_PREFIX}*:{prefix}branches/*", f"+{layout.PATCHES_PREFIX}*:{prefix}patches/*",
        ])
    except GitCommandError as exc:
        raise WorkFailed(f"fetch from {remote} failed: {exc}") from None


def pull(swarm: Swarm, remote: str) -> PullReport:
    """Fetch into the shadow namespace, check every job there, then move the live refs.

    Checking and merging happen outside the index's write lock (workers keep
    renewing their leases meanwhile); the lock is taken per job, only for its
    ref's compare-and-swap and the index update. The origin of every new job
    is on disk before any live ref moves, so a pull killed at any point never
    leaves a pulled job that looks like this clone's own.
    """
    key = remote_key(swarm, remote)
    prefix = _shadow(key)
    seen = {**swarm.repo.list_refs(prefix + "jobs/"), **swarm.repo.list_refs(prefix + "claims/")}
    fetch(swarm, remote, key)
    report = PullReport(remote=remote)
    report.invalid.update(keep_what_was_seen(swarm, prefix, seen))
    repo = swarm.repo
    integrate_jobs(swarm, key, report, machines=machine_keys(swarm))
    announce_approvals(swarm, report.new)
    who = (COMMITTER, f"{swarm.actor}@gitswarm")
    intake = Intake(repo, pull_limits(swarm))
    report.notes, report.invalid_notes = pull_notes(repo, repo.read_ref(f"{prefix}notes/swarm"), intake, who, swarm.clock())
    memory = repo.read_ref(f"{prefix}memory")
    why = not_a_commit(swarm, memory) if memory is not None else None
    if why is not None:
        report.memory, report.skipped[MEMORY_REF] = "skipped", why
    else:
        report.memory, report.invalid_memory = pull_memory(swarm, memory, intake)
    return report


def keep_what_was_seen(swarm: Swarm, prefix: str, seen: dict[str, str]) -> dict[str, str]:
    """Jobs whose history on the remote no longer holds what this clone last fetched of it (rewound by a
    forced push): refused by name, and their shadow refs put back to what was seen, so that nothing of the
    rewound history is replayed here, now or at the next pull. {job: why}."""
    repo, refused = swarm.repo, {}
    for ref, before in seen.items():
        now = repo.read_ref(ref)
        if now is None and ref.startswith(prefix + "claims/") and repo.read_ref(f"{prefix}jobs/{shadowed_job(prefix, ref)}"):
            # A task's claim ref gone while its job is still there: gitswarm never deletes one, and with it gone the
            # task's compare-and-swap would start again from nothing (a claim of a token already run).
            repo.cas_ref(ref, before, None, "gitswarm: keep what was seen of a deleted claim ref")
            refused[shadowed_job(prefix, ref)] = (
                f"the remote's claim ref of task {ref.rsplit('/', 1)[-1]} was deleted; refused (set receive.denyDeletes "
                "on the shared remote)"
            )
            continue
        if now is None or now == before:
            continue  # gone from the remote (its ref deleted), or unchanged
        try:
            moved_on = repo.is_ancestor(before, now)
        except CorruptRecord:
            moved_on = False
        if moved_on:
            continue
        job = shadowed_job(prefix, ref)
        repo.cas_ref(ref, before, now, "gitswarm: keep what was seen of a rewound remote")
        refused[job] = (
            f"the remote's history was rewound: it no longer holds {before[:12]}, which this clone saw; refused "
            "(set receive.denyNonFastForwards on the shared remote)"
        )
    return refused


def shadowed_job(prefix: str, ref: str) -> str:
    """The job a shadow ref (`<prefix>jobs/<job>` or `<prefix>claims/<job>/<task>`) is of."""
    return ref[len(prefix):].split("/")[1]


def announce_approvals(swarm: Swarm, jobs: list[str]) -> None:
    """One approval_needed notification for the pulled jobs that wait for a person (unfinished, not approved)."""
    waiting = swarm.ledger.untrusted_jobs()
    unfinished = [job for job in jobs if job in waiting and (found := swarm.index.job(job)) is not None and found["status"] not in FINISHED]
    if unfinished:
        Notifier.of(swarm).approvals(swarm, unfinished)


def not_a_commit(swarm: Swarm, oid: str) -> str | None:
    """Why a pulled ref is no history at all (it points at a blob or a tree), or None for a commit."""
    try:
        swarm.repo.commit_info(oid)
    except CorruptRecord as exc:
        return str(exc)
    return None


def pull_limits(swarm: Swarm) -> PullLimits:
    caps = load_config(swarm.repo.workdir).pull
    return PullLimits(max_record=caps.max_record, max_pull=caps.max_pull)


def machine_keys(swarm: Swarm) -> frozenset[str] | None:
    """The machines whose claims count here: those the allowed-signers file lists (None: any machine's key)."""
    workdir = swarm.repo.workdir or swarm.repo.common_dir
    return allowed_machines(SigningConfig.read(workdir).allowed)


def fetch_jobs(
    swarm: Swarm, remote: str, key: str, jobs: Sequence[str] | None = None, one_round_trip: bool = False,
) -> dict[str, str]:
    """Fetch the job refs (all, or only `jobs`) of `remote`, and their tasks' pushed heads, into its shadow
    namespace; WorkFailed if it fails. The jobs whose remote history was rewound, refused: {job: why}.
    Fetching every job prunes the shadow of jobs the remote no longer has; fetching some leaves the others.
    `one_round_trip`: a fetch of `work --remote`'s (store/remote.py, ONE_ROUND_TRIP)."""
    prefix = _shadow(key)
    held = {**swarm.repo.list_refs(prefix + "jobs/"), **swarm.repo.list_refs(prefix + "claims/")}
    seen = {ref: tip for ref, tip in held.items() if jobs is None or shadowed_job(prefix, ref) in jobs}
    names = ["*"] if jobs is None else list(jobs)
    specs = [f"+{layout.JOBS_PREFIX}{name}:{prefix}jobs/{name}" for name in names]
    # The claim refs of each task: its lease history while machines work it (docs/many-machines.md).
    specs += [f"+{layout.CLAIMS_PREFIX}*:{prefix}claims/*"] if jobs is None else [
        f"+{layout.CLAIMS_PREFIX}{name}/*:{prefix}claims/{name}/*" for name in names]
    # With them, the heads their implement tasks pushed (a follow-up starts from one; verify needs it).
    specs += [f"+{layout.BRANCHES_PREFIX}{name}{'' if name == '*' else '/*'}:{prefix}branches/{name}{'' if name == '*' else '/*'}"
              for name in names]
    try:
        coalesced_fetch(swarm.repo.common_dir, key, jobs, lambda: transport(swarm).fetch(remote, specs, one_round_trip))
    except GitCommandError as exc:
        raise WorkFailed(f"fetch from {remote} failed: {exc}") from None
    return keep_what_was_seen(swarm, prefix, seen)


def integrate_jobs(
    swarm: Swarm, key: str, report: PullReport, jobs: Collection[str] | None = None, machines: frozenset[str] | None = None,
    arbitrated: bool = False,
) -> None:
    """Move the live job refs to hold what the shadow of remote `key` holds (all jobs, or only `jobs`):
    checked as hostile input, then adopted, fast-forwarded or merged, each by compare-and-swap.
    `machines`: the machine keys whose claims count (machine_keys()); `arbitrated`: taken through
    `work --remote`, where every honest claim names its machine key."""
    prefix = _shadow(key)
    repo = swarm.repo
    intake = Intake(repo, pull_limits(swarm), swarm.clock(), machines, require_keys=arbitrated)
    plans = []
    for ref, theirs in sorted(repo.list_refs(prefix + "jobs/").items()):
        job_id = ref[len(prefix + "jobs/"):]
        if (jobs is not None and job_id not in jobs) or job_id in report.invalid:  # refused already (rewound)
            continue
        why = not_a_commit(swarm, theirs)
        if why is not None:  # named and left aside: the good jobs beside it are pulled and run
            report.skipped[layout.job_ref(job_id) if GENERATED_ID.fullmatch(job_id) else ref] = why
            continue
        try:
            plans.append(plan_tip(swarm, intake, job_id, theirs))
        except DiskFull:
            raise  # this clone's disk, not the job: nothing is refused for it
        except GitswarmError as exc:  # the job is refused and named; the rest of the pull goes on
            report.invalid[job_id] = str(exc)
    adopted = {plan.job: key for plan in plans if plan.outcome == "new"}
    if adopted:
        Trust(repo.common_dir).adopted(adopted)
    for plan in plans:
        try:
            outcome = apply_plan(swarm, intake, plan)
        except DiskFull:
            raise
        except GitswarmError as exc:
            report.invalid[plan.job] = str(exc)
            continue
        getattr(report, outcome).append(plan.job)
    _integrate_claims(swarm, intake, prefix, report, jobs)


def _integrate_claims(swarm: Swarm, intake: Intake, prefix: str, report: PullReport, jobs: Collection[str] | None) -> None:
    """Merge each task's claim ref (its lease history on the remote) into its job's live ref, one after the
    other, each checked as hostile input as a job's own history is; a job with one that fails is refused."""
    repo = swarm.repo
    claims: dict[str, list[tuple[str, str]]] = {}
    for ref, theirs in repo.list_refs(prefix + "claims/").items():
        claims.setdefault(shadowed_job(prefix, ref), []).append((ref, theirs))
    for gone in [job for job in remembered_jobs(repo) if job not in claims]:  # jobs no machine claims in now
        forget(repo, gone)
    for job_id, tips in sorted(claims.items()):
        tip = repo.read_ref(layout.job_ref(job_id))
        if tip is None:  # a job ref gone (or not here yet) holds nothing: what comes back is merged anew
            forget(repo, job_id)
            continue  # a claim of a job this clone does not hold (yet) is taken with the job
        if (jobs is not None and job_id not in jobs) or job_id in report.invalid:
            continue
        try:
            known = held_here(repo, job_id, tip)
        except CorruptRecord as exc:  # the local ref names no commit: this job is refused, the others go on
            report.invalid[job_id] = str(exc)
            continue
        good: dict[str, str] = {}
        for ref, theirs in tips:
            if theirs in known:
                continue
            why = not_a_commit(swarm, theirs)
            if why is not None:
                report.skipped[ref] = why
            else:
                good.setdefault(theirs, ref)
        # A finish and the next claim share one commit, and a machine's later pushes descend from its earlier
        # ones: each tip merged once, the newest first, so that the older ones it holds are found merged already.
        for theirs in sorted(good, key=lambda oid: (-repo.commit_info(oid).time, oid)):
            try:
                outcome = apply_plan(swarm, intake, plan_tip(swarm, intake, job_id, theirs, incremental=True), incremental=True)
            except DiskFull:
                raise
            except GitswarmError as exc:
                report.invalid[job_id] = str(exc)
                break
            known.add(theirs)
            if outcome != "unchanged" and not any(job_id in getattr(report, kind) for kind in ("new", "updated", "merged")):
                getattr(report, outcome).append(job_id)


def integrate_tip(swarm: Swarm, job_id: str, theirs: str, machines: frozenset[str] | None = None) -> str:
    """Bring one commit this process built, which the remote accepted, into the live ref: fast-forward or
    merge (`work --remote`: another process here moved the ref meanwhile)."""
    # Built and signed by this process: what it adds is not checked again as pulled input.
    intake = Intake(swarm.repo, pull_limits(swarm), swarm.clock(), machines, require_keys=True, made_here=frozenset({theirs}))
    return apply_plan(swarm, intake, plan_tip(swarm, intake, job_id, theirs, incremental=True), incremental=True)


def check_history(swarm: Swarm, job_id: str, theirs: str, ours: str | None) -> None:
    """Refuse pulled history that does not decode or breaks an invariant: every new commit,
    operation and record checked as hostile input, and the tip recording exactly the
    canonical replay of its operations (every task record and the state, by blob id)."""
    Intake(swarm.repo).check_job(job_id, theirs, ours)
    check_tip(swarm.repo, job_id, theirs)


def patch_heads(swarm: Swarm, key: str) -> list[str]:
    """A refspec for each patch whose head is here: `refs/swarm/patches/<patch id>` names its head, in the
    same atomic push as the state, so another clone can verify, review and merge it with no git by hand. One
    ref per patch never moves: it is never forced. Those the remote held at the last fetch are left out
    (no record read, no refspec on the command line)."""
    held = {ref.rsplit("/", 1)[-1] for ref in swarm.repo.list_refs(f"{_shadow(key)}patches/")}
    specs = []
    for job_id, patch_ids in swarm.index.patches().items():
        wanted = [patch_id for patch_id in patch_ids if patch_id not in held]
        if not wanted:
            continue
        snapshot = swarm.refs.snapshot(job_id, swarm.index.job_tip(job_id))
        for patch_id in wanted:
            head = snapshot.artifact(patch_id, Patch).head
            if swarm.repo.has_object(head):
                specs.append(f"{head}:{layout.patch_ref(patch_id)}")
    return specs


def push(swarm: Swarm, remote: str) -> dict:
    """Push every job ref, the patches' heads and the notes, never forced; pull and merge when the remote moved."""
    key = remote_key(swarm, remote)  # an unknown remote is bad input, before anything runs
    refspecs = [f"{layout.JOBS_PREFIX}*:{layout.JOBS_PREFIX}*"]
    pulls = []
    for attempt in range(PUSH_ATTEMPTS):
        specs = refspecs + patch_heads(swarm, key)
        specs += [f"{layout.NOTES_REF}:{layout.NOTES_REF}"] if swarm.repo.read_ref(layout.NOTES_REF) else []
        specs += [f"{MEMORY_REF}:{MEMORY_REF}"] if swarm.repo.read_ref(MEMORY_REF) else []
        done = transport(swarm).push(remote, specs)
        if not done.ok:
            if not done.remote_moved or attempt == PUSH_ATTEMPTS - 1:
                said = done.rejected[0] if done.rejected else (done.said or "no output")
                raise WorkFailed(f"push to {remote} failed: {said}")
            pulled = pull(swarm, remote)  # the remote moved: merge its state, then try again
            pulls.append(pulled.view())
            if pulled.invalid or pulled.invalid_memory:
                refused = {**pulled.invalid, **({"memory": pulled.invalid_memory} if pulled.invalid_memory else {})}
                named = "; ".join(f"{job}: {why}" for job, why in sorted(refused.items()))
                raise WorkFailed(f"push to {remote}: the remote holds state that cannot be merged ({named})")
            continue
        return {"remote": remote, "pushed": sorted(done.pushed), "attempts": attempt + 1, "pulls": pulls}
    raise WorkFailed(f"push to {remote}: the remote kept moving")
