"""Sharing swarm state between clones through a bare remote: `pull`, `push`, `sync`, `approve`.

Every test builds real repositories under tmp_path: a bare remote and two
clones A and B (each its own gitswarm actor), and drives them through the
real CLI, or the library where two clones must race. What is checked:
adopt / fast-forward / keep / merge per job, a merge that loses no
operation and lands on the same tree in both clones, fencing across clones
(one claim wins, the loser's result is not applied), notes merged as a union
of lines, pulled history that does not decode or breaks an invariant kept
out and named, pulled jobs not run until approved or trusted, and no push
ever forced.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from contextlib import closing
from pathlib import Path

import pytest

from gitswarm.engine.swarm import Swarm
from gitswarm.model import codec
from gitswarm.model.artifacts import Finding, Verdict, artifact_id
from gitswarm.model.errors import LeaseLost
from gitswarm.model.ops import TaskClaimed, TaskFinished
from gitswarm.model.records import TaskState
from gitswarm.store.git import PygitRepo
from gitswarm.store.layout import NOTES_REF
from gitswarm.store.notes import add_note_line
from tests.conftest import bare_remote, cli, clone_with_own_history, git, ok, register_scripted, spec_text

START = 1_700_000_000.0
TWO_TASKS = ('id = "x"\ncommand = "true"', 'id = "y"\ncommand = "true"')


# -- repositories ------------------------------------------------------------------------------


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return bare_remote(tmp_path)


@pytest.fixture
def a(tmp_path: Path, remote: Path) -> Path:
    return clone_with_own_history(tmp_path, "a", remote)


@pytest.fixture
def b(tmp_path: Path, remote: Path) -> Path:
    return clone_with_own_history(tmp_path, "b", remote)


# -- running gitswarm --------------------------------------------------------------------------




def run_json(path: Path, *args: str) -> dict:
    return ok(cli(path, "--json", *args)).json()


def job_view(path: Path, job: str) -> dict:
    """`status JOB` as every clone shares it (whether it may run is each clone's own business)."""
    view = run_json(path, "status", job)
    view.pop("awaiting_approval")
    return view


def submit(path: Path, *tasks: str, name: str = "spec.toml", goal: str = "shared goal") -> str:
    (path / name).write_text(spec_text(*tasks, goal=goal))
    return run_json(path, "submit", name)["id"]


def pull(path: Path, remote: str = "origin") -> dict:
    return run_json(path, "pull", remote)


def push(path: Path, remote: str = "origin") -> dict:
    return run_json(path, "push", remote)


def tip(path: Path, job: str) -> str:
    return git(path, "rev-parse", f"refs/swarm/jobs/{job}").strip()


def tree(path: Path, job: str) -> str:
    return git(path, "rev-parse", f"refs/swarm/jobs/{job}^{{tree}}").strip()


def is_ancestor(path: Path, old: str, new: str) -> bool:
    done = subprocess.run(["git", "merge-base", "--is-ancestor", old, new], check=False, cwd=path, capture_output=True)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0


def task_states(path: Path, job: str) -> dict[str, str]:
    return {t["id"]: t["state"] for t in run_json(path, "status", job)["tasks"]}


def op_ids(path: Path, job: str) -> set[str]:
    return {e["record"]["id"] for e in run_json(path, "log", job)["events"]}


def job_refs(path: Path) -> str:
    return git(path, "for-each-ref", "refs/swarm/jobs")


def shared_job(a: Path, b: Path, *tasks: str) -> str:
    """A job submitted in A, pushed, pulled into B and approved there."""
    job = submit(a, *(tasks or TWO_TASKS))
    push(a)
    assert pull(b)["new"] == [job]
    run_json(b, "approve", job)
    return job


# -- adopt, fast-forward, keep -----------------------------------------------------------------


def test_a_pushed_job_is_new_in_the_other_clone_then_unchanged(a: Path, b: Path, remote: Path) -> None:
    job = submit(a, *TWO_TASKS)
    pushed = push(a)
    assert f"refs/swarm/jobs/{job}" in pushed["pushed"] and pushed["pulls"] == []
    assert git(remote, "rev-parse", f"refs/swarm/jobs/{job}").strip() == tip(a, job)

    first = pull(b)
    assert first["new"] == [job]
    assert (first["updated"], first["merged"], first["unchanged"], first["invalid"]) == ([], [], [], {})
    assert tip(b, job) == tip(a, job)
    assert job_view(b, job) == job_view(a, job)
    assert run_json(b, "status", job)["awaiting_approval"] == "pulled from origin and not approved"
    assert run_json(a, "status", job)["awaiting_approval"] is None
    assert [j["id"] for j in run_json(b, "status")["jobs"]] == [job]
    # the shadow copy is where the fetch landed; the live ref was moved from it
    assert git(b, "rev-parse", f"refs/gitswarm/shadow/origin/jobs/{job}").strip() == tip(a, job)

    again = pull(b)
    assert again["unchanged"] == [job]
    assert (again["new"], again["updated"], again["merged"], again["invalid"]) == ([], [], [], {})
    assert tip(b, job) == tip(a, job)


def test_a_clone_behind_fast_forwards(a: Path, b: Path) -> None:
    job = shared_job(a, b)
    ok(cli(a, "cancel", f"{job}/x"))
    push(a)
    before = tip(b, job)
    pulled = pull(b)
    assert pulled["updated"] == [job] and pulled["merged"] == []
    assert tip(b, job) == tip(a, job) and is_ancestor(b, before, tip(b, job))
    assert task_states(b, job) == task_states(a, job) == {"x": "cancelled", "y": "queued"}


def test_a_clone_ahead_keeps_its_tip(a: Path, b: Path) -> None:
    job = shared_job(a, b)
    ok(cli(b, "cancel", f"{job}/y"))
    ahead = tip(b, job)
    pulled = pull(b)
    assert pulled["unchanged"] == [job]
    assert (pulled["new"], pulled["updated"], pulled["merged"]) == ([], [], [])
    assert tip(b, job) == ahead
    assert task_states(b, job) == {"x": "queued", "y": "cancelled"}


def test_pull_from_a_path_and_sync(a: Path, b: Path, remote: Path) -> None:
    """A remote given as a path (not a configured name) works too; `sync` is pull then push."""
    job = submit(a, *TWO_TASKS)
    push(a)
    assert run_json(b, "pull", str(remote))["new"] == [job]
    ok(cli(b, "cancel", f"{job}/x"))
    synced = run_json(b, "sync")
    assert f"refs/swarm/jobs/{job}" in synced["push"]["pushed"]
    assert pull(a)["updated"] == [job]
    assert tip(a, job) == tip(b, job)


# -- diverged histories ------------------------------------------------------------------------


def test_diverged_clones_merge_on_push_without_force_and_converge(a: Path, b: Path, remote: Path) -> None:
    job = shared_job(a, b)
    ok(cli(a, "--json", "work", "--job", job, "-j", "1"))  # A runs the job: x (and y) succeed here
    ok(cli(b, "cancel", f"{job}/y"))  # meanwhile B cancels y
    a_tip, b_tip = tip(a, job), tip(b, job)
    a_ops, b_ops = op_ids(a, job), op_ids(b, job)

    first = push(a)
    assert first["pulls"] == []
    second = push(b)  # rejected, pulled, merged, pushed again: no force
    assert second["attempts"] == 2
    assert [p["merged"] for p in second["pulls"]] == [[job]]
    on_remote = git(remote, "rev-parse", f"refs/swarm/jobs/{job}").strip()
    assert on_remote == tip(b, job)
    assert is_ancestor(remote, a_tip, on_remote) and is_ancestor(remote, b_tip, on_remote)
    parents = git(remote, "rev-list", "--parents", "-n", "1", on_remote).split()[1:]
    assert parents == [b_tip, a_tip]  # a merge commit, local tip first
    assert git(remote, "log", "-1", "--format=%s", on_remote).startswith("merge ")

    assert pull(a)["updated"] == [job]
    assert pull(b)["unchanged"] == [job]
    assert tree(a, job) == tree(b, job)
    assert task_states(a, job) == task_states(b, job)
    assert task_states(a, job)["x"] == "succeeded"
    # y: B's cancel and A's claim of y are ordered by (clock, actor, id); the loser is a no-op
    assert task_states(a, job)["y"] in {"succeeded", "cancelled"}
    assert job_view(a, job) == job_view(b, job)
    both = a_ops | b_ops
    assert op_ids(a, job) == both and op_ids(b, job) == both
    ops = [e["op"] for e in run_json(a, "log", job)["events"]]
    assert ops.count("job_created") == 1 and "cancelled" in ops and ops.count("claimed") >= 1


def test_a_merged_history_pulls_cleanly_after_more_work_on_top(tmp_path: Path, a: Path, b: Path, remote: Path) -> None:
    """A merge commit with ordinary commits on top of it is valid history for the next pull,
    in a clone that had the job and in one that did not, even where the order of the two
    sides' operations matters (A's claim and finish of x against B's cancel of x): the merge
    ordered them by (clock, actor, id), not as the commits happen to be walked."""
    job = shared_job(a, b, 'id = "x"\ncommand = "true"\npriority = 1', 'id = "y"\ncommand = "true"')
    with closing(Swarm(a)) as swarm:
        lease = swarm.ledger.claim("worker-a", 600, START, job_id=job)
        assert lease is not None and lease.task == "x"
        swarm.ledger.finish(lease, True, START + 1)
    ok(cli(b, "cancel", f"{job}/x"))
    push(b)
    push(a)  # merges in A: B's cancel and A's claim both have clock 2
    ok(cli(a, "cancel", f"{job}/y"))  # an ordinary commit on top of the merge commit
    push(a)
    pulled = pull(b)
    assert pulled["invalid"] == {} and pulled["updated"] == [job]
    assert tree(b, job) == tree(a, job)
    assert task_states(b, job) == task_states(a, job)
    assert task_states(a, job)["y"] == "cancelled"

    c = clone_with_own_history(tmp_path, "c", remote)
    fresh = pull(c)
    assert fresh["invalid"] == {} and fresh["new"] == [job]
    assert tree(c, job) == tree(a, job)
    assert task_states(c, job) == task_states(a, job)


# -- fencing across clones ---------------------------------------------------------------------


def finding(job: str, task: str, title: str) -> Finding:
    return Finding(job=job, task=task, attempt=1, created=START, title=title)


def test_one_claim_wins_when_two_clones_claim_the_same_task(a: Path, b: Path) -> None:
    """Both clones claim the only task and finish it before they sync: after the merge the
    claim first in (clock, actor, id) order wins; the other claim and its finish are kept in
    the history but change nothing, even when the loser's finish sorts before the winner's."""
    job = shared_job(a, b, 'id = "x"\ncommand = "true"')
    swarm_a, swarm_b = Swarm(a, clock=lambda: START), Swarm(b, clock=lambda: START)
    try:
        lease_a = swarm_a.ledger.claim("worker-a", 600, START, job_id=job)
        lease_b = swarm_b.ledger.claim("worker-b", 600, START, job_id=job)
        assert lease_a is not None and lease_b is not None and lease_a.token == lease_b.token == 1
        (win, win_lease), (lose, lose_lease) = sorted([(swarm_a, lease_a), (swarm_b, lease_b)], key=lambda s: s[0].actor)
        # The winner records two job-level artifacts first, so its finish (clock 5) sorts
        # after the loser's (clock 3): only the lost claim tells the loser's finish apart.
        for n in range(2):
            win.ledger.record_artifacts(job, None, [finding(job, None, f"note {n}")], START + 1)
        win_finding, lose_finding = finding(job, "x", "winner"), finding(job, "x", "loser")
        win.ledger.finish(win_lease, True, START + 2, artifacts=[win_finding])
        lose.ledger.finish(lose_lease, True, START + 2, artifacts=[lose_finding])
        lose_finish = [op for _, op in lose.refs.history(job) if isinstance(op, TaskFinished)]
        win_finish = [op for _, op in win.refs.history(job) if isinstance(op, TaskFinished)]
        assert lose_finish[0].clock < win_finish[0].clock
    finally:
        swarm_a.close()
        swarm_b.close()

    push(a)
    push(b)
    pull(a)
    assert tree(a, job) == tree(b, job)
    with closing(Swarm(a)) as swarm:
        history = [op for _, op in swarm.refs.history(job)]
        task = swarm.refs.snapshot(job).task("x")
    claims = [op for op in history if isinstance(op, TaskClaimed)]
    finishes = [op for op in history if isinstance(op, TaskFinished)]
    assert len(claims) == 2 and len(finishes) == 2  # both kept in the history
    assert task.state is TaskState.SUCCEEDED
    assert (task.claims, task.attempts) == (1, 1)
    assert list(task.artifacts) == [artifact_id(win_finding)], "the loser's finish was applied"
    assert artifact_id(lose_finding) not in task.artifacts
    assert task_states(a, job) == task_states(b, job) == {"x": "succeeded"}


LOSER_FINISH_ACCEPTED = (
    "bug: after a pull merged two claims of the same task (both token 1), the losing clone still "
    "holds its lease: the index keys a lease by (job, task) and keeps the row when the token is the "
    "same (Index._put_lease's ON CONFLICT ... WHERE leases.token != excluded.token on the merge path, "
    "Index.reindex's leases kept by (task, token) on the fast-forward path, store/index/sync.py); "
    "Ledger._check_lease (store/leases.py) compares only token and expiry, and the reducer's fencing "
    "(model/reducer.py, _Apply.running) only the token. So the loser's finish is accepted and "
    "committed, and when its clock sorts before the winner's finish it becomes the task's result "
    "everywhere after the next merge (merge_job's lost_claims only sees claims after the merge base)"
)


def test_the_losing_clone_cannot_finish_after_it_pulled_the_winning_claim(a: Path, b: Path) -> None:
    """Both clones claim the only task, then sync before either finishes: the loser's clone now
    records the winner's claim, so its own lease is gone and its finish must be refused; the
    task ends with the winner's result."""
    job = shared_job(a, b, 'id = "x"\ncommand = "true"')
    with closing(Swarm(a)) as swarm_a, closing(Swarm(b)) as swarm_b:
        lease_a = swarm_a.ledger.claim("worker-a", 600, START, job_id=job)
        lease_b = swarm_b.ledger.claim("worker-b", 600, START, job_id=job)
        assert lease_a is not None and lease_b is not None and lease_a.token == lease_b.token == 1
        a_wins = swarm_a.actor < swarm_b.actor  # both claims have clock 2: the actor orders them
    push(a)
    push(b)  # merges: one claim wins
    pull(a)
    assert tree(a, job) == tree(b, job)
    win_finding, lose_finding = finding(job, "x", "winner"), finding(job, "x", "loser")
    with closing(Swarm(a)) as swarm_a, closing(Swarm(b)) as swarm_b:
        winner, loser = (swarm_a, swarm_b) if a_wins else (swarm_b, swarm_a)
        win_lease, lose_lease = (lease_a, lease_b) if a_wins else (lease_b, lease_a)
        task = loser.refs.snapshot(job).task("x")
        assert (task.state, task.claims, task.owner) == (TaskState.RUNNING, 1, win_lease.owner)
        refused = False
        try:
            loser.ledger.finish(lose_lease, True, START + 1, artifacts=[lose_finding])
        except LeaseLost:
            refused = True
        # the winner works a little longer (two more ops), then finishes: its finish has clock 5
        for n in range(2):
            winner.ledger.record_artifacts(job, None, [finding(job, None, f"note {n}")], START + 1)
        winner.ledger.finish(win_lease, True, START + 2, artifacts=[win_finding])
    push(a)
    push(b)
    pull(a)
    pull(b)
    assert tree(a, job) == tree(b, job)
    with closing(Swarm(a)) as swarm:
        task = swarm.refs.snapshot(job).task("x")
    assert task.state is TaskState.SUCCEEDED
    assert list(task.artifacts) == [artifact_id(win_finding)], "the losing claim's finish became the task's result"
    assert refused, "the losing clone accepted a finish for a claim that lost"


MERGE_DEPENDS_ON_SYNC_ORDER = (
    "bug: merge_job (gitswarm/store/job_merge.py) replays the operations since the merge base on the "
    "state at the merge base, but the base can already hold operations that sort after ones it does "
    "not hold (here B's claim of x, clock 3, pushed before A's merge, is in the base of B's merge, "
    "while A's claim, clock 2, is not): the replay is then not in (clock, actor, id) order over the "
    "history, so the result depends on the order of pushes and pulls, not only on the operations "
    "(docs/format.md, docs/sharing.md). B's merge finds x already running under B's claim, calls "
    "A's claim lost, drops A's accepted finish and applies B's finish of the claim that lost in "
    "A's merge: x goes from succeeded back to queued"
)


def test_a_merge_of_a_merge_keeps_the_result_of_the_first(a: Path, b: Path) -> None:
    """A claims x (clock 2); B claims x after one other op (clock 3), so A's claim wins.
    B pushes its claim; A finishes x and pulls (its merge: x succeeded, B's claim lost) and
    pushes; B finishes its lost claim with a failure and pulls. The result must be what
    replaying every operation in (clock, actor, id) order gives: x succeeded with A's result."""
    job = shared_job(a, b, 'id = "x"\ncommand = "true"\nmax_attempts = 3\npriority = 1', 'id = "y"\ncommand = "true"')
    won_finding = finding(job, "x", "a's result")
    with closing(Swarm(a)) as swarm_a, closing(Swarm(b)) as swarm_b:
        won = swarm_a.ledger.claim("worker-a", 600, START, job_id=job)  # clock 2
        swarm_b.ledger.record_artifacts(job, None, [finding(job, None, "first")], START)  # clock 2
        lost = swarm_b.ledger.claim("worker-b", 600, START, job_id=job)  # clock 3
        assert won is not None and lost is not None and won.task == lost.task == "x"
    push(b)
    with closing(Swarm(a)) as swarm_a:
        swarm_a.ledger.finish(won, True, START + 1, artifacts=[won_finding])  # clock 3
    assert push(a)["pulls"][0]["merged"] == [job]  # A's merge: A's claim won, x succeeded
    assert task_states(a, job)["x"] == "succeeded"
    with closing(Swarm(b)) as swarm_b:
        swarm_b.ledger.finish(lost, False, START + 2, error="boom")  # B has not pulled: still its lease
    push(b)  # B's merge, on a base that holds B's claim but not A's
    pull(a)
    assert tree(a, job) == tree(b, job)
    with closing(Swarm(a)) as swarm:
        task = swarm.refs.snapshot(job).task("x")
    assert (task.state, list(task.artifacts)) == (TaskState.SUCCEEDED, [artifact_id(won_finding)])
    assert task_states(a, job) == task_states(b, job) == {"x": "succeeded", "y": "queued"}


def test_after_a_merge_the_index_agrees_with_the_merged_ref(a: Path, b: Path) -> None:
    """B claims x later than A (its clock is one higher) and fails it for good, which skips y;
    A's claim of x wins the merge, so B's finish and the skip it caused are undone. B's `status`
    (the index) must then show what the merged ref holds."""
    job = shared_job(a, b, 'id = "x"\ncommand = "true"\nmax_attempts = 1', 'id = "y"\ncommand = "true"\ndepends_on = ["x"]')
    with closing(Swarm(a)) as swarm_a, closing(Swarm(b)) as swarm_b:
        won = swarm_a.ledger.claim("worker-a", 600, START, job_id=job)  # clock 2
        swarm_b.ledger.record_artifacts(job, None, [finding(job, None, "first")], START)  # clock 2
        lost = swarm_b.ledger.claim("worker-b", 600, START, job_id=job)  # clock 3: sorts after A's
        assert won is not None and lost is not None and won.task == lost.task == "x"
        swarm_b.ledger.finish(lost, False, START + 1, error="boom", retryable=False)
        assert {t.id: t.state.value for t in swarm_b.refs.snapshot(job).tasks()} == {"x": "failed", "y": "skipped"}
    push(a)
    assert pull(b)["merged"] == [job]
    with closing(Swarm(b)) as swarm:
        recorded = {t.id: t.state.value for t in swarm.refs.snapshot(job).tasks()}
    assert recorded == {"x": "running", "y": "blocked"}  # the merged ref: A's claim won
    assert task_states(b, job) == recorded, "B's index disagrees with its merged ref"
    push(b)
    pull(a)
    assert task_states(a, job) == task_states(b, job) == recorded


# -- notes -------------------------------------------------------------------------------------


def verdict_line(head: str, reviewer: str, accepted: bool = True) -> bytes:
    """A well-formed verdict record (pulled note lines that are not are dropped)."""
    verdict = Verdict(
        job="audit", created=START, producer="person", head=head, status="complete" if accepted else "incomplete",
        integrity="clean", contract="aligned" if accepted else "needs_revision", accepted=accepted, reviewer=reviewer,
    )
    return codec.encode(verdict)


def notes_show(path: Path, commit: str) -> list[str]:
    return git(path, "notes", "--ref=swarm", "show", commit).splitlines()


def test_notes_from_both_clones_merge_into_the_sorted_union_of_lines(a: Path, b: Path, remote: Path) -> None:
    job = submit(a, *TWO_TASKS)
    ok(cli(a, "cancel", f"{job}/x"))
    ok(cli(a, "cancel", f"{job}/y"))
    push(a)
    pull(b)
    root, middle, last = git(a, "rev-list", "--reverse", f"refs/swarm/jobs/{job}").split()
    both = verdict_line(middle, "both")
    lines = {
        a: [(root, verdict_line(root, "a")), (middle, verdict_line(middle, "a", False)), (middle, both)],
        b: [(middle, verdict_line(middle, "b")), (middle, both), (last, verdict_line(last, "b"))],
    }
    for n, (path, notes) in enumerate(lines.items()):
        repo = PygitRepo(path)
        for commit, line in notes:
            add_note_line(repo, commit, line, ("gitswarm", f"{path.name}@gitswarm"), START + n)

    assert push(a)["pulls"] == []
    pushed = push(b)  # the notes ref diverged: pulled, merged, pushed again
    assert [p["notes"] for p in pushed["pulls"]] == ["merged"]
    assert pull(a)["notes"] == "updated"
    assert git(a, "rev-parse", NOTES_REF) == git(b, "rev-parse", NOTES_REF) == git(remote, "rev-parse", NOTES_REF)
    expected = {
        root: [verdict_line(root, "a")],
        middle: sorted([verdict_line(middle, "a", False), both, verdict_line(middle, "b")]),
        last: [verdict_line(last, "b")],
    }
    for path in (a, b):
        for commit, want in expected.items():
            assert notes_show(path, commit) == [line.decode() for line in want]
    merge = git(a, "rev-list", "--parents", "-n", "1", NOTES_REF).split()
    assert len(merge) == 3  # a merge commit of both sides' notes


def test_git_notes_merge_cat_sort_uniq_agrees_with_the_notes_merge(a: Path, b: Path) -> None:
    """The format promises `git notes merge -s cat_sort_uniq` is a valid merge of two clones' notes."""
    job = submit(a, *TWO_TASKS)
    push(a)
    pull(b)
    commit = tip(a, job)
    add_note_line(PygitRepo(a), commit, verdict_line(commit, "a"), ("gitswarm", "a@gitswarm"), START)
    add_note_line(PygitRepo(b), commit, verdict_line(commit, "b"), ("gitswarm", "b@gitswarm"), START)
    push(a)
    push(b)
    git(a, "fetch", "-q", str(b), f"{NOTES_REF}:refs/notes/theirs")
    git(a, "notes", "--ref=swarm", "merge", "-q", "-s", "cat_sort_uniq", "refs/notes/theirs")
    assert notes_show(a, commit) == sorted([verdict_line(commit, "a").decode(), verdict_line(commit, "b").decode()])
    assert git(a, "rev-parse", f"{NOTES_REF}^{{tree}}") == git(b, "rev-parse", f"{NOTES_REF}^{{tree}}")


# -- invalid pulled history --------------------------------------------------------------------


def commit_tree(path: Path, tree_id: str, message: str, *parents: str) -> str:
    args = ["commit-tree", tree_id]
    for parent in parents:
        args += ["-p", parent]
    return subprocess.run(
        ["git", *args], cwd=path, input=message, check=True, capture_output=True, text=True
    ).stdout.strip()


def replace_in_tree(path: Path, tree_id: str, name: str, blob: str) -> str:
    entries = git(path, "ls-tree", tree_id).splitlines()
    changed = [f"100644 blob {blob}\t{name}" if line.endswith(f"\t{name}") else line for line in entries]
    assert changed != entries
    return subprocess.run(
        ["git", "mktree"], cwd=path, input="\n".join(changed) + "\n", check=True, capture_output=True, text=True
    ).stdout.strip()


def message(path: Path, commit: str) -> str:
    return git(path, "cat-file", "commit", commit).split("\n\n", 1)[1]


def test_invalid_pulled_jobs_are_named_and_kept_out(tmp_path: Path, a: Path, b: Path, remote: Path) -> None:
    good = submit(a, *TWO_TASKS)
    push(a)
    pull(b)
    mine = submit(b, 'id = "m"\ncommand = "true"', name="mine.toml", goal="b's own")
    ok(cli(a, "cancel", f"{good}/x"))  # the good job moves on the remote meanwhile
    push(a)

    # A third clone forges records with git plumbing and pushes them straight to the remote.
    c = clone_with_own_history(tmp_path, "c", remote)
    bad_state, bad_root, bad_replay = (submit(c, *TWO_TASKS, name=f"{n}.toml", goal=n) for n in ("s", "r", "p"))
    for job in (bad_state, bad_root, bad_replay):
        ok(cli(c, "cancel", f"{job}/x"))
    # 1. the tip's state blob is not JSON (its operation decodes)
    created, cancelled = git(c, "rev-list", "--reverse", f"refs/swarm/jobs/{bad_state}").split()
    junk = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=c, input="{not json", check=True, capture_output=True, text=True
    ).stdout.strip()
    forged_state = commit_tree(c, replace_in_tree(c, f"{cancelled}^{{tree}}", "state", junk), message(c, cancelled), created)
    # 2. a history whose root is a cancel, not job_created
    cancelled = git(c, "rev-parse", f"refs/swarm/jobs/{bad_root}").strip()
    forged_root = commit_tree(c, f"{cancelled}^{{tree}}", message(c, cancelled))
    # 3. a commit whose recorded state is not what its operation makes (a cancel that changed nothing)
    created, cancelled = git(c, "rev-list", "--reverse", f"refs/swarm/jobs/{bad_replay}").split()
    forged_replay = commit_tree(c, f"{created}^{{tree}}", message(c, cancelled), created)
    for job, forged in ((bad_state, forged_state), (bad_root, forged_root), (bad_replay, forged_replay)):
        git(c, "push", "-q", str(remote), f"{forged}:refs/swarm/jobs/{job}")

    before = job_refs(b)
    result = cli(b, "--json", "pull")
    assert result.code == 1, result.err
    report = result.json()
    assert sorted(report["invalid"]) == sorted([bad_state, bad_root, bad_replay])
    assert "state" in report["invalid"][bad_state]
    assert "job_created" in report["invalid"][bad_root]
    assert "does not match the job's operations" in report["invalid"][bad_replay]
    assert report["updated"] == [good]  # the good job was still pulled
    # no live ref for the invalid jobs; the good one fast-forwarded, b's own untouched
    assert job_refs(b) == before.replace(tip_of(before, good), tip(a, good))
    for job in (bad_state, bad_root, bad_replay):
        assert f"refs/swarm/jobs/{job}" not in job_refs(b)
    jobs = run_json(b, "status")["jobs"]
    assert sorted(j["id"] for j in jobs) == sorted([good, mine])
    assert task_states(b, good) == {"x": "cancelled", "y": "queued"}
    assert task_states(b, mine) == {"m": "queued"}

    again = cli(b, "-C", str(b), "pull")  # text mode names each one with its reason
    assert again.code == 1
    for job in (bad_state, bad_root, bad_replay):
        assert f"invalid: {job}: " in again.out
    assert job_refs(b) == before.replace(tip_of(before, good), tip(a, good))


