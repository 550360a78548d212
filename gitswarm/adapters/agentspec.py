"""The adapter spec: one TOML file describes how to drive one agent CLI headless.

The smallest valid spec is `executable = "name"`: the prompt goes as the last
argument and stdout is read as plain text. Everything else is optional; see
docs/adapters.md for every key. Specs are decoded strictly: an unknown key is
refused with the file and the key named.
"""

from __future__ import annotations

import json
import re
import string
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from gitswarm.adapters.extends import resolve
from gitswarm.adapters.names import spec_dirs
from gitswarm.adapters.sandbox import SpecSandbox, check_table
from gitswarm.model.capabilities import CAPABILITIES, SIDE_EFFECTS
from gitswarm.model.errors import BadInput
from gitswarm.model.routing import TIERS
from gitswarm.model.spec import parse_duration

PLACEHOLDERS = frozenset(
    {"prompt", "prompt_file", "workdir", "scratch", "model", "schema", "schema_file", "usage_file", "budget_usd", "session"}
)
Arg = str | list[str]  # a list is an optional group: dropped when one of its placeholders is empty
#: `executable = "{python}"`: the Python interpreter gitswarm itself runs in (`sys.executable`), which can
#: import gitswarm's own modules (the shipped `scripted` spec runs `-m gitswarm.scripted_agent` with it).
PYTHON_EXECUTABLE = "{python}"


