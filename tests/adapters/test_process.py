"""run_process: whole capture, capped capture, process-group kills, stdin, start errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from gitswarm.adapters.process import run_process
from tests.proctools import alive, read_pids, wait_gone

# Two grandchildren in the background, their pids written to a file, then wait on them.
SPAWN_TWO = "sleep 30 & echo $! >> {pids}; sleep 30 & echo $! >> {pids}; wait"


def test_captures_stdout_and_stderr_whole(tmp_path: Path) -> None:
    result = run_process(["sh", "-c", "printf 'out\\nput'; printf 'err' >&2; exit 7"], cwd=tmp_path)
    assert result.exit_code == 7
    assert (result.stdout, result.stderr) == (b"out\nput", b"err")
    assert (result.stdout_dropped, result.stderr_dropped) == (0, 0)
    assert not result.timed_out and result.stopped is None and result.error is None


def test_large_output_on_both_pipes_is_kept_whole() -> None:
    # Far beyond a pipe buffer on both pipes at once: the reader must not deadlock or lose bytes.
    script = "import sys; sys.stdout.write('o' * 300000); sys.stderr.write('e' * 200000)"
    result = run_process([sys.executable, "-c", script], timeout=20)
    assert result.exit_code == 0
    assert result.stdout == b"o" * 300000 and result.stderr == b"e" * 200000
    assert result.stdout_dropped == result.stderr_dropped == 0


def test_output_beyond_the_cap_is_cut_and_counted() -> None:
    result = run_process(["sh", "-c", "head -c 5000 /dev/zero; head -c 300 /dev/zero >&2"], output_cap=1000)
    assert result.exit_code == 0
    assert result.stdout == b"\0" * 1000 and result.stdout_dropped == 4000
    assert result.stderr == b"\0" * 300 and result.stderr_dropped == 0


def test_cap_over_many_chunks_and_exactly_at_the_cap() -> None:
    big = run_process(["head", "-c", "200000", "/dev/zero"], output_cap=100000)
    assert (len(big.stdout), big.stdout_dropped) == (100000, 100000)
    exact = run_process(["head", "-c", "1000", "/dev/zero"], output_cap=1000)
    assert (len(exact.stdout), exact.stdout_dropped) == (1000, 0)


def test_on_start_gets_the_group_of_a_new_session() -> None:
    seen: list[int] = []
    script = "import os; print(os.getpid(), os.getpgid(0), os.getsid(0))"
    result = run_process([sys.executable, "-c", script], on_start=seen.append)
    pid, pgid, sid = map(int, result.stdout.split())
    assert seen == [pid] and pgid == pid and sid == pid
    assert pgid != os.getpgid(0)


def test_cwd_and_env_are_passed(tmp_path: Path) -> None:
    result = run_process(["sh", "-c", 'pwd; echo "$GS_TEST_VAR"'], cwd=tmp_path, env={"GS_TEST_VAR": "v1", "PATH": os.environ["PATH"]})
    assert result.stdout.decode().split("\n")[:2] == [str(tmp_path.resolve()), "v1"]


def test_timeout_kills_every_grandchild(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    result = run_process(["sh", "-c", SPAWN_TWO.format(pids=pids)], timeout=0.5, grace=0.5)
    spawned = read_pids(pids)
    assert len(spawned) == 2
    assert result.timed_out and result.stopped == "timeout" and result.exit_code is None
    assert 0.5 <= result.duration < 3
    assert wait_gone(spawned, 1.0) == []
    for pid in spawned:  # reaped or a zombie; os.kill sees a zombie until its parent reaps it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        assert not alive(pid)


def test_stop_reason_from_on_tick_kills_every_grandchild(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    ticks: list[float] = []

    def on_tick() -> str | None:
        ticks.append(time.monotonic())
        return "cancelled" if len(read_pids(pids)) == 2 and len(ticks) >= 3 else None

    result = run_process(["sh", "-c", SPAWN_TWO.format(pids=pids)], on_tick=on_tick, tick=0.05, grace=0.5, timeout=20)
    assert result.stopped == "cancelled"
    assert not result.timed_out and result.exit_code is None
    assert result.duration < 5
    assert len(ticks) >= 3
    spawned = read_pids(pids)
    assert len(spawned) == 2 and wait_gone(spawned, 1.0) == []


def test_grandchild_left_in_the_background_is_killed_without_hanging(tmp_path: Path) -> None:
    # The shell exits at once; its background sleep still holds stdout and stderr open.
    pids = tmp_path / "pids"
    started = time.monotonic()
    result = run_process(["sh", "-c", f"sleep 30 & echo $! > {pids}; echo done"], timeout=20)
    assert time.monotonic() - started < 3
    assert result.exit_code == 0 and result.stopped is None
    assert result.stdout == b"done\n"
    assert wait_gone(read_pids(pids), 1.0) == []


def test_process_that_closes_its_pipes_before_exiting_keeps_its_exit_code() -> None:
    """Closed pipes are not an exit: coreutils close stdout and stderr at exit, just
    before exiting, and such a process must not be SIGKILLed for it (exit -9)."""
    result = run_process(["sh", "-c", "echo bye; exec >&- 2>&-; sleep 0.3; exit 5"], timeout=10)
    assert result.exit_code == 5 and result.stopped is None
    assert result.stdout == b"bye\n"
    assert result.duration >= 0.3


def test_sigterm_handler_runs_and_its_output_is_kept() -> None:
    # The group gets SIGTERM first; a process that exits on it can still say goodbye.
    script = "trap 'echo bye; exit 0' TERM; echo hi; sleep 30 & wait"
    result = run_process(["sh", "-c", script], timeout=0.5, grace=5)
    assert result.timed_out and result.exit_code is None
    assert result.stdout == b"hi\nbye\n"
    assert result.duration < 3  # it exited on SIGTERM; the grace period was not waited out


def test_process_ignoring_sigterm_is_killed_after_the_grace_period() -> None:
    result = run_process(["sh", "-c", "trap '' TERM; echo up; sleep 30"], timeout=0.3, grace=0.4)
    assert result.timed_out and result.exit_code is None
    assert result.stdout == b"up\n"
    assert 0.3 + 0.4 <= result.duration < 3


def test_stdin_is_dev_null_when_not_given() -> None:
    started = time.monotonic()
    result = run_process(["cat"], timeout=10)
    assert result.exit_code == 0 and result.stdout == b""
    assert time.monotonic() - started < 2


def test_stdin_bytes_are_delivered() -> None:
    result = run_process(["cat"], stdin=b"hello\nworld\n", timeout=10)
    assert result.exit_code == 0 and result.stdout == b"hello\nworld\n"


def test_stdin_to_a_process_that_never_reads_it() -> None:
    result = run_process(["true"], stdin=b"x" * 1_000_000, timeout=10)
    assert result.exit_code == 0 and result.error is None


def test_large_stdin_to_a_process_echoing_it_does_not_deadlock() -> None:
    """BUG: run_process writes all of stdin before it reads any output.

    `cat` fills the stdout pipe, stops reading stdin, and the write blocks
    forever: neither `timeout` nor `on_tick` can fire. The test runs the call in
    a thread and, if it hangs, kills the group itself to free the thread.
    """
    data = b"x" * 1_000_000
    groups: list[int] = []
    box: dict[str, object] = {}
    thread = threading.Thread(
        target=lambda: box.setdefault("result", run_process(["cat"], stdin=data, timeout=1, on_start=groups.append)),
        daemon=True,
    )
    thread.start()
    thread.join(3)
    hung = thread.is_alive()
    if hung:
        for pgid in groups:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        thread.join(5)
    assert not hung, "run_process hung writing 1 MB to a child that echoes it (timeout=1 was ignored)"
    result = box["result"]
    assert result.exit_code == 0 and result.stdout == data


def test_missing_executable_is_an_error_not_an_exception(tmp_path: Path) -> None:
    result = run_process([str(tmp_path / "no-such-program")])
    assert result.error is not None and "no-such-program" in result.error
    assert result.exit_code is None and result.stdout == b"" and result.stderr == b""


def test_missing_cwd_is_an_error_not_an_exception(tmp_path: Path) -> None:
    result = run_process(["true"], cwd=tmp_path / "nowhere")
    assert result.error is not None and result.exit_code is None


def test_waiting_on_a_quiet_process_does_not_spin() -> None:
    """BUG: without `on_tick`, `next_tick` never advances, so after the first tick
    the select timeout is 0 and the loop busy-waits for the rest of the run."""
    before = time.process_time()
    result = run_process(["sleep", "0.5"])
    used = time.process_time() - before
    assert result.exit_code == 0
    assert used < 0.1, f"run_process used {used:.2f}s of CPU waiting 0.5s for a silent process"


def test_on_tick_is_called_about_every_tick() -> None:
    calls: list[float] = []
    result = run_process(["sleep", "0.5"], on_tick=lambda: calls.append(time.monotonic()), tick=0.05)
    assert result.exit_code == 0 and result.stopped is None
    assert 3 <= len(calls) <= result.duration / 0.05 + 2


STOP_RUNS = """
import sys, threading, time
from gitswarm.adapters.process import run_process, stop_runs
from gitswarm.model.errors import Interrupted

