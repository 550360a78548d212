"""What judges a patch: the files that define or run its checks, which the patch may not change.

An agent that "fixes" a failing test by weakening, skipping or deleting it,
or by editing the configuration that runs it, makes the checks pass without
fixing anything. So the checks of a patch run with the base's version of
every protected file the patch modified or deleted, and a patch that
changes one is never accepted by its checks alone (docs/verification.md).

Protected are, by default: gitswarm's own configuration, CI and hook
configuration, test configuration, build files a check may call, the test
files themselves, every file a check's command names, and an executable the
patch adds under the name of a check's runner (a shim). `[verify] protect`
adds globs. A test file the patch *adds* is not restored: it runs, as added
evidence; every other protected file it adds (a new `conftest.py` that marks
every test passed, a `pytest.ini`) is left out of the checks and counts as a
change to what judges it.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

ChangeKind = Literal["added", "modified", "deleted"]

#: Configuration that defines or runs checks: gitswarm's, CI's, hooks', test runners', build tools'.
CONFIG_GLOBS: tuple[str, ...] = (
    ".gitswarm.toml",
    ".gitswarm/**",
    ".github/**",
    ".gitlab-ci.yml",
    ".gitlab/**",
    ".circleci/**",
    ".buildkite/**",
    ".travis.yml",
    "azure-pipelines.yml",
    "Jenkinsfile",
    "bitbucket-pipelines.yml",
    ".pre-commit-config.yaml",
    ".pre-commit-hooks.yaml",
    ".husky/**",
    ".githooks/**",
    "conftest.py",
    "**/conftest.py",
    "pytest.ini",
    "tox.ini",
    "noxfile.py",
    "setup.cfg",
    ".coveragerc",
    "Makefile",
    "makefile",
    "GNUmakefile",
    "justfile",
    "Justfile",
    "jest.config.*",
    "vitest.config.*",
    "vite.config.*",
    "karma.conf.*",
    ".mocharc*",
    "babel.config.*",
    "go.work",
)

#: Test files, by the names the usual runners collect.
TEST_GLOBS: tuple[str, ...] = (
    "test_*.py",
    "**/test_*.py",
    "*_test.py",
    "**/*_test.py",
    "tests/**",
    "test/**",
    "**/tests/**",
    "**/test/**",
    "testing/**",
    "spec/**",
    "**/__tests__/**",
    "*_test.go",
    "**/*_test.go",
    "*.test.*",
    "**/*.test.*",
    "*.spec.*",
    "**/*.spec.*",
)

#: Files whose test sections are protected rather than the whole file: a patch may change the
#: project's dependencies or version without needing a person, not how its tests run.
SECTIONED: dict[str, tuple[tuple[str, ...], ...]] = {
    "pyproject.toml": (("tool", "pytest"), ("tool", "coverage"), ("tool", "tox"), ("tool", "hatch", "envs"), ("tool", "nox")),
    "package.json": (("scripts",), ("jest",), ("vitest",), ("mocha",)),
    "Cargo.toml": (("dev-dependencies",), ("profile", "test"), ("test",), ("bench",)),
}

_COMMAND_SEPARATORS = frozenset({"&&", "||", ";", "|", "&"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _matches(path: str, globs: Iterable[str]) -> bool:
    for glob in globs:
        if glob.startswith("**/"):
            if fnmatch.fnmatchcase(path, glob[3:]) or fnmatch.fnmatchcase(path, glob):
                return True
        elif fnmatch.fnmatchcase(path, glob):
            return True
    return False


def is_test_file(path: str) -> bool:
    return _matches(path, TEST_GLOBS)


def runners(commands: Sequence[str]) -> frozenset[str]:
    """The programs the check commands start (their first real words; `python -m X` gives X too)."""
    found: set[str] = set()
    for segment in command_segments(commands):
        program = program_of(segment)
        if not program:
            continue
        found.add(program[0].rsplit("/", 1)[-1])
        if len(program) > 2 and program[1] == "-m":
            found.add(program[2].split(".")[0])
    return frozenset(found)


_INTERPRETER = re.compile(r"^(python[0-9.]*|pypy[0-9.]*|sh|bash|dash|zsh|node|deno|bun|ruby|perl|php|Rscript|tclsh|lua)$")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh"})
#: Programs that run the command after them (with their own options first), as `env python x.py` does.
_WRAPPERS = frozenset({"env", "exec", "command", "nohup", "time", "nice", "ionice", "stdbuf", "xvfb-run", "setsid", "chronic"})
_WRAPPER_ARG = frozenset({"timeout"})  # takes one argument (the duration) before the command
_RUN_TOOLS = frozenset({"uv", "poetry", "pdm", "pipenv", "hatch", "rye"})  # `uv run CMD`
#: Interpreter options that take a value: the word after them is not the script.
_OPTION_WITH_VALUE = frozenset({"-W", "-X", "--check-hash-based-pycs", "-r", "--require", "--import", "--loader"})


def named_paths(commands: Sequence[str], exists: Callable[[str], bool]) -> frozenset[str]:
    """The files a check's command runs (`./run-tests.sh`, `python -W error test_calc.py`, `env python
    x.py`, `python -m pkg.mod`, `make -f ci.mk`, `bash -ec "..."` looked into) that exist in the base
    tree: each is protected. A file a check only reads (`grep x README.md`) is what the patch may well
    have to change, and is not."""
    found: set[str] = set()
    for segment in command_segments(commands):
        found |= _run_by(segment, exists)
    return frozenset(found)


def command_segments(commands: Sequence[str]) -> Iterable[list[str]]:
    """Each simple command of the check commands, as its words (split at `&&`, `||`, `;`, `|`, `&`)."""
    for words in _words(commands):
        yield from _segments(words)


def _segments(words: list[str]) -> Iterable[list[str]]:
    segment: list[str] = []
    for word in words:
        if word in _COMMAND_SEPARATORS:
            yield segment
            segment = []
        else:
            segment.append(word)
    yield segment


def program_of(words: list[str]) -> list[str]:
    """The words of a command from its real program on: variable assignments, wrappers (`env`,
    `timeout 60`, `uv run`) and their options skipped."""
    i = 0
    while i < len(words):
        word, name = words[i], words[i].rsplit("/", 1)[-1]
        if _ASSIGNMENT.match(word) or (word.startswith("-") and i and _is_wrapper(words[i - 1])):
            i += 1
        elif name in _WRAPPERS:
            i += 1
        elif name in _WRAPPER_ARG:
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
            i += 1  # the duration
        elif name in _RUN_TOOLS and i + 1 < len(words) and words[i + 1] == "run":
            i += 2
        else:
            break
    return words[i:]


def _is_wrapper(word: str) -> bool:
    name = word.rsplit("/", 1)[-1]
    return name in _WRAPPERS or name in _WRAPPER_ARG


def _run_by(segment: list[str], exists: Callable[[str], bool]) -> set[str]:
    words = program_of(segment)
    if not words:
        return set()
    found: set[str] = set()
    program = words[0].rsplit("/", 1)[-1]
    _add(found, words[0], exists)
    if program in ("make", "gmake"):
        for n, word in enumerate(words[1:-1], 1):
            if word in ("-f", "--file", "--makefile"):
                _add(found, words[n + 1], exists)
        return found
    if not _INTERPRETER.match(program):
        return found
    rest = words[1:]
    n = 0
    while n < len(rest):
        word = rest[n]
        if program in _SHELLS and word.startswith("-") and not word.startswith("--") and "c" in word[1:]:
            if n + 1 < len(rest):
                found |= named_paths([rest[n + 1]], exists)
            return found
        if word in ("-m",) and n + 1 < len(rest):
            module = rest[n + 1].replace(".", "/")
            for candidate in (f"{module}.py", f"{module}/__main__.py", f"src/{module}.py", f"src/{module}/__main__.py"):
                _add(found, candidate, exists)
            return found
        if word in ("-c", "-e", "--eval"):
            return found
        if word in _OPTION_WITH_VALUE:
            n += 2
            continue
        if word.startswith("-"):
            n += 1
            continue
        _add(found, word, exists)
        return found
    return found


def _add(found: set[str], word: str, exists: Callable[[str], bool]) -> None:
    candidate = word.removeprefix("./")
    if candidate and not candidate.startswith(("-", "/")) and ".." not in candidate.split("/") and exists(candidate):
        found.add(candidate)


def _words(commands: Sequence[str]) -> Iterable[list[str]]:
    """Each command as the shell splits it, `;`, `&&`, `|` and the like as words of their own even unspaced."""
    for command in commands:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        try:
            yield list(lexer)
        except ValueError:
            yield command.split()


@dataclass(frozen=True)
class Protection:
    """The protected set of one verification: default globs, `[verify] protect`, the files the checks
    name, and the names of the checks' runners (an added executable under one of them is a shim)."""

    extra: tuple[str, ...] = ()
    named: frozenset[str] = frozenset()
    runner_names: frozenset[str] = frozenset()

    def protects(self, path: str) -> bool:
        return path in self.named or _matches(path, CONFIG_GLOBS) or is_test_file(path) or _matches(path, self.extra)

    def judges_changed(self, path: str, kind: ChangeKind, executable: bool) -> bool:
        """Whether this change of `path` changes what judges the patch (and is undone for the checks).

        A test file the patch adds runs as added evidence, so it is not a change to a judge; every
        other change to a protected file is. An added executable named after a check's runner is too.
        """
        if kind == "added" and executable and path.rsplit("/", 1)[-1] in self.runner_names:
            return True
        if not self.protects(path):
            return False
        return not (kind == "added" and is_test_file(path) and not _matches(path, CONFIG_GLOBS) and path not in self.named)


#: Modules a check's Python imports before the project's own: a patch that adds one at an import root
#: (the root or `src/`) replaces part of what runs the checks. The standard library's names and what is
#: installed where gitswarm runs are added to these (engine/delegation/judges.py).
SHADOW_NAMES = frozenset({
    "sitecustomize", "usercustomize", "pytest", "_pytest", "py", "pluggy", "unittest", "nose", "nose2",
    "hypothesis", "coverage", "doctest", "tox", "nox", "xdist", "pytest_cov",
})


def top_level_module(path: str) -> str | None:
    """The module a file makes importable at an import root (the checkout, or its `src/`): `pytest.py`
    and `src/pytest/__init__.py` both make `pytest`; None for anything deeper or not Python."""
    parts = path.split("/")
    if parts[0] == "src":
        parts = parts[1:]
    if len(parts) == 1 and parts[0].endswith(".py"):
        return parts[0][:-3]
    if len(parts) == 2 and parts[1] == "__init__.py":
        return parts[0]
    return None


def is_path_hook(path: str) -> bool:
    """A `.pth` file: every line naming a folder or starting with `import` runs when Python starts."""
    return path.endswith(".pth")


def sections_changed(name: str, base: dict | None, head: dict | None) -> bool:
    """Whether the test sections of a sectioned file (`pyproject.toml`, `package.json`, `Cargo.toml`)
    differ between two parsed versions; None is a version that is absent or does not parse."""
    if base is None or head is None:
        return base != head
    for section in SECTIONED.get(name.rsplit("/", 1)[-1], ()):
        if _dig(base, section) != _dig(head, section):
            return True
    return False


def _dig(data: object, keys: tuple[str, ...]) -> object:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data
