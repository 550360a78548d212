"""Job specs: parsing, defaults, durations and every refusal with its field path."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitswarm.model.errors import BadInput, SpecError
from gitswarm.model.records import Defaults, TaskSpec
from gitswarm.model.spec import JobSpec, parse_duration, parse_spec, toml_string
from tests.conftest import spec_text

ADAPTERS = ("shell", "agent")


def refusal(text: str, adapters: tuple[str, ...] = ADAPTERS, source: str = "spec") -> str:
    with pytest.raises(SpecError) as info:
        parse_spec(text, adapters, source)
    assert isinstance(info.value, BadInput)
    assert "\n" not in str(info.value)
    return str(info.value)


# -- happy path -----------------------------------------------------------------------


def test_parse_spec_applies_defaults() -> None:
    spec = parse_spec(spec_text('id = "a"\ncommand = "true"'), ADAPTERS)
    assert isinstance(spec, JobSpec)
    assert spec.goal == "test goal"
    assert spec.defaults == Defaults()
    (task,) = spec.tasks
    assert task == TaskSpec(
        id="a",
        seq=0,
        mode="analyze",
        adapter="shell",
        command="true",
        depends_on=(),
        dependents=(),
        checks=(),
        priority=0,
        timeout=600.0,
        max_attempts=3,
        cwd=None,
        env={},
    )


def test_parse_spec_job_defaults_apply_to_tasks_and_tasks_override() -> None:
    text = spec_text(
        'id = "a"\ncommand = "true"',
        'id = "b"\nprompt = "look"\nadapter = "agent"\npriority = 1\ntimeout = "10m"\nmax_attempts = 1',
        defaults='timeout = "30s"\nmax_attempts = 5\npriority = 7',
    )
    spec = parse_spec(text, ADAPTERS)
    assert spec.defaults == Defaults(adapter="shell", timeout=30.0, max_attempts=5, priority=7)
    a, b = spec.tasks
    assert (a.adapter, a.timeout, a.max_attempts, a.priority) == ("shell", 30.0, 5, 7)
    assert (b.adapter, b.timeout, b.max_attempts, b.priority) == ("agent", 600.0, 1, 1)
    assert b.prompt == "look"


def test_parse_spec_default_adapter_applies() -> None:
    spec = parse_spec(spec_text('id = "a"\nprompt = "p"', defaults='adapter = "agent"'), ADAPTERS)
    assert spec.tasks[0].adapter == "agent"


def test_parse_spec_keeps_every_field() -> None:
    text = spec_text(
        'id = "x"\nmode = "implement"\ncommand = ["make", "test"]\nchecks = ["ruff .", "pytest"]\n'
        'cwd = "sub"\nenv = { B = "2", A = "1" }'
    )
    (task,) = parse_spec(text, ADAPTERS).tasks
    assert task.mode == "implement"
    assert task.command == ["make", "test"]
    assert task.checks == ("ruff .", "pytest")
    assert task.cwd == "sub"
    assert task.env == {"A": "1", "B": "2"}


def test_parse_spec_computes_dependents_and_seq() -> None:
    text = spec_text(
        'id = "lint"\ncommand = "true"',
        'id = "build"\ncommand = "true"',
        'id = "test"\ncommand = "true"\ndepends_on = ["build", "lint"]',
        'id = "ship"\ncommand = "true"\ndepends_on = ["test", "lint"]',
    )
    spec = parse_spec(text, ADAPTERS)
    by_id = {t.id: t for t in spec.tasks}
    assert [t.id for t in spec.tasks] == ["lint", "build", "test", "ship"]
    assert [t.seq for t in spec.tasks] == [0, 1, 2, 3]
    assert by_id["lint"].dependents == ("test", "ship")
    assert by_id["build"].dependents == ("test",)
    assert by_id["test"].dependents == ("ship",)
    assert by_id["ship"].dependents == ()
    assert by_id["test"].depends_on == ("build", "lint")


def test_parse_spec_accepts_dependency_on_a_later_task() -> None:
    spec = parse_spec(spec_text('id = "b"\ncommand = "x"\ndepends_on = ["a"]', 'id = "a"\ncommand = "x"'), ADAPTERS)
    assert spec.tasks[1].dependents == ("b",)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ('"30s"', 30.0),
        ('"10m"', 600.0),
        ('"1h"', 3600.0),
        ('"1h30m"', 5400.0),
        ('"1h30m15s"', 5415.0),
        ('"2m30s"', 150.0),
        ('"1.5h"', 5400.0),
        ('"250ms"', 0.25),
        ('"1m250ms"', 60.25),
        ('" 45s "', 45.0),
        ("90", 90.0),
        ("1.5", 1.5),
    ],
)
def test_durations(value: str, seconds: float) -> None:
    spec = parse_spec(spec_text(f'id = "a"\ncommand = "x"\ntimeout = {value}'), ADAPTERS)
    assert spec.tasks[0].timeout == pytest.approx(seconds)
    assert isinstance(spec.tasks[0].timeout, float)


def test_parse_duration_direct() -> None:
    assert parse_duration("1h30m", "t") == 5400.0
    assert parse_duration(90, "t") == 90.0


# -- refusals -------------------------------------------------------------------------


def test_invalid_toml() -> None:
    message = refusal('goal = "g"\n[[tasks]\nid = "a"\n', source="job.toml")
    assert message.startswith("job.toml: invalid TOML: ")
    assert "line 2" in message


def test_invalid_toml_default_source() -> None:
    assert refusal("goal = \n").startswith("spec: invalid TOML: ")


TASK_FIELDS = "id, mode, adapter, command, prompt, depends_on, checks, priority, timeout, max_attempts, cwd, env, setup, repair_rounds, auditor, model, effort, needs, approve, paths, require"


def test_unknown_task_field() -> None:
    # Nothing close: the fields known there are listed.
    assert refusal(spec_text('id = "a"\ncommand = "x"\ncolour = "red"')) == f"tasks[0]: unknown field `colour` (known: {TASK_FIELDS})"


def test_unknown_field_names_the_file_and_suggests_the_closest_field() -> None:
    text = spec_text('id = "a"\ncommand = "x"', 'id = "b"\ncomand = "x"')
    assert refusal(text, source="ci/job.toml") == "ci/job.toml: tasks[1]: unknown field `comand`; did you mean `command`?"
    text = spec_text('id = "a"\ncommand = "x"\ndepends-on = []')
    assert refusal(text, source="job.toml") == "job.toml: tasks[0]: unknown field `depends-on`; did you mean `depends_on`?"
    budget = 'goal = "g"\n[budget]\nmax_dollars = 1\n[[tasks]]\nid = "a"\ncommand = "x"\n'
    assert refusal(budget, source="job.toml").startswith("job.toml: budget: unknown field `max_dollars`")


def test_unknown_defaults_field() -> None:
    message = refusal(spec_text('id = "a"\ncommand = "x"', defaults="retries = 2"))
    assert message == "defaults: unknown field `retries` (known: adapter, timeout, max_attempts, priority, setup, repair_rounds, auditor)"


def test_unknown_top_level_field() -> None:
    # Same wording as a nested unknown field, under the path `spec`; with a file, the file.
    text = 'goal = "g"\nfoo = 1\n[[tasks]]\nid = "a"\ncommand = "x"\n'
    assert refusal(text) == "spec: unknown field `foo` (known: goal, base, defaults, budget, tasks)"
    assert refusal(text.replace("foo", "gaol"), source="job.toml") == "job.toml: unknown field `gaol`; did you mean `goal`?"


def test_missing_top_level_field_names_it() -> None:
    message = refusal('goal = "g"\n')
    assert message.startswith("spec: ")
    assert "`tasks`" in message


def test_missing_task_field() -> None:
    assert refusal(spec_text('command = "x"')) == "tasks[0]: object missing required field `id`"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (spec_text('id = "a"\ncommand = "x"\npriority = "high"'), "tasks[0].priority: expected `int | null`, got `str`"),
        (spec_text('id = "a"\ncommand = "x"\ndepends_on = "b"'), "tasks[0].depends_on: expected `array`, got `str`"),
        (spec_text('id = "a"\ncommand = "x"\ntimeout = true'), "tasks[0].timeout: expected `float | str | null`, got `bool`"),
        (spec_text('id = "a"\ncommand = "x"\nmode = "fix"'), "tasks[0].mode: invalid enum value 'fix'"),
        ('goal = 1\n[[tasks]]\nid = "a"\ncommand = "x"\n', "goal: expected `str`, got `int`"),
        ('goal = "g"\ntasks = 1\n', "tasks: expected `array`, got `int`"),
        (spec_text('id = "a"\ncommand = "x"', 'id = 2\ncommand = "x"'), "tasks[1].id: expected `str`, got `int`"),
        (spec_text('id = "a"\ncommand = "x"\nenv = { A = 1 }'), "tasks[0].env[...]: expected `str`, got `int`"),
    ],
)
def test_wrong_type(text: str, expected: str) -> None:
    assert refusal(text) == expected


def test_invalid_task_id() -> None:
    message = refusal(spec_text('id = "a"\ncommand = "x"', 'id = "../b"\ncommand = "x"'))
    assert message.startswith("tasks[1].id: invalid task id '../b'")


def test_duplicate_id() -> None:
    text = spec_text('id = "a"\ncommand = "x"', 'id = "b"\ncommand = "x"', 'id = "a"\ncommand = "x"')
    assert refusal(text) == "tasks[2].id: duplicate task id 'a' (also tasks[0])"


def test_unknown_dependency() -> None:
    text = spec_text('id = "a"\ncommand = "x"', 'id = "b"\ncommand = "x"\ndepends_on = ["a", "lnt"]')
    assert refusal(text) == 'tasks[1].depends_on: unknown task "lnt"'


def test_self_dependency() -> None:
    assert refusal(spec_text('id = "a"\ncommand = "x"\ndepends_on = ["a"]')) == "tasks[0].depends_on: task 'a' depends on itself"


def test_dependency_listed_twice() -> None:
    text = spec_text('id = "a"\ncommand = "x"', 'id = "b"\ncommand = "x"\ndepends_on = ["a", "a"]')
    assert refusal(text) == "tasks[1].depends_on: 'a' listed twice"


def test_two_task_cycle() -> None:
    text = spec_text('id = "a"\ncommand = "x"\ndepends_on = ["b"]', 'id = "b"\ncommand = "x"\ndepends_on = ["a"]')
    assert refusal(text) == "tasks[0].depends_on: dependency cycle a -> b -> a"


def test_cycle_message_names_only_the_cycle() -> None:
    # x hangs off the cycle a -> c -> b -> a but is not part of it.
    text = spec_text(
        'id = "x"\ncommand = "x"\ndepends_on = ["a"]',
        'id = "a"\ncommand = "x"\ndepends_on = ["c"]',
        'id = "b"\ncommand = "x"\ndepends_on = ["a"]',
        'id = "c"\ncommand = "x"\ndepends_on = ["b"]',
        'id = "ok"\ncommand = "x"',
    )
    assert refusal(text) == "tasks[1].depends_on: dependency cycle a -> c -> b -> a"


@pytest.mark.parametrize("value", ['"10 minutes"', '""', '"90"', '"1h30"', '"10M"', '"s"', '"-5s"', '"1.5ms"'])
def test_bad_duration(value: str) -> None:
    message = refusal(spec_text(f'id = "a"\ncommand = "x"\ntimeout = {value}'))
    assert message.startswith("tasks[0].timeout: invalid duration ")
    assert message.endswith("(use e.g. 30s, 10m, 1h30m)")


@pytest.mark.parametrize("value", ["0", "-5", '"0s"', "0.0"])
def test_non_positive_duration(value: str) -> None:
    assert refusal(spec_text(f'id = "a"\ncommand = "x"\ntimeout = {value}')) == "tasks[0].timeout: duration must be positive"


def test_bad_default_duration() -> None:
    message = refusal(spec_text('id = "a"\ncommand = "x"', defaults='timeout = "soon"'))
    assert message == "defaults.timeout: invalid duration 'soon' (use e.g. 30s, 10m, 1h30m)"


@pytest.mark.parametrize("value", ["nan", "inf", "1e400"])
def test_non_finite_duration_is_refused(value: str) -> None:
    # A NaN or infinite timeout encodes as JSON null, so the job it wrote could never be read back.
    message = refusal(spec_text(f'id = "a"\ncommand = "x"\ntimeout = {value}'))
    assert message.startswith("tasks[0].timeout: ")


@pytest.mark.parametrize("goal", ["", "   "])
def test_empty_goal(goal: str) -> None:
    assert refusal(spec_text('id = "a"\ncommand = "x"', goal=goal)) == "goal: must not be empty"


def test_no_tasks() -> None:
    assert refusal('goal = "g"\ntasks = []\n') == "tasks: a job needs at least one task"


@pytest.mark.parametrize("command", [None, '""', "[]"])
def test_shell_task_without_command(command: str | None) -> None:
    body = 'id = "a"' + ("" if command is None else f"\ncommand = {command}")
    assert refusal(spec_text('id = "ok"\ncommand = "x"', body)) == "tasks[1].command: the shell adapter needs a command"


def test_non_shell_task_without_prompt() -> None:
    assert refusal(spec_text('id = "a"\nadapter = "agent"')) == "tasks[0].prompt: adapter 'agent' needs a prompt"


def test_unknown_adapter() -> None:
    assert refusal(spec_text('id = "a"\nadapter = "claude"\nprompt = "p"')) == "tasks[0].adapter: unknown adapter 'claude'"


def test_unknown_default_adapter() -> None:
    assert refusal(spec_text('id = "a"\ncommand = "x"', defaults='adapter = "claude"')) == (
        "defaults.adapter: unknown adapter 'claude'"
    )


def test_adapter_known_only_if_listed() -> None:
    assert refusal(spec_text('id = "a"\nadapter = "agent"\nprompt = "p"'), adapters=("shell",)) == (
        "tasks[0].adapter: unknown adapter 'agent'"
    )


@pytest.mark.parametrize("value", ["0", "-1"])
def test_max_attempts_below_one(value: str) -> None:
    assert refusal(spec_text(f'id = "a"\ncommand = "x"\nmax_attempts = {value}')) == "tasks[0].max_attempts: expected `int` >= 1"


def test_default_max_attempts_zero() -> None:
    assert refusal(spec_text('id = "a"\ncommand = "x"', defaults="max_attempts = 0")) == "defaults.max_attempts: expected `int` >= 1"



@given(st.text())
def test_toml_string_round_trips_any_text(text: str) -> None:
    assert tomllib.loads(f"k = {toml_string(text)}\n") == {"k": text}


@pytest.mark.parametrize("value", [604800.001, "168h1s", 1e308])
def test_duration_past_seven_days(value: float | str) -> None:
    with pytest.raises(SpecError, match="at most 7 days"):
        parse_duration(value, "timeout")
    assert parse_duration("168h", "timeout") == 604800.0


@pytest.mark.parametrize("nested", ["x = " + "[" * 2000 + "]" * 2000, "[[tasks]]\nid = \"a\"\ncommand = \"true\"\nenv = " + "{a = " * 500 + "1" + "}" * 500])
def test_a_spec_nested_deep_is_one_line_of_bad_input(nested: str) -> None:
    assert refusal(f'goal = "g"\n{nested}') == "spec: nested more than 16 deep"


def test_a_duration_in_another_scripts_digits_is_refused() -> None:
    assert "timeout" in refusal('goal = "g"\n[[tasks]]\nid = "a"\ncommand = "true"\ntimeout = "\u0663m"')
