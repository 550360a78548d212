"""Job specs: TOML in, validated TaskSpecs out, with the field path in every error.

Nothing is written until a spec has passed every check here: field types,
id syntax, duplicate ids, unknown dependencies and dependency cycles.
"""

from __future__ import annotations

import math
import posixpath
import re
import tomllib
from collections.abc import Callable, Collection, Sequence
from typing import Annotated, Literal

import msgspec

from gitswarm.model.browser import BROWSER_TIMEOUT, below_floor, is_browser
from gitswarm.model.capabilities import CAPABILITIES, SIDE_EFFECTS
from gitswarm.model.errors import BadInput, SpecError
from gitswarm.model.ids import check_task_id
from gitswarm.model.limits import DAY, MAX_TIMEOUT_SECONDS, MAX_WALL_SECONDS
from gitswarm.model.records import Budget, Defaults, TaskSpec

_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?", re.ASCII)
_PATH = re.compile(r"^(.*?) - at `\$\.?(.*)`$")


Priority = Annotated[int, msgspec.Meta(ge=-1_000_000, le=1_000_000)]
Attempts = Annotated[int, msgspec.Meta(ge=1, le=100)]
RepairRounds = Annotated[int, msgspec.Meta(ge=1, le=5)]
MAX_DECLARED_PATHS = 1000  # an implement task's `paths`


