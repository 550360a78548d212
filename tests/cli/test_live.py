"""The live view (gitswarm/cli/live.py), drawn into a recording console: what a person sees of a run."""

from __future__ import annotations

import io

from rich.console import Console

from gitswarm.cli.live import LiveView

JOB = "01m950vt5y2ckjafdrwqgn2ad5"


def drawn(view: LiveView) -> list[str]:
    screen = Console(file=io.StringIO(), width=80, color_system=None)
    screen.print(view.render())
    return screen.file.getvalue().splitlines()  # type: ignore[attr-defined]


def running(view: LiveView, task: str, owner: str | None) -> None:
    view({"event": "task", "job": JOB, "task": task, "state": "running", "attempt": 1, "error": None, "owner": owner})


def test_a_remote_run_says_which_other_machine_runs_a_task() -> None:
    """With --remote every machine's running tasks are listed: those another machine runs say which one,
    so that three running beside "up to 2 workers" reads right; the header fits 80 columns."""
    view = LiveView()
    view({"event": "start", "job": JOB, "workers": 2, "machine": "laptop.abc123"})
    running(view, "mine", "laptop.abc123.w-1a2b3c4d")
    running(view, "theirs", "ci.def456.w-9f8e7d6c")
    running(view, "done-there", "ci.def456.w-00000000")
    view({"event": "task", "job": JOB, "task": "done-there", "state": "succeeded", "attempt": 1, "error": None, "owner": None})
    lines = drawn(view)
    assert lines[0].rstrip() == f"up to 2 workers on job {JOB[:12]}  1 succeeded  2 running" and len(lines[0]) <= 80
    row = {line.split()[1]: line for line in lines if line.lstrip().startswith("running")}
    assert set(row) == {"mine", "theirs"}
    assert row["theirs"].rstrip().endswith("on ci.def456") and " on " not in row["mine"]


def test_a_machine_whose_name_another_s_starts_with_is_another_machine() -> None:
    view = LiveView()
    view({"event": "start", "job": JOB, "workers": 2, "machine": "ci.abc123"})
    running(view, "theirs", "ci.abc1234.w-1")  # not this machine's: its name is not followed by a dot here
    assert any(line.rstrip().endswith("on ci.abc1234") for line in drawn(view))


def test_a_local_run_names_no_machine() -> None:
    view = LiveView()
    view({"event": "start", "job": JOB, "workers": 4, "machine": None})
    running(view, "a", "w-1a2b3c4d")
    running(view, "b", None)  # an event from before owners were said
    rows = [line for line in drawn(view) if line.lstrip().startswith("running")]
    assert len(rows) == 2 and not [row for row in rows if " on " in row]


def test_another_machine_s_worker_name_is_shown_escaped() -> None:
    """A worker's name comes from a record another clone wrote: shown as text, its control characters escaped."""
    view = LiveView()
    view({"event": "start", "job": JOB, "workers": 2, "machine": "laptop.abc123"})
    running(view, "theirs", "evil\x1b]0;title\x07[bold].x.w-1")
    shown = "\n".join(drawn(view))
    assert "\x1b" not in shown and "\x07" not in shown and "on evil\\x1b]0;title\\x07[bold].x" in shown
