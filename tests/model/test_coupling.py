"""The coupled-change guard's cases, on parsed specs (model/coupling.py)."""

from __future__ import annotations

import pytest

from gitswarm.model.coupling import coupled_tasks, paths_overlap, refusal
from gitswarm.model.errors import SpecError
from gitswarm.model.spec import parse_spec

ADAPTERS = ("shell", "agent")


def spec(*tasks: str) -> str:
    return 'goal = "g"\n' + "".join(f"[[tasks]]\n{t}\n" for t in tasks)


def implement(task: str, paths: list[str] | None = None, depends_on: list[str] | None = None) -> str:
    body = f'id = "{task}"\nmode = "implement"\nadapter = "agent"\nprompt = "change it"\n'
    if paths is not None:
        body += "paths = [" + ", ".join(f'"{p}"' for p in paths) + "]\n"
    if depends_on:
        body += "depends_on = [" + ", ".join(f'"{d}"' for d in depends_on) + "]\n"
    return body


def pairs(*tasks: str) -> list[tuple[str, str]]:
    return [(c.first, c.second) for c in coupled_tasks(parse_spec(spec(*tasks), ADAPTERS).tasks)]


def test_two_parallel_implement_tasks_that_declare_no_paths_are_coupled() -> None:
    (found,) = coupled_tasks(parse_spec(spec(implement("a"), implement("b")), ADAPTERS).tasks)
    assert (found.first, found.second) == ("a", "b") and "declare no paths" in found.why


def test_one_task_without_paths_couples_with_every_parallel_one() -> None:
    assert pairs(implement("a", ["src/a.py"]), implement("b"), implement("c", ["docs"])) == [("a", "b"), ("b", "c")]


def test_disjoint_declared_paths_are_not_coupled() -> None:
    assert pairs(implement("a", ["src/a.py", "tests/test_a.py"]), implement("b", ["src/b.py", "docs/"])) == []


@pytest.mark.parametrize(
    ("a", "b"),
    [("src/a.py", "src/a.py"), ("src", "src/a.py"), ("src/", "src/deep/x.py"), ("src/*.py", "src/a.py"),
     ("src/*.py", "src"), ("*.md", "README.md"), ("**/conf.toml", "app/conf.toml")],
)
def test_paths_that_can_name_one_file_overlap(a: str, b: str) -> None:
    assert paths_overlap(a, b) and paths_overlap(b, a)
    assert pairs(implement("x", [a]), implement("y", [b])) == [("x", "y")]


@pytest.mark.parametrize(("a", "b"), [("src/a.py", "src/ab.py"), ("src", "srcs/x"), ("docs/*.md", "src/a.md"), ("a/b", "b")])
def test_paths_that_cannot_name_one_file_do_not(a: str, b: str) -> None:
    assert not paths_overlap(a, b) and not paths_overlap(b, a)


def test_tasks_that_wait_for_each_other_directly_or_not_are_not_coupled() -> None:
    assert pairs(implement("a"), implement("b", depends_on=["a"])) == []
    assert pairs(implement("a"), spec_shell("mid", ["a"]), implement("b", depends_on=["mid"])) == []
    assert pairs(implement("a"), implement("b", depends_on=["a"]), implement("c")) == [("a", "c"), ("b", "c")]


def spec_shell(task: str, depends_on: list[str]) -> str:
    return f'id = "{task}"\ncommand = "true"\ndepends_on = [' + ", ".join(f'"{d}"' for d in depends_on) + "]\n"


def test_analyze_tasks_never_couple() -> None:
    analyze = 'id = "look"\nadapter = "agent"\nprompt = "read it"\n'
    assert pairs(analyze, analyze.replace("look", "look2"), implement("a")) == []


def test_the_refusal_names_a_few_pairs_and_counts_the_rest() -> None:
    found = coupled_tasks(parse_spec(spec(*(implement(f"t{n}") for n in range(5))), ADAPTERS).tasks)
    assert len(found) == 10
    line = refusal(found)
    assert "t0 and t1" in line and "and 7 more pairs" in line and "depends_on" in line and "--allow-overlap" in line
    assert "\n" not in line


def test_a_long_chain_and_a_wide_job_are_checked_quickly() -> None:
    chain = [implement("t0")] + [implement(f"t{n}", depends_on=[f"t{n - 1}"]) for n in range(1, 3000)]
    assert pairs(*chain) == []
    wide = [implement(f"w{n}", [f"f{n}.py"]) for n in range(1000)]
    assert pairs(*wide) == []


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside", "a/../../b", "", "  "])
def test_a_declared_path_outside_the_repository_is_bad_input(path: str) -> None:
    with pytest.raises(SpecError, match=r"tasks\[0\]\.paths\[0\]"):
        parse_spec(spec(implement("a", [path])), ADAPTERS)
