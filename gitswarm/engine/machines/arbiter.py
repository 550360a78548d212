"""The remote as arbiter (`work --remote`): offer commits to it, adopt what it accepted, catch up with it.

Every machine of a swarm writes its claims, renewals, expiries and finishes
to a job's ref on one git remote, each as a commit built on the tip this
clone last saw there and pushed as a fast-forward. The remote's
receive-pack updates a ref only from the value the push was built on: that
is the compare-and-swap that decides between machines, and no server of
ours is needed. An offer the remote refused was built on a stale tip: the
job is fetched again, merged by the op-log rules, and the caller builds its
operation again on what it now knows. Only an accepted commit moves the
local job ref (by compare-and-swap, like every local write).
"""

from __future__ import annotations

import contextlib
import enum
import random
import re
import socket
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from gitswarm.engine.sharing.share import (
    PullReport,
    fetch_jobs,
    fetch_notes,
    integrate_jobs,
    integrate_tip,
    machine_keys,
    pull_limits,
    remote_key,
    transport,
)
from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Artifact
from gitswarm.model.errors import DiskFull, RefConflict, WorkFailed
from gitswarm.model.reducer import Change
from gitswarm.store import layout
from gitswarm.store.jobs import COMMITTER, Snapshot
from gitswarm.store.machine_key import MachineKey, allowed_line
from gitswarm.store.pulled_jobs import Intake
from gitswarm.store.pulled_notes import pull_notes
from gitswarm.store.remote import GitTransport
from gitswarm.store.remote_refusals import RemoteRefusals

_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")
# What a refused push says when another machine got there first (the client's check, or the server's
# compare-and-swap under its ref lock); anything else is a refusal that trying again will not change.
LOST_RACE = (
    "non-fast-forward", "fetch first", "stale info", "failed to update ref", "cannot lock ref", "failed to lock",
    "atomic transaction failed",  # receive-pack's ref transaction lost its compare-and-swap (an --atomic push)
)
# Of those, what only a push that landed first makes the remote say: the ref holds what this push was not built
# on. The others a stale lock or a full disk on the server says as well: a race only if the ref is seen to move.
CERTAIN_RACE = ("non-fast-forward", "fetch first", "stale info")
BACKOFF_BASE_SECONDS = 0.05
BACKOFF_CAP_SECONDS = 5.0


def host_name() -> str:
    """This machine's host name as records carry it: safe characters, at most 24 of them."""
    return _NOT_IN_NAME.sub("-", socket.gethostname()).strip("-._")[:24] or "host"


def machine_name(actor: str) -> str:
    """This clone's name as every machine of a swarm sees it in its workers' names: host, clone (actor)."""
    return f"{host_name()}.{actor[-6:]}"


def machine_owner(actor: str, worker: str) -> str:
    """A worker's name as every machine of a swarm sees it in the records: host, clone (actor), worker."""
    return f"{machine_name(actor)}.{worker}"


def machine_identity(swarm: Swarm) -> dict[str, str]:
    """This clone's machine key (made on first use): its public half, the allowed-signers line that lets
    it work jobs on another clone, and where the private half is."""
    key = MachineKey(swarm.repo.common_dir)
    return {"key": key.public, "allowed_signers": allowed_line(key.public, f"{host_name()}.{swarm.actor[-6:]}"), "path": str(key.path)}


def refusal(rejected: Sequence[str]) -> tuple[bool, str]:
    """Of the `!` lines of a refused `git push --porcelain`: whether another push got there first, and why it
    was refused. The collateral lines of an atomic push ("atomic push failed") say nothing of their own."""
    reasons = [line.rsplit("\t", 1)[-1] for line in rejected if "atomic push failed" not in line] or list(rejected)
    return any(race in reason for reason in reasons for race in LOST_RACE), reasons[0] if reasons else "refused"


class RemoteUnavailable(WorkFailed):
    """The remote did not answer (or kept moving); nothing was written anywhere."""


class RemoteRejected(WorkFailed):
    """The remote refused a push for a reason trying again will not change (a hook, a protected ref,
    no right to push); nothing was written anywhere."""


class RemoteRefused(WorkFailed):
    """The remote holds a history of the job that does not pass the checks every pull makes
    (forged, corrupt, from a newer gitswarm): nothing of it is taken, nothing more is offered."""


class Offered(enum.Enum):
    ACCEPTED = "accepted"
    MOVED = "moved"  # the remote's tip is not the one the offer was built on
    CONTENDED = "contended"  # a lock on the remote refused it: another push, or a lock a crash left (fetch to tell)
    UNREACHABLE = "unreachable"  # the remote did not answer (down, network, credentials)
    REJECTED = "rejected"  # the remote refused it for another reason (a hook, a protected ref, no push rights)


