"""A repository at a path that is not UTF-8 (a directory named with byte 0xFF, as a Latin-1 system makes them).

Python sees such a path as text holding a lone surrogate (os.fsdecode), which
no UTF-8 stream and no JSON encoder takes. Every command works there all the
same: the path is printed with the byte shown as `\\xff`, --json stays valid
JSON, and no command that writes fails after having written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gitswarm.cli.escape import escape, escape_lines
from gitswarm.model.paths import bytes_shown_in
from tests.conftest import Result, cli, git, ok, register_scripted, repo_at, spec_text
from tests.pilot.rawclient import RawClient

SHOWN = "caf\\xff"  # how the directory's name is printed


@pytest.fixture
def odd(tmp_path: Path) -> Path:
    """A repository with one commit in tmp_path/caf<0xFF>."""
    return repo_at(tmp_path / os.fsdecode(b"caf\xff"))


def printable(result: Result) -> Result:
    """RESULT, after asserting it exited 0 and printed only what a UTF-8 stream takes, the path shown as `caf\\xff`."""
    ok(result)
    result.out.encode("utf-8")  # a lone surrogate raises here, as it would on a real stdout
    result.err.encode("utf-8")
    assert SHOWN in result.out, result.out
    return result


def json_of(result: Result) -> dict:
    """The --json document, which must be UTF-8 JSON holding no lone surrogate (the path's text is `caf\\xff`)."""
    ok(result)
    data = json.loads(result.out.encode("utf-8"))
    json.dumps(data, ensure_ascii=False).encode("utf-8")  # no string in it decoded to a lone surrogate either
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_doctor(odd: Path, as_json: bool) -> None:
    if not as_json:
        assert f"repository: {odd.parent}/{SHOWN}" in printable(cli(odd, "doctor")).out
        return
    data = json_of(cli(odd, "--json", "doctor"))
    assert data["ok"] is True
    assert data["checks"][0]["detail"].endswith(f"/{SHOWN}")


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_init(odd: Path, as_json: bool) -> None:
    args = ("--json", "init") if as_json else ("init",)
    check = json_of if as_json else printable
    first = check(cli(odd, *args))
    if as_json:
        assert first["index"].endswith(f"/{SHOWN}/.git/gitswarm/index.sqlite")  # type: ignore[index]
    assert (odd / ".git" / "gitswarm" / "index.sqlite").is_file()
    check(cli(odd, *args))  # and again, over what it wrote


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_index_rebuild(odd: Path, as_json: bool) -> None:
    ok(cli(odd, "init"))
    (odd / "job.toml").write_text('goal = "g"\n[[tasks]]\nid = "a"\ncommand = "true"\n')
    ok(cli(odd, "submit", "job.toml"))
    if as_json:
        data = json_of(cli(odd, "--json", "index", "rebuild"))
        assert data["jobs"] == 1 and data["path"].endswith(f"/{SHOWN}/.git/gitswarm/index.sqlite")
    else:
        assert "1 jobs" in printable(cli(odd, "index", "rebuild")).out


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_hooks_install(odd: Path, as_json: bool) -> None:
    if as_json:
        data = json_of(cli(odd, "--json", "hooks", "install"))
        assert data["hooks"] == {"post-commit": "installed", "pre-push": "installed"}
        assert data["hooks_dir"].endswith(f"/{SHOWN}/.git/hooks")
    else:
        assert "post-commit: installed" in printable(cli(odd, "hooks", "install")).out
    assert (odd / ".git" / "hooks" / "post-commit").is_file()
    assert "removed" in printable(cli(odd, "hooks", "uninstall")).out
    assert not (odd / ".git" / "hooks" / "post-commit").exists()


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_mcp_install_for_the_project(odd: Path, as_json: bool) -> None:
    args = ("mcp", "install", "--scope", "project", "--client", "claude-code")
    if as_json:
        data = json_of(cli(odd, "--json", *args))
        assert data["action"] == "installed" and data["path"].endswith(f"/{SHOWN}/.mcp.json")
    else:
        assert f"installed {odd.parent}/{SHOWN}/.mcp.json" in printable(cli(odd, *args)).out
    assert json.loads((odd / ".mcp.json").read_text())["mcpServers"]["gitswarm"]["command"] == "gitswarm"
    removed = printable(cli(odd, "mcp", "uninstall", "--scope", "project", "--client", "claude-code"))
    assert "restored" in removed.out or "removed" in removed.out
    assert not (odd / ".mcp.json").exists()


def test_an_error_line_shows_the_byte(odd: Path) -> None:
    missing = odd / "nowhere.toml"
    result = cli(odd, "submit", str(missing))
    assert result.code == 2, result.err
    result.err.encode("utf-8")
    assert SHOWN in result.err and len(result.err.strip().splitlines()) == 1


def test_the_installed_script_prints_to_a_real_stdout(odd: Path) -> None:
    """A real process: stdout is a UTF-8 stream that refuses lone surrogates, not an in-memory buffer."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}  # strict, whatever the machine's locale
    for args in (["doctor"], ["--json", "doctor"], ["init"], ["hooks", "install"]):
        done = subprocess.run([sys.executable, "-m", "gitswarm", *args], cwd=odd, env=env, capture_output=True, timeout=60)
        assert done.returncode == 0, (args, done.stderr)
        text = done.stdout.decode("utf-8")  # nothing but UTF-8
        shown = json.loads(text)["checks"][0]["detail"] if args[0] == "--json" else text
        assert SHOWN in shown, text


def test_lone_surrogates_are_shown_as_their_bytes() -> None:
    name = os.fsdecode(b"caf\xff\x80")
    assert escape(name) == "caf\\xff\\x80" and escape_lines(f"{name}\n\x1b") == "caf\\xff\\x80\n\\x1b"
    assert escape("a\ud800b") == "a\\ud800b"  # not one that surrogateescape makes: its code point
    assert bytes_shown_in({name: [name, ("\x1b", 1)]}) == {"caf\\xff\\x80": ["caf\\xff\\x80", ["\x1b", 1]]}
    assert bytes_shown_in("plain é") == "plain é"


def test_the_mcp_server_answers_with_the_byte_shown(odd: Path) -> None:
    """A tool result naming the path (here the notice that uncommitted changes are not in the base) and a
    tool error naming it: both arrive as valid JSON, where the server used to die mid-answer."""
    register_scripted(odd)
    (odd / "README.md").write_text("changed\n")
    client = RawClient(odd, lifetime=60)
    try:
        spec = spec_text('id = "a"\nadapter = "scripted"\nprompt = "look"\nmode = "analyze"')
        submitted = client.call("submit_job", {"spec": spec, "start": False})
        assert not submitted.get("isError"), submitted
        (notice,) = submitted["structuredContent"]["notices"]
        assert notice.startswith(f"uncommitted changes in {odd.parent}/{SHOWN} are not part of the base")
        assert json.loads(submitted["content"][0]["text"])["notices"] == [notice]
    finally:
        code = client.close()
    assert code == 0


def test_a_delegation_from_start_to_merge(odd: Path) -> None:
    """The adapter's preflight key and the worktree's git dir (read back from git) are the path's own bytes."""
    register_scripted(odd)
    delegated = cli(odd, "--json", "delegate", "edit README.md: replace hello with world", "--adapter", "scripted",
                    "--check", "grep -q world README.md")
    assert delegated.code == 0, delegated.err
    (patch,) = [p["id"] for p in json_of(delegated)["summary"]["patches"]]
    assert ok(cli(odd, "--json", "worktrees", "list")).json()["worktrees"][0]["state"] == "succeeded"  # type: ignore[index]
    ok(cli(odd, "merge", patch))
    assert (odd / "README.md").read_text() == "world\n"


def test_doctor_reads_a_remote_at_such_a_path(odd: Path) -> None:
    remote = odd.parent / os.fsdecode(b"remote-\xff.git")
    git(odd.parent, "init", "-q", "--bare", str(remote))
    git(odd, "remote", "add", "origin", str(remote))
    (check,) = [c for c in json_of(cli(odd, "--json", "doctor"))["checks"] if c["name"] == "remote origin"]
    assert check["detail"].startswith(f"{odd.parent}/remote-\\xff.git: accepts forced pushes")


def test_push_and_pull_by_the_path_of_a_remote_at_such_a_path(odd: Path) -> None:
    remote = odd.parent / os.fsdecode(b"remote-\xff.git")
    git(odd.parent, "init", "-q", "--bare", str(remote))
    (odd / "job.toml").write_text(spec_text('id = "a"\ncommand = "true"'))
    ok(cli(odd, "submit", "job.toml"))
    assert ok(cli(odd, "--json", "push", str(remote))).json()["pushed"]  # type: ignore[index]
    ok(cli(odd, "pull", str(remote)))
