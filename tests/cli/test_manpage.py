"""The manual page: generated from docs/cli.md, naming every command, installed with the package."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import click
import pytest

from gitswarm.cli.full import command

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "man" / "git-swarm.1", ROOT / "man" / "gitswarm.1"]


def command_paths(group: object, prefix: str = "") -> list[str]:
    """Every visible command of the CLI, as typed after `gitswarm` (`status`, `worktrees list`)."""
    paths = []
    for name, sub in getattr(group, "commands", {}).items():
        if sub.hidden:
            continue
        path = f"{prefix} {name}".strip()
        subs = command_paths(sub, path)
        paths.extend(subs or [path])
    return paths


def test_the_pages_are_what_docs_cli_md_gives() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "man" / "make_manpage.py"), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_every_command_is_in_the_manual() -> None:
    roff = PAGES[0].read_text()
    tags = [roff.splitlines()[n + 1] for n, line in enumerate(roff.splitlines()) if line == ".TP"]
    documented = " ".join(tags).replace("\\-", "-").replace("\\fB", "").replace("\\fR", "")
    missing = [path for path in command_paths(command()) if path not in documented]
    assert not missing, f"not in docs/cli.md's table of commands (then python man/make_manpage.py): {missing}"


@pytest.mark.skipif(shutil.which("groff") is None, reason="no groff here")
def test_the_page_renders_without_warnings() -> None:
    done = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(PAGES[0])], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_the_package_installs_both_pages_where_man_looks() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    shared = config["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    assert shared == {"man/git-swarm.1": "share/man/man1/git-swarm.1", "man/gitswarm.1": "share/man/man1/gitswarm.1"}


@pytest.mark.slow
def test_the_wheel_carries_the_pages(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"no wheel could be built here (hatchling unavailable?): {done.stderr[-300:]}")
    (wheel,) = tmp_path.glob("gitswarm-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for page in ("git-swarm.1", "gitswarm.1"):
        assert any(n.endswith(f".data/data/share/man/man1/{page}") for n in names), names


def test_every_usage_line_names_its_arguments_as_the_manual_does() -> None:
    """`Usage: gitswarm run [OPTIONS] {SPEC}`: each argument in capitals, as docs/cli.md writes it, never typer's
    default of the parameter's own name (`{spec}`, `{job}`), which a newcomer reads as a literal to type."""
    root = command()
    lowercase = []
    for path in command_paths(root):
        sub = root
        for name in path.split():
            sub = sub.commands[name]
        ctx = click.Context(sub, info_name=path)
        pieces = [piece for piece in sub.collect_usage_pieces(ctx) if piece != "[OPTIONS]"]
        lowercase += [f"{path}: {piece}" for piece in pieces if re.search(r"[a-z]", piece)]
    assert lowercase == []