@dataclass
class Backoff:
    """Full-jitter exponential backoff: a random wait up to base·2ⁿ, at most `cap`, so that
    machines refused together do not come back together."""

    base: float = BACKOFF_BASE_SECONDS
    cap: float = BACKOFF_CAP_SECONDS
    failures: int = 0
    rng: random.Random = field(default_factory=random.Random)

    def next(self) -> float:
        """The wait before the next try (and count this failure)."""
        ceiling = min(self.cap, self.base * 2.0 ** min(self.failures, 64))  # (2.0**1024 overflows: an outage of hours)
        self.failures += 1
        return self.rng.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.failures = 0


class Arbiter:
    """One repository's link to the remote that arbitrates its jobs."""

    def __init__(self, swarm: Swarm, remote: str, sleep: Callable[[float], None] = time.sleep) -> None:
        self.swarm = swarm
        self.remote = remote
        self.key = remote_key(swarm, remote)  # BadInput for an unknown remote, before anything runs
        self.transport: GitTransport = transport(swarm)
        self.sleep = sleep
        self.said = ""  # what the remote last said when it did not answer
        self.refusals = RemoteRefusals(swarm.repo.common_dir, self.key)  # every process of this clone sees them
        self.refused: dict[str, str] = self.refusals.read()  # jobs whose history there this clone refused, and why
        self.machine = MachineKey(swarm.repo.common_dir)  # signs every commit this machine offers
        self.machines = machine_keys(swarm)  # the machines whose claims count here (None: any)

    def sync(self, jobs: Collection[str] | None = None) -> PullReport:
        """Fetch the jobs (all, or only `jobs`) and merge them into the local refs and index.
        WorkFailed when the remote cannot be reached."""
        rewound = fetch_jobs(self.swarm, self.remote, self.key, None if jobs is None else sorted(jobs), one_round_trip=True)
        report = PullReport(remote=self.remote, invalid=dict(rewound))
        integrate_jobs(self.swarm, self.key, report, jobs, self.machines, arbitrated=True)
        # Only a history actually taken clears a refusal: "unchanged" is also what a process sees that skipped its
        # fetch while another put a rewound job's shadow back to what was seen.
        taken = [*report.new, *report.updated, *report.merged]
        self.refused = self.refusals.update(report.invalid, [job for job in taken if job not in report.invalid])
        named = sorted(set(jobs or ()) & set(report.invalid))
        if named:
            raise RemoteRefused(f"job {named[0]}: what {self.remote} holds is refused here: {report.invalid[named[0]]}")
        return report

    def try_sync(self, jobs: Collection[str] | None = None) -> bool:
        """sync(), False (and `said` set) when the remote could not be reached; RemoteRefused as sync()."""
        try:
            self.sync(jobs)
        except (RemoteRefused, DiskFull):  # a full disk here is no unanswered remote
            raise
        except WorkFailed as exc:
            self.said = str(exc)
            return False
        return True

    def offer(self, job_id: str, tip: str, branch: tuple[str, str] | None = None, tasks: Collection[str] = ()) -> Offered:
        """Push `tip` as the new remote tip (a fast-forward) of the claim ref of each of `tasks` (the tasks
        whose leases its operations move), or of the job's ref when none, with an implement task's head
        (`branch`: task id, commit) in the same atomic push. Nothing local moves."""
        updates = {ref: tip for ref in self.refs_of(job_id, tasks)}
        expect: Mapping[str, str | None] = {}
        if branch is not None:
            ref = layout.branch_ref(job_id, branch[0])
            updates[ref] = branch[1]
            expect = {ref: self._remote_branch(job_id, branch[0])}
        shadow = self._shadow(layout.job_ref(job_id))
        before = None if tasks else self.swarm.repo.read_ref(shadow)
        done = self.transport.offer(self.remote, updates, expect)
        if done.ok:
            if not tasks:  # the job's own ref: the remote holds `tip` now, and a publish has nothing to push
                with contextlib.suppress(RefConflict):  # unless a fetch here moved the shadow meanwhile: it knows
                    self.swarm.repo.cas_ref(shadow, tip, before, "gitswarm: pushed")
            return Offered.ACCEPTED
        if not done.rejected:
            self.said = done.said or "no answer"
            return Offered.UNREACHABLE
        raced, reason = refusal(done.rejected)
        self.said = f"{self.remote} refused the push: {reason}"
        if not raced:
            return Offered.REJECTED
        return Offered.MOVED if any(race in reason for race in CERTAIN_RACE) else Offered.CONTENDED

    def refused_jobs(self) -> frozenset[str]:
        """The jobs no task of which is claimed through this remote: refused here, by any process of this clone."""
        self.refused = self.refusals.read()
        return frozenset(self.refused)

    @staticmethod
    def refs_of(job_id: str, tasks: Collection[str]) -> list[str]:
        """The remote refs an offer moves: the claim ref of each task, or the job's ref when none."""
        return [layout.claim_ref(job_id, task) for task in sorted(tasks)] or [layout.job_ref(job_id)]

    def seen(self, job_id: str, task_id: str | None = None, tasks: Collection[str] = ()) -> tuple[str | None, ...]:
        """What the refs an offer moves held on the remote as last fetched (and a task's pushed head)."""
        held = tuple(self.swarm.repo.read_ref(self._shadow(ref)) for ref in self.refs_of(job_id, tasks))
        return (*held, None if task_id is None else self._remote_branch(job_id, task_id))

    def _shadow(self, ref: str) -> str:
        """Where this clone keeps what the remote's `ref` (under refs/swarm/) held when last fetched."""
        return f"refs/gitswarm/shadow/{self.key}/{ref[len('refs/swarm/'):]}"

    def _remote_branch(self, job_id: str, task_id: str) -> str | None:
        """What the remote's branch of the task held when last fetched (None: it had none). Stale, the
        push is refused ("stale info"), the job and its branches fetched, and the finish offered again."""
        return self.swarm.repo.read_ref(self._shadow(layout.branch_ref(job_id, task_id)))

    def adopt(self, snapshot: Snapshot, tip: str, change: Change, artifacts: Collection[Artifact] = ()) -> None:
        """The remote accepted `tip` (built on `snapshot`): move the local ref to it, or merge it in when
        the local ref moved meanwhile."""
        swarm = self.swarm
        repo, index = swarm.repo, swarm.index
        where = layout.job_ref(snapshot.job_id)
        with index.immediate():
            current = repo.read_ref(where)
            if current == snapshot.tip:
                repo.cas_ref(where, tip, current, "gitswarm: accepted by the remote")
                index.record(snapshot.job, change.state, tip, change.tasks.values(), artifacts)
                return
        integrate_tip(swarm, snapshot.job_id, tip, self.machines)  # another process here moved it meanwhile: merge ours in

    def publish(self, jobs: Collection[str], attempts: int = 8) -> list[str]:
        """Push the local tips of `jobs` the remote does not hold yet (a new job, a summary, a cancel made
        here), merging what the remote holds first when it moved; returns the jobs pushed.
        WorkFailed when the remote does not answer."""
        pushed = []
        for job_id in sorted(jobs):
            for _ in range(attempts):
                tip = self.swarm.repo.read_ref(layout.job_ref(job_id))
                shadow = self.swarm.repo.read_ref(self._shadow(layout.job_ref(job_id)))
                if tip is None or tip == shadow:
                    break
                offered = self.offer(job_id, tip)
                if offered is Offered.ACCEPTED:
                    pushed.append(job_id)
                    break
                if offered not in (Offered.MOVED, Offered.CONTENDED):
                    raise WorkFailed(f"push to {self.remote} failed: {self.said}")
                self.sleep(Backoff(base=0.05).next())
                self.sync([job_id])
            else:
                raise WorkFailed(f"push to {self.remote}: job {job_id}: the remote kept moving")
        return pushed

    def publish_notes(self, attempts: int = 4) -> bool:
        """Push the verdict notes (`refs/notes/swarm`) when the remote lacks some, merging the remote's
        first when it moved (the pull's own notes intake); True when they are there. WorkFailed when
        the remote does not answer."""
        repo = self.swarm.repo
        for _ in range(attempts):
            ours = repo.read_ref(layout.NOTES_REF)
            if ours is None:
                return True
            done = self.transport.push(self.remote, [f"{layout.NOTES_REF}:{layout.NOTES_REF}"])
            if done.ok:
                return True
            if not done.rejected:
                raise WorkFailed(f"push to {self.remote} failed: {done.said or 'no answer'}")
            fetch_notes(self.swarm, self.remote, self.key)  # the notes alone: jobs go through sync's checks
            intake = Intake(repo, pull_limits(self.swarm), self.swarm.clock())
            who = (COMMITTER, f"{self.swarm.actor}@gitswarm")
            pull_notes(repo, repo.read_ref(f"refs/gitswarm/shadow/{self.key}/notes/swarm"), intake, who, self.swarm.clock())
        return False
