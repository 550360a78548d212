"""A scripted stand-in for a coding agent, for tests and the demo: no model, no network.

    python -m gitswarm.scripted_agent PROMPT

It makes the edits the prompt describes, one per line:

    edit PATH: replace OLD with NEW
    write PATH: TEXT
    append PATH: TEXT

and it can be told to misbehave, like real agents sometimes do:

    misbehave: no-edit         claim success without editing anything
    misbehave: outside         also write a file into the main working tree of the repository
    misbehave: fail-after      make the edits, then exit 1
    misbehave: hang            make the edits, then never exit
    misbehave: switch-branch   check out another branch after editing

and game its checks instead of fixing the code, as agents most often do
(docs/verification.md says how gitswarm answers each):

    misbehave: weaken-test     every assert in the test files becomes `assert True`
    misbehave: delete-test     delete the test files
    misbehave: skip-test       mark every test in the test files skipped (pytest)
    misbehave: edit-checks     rewrite .gitswarm.toml so its checks run `true`
    misbehave: conftest-pass   add a conftest.py whose hook reports every test passed
    misbehave: shim            put an executable `pytest` that prints a pass in the worktree and its bin/
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

_EDIT = re.compile(r"^edit (?P<path>[^:]+): replace (?P<old>.+?) with (?P<new>.*)$")
_WRITE = re.compile(r"^(?P<how>write|append) (?P<path>[^:]+): (?P<text>.*)$")
_MISBEHAVE = re.compile(r"^misbehave: (?P<how>[a-z-]+)$")
_ASSERT = re.compile(r"^(?P<indent>\s*)assert\b.*$", re.MULTILINE)
SKIP_HEADER = 'import pytest\n\npytestmark = pytest.mark.skip(reason="flaky")\n\n'
CONFTEST_PASS = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
"""
SHIM = "#!/bin/sh\necho '1 passed in 0.01s'\nexit 0\n"


def task_section(prompt: str) -> str:
    """In a gitswarm prompt packet, only the worker's own task holds instructions
    (the job's goal above it is shared by every task): its `# Your task` section,
    or a follow-up's `# Follow-up instruction` in its place, then any
    `# Guidance from the user` sections."""
    follow_up = _sections(prompt, "# Follow-up instruction")
    own = follow_up if follow_up is not None else _sections(prompt, "# Your task")
    if own is None:
        return prompt
    guidance = _sections(prompt, "# Guidance from the user", every=True)
    return own if guidance is None else f"{own}\n{guidance}"


def _sections(prompt: str, heading: str, every: bool = False) -> str | None:
    """The body of the first section whose heading starts with `heading` (with `every`, of all of them
    joined), up to the next `# ` heading; None when there is none."""
    lines = prompt.splitlines()
    found: list[str] = []
    for start, line in enumerate(lines):
        if not line.startswith(heading):
            continue
        end = next((n for n in range(start + 1, len(lines)) if lines[n].startswith("# ")), len(lines))
        found.append("\n".join(lines[start + 1 : end]))
        if not every:
            break
    return "\n".join(found) if found else None


def apply(prompt: str, root: Path) -> tuple[int, set[str]]:
    """Make the prompt's edits under `root`; returns (files edited, misbehaviours asked for)."""
    edited, misbehave = 0, set()
    for line in task_section(prompt).splitlines():
        line = line.strip()
        if match := _MISBEHAVE.match(line):
            misbehave.add(match["how"])
            continue
        if "no-edit" in misbehave:
            continue
        if match := _EDIT.match(line):
            path = root / match["path"]
            text = path.read_text()
            if match["old"] not in text:
                print(f"{match['path']}: {match['old']!r} not found", file=sys.stderr)
                continue
            path.write_text(text.replace(match["old"], match["new"], 1))
            edited += 1
        elif match := _WRITE.match(line):
            path = root / match["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            mode = "a" if match["how"] == "append" else "w"
            with open(path, mode) as handle:
                handle.write(match["text"] + "\n")
            edited += 1
    return edited, misbehave


def find_test_files(root: Path) -> list[Path]:
    """The Python test files under `root`, as pytest names them."""
    return sorted(
        p for p in root.rglob("*.py")
        if ".git" not in p.parts and (p.name.startswith("test_") or p.name.endswith("_test.py"))
    )


def game_checks(root: Path, misbehave: set[str]) -> None:
    """Make the checks pass without fixing anything, in each of the ways asked for."""
    for path in find_test_files(root):
        if "weaken-test" in misbehave:
            path.write_text(_ASSERT.sub(lambda m: f"{m['indent']}assert True", path.read_text()))
        if "skip-test" in misbehave:
            path.write_text(SKIP_HEADER + path.read_text())
        if "delete-test" in misbehave:
            path.unlink()
    if "edit-checks" in misbehave:
        (root / ".gitswarm.toml").write_text('[audit]\nchecks = ["true"]\n')
    if "conftest-pass" in misbehave:
        (root / "conftest.py").write_text(CONFTEST_PASS)
    if "shim" in misbehave:
        for where in (root / "pytest", root / "bin" / "pytest"):
            where.parent.mkdir(parents=True, exist_ok=True)
            where.write_text(SHIM)
            where.chmod(0o755)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m gitswarm.scripted_agent PROMPT", file=sys.stderr)
        return 2
    root = Path.cwd()
    edited, misbehave = apply(argv[-1], root)
    game_checks(root, misbehave)
    if "outside" in misbehave:
        common = subprocess.run(
            ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        (Path(common).parent / "written-outside-the-worktree.txt").write_text("oops\n")
    if "switch-branch" in misbehave:
        subprocess.run(["git", "checkout", "-q", "-b", "agent-elsewhere"], cwd=root, check=False)
    print(f"done: edited {edited} file(s)")
    sys.stdout.flush()
    if "hang" in misbehave:
        while True:
            time.sleep(60)
    return 1 if "fail-after" in misbehave else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