class _RawDefaults(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    adapter: str = "shell"
    timeout: str | float | None = None  # None: 10 minutes (a browser task: 20)
    max_attempts: Attempts = 3
    priority: Priority = 0
    setup: str | None = None
    repair_rounds: RepairRounds = 2
    auditor: str | None = None


class _RawTask(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    id: str
    mode: Literal["analyze", "implement"] = "analyze"
    adapter: str | None = None
    command: str | list[str] | None = None
    prompt: str | None = None
    depends_on: list[str] = []
    checks: list[str] = []
    priority: Priority | None = None
    timeout: str | float | None = None
    max_attempts: Attempts | None = None
    cwd: str | None = None
    env: dict[str, str] = {}
    setup: str | None = None
    repair_rounds: RepairRounds | None = None
    auditor: str | None = None
    model: str | None = None
    effort: Literal["low", "high"] | None = None
    needs: list[str] = []
    approve: bool = False
    paths: Annotated[list[str], msgspec.Meta(max_length=MAX_DECLARED_PATHS)] = []
    require: Literal["fail-to-pass"] | None = None  # implement mode: what its checks must show (docs/verification.md)


class _RawBudget(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    max_usd: Annotated[float, msgspec.Meta(gt=0, le=1e6)] | None = None
    max_tokens: Annotated[int, msgspec.Meta(gt=0, le=10**12)] | None = None
    max_attempts: Annotated[int, msgspec.Meta(gt=0, le=10**6)] | None = None
    max_wall: str | float | None = None


class _RawSpec(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    goal: str
    base: str | None = None
    defaults: _RawDefaults = msgspec.field(default_factory=_RawDefaults)
    budget: _RawBudget | None = None
    tasks: list[_RawTask]


_TABLES: dict[str, type[msgspec.Struct]] = {"": _RawSpec, "tasks": _RawTask, "defaults": _RawDefaults, "budget": _RawBudget}
_UNKNOWN = re.compile(r"object contains unknown field `(.*)`")


class JobSpec(msgspec.Struct, frozen=True, kw_only=True):
    goal: str
    base: str | None
    defaults: Defaults
    tasks: tuple[TaskSpec, ...]
    budget: Budget | None = None


class AdapterFacts(msgspec.Struct, frozen=True):
    """What submission needs to know of the adapters here (the model does not load them)."""

    names: Collection[str]
    capabilities: Callable[[str], tuple[str, ...]] = lambda name: ()
    needs_approval: Callable[[str], bool] = lambda name: False  # the adapter's spec says `approve = true`
    route: Callable[[tuple[str, ...]], str] | None = None  # picks an adapter for needed capabilities
    model: Callable[[str], str | None] = lambda name: None  # the adapter spec's default model
    # the model routing gives a task on an adapter (adapter, mode, effort) when it names none; None: `model`
    routed_model: Callable[[str, str, str | None], str | None] | None = None
    browser_models: Sequence[str] | None = None  # `[browser] models`: the floor for browser work; None: none


def parse_duration(value: str | float, where: str, maximum: float = MAX_TIMEOUT_SECONDS) -> float:
    """Seconds from `90`, `1.5`, `"30s"`, `"10m"`, `"1h30m"` or `"250ms"`; positive, finite, at most `maximum`."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        text = str(value).strip()
        match = _DURATION.fullmatch(text)
        if not text or match is None or not any(match.groups()):
            raise SpecError(f"{where}: invalid duration {value!r} (use e.g. 30s, 10m, 1h30m)")
        hours, minutes, secs, millis = (float(g) if g else 0.0 for g in match.groups())
        seconds = hours * 3600 + minutes * 60 + secs + millis / 1000
    if not math.isfinite(seconds):
        raise SpecError(f"{where}: duration must be finite")
    if seconds <= 0:
        raise SpecError(f"{where}: duration must be positive")
    if seconds > maximum:
        raise SpecError(f"{where}: duration must be at most {maximum / DAY:g} days ({maximum:.0f}s)")
    return seconds


def toml_string(text: str) -> str:
    """`text` as a TOML basic string, whatever it holds (quotes, backslashes, control characters).

    For specs built by code from outside values (a branch name, an instruction):
    formatting them into TOML unescaped would let them add keys of their own.
    """
    out = []
    for char in text:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char < " " or char == "\x7f":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _refuse_nul(value: object, where: str) -> None:
    """No string anywhere in a spec may hold a NUL byte: commands, paths and the environment cannot carry one."""
    if isinstance(value, str):
        if "\0" in value:
            raise SpecError(f"{where}: contains a NUL byte")
    elif isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if "\0" in key:
                raise SpecError(f"{where or 'spec'}: a key contains a NUL byte")
            _refuse_nul(item, path)
    elif isinstance(value, list):
        for n, item in enumerate(value):
            _refuse_nul(item, f"{where}[{n}]")


def _check_cwd(cwd: str | None, where: str) -> None:
    """A task runs inside the repository (or its worktree): no absolute path, no way out through `..`."""
    if cwd is None:
        return
    if posixpath.isabs(cwd):
        raise SpecError(f"{where}: must be a path relative to the repository, got {cwd!r}")
    normal = posixpath.normpath(cwd)
    if normal == ".." or normal.startswith("../"):
        raise SpecError(f"{where}: {cwd!r} leads out of the repository")


def declared_path_problem(path: str) -> str | None:
    """What is wrong with a task's declared path (a repository-relative file, folder or glob), or None;
    for a submitted spec and a pulled one alike (model/validate.py)."""
    if not path.strip() or len(path) > 4096:
        return "must be a path of 1 to 4096 characters"
    if path.startswith("/") or ".." in path.split("/"):
        return f"{path!r} must be relative and inside the repository (no leading / or ..)"
    return None


def _check_paths(paths: list[str], where: str) -> None:
    for n, path in enumerate(paths):
        problem = declared_path_problem(path)
        if problem is not None:
            raise SpecError(f"{where}[{n}]: {problem}")


def _check_env(env: dict[str, str], where: str) -> None:
    for name in env:
        if not name or "=" in name:
            raise SpecError(f"{where}: invalid variable name {name!r}")


def _validation_message(exc: msgspec.ValidationError, source: str) -> str:
    text = str(exc)
    match = _PATH.match(text)
    message, path = match.groups() if match else (text, "")
    message = message[0].lower() + message[1:]
    unknown = _UNKNOWN.fullmatch(message)
    if unknown:
        return _unknown_field(unknown.group(1), path, source)
    return f"{path or 'spec'}: {message}"


def _unknown_field(name: str, path: str, source: str) -> str:
    """`job.toml: tasks[0]: unknown field `comand`; did you mean `command`?` (the file named
    unless the spec came from no file; else the fields known there)."""
    table = _TABLES[path.split(".")[-1].split("[")[0] if path else ""]
    known = list(table.__struct_fields__)
    import difflib  # deferred: only a misspelled field needs it, and every run parses a spec (~1 ms of start-up)

    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean `{close[0]}`?" if close else f" (known: {', '.join(known)})"
    where = [source] if source != "spec" else []
    if path or not where:
        where.append(path or "spec")
    return f"{': '.join(where)}: unknown field `{name}`{hint}"


MAX_SPEC_DEPTH = 16  # a spec's deepest honest value (tasks, a task, its env, a value) is 4 deep


def _refuse_deep(data: object, source: str) -> None:
    """SpecError for a value nested deeper than MAX_SPEC_DEPTH, found without recursing."""
    pending: list[tuple[object, int]] = [(data, 0)]
    while pending:
        value, depth = pending.pop()
        if depth > MAX_SPEC_DEPTH:
            raise SpecError(f"{source}: nested more than {MAX_SPEC_DEPTH} deep")
        if isinstance(value, dict):
            pending.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            pending.extend((v, depth + 1) for v in value)


def parse_spec(text: str, adapters: Collection[str] | AdapterFacts, source: str = "spec", approve: bool = False) -> JobSpec:
    """Parse and validate a TOML job spec against the adapters known here.

    `approve` approves every task with side effects outside the repository
    (`--approve`); otherwise each needs `approve = true`.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{source}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise SpecError(f"{source}: nested more than {MAX_SPEC_DEPTH} deep") from None
    _refuse_deep(data, source)
    _refuse_nul(data, "")
    try:
        raw = msgspec.convert(data, _RawSpec)
    except msgspec.ValidationError as exc:
        raise SpecError(_validation_message(exc, source)) from None
    facts = adapters if isinstance(adapters, AdapterFacts) else AdapterFacts(names=adapters)
    return _validate(raw, facts, approve)


def _validate(raw: _RawSpec, facts: AdapterFacts, approve_all: bool) -> JobSpec:
    adapters = facts.names
    if not raw.goal.strip():
        raise SpecError("goal: must not be empty")
    if not raw.tasks:
        raise SpecError("tasks: a job needs at least one task")
    defaults = Defaults(
        adapter=raw.defaults.adapter,
        timeout=parse_duration(600.0 if raw.defaults.timeout is None else raw.defaults.timeout, "defaults.timeout"),
        max_attempts=raw.defaults.max_attempts,
        priority=raw.defaults.priority,
    )
    if defaults.adapter not in adapters:
        raise SpecError(f"defaults.adapter: unknown adapter {defaults.adapter!r}")
    seen: dict[str, int] = {}
    for n, task in enumerate(raw.tasks):
        where = f"tasks[{n}]"
        try:
            check_task_id(task.id, f"{where}.id")
        except BadInput as exc:
            raise SpecError(str(exc)) from None
        if task.id in seen:
            raise SpecError(f"{where}.id: duplicate task id {task.id!r} (also tasks[{seen[task.id]}])")
        seen[task.id] = n
    dependents: dict[str, list[str]] = {task.id: [] for task in raw.tasks}
    specs = []
    for n, task in enumerate(raw.tasks):
        where = f"tasks[{n}]"
        for d, dep in enumerate(task.depends_on):
            if dep not in seen:
                raise SpecError(f'{where}.depends_on: unknown task "{dep}"')
            if dep == task.id:
                raise SpecError(f"{where}.depends_on: task {task.id!r} depends on itself")
            if dep in task.depends_on[:d]:
                raise SpecError(f"{where}.depends_on: {dep!r} listed twice")
            dependents[dep].append(task.id)
        for n_need, need in enumerate(task.needs):
            if need not in CAPABILITIES:
                raise SpecError(f"{where}.needs[{n_need}]: unknown capability {need!r} (known: {', '.join(CAPABILITIES)})")
        adapter = task.adapter or (_route(facts, tuple(task.needs), where) if task.needs else defaults.adapter)
        if adapter not in adapters:
            raise SpecError(f"{where}.adapter: unknown adapter {adapter!r}")
        lacking = [need for need in task.needs if need not in facts.capabilities(adapter)]
        if lacking:
            raise SpecError(f"{where}.needs: adapter {adapter!r} lacks {', '.join(lacking)}")
        side_effects = sorted(SIDE_EFFECTS & set(task.needs)) + (["its adapter acts outside the repository"] if facts.needs_approval(adapter) else [])
        if side_effects and not (task.approve or approve_all):
            raise SpecError(f"{where}: needs approval ({', '.join(side_effects)}): set approve = true or pass --approve")
        if adapter == "shell" and not task.command:
            raise SpecError(f"{where}.command: the shell adapter needs a command")
        if adapter != "shell" and not (task.prompt or "").strip():
            raise SpecError(f"{where}.prompt: adapter {adapter!r} needs a prompt")
        auditor = task.auditor or raw.defaults.auditor
        if auditor is not None and auditor not in adapters:
            raise SpecError(f"{where}.auditor: unknown adapter {auditor!r}")
        timeout = defaults.timeout if task.timeout is None else parse_duration(task.timeout, f"{where}.timeout")
        if is_browser(task.needs):
            if task.timeout is None and raw.defaults.timeout is None:
                timeout = BROWSER_TIMEOUT
            routed = facts.routed_model(adapter, task.mode, task.effort) if facts.routed_model else facts.model(adapter)
            refused = below_floor(task.model or routed, facts.browser_models)
            if refused:
                raise SpecError(f"{where}: browser task on adapter {adapter!r} {refused}")
        _check_cwd(task.cwd, f"{where}.cwd")
        _check_paths(task.paths, f"{where}.paths")
        _check_env(task.env, f"{where}.env")
        max_attempts = defaults.max_attempts if task.max_attempts is None else task.max_attempts
        specs.append(
            TaskSpec(
                id=task.id,
                seq=n,
                mode=task.mode,
                adapter=adapter,
                command=task.command,
                prompt=task.prompt,
                depends_on=tuple(task.depends_on),
                checks=tuple(task.checks),
                priority=defaults.priority if task.priority is None else task.priority,
                timeout=timeout,
                max_attempts=max_attempts,
                cwd=task.cwd,
                env=dict(task.env),
                setup=task.setup or raw.defaults.setup,
                repair_rounds=task.repair_rounds or raw.defaults.repair_rounds,
                auditor=auditor,
                model=task.model,
                effort=task.effort,
                needs=tuple(task.needs),
                approved=bool(side_effects),
                paths=tuple(task.paths),
                require=task.require,
            )
        )
    specs = [msgspec.structs.replace(s, dependents=tuple(dependents[s.id])) for s in specs]
    _refuse_cycles(specs)
    return JobSpec(goal=raw.goal, base=raw.base, defaults=defaults, tasks=tuple(specs), budget=_budget(raw.budget))


def _route(facts: AdapterFacts, needs: tuple[str, ...], where: str) -> str:
    if facts.route is None:
        raise SpecError(f"{where}.needs: no adapter is known to have {', '.join(needs)}; name one with adapter =")
    try:
        return facts.route(needs)
    except BadInput as exc:
        raise SpecError(f"{where}.needs: {exc}") from None


def _budget(raw: _RawBudget | None) -> Budget | None:
    if raw is None:
        return None
    wall = None if raw.max_wall is None else parse_duration(raw.max_wall, "budget.max_wall", MAX_WALL_SECONDS)
    return Budget(max_usd=raw.max_usd, max_tokens=raw.max_tokens, max_attempts=raw.max_attempts, max_wall=wall)


def stuck_tasks(specs: Sequence[TaskSpec]) -> set[str]:
    """The tasks on or behind a dependency cycle (Kahn's algorithm); empty when there is none.
    `dependents` must mirror `depends_on`."""
    waiting = {s.id: len(s.depends_on) for s in specs}
    by_id = {s.id: s for s in specs}
    ready = [s.id for s in specs if not s.depends_on]
    while ready:
        for dependent in by_id[ready.pop()].dependents:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                ready.append(dependent)
    return {task_id for task_id, count in waiting.items() if count}


def _refuse_cycles(specs: list[TaskSpec]) -> None:
    """On a cycle, name one concretely."""
    stuck = stuck_tasks(specs)
    if not stuck:
        return
    by_id = {s.id: s for s in specs}
    start = min(stuck, key=lambda t: by_id[t].seq)
    path, node = [start], start
    while True:
        node = next(d for d in by_id[node].depends_on if d in stuck)
        if node in path:
            cycle = path[path.index(node):] + [node]
            break
        path.append(node)
    seq = by_id[cycle[0]].seq
    raise SpecError(f"tasks[{seq}].depends_on: dependency cycle {' -> '.join(cycle)}")
