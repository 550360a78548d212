"""The judged never edits its judge: a patch that games its checks is never accepted by them.

A repository with a failing test (`calc.add` subtracts; `test_calc.py` asserts
`add(2, 3) == 5`), delegated to the scripted agent through the real CLI. The
agent either fixes `calc.py` or games the checks in each of the ways agents do
(scripted_agent.py: weaken, delete or skip the test, edit the checks, a
conftest that passes everything, a shim on PATH). Every gamed patch is refused
by `merge` with exit 1; the honest fix is accepted with fail->pass recorded.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Patch, Verdict
from tests.conftest import cli, commit_file, git, register_scripted

CALC = "def add(a, b):\n    return a - b\n"
TEST = (
    "from calc import add\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    'if __name__ == "__main__":\n    test_add()\n'
)
SCRIPT_CHECK = f"{sys.executable} test_calc.py"
PYTEST_CHECK = f"{sys.executable} -m pytest -q -p no:cacheprovider"
FIX = "edit calc.py: replace a - b with a + b"


@pytest.fixture
def calc(repo: Path) -> Path:
    register_scripted(repo)
    commit_file(repo, "calc.py", CALC, "calc")
    commit_file(repo, "test_calc.py", TEST, "its test")
    return repo


def delegate(repo: Path, instruction: str, *checks: str) -> tuple[int, dict, str]:
    args = ["--json", "delegate", instruction, "--adapter", "scripted"]
    for check in checks:
        args += ["--check", check]
    result = cli(repo, *args)
    assert result.out, result.err
    return result.code, result.json(), result.err


def records(repo: Path, job: str, kind: type) -> list[tuple[str, object]]:
    swarm = Swarm(repo)
    try:
        snapshot = swarm.refs.snapshot(job, swarm.index.job_tip(job))
        found = [(a, snapshot.artifact(a)) for a in snapshot.task("delegate").artifacts]
    finally:
        swarm.close()
    return [(a, r) for a, r in found if isinstance(r, kind)]


def test_the_honest_fix_is_accepted_with_fail_to_pass(calc: Path) -> None:
    code, data, err = delegate(calc, FIX, SCRIPT_CHECK)
    assert code == 0, err
    (_, verdict), = records(calc, data["id"], Verdict)
    assert verdict.accepted and verdict.transitions == {SCRIPT_CHECK: "fail->pass"}
    assert verdict.evidence["proof"] == "fail-to-pass" and verdict.judges == () and verdict.flags == ()
    patch_id = records(calc, data["id"], Patch)[-1][0]
    merged = cli(calc, "--json", "merge", patch_id)
    assert merged.code == 0, merged.err
    assert "a + b" in git(calc, "show", "main:calc.py")


@pytest.mark.parametrize(
    "how, check",
    [
        ("weaken-test", SCRIPT_CHECK),
        ("delete-test", SCRIPT_CHECK),
        ("skip-test", PYTEST_CHECK),
        ("edit-checks", SCRIPT_CHECK),
        ("conftest-pass", PYTEST_CHECK),
        ("shim", "pytest -q -p no:cacheprovider"),
    ],
)
def test_a_gamed_check_is_never_accepted_and_never_merges(
    calc: Path, monkeypatch: pytest.MonkeyPatch, how: str, check: str
) -> None:
    # A PATH that starts with "." is how a shim in the worktree would win; the venv's pytest is next.
    monkeypatch.setenv("PATH", os.pathsep.join([".", "bin", str(Path(sys.executable).parent), os.environ["PATH"]]))
    code, data, _ = delegate(calc, f"misbehave: {how}", check)
    assert code == 1
    patches = records(calc, data["id"], Patch)
    verdicts = [v for _, v in records(calc, data["id"], Verdict)]
    assert patches and verdicts and not any(v.accepted for v in verdicts)
    assert all(v.judges for v in verdicts), "every one of them changes what judges it"
    for patch_id, _ in patches:
        refused = cli(calc, "--json", "merge", patch_id)
        assert refused.code == 1, refused.err
        assert "nothing merged" in refused.err or "changes what judges it" in refused.err
    assert "a - b" in git(calc, "show", "main:calc.py")


def test_the_base_version_of_a_weakened_test_judges_the_patch(calc: Path) -> None:
    """A fix that also weakens the test: the base's test still runs (and passes), yet a person must accept it."""
    code, data, _ = delegate(calc, f"{FIX}\nmisbehave: weaken-test", SCRIPT_CHECK)
    assert code == 1
    verdict = [v for _, v in records(calc, data["id"], Verdict)][-1]
    assert verdict.judges == ("test_calc.py",) and verdict.transitions == {SCRIPT_CHECK: "fail->pass"}
    assert (verdict.status, verdict.integrity, verdict.contract, verdict.accepted) == ("complete", "suspect", "aligned", False)
    patch_id = records(calc, data["id"], Patch)[-1][0]
    refused = cli(calc, "merge", patch_id)
    assert refused.code == 1 and "changes what judges it: test_calc.py" in refused.err and "review" in refused.err
    shown = cli(calc, "--json", "verify", patch_id).json()
    assert shown["judges"] == ["test_calc.py"] and shown["accepted"] is False
    reviewed = cli(calc, "review", patch_id, "--accept", "--note", "the test change is fine")
    assert reviewed.code == 0, reviewed.err
    merged = cli(calc, "--json", "merge", patch_id)
    assert merged.code == 0, merged.err