FORGED_FAST_FORWARD_ACCEPTED = (
    "bug: check_history (gitswarm/engine/sharing/share.py) only decodes the new commits when the clone "
    "already has the job (`if ours is not None: ... return`), so a pulled fast-forward whose "
    "recorded state is not what its operation gives, or whose operation names a task the job does "
    "not have, is adopted as the live ref; docs/sharing.md says such a job is invalid, kept out "
    "and named"
)
FORGED_AFTER_MERGE_ACCEPTED = (
    "bug: check_history (gitswarm/engine/sharing/share.py) skips the replay check for a new job whose "
    "history has any merge commit (`if any(len(c.parents) > 1 ...): return`), so a forged commit "
    "on top of a merge, whose recorded state is not what its operation gives, is adopted; "
    "docs/sharing.md says such a job is invalid"
)


@pytest.mark.parametrize(
    "forgery",
    [
        "state-not-json",
        "state-not-replayed",
        "unknown-task",
    ],
)
def test_invalid_commits_on_a_job_the_clone_already_has_are_kept_out(
    tmp_path: Path, a: Path, b: Path, remote: Path, forgery: str
) -> None:
    """A forged commit that fast-forwards a job B already has (no force needed to push it):
    a state blob that is not JSON, a state its operation does not give (a cancel of x that
    left x queued), or an operation on a task the job does not have."""
    job = shared_job(a, b)
    c = clone_with_own_history(tmp_path, "c", remote)
    pull(c)
    created = tip(c, job)
    ok(cli(c, "cancel", f"{job}/x"))
    cancelled = tip(c, job)
    if forgery == "state-not-json":
        junk = subprocess.run(
            ["git", "hash-object", "-w", "--stdin"], cwd=c, input="{not json", check=True, capture_output=True, text=True
        ).stdout.strip()
        forged = commit_tree(c, replace_in_tree(c, f"{cancelled}^{{tree}}", "state", junk), message(c, cancelled), created)
    elif forgery == "state-not-replayed":
        forged = commit_tree(c, f"{created}^{{tree}}", message(c, cancelled), created)
    else:
        renamed = message(c, cancelled).replace("cancelled x", "cancelled nope").replace('"task":"x"', '"task":"nope"')
        assert '"task":"nope"' in renamed
        forged = commit_tree(c, f"{cancelled}^{{tree}}", renamed, created)
    git(c, "push", "-q", str(remote), f"{forged}:refs/swarm/jobs/{job}")  # a fast-forward

    before = job_refs(b)
    result = cli(b, "--json", "pull")
    report = result.json()
    assert list(report["invalid"]) == [job], report
    assert result.code == 1
    assert job_refs(b) == before
    assert task_states(b, job) == {"x": "queued", "y": "queued"}
    assert run_json(b, "log", job)["events"][-1]["op"] == "job_created"


