"""Who holds a lease (store/holders.py), and the Ledger releasing what dead holders of this machine held.

Real processes throughout: a child that sleeps is a live holder; killed with
-9 (reaped, or left a zombie) it is a dead one; a holder with this pid but
another start time is a reused pid; a holder of another machine, or of another
pid namespace on this one, is never judged by its pid.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import msgspec
import pytest

from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import LeaseLost
from gitswarm.model.ops import Holder, LeaseExpired, TaskClaimed
from gitswarm.model.records import TaskState
from gitswarm.store.holders import Liveness, liveness, process_holder, this_machine, this_process
from gitswarm.store.index import index_path
from tests.conftest import spec_text
from tests.proctools import wait_for

LINUX = Path("/proc/self/stat").exists()
TTL = 600.0  # far from running out: only a dead holder ends these leases


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def killed(proc: subprocess.Popen, reap: bool = True) -> subprocess.Popen:
    os.kill(proc.pid, signal.SIGKILL)
    if reap:
        proc.wait()
    return proc


def test_this_process_is_a_live_holder_on_this_machine() -> None:
    me = this_process()
    assert (me.host, me.boot, me.pid) == (*this_machine(), os.getpid())
    if LINUX:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        assert me.start == int(fields[19]) > 0 and me.boot.count("/") == 1
    assert liveness(me) is Liveness.ALIVE


def test_a_child_is_alive_until_killed_and_dead_after_even_as_a_zombie(sleeper: subprocess.Popen) -> None:
    holder = process_holder(sleeper.pid)
    assert liveness(holder) is Liveness.ALIVE
    killed(sleeper, reap=False)  # not waited for: a zombie until reaped
    wait_for(lambda: liveness(holder) is Liveness.DEAD, 2, "the killed child to be seen dead")
    if LINUX:  # seen dead while a zombie: nobody has waited for it yet
        assert Path(f"/proc/{sleeper.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    sleeper.wait()
    assert liveness(holder) is Liveness.DEAD


@pytest.mark.skipif(not LINUX, reason="start times come from /proc")
def test_a_reused_pid_is_a_dead_holder() -> None:
    me = this_process()
    assert liveness(msgspec.structs.replace(me, start=me.start + 1)) is Liveness.DEAD


def test_a_holder_elsewhere_is_never_judged_by_its_pid(sleeper: subprocess.Popen) -> None:
    gone = process_holder(killed(sleeper).pid)
    host, boot = this_machine()
    assert liveness(msgspec.structs.replace(gone, host=f"not-{host}")) is Liveness.ELSEWHERE
    assert liveness(msgspec.structs.replace(gone, boot=f"{boot}-other-namespace")) is Liveness.ELSEWHERE
    assert liveness(None) is Liveness.ELSEWHERE


# -- the ledger ------------------------------------------------------------------------------


def claimed_by(swarm: Swarm, holder: Holder, job: str) -> str:
    """Claim one task of `job` as if `holder` were the worker; its task id."""
    swarm.ledger.holder = holder
    lease = swarm.ledger.claim(f"w-{holder.pid}", TTL, swarm.clock(), job_id=job)
    assert lease is not None
    return lease.task


def three_tasks(swarm: Swarm, max_attempts: int = 1) -> str:
    bodies = [f'id = "{name}"\ncommand = "true"\nmax_attempts = {max_attempts}' for name in ("a", "b", "c")]
    return swarm.submit_text(spec_text(*bodies))


def test_release_dead_requeues_only_what_dead_holders_of_this_machine_held(swarm: Swarm, sleeper: subprocess.Popen) -> None:
    job = three_tasks(swarm)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = claimed_by(swarm, process_holder(sleeper.pid), job)
        doomed_holder = process_holder(other.pid)
        doomed = claimed_by(swarm, doomed_holder, job)
        elsewhere = claimed_by(swarm, msgspec.structs.replace(process_holder(other.pid), host="another-machine"), job)
        killed(other)
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
    released = swarm.ledger.release_dead(swarm.clock())
    assert [(r.job, r.task, r.holder) for r in released] == [(job, doomed, doomed_holder)]
    assert released[0].why == f"its worker w-{other.pid} (pid {other.pid} on host {this_machine()[0]}) died"
    tasks = {t.id: t for t in swarm.refs.snapshot(job).tasks()}
    assert (tasks[doomed].state, tasks[doomed].attempts, tasks[doomed].claims, tasks[doomed].error) == (
        TaskState.QUEUED, 0, 1, released[0].why,
    )
    assert tasks[live].state is tasks[elsewhere].state is TaskState.RUNNING
    *_, (_, last) = swarm.refs.history(job)
    assert isinstance(last, LeaseExpired) and (last.task, last.token, last.attempt_used) == (doomed, 1, False)
    assert swarm.ledger.release_dead(swarm.clock()) == []  # nothing more: the live holder and the other machine's stay


def test_a_task_whose_holder_died_runs_again_on_its_only_attempt_and_the_dead_lease_is_fenced(
    swarm: Swarm, sleeper: subprocess.Popen
) -> None:
    job = three_tasks(swarm, max_attempts=1)
    swarm.ledger.holder = process_holder(sleeper.pid)
    lease = swarm.ledger.claim("w-dead", TTL, swarm.clock(), job_id=job)
    assert lease is not None
    killed(sleeper)
    assert [r.task for r in swarm.ledger.release_dead(swarm.clock())] == [lease.task]
    with pytest.raises(LeaseLost, match=r"no longer held"):
        swarm.ledger.finish(lease, True, swarm.clock())  # the dead holder's token is stale
    swarm.ledger.holder = this_process()
    again = swarm.ledger.claim("w-live", TTL, swarm.clock(), job_id=job)
    while again is not None and again.task != lease.task:
        swarm.ledger.finish(again, True, swarm.clock())
        again = swarm.ledger.claim("w-live", TTL, swarm.clock(), job_id=job)
    assert again is not None and (again.token, again.attempt) == (2, 1)
    assert swarm.ledger.finish(again, True, swarm.clock()).state is TaskState.SUCCEEDED


def test_the_holder_is_in_the_claim_and_comes_back_when_the_index_is_rebuilt(repo: Path, sleeper: subprocess.Popen) -> None:
    with closing(Swarm(repo)) as swarm_:
        job = three_tasks(swarm_)
        holder = process_holder(sleeper.pid)
        task = claimed_by(swarm_, holder, job)
        *_, (_, claim) = swarm_.refs.history(job)
        assert isinstance(claim, TaskClaimed) and claim.holder == holder
    for suffix in ("", "-wal", "-shm"):
        Path(f"{index_path(repo / '.git')}{suffix}").unlink(missing_ok=True)
    killed(sleeper)
    with closing(Swarm(repo)) as rebuilt:
        assert [row.holder for row in rebuilt.index.held_by_processes()] == [holder]
        assert [r.task for r in rebuilt.ledger.release_dead(rebuilt.clock())] == [task]