def test_a_fix_that_adds_a_new_test_file_is_accepted_and_the_new_test_runs(calc: Path) -> None:
    new_test = "write tests/test_more.py: from calc import add; assert add(1, 1) == 2; print('MORE RAN')"
    code, data, err = delegate(calc, f"{FIX}\n{new_test}", SCRIPT_CHECK, f"{sys.executable} tests/test_more.py")
    assert code == 0, err
    verdict = [v for _, v in records(calc, data["id"], Verdict)][-1]
    assert verdict.accepted and verdict.judges == ()
    assert verdict.transitions[f"{sys.executable} tests/test_more.py"] == "fail->pass"  # absent on the base: it fails there


def test_checks_that_pass_on_the_base_too_prove_nothing_and_require_can_refuse(calc: Path) -> None:
    commit_file(calc, ".gitswarm.toml", '[verify]\nrequire = "fail-to-pass"\n', "require evidence")
    code, data, _ = delegate(calc, "write notes.txt: unrelated", "true")
    assert code == 1
    verdict = [v for _, v in records(calc, data["id"], Verdict)][-1]
    assert verdict.transitions == {"true": "pass->pass"} and verdict.evidence["proof"] == "unproven"
    assert not verdict.accepted and "fail-to-pass" in verdict.evidence["require"]


@pytest.mark.slow
def test_the_base_result_is_cached_per_base_and_check(calc: Path, tmp_path: Path) -> None:
    counter = tmp_path / "base-runs"
    check = f'git merge-base --is-ancestor HEAD main && echo x >> {counter}; {SCRIPT_CHECK}'
    for n in range(10):
        code, _, err = delegate(calc, f"{FIX}\nwrite note{n}.txt: {n}", check)
        assert code == 0, err
    # Ten delegations on one base (main's tip): the counter grows only in a checkout of it, and only once.
    assert counter.read_text().count("x") == 1


def test_fewer_tests_than_on_the_base_is_flagged(calc: Path) -> None:
    commit_file(calc, "test_other.py", "def test_one():\n    assert True\n", "another test")
    code, data, _ = delegate(calc, f"{FIX}\nmisbehave: delete-test", PYTEST_CHECK)
    assert code == 1
    verdict = [v for _, v in records(calc, data["id"], Verdict)][-1]
    assert verdict.judges  # deleting a test changes what judges it; the base's test ran
    assert not verdict.accepted