def test_a_forged_commit_after_a_merge_is_kept_out_of_a_clone_new_to_the_job(
    tmp_path: Path, a: Path, b: Path, remote: Path
) -> None:
    job = shared_job(a, b, *TWO_TASKS, 'id = "z"\ncommand = "true"')
    ok(cli(a, "cancel", f"{job}/x"))
    ok(cli(b, "cancel", f"{job}/y"))
    push(a)
    push(b)  # a merge commit on the remote
    merged = git(remote, "rev-parse", f"refs/swarm/jobs/{job}").strip()
    c = clone_with_own_history(tmp_path, "c", remote)
    pull(c)
    ok(cli(c, "cancel", f"{job}/z"))
    # C's cancel of z, but with the merge's tree: z still queued
    forged = commit_tree(c, f"{merged}^{{tree}}", message(c, tip(c, job)), merged)
    git(c, "push", "-q", str(remote), f"{forged}:refs/swarm/jobs/{job}")  # a fast-forward

    d = clone_with_own_history(tmp_path, "d", remote)
    result = cli(d, "--json", "pull")
    assert list(result.json()["invalid"]) == [job]
    assert result.code == 1
    assert job_refs(d) == ""


def tip_of(for_each_ref: str, job: str) -> str:
    line = next(line for line in for_each_ref.splitlines() if line.endswith(f"refs/swarm/jobs/{job}"))
    return line.split()[0]


