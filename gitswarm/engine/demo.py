"""`gitswarm demo`: a throwaway repository and a small job run end to end, no network."""

from __future__ import annotations

import tempfile
from pathlib import Path

from gitswarm.engine.run import run
from gitswarm.engine.supervisor import EventSink, WorkOptions
from gitswarm.engine.swarm import Swarm
from gitswarm.store.git import init_repo

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
"""


def make_demo_repo(root: Path | None = None) -> Path:
    """A new repository with one file and the demo job spec in it."""
    path = Path(tempfile.mkdtemp(prefix="gitswarm-demo-", dir=root))
    init_repo(path)
    (path / "README.md").write_text("# demo project\n")
    (path / "job.toml").write_text(DEMO_SPEC)
    return path


def run_demo(on_event: EventSink, root: Path | None = None) -> dict:
    """Make the demo repository and run its job to the end with two workers."""
    path = make_demo_repo(root)
    swarm = Swarm(path)
    on_event({"event": "demo", "repository": str(path)})
    return run(swarm, path / "job.toml", WorkOptions(workers=2), on_event)