def test_delegate_without_checks_says_unverified_and_exits_1(calc: Path) -> None:
    result = cli(calc, "delegate", FIX, "--adapter", "scripted")
    assert result.code == 1
    assert "no checks: unverified" in result.err


SRC_CALC = "def add(a, b):\n    return a - b\n"
SRC_TEST = "from calcpkg import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


@pytest.fixture
def src_layout(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A src/ package installed editable in the user's venv: a .pth file naming the user's src/,
    as setuptools' and hatchling's editable installs of a src/ layout write."""
    register_scripted(repo)
    commit_file(repo, "src/calcpkg/__init__.py", SRC_CALC, "package")
    commit_file(repo, "tests/test_calc.py", SRC_TEST, "its test")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "__editable__.calcpkg.pth").write_text(f"{repo / 'src'}\n")
    (site / "tools.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # pytest, from the environment running this
    monkeypatch.setenv("PATH", os.pathsep.join([str(venv / "bin"), os.environ["PATH"]]))
    monkeypatch.setenv("VIRTUAL_ENV", str(venv))
    return repo


def test_the_checkouts_code_wins_over_an_editable_install_of_the_users_tree(src_layout: Path) -> None:
    check = "python -m pytest -q -p no:cacheprovider tests"
    code, data, err = delegate(src_layout, "edit src/calcpkg/__init__.py: replace a - b with a + b", check)
    assert code == 0, err
    verdict = [v for _, v in records(src_layout, data["id"], Verdict)][-1]
    assert verdict.transitions == {check: "fail->pass"}


def test_an_uncommitted_fix_in_the_users_tree_does_not_pass_a_patch_that_fixes_nothing(src_layout: Path) -> None:
    (src_layout / "src/calcpkg/__init__.py").write_text("def add(a, b):\n    return a + b\n")  # not committed
    code, data, _ = delegate(src_layout, "write notes.txt: unrelated", "python -m pytest -q -p no:cacheprovider tests")
    assert code == 1
    assert not any(v.accepted for _, v in records(src_layout, data["id"], Verdict))


def test_a_check_that_reads_the_users_tree_is_unverifiable(calc: Path) -> None:
    check = f"{sys.executable} -c \"import sys; sys.path.insert(0, '{calc}'); import calc; assert calc.add(2, 3) == 5\""
    (calc / "calc.py").write_text("def add(a, b):\n    return a + b\n")  # the user's uncommitted fix
    code, data, _ = delegate(calc, "write notes.txt: unrelated", check)
    assert code == 1
    verdict = [v for _, v in records(calc, data["id"], Verdict)][-1]
    assert any("reads calc.py from the user's working tree" in flag for flag in verdict.flags)


def test_status_marks_a_task_whose_patch_nothing_judged(calc: Path) -> None:
    result = cli(calc, "--json", "delegate", FIX, "--adapter", "scripted")
    job = result.json()["id"]
    (task,) = cli(calc, "--json", "status", job).json()["tasks"]
    assert task["state"] == "succeeded" and task["unverified"] is True
    assert "unverified: no checks judged its patch" in cli(calc, "status", job).out
    checked = cli(calc, "--json", "delegate", FIX, "--adapter", "scripted", "--check", SCRIPT_CHECK).json()["id"]
    assert cli(calc, "--json", "status", checked).json()["tasks"][0]["unverified"] is False


# -- attacks found in review: each one merged a non-fix before it was closed ---------------------------


@pytest.mark.parametrize(
    "instruction, check",
    [
        # an added test file runs in the same pytest process as the base's tests, and patches the code under test
        ("write test_aaa.py: import calc; calc.add = lambda a, b: a + b", PYTEST_CHECK),
        # or pytest itself
        ("write test_zzz.py: import _pytest.python as p; p.Function.runtest = lambda self: None", PYTEST_CHECK),
    ],
    ids=["patches-the-code", "patches-pytest"],
)
def test_an_added_test_file_cannot_change_how_the_base_tests_run(calc: Path, instruction: str, check: str) -> None:
    code, data, _ = delegate(calc, instruction, check)
    assert code == 1
    assert not any(v.accepted for _, v in records(calc, data["id"], Verdict))


@pytest.mark.parametrize(
    "instruction, check",
    [
        ("write pytest.py: import sys; print('1 passed in 0.01s'); sys.exit(0)", PYTEST_CHECK),
        ("write usercustomize.py: import sys, types; m = types.ModuleType('calc'); m.add = lambda a, b: a + b; sys.modules['calc'] = m",
         SCRIPT_CHECK),
        ("write fix.pth: import sys, types; m = types.ModuleType('calc'); m.add = lambda a, b: a + b; sys.modules['calc'] = m",
         SCRIPT_CHECK),
        ("write pyproject.toml: [tool.pytest.ini_options]\nappend pyproject.toml: addopts = '-p myplug'\n"
         "write myplug.py: import calc; calc.add = lambda a, b: a + b", PYTEST_CHECK),
    ],
    ids=["runner-shadow", "usercustomize", "pth", "added-pyproject"],
)
def test_what_the_checks_python_loads_first_is_a_judge(calc: Path, instruction: str, check: str) -> None:
    code, data, _ = delegate(calc, instruction, check)
    assert code == 1
    verdicts = [v for _, v in records(calc, data["id"], Verdict)]
    assert verdicts and not any(v.accepted for v in verdicts) and all(v.judges for v in verdicts)


@pytest.mark.parametrize(
    "check", [f"env {sys.executable} check.py", f"{sys.executable} -W error check.py", f"timeout 60 {sys.executable} check.py"]
)
def test_a_script_a_check_runs_through_a_wrapper_or_options_is_a_judge(calc: Path, check: str) -> None:
    commit_file(calc, "check.py", "from calc import add\nassert add(2, 3) == 5\n", "a check script")
    code, data, _ = delegate(calc, "write check.py: pass", check)
    assert code == 1
    verdict = [v for _, v in records(calc, data["id"], Verdict)][-1]
    assert verdict.judges == ("check.py",) and not verdict.accepted


def test_a_makefile_targets_recipe_and_includes_are_judges(calc: Path) -> None:
    commit_file(calc, "ci.mk", f"test:\n\t{sys.executable} run_tests.py\n", "ci rules")
    commit_file(calc, "Makefile", "include ci.mk\n", "the makefile")
    commit_file(calc, "run_tests.py", "from calc import add\nassert add(2, 3) == 5\n", "the test runner")
    for instruction in ("write ci.mk: test:\n append ci.mk: \ttrue", "write run_tests.py: pass"):
        code, data, _ = delegate(calc, instruction, "make test")
        assert code == 1
        verdict = [v for _, v in records(calc, data["id"], Verdict)][-1]
        assert verdict.judges and not verdict.accepted


def test_a_test_file_under_a_name_git_quotes_is_protected_and_put_back(calc: Path) -> None:
    odd = 'q"dir'
    commit_file(calc, f"{odd}/test_odd.py", "from calc import add\nassert add(2, 3) == 5\n", "an oddly named test")
    check = f"{sys.executable} '{odd}/test_odd.py'"
    code, data, _ = delegate(calc, "misbehave: weaken-test", check)
    assert code == 1
    verdict = [v for _, v in records(calc, data["id"], Verdict)][-1]
    assert verdict.judges and verdict.transitions == {check: "fail->fail"}  # the base's test ran, and failed


def test_a_review_does_not_outlive_a_newer_rejection(calc: Path) -> None:
    _, data, _ = delegate(calc, f"{FIX}\nmisbehave: weaken-test", SCRIPT_CHECK)
    patch_id = records(calc, data["id"], Patch)[-1][0]
    assert cli(calc, "review", patch_id, "--accept").code == 0
    commit_file(calc, ".gitswarm.toml", '[verify]\nrequire = "fail-to-pass"\nprotect = ["calc.py"]\n', "stricter")
    assert cli(calc, "verify", patch_id).code == 1  # now calc.py is a judge too: the base's calc.py ran, fail->fail
    refused = cli(calc, "merge", patch_id)
    assert refused.code == 1 and "nothing merged" in refused.err


def test_a_review_of_another_patch_on_the_same_head_does_not_count(calc: Path) -> None:
    _, data, _ = delegate(calc, f"{FIX}\nmisbehave: weaken-test", SCRIPT_CHECK)
    patch_id, patch = records(calc, data["id"], Patch)[-1]
    assert cli(calc, "review", patch.head, "--accept").code == 0  # the commit, not the patch
    assert cli(calc, "merge", patch_id).code == 1


def test_the_base_cache_is_per_environment(calc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commit_file(calc, "calc.py", "def add(a, b):\n    return a + b\n", "the base is right")
    commit_file(calc, ".gitswarm.toml", '[verify]\nrequire = "fail-to-pass"\n', "require evidence")
    monkeypatch.setenv("PYTEST_ADDOPTS", "--no-such-flag")  # the base's run fails for this environment only
    delegate(calc, "write notes.txt: one", PYTEST_CHECK)
    monkeypatch.delenv("PYTEST_ADDOPTS")
    code, data, _ = delegate(calc, "write notes.txt: two", PYTEST_CHECK)
    assert code == 1  # pass->pass: unproven, not a fail->pass from the other environment's cached failure
    verdict = [v for _, v in records(calc, data["id"], Verdict)][-1]
    assert verdict.transitions == {PYTEST_CHECK: "pass->pass"}


def test_a_symlink_to_the_users_tree_never_lets_verification_write_there(calc: Path, tmp_path: Path) -> None:
    commit_file(calc, "tests/test_calc.py", "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n", "tests")
    (calc / "tests" / "test_calc.py").write_text("# the user's uncommitted work\n")
    agent = tmp_path / "agent.sh"
    agent.write_text(f"#!/bin/sh\nrm -rf tests && ln -s {calc}/tests tests\n")
    agent.chmod(0o755)
    commit_file(calc, ".gitswarm/adapters/linker.toml", f'executable = "{agent}"\n', "an agent that links")
    result = cli(calc, "--json", "delegate", "link it", "--adapter", "linker", "--check", PYTEST_CHECK)
    assert result.code == 1
    assert (calc / "tests" / "test_calc.py").read_text() == "# the user's uncommitted work\n"


def test_a_judge_turned_from_a_file_into_a_folder_is_put_back(calc: Path, tmp_path: Path) -> None:
    agent = tmp_path / "agent.sh"
    agent.write_text("#!/bin/sh\nrm test_calc.py && mkdir -p test_calc.py && echo x > test_calc.py/x\n")
    agent.chmod(0o755)
    commit_file(calc, ".gitswarm/adapters/folder.toml", f'executable = "{agent}"\n', "an agent that swaps")
    result = cli(calc, "--json", "delegate", "swap it", "--adapter", "folder", "--check", SCRIPT_CHECK)
    assert result.code == 1, result.err
    verdict = [v for _, v in records(calc, result.json()["id"], Verdict)][-1]
    assert verdict.transitions == {SCRIPT_CHECK: "fail->fail"} and verdict.judges


def test_an_honest_fix_with_a_quiet_pytest_is_accepted(calc: Path) -> None:
    check = f"{sys.executable} -m pytest -qq -p no:cacheprovider"
    code, _, err = delegate(calc, FIX, check)
    assert code == 0, err


def test_the_projects_own_sitecustomize_still_runs_under_the_guard(calc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['PROJECT_SITE'] = 'ran'\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    check = f"{sys.executable} -c \"import os, sys; sys.exit(0 if os.environ.get('PROJECT_SITE') == 'ran' else 3)\""
    code, _, err = delegate(calc, FIX, check)
    assert code == 0, err  # without the project's sitecustomize the check exits 3, on the base and the head
