"""Which machine wrote a lease op rests on its commit's signature, never on a field a forger copies.

Two clones work one job through a bare remote with RemoteLedgers, as in
test_remote_leases.py; an attacker with push access appends operations to the
job's history on the remote with git plumbing (`hash-object`, `mktree`,
`commit-tree`, `commit-tree -S` with a key of their own, `push --force`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitswarm.engine.machines.arbiter import Arbiter, RemoteRefused
from gitswarm.engine.machines.remote_leases import RemoteLedger
from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import CorruptRecord
from gitswarm.model.ids import new_id
from gitswarm.model.ops import Op
from gitswarm.model.records import TaskState
from gitswarm.store import layout
from gitswarm.store.jobs import Snapshot
from gitswarm.store.machine_key import allowed_line
from gitswarm.store.oplog import parse_op_lines
from gitswarm.store.pulled_jobs import Intake
from tests.conftest import git
from tests.engine.machines.test_remote_leases import Clock, make_clones
from tests.forge import forge_history, forge_replayed, history_ops, push, run_git


@pytest.fixture
def clones(tmp_path: Path) -> Iterator[tuple[Path, list[RemoteLedger], str, Clock, Path]]:
    clock = Clock()
    bare, swarms, job = make_clones(tmp_path, clock)
    ledgers = [RemoteLedger(s.ledger, Arbiter(s, "origin", sleep=lambda s: None), clock_skew=2.0, clock=clock) for s in swarms]
    attacker = tmp_path / "attacker"
    git(tmp_path, "clone", "-q", str(bare), str(attacker))
    yield bare, ledgers, job, clock, attacker
    for swarm in swarms:
        swarm.close()


def forge_on_remote(attacker: Path, job: str, op: dict[str, Any], sign_key: Path | None = None) -> str:
    """Append one commit recording `op` to the tip of its task's claim ref on the remote (where that task's
    lease history is; signed with `sign_key` by git itself when given) and force-push it; the new tip."""
    ref = layout.claim_ref(job, op["task"])
    run_git(attacker, "fetch", "-q", "origin", f"+{ref}:{ref}")
    tip = run_git(attacker, "rev-parse", ref)
    commits = history_ops(attacker, tip)
    op = {"v": 1, "id": new_id(), "clock": max(o["clock"] for c in commits for o in c) + 1, **op}
    forged = forge_history(attacker, [*commits, [op]], onto=tip)
    if sign_key is not None:  # the same commit, signed by the attacker's own key with `git commit-tree -S`
        tree, message = run_git(attacker, "rev-parse", f"{forged}^{{tree}}"), run_git(attacker, "log", "-1", "--format=%B", forged)
        forged = run_git(
            attacker, "-c", "gpg.format=ssh", "-c", f"user.signingkey={sign_key}", "commit-tree", "-S", tree, "-p", tip,
            input=message.encode(),
        )
    push(attacker, f"{forged}:{ref}")
    return forged


def ssh_key(where: Path) -> Path:
    if subprocess.run(["which", "ssh-keygen"], capture_output=True).returncode != 0:
        pytest.skip("ssh-keygen is not installed: the attacker's signed commit needs it")
    key = where / "attacker_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key


def test_a_claim_names_its_machine_and_its_commit_passes_git_verify_commit(clones: tuple, tmp_path: Path) -> None:
    bare, (a, _), job, clock, _ = clones
    lease = a.claim("a.w1", 30.0, clock(), job_id=job)
    assert lease is not None
    task = a.refs.snapshot(job).task(lease.task)
    assert task.holder_key == a.arbiter.machine.public
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(allowed_line(a.arbiter.machine.public, "a") + "\n")
    tip = git(bare, "rev-parse", layout.claim_ref(job, lease.task)).strip()
    verified = subprocess.run(
        ["git", "-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={allowed}", "verify-commit", tip],
        cwd=bare, capture_output=True, text=True,
    )
    if "ssh-keygen" in verified.stderr and verified.returncode != 0 and "not found" in verified.stderr:
        pytest.skip("ssh-keygen is not installed: git cannot verify SSH signatures")
    assert verified.returncode == 0, verified.stderr
    assert 'Good "git" signature for gitswarm-machine@a' in verified.stderr


def test_a_forged_finish_of_another_machines_lease_never_counts(clones: tuple) -> None:
    """The attacker copies the holder's actor and owner into a `finished ok`: its commit is not signed by
    the key the claim named, so the job's history there is refused by name and the task never succeeds."""
    _bare, (a, b), job, clock, attacker = clones
    lease = a.claim("a.w1", 30.0, clock(), job_id=job)
    assert lease is not None
    actor = a.refs.actor
    forge_on_remote(attacker, job, {"op": "finished", "at": clock() + 1, "actor": actor, "task": lease.task, "token": lease.token, "ok": True})
    with pytest.raises(RemoteRefused, match=r"finished of lease 1 of t\d, held by machine key .*it did not sign"):
        b.arbiter.sync([job])
    assert b.refs.snapshot(job).task(lease.task).state is not TaskState.SUCCEEDED
    with pytest.raises(RemoteRefused, match="did not sign"):
        a.arbiter.sync([job])
    assert a.refs.snapshot(job).task(lease.task).state is TaskState.RUNNING  # the holder still holds it here


