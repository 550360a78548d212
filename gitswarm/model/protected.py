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
    """The programs the check commands start (their first words, `python -m X` gives X too)."""
    found: set[str] = set()
    for words in _words(commands):
        start = True
        for i, word in enumerate(words):
            if word in _COMMAND_SEPARATORS:
                start = True
                continue
            if start and _ASSIGNMENT.match(word):
                continue
            if start:
                found.add(word.rsplit("/", 1)[-1])
                if i + 2 < len(words) and words[i + 1] == "-m":
                    found.add(words[i + 2])
            start = False
    return frozenset(found)


_INTERPRETER = re.compile(r"^(python[0-9.]*|pypy[0-9.]*|sh|bash|dash|zsh|node|deno|bun|ruby|perl|php|Rscript|tclsh|lua)$")


def named_paths(commands: Sequence[str], exists: Callable[[str], bool]) -> frozenset[str]:
    """The files a check's command runs (`./run-tests.sh`, `python -u test_calc.py`, `make -f ci.mk`,
    `sh -c "..."` looked into) that exist in the base tree: each is protected. A file a check only
    reads (`grep x README.md`) is what the patch may well have to change, and is not."""
    found: set[str] = set()
    for words in _words(commands):
        found |= _run_by(words, exists)
    return frozenset(found)


def _run_by(words: list[str], exists: Callable[[str], bool]) -> set[str]:
    found: set[str] = set()
    start, after_interpreter, file_next, inline_next, shell = True, False, False, False, False
    for word in words:
        if word in _COMMAND_SEPARATORS:
            start, after_interpreter, file_next, inline_next = True, False, False, False
            continue
        if start and _ASSIGNMENT.match(word):
            continue
        if inline_next:  # sh -c "...": the string is a command of its own
            found |= named_paths([word], exists)
            inline_next = after_interpreter = False
            continue
        runs = start or file_next or (after_interpreter and not word.startswith("-"))
        if after_interpreter and word.startswith("-"):
            inline_next = word == "-c" and shell
            after_interpreter = word not in ("-m", "-c", "-e")
            continue
        program = word.rsplit("/", 1)[-1]
        after_interpreter = start and bool(_INTERPRETER.match(program))
        shell = start and program in ("sh", "bash", "dash", "zsh")
        file_next = word in ("-f", "--file", "--makefile")
        start = False
        candidate = word.removeprefix("./")
        if runs and candidate and not candidate.startswith(("-", "/")) and ".." not in candidate.split("/") and exists(candidate):
            found.add(candidate)
    return found


def _words(commands: Sequence[str]) -> Iterable[list[str]]:
    for command in commands:
        try:
            yield shlex.split(command)
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
