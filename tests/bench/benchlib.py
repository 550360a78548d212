"""What every benchmark script needs: an isolated home and git identity, and a table printer."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Sequence


def isolate() -> None:
    """Keep the benchmark off the real home directory and git config.

    Bytecode caching is switched back on: an installed gitswarm has its .pyc
    files, and without them every command compiles its ~45 modules (~50 ms).
    """
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    home = scratch_dir("bench-home-")
    os.environ.update(
        HOME=home,
        XDG_STATE_HOME=os.path.join(home, ".local", "state"),
        GIT_CONFIG_GLOBAL=os.path.join(home, ".gitconfig"),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="bench",
        GIT_AUTHOR_EMAIL="bench@example.com",
        GIT_COMMITTER_NAME="bench",
        GIT_COMMITTER_EMAIL="bench@example.com",
    )


def scratch_dir(prefix: str, parent: str | None = None) -> str:
    """A temporary directory (in `parent`, by default the system's) removed when the benchmark exits (they
    hold repositories of thousands of objects; left behind, they slow the file system of later runs)."""
    path = tempfile.mkdtemp(prefix=prefix, dir=parent)
    atexit.register(shutil.rmtree, path, True)
    return path


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    for row in [headers, *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())
