"""What judges a patch: the files a check runs, the programs it starts, what a change to a protected file means."""

from __future__ import annotations

import pytest

from gitswarm.model.protected import Protection, named_paths, runners, sections_changed, top_level_module

FILES = {"test_calc.py", "run.sh", "check.py", "ci.mk", "README.md", "pkg/mod.py"}


@pytest.mark.parametrize(
    "command, named",
    [
        ("python test_calc.py", ["test_calc.py"]),
        ("grep -qx world README.md", []),  # read, not run: what a fix may have to change
        ("./run.sh&&grep x README.md", ["run.sh"]),  # unspaced separators split too
        ("make -f ci.mk test", ["ci.mk"]),
        ("python -W error -u check.py", ["check.py"]),
        ("env FOO=1 timeout 60 uv run python check.py", ["check.py"]),
        ("bash -ec 'python test_calc.py'", ["test_calc.py"]),
        ("python -m pkg.mod", ["pkg/mod.py"]),
        ("python -c 'import x' check.py", []),
        ("python ../outside.py; /abs/check.py", []),
    ],
)
def test_named_paths_are_the_files_a_check_runs(command: str, named: list[str]) -> None:
    assert sorted(named_paths([command], FILES.__contains__)) == named


def test_runners_are_the_programs_started_and_a_python_module() -> None:
    assert runners(["FOO=1 python -m pytest -q;timeout 5 ./run.sh", "npm test | tee log"]) == {"python", "pytest", "run.sh", "npm", "tee"}


def test_an_added_test_is_evidence_and_every_other_change_to_a_judge_is_not() -> None:
    guard = Protection(extra=("fixtures/**",), named=frozenset({"check.py"}), runner_names=frozenset({"pytest"}))
    assert not guard.judges_changed("tests/test_new.py", "added", False)
    assert guard.judges_changed("tests/test_old.py", "modified", False)
    assert guard.judges_changed("tests/test_old.py", "deleted", False)
    assert guard.judges_changed("conftest.py", "added", False)  # configuration, not a test
    assert guard.judges_changed("check.py", "modified", False)
    assert guard.judges_changed("fixtures/data.json", "modified", False)
    assert guard.judges_changed("bin/pytest", "added", True)  # a shim
    assert not guard.judges_changed("src/calc.py", "modified", False)


def test_top_level_modules_and_test_sections() -> None:
    assert [top_level_module(p) for p in ("pytest.py", "src/pytest/__init__.py", "src/pkg/mod.py", "README.md")] == [
        "pytest", "pytest", None, None,
    ]
    assert sections_changed("pyproject.toml", {"tool": {"pytest": {"a": 1}}}, {"tool": {"pytest": {"a": 2}}})
    assert not sections_changed("pyproject.toml", {"project": {"version": "1"}}, {"project": {"version": "2"}})
