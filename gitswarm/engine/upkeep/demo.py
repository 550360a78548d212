"""`gitswarm demo`: a throwaway repository and a small job run end to end, no network.

Everything the demo makes is in one scratch directory: the repository
(`<scratch>/repo`) and the worktrees of its delegations (`<scratch>/worktrees`,
not the per-user state directory they go to by default). It is kept, for a
look around afterwards; removing that directory removes the whole demo.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gitswarm.engine.delegation.patches import merge
from gitswarm.engine.events import EventSink
from gitswarm.engine.jobs.run import run
from gitswarm.engine.jobs.supervisor import WorkOptions
from gitswarm.engine.results import plain
from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import WorkFailed
from gitswarm.store.git import init_repo
from gitswarm.store.workspace import commit_everything
from gitswarm.store.worktrees import ROOT_VARIABLE

DEMO_SPEC = """\
goal = "Check a tiny project"

[defaults]
adapter = "shell"
timeout = "1m"

[[tasks]]
id = "lint"
command = "test -f README.md"

[[tasks]]
id = "test"
# Flaky on purpose: fails the first time, passes on the retry.
command = "test -f .tried || { touch .tried; echo 'flaky: first attempt fails' >&2; exit 1; }; grep -q demo README.md"
depends_on = ["lint"]

[[tasks]]
id = "build"
command = "mkdir -p build && cp README.md build/"
depends_on = ["lint"]

[[tasks]]
id = "report"
command = "ls build"
depends_on = ["test", "build"]

# Two delegations to a scripted stand-in for a coding agent, each in its own
# branch and worktree. gitswarm, not the agent, decides: it runs the check on
# a clean checkout of what the agent left.
[[tasks]]
id = "fix-add"
mode = "implement"
adapter = "scripted"
prompt = "edit calc.py: replace a - b with a + b"
checks = ["{python} test_calc.py"]
paths = ["calc.py"]

# The other games its check instead, as agents often do: it turns the test's
# assert into `assert True`. gitswarm runs the check with the base's version of
# the test (the judged never edits its judge), so the bug still fails it, and a
# patch that changes its own test is never accepted by its checks alone.
[[tasks]]
id = "game-test"
mode = "implement"
adapter = "scripted"
prompt = "misbehave: weaken-test"
checks = ["{python} test_calc.py"]
paths = ["test_calc.py"]
repair_rounds = 1
max_attempts = 1
"""

CALC = "def add(a, b):\n    return a - b\n"
TEST_CALC = "from calc import add\n\nassert add(2, 3) == 5, f'add(2, 3) gave {add(2, 3)}'\n"


def make_demo_repo(root: Path | None = None) -> Path:
    """A new repository with a small buggy project and the job spec, at `repo` in a new scratch directory
    (under `root`, default the system's temporary one). The scripted agent is a shipped adapter (adapters/scripted.toml)."""
    path = Path(tempfile.mkdtemp(prefix="gitswarm-demo-", dir=root)) / "repo"
    path.mkdir()
    init_repo(path)
    (path / "README.md").write_text("# demo project\n")
    (path / "calc.py").write_text(CALC)
    (path / "test_calc.py").write_text(TEST_CALC)
    (path / ".gitignore").write_text("build/\n.tried\n__pycache__/\njob.toml\n")
    commit_everything(path, "A tiny project with a bug")
    (path / "job.toml").write_text(DEMO_SPEC.replace("{python}", shlex.quote(sys.executable)))
    return path


def run_demo(on_event: EventSink, root: Path | None = None) -> dict:
    """Run the demo job with two workers, then merge the verified patch and show the gamed one refused."""
    path = make_demo_repo(root)
    scratch = path.parent
    swarm = Swarm(path)
    on_event({"event": "demo", "repository": str(path)})
    story: dict = {"repository": str(path), "scratch": str(scratch)}
    with _worktrees_in(scratch / "worktrees"):
        view = run(swarm, path / "job.toml", WorkOptions(workers=2), on_event)
        for artifact in view["artifacts"]:
            if artifact["kind"] == "patch" and artifact["task"] == "fix-add":
                story["merged"] = plain(merge(swarm, artifact["id"], None, "merge", no_recheck=False))
        gamed = [a["id"] for a in view["artifacts"] if a["kind"] == "patch" and a["task"] == "game-test"]
        if gamed:
            try:
                merge(swarm, gamed[-1], None, "merge", no_recheck=False)
                story["gamed_merged"] = gamed[-1]  # never: demo_went_as_designed says so
            except WorkFailed as exc:
                story["refused"] = {"patch": gamed[-1], "why": str(exc)}
    rejected = next((t for t in view["tasks"] if t["id"] == "game-test"), None)
    story["rejected"] = {"task": "game-test", "state": rejected["state"], "why": rejected["error"]} if rejected else None
    on_event({"event": "demo_done", **story})
    return {**view, "demo": story}


@contextmanager
def _worktrees_in(root: Path) -> Iterator[None]:
    """The demo's worktrees (and clean checkouts) under `root`, for this run and the workers it starts."""
    before = os.environ.get(ROOT_VARIABLE)
    os.environ[ROOT_VARIABLE] = str(root)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ROOT_VARIABLE, None)
        else:
            os.environ[ROOT_VARIABLE] = before


def demo_went_as_designed(data: dict) -> bool:
    """Every shell task succeeded, fix-add was merged, and game-test was rejected and its patch refused."""
    states = {t["id"]: t["state"] for t in data["tasks"]}
    rejected = data["demo"].get("rejected") or {}
    shell_ok = all(states[t] == "succeeded" for t in ("lint", "test", "build", "report", "fix-add"))
    gamed_refused = "refused" in data["demo"] and "gamed_merged" not in data["demo"]
    return shell_ok and "merged" in data["demo"] and rejected.get("state") == "failed" and gamed_refused
