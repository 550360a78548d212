"""Many machines, one swarm, through a real network remote: `git daemon` on loopback.

Three clones with homes of their own are three machines, each running
`gitswarm work --remote origin -j 2` as a user would. Every task's command
writes "start TASK MACHINE" and "end TASK MACHINE" to one log, so the tests
see what ran where and how often; the job's history on the remote says
which finishes were accepted and which leases were expired.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gitswarm.engine.machines.remote_watch import BUSY_SYNC_SECONDS
from gitswarm.model.ids import new_id
from gitswarm.store.holders import this_process
from tests.conftest import isolation_env
from tests.forge import forge_history, history_ops, push, run_git
from tests.netremote import GitDaemon
from tests.proctools import children, kill_quietly, wait_for

MACHINES = 3


class Machine:
    def __init__(self, root: Path, name: str, url: str) -> None:
        self.name = name
        home = root / f"home-{name}"
        home.mkdir()
        self.env = {**os.environ, **isolation_env(home)}
        self.path = root / name
        subprocess.run(["git", "clone", "-q", url, str(self.path)], check=True, env=self.env, capture_output=True)

    def gitswarm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "gitswarm", *args], cwd=self.path, env=self.env, capture_output=True, text=True, timeout=120
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{self.name}: gitswarm {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
        return done

    def work(self, job: str, *extra: str) -> subprocess.Popen[str]:
        """`work --remote` in a session of its own (the machine's processes, to kill as one)."""
        return subprocess.Popen(
            [sys.executable, "-m", "gitswarm", "--json", "work", "--remote", "origin", "--trust", "origin", "--job", job, "-j", "2", *extra],
            cwd=self.path, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )

    def tip(self, job: str) -> str:
        return subprocess.run(
            ["git", "rev-parse", f"refs/swarm/jobs/{job}"], cwd=self.path, env=self.env, capture_output=True, text=True, check=True
        ).stdout.strip()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[GitDaemon]:
    served = GitDaemon(tmp_path, dict(os.environ))
    served.start()
    seed = tmp_path / "seed"
    seed.mkdir()
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "init"], ["push", "-q", served.url, "main"]):
        if args[0] == "add":
            (seed / "README.md").write_text("hello\n")
            agent = f'executable = {json.dumps(sys.executable)}\nargs = ["-m", "gitswarm.scripted_agent", "{{prompt}}"]\n'
            (seed / ".gitswarm" / "adapters").mkdir(parents=True)
            (seed / ".gitswarm" / "adapters" / "scripted.toml").write_text(agent)  # the scripted agent, on every clone
        subprocess.run(["git", *args], cwd=seed, check=True, capture_output=True)
    yield served
    served.stop()


@pytest.fixture
def machines(tmp_path: Path, daemon: GitDaemon) -> list[Machine]:
    return [Machine(tmp_path, f"m{i}", daemon.url) for i in range(MACHINES)]


def submit(machine: Machine, tmp_path: Path, count: int, seconds: float, *, wait_for_machines: int = 1) -> tuple[str, Path]:
    """A job of COUNT tasks that each sleep SECONDS; with WAIT_FOR_MACHINES, a task waits (at most 30 s) until
    that many machines have started one, so a spread does not depend on how fast each machine's processes start."""
    log = tmp_path / "ran.log"
    gate = (
        f"i=0; while [ $(cut -d' ' -f3 {log} | sort -u | wc -l) -lt {wait_for_machines} ] && [ $i -lt 300 ]; "
        "do sleep 0.1; i=$((i+1)); done; "
    )
    command = f'echo start $T $(basename $(pwd)) >> {log}; {gate}sleep {seconds}; echo end $T $(basename $(pwd)) >> {log}'
    tasks = "".join(f'[[tasks]]\nid = "t{i:03d}"\ncommand = "T=t{i:03d}; {command}"\n' for i in range(count))
    spec = tmp_path / "spec.toml"
    spec.write_text(f'goal = "many machines"\n{tasks}')
    job = json.loads(machine.gitswarm("--json", "submit", "--remote", "origin", str(spec)).stdout)["id"]
    return job, log


