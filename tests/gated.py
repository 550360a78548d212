"""A scripted agent a test can hold and read: adapter `gated`.

Each run appends its pid to CONTROL/starts and keeps its prompt as CONTROL/prompt-<n> (n from 1); while
CONTROL/hold exists it waits; then it does what gitswarm.scripted_agent does with the prompt.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import commit_file

SCRIPT = """
import os, sys, time
from pathlib import Path
control = Path({control!r})
with open(control / "starts", "a") as handle:
    handle.write(f"{{os.getpid()}}\\n")
n = len((control / "starts").read_text().split())
(control / f"prompt-{{n}}").write_text(sys.argv[-1])
while (control / "hold").exists():
    time.sleep(0.02)
from gitswarm.scripted_agent import main
sys.exit(main(sys.argv[1:]))
"""


def register_gated(repo: Path, control: Path) -> Path:
    """Register adapter `gated` in `repo` (committed), controlled from the directory `control`."""
    control.mkdir(parents=True, exist_ok=True)
    script = control / "agent.py"
    script.write_text(SCRIPT.format(control=str(control)))
    spec = f'executable = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(script))}, "{{prompt}}"]\n'
    spec += f"[sandbox]\nwrite = [{json.dumps(str(control))}]  # where the test holds and reads it\n"
    commit_file(repo, ".gitswarm/adapters/gated.toml", spec, "register the gated agent")
    return control


def prompts(control: Path) -> list[str]:
    """The prompts of every run so far, in order."""
    count = len((control / "starts").read_text().split()) if (control / "starts").exists() else 0
    return [(control / f"prompt-{n}").read_text() for n in range(1, count + 1)]


def running(control: Path) -> list[int]:
    """The pids, as this machine sees them, of the gated agents running now: found by their command line in
    /proc, since an agent in a sandbox has a PID namespace of its own and records the pid it sees there."""
    script = str(control / "agent.py").encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if script in argv and b"--" not in argv:  # the agent itself, not the bwrap around it
                found.append(int(entry.name))
    return found
