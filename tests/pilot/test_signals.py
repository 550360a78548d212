"""SIGTERM and SIGHUP to `gitswarm mcp` while it works: what it started stops, nothing half-done is
recorded, and the next `verify` of the same head says what a fresh one would.

An MCP client that closes stdin and sees the server still busy (a `verify` running a long check)
sends SIGTERM; a closed terminal sends SIGHUP. Each test runs the real server as a subprocess in a
repository of its own, with a check that waits while a gate file exists.
"""

from __future__ import annotations

import os
import shlex
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import cli, ok, register_scripted, swarm_note
from tests.pilot.rawclient import RawClient
from tests.proctools import alive, kill_quietly, wait_for, wait_gone

FIX = "edit README.md: replace hello with world"
PROMPT_EXIT = 5.0  # seconds the server may take to exit after the signal (its checks get 2 s of grace)
SIGNALS = [pytest.param(signal.SIGTERM, 143, id="SIGTERM"), pytest.param(signal.SIGHUP, 129, id="SIGHUP")]
# MCP's stdio shutdown: the client closes stdin, and sends SIGTERM to a server still busy a moment later.
MID_VERIFY = [
    pytest.param(signal.SIGTERM, 143, True, id="stdin-closed-then-SIGTERM"),
    pytest.param(signal.SIGTERM, 143, False, id="SIGTERM"),
    pytest.param(signal.SIGHUP, 129, False, id="SIGHUP"),
]