# -- trust -------------------------------------------------------------------------------------


def test_pulled_jobs_do_not_run_until_approved_or_trusted(a: Path, b: Path) -> None:
    job = submit(a, *TWO_TASKS)
    push(a)
    pull(b)
    own = submit(b, 'id = "m"\ncommand = "true"', name="own.toml", goal="b's own")

    idle = cli(b, "--json", "work", "--until-idle", "-j", "1")
    assert idle.code == 0, idle.err
    events = [json.loads(line) for line in idle.err.splitlines() if line.startswith("{")]
    assert {"event": "untrusted", "jobs": [job]}.items() <= next(e for e in events if e["event"] == "untrusted").items()
    assert task_states(b, job) == {"x": "queued", "y": "queued"}  # the pulled job is data here
    assert task_states(b, own) == {"m": "succeeded"}  # b's own job ran

    refused = cli(b, "work", "--job", job, "-j", "1")
    assert refused.code == 2
    assert "approve" in refused.err and job in refused.err
    assert task_states(b, job) == {"x": "queued", "y": "queued"}

    assert run_json(b, "approve", job[:10]) == {"approved": job}
    ok(cli(b, "--json", "work", "--job", job, "-j", "1"))
    assert task_states(b, job) == {"x": "succeeded", "y": "succeeded"}

    trusted = submit(a, 'id = "t"\ncommand = "true"', name="t.toml", goal="trusted")
    push(a)
    assert pull(b)["new"] == [trusted]
    ok(cli(b, "--json", "work", "--until-idle", "-j", "1"))
    assert task_states(b, trusted) == {"t": "queued"}
    ok(cli(b, "--json", "work", "--until-idle", "-j", "1", "--trust", "origin"))
    assert task_states(b, trusted) == {"t": "succeeded"}


