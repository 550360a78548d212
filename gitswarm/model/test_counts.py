"""How many tests a test runner ran, read from the text a check printed (stdout and stderr joined).

A check that passes because its test suite ran nothing, or ran fewer tests than on the base, is not
evidence: `compare` says so. Known runners: pytest, go (`go test`, plain output, not -json), cargo
(libtest's `test result:` lines, or cargo-nextest's `Summary` line), jest and vitest. ANSI colour
escapes are stripped before reading.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

import msgspec

RUNNERS = ("pytest", "go", "cargo", "jest", "vitest")
_FIELDS = ("passed", "failed", "skipped", "deselected", "errors")


class Counts(msgspec.Struct, frozen=True, kw_only=True):
    """One run's tally; `skipped` holds every "not run" kind (skipped, xfailed, ignored, todo, pending)."""

    runner: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    deselected: int = 0  # pytest's deselected, cargo's filtered out
    errors: int = 0  # collection errors, go packages that failed to build

    @property
    def ran(self) -> int:
        """Tests that actually executed: passed + failed + errors."""
        return self.passed + self.failed + self.errors


# ---------------------------------------------------------------- which runner a command invokes

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.S)
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")
_OPERATOR_CHARS = set("();<>|&")
_PREFIXES = {"env", "time", "exec", "command", "nohup"}  # run the next word as the command
_RUN_TOOLS = {"uv", "poetry", "pdm", "pipenv"}  # `<tool> run <command>`
_NODE_RUNNERS = {"npx", "pnpx", "bunx"}  # `<tool> <package binary>`
_NODE_TOOLS = {"npm", "pnpm", "yarn"}  # `<tool> exec <binary>`; `npm test` and the like run a script: unknown


def _without_flags(words: list[str]) -> list[str]:
    while words and words[0].startswith("-"):
        words = words[1:]
    return words


def _python_module(args: list[str]) -> str | None:
    """The module `python <args>` runs with -m, or None (a script, -c, or no -m)."""
    while args:
        word, args = args[0], args[1:]
        if word == "-m":
            return args[0] if args else None
        if word.startswith("-m"):
            return word[2:]
        if word in ("-X", "-W"):
            args = args[1:]
        elif word == "-c" or not word.startswith("-"):
            return None
    return None


def _runner_of_words(words: list[str]) -> str | None:
    while words:  # peel off env assignments and wrappers that run another command
        name = words[0].rsplit("/", 1)[-1]
        if _ASSIGNMENT.fullmatch(words[0]):
            words = words[1:]
        elif name in _PREFIXES or name in _NODE_RUNNERS:
            words = _without_flags(words[1:])
        elif (name in _RUN_TOOLS and words[1:2] == ["run"]) or (name in _NODE_TOOLS and words[1:2] == ["exec"]):
            words = _without_flags(words[2:])
            words = words[1:] if words[:1] == ["--"] else words
        else:
            break
    if not words:
        return None
    name, args = words[0].rsplit("/", 1)[-1], words[1:]
    if name in ("pytest", "py.test") or (_PYTHON.fullmatch(name) and _python_module(args) in ("pytest", "py.test")):
        return "pytest"
    if name in ("jest", "vitest"):
        return name
    if name == "go" and args[:1] == ["test"]:
        return "go"
    if name == "cargo":
        args = _without_flags([a for a in args if not a.startswith("+")])  # +toolchain, --locked
        if args[:1] in (["test"], ["t"]) or args[:2] == ["nextest", "run"]:
            return "cargo"
    return None


def runner_of(command: str) -> str | None:
    """The known runner a check command invokes, or None (`npm test` and other scripts, unparseable commands).

    Each part of a command line joined by `&&`, `;`, `|`... is looked at; the first known runner wins.
    """
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    part: list[str] = []
    for token in [*tokens, ";"]:
        if token and set(token) <= _OPERATOR_CHARS:
            if runner := _runner_of_words(part):
                return runner
            part = []
        else:
            part.append(token)
    return None


# ---------------------------------------------------------------- reading a runner's summary

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_ITEM = re.compile(r"(\d+) ([a-z]+(?: [a-z]+)*)")  # "3 passed", "1 timed out"
_KINDS: dict[str, str | None] = {  # the field an item's kind counts in (None: known, counts nothing)
    **dict.fromkeys(("passed", "xpassed"), "passed"),
    **dict.fromkeys(("failed", "timed out"), "failed"),
    **dict.fromkeys(("skipped", "xfailed", "todo", "pending"), "skipped"),
    **dict.fromkeys(("error", "errors"), "errors"),
    **dict.fromkeys(("warning", "warnings", "total"), None),
    "deselected": "deselected",
}
#: The summary line of runners that print one (the last in the output is read); group 1 holds the items.
_SUMMARY = {
    "pytest": re.compile(  # `== 1 failed, 2 passed in 0.31s ==`, `no tests ran in 0.01s`; not `5 tests collected`
        r"=*\s*(?!.*collected)((?:no tests ran|\d+ [a-z ]+)(?:, \d+ [a-z ]+)*)"
        r"\s+in\s+\d+(?:\.\d+)?\s*s(?:econds)?(?:\s+\([\d:]+\))?\s*=*"
    ),
    # `Tests:       1 failed, 2 todo, 3 passed, 6 total`
    "jest": re.compile(r"Tests:\s+(.*\d+ total)"),
    # `Tests  1 failed | 3 passed | 1 skipped (5)`
    "vitest": re.compile(r"Tests\s+(no tests|\d+ [a-z ]+(?:\| \d+ [a-z ]+)*?)(?:\s*\(\d+\))?"),
    # `Summary [   0.008s] 2 tests run: 1 passed (1 slow), 1 failed, 0 skipped`
    "nextest": re.compile(r"Summary \[[^\]]*\]\s+\d+ tests? run: (.*)"),
}


