"""Text from records reaches the terminal escaped: a goal or an error holding ESC or BEL is printed
as `\\x1b` and `\\x07`, on every path (tables, the markdown summary, stderr); --json stays valid JSON
that decodes to the exact text."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from gitswarm.cli.escape import escape, escape_lines, json_safe
from gitswarm.cli.live import LiveView
from tests.conftest import Result, cli, spec_text

RED, BEL = "\x1b[31m", "\x07"
# TOML's \u escapes: the spec file itself holds no control character, the job's records do.
GOAL = "deploy \x1b[31mred\x07 now"
GOAL_TOML = "deploy \\u001b[31mred\\u0007 now"
REASON = f"{RED}all good{BEL}\r\x9b2J\u202eevil"
RAW = ("\x1b", "\x07", "\r", "\x9b", "\u202e")


def assert_no_controls(result: Result) -> None:
    for stream in (result.out, result.err):
        for char in RAW:
            assert char not in stream, (char, stream)


def submit(repo: Path) -> str:
    (repo / "job.toml").write_text(spec_text('id = "a"\ncommand = "true"', 'id = "b"\ncommand = "true"', goal=GOAL_TOML))
    result = cli(repo, "submit", "job.toml")
    assert result.code == 0, result.err
    return result.out.strip()


@pytest.fixture
def job(repo: Path) -> str:
    """A job whose goal holds ESC and BEL, and a task cancelled with a reason full of controls (its error)."""
    job_id = submit(repo)
    cancelled = cli(repo, "cancel", f"{job_id}/a", "--reason", REASON)
    assert cancelled.code == 0, cancelled.err
    return job_id


@pytest.mark.parametrize("args", [("status",), ("status", "{job}"), ("show", "{job}"), ("log", "{job}")])
def test_human_output_escapes_control_characters(repo: Path, job: str, args: tuple[str, ...]) -> None:
    result = cli(repo, *(a.format(job=job) for a in args))
    assert result.code == 0, result.err
    assert_no_controls(result)
    if args[0] != "log":  # the log's table has no goal or error column
        assert "deploy \\x1b[31mred\\x07 now" in result.out
    if args[0] in ("status", "show") and len(args) == 2:
        assert "\\x1b[31mall good\\x07\\r\\x9b2J\\u202eevil" in result.out


@pytest.mark.parametrize("args", [("status",), ("status", "{job}"), ("show", "{job}"), ("log", "{job}")])
def test_json_output_is_valid_and_round_trips_the_text(repo: Path, job: str, args: tuple[str, ...]) -> None:
    result = cli(repo, "--json", *(a.format(job=job) for a in args))
    assert result.code == 0, result.err
    assert_no_controls(result)
    data = result.json()
    assert isinstance(data, dict)
    if args[0] == "status" and len(args) == 1:
        assert data["jobs"][0]["goal"] == GOAL
    elif args[0] == "log":
        assert data["events"][0]["record"]["job"]["goal"] == GOAL
        assert data["events"][-1]["record"]["reason"] == REASON
    else:
        assert data["goal"] == GOAL
        assert data["tasks"][0]["error"] == REASON


def test_the_markdown_summary_of_a_finished_job_is_escaped(repo: Path) -> None:
    (repo / "job.toml").write_text(
        spec_text('id = "a"\ncommand = "printf \'\\\\033[31mboom\\\\007\'; exit 3"\nmax_attempts = 1', goal=GOAL_TOML)
    )
    ran = cli(repo, "run", "job.toml", "-j", "1")
    assert ran.code == 1, ran.err
    assert_no_controls(ran)
    assert "deploy \\x1b[31mred\\x07 now" in ran.out
    job_id = cli(repo, "--json", "status").json()["jobs"][0]["id"]  # type: ignore[index]
    shown = cli(repo, "show", job_id)
    assert shown.code == 0, shown.err
    assert_no_controls(shown)
    assert shown.out == ran.out
    data = cli(repo, "--json", "show", job_id).json()
    assert data["summary"]["goal"] == GOAL  # type: ignore[index]


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (("-C", "/nowhere\x1b[2J\x07", "status"), "gitswarm: -C /nowhere\\x1b[2J\\x07: No such file or directory\n"),
        (("submit", "missing\x1b]0;title\x07.toml"), "gitswarm: cannot read spec missing\\x1b]0;title\\x07.toml: No such file or directory\n"),
        (("cancel", "\x1b[31mx"), None),
        (("bogus\x1b[2J",), None),
    ],
)
def test_an_error_line_is_escaped(repo: Path, args: tuple[str, ...], shown: str | None) -> None:
    result = cli(repo, *args)
    assert result.code == 2
    assert result.err.count("\n") == 1
    assert_no_controls(result)
    if shown is not None:
        assert result.err == shown


def test_the_live_view_escapes_event_text_and_reads_no_markup(capsys: pytest.CaptureFixture[str]) -> None:
    view = LiveView()  # not started: nothing drawn until render() is printed below
    view({"event": "submitted", "job": "j\x1b[2J"})
    view({"event": "task", "job": "j", "task": "a", "state": "running", "attempt": 1, "error": None})
    view({"event": "task", "job": "j", "task": "b", "state": "failed", "attempt": 1, "error": "[/red] \x1b[2Jboom\x07"})
    view({"event": "notice", "message": "[bold]\x1b]0;title\x07"})
    view({"event": "adapter_unusable", "adapter": "x", "reason": "[/] \x9b31m"})
    screen = Console(file=io.StringIO(), width=200, color_system=None)
    screen.print(view.render())
    drawn = screen.file.getvalue()  # type: ignore[attr-defined]
    printed = capsys.readouterr().err
    for char in RAW:
        assert char not in drawn and char not in printed
    assert "b failed: [/red] \\x1b[2Jboom\\x07" in drawn and "job j\\x1b[2J" in drawn
    assert "note: [bold]\\x1b]0;title\\x07" in printed
    assert "[/] \\x9b31m" in printed


def test_escapes() -> None:
    text = "a\x1b[31m\x07\x7f\x9b\u2028\u202e\u2066\n\tz\r\x00"
    assert escape(text) == "a\\x1b[31m\\x07\\x7f\\x9b\\u2028\\u202e\\u2066\\n\\tz\\r\\x00"
    assert escape_lines(text) == "a\\x1b[31m\\x07\\x7f\\x9b\\u2028\\u202e\\u2066\n\tz\\r\\x00"
    assert escape("plain ascii, é, 😀, \\x1b") == "plain ascii, é, 😀, \\x1b"
    encoded = json_safe(json.dumps({"k": text}, ensure_ascii=False))
    assert all(c not in encoded for c in RAW) and json.loads(encoded) == {"k": text}


def test_the_live_view_says_at_most_how_many_workers_run() -> None:
    """-j N is a bound: a local run starts as many workers as the machine has cores, the rest as they are needed."""
    screen = Console(file=io.StringIO(), width=200, color_system=None)
    for workers, said in ((4, "up to 4 workers on job j"), (1, "1 worker on job j")):
        view = LiveView()
        view({"event": "start", "job": "j", "workers": workers})
        screen.print(view.render())
        assert said in screen.file.getvalue()  # type: ignore[attr-defined]