# -- push never forces -------------------------------------------------------------------------


def remote_reflog(remote: Path, ref: str) -> list[str]:
    """Every value the remote's ref took, oldest first."""
    return list(reversed(git(remote, "reflog", "show", "--format=%H", ref).split()))


def test_push_merges_a_diverged_remote_instead_of_forcing(a: Path, b: Path, remote: Path) -> None:
    git(remote, "config", "core.logAllRefUpdates", "always")
    job = shared_job(a, b)
    ok(cli(b, "cancel", f"{job}/y"))
    push(b)
    remote_old = git(remote, "rev-parse", f"refs/swarm/jobs/{job}").strip()
    b_cancel = {e["record"]["id"] for e in run_json(b, "log", job)["events"] if e["op"] == "cancelled"}

    ok(cli(a, "cancel", f"{job}/x"))  # A has not pulled: its ref diverged from the remote's
    a_old = tip(a, job)
    pushed = push(a)
    assert pushed["attempts"] == 2 and [p["merged"] for p in pushed["pulls"]] == [[job]]
    remote_new = git(remote, "rev-parse", f"refs/swarm/jobs/{job}").strip()
    parents = git(remote, "rev-list", "--parents", "-n", "1", remote_new).split()[1:]
    assert parents == [a_old, remote_old]
    assert b_cancel <= op_ids(a, job)  # the remote's op is still in the history
    assert task_states(a, job) == {"x": "cancelled", "y": "cancelled"}
    history = remote_reflog(remote, f"refs/swarm/jobs/{job}")
    assert history[-1] == remote_new and len(history) >= 3
    for old, new in itertools.pairwise(history):
        assert is_ancestor(remote, old, new), f"the remote's ref moved from {old} to {new}, not a descendant"


