"""What a pull checks of a job before anything local changes.

Every commit the pulled history adds is read once: its size is charged
against the caps (per record and per pull), its operations decoded and
checked as hostile input (model/validate.py), and op ids that come back
with a different body refused. The pulled tip's tree may hold only the
entries gitswarm writes, and every artifact record and output blob this
clone does not have yet is checked too: artifact records must hash to
their id and decode to a record of this job. What is checked here is what
then reaches the live refs, the index and the summaries; the canonical
replay of the operations (store/oplog.py) is checked separately.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from gitswarm.model import codec
from gitswarm.model.artifacts import Artifact
from gitswarm.model.errors import CorruptRecord
from gitswarm.model.ids import ARTIFACT_ID
from gitswarm.model.limits import MAX_PULL, MAX_PULLED_RECORD
from gitswarm.model.ops import JobCreated, LeaseExpired, LeaseRenewed, Op, TaskClaimed, TaskFinished
from gitswarm.model.validate import check_artifact, check_op
from gitswarm.store import layout, sshsig
from gitswarm.store.gitrepo import CommitInfo, GitRepo
from gitswarm.store.job_merge import LOCAL_OPS
from gitswarm.store.jobs import Snapshot
from gitswarm.store.oplog import parse_op_lines

_FANS = (layout.TASKS_FANS, layout.ARTIFACTS_FANS, layout.BLOBS_FANS)
FUTURE_SLACK = 3600.0  # seconds an op may be dated ahead of this clone's clock (clocks drift; this is generous)
EXPIRY_SLACK = 60.0  # seconds an expiry may be dated before the deadline this clone saw (the machines' skew)
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class PullLimits:
    """Caps on what one pull may bring in, in bytes (`[pull]` in .gitswarm.toml)."""

    max_record: int = MAX_PULLED_RECORD  # one record: an operation's commit, an artifact record
    max_pull: int = MAX_PULL  # everything one pull reads: commits, records, output blobs


class Intake:
    """The checks of one pull, charging every byte read against its caps."""

    def __init__(
        self, repo: GitRepo, limits: PullLimits = PullLimits(), now: float | None = None, machines: frozenset[str] | None = None,
        require_keys: bool = False, made_here: frozenset[str] = frozenset(),
    ) -> None:
        self.repo = repo
        self.limits = limits
        self.now = now  # this clone's clock: an op dated past it (by more than FUTURE_SLACK) is refused
        self.machines = machines  # the machine keys whose claims count (None: any key; store/machine_key.py)
        # A history taken through `work --remote` (or with machines listed): every claim in it names its key.
        self.require_keys = require_keys or machines is not None
        self.spent = 0
        self.parsed: dict[str, list[tuple[str, Op]]] = {}  # commit id -> its (line, op)s, decoded once
        # Commits this process built and signed itself (an offer the remote accepted, merged in after another
        # process here moved the ref): no input of anyone else's, so a history beyond ours of these alone is
        # not checked again.
        self.made_here = made_here

    def charge(self, size: int, where: str, record: bool = True) -> None:
        if record and size > self.limits.max_record:
            raise CorruptRecord(f"{where}: {size} bytes, over the cap of {self.limits.max_record} per record ([pull] max_record)")
        self.spent += size
        if self.spent > self.limits.max_pull:
            raise CorruptRecord(f"{where}: this pull passed its cap of {self.limits.max_pull} bytes ([pull] max_pull)")

    def check_job(self, job_id: str, theirs: str, ours: str | None, walked: list[CommitInfo] | None = None) -> list[CommitInfo]:
        """Refuse (CorruptRecord) pulled history of `job_id` that is not well formed; the
        commits it brings (oldest first), for the merge or the replay to reuse. `walked`: those
        commits, parents first, when the caller walked them already (store/oplog.py, commits_beyond)."""
        repo, where = self.repo, layout.job_ref(job_id)
        self.parsed = {}  # one job's at a time: a pull of thousands of jobs need not hold them all
        commits = walked if walked is not None else list(repo.walk(theirs, hide=ours))
        if ours is not None and commits and all(commit.oid in self.made_here for commit in commits):
            return commits  # before the local job is read: none of it is needed
        local = Snapshot(repo, job_id, ours) if ours is not None else None
        task_ids: frozenset[str] | None = self._task_ids(where, ours) if ours is not None else None
        job_blob = repo.tree_entry(local.tree, layout.JOB_PATH) if local is not None else None
        for commit in commits:
            at = f"{where}@{commit.oid[:12]}"
            self.charge(len(commit.message.encode()), at)
            if len(commit.parents) > 2:
                raise CorruptRecord(f"{at}: a commit with {len(commit.parents)} parents")
            lines = self.parsed[commit.oid] = parse_op_lines(commit, where, Op)
            ops = [op for _, op in lines]
            for n, op in enumerate(ops):
                if isinstance(op, JobCreated):
                    if local is not None or commit.parents or n or len(ops) > 1 or task_ids is not None:
                        raise CorruptRecord(f"{at}: job_created anywhere but alone in the job's first commit")
                    task_ids = frozenset(spec.id for spec in op.tasks)
                    job_blob = repo.blob_id(codec.encode(op.job))
                elif task_ids is None:
                    raise CorruptRecord(f"{where}: history does not start with this job's job_created")
                check_op(op, job_id, task_ids, f"{at}:{op.id}")
        # The pulled history's own claims: an expiry of one of those is of a lease this clone never saw
        # (another clone's claim may carry the same token as this clone's own).
        brought = [(f"{where}@{c.oid[:12]}", op) for c in commits for _, op in self.parsed[c.oid]]
        claimed_there = {(op.task, op.token) for _, op in brought if isinstance(op, TaskClaimed)}
        for at, op in brought:
            self._check_against_here(op, local, claimed_there, f"{at}:{op.id}")
        self._check_signers(commits, local, where, ours)
        if task_ids is None or job_blob is None:
            raise CorruptRecord(f"{where}: history does not start with this job's job_created")
        self._check_tree(job_id, theirs, local, task_ids, job_blob)
        return commits

    def _check_against_here(self, op: Op, local: Snapshot | None, claimed_there: set[tuple[str, int]], where: str) -> None:
        """What this clone can know of a pulled lease op: it is not dated in the future, and an expiry of a
        lease this clone saw comes after that lease's deadline (a forged expiry frees a live lease)."""
        if self.now is not None and op.at > self.now + FUTURE_SLACK:
            raise CorruptRecord(f"{where}: dated {op.at - self.now:.0f} s in the future")
        if not isinstance(op, LeaseExpired) or local is None or op.task not in local.task_ids():
            return
        if (op.task, op.token) in claimed_there:  # a claim the pulled history made itself
            return
        seen = local.task(op.task)
        if seen.claims == op.token and seen.lease_expires is not None and op.at + EXPIRY_SLACK < seen.lease_expires:
            raise CorruptRecord(
                f"{where}: expires lease {op.token} of {op.task} at {op.at:.0f}, before its deadline {seen.lease_expires:.0f} as this clone saw it"
            )

    def _check_signers(self, commits: list[CommitInfo], local: Snapshot | None, where: str, ours: str | None) -> None:
        """Which machine wrote a lease op rests on the commit's signature, never on a field a forger copies:
        a claim that names a machine key is in a commit that key signed (and, where the allowed-signers file
        names machines, the key is one of them); a renewal or finish of that lease, and an expiry of it
        before its deadline (by this clone's clock too), are in commits the same key signed. A lease is
        claimed once: a second claim of a (task, token) that a keyed claim holds, here or in the pull, is
        refused (the remote's compare-and-swap never lets an honest one through). With `require_keys`
        (a history taken through `work --remote`), every claim names its key."""
        holders: dict[tuple[str, int], SeenLease] = {}  # (task, token) -> what is known of that lease, as the pull goes
        seen: set[str] = set()
        # A walk that hides `ours` may still yield commits `ours` holds, where commit times do not rise along the
        # history (machines' clocks differ; libgit2 stops marking what `ours` reaches by date): an op found in
        # `ours` was judged when it came and is passed over. Read only when an op would be refused.
        held: list[frozenset[str]] = []
        for commit in commits:
            signer: list[str | None] = []  # computed once, when an op needs it
            for _, op in self.parsed[commit.oid]:
                if not isinstance(op, (TaskClaimed, LeaseRenewed, TaskFinished, LeaseExpired)) or op.id in seen:
                    continue
                seen.add(op.id)
                try:
                    self._check_signed(op, commit, signer, holders, local, where)
                except CorruptRecord:
                    if not held:
                        held.append(self._op_ids(where, ours))
                    if op.id not in held[0]:
                        raise

    def _check_signed(
        self, op: Op, commit: CommitInfo, signer: list[str | None], holders: dict[tuple[str, int], SeenLease],
        local: Snapshot | None, where: str,
    ) -> None:
        """One lease op of a pulled commit, as _check_signers says; CorruptRecord when it may not count."""
        assert isinstance(op, (TaskClaimed, LeaseRenewed, TaskFinished, LeaseExpired))
        at = f"{where}@{commit.oid[:12]}:{op.id}"
        if not signer:
            signer.append(self._signer(commit.oid))
        lease = holders.get((op.task, op.token))
        if lease is None:
            lease = holders[(op.task, op.token)] = _lease_here(local, op.task, op.token)
        if isinstance(op, TaskClaimed):
            self._check_claim(op, signer[0], lease, at)
            holders[(op.task, op.token)] = SeenLease(claimed=True, key=op.key, deadline=op.lease_expires)
            return
        if lease.key is None or signer[0] == lease.key:
            if isinstance(op, LeaseRenewed):
                lease.deadline = op.lease_expires
            return
        if isinstance(op, LeaseExpired) and self._lapsed(op, lease.deadline):
            return  # a lapsed lease: any machine may expire it
        raise CorruptRecord(
            f"{at}: {op.__struct_config__.tag} of lease {op.token} of {op.task}, held by machine key {_short(lease.key)}, "
            f"in a commit {_signed_by(signer[0])}"
        )

    def _op_ids(self, where: str, ours: str | None) -> frozenset[str]:
        """The ids of every operation the local history `ours` of the job at `where` holds (what this process
        keeps of it)."""
        if ours is None:
            return frozenset()
        return frozenset(LOCAL_OPS.at(self.repo, where, ours))

    def _task_ids(self, where: str, ours: str) -> frozenset[str]:
        """The tasks of the local job: those its job_created made (no operation adds one), read from the
        operations this process keeps of its history rather than from every fan of its tree."""
        for _, op in LOCAL_OPS.at(self.repo, where, ours).values():
            if isinstance(op, JobCreated):
                return frozenset(spec.id for spec in op.tasks)
        raise CorruptRecord(f"{where}: the local history holds no job_created")

    def _check_claim(self, op: TaskClaimed, signer: str | None, lease: SeenLease, at: str) -> None:
        if lease.claimed and (op.key is not None or lease.key is not None):
            raise CorruptRecord(f"{at}: a second claim of lease {op.token} of {op.task}, which a machine's signed claim holds")
        if op.key is None:
            if self.require_keys:
                raise CorruptRecord(f"{at}: a claim naming no machine key, in a history taken through the remote that arbitrates it")
            return
        if signer != op.key:
            raise CorruptRecord(f"{at}: a claim naming machine key {_short(op.key)} in a commit {_signed_by(signer)}")
        if self.machines is not None and op.key not in self.machines:
            raise CorruptRecord(f"{at}: a claim by machine key {_short(op.key)}, which the allowed-signers file does not list")

    def _lapsed(self, op: LeaseExpired, deadline: float) -> bool:
        """Whether an expiry not signed by the holder ends a lease that ran out: dated after its deadline (less
        the machines' clock slack) and, by this clone's own clock, past it (a forger writes `at`, not our clock)."""
        return op.at + EXPIRY_SLACK >= deadline and (self.now is None or self.now >= deadline)

    def _signer(self, oid: str) -> str | None:
        """The machine key that signed commit `oid` (None: unsigned, or a signature that does not verify)."""
        signed = self.repo.commit_signature(oid)
        if signed is None:
            return None
        try:
            return sshsig.verify(signed[0], signed[1])
        except sshsig.BadSignature:
            return None

    def _check_tree(self, job_id: str, theirs: str, local: Snapshot | None, task_ids: frozenset[str], job_blob: str) -> None:
        repo, where = self.repo, layout.job_ref(job_id)
        tree = repo.commit_info(theirs).tree
        ours_tree = local.tree if local is not None else None
        held = {name: oid for name, oid, _ in repo.tree_items(ours_tree)} if ours_tree is not None else {}  # read once
        for name, oid, is_tree in repo.tree_items(tree):
            at = f"{where}:{name}"
            if name == layout.JOB_PATH and not is_tree:
                if oid != job_blob:
                    raise CorruptRecord(f"{at}: the record is not the job its job_created made")
                continue
            if name == layout.STATE_PATH and not is_tree:
                continue  # compared with the replay of the operations
            fan = next((f for f in _FANS if name.startswith(f)), None)
            if fan is None or not is_tree or len(name) != len(fan) + 2 or not _HEX.issuperset(name[len(fan):]):
                raise CorruptRecord(f"{at}: not an entry gitswarm writes")
            if fan == layout.TASKS_FANS:
                continue  # every task record is compared with the replay
            ours_fan = held.get(name)
            if ours_fan == oid:
                continue  # nothing new under it
            known = {n: o for n, o, _ in repo.tree_items(ours_fan)} if ours_fan is not None else {}
            for entry, entry_oid, entry_is_tree in repo.tree_items(oid):
                if known.get(entry) == entry_oid:
                    continue
                if entry_is_tree or not entry.startswith(name[len(fan):]):
                    raise CorruptRecord(f"{at}/{entry}: not an entry gitswarm writes")
                if fan == layout.ARTIFACTS_FANS:
                    self._check_artifact(job_id, entry, entry_oid, task_ids, f"{at}/{entry}")
                else:
                    self._check_blob(entry, entry_oid, f"{at}/{entry}")

    def _check_artifact(self, job_id: str, name: str, oid: str, task_ids: Iterable[str], where: str) -> None:
        if not ARTIFACT_ID.fullmatch(name):
            raise CorruptRecord(f"{where}: not an artifact id")
        data = self.repo.read_blob(oid)
        self.charge(len(data), where)
        if hashlib.sha256(data).hexdigest() != name:
            raise CorruptRecord(f"{where}: the record does not hash to its id")
        check_artifact(codec.decode(data, Artifact, where), job_id, task_ids, where)

    def _check_blob(self, name: str, oid: str, where: str) -> None:
        if name != oid:
            raise CorruptRecord(f"{where}: an output blob stored under another name")
        self.charge(len(self.repo.read_blob(oid)), where, record=False)


@dataclass
class SeenLease:
    """What a pull knows of one lease (task, token) as it goes: whether a claim of it was seen (here or earlier in
    the pull), the machine key that claim named, and the lease's deadline as its holder last set it."""

    claimed: bool
    key: str | None = None
    deadline: float = 0.0


def _lease_here(local: Snapshot | None, task_id: str, token: int) -> SeenLease:
    """Lease `token` of a task as this clone saw it (its key and deadline when it is the task's current one)."""
    task = local.task(task_id) if local is not None else None  # a task check_op found in the job
    if task is None or task.claims < token:
        return SeenLease(claimed=False)
    if task.claims > token:
        return SeenLease(claimed=True)
    return SeenLease(claimed=True, key=task.holder_key, deadline=task.lease_expires or 0.0)


def _short(key: str) -> str:
    return f"...{key[-12:]}"


def _signed_by(signer: str | None) -> str:
    return "it did not sign (unsigned)" if signer is None else f"signed by another key ({_short(signer)})"