def _make(runner: str, tally: Mapping[str, int]) -> Counts:
    get = tally.get
    return Counts(runner=runner, passed=get("passed", 0), failed=get("failed", 0), skipped=get("skipped", 0),
                  deselected=get("deselected", 0), errors=get("errors", 0))  # fmt: skip


def _last_summary(runner: str, lines: list[str], summary: re.Pattern[str]) -> Counts | None:
    """The counts of the last line that is a summary with at least one item of a known kind."""
    for line in reversed(lines):
        if not (m := summary.fullmatch(line.strip())):
            continue
        tally = dict.fromkeys(_FIELDS, 0)
        known = m[1] in ("no tests ran", "no tests")
        for number, kind in _ITEM.findall(m[1]):
            if kind in _KINDS:
                known = True
                if field := _KINDS[kind]:
                    tally[field] += int(number)
        if known:
            return _make(runner, tally)
    return None


_GO_VERBOSE = re.compile(r"\s*--- (PASS|FAIL|SKIP): ")
_GO_PASS_OR_SKIP = re.compile(r"=== RUN|\s*--- (PASS|SKIP): ")  # only -v prints these; failures are printed without
_GO_PACKAGE = re.compile(
    r"(?P<ok>ok\s+\S+\s+(?:\d+(?:\.\d+)?s|\(cached\)))(?P<none>.*\[no tests to run\])?.*"
    r"|(?P<broken>FAIL\s+\S+\s+\[(?:build|setup) failed\]).*"
    r"|(?P<failed>FAIL\s+\S+\s+\d+(?:\.\d+)?s).*"
    r"|\?\s+\S+\s+\[no test files\].*"
)


def _go(lines: list[str]) -> Counts | None:
    # With -v, go test prints `--- PASS/FAIL/SKIP: TestX` for every test and subtest (subtests indented): each is
    # counted, subtests too, as gotestsum does. Without -v only failures get such lines and passing tests are
    # silent, so then the per-package lines are counted instead: a package that passed is 1 passed (0 when it says
    # `[no tests to run]`), one that failed 1 failed. Either way a package that failed to build is 1 error.
    verbose = any(_GO_PASS_OR_SKIP.match(line) for line in lines)
    tally = dict.fromkeys(_FIELDS, 0)
    found = False
    for line in lines:
        if verbose and (m := _GO_VERBOSE.match(line)):
            found = True
            tally[{"PASS": "passed", "FAIL": "failed", "SKIP": "skipped"}[m[1]]] += 1
        elif m := _GO_PACKAGE.fullmatch(line.rstrip()):
            found = True
            if m["broken"]:
                tally["errors"] += 1
            elif not verbose and m["failed"]:
                tally["failed"] += 1
            elif not verbose and m["ok"] and not m["none"]:
                tally["passed"] += 1
    return _make("go", tally) if found else None


_CARGO_RESULT = re.compile(
    r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored; \d+ measured; (\d+) filtered out"
)


def _cargo(lines: list[str]) -> Counts | None:
    # libtest prints one `test result:` per test binary (and one for doc tests): summed, ignored as skipped and
    # filtered out as deselected. cargo nextest prints one `Summary` line for the whole run instead.
    results = [[int(n) for n in m.groups()] for line in lines if (m := _CARGO_RESULT.search(line))]
    if not results:
        return _last_summary("cargo", lines, _SUMMARY["nextest"])
    fields = ("passed", "failed", "skipped", "deselected")
    return _make("cargo", {field: sum(r[i] for r in results) for i, field in enumerate(fields)})


def read_counts(runner: str, output: str) -> Counts | None:
    """The counts from the runner's summary in `output`; None when no summary is found (or the runner is unknown).

    Where a run prints several summaries (go one line per package, cargo one `test result:` per test binary)
    they are summed; pytest, jest and vitest print one, and the last is read.
    """
    lines = _ANSI.sub("", output).splitlines()
    if runner == "go":
        return _go(lines)
    if runner == "cargo":
        return _cargo(lines)
    return _last_summary(runner, lines, _SUMMARY[runner]) if runner in ("pytest", "jest", "vitest") else None


# ---------------------------------------------------------------- comparing a head's run to the base's


def _tests(n: int) -> str:
    return f"{n} test" if n == 1 else f"{n} tests"


def compare(base: Counts | None, head: Counts | None, runner: str | None) -> list[str]:
    """Why the head's run is not evidence, as short lines; empty when there is nothing to flag.

    With a known runner, a head that ran no tests is flagged, and so is one that printed no summary where the
    base printed one with tests in it (a run quiet on both, `pytest -qq`, says nothing either way). With both
    counts (of the same runner) a head that ran fewer tests, or skipped or deselected more, than the base is
    flagged; a run of no tests is flagged once, not again as fewer. A base of None (unknown) compares nothing more.
    """
    lines = []
    silent = head is None and base is not None and base.ran > 0
    none_ran = runner is not None and ((head is not None and head.ran == 0) or silent)
    if none_ran:
        lines.append(f"{runner}: no tests ran")
    if base is None or head is None or base.runner != head.runner:
        return lines
    name = runner or head.runner
    if head.ran < base.ran and not none_ran:
        lines.append(f"{name}: {_tests(head.ran)} ran, {base.ran} on the base")
    for what in ("skipped", "deselected"):
        if (now := getattr(head, what)) > (before := getattr(base, what)):
            lines.append(f"{name}: {now} {what}, {before} on the base")
    return lines