def group_gone(pgid: int, timeout: float = 2.0) -> bool:
    """Whether no process of group `pgid` is left within `timeout` (its zombies reaped: init takes a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def slow_check(tmp_path: Path) -> tuple[str, Path, Path, Path]:
    """A check that passes on a head whose README says world, in a tree holding nothing else (as a
    `git diff --exit-code` after a build would). While `gate` exists it first notes its pid (its process
    group's: `sh -c` leads the check's session) in `started`, then never ends: it writes a scratch file into
    its checkout and `marker` every 50 ms, as a build left running would."""
    gate, started, marker = tmp_path / "gate", tmp_path / "started", tmp_path / "marker"
    q = shlex.quote
    command = (
        'test -z "$(git status --porcelain --ignored)" && '
        f"{{ test ! -e {q(str(gate))} || {{ echo $$ > {q(str(started))}; "
        f"while :; do date > scratch.out; date > {q(str(marker))}; sleep 0.05; done; }}; }} && "
        "grep -qx world README.md"
    )
    return command, gate, started, marker


def delegated_patch(project: Path, check: str) -> tuple[str, str]:
    """A delegation's patch (its check passing) and the patch's head."""
    delegated = ok(cli(project, "--json", "delegate", FIX, "--adapter", "scripted", "--check", check)).json()
    assert isinstance(delegated, dict)
    [patch] = [a for a in delegated["artifacts"] if a["kind"] == "patch"]
    shown = ok(cli(project, "--json", "artifact", patch["id"])).json()
    assert isinstance(shown, dict)
    return patch["id"], shown["record"]["head"]


def start_verify(project: Path, patch: str, started: Path) -> tuple[RawClient, int, int]:
    """A server verifying `patch` with the check held by its gate: the server, the request's id, the check's pgid."""
    server = RawClient(project)
    verifying = server.ask("tools/call", {"name": "verify", "arguments": {"patch": patch}})
    wait_for(started.exists, 60, "the check to start")
    pgid = int(wait_for(lambda: started.read_text().strip(), 5, "the check's pid"))  # type: ignore[arg-type]
    assert alive(pgid)
    return server, verifying, pgid


def verify_again(project: Path, patch: str) -> dict:
    """`verify` by a new server: its structured result."""
    again = RawClient(project)
    try:
        verified = again.call("verify", {"patch": patch})
    finally:
        assert again.close() == 0
    assert not verified["isError"], verified
    data: dict = verified["structuredContent"]
    return data


@pytest.mark.parametrize(("signum", "code", "close_first"), MID_VERIFY)
def test_a_signal_mid_verify_stops_the_check_records_nothing_and_the_next_verify_is_a_fresh_ones(
    repo: Path, tmp_path: Path, signum: int, code: int, close_first: bool,
) -> None:
    project = register_scripted(repo)
    check, gate, started, marker = slow_check(tmp_path)
    patch, head = delegated_patch(project, check)
    notes = swarm_note(project, head)
    assert notes and notes[-1]["accepted"]  # the delegation's own verdict: the check passes on this head

    gate.touch()
    server, verifying, pgid = start_verify(project, patch, started)
    try:
        if close_first:
            assert server.process.stdin is not None
            server.process.stdin.close()
            time.sleep(0.5)
            assert server.process.poll() is None  # the server waits for the verify: the check never ends
        sent = time.monotonic()
        server.process.send_signal(signum)
        assert server.process.wait(PROMPT_EXIT) == code
        assert time.monotonic() - sent < PROMPT_EXIT
        assert wait_gone([pgid], 1.0) == [] and group_gone(pgid)  # the check and its children: killed, not left running
    finally:
        kill_quietly([-pgid])
    answer = server.answer_to(verifying)  # answered before it exited: a tool error, not a verdict
    assert answer["result"]["isError"] and signal.Signals(signum).name in answer["result"]["content"][0]["text"]
    marker.unlink()
    time.sleep(0.3)
    assert not marker.exists()  # nothing of the check runs on
    assert swarm_note(project, head) == notes  # the interrupted run recorded no verdict
    locks = list(Path(os.environ["XDG_STATE_HOME"]).rglob("locks/checkout-*"))
    assert locks and [lock.read_text() for lock in locks] == [""] * len(locks)  # every checkout given back

    gate.unlink()
    data = verify_again(project, patch)
    assert data["accepted"] and [c["passed"] for c in data["checks"]] == [True]
    assert swarm_note(project, head)[-1]["accepted"]


def test_after_a_server_killed_mid_verify_the_next_verify_is_a_fresh_ones(repo: Path, tmp_path: Path) -> None:
    """SIGKILL leaves the server no say: its check runs on in the checkout whose lock died with it. The
    pool stops what still runs there before it hands the checkout out again (store/checkouts.py)."""
    project = register_scripted(repo)
    check, gate, started, _ = slow_check(tmp_path)
    patch, _ = delegated_patch(project, check)
    gate.touch()
    server, _, pgid = start_verify(project, patch, started)
    try:
        server.process.kill()
        server.process.wait(PROMPT_EXIT)
        gate.unlink()
        data = verify_again(project, patch)
        assert data["accepted"] and [c["passed"] for c in data["checks"]] == [True], data
        assert group_gone(pgid)
    finally:
        kill_quietly([-pgid])


def start_long_job(server: RawClient, pidfile: Path) -> tuple[str, int, int]:
    """A job of one long shell task, started by the server: the job, its worker's pid, the task's pgid."""
    submitted = server.call("submit_job", {
        "goal": "a long task", "tasks": [{"id": "a", "command": f"echo $$ > {shlex.quote(str(pidfile))}; sleep 60"}], "workers": 1,
    })
    assert not submitted["isError"], submitted
    worker = submitted["structuredContent"]["worker"]["pid"]
    task = int(wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 60, "the task to start"))  # type: ignore[arg-type]
    return submitted["structuredContent"]["id"], worker, task


@pytest.mark.parametrize(("signum", "code"), SIGNALS)
def test_a_signal_stops_the_workers_the_server_started(repo: Path, tmp_path: Path, signum: int, code: int) -> None:
    project = register_scripted(repo)
    server = RawClient(project)
    job, worker, task = start_long_job(server, tmp_path / "task-pid")
    try:
        sent = time.monotonic()
        server.process.send_signal(signum)
        assert server.process.wait(PROMPT_EXIT) == code
        assert time.monotonic() - sent < PROMPT_EXIT
        # The worker stops as `gitswarm work` does on SIGTERM: its task's group killed, the task requeued.
        assert wait_gone([worker, task], 10) == [] and group_gone(task)
    finally:
        kill_quietly([worker], signal.SIGTERM)
    status = ok(cli(project, "--json", "status", job)).json()
    assert isinstance(status, dict) and [t["state"] for t in status["tasks"]] == ["queued"]


def test_closing_stdin_leaves_the_workers_running(repo: Path, tmp_path: Path) -> None:
    """Only a signal stops them: a client that closes the session leaves its jobs going."""
    project = register_scripted(repo)
    server = RawClient(project)
    _, worker, task = start_long_job(server, tmp_path / "task-pid")
    try:
        assert server.close() == 0
        assert alive(worker) and alive(task)
    finally:
        kill_quietly([worker], signal.SIGTERM)
    assert wait_gone([worker, task], 10) == []
