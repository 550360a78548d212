"""A check that runs a test file the patch adds is judged with that file (engine/delegation/verify.py).

A patch that only writes tests, checked by running them (`pytest tests/test_new.py`), has no evidence
without them: the run with the base's tests alone says "file not found". Found on pallets/itsdangerous.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gitswarm.engine.delegation.verify import names_any
from tests.conftest import cli, commit_file, ok, spec_text

ADD = (
    'id = "t"\nmode = "implement"\ncommand = "printf \'def test_new():\\\\n    assert True\\\\n\' > tests/test_new.py"\n'
    'checks = ["python -m pytest -q -p no:cacheprovider tests/test_new.py"]\nmax_attempts = 1\nrepair_rounds = 1'
)


def test_a_patch_that_adds_the_test_its_check_runs_is_verified(repo: Path) -> None:
    commit_file(repo, "tests/test_old.py", "def test_old():\n    assert True\n", "a test")
    (repo / "add.toml").write_text(spec_text(ADD))
    ran = cli(repo, "--json", "run", "add.toml")
    assert ran.code == 0, ran.err
    (task,) = ran.json()["tasks"]
    assert task["state"] == "succeeded"
    shown = ok(cli(repo, "--json", "show", ran.json()["id"])).json()
    assert shown["status"] == "succeeded"
    (row,) = shown["summary"]["tasks"]
    assert row["error"] is None  # no "attempt 1: exit 4; then passed": the run without the file is not evidence


@pytest.mark.parametrize("command, named", [
    ("pytest tests/test_new.py", True), ("python -m pytest -q ./tests/test_new.py::test_one", True),
    ("pytest tests/", False), ("pytest -k new", False), ("make test && pytest tests/test_new.py", True),
])
def test_names_any_finds_a_test_file_given_to_a_runner(command: str, named: bool) -> None:
    assert names_any(command, {"tests/test_new.py"}) is named