def events(log: Path) -> list[tuple[str, str, str]]:
    return [tuple(line.split()) for line in log.read_text().splitlines()] if log.exists() else []  # type: ignore[misc]


def history(machine: Machine, job: str) -> list[dict]:
    return json.loads(machine.gitswarm("--json", "log", job).stdout)["events"]


def forge_after_claim(
    attacker: Machine, job: str, task: str, to: str, more: Callable[[dict, int, str], list[dict]],
) -> tuple[str, dict]:
    """What a machine with push access writes with git plumbing: the history of `task`'s claim ref as the remote
    holds it, and one commit more of the ops `more(claim, clock, key)` gives (claim: that task's claim op; clock:
    the history's highest Lamport clock; key: the attacker's own machine key, `ssh-ed25519 AAAA...`), signed with
    that key (`git commit-tree -S`, git's ssh signing), pushed to ref `to`. The attacker's key, and the claim."""
    attacker.gitswarm("machine-key")  # its own key, made on first use
    key_file = attacker.path / ".git" / "gitswarm" / "machine.key"
    public = " ".join(subprocess.run(["ssh-keygen", "-y", "-f", str(key_file)], capture_output=True, text=True, check=True).stdout.split()[:2])
    held = f"refs/swarm/claims/{job}/{task}"
    run_git(attacker.path, "fetch", "-q", "origin", f"+{held}:{held}")
    tip = run_git(attacker.path, "rev-parse", held)
    commits = history_ops(attacker.path, tip)
    claim = next(op for ops in commits for op in ops if op["op"] == "claimed" and op["task"] == task)
    clock = max(o["clock"] for c in commits for o in c)
    unsigned = forge_history(attacker.path, [*commits, more(claim, clock, public)], onto=tip)
    tree, message = run_git(attacker.path, "rev-parse", f"{unsigned}^{{tree}}"), run_git(attacker.path, "log", "-1", "--format=%B", unsigned)
    signed = run_git(
        attacker.path, "-c", "gpg.format=ssh", "-c", f"user.signingkey={key_file}", "commit-tree", "-S", tree, "-p", tip,
        input=(message + "\n").encode(),
    )
    assert "gpgsig" in run_git(attacker.path, "cat-file", "commit", signed)
    push(attacker.path, f"{signed}:{to}")
    return public, claim