class Selector(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Where one value is in JSON output: a dotted path, in the events matching `where`.

    `take` says which of the values found counts: the last, the first, the sum
    over all of them (token counts reported per turn) or the largest. With
    `key`, the value is the key (or index) under which it was found at the
    path's last `*`: Claude Code and Gemini CLI key their usage by model name.
    """

    path: str
    where: dict[str, str | bool | int] = {}
    take: Literal["last", "first", "sum", "max"] = "last"
    key: bool = False


Field = str | Selector


class OutputSpec(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    format: Literal["text", "json", "jsonl"] = "text"
    text: Field | None = None  # the agent's final answer
    error: Field | None = None  # true (or a non-empty string) when the run failed
    error_text: Field | None = None  # why it failed
    denials: Field | None = None  # a non-empty list: the agent was refused something it tried
    ignored_denials: list[str] = []  # tools whose refusal is expected, not a failure
    session: Field | None = None
    cost_usd: Field | None = None
    input_tokens: Field | None = None
    output_tokens: Field | None = None
    model: Field | None = None
    structured: Field | None = None  # the schema-checked answer, when the CLI returns one apart
    usage_file: bool = False  # the fields above (but text) are read from {usage_file}, a JSON file
    # text output: regular expressions with one group, searched in stdout then stderr
    cost_regex: str | None = None
    input_tokens_regex: str | None = None
    output_tokens_regex: str | None = None
    session_regex: str | None = None
    model_regex: str | None = None
    error_regex: str | None = None  # a match means the run failed, whatever its exit code (aider exits 0)
    # a failed run whose output matches failed for a provider reason (quota, an unfunded key, an unknown
    # model): recorded on the run, and its next attempt may go to `[routing] fallback`
    provider_error_regex: str | None = None
    drop_lines: list[str] = []  # text output: lines matching any of these are not part of the answer (banners)


OUTPUT_FIELDS = ("text", "error", "error_text", "denials", "session", "cost_usd", "input_tokens", "output_tokens",
                 "model", "structured")


class ModeSpec(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    args: list[Arg]
    denials: Field | None = None  # in this mode, read in place of [output] denials
    browser_args: list[Arg] | None = None  # in this mode, for a task that needs `browser` (else args)


class StateHome(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """An agent's own state directory, made ephemeral for each run.

    A fresh directory is pointed at by `env`; every entry of the real one
    (the caller's value of `env`, else `default`) is linked in (or only those
    in `link`, when it is set), except `copy` (copied, so a run cannot change
    the user's) and `fresh` (left out, for the agent to start anew: no earlier
    session can be resumed). `json` and `yaml` then merge settings into files there.
    """

    env: str
    default: str
    copy: list[str] = []
    fresh: list[str] = []
    link: list[str] | None = None  # when set, only these entries are linked (an allow-list)
    json: dict[str, dict[str, Any]] = {}  # JSON files of the state directory and the settings merged into them
    yaml: dict[str, dict[str, Any]] = {}  # YAML files of the state directory (hermes' config.yaml), likewise


class ResumeSpec(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """How the CLI resumes one of its sessions, for a follow-up that asks (`--resume-session`):
    `args` (with `{session}`) go after the implement mode's; `keep` are the paths under the run's
    ephemeral home where the CLI keeps its sessions, kept after an implement run that reported a
    session (adapters/sessions.py) and put back into the home of the run that resumes it."""

    args: list[Arg]
    keep: list[str] = []


class ModelTiers(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """`[models]`: the model of each tier, for routing (model/routing.py); a tier left out is not offered."""

    fast: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    strong: Annotated[str, msgspec.Meta(min_length=1)] | None = None

    def named(self) -> dict[str, str]:
        return {tier: model for tier in TIERS if (model := getattr(self, tier)) is not None}


class AgentSpec(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    executable: str
    description: str = ""
    # None: `--version` is tried, and a CLI without one still passes its preflight.
    version_args: list[str] | None = None
    help_args: list[list[str]] = msgspec.field(default_factory=lambda: [["--help"]])
    unlisted_flags: list[str] = []  # flags the CLI accepts but its --help does not list
    capabilities: list[str] = []
    timeout: str | float | None = None
    prompt: Literal["arg", "stdin", "file"] = "arg"
    args: list[Arg] | None = None  # both modes, unless [analyze] or [implement] says otherwise
    analyze: ModeSpec | None = None
    implement: ModeSpec | None = None
    model: str | None = None
    models: ModelTiers = msgspec.field(default_factory=ModelTiers)  # [models]: fast, strong
    env: dict[str, str] = {}
    pass_env: list[str] = []  # variables taken from the caller's environment when set (keys, endpoints)
    home_files: list[str] = []  # paths under the real home linked into the run's ephemeral home
    home_copy: list[str] = []  # paths under the real home copied in (files the agent may rewrite)
    home_json: dict[str, dict[str, Any]] = {}  # JSON files of the run's home and the settings merged into them
    state_home: StateHome | None = None
    output: OutputSpec = msgspec.field(default_factory=OutputSpec)
    exit_codes: dict[str, str] = {}  # "42" = "input error": what a code means, for the error message
    approve: bool = False  # runs act outside the repository: tasks need approval
    resume: ResumeSpec | None = None  # how to resume a session; None: it cannot be
    sandbox: SpecSandbox = msgspec.field(default_factory=SpecSandbox)  # [sandbox]: mode, network, hosts, endpoint_env (docs/sandbox.md)

    def args_for(self, mode: str, browser: bool = False) -> list[Arg] | None:
        """The argument template of a run in `mode`; for a browser task, the mode's `browser_args` if it has them."""
        chosen = self.implement if mode == "implement" else self.analyze
        if chosen is None:
            return self.args
        return chosen.browser_args if browser and chosen.browser_args is not None else chosen.args

    def output_for(self, mode: str) -> OutputSpec:
        """How to read a run in this mode: `[output]`, with the mode's own `denials` if it has one."""
        chosen = self.implement if mode == "implement" else self.analyze
        if chosen is None or chosen.denials is None:
            return self.output
        return msgspec.structs.replace(self.output, denials=chosen.denials)

    def flags(self) -> list[str]:
        """Every flag the spec's argument templates use, for the preflight check."""
        found: list[str] = []
        modes = [mode for mode in (self.analyze, self.implement) if mode is not None]
        for args in (self.args, *(mode.args for mode in modes), *(mode.browser_args for mode in modes)):
            for arg in args or ():
                for word in [arg] if isinstance(arg, str) else arg:
                    flag = word.split("=", 1)[0]
                    if re.fullmatch(r"--?[A-Za-z][\w-]*", flag) and flag not in found:
                        found.append(flag)
        return found

    @property
    def side_effects(self) -> bool:
        return self.approve or bool(SIDE_EFFECTS & set(self.capabilities))


def load_spec(path: Path, dirs: Sequence[Path] | None = None) -> AgentSpec:
    """Parse and check an adapter spec; every error names the file (and the key)."""
    return load_spec_chain(path, dirs)[0]


def load_spec_chain(path: Path, dirs: Sequence[Path] | None = None) -> tuple[AgentSpec, list[Path]]:
    """The spec at `path` merged over the specs it `extends` (looked up in `dirs`, by default
    beside it, then the user's and the shipped ones), and the files it was made of."""
    lookup = list(dirs) if dirs is not None else [path.parent, *spec_dirs(None)]
    table, chain = resolve(path, lookup)
    source = str(path) + (f" (extending {', '.join(str(p) for p in chain[1:])})" if len(chain) > 1 else "")
    try:
        spec = msgspec.convert(table, type=AgentSpec)
    except msgspec.ValidationError as exc:
        message = str(exc).replace("Object contains unknown field", "unknown key")
        raise BadInput(f"{source}: {message}") from None
    _check(spec, source)
    return _interpreter(spec, source), chain


def _interpreter(spec: AgentSpec, source: str) -> AgentSpec:
    """The spec with `executable = "{python}"` made the path of the interpreter gitswarm runs in."""
    if spec.executable != PYTHON_EXECUTABLE:
        return spec
    if not sys.executable:  # an embedded interpreter may not know its own path
        raise BadInput(f"{source}: executable {PYTHON_EXECUTABLE}: this Python does not know the path of its interpreter")
    return msgspec.structs.replace(spec, executable=sys.executable)


def _check(spec: AgentSpec, source: str) -> None:
    def fail(message: str) -> None:
        raise BadInput(f"{source}: {message}")

    if not spec.executable.strip():
        fail("executable is empty")
    for capability in spec.capabilities:
        if capability not in CAPABILITIES:
            fail(f"capabilities: unknown {capability!r} (known: {', '.join(CAPABILITIES)})")
    if spec.timeout is not None:
        try:
            parse_duration(spec.timeout, "timeout")
        except BadInput as exc:
            fail(str(exc))
    for where, args in (("args", spec.args), ("analyze.args", spec.analyze and spec.analyze.args),
                        ("implement.args", spec.implement and spec.implement.args), ("resume.args", spec.resume and spec.resume.args),
                        ("analyze.browser_args", spec.analyze and spec.analyze.browser_args),
                        ("implement.browser_args", spec.implement and spec.implement.browser_args)):
        for arg in args or ():
            for word in [arg] if isinstance(arg, str) else arg:
                for name in _placeholders(word, f"{where}: {word!r}", fail):
                    if name not in PLACEHOLDERS:
                        fail(f"{where}: unknown placeholder {{{name}}} (known: {', '.join(sorted(PLACEHOLDERS))})")
    if spec.args is not None and spec.analyze is not None and spec.implement is not None:
        fail("args: unused, since [analyze] and [implement] both have their own args")
    used = {name for args in (spec.args_for("analyze"), spec.args_for("implement")) for name in _all_placeholders(args)}
    for mode in ("analyze", "implement"):
        browser = spec.args_for(mode, browser=True)
        needed = _all_placeholders(spec.args_for(mode)) & {"prompt_file", "usage_file"}
        missing = sorted(needed - _all_placeholders(browser))
        if missing:
            fail(f"{mode}.browser_args: needs {', '.join('{' + name + '}' for name in missing)} as {mode}.args has")
    if spec.prompt == "file" and "prompt_file" not in used:
        fail('prompt = "file" needs {prompt_file} in the arguments')
    if spec.output.usage_file and "usage_file" not in used:
        fail("output.usage_file needs {usage_file} in the arguments")
    if spec.output.format == "text" and any(
        getattr(spec.output, key) is not None for key in ("error", "denials", "structured", "session", "cost_usd")
    ) and not spec.output.usage_file:
        fail('output: fields of JSON output need format = "json" or "jsonl" (or usage_file)')
    for key in ("cost_regex", "input_tokens_regex", "output_tokens_regex", "session_regex", "model_regex", "error_regex",
                "provider_error_regex"):
        pattern = getattr(spec.output, key)
        if pattern is not None:
            try:
                if re.compile(pattern).groups != 1:
                    fail(f"output.{key}: needs exactly one group")
            except re.error as exc:
                fail(f"output.{key}: {exc}")
    for name in OUTPUT_FIELDS:
        field = getattr(spec.output, name)
        if isinstance(field, Selector) and field.key and ("*" not in field.path or field.take == "sum"):
            fail(f"output.{name}: key = true needs a `*` in the path and take other than sum")
    for n, pattern in enumerate(spec.output.drop_lines):
        try:
            re.compile(pattern)
        except re.error as exc:
            fail(f"output.drop_lines[{n}]: {exc}")
    for code in spec.exit_codes:
        if not code.lstrip("-").isdigit():
            fail(f"exit_codes: {code!r} is not an exit code")
    for key, names in (("pass_env", spec.pass_env), ("sandbox.endpoint_env", spec.sandbox.endpoint_env)):
        for name in names:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                fail(f"{key}: {name!r} is not a variable name")
    for key in ("home_files", "home_copy", "home_json"):
        for entry in getattr(spec, key):
            if not _inside(entry):
                fail(f"{key}: {entry!r} must be a path inside the home directory")
    for entry in spec.resume.keep if spec.resume is not None else ():
        if not _inside(entry):
            fail(f"resume.keep: {entry!r} must be a path inside the home directory")
    if spec.state_home is not None:
        state = spec.state_home
        for key in ("copy", "fresh", "link", "json", "yaml"):
            for entry in getattr(state, key) or ():
                if not _inside(entry):
                    fail(f"state_home.{key}: {entry!r} must be a path inside the state directory")
    wrong = check_table(spec.sandbox, "sandbox")
    if wrong:
        fail(wrong)
    state_files = {**spec.state_home.json, **spec.state_home.yaml} if spec.state_home else {}
    for key, files in (("home_json", spec.home_json), ("state_home.json/yaml", state_files)):
        for entry, settings in files.items():
            try:
                json.dumps(settings)
            except (TypeError, ValueError) as exc:
                fail(f"{key}: {entry!r}: not JSON: {exc}")


def _inside(entry: str) -> bool:
    return bool(entry) and not entry.startswith("/") and ".." not in Path(entry).parts


def _placeholders(word: str, where: str, fail: object) -> list[str]:
    try:
        return [name for _, name, _, _ in string.Formatter().parse(word) if name is not None]
    except ValueError as exc:
        fail(f"{where}: {exc}")  # type: ignore[operator]
        return []


def _all_placeholders(args: list[Arg] | None) -> set[str]:
    names: set[str] = set()
    for arg in args or ():
        for word in [arg] if isinstance(arg, str) else arg:
            try:
                names.update(name for _, name, _, _ in string.Formatter().parse(word) if name)
            except ValueError:
                continue
    return names
