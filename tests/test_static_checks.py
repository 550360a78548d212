"""mypy and ruff, as pyproject.toml configures them, find nothing: a new type or lint error fails the suite.

Each runs as its own process from the top of the source tree, as a developer would run it
(`python -m mypy`, `python -m ruff check gitswarm tests`); mypy keeps its cache in .mypy_cache
there, ruff in .ruff_cache (both ignored by git), so a run after the first checks only what changed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 300.0  # a cold mypy run takes ~20 s on a loaded machine; this is only a backstop


def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )


def test_mypy_finds_no_errors() -> None:
    result = run_tool("mypy")  # files and options: [tool.mypy] in pyproject.toml
    assert result.returncode == 0, f"mypy exited {result.returncode}:\n{result.stdout}{result.stderr}"


def test_ruff_finds_nothing() -> None:
    result = run_tool("ruff", "check", "--no-fix", "gitswarm", "tests")  # rules: [tool.ruff] in pyproject.toml
    assert result.returncode == 0, f"ruff exited {result.returncode}:\n{result.stdout}{result.stderr}"
