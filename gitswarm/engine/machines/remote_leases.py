"""Leases across machines: the ledger's transitions, each accepted by the remote before it counts.

A claim, a renewal, an expiry and a finish are built on the job's tip as
this clone last saw it on the remote, and offered to the remote
(engine/machines/arbiter.py); only once the remote accepted the commit does the
local ref move and the worker act on it: no agent starts before its claim
is on the remote. Refused, the job is fetched and merged, and the
operation is built again, which checks it again: a task someone else
claimed meanwhile is not claimed twice, a finish whose lease was expired
elsewhere raises LeaseLost as it does locally.

The lease lives in the task record (`lease_expires`): the task's timeout
plus a grace, at most the worker's lease length; a task that may run longer
pushes a renewal when a third of its lease has passed. Any participant may
expire a lease whose deadline passed more than the clock-skew allowance ago.
Operations that do not decide who runs what (cancel, retry, steering,
summaries) stay local and travel with the next accepted commit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from gitswarm.engine.machines.arbiter import Arbiter, Backoff, Offered, RemoteRefused, RemoteRejected, RemoteUnavailable
from gitswarm.engine.machines.finish_group import CLAIM_BUILDS, PUSH_DIR, GroupedFinish
from gitswarm.engine.machines.task_order import claim_order, home_worker
from gitswarm.model.artifacts import Artifact, Patch, artifact_id
from gitswarm.model.budget import exhausted
from gitswarm.model.errors import InvalidTransition, LeaseLost
from gitswarm.model.limits import DEFAULT_CLOCK_SKEW_SECONDS
from gitswarm.model.ops import ArtifactsRecorded, Holder, LeaseExpired, LeaseRenewed, TaskClaimed, TaskFinished
from gitswarm.model.records import Task, TaskSpec, TaskState
from gitswarm.model.reducer import Change
from gitswarm.store.jobs import Snapshot
from gitswarm.store.lease_finish import Pending
from gitswarm.store.lease_types import require_held
from gitswarm.store.leases import LAPSED, STOPPED, Ask, Built, Lease, Ledger, Result, granted_lease

LEASE_GRACE_SECONDS = 10.0  # added to a task's timeout: the run ends, then its result is written
OFFER_ROUNDS = 64  # refusals in a row (the remote kept moving) before an operation gives up
CLAIM_PICKS = 8
REMOTE_CLAIM_SPREAD = 256  # the queued tasks a remote claim ranks (its own order) to take the first
REFUSED_BACKOFF_CAP_SECONDS = 0.08  # tasks tried in turn when others keep taking them first
# The operations that move a task's lease: each goes to that task's claim ref on the remote (layout.claim_ref).
LEASE_OPS = (TaskClaimed, LeaseRenewed, LeaseExpired, TaskFinished)


class RemoteLedger(Ledger, GroupedFinish):
    """`Leases` decided by a git remote (`work --remote`): each transition a push the remote accepts."""

    # Every machine sees the others' claims only at its next fetch (seconds old, while all its workers are
    # busy). So the queued tasks of a job are shared out among the workers known to work it (`_home`: those
    # seen holding a lease in it, of any machine, and this one), by rendezvous hashing of the worker's name and
    # the task, and a worker takes its own first, in an order of its own (`claim_order`). Only a worker whose own
    # tasks ran out takes another's (a dead machine's too), from the end of that one's order: two workers then
    # race only for a worker's last task, not for every claim, siblings included.
    claim_spread = REMOTE_CLAIM_SPREAD

    def __init__(
        self, ledger: Ledger, arbiter: Arbiter, clock_skew: float = DEFAULT_CLOCK_SKEW_SECONDS,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(ledger.refs, ledger.index, ledger.trusted_remotes)
        self.arbiter = arbiter
        self.clock_skew = clock_skew
        self.clock = clock or arbiter.swarm.clock
        self.problem = ""  # why the last push did not land, while that lasts ("" once one did)
        self.on_problem: Callable[[str], None] = lambda problem: None
        self.on_race: Callable[[], None] = lambda: None  # told of each push another machine's got ahead of
        self._me = ""  # the worker this ledger last claimed for (`host.clone.worker`), whose tasks come first
        self._homes: dict[tuple[str, tuple[str, ...]], dict[str, str]] = {}  # (job, workers) -> task -> its home worker
        self._seen: dict[str, set[str]] = {}  # job -> the workers this process saw hold a lease in it

    def report_problems(self, listener: Callable[[str], None], races: Callable[[], None] = lambda: None) -> None:
        """Tell `listener` why pushes do not land (a refusal's reason, an unanswered remote), and "" once one does;
        `races` of each push refused because another machine's landed first (no problem: fetched, built again)."""
        self.on_problem = listener
        self.on_race = races

    # -- the protocol ---------------------------------------------------------------------

    def offer(
        self, job_id: str, build: Callable[[Snapshot], Built], patient: bool = False, branch: tuple[str, str] | None = None,
    ) -> tuple[Snapshot, Change]:
        """Build on the local tip, have the remote accept it, then move the local ref.

        Refused: fetch and merge the job, build again (`build` raises LeaseLost or
        InvalidTransition when what it was to do no longer applies). Unreachable, or
        rejected for another reason (a hook, no push rights): RemoteUnavailable or
        RemoteRejected, or with `patient`, back off with jitter and try again until it
        lands (a finish is kept until it lands or its lease is lost). Whoever listens
        to `on_problem` is told why pushes do not land, and when they land again.
        """
        # Refused: another machine got there first; the fetch that follows is the real wait, so the sleep
        # stays short (a long one stalls the worker longer than the round trip it saves).
        refused, unreachable = Backoff(base=0.01, cap=REFUSED_BACKOFF_CAP_SECONDS), Backoff()
        round_ = 0
        while patient or round_ < OFFER_ROUNDS:  # a finish is kept as long as it may still land
            round_ += 1
            snapshot = self._snapshot(job_id)
            ops, artifacts = build(snapshot)
            tip, change = self.refs.commit_ops(snapshot, ops, artifacts, sign=self.arbiter.machine.sign)
            tasks = frozenset(op.task for op in (ops if isinstance(ops, Sequence) else [ops]) if isinstance(op, LEASE_OPS))
            seen = self.arbiter.seen(job_id, branch[0] if branch else None, tasks)
            offered = self.arbiter.offer(job_id, tip, branch, tasks)
            if offered is Offered.CONTENDED:  # a lock refused it: a lost race only if somebody's push landed
                offered = Offered.MOVED if self._moved(job_id, seen, branch, tasks) else Offered.REJECTED
            elif offered is Offered.MOVED:  # the remote holds what this was not built on: fetch it
                self.arbiter.try_sync([job_id])
            if offered is Offered.MOVED:
                self.on_race()
            if offered is Offered.ACCEPTED:
                self.arbiter.adopt(snapshot, tip, change, artifacts)
                self._said("")
                return snapshot, change
            if offered is Offered.REJECTED:
                self._said(self.arbiter.said)
                if not patient:
                    raise RemoteRejected(self.arbiter.said)
            if offered is not Offered.MOVED:  # unreachable, or rejected and kept: wait until it would land
                if offered is Offered.UNREACHABLE:
                    self._said(f"remote {self.arbiter.remote} did not answer: {self.arbiter.said}")
                if not patient:
                    raise RemoteUnavailable(f"remote {self.arbiter.remote} did not answer: {self.arbiter.said}")
                while True:  # wait for it: a refusal count is no measure of an outage
                    self.arbiter.sleep(unreachable.next())
                    if self.arbiter.try_sync([job_id]):
                        break
                if offered is Offered.UNREACHABLE:
                    unreachable.reset()  # it answers again; a rejection keeps its backoff growing, to 5 s
                continue
            # Lost a race: _moved fetched what won it. The first refusal is answered at once (that fetch took a
            # round trip anyway); later ones wait a little, jittered, so that machines refused together part.
            if round_ > 1:
                self.arbiter.sleep(refused.next())
        raise RemoteUnavailable(f"job {job_id}: the remote kept moving; gave up after {OFFER_ROUNDS} offers")

    def _moved(
        self, job_id: str, seen: tuple[str | None, ...], branch: tuple[str, str] | None, tasks: frozenset[str],
    ) -> bool:
        """Whether the remote moved since `seen` (fetched now): a refusal that says "lost a race" (receive-pack says
        "atomic transaction failed" for a stale lock or a full disk too) is one only if somebody else's push landed."""
        if not self.arbiter.try_sync([job_id]):
            return True  # no answer now: the next round finds out
        return self.arbiter.seen(job_id, branch[0] if branch else None, tasks) != seen

    def _said(self, problem: str) -> None:
        """Tell whoever listens (the supervisor, through engine/machines/crew.py) why pushes do not land, or that they do."""
        if problem != self.problem:
            self.problem = problem
            self.on_problem(problem)

    def _choose(self, candidates: list[tuple[int, str, str]]) -> tuple[int, str, str]:
        homes = {job: self._home(job) for job in {row[1] for row in candidates}}
        return min(candidates, key=lambda row: claim_order(self._me, homes[row[1]](row[2]), f"{row[1]}/{row[2]}"))

    def _home(self, job: str) -> Callable[[str], str]:
        """The worker whose task of `job` a task is, to take first: of the workers known to work the job (the one
        this ledger claims for, and every one this process saw hold a lease in it, of any machine: a task's owner
        is cleared when its lease ends, so the set is kept as it grows), the one whose hash with the task ranks
        highest (rendezvous hashing). Each worker thus has tasks of its own, which neither its siblings nor
        another machine want while theirs last, however stale their view of the job."""
        rows = self.index.db.execute("SELECT DISTINCT owner FROM tasks WHERE job = ? AND owner IS NOT NULL", (job,))
        seen = self._seen.setdefault(job, set())
        seen.update(owner for (owner,) in rows if owner.count(".") >= 2)
        if self._me:
            seen.add(self._me)
        workers = tuple(sorted(seen))
        homes = self._homes.get((job, workers))
        if homes is None:
            for key in [key for key in self._homes if key[0] == job]:  # the same job's, for fewer workers
                del self._homes[key]
            homes = self._homes[(job, workers)] = {}

        def home(task: str) -> str:
            found = homes.get(task)
            if found is None:
                found = homes[task] = home_worker(workers, task)
            return found

        return home

    def push_lock(self) -> Path:
        """This machine's lock on pushing finishes to its remote (engine/machines/finish_group.py)."""
        return self.refs.repo.common_dir / "gitswarm" / PUSH_DIR / f"{self.arbiter.key}.lock"

    def _next_claim(self, pending: Pending, ask: Ask, now: float, build: int = 1) -> str | None:
        """Add to `pending` (a commit being built) the claim of the task `ask` takes next in its job, seeing the
        commit's finishes and claims so far; the task, or None when there is none to claim there.

        `build`: which build of its commit this is. A refusal is most often the claim another machine beat it to
        (a finish's own ref moves only with its lease): built again (refused, or an outage waited out), it claims
        another task, from what was fetched meanwhile, judged at the time of that build (a budget of wall time
        may have run out meanwhile); past CLAIM_BUILDS, the finishes go alone."""
        if build > CLAIM_BUILDS:
            return None
        now = now if build == 1 else max(now, self.clock())
        snapshot = pending.snapshot
        self._me = ask.owner
        pick = self._pick(now, ask.job, pending.change(), snapshot.job_id, ask.exclude, ask.skip_jobs | self.arbiter.refused_jobs())
        if pick is None or pick[0] != snapshot.job_id or exhausted(snapshot.job, pending.state, now) is not None:
            return None
        task = pending.task(pick[1])
        # The index may have moved past this snapshot (another process here adopted a commit): a task no longer
        # queued in it is simply not claimed; a finish never waits on a claim.
        if task.state is not TaskState.QUEUED:
            return None
        try:
            pending.add(self._claim_op(snapshot, task, ask.owner, ask.ttl, now, after=len(pending.ops)))
        except InvalidTransition:
            return None
        return task.id

    def lease_length(self, spec: TaskSpec, ttl: float) -> float:
        """How long a claim of a task holds before it must be renewed: its timeout plus a grace, at most `ttl`."""
        return min(spec.timeout + LEASE_GRACE_SECONDS, ttl)

    # -- leases ---------------------------------------------------------------------------

    def claim(
        self,
        owner: str,
        ttl: float,
        now: float,
        job_id: str | None = None,
        exclude: frozenset[str] = frozenset(),
        skip_jobs: frozenset[str] = frozenset(),
    ) -> Lease | None:
        """Lease one queued task once the remote accepted the claim; None when there is none
        (as this clone knows) or the remote did not answer."""
        self._me = owner
        for _ in range(CLAIM_PICKS):
            pick = self._pick(now, job_id, exclude=exclude, skip_jobs=skip_jobs | self.arbiter.refused_jobs())
            if pick is None:
                return None
            try:
                lease = self._claim_chosen(*pick, owner, ttl, now)
            except (InvalidTransition, LeaseLost):
                continue  # another machine took it first: choose again from what the refusal brought
            except RemoteRefused:
                continue  # that job is not taken from the remote any more; choose from the others
            except (RemoteUnavailable, RemoteRejected):
                return None
            return lease
        return None

    def claim_for(
        self, owners: Sequence[str], ttl: float, now: float, job_id: str | None = None,
        exclude: frozenset[str] = frozenset(), skip_jobs: frozenset[str] = frozenset(),
    ) -> list[Lease]:
        """Claim a task for each of `owners` (this worker first, then its idle siblings) in one push:
        tasks of one job, as many as are queued there. The leases granted, in the order of `owners`
        they went to (fewer when fewer tasks were queued)."""
        if len(owners) == 1:
            lease = self.claim(owners[0], ttl, now, job_id, exclude, skip_jobs)
            return [] if lease is None else [lease]
        self._me = owners[0]
        skip = skip_jobs | self.arbiter.refused_jobs()
        granted: list[tuple[str, str]] = []

        def build(s: Snapshot) -> Built:
            if exhausted(s.job, s.state, now) is not None:
                raise InvalidTransition("the job's budget is spent")
            query, params = self._claim_query(now, s.job_id, exclude, skip)
            home = self._home(s.job_id)
            rows = [row for row in self.index.db.execute(query, params) if s.task(row[1]).state is TaskState.QUEUED]
            granted[:] = []
            for owner in owners:  # each its own task first (by priority), in its own order (claim_order)
                if not rows:
                    break

                def preference(row: tuple[str, str, int], owner: str = owner) -> tuple[int, tuple[bool, int, int]]:
                    return -row[2], claim_order(owner, home(row[1]), f"{row[0]}/{row[1]}")

                best = min(rows, key=preference)
                rows.remove(best)
                granted.append((owner, best[1]))
            if not granted:
                raise InvalidTransition("nothing queued")
            return [self._claim_op(s, s.task(task), owner, ttl, now, after=i) for i, (owner, task) in enumerate(granted)], ()

        for _ in range(CLAIM_PICKS):
            pick = self._pick(now, job_id, exclude=exclude, skip_jobs=skip)
            if pick is None:
                return []
            try:
                snapshot, change = self.offer(pick[0], build)
            except (InvalidTransition, LeaseLost, RemoteRefused):
                continue
            except (RemoteUnavailable, RemoteRejected):
                return []
            return [granted_lease(snapshot, change, task, owner, change.tasks[task].lease_expires or now) for owner, task in granted]
        return []

    def assigned(self, owner: str, skip: frozenset[tuple[str, str, int]] = frozenset()) -> Lease | None:
        """A task a sibling claimed for `owner` (running under its name here, and not run yet); `skip`:
        (job, task, token) of the leases its worker holds otherwise or gave up. A worker's name is in the
        records for every machine to read (and copy): a lease counts as a sibling's only when its claim named
        this machine's key, which only this machine can sign for."""
        rows = self.index.db.execute("SELECT job, task, token FROM leases WHERE owner = ? ORDER BY expires", (owner,)).fetchall()
        for job, task_id, token in rows:
            if (job, task_id, token) in skip:
                continue
            snapshot = self._snapshot(job)
            task = snapshot.task(task_id)
            if task.state is not TaskState.RUNNING or task.claims != token or task.owner != owner:
                return None  # the index is behind its job's ref: looked for again at the next claim
            if task.holder_key == self.arbiter.machine.public:
                return Lease(snapshot.job_id, task.id, task.claims, owner, task.lease_expires or 0.0, task.attempts, task.spec, snapshot.job.base)
        return None

    def _decide(self, job_id: str, build: Callable[[Snapshot], Built]) -> tuple[Snapshot, Change]:
        """A claim is the remote's to decide: offered, and adopted here once it accepted."""
        return self.offer(job_id, build)

    def _claim_op(
        self, snapshot: Snapshot, task: Task, owner: str, ttl: float, now: float, after: int = 0, holder: Holder | None = None,
    ) -> TaskClaimed:
        if task.state is not TaskState.QUEUED:
            raise InvalidTransition(f"task {task.id} is {task.state.value}, not queued")
        # The deadline runs from when the claim is built, not from when the caller asked: a finish that
        # waited out an outage carries a claim of its next task as long as any other.
        return self.refs.next_op(
            TaskClaimed, snapshot, now, after, task=task.id, token=task.claims + 1, owner=owner,
            lease_expires=max(now, self.clock()) + self.lease_length(task.spec, ttl), key=self.arbiter.machine.public,
        )

    def renew(self, lease: Lease, ttl: float, now: float) -> Lease:
        """Push a renewal of a live lease. LeaseLost if the remote says it is no longer held; the
        lease unchanged if the remote did not answer (the heartbeat tries again)."""
        deadline = [lease.expires]

        def build(s: Snapshot) -> Built:
            require_held(s, lease)
            deadline[0] = max(now, self.clock()) + self.lease_length(lease.spec, ttl)
            return self.refs.next_op(LeaseRenewed, s, now, task=lease.task, token=lease.token, lease_expires=deadline[0]), ()

        try:
            self.offer(lease.job, build)
        except (RemoteUnavailable, RemoteRejected):
            return lease
        except (InvalidTransition, RemoteRefused) as exc:
            raise LeaseLost(str(exc)) from None
        return msgspec.structs.replace(lease, expires=deadline[0])

    def held(self, lease: Lease, now: float) -> bool:
        """Still ours as this clone last saw the remote, and not past its deadline. Not a moment more: the
        others wait the clock skew beyond it, the margin for a clock here that runs behind theirs."""
        row = self.index.lease(lease.job, lease.task)
        return row is not None and row.owner == lease.owner and row.token == lease.token and row.expires >= now

    def give_up(self, lease: Lease) -> None:
        """A lease this worker stopped running (lost here, or found stale before it started): push its
        expiry while it is still current on the remote, so it is run again at once and never twice by us."""
        now = self.clock()

        def build(s: Snapshot) -> Built:
            require_held(s, lease)
            return self.refs.next_op(
                LeaseExpired, s, now, task=lease.task, token=lease.token, why=f"{lease.owner} gave it up", attempt_used=False
            ), ()

        try:
            self.offer(lease.job, build)
        except (InvalidTransition, LeaseLost, RemoteRefused, RemoteUnavailable, RemoteRejected):
            pass  # no longer ours, or the remote will have it expired by its deadline

    def finish(
        self, lease: Lease, ok: bool, now: float, error: str | None = None, artifacts: Sequence[Artifact] = (),
        retryable: bool = True,
    ) -> Task:
        task, _ = self.finish_and_claim(lease, Result(ok, error, artifacts, retryable), now, None)
        return task

    def finish_and_claim(
        self, lease: Lease, result: Result, now: float, ask: Ask | None, patient: bool = True,
    ) -> tuple[Task, Lease | None]:
        """The finish, and (with `ask`) the worker's next claim in the same job, in one commit the remote accepts.

        Pushed until it lands (an implement task's head with it) or its lease turns
        out lost (LeaseLost): an unreachable remote is waited for, with backoff
        (not `patient`: RemoteUnavailable, and the caller tries again later).
        """
        artifacts = result.artifacts
        self.refs.write_artifacts(artifacts)
        patches = [a for a in artifacts if isinstance(a, Patch)]
        if self.group is not None and ask is not None and not patches:
            try:
                return self.finish_grouped(lease, result, now, ask, patient)  # with the siblings' (engine/machines/finish_group.py)
            except (RemoteUnavailable, RemoteRejected):
                if not patient:
                    raise
                # pushed alone, waiting out what kept it from landing
        finish = self._finish_builder(lease, result, now)
        picked: list[str | None] = [None]
        builds = [0]

        def build(snapshot: Snapshot) -> Built:
            require_held(snapshot, lease)
            pending = Pending(snapshot)
            pending.add(finish(snapshot)[0])
            builds[0] += 1
            picked[0] = self._next_claim(pending, ask, now, builds[0]) if ask is not None else None
            return pending.ops, artifacts

        branch = (lease.task, patches[-1].head) if patches else None  # the head travels with its finish
        try:
            snapshot, change = self.offer(lease.job, build, patient=patient, branch=branch)
        except (InvalidTransition, RemoteRefused) as exc:
            raise LeaseLost(f"{lease.job}/{lease.task}: {exc}; result refused") from None
        done = change.tasks[lease.task]
        if picked[0] is not None and ask is not None:
            task = change.tasks[picked[0]]
            return done, granted_lease(snapshot, change, picked[0], ask.owner, task.lease_expires or now)
        return done, None

    def record_unless_held(self, job_id: str, make: Callable[[Snapshot], Artifact | str | None], now: float) -> str | None:
        """Record a job artifact (its summary) through the remote: `make` gives it from the job as last seen
        there, or the id of an equal one the job holds, or None when there is none to record (any more).
        Offered to the job's ref; refused because another machine wrote first, made again from what that
        brought, so that machines finishing a job together record one summary, not one each. The remote
        unanswered: recorded here, and pushed with the job later. The id recorded or found."""
        made: list[Artifact | str | None] = [None]

        def build(s: Snapshot) -> Built:
            made[0] = artifact = make(s)
            if not isinstance(artifact, Artifact):
                raise InvalidTransition(f"job {job_id}: nothing to record ({artifact or 'no longer finished'})")
            return self.refs.next_op(ArtifactsRecorded, s, now, task=None, artifacts=(artifact_id(artifact),)), (artifact,)

        try:
            self.offer(job_id, build)
        except InvalidTransition:
            pass
        except (RemoteUnavailable, RemoteRejected, RemoteRefused):  # made again from all this clone knows now
            made[0] = artifact = make(self._snapshot(job_id))
            if isinstance(artifact, Artifact):
                return self.record_artifacts(job_id, None, [artifact], now)[0]
        return artifact_id(made[0]) if isinstance(made[0], Artifact) else made[0]

    def expire(
        self, now: float, job_id: str | None = None, owner: str | None = None, why: str | None = None,
        attempt_used: bool = False,
    ) -> list[tuple[str, str]]:
        """Push the expiry of every lease whose deadline passed more than the clock skew ago (any
        machine's); with `owner`, of every lease that owner holds (a worker of this machine known dead)
        by a claim naming this machine's key: another machine's claim in its name is that machine's lease,
        whose expiry before its deadline every clone would refuse. The attempt is given back unless
        `attempt_used`; `why` is recorded."""
        why = why or (LAPSED if owner is None else STOPPED)
        if owner is None:
            rows = self.index.db.execute(
                "SELECT job, task, token FROM leases WHERE expires < ? ORDER BY job, task", (now - self.clock_skew,)
            ).fetchall()
        else:
            rows = self.index.db.execute("SELECT job, task, token FROM leases WHERE owner = ? ORDER BY job, task", (owner,)).fetchall()
        expired = []
        for job, task_id, token in rows:
            if job_id is not None and job != job_id:
                continue

            def build(s: Snapshot, task_id: str = task_id, token: int = token) -> Built:
                task = s.task(task_id)
                if task.state is not TaskState.RUNNING or task.claims != token:
                    raise InvalidTransition(f"task {task_id}: claim {token} is no longer current")
                if owner is None and (task.lease_expires or 0.0) + self.clock_skew >= now:
                    raise InvalidTransition(f"task {task_id}: its lease was renewed")
                if owner is not None and task.owner != owner:
                    raise InvalidTransition(f"task {task_id} is held by {task.owner}")
                if owner is not None and task.holder_key != self.arbiter.machine.public:  # a name another machine copied
                    raise InvalidTransition(f"task {task_id} is held by another machine's key, in the name of {owner}")
                return self.refs.next_op(LeaseExpired, s, now, task=task_id, token=token, why=why, attempt_used=attempt_used), ()

            try:
                self.offer(job, build)
            except (InvalidTransition, LeaseLost, RemoteRefused):
                continue
            except (RemoteUnavailable, RemoteRejected):
                break
            expired.append((job, task_id))
        return expired