def test_a_renewal_signed_by_another_key_never_counts(clones: tuple, tmp_path: Path) -> None:
    _bare, (a, b), job, clock, attacker = clones
    lease = a.claim("a.w1", 30.0, clock(), job_id=job)
    assert lease is not None
    b.arbiter.sync([job])
    key = ssh_key(tmp_path)
    forge_on_remote(attacker, job, {
        "op": "renewed", "at": clock() + 1, "actor": a.refs.actor, "task": lease.task, "token": lease.token,
        "lease_expires": clock() + 3600,
    }, sign_key=key)
    with pytest.raises(RemoteRefused, match="signed by another key"):
        b.arbiter.sync([job])
    assert b.refs.snapshot(job).task(lease.task).lease_expires == lease.expires


def test_an_early_expiry_by_another_key_never_counts(clones: tuple) -> None:
    """An expiry by anyone but the holder counts only past the deadline (with 60 s of slack for clocks); past it,
    another machine's expiry counts (test_remote_leases.py: a finish after another clone expired the lease)."""
    bare, (a, b), job, clock, attacker = clones
    lease = a.claim("a.w1", 300.0, clock(), job_id=job)
    assert lease is not None
    b.arbiter.sync([job])
    forge_on_remote(attacker, job, {
        "op": "expired", "at": clock() + 1, "actor": b.refs.actor, "task": lease.task, "token": lease.token, "why": "lapsed",
        "attempt_used": False,
    })
    with pytest.raises(RemoteRefused, match="before its deadline"):  # a clone that saw the lease knows its deadline
        a.arbiter.sync([job])
    git(attacker.parent, "clone", "-q", str(bare), "newcomer")
    newcomer = Swarm(attacker.parent / "newcomer", clock=clock)
    try:  # one that never saw it: the claim in the same history names the key, and the expiry is not signed by it
        with pytest.raises(RemoteRefused, match=r"expired of lease 1 of t\d, held by machine key .*it did not sign"):
            Arbiter(newcomer, "origin").sync([job])
    finally:
        newcomer.close()


def test_with_machines_in_the_allowed_signers_file_only_their_claims_count(clones: tuple, tmp_path: Path) -> None:
    _bare, (a, b), job, clock, _ = clones
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(allowed_line(b.arbiter.machine.public, "b") + "\n" + "alice@example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOjGCZyzlJfkLhL4DgJoAN7IK+2Q6xJVbQH+QxwkLwik\n")
    git(b.refs.repo.common_dir, "config", "gpg.ssh.allowedSignersFile", str(allowed))
    checker = Arbiter(b.arbiter.swarm, "origin", sleep=lambda s: None)  # reads the file when made
    assert checker.machines == frozenset({b.arbiter.machine.public})
    lease = a.claim("a.w1", 30.0, clock(), job_id=job)
    assert lease is not None
    with pytest.raises(RemoteRefused, match="which the allowed-signers file does not list"):
        checker.sync([job])
    allowed.write_text(allowed.read_text() + allowed_line(a.arbiter.machine.public, "a") + "\n")
    Arbiter(b.arbiter.swarm, "origin", sleep=lambda s: None).sync([job])
    assert b.refs.snapshot(job).task(lease.task).state is TaskState.RUNNING


# Found by a review that forged each of these with plumbing against the first version of the checks.


def test_a_second_claim_of_a_held_lease_never_launders_a_forged_finish(clones: tuple) -> None:
    """A second, unsigned claim with the holder's token and no key, then a finish by another actor: the replay
    skips that claim (the task is running) but would apply the finish to the real holder's lease."""
    _, (a, b), job, clock, attacker = clones
    lease = a.claim("a.w1", 300.0, clock(), job_id=job)
    assert lease is not None
    b.arbiter.sync([job])
    forge_replayed(attacker, layout.claim_ref(job, lease.task), [
        {"op": "claimed", "at": clock() + 1, "actor": b.refs.actor, "task": lease.task, "token": lease.token,
         "owner": "evil.w1", "lease_expires": clock() + 30},
        {"op": "finished", "at": clock() + 2, "actor": a.refs.actor, "task": lease.task, "token": lease.token, "ok": True},
    ])
    for clone in (b, a):
        with pytest.raises(RemoteRefused, match="a second claim of lease 1"):
            clone.arbiter.sync([job])
        assert clone.refs.snapshot(job).task(lease.task).state is TaskState.RUNNING


