"""Which branches a push lands on that must be verified: the pre-push hook's first question.

Kept to the standard library (tomllib, fnmatch) so that the hook can answer
it before anything heavy is imported: most pushes touch no verified branch,
and then the hook adds only an interpreter's start-up to `git push`.
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

from gitswarm.engine.config_file import DEFAULT_VERIFIED, raw_config

ZERO = "0" * 40
def gated(lines: list[str], patterns: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    """(branch, commit) of each pushed branch that must be verified: the branch it lands on, or
    the local one it comes from (`git push origin HEAD:swarm/x` counts), matches a pattern.
    Deletions and pushes to anything but a branch are never gated."""
    found = []
    for line in lines:
        parts = line.split()
        if len(parts) != 4:
            continue
        local_ref, local_sha, remote_ref = parts[0], parts[1], parts[2]
        if local_sha == ZERO or not remote_ref.startswith("refs/heads/"):
            continue
        names = {remote_ref.removeprefix("refs/heads/"), local_ref.removeprefix("refs/heads/")}
        if any(fnmatch.fnmatchcase(name, pattern) for name in names for pattern in patterns):
            found.append((remote_ref.removeprefix("refs/heads/"), local_sha))
    return found


def nothing_to_check(workdir: Path, lines: list[str]) -> bool:
    """True only when it is certain that the push touches no verified branch. Any doubt
    (a configuration that does not read, patterns of the wrong type) says False, and the
    full hook decides and reports."""
    try:
        hooks = raw_config(workdir).get("hooks", {})
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
        return False
    patterns = hooks.get("verified_branches", DEFAULT_VERIFIED) if isinstance(hooks, dict) else None
    if not isinstance(patterns, (list, tuple)) or not all(isinstance(p, str) for p in patterns):
        return False
    return not gated(lines, patterns)