def test_push_gives_up_rather_than_overwrite_an_unmergeable_remote(tmp_path: Path, a: Path, b: Path, remote: Path) -> None:
    """A remote ref that cannot be merged (its history is invalid) is never overwritten: the
    push fails, saying so, and the remote keeps what it had."""
    job = shared_job(a, b)
    c = clone_with_own_history(tmp_path, "c", remote)
    other = submit(c, *TWO_TASKS)
    ok(cli(c, "cancel", f"{other}/x"))
    cancelled = git(c, "rev-parse", f"refs/swarm/jobs/{other}").strip()
    rootless = commit_tree(c, f"{cancelled}^{{tree}}", message(c, cancelled))
    git(c, "push", "-q", "--force", str(remote), f"{rootless}:refs/swarm/jobs/{job}")

    ok(cli(a, "cancel", f"{job}/x"))
    result = cli(a, "push")
    assert result.code == 1, result.out
    assert "push to origin: the remote holds state that cannot be merged" in result.err and job in result.err
    assert git(remote, "rev-parse", f"refs/swarm/jobs/{job}").strip() == rootless
    assert task_states(a, job) == {"x": "cancelled", "y": "queued"}


def test_a_pulled_patch_is_not_verified_or_merged_here_until_its_job_is_approved(a: Path, b: Path) -> None:
    """Its checks came from another clone: running them is running that clone's instructions."""
    register_scripted(a)
    delegated = cli(a, "--json", "delegate", "write hello.txt: hi", "--adapter", "scripted", "--check", "test -f hello.txt")
    assert delegated.code == 0, delegated.err
    patch = next(p["id"] for p in delegated.json()["summary"]["patches"])
    push(a)
    pull(b)
    refused = cli(b, "verify", patch)
    assert refused.code == 2 and "approve" in refused.err and refused.err.count("\n") == 1
    assert cli(b, "merge", patch).code == 2
    ok(cli(b, "approve", delegated.json()["id"]))
    assert cli(b, "--json", "verify", patch).code == 0  # its head came with the state (refs/swarm/patches/)


def test_an_op_made_after_a_merge_sorts_after_the_ops_the_merge_skipped(a: Path, b: Path) -> None:
    """Found by the convergence machine: A cancels t0 while B claims t0 and t1 (B's claim of t0
    loses in the merge). A's retry of t0 after the merge must get a clock above B's skipped
    claim, or replaying A's history elsewhere would let that claim apply and B would call A's
    valid history invalid."""
    job = shared_job(a, b, 'id = "t0"\ncommand = "true"', 'id = "t1"\ncommand = "true"')
    ok(cli(a, "cancel", f"{job}/t0"))
    with closing(Swarm(b)) as swarm:
        now = swarm.clock()
        assert swarm.ledger.claim("w-b", 600, now, job_id=job) is not None
        assert swarm.ledger.claim("w-b", 600, now, job_id=job) is not None
    push(b)
    assert pull(a)["merged"] == [job]
    ok(cli(a, "retry", f"{job}/t0"))
    push(a)
    pulled = pull(b)
    assert pulled["invalid"] == {} and pulled["updated"] == [job]
    assert tree(a, job) == tree(b, job)