outcomes = []

def run():
    try:
        outcomes.append(run_process(["sh", "-c", sys.argv[1]]))
    except Interrupted as exc:
        outcomes.append(exc)

threads = [threading.Thread(target=run) for _ in range(2)]
for thread in threads:
    thread.start()
time.sleep(0.5)
started = time.monotonic()
stop_runs("the test stops")
for thread in threads:
    thread.join()
try:
    run_process(["true"])
except Interrupted as exc:
    outcomes.append(exc)
print(round(time.monotonic() - started, 2), *(type(o).__name__ + ": " + str(o) for o in outcomes), sep="\\n")
"""


def test_stop_runs_kills_the_runs_of_every_thread_and_each_raises_instead_of_returning(tmp_path: Path) -> None:
    """What `gitswarm mcp` calls on SIGTERM: a check cut short has no result to record. In a process of its
    own: once called, it is not undone."""
    pids = tmp_path / "pids"
    done = subprocess.run(
        [sys.executable, "-c", STOP_RUNS, SPAWN_TWO.format(pids=pids)], capture_output=True, text=True, timeout=30, check=True,
    )
    took, *outcomes = done.stdout.splitlines()
    assert float(took) < 1.0  # within a tick or two: `sleep` dies of the group's SIGTERM
    assert outcomes == ["Interrupted: the test stops: sh was stopped before it finished, and has no result"] * 2 + [
        "Interrupted: the test stops: true was not started"
    ]
    assert len(read_pids(pids)) == 4 and wait_gone(read_pids(pids)) == []