def finish_all(running: list[subprocess.Popen[str]], timeout: float = 120) -> list[dict]:
    """Wait for every machine to exit 0; their progress events (--json: one JSON object per line on stderr)."""
    said = []
    for process in running:
        _, err = process.communicate(timeout=timeout)
        assert process.returncode == 0, err[-3000:]
        said += [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    return said


def assert_converged(machines: list[Machine], daemon: GitDaemon, job: str) -> None:
    """Every clone and the remote hold the same job tip; git fsck and gitswarm doctor are clean everywhere."""
    remote = subprocess.run(["git", "rev-parse", f"refs/swarm/jobs/{job}"], cwd=daemon.bare, capture_output=True, text=True, check=True)
    for machine in machines:
        machine.gitswarm("pull", "origin")
        assert machine.tip(job) == remote.stdout.strip(), machine.name
        fsck = subprocess.run(["git", "fsck", "--strict"], cwd=machine.path, env=machine.env, capture_output=True, text=True)
        assert fsck.returncode == 0, fsck.stderr
        doctor = machine.gitswarm("--json", "doctor", check=False)
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    fsck = subprocess.run(["git", "fsck", "--strict"], cwd=daemon.bare, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr


def test_three_machines_run_each_task_once(machines: list[Machine], daemon: GitDaemon, tmp_path: Path) -> None:
    job, log = submit(machines[0], tmp_path, 24, 0.2, wait_for_machines=2)  # a machine that starts late still gets work
    said = finish_all([m.work(job) for m in machines])
    ran = events(log)
    starts = Counter(task for kind, task, _ in ran if kind == "start")
    assert sorted(starts) == [f"t{i:03d}" for i in range(24)] and set(starts.values()) == {1}
    assert len({where for _, _, where in ran}) >= 2, "the work was spread over the machines"
    log_events = history(machines[1], job)
    finished = Counter(e["task"] for e in log_events if e["op"] == "finished")
    assert set(finished.values()) == {1} and len(finished) == 24
    actors = {m.path.joinpath(".git", "gitswarm", "actor").read_text().strip() for m in machines}
    # The progress events name each machine (`host.clone`) and the worker running each task, of whichever machine.
    names = {event["machine"] for event in said if event["event"] == "start"}
    assert {name.rsplit(".", 1)[-1] for name in names} == {actor[-6:] for actor in actors}
    running = [event for event in said if event["event"] == "task" and event["state"] == "running"]
    assert running and all(event["owner"].rsplit(".", 1)[0] in names for event in running)
    assert all(event["owner"] is None for event in said if event["event"] == "task" and event["state"] != "running")
    for claim in (e for e in log_events if e["op"] == "claimed"):  # each names the machine whose worker ran it
        assert claim["actor"] in actors and claim["record"]["owner"].split(".")[-2] == claim["actor"][-6:]
    status = json.loads(machines[2].gitswarm("--json", "status", "--remote", "origin", job).stdout)
    assert status["status"] == "succeeded"
    assert_converged(machines, daemon, job)


def descendants(pid: int) -> list[int]:
    found, pending = [], [pid]
    while pending:
        for child in children(pending.pop()):
            found.append(child)
            pending.append(child)
    return found


def kill_machine(process: subprocess.Popen[str]) -> None:
    """kill -9 of every process of a machine: stopped first, so that none forks a new one meanwhile.
    Adapters run in sessions of their own: they are found as descendants, not by process group."""
    pids = [process.pid]
    for _ in range(3):
        kill_quietly(pids, signal.SIGSTOP)
        pids = [process.pid, *descendants(process.pid)]
    kill_quietly(pids, signal.SIGKILL)
    process.wait()


def test_a_machine_killed_mid_run_has_its_tasks_finished_elsewhere(machines: list[Machine], daemon: GitDaemon, tmp_path: Path) -> None:
    job, log = submit(machines[0], tmp_path, 15, 1.0)
    running = [m.work(job, "--lease", "4", "--clock-skew", "1") for m in machines]
    wait_for(lambda: any(kind == "start" and where == "m0" for kind, _, where in events(log)), 60, "m0 to start a task")
    kill_machine(running[0])
    held = {task for kind, task, where in events(log) if kind == "start" and where == "m0"}
    finish_all(running[1:])
    ran = events(log)
    ends = Counter(task for kind, task, where in ran if kind == "end" and where != "m0")
    starts = Counter(task for kind, task, _ in ran if kind == "start")
    assert set(starts) == {f"t{i:03d}" for i in range(15)}
    log_events = history(machines[1], job)
    expired = {e["task"] for e in log_events if e["op"] == "expired"}
    finished = Counter(e["task"] for e in log_events if e["op"] == "finished")
    assert set(finished.values()) == {1} and len(finished) == 15  # exactly one accepted finish each
    actor = machines[0].path.joinpath(".git", "gitswarm", "actor").read_text().strip()
    claimed_by_m0 = {e["task"] for e in log_events if e["op"] == "claimed" and e["actor"] == actor}
    twice = {task for task, n in starts.items() if n > 1}
    # A command ran again only where a lease was really lost: m0's (some claimed ahead, not started yet), or, on
    # this loaded machine, a live one's whose renewal came later than its deadline and the clock skew.
    assert twice <= expired, (twice, expired)
    assert held <= claimed_by_m0 and claimed_by_m0 - {e["task"] for e in log_events if e["op"] == "finished" and e["actor"] == actor} <= expired
    unfinished_on_m0 = held - {task for kind, task, where in ran if kind == "end" and where == "m0"}
    assert unfinished_on_m0, "m0 was killed while it held a task"
    assert unfinished_on_m0 <= expired and all(ends[task] == 1 for task in unfinished_on_m0)
    assert_converged(machines, daemon, job)


def test_the_remote_down_for_ten_seconds_loses_nothing(machines: list[Machine], daemon: GitDaemon, tmp_path: Path) -> None:
    job, log = submit(machines[0], tmp_path, 12, 0.6)
    running = [m.work(job) for m in machines]
    wait_for(lambda: sum(kind == "end" for kind, _, _ in events(log)) >= 3, 60, "three tasks to finish")
    daemon.stop()
    down = time.monotonic()
    time.sleep(10)
    daemon.start()
    said = finish_all(running)
    assert time.monotonic() - down >= 10
    outage = [e for e in said if e["event"] == "remote" and not e["reachable"]]
    fetches = [e for e in outage if e["what"] == "fetch"]  # they said what they waited for, and when they try again
    assert fetches and all(e["said"] and e["retry_in"] > 0 for e in fetches) and all(e["said"] for e in outage), said
    starts = Counter(task for kind, task, _ in events(log) if kind == "start")
    assert len(starts) == 12 and set(starts.values()) == {1}, starts
    finished = Counter(e["task"] for e in history(machines[2], job) if e["op"] == "finished")
    assert len(finished) == 12 and set(finished.values()) == {1}
    assert_converged(machines, daemon, job)


def test_a_cancel_made_elsewhere_stops_a_busy_machine_s_tasks_within_seconds(
    machines: list[Machine], daemon: GitDaemon, tmp_path: Path,
) -> None:
    # Every worker of m0 runs a task, so its watch fetches only every BUSY_SYNC_SECONDS (engine/machines/remote_watch.py):
    # the cancel m1 pushes still stops both tasks within that, not at their end (60 s) nor their lease's.
    job, log = submit(machines[0], tmp_path, 2, 60)
    running = machines[0].work(job)
    wait_for(lambda: sum(kind == "start" for kind, _, _ in events(log)) == 2, 60, "both tasks to start on m0")
    machines[1].gitswarm("pull", "origin")
    machines[1].gitswarm("cancel", job)
    machines[1].gitswarm("push", "origin")
    cancelled = time.monotonic()
    running.communicate(timeout=60)
    assert time.monotonic() - cancelled < BUSY_SYNC_SECONDS + 10
    assert not [task for kind, task, _ in events(log) if kind == "end"]  # stopped, not run to their end
    assert json.loads(machines[0].gitswarm("--json", "status", job).stdout)["status"] == "cancelled"


def test_a_patch_made_on_one_machine_is_verified_on_another(machines: list[Machine], daemon: GitDaemon, tmp_path: Path) -> None:
    """The implement task's head travels with its finish; another machine verifies it, and the verdict
    travels back as a note."""
    spec = tmp_path / "fix.toml"
    spec.write_text(
        'goal = "fix the greeting"\n[[tasks]]\nid = "fix"\nmode = "implement"\nadapter = "scripted"\n'
        'prompt = "edit README.md: replace hello with world"\nchecks = ["grep -qx world README.md"]\n'
    )
    made = json.loads(machines[0].gitswarm("--json", "run", "--remote", "origin", str(spec), "-j", "1").stdout)
    assert made["status"] == "succeeded"
    job = made["id"]
    patch = next(a for a in made["artifacts"] if a["kind"] == "patch")["id"]
    head = json.loads(machines[0].gitswarm("--json", "artifact", patch).stdout)["record"]["head"]
    branch = subprocess.run(["git", "rev-parse", f"refs/swarm/branches/{job}/fix"], cwd=daemon.bare, capture_output=True, text=True, check=True)
    assert branch.stdout.strip() == head  # on the remote, with the finish

    other = machines[1]
    other.gitswarm("pull", "origin")
    noted = json.loads(other.gitswarm("--json", "status", job).stdout)["reviews"][head]
    assert [r["accepted"] for r in noted] == [True]  # the verdict of the machine that made it travelled with the run
    other.gitswarm("approve", job)
    verified = json.loads(other.gitswarm("--json", "verify", patch).stdout)
    assert verified["accepted"] and verified["head"] == head
    other.gitswarm("push", "origin")

    machines[0].gitswarm("pull", "origin")
    reviews = json.loads(machines[0].gitswarm("--json", "status", job).stdout)["reviews"][head]
    assert reviews[0]["provenance"] == "this clone"
    travelled = [r for r in reviews if r["provenance"] != "this clone"]
    # The other machine's verdict is here; unsigned, it is shown and not counted (docs/sharing.md).
    assert travelled and travelled[0]["accepted"] and not travelled[0]["counted"]


def test_a_forged_history_on_the_remote_is_refused_and_nothing_runs(machines: list[Machine], daemon: GitDaemon, tmp_path: Path) -> None:
    """Someone with push access appends a hand-made `renewed` (a deadline before 1970) to a job's tip on
    the remote with git plumbing. No machine takes it: `work --remote --job` says why, exits 1, runs
    nothing, and the clone that made the job keeps its own tip."""
    job, log = submit(machines[0], tmp_path, 3, 0.1)
    ours = machines[0].tip(job)
    attacker = machines[2].path
    run_git(attacker, "fetch", "-q", "origin", f"+refs/swarm/jobs/{job}:refs/swarm/jobs/{job}")
    commits = history_ops(attacker, ours)
    renewed = {"op": "renewed", "v": 1, "id": new_id(), "clock": 2, "at": 1.0e9, "actor": new_id(), "task": "t000", "token": 1,
               "lease_expires": -1.0}
    forged = forge_history(attacker, [*commits, [renewed]], onto=ours)
    push(attacker, f"{forged}:refs/swarm/jobs/{job}")

    made_it = machines[0].gitswarm("--json", "work", "--remote", "origin", "--trust", "origin", "--job", job, check=False)
    assert made_it.returncode == 1, made_it.stderr
    assert "refused here" in made_it.stderr and "lease_expires" in made_it.stderr

    newcomer = machines[1].gitswarm("--json", "work", "--remote", "origin", "--trust", "origin", "--until-idle", check=False)
    assert newcomer.returncode == 0, newcomer.stderr  # nothing it may take: idle at once
    assert f"job {job} on origin refused here" in newcomer.stderr and "lease_expires" in newcomer.stderr
    absent = subprocess.run(["git", "rev-parse", "-q", "--verify", f"refs/swarm/jobs/{job}"], cwd=machines[1].path, capture_output=True)
    assert absent.returncode == 1  # nothing of the forged job was taken
    assert not events(log)  # no task ran anywhere
    assert machines[0].tip(job) == ours


def test_a_forged_finish_of_a_running_task_never_counts(machines: list[Machine], daemon: GitDaemon, tmp_path: Path) -> None:
    """While m1 runs the only task, someone with push access appends `finished ok` for it, copying m1's actor and
    the task's token, with git plumbing. The commit is not signed by the machine key m1's claim named: no clone
    counts it, the command runs once, `work --remote` ends (naming the refused job), and the task never succeeds."""
    job, log = submit(machines[0], tmp_path, 1, 4.0)
    running = machines[1].work(job)
    wait_for(lambda: any(kind == "start" for kind, _, _ in events(log)), 60, "m1 to start the task")
    attacker = machines[2].path
    ref = f"refs/swarm/claims/{job}/t000"  # where the task's lease history is on the remote
    run_git(attacker, "fetch", "-q", "origin", f"+{ref}:{ref}")
    tip = run_git(attacker, "rev-parse", ref)
    commits = history_ops(attacker, tip)
    claim = next(op for ops in commits for op in ops if op["op"] == "claimed")
    assert claim["key"].startswith("ssh-ed25519 ")
    finished = {"op": "finished", "v": 1, "id": new_id(), "clock": max(o["clock"] for c in commits for o in c) + 1,
                "at": claim["at"] + 1, "actor": claim["actor"], "task": claim["task"], "token": claim["token"], "ok": True}
    push(attacker, f"{forge_history(attacker, [*commits, [finished]], onto=tip)}:{ref}")
    _, err = running.communicate(timeout=60)
    assert running.returncode == 1 and "refused here" in err, err[-2000:]  # `work --remote --job` of a refused job
    assert "it did not sign" in err, err[-2000:]
    assert [kind for kind, _, _ in events(log)].count("start") == 1
    for machine in machines[:2]:
        status = json.loads(machine.gitswarm("--json", "status", job).stdout)
        assert status["tasks"][0]["state"] != "succeeded", machine.name


def test_a_finish_of_another_machine_s_lease_in_a_commit_another_machine_signed_never_counts(
    machines: list[Machine], daemon: GitDaemon, tmp_path: Path,
) -> None:
    """The shape of a group commit, forged: while m1 runs a task, m2's owner bundles m1's lease's `finished ok`
    with a claim of its own in one commit, signed with m2's own machine key (`git commit-tree -S`, git's ssh
    signing), and pushes it to the task's claim ref with git plumbing. Every op of a commit answers to the key its
    lease's claim named, not to whoever signed the commit: the finish is refused as signed by another key, the
    command runs once, and the task never succeeds."""
    job, log = submit(machines[0], tmp_path, 2, 4.0)
    running = machines[1].work(job, "-j", "1")
    wait_for(lambda: any(kind == "start" for kind, _, _ in events(log)), 60, "m1 to start a task")
    started = next(task for kind, task, _ in events(log) if kind == "start")
    other = "t001" if started == "t000" else "t000"

    def bundled(claim: dict, clock: int, key: str) -> list[dict]:  # m1's lease's finish, with a claim of m2's own
        finished = {"op": "finished", "v": 1, "id": new_id(), "clock": clock + 1, "at": claim["at"] + 1, "actor": claim["actor"],
                    "task": started, "token": claim["token"], "ok": True}
        own_claim = {"op": "claimed", "v": 1, "id": new_id(), "clock": clock + 1, "at": claim["at"] + 1, "actor": claim["actor"],
                     "task": other, "token": 1, "owner": "host.m2.w-forger", "lease_expires": claim["at"] + 30, "key": key}
        return [finished, own_claim]

    public, _ = forge_after_claim(machines[2], job, started, f"refs/swarm/claims/{job}/{started}", bundled)
    _, err = running.communicate(timeout=60)
    assert running.returncode == 1 and "refused here" in err, err[-2000:]
    assert f"signed by another key (...{public[-12:]})" in err, err[-2000:]  # m2's signature, checked and not m1's
    assert [kind for kind, _, _ in events(log)].count("start") == 1
    for machine in machines[:2]:
        status = json.loads(machine.gitswarm("--json", "status", job).stdout)
        assert all(task["state"] != "succeeded" for task in status["tasks"]), machine.name


def test_a_claim_in_the_name_of_another_machine_s_worker_is_not_run_by_that_worker(
    machines: list[Machine], daemon: GitDaemon, tmp_path: Path,
) -> None:
    """A worker's name is in every claim it makes, for any machine to read. While m1's one worker runs a task,
    m2 claims the job's other task in that worker's name: a claim commit made with git plumbing, naming m2's own
    machine key and signed with it (`git commit-tree -S`), pushed to the task's claim ref. Valid as m2's lease,
    it is not a sibling's claim for m1's worker (m1's key did not make it): the worker does not run it when its
    own task ends (it would finish it in a commit signed by another key, which every clone refuses), nor
    expires it when it stops."""
    job, log = submit(machines[0], tmp_path, 2, 3.0)
    running = machines[1].work(job, "-j", "1")
    try:
        wait_for(lambda: any(kind == "start" for kind, _, _ in events(log)), 60, "m1 to start a task")
        started = next(task for kind, task, _ in events(log) if kind == "start")
        other = "t001" if started == "t000" else "t000"
        def in_its_name(claim: dict, clock: int, key: str) -> list[dict]:  # m2's claim of the other task, in m1's worker's name
            return [{"op": "claimed", "v": 1, "id": new_id(), "clock": clock + 1, "at": claim["at"], "actor": claim["actor"],
                     "task": other, "token": 1, "owner": claim["owner"], "lease_expires": claim["at"] + 120, "key": key}]

        _, claim = forge_after_claim(machines[2], job, started, f"refs/swarm/claims/{job}/{other}", in_its_name)
        def state_on_m1(task: str) -> str:
            tasks = json.loads(machines[1].gitswarm("--json", "status", job).stdout)["tasks"]
            return next(t["state"] for t in tasks if t["id"] == task)

        wait_for(lambda: state_on_m1(started) == "succeeded", 60, f"m1's finish of {started} to land")
        time.sleep(2.0)  # its worker, its finish pushed, looked for work: found the other task held, and waits
        assert [task for kind, task, _ in events(log) if kind == "start"] == [started]
        assert running.poll() is None  # waiting for m2's lease to end, not refused: the claim is m2's to make
        status = json.loads(machines[1].gitswarm("--json", "status", job).stdout)
        held_by = {task["id"]: (task["state"], task["owner"]) for task in status["tasks"]}
        assert held_by[started][0] == "succeeded" and held_by[other] == ("running", claim["owner"])
    finally:
        running.terminate()
        running.communicate(timeout=60)
    # Stopped, m1 released what its worker held: not m2's lease in its name (an expiry of a live lease of another
    # key, which every clone would refuse, and the job with it).
    pulled = machines[0].gitswarm("--json", "pull", "origin", check=False)
    assert pulled.returncode == 0, pulled.stdout[-2000:]
    status = json.loads(machines[0].gitswarm("--json", "status", job).stdout)
    assert {task["id"]: task["state"] for task in status["tasks"]}[other] == "running"


def test_a_claim_naming_a_dead_process_of_this_machine_is_not_ended_here_by_recover(
    machines: list[Machine], daemon: GitDaemon, tmp_path: Path,
) -> None:
    """A local run's claims name the process that holds them (host, boot id, pid), and such claims may be pushed:
    anyone can copy them. While m1 runs a task, m2 claims the other with git plumbing, naming its own machine key,
    a worker name of a local run's kind and a holder process of this machine that is gone, and signs it. m0 pulls
    it, rebuilds its index and runs `recover`, which ends the leases of dead processes here: not that one (its
    expiry, unsigned and before the deadline, every clone would refuse, and the job with it)."""
    job, log = submit(machines[0], tmp_path, 2, 8.0)
    running = machines[1].work(job, "-j", "1")
    try:
        wait_for(lambda: any(kind == "start" for kind, _, _ in events(log)), 60, "m1 to start a task")
        started = next(task for kind, task, _ in events(log) if kind == "start")
        other = "t001" if started == "t000" else "t000"
        gone = subprocess.Popen(["true"])
        gone.wait()
        here = this_process()  # the clones run on this machine: its host and boot id are theirs
        dead = {"host": here.host, "boot": here.boot, "pid": gone.pid, "start": 1}

        def held_by_a_dead_process(claim: dict, clock: int, key: str) -> list[dict]:
            return [{"op": "claimed", "v": 1, "id": new_id(), "clock": clock + 1, "at": claim["at"], "actor": claim["actor"],
                     "task": other, "token": 1, "owner": "w-local01", "lease_expires": claim["at"] + 120, "key": key,
                     "holder": dead}]

        forge_after_claim(machines[2], job, started, f"refs/swarm/claims/{job}/{other}", held_by_a_dead_process)
        # While m1's task runs, its claim is all m1 pushed: m0 takes the forged claim as a fast-forward, on the line
        # of first parents where a rebuilt index looks for the processes claims name.
        m0 = machines[0]
        m0.gitswarm("pull", "origin")
        m0.gitswarm("index", "rebuild")
        recovered = json.loads(m0.gitswarm("--json", "recover").stdout)
        assert f"{job}/{other}" not in recovered["expired"], recovered
    finally:
        running.terminate()
        running.communicate(timeout=60)
    machines[0].gitswarm("push", "origin")  # whatever m0 holds goes to the remote: none of it is refused elsewhere
    pulled = machines[1].gitswarm("--json", "pull", "origin", check=False)
    assert pulled.returncode == 0, pulled.stdout[-2000:]
    status = json.loads(machines[1].gitswarm("--json", "status", job).stdout)
    assert {task["id"]: task["state"] for task in status["tasks"]}[other] == "running"
