"""`gitswarm demo`: a throwaway repository and a small job, end to end, no network."""

from __future__ import annotations

import tempfile
from pathlib import Path

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
command = ["sh", "-c", "grep -q demo README.md"]
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


def submit_demo(root: Path | None = None) -> tuple[Swarm, str]:
    path = make_demo_repo(root)
    swarm = Swarm(path)
    return swarm, swarm.submit_file(path / "job.toml")