@pytest.mark.parametrize(("ttl", "dated"), [(300.0, "past the deadline"), (30.0, "a second after the claim")])
def test_an_expiry_of_a_live_lease_never_counts_whatever_it_is_dated(clones: tuple, ttl: float, dated: str) -> None:
    """Dated just past the deadline (within the hour a pulled op may run ahead), or, with the default 30 s
    lease, a second after the claim (within the 60 s slack for clocks): the lease is live by this clone's clock."""
    _, (a, b), job, clock, attacker = clones
    lease = a.claim("a.w1", ttl, clock(), job_id=job)
    assert lease is not None
    b.arbiter.sync([job])
    at = lease.expires + 1 if dated == "past the deadline" else clock() + 1
    forge_on_remote(attacker, job, {"op": "expired", "at": at, "actor": b.refs.actor, "task": lease.task, "token": lease.token,
                                    "why": "lapsed", "attempt_used": False})
    for clone in (a, b):
        with pytest.raises(RemoteRefused, match="expired of lease 1 of t"):
            clone.arbiter.sync([job])
        assert clone.refs.snapshot(job).task(lease.task).state is TaskState.RUNNING


def test_an_expiry_is_judged_against_the_renewed_deadline(clones: tuple) -> None:
    _, (a, b), job, clock, attacker = clones
    lease = a.claim("a.w1", 300.0, clock(), job_id=job)
    assert lease is not None
    b.arbiter.sync([job])
    first = lease.expires
    clock.now = first - 50
    renewed = a.renew(lease, 300.0, clock())
    assert renewed.expires > first + 200
    clock.now = first + 1  # past the first deadline by every clock, long before the renewed one
    forge_on_remote(attacker, job, {"op": "expired", "at": clock(), "actor": b.refs.actor, "task": lease.task,
                                    "token": lease.token, "why": "lapsed", "attempt_used": False})
    with pytest.raises(RemoteRefused, match="expired of lease 1 of t"):
        b.arbiter.sync([job])  # pulls the signed renewal and the expiry together
    assert b.refs.snapshot(job).task(lease.task).state is TaskState.RUNNING  # the history there is refused whole


def test_a_claim_naming_no_machine_is_refused_through_the_remote(clones: tuple) -> None:
    """Every claim `work --remote` pushes names its machine: a key-less one (and the finish after it) on a
    claim ref never counts, allowed-signers file or not."""
    _, (_, b), job, clock, attacker = clones
    run_git(attacker, "fetch", "-q", "origin", f"+{layout.job_ref(job)}:{layout.job_ref(job)}")
    run_git(attacker, "push", "-q", "origin", f"{run_git(attacker, 'rev-parse', layout.job_ref(job))}:{layout.claim_ref(job, 't0')}")
    forge_replayed(attacker, layout.claim_ref(job, "t0"), [
        {"op": "claimed", "at": clock() + 1, "actor": b.refs.actor, "task": "t0", "token": 1, "owner": "evil.w1",
         "lease_expires": clock() + 30},
        {"op": "finished", "at": clock() + 2, "actor": b.refs.actor, "task": "t0", "token": 1, "ok": True},
    ])
    with pytest.raises(RemoteRefused, match="a claim naming no machine key"):
        b.arbiter.sync([job])
    assert b.refs.snapshot(job).task("t0").state is TaskState.QUEUED


def test_a_commit_the_local_history_holds_is_never_judged_again(clones: tuple) -> None:
    """Found with six machines: machines' clocks differ, so commit times do not rise along a job's history, and a
    walk that hides the local tip may still yield commits it holds. Their claims are the lease this clone
    holds, never a second claim of it."""
    _, (a, b), job, clock, _ = clones
    lease = a.claim("a.w1", 30.0, clock(), job_id=job)
    assert lease is not None
    b.arbiter.sync([job])
    repo = b.refs.repo
    tip = repo.read_ref(layout.job_ref(job))
    assert tip is not None
    held = list(repo.walk(tip))  # what such a walk may yield: commits the local tip holds
    intake = Intake(repo, now=clock(), require_keys=True)
    intake.parsed = {c.oid: parse_op_lines(c, "job", Op) for c in held}
    intake._check_signers(held, Snapshot(repo, job, tip), "job", tip)  # passes: each op is held here already
    with pytest.raises(CorruptRecord, match="a second claim of lease 1"):
        intake._check_signers(held, Snapshot(repo, job, tip), "job", None)  # judged as new, the claim is a second one
