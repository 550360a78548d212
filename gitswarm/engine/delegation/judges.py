"""Which of a patch's changes touch what judges it, and putting the base's judges back for the checks.

model/protected.py says what is protected; this module reads the patch's
changes from git, follows what a check runs into the base's `Makefile`
(its target's recipe, its includes) and `package.json` (its scripts),
parses the sectioned files (`pyproject.toml`: only its test sections are
protected), spots a module the patch adds to shadow what the checks import
(`pytest.py`, `usercustomize.py`, a `.pth`), and prepares the checkout the
checks run in: the base's version of every changed judge written back (a
judge the patch added removed), and the test files the patch added set
aside for a run of their own, so that they cannot change how the base's
tests run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import stat
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gitswarm.model.protected import (
    SECTIONED,
    SHADOW_NAMES,
    ChangeKind,
    Protection,
    command_segments,
    is_path_hook,
    is_test_file,
    named_paths,
    program_of,
    runners,
    sections_changed,
    top_level_module,
)
from gitswarm.store.diffs import RawChange, raw_changes
from gitswarm.store.gitrepo import GitRepo

_SYMLINK = 0o120000
_MAKE_TARGET = re.compile(r"^(?P<targets>[^\s:=#][^:=#]*?)\s*::?(?!=)")
_MAKE_INCLUDE = re.compile(r"^-?s?include\s+(?P<files>.+)$")


@dataclass(frozen=True)
class JudgeChanges:
    """What a patch changes of what judges it, and how the checks' checkout is prepared.

    `files`: the protected files it changes (sorted, as text for records). `restore`: for each changed
    judge (by its name on disk), the base's blob and mode, or None where the base has no such file.
    `added_tests`: test files the patch adds (names on disk): they run, apart from the base's tests."""

    files: tuple[str, ...]
    restore: dict[str, tuple[str, int] | None]
    added_tests: tuple[str, ...] = ()


NONE = JudgeChanges((), {})


def protection(repo: GitRepo, base: str, checks: tuple[str, ...], extra: tuple[str, ...]) -> Protection:
    """The protected set for checks run on commits of `base`: with the files they run, found in the
    checks themselves and in the base's Makefile recipes and package.json scripts they start."""
    tree = repo.commit_info(base).tree

    def exists(path: str) -> bool:
        return repo.tree_entry(tree, path) is not None

    def read(path: str) -> str | None:
        blob = repo.tree_entry(tree, path)
        return None if blob is None else repo.read_blob(blob).decode("utf-8", errors="replace")

    commands = checks + expanded(checks, read)
    named = named_paths(commands, exists)
    return Protection(extra=extra, named=named | makefile_includes(named | {"Makefile"}, read, exists), runner_names=runners(commands))


def expanded(checks: tuple[str, ...], read: Callable[[str], str | None]) -> tuple[str, ...]:
    """The commands a check starts through `make` (its target's recipe) or `npm`/`yarn`/`pnpm` (a script)."""
    found: list[str] = []
    for segment in command_segments(checks):
        words = program_of(segment)
        if not words:
            continue
        program = words[0].rsplit("/", 1)[-1]
        if program in ("make", "gmake"):
            found += _make_recipes(words[1:], read)
        elif program in ("npm", "yarn", "pnpm", "bun"):
            found += _package_script(words[1:], read)
    return tuple(found)


def _make_recipes(args: list[str], read: Callable[[str], str | None]) -> list[str]:
    makefile, targets, n = "Makefile", [], 0
    while n < len(args):
        if args[n] in ("-f", "--file", "--makefile") and n + 1 < len(args):
            makefile, n = args[n + 1], n + 2
            continue
        if not args[n].startswith("-") and "=" not in args[n]:
            targets.append(args[n])
        n += 1
    text = _with_includes(read(makefile) or read("makefile") or read("GNUmakefile"), read)
    if text is None:
        return []
    recipes: dict[str, list[str]] = {}
    order: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("\t"):
            current.append(line.strip().lstrip("@-+"))
            continue
        match = _MAKE_TARGET.match(line)
        if match:
            current = []
            for target in match["targets"].split():
                recipes.setdefault(target, current)
                if not target.startswith("."):
                    order.append(target)
    wanted = targets or order[:1]
    return [command for target in wanted for command in recipes.get(target, [])]


def _with_includes(text: str | None, read: Callable[[str], str | None], depth: int = 3) -> str | None:
    """A makefile's text with the files it includes (`include ci.mk`) put after it, a few levels deep."""
    if text is None or depth == 0:
        return text
    parts = [text] + [_with_includes(read(name), read, depth - 1) or "" for name in _included(text)]
    return "\n".join(parts)


def _included(text: str) -> list[str]:
    """The files a makefile's `include` (`-include`, `sinclude`) lines name."""
    return [name for line in text.splitlines() if (match := _MAKE_INCLUDE.match(line.strip())) for name in match["files"].split()]


def _package_script(args: list[str], read: Callable[[str], str | None]) -> list[str]:
    words = [a for a in args if not a.startswith("-")]
    name = words[1] if words[:1] in (["run"], ["run-script"]) and len(words) > 1 else (words[0] if words else "")
    text = read("package.json")
    try:
        scripts = json.loads(text).get("scripts", {}) if text else {}
    except (json.JSONDecodeError, AttributeError):
        return []
    if not isinstance(scripts, dict):
        return []
    return [str(scripts[key]) for key in (f"pre{name}", name, f"post{name}") if isinstance(scripts.get(key), str)]


def makefile_includes(makefiles: frozenset[str] | set[str], read: Callable[[str], str | None], exists: Callable[[str], bool]) -> set[str]:
    """The files the base's makefiles include (`include ci.mk`), which are part of every recipe."""
    found: set[str] = set()
    for makefile in makefiles:
        if makefile.lower().endswith(("makefile", ".mk")):
            found |= {name for name in _included(read(makefile) or "") if exists(name)}
    return found


def judge_changes(repo: GitRepo, repo_dir: Path, base: str, head: str, guard: Protection) -> JudgeChanges:
    """The changes base..head that change what judges the patch, and the test files it adds."""
    files, restore, added_tests = [], {}, []
    for change in raw_changes(repo_dir, base, head):
        if _changes_judge(repo, change, guard):
            files.append(change.path)
            restore[change.name] = None if change.kind == "added" else (change.old_blob, change.old_mode)
        elif change.kind == "added" and is_test_file(change.name):
            added_tests.append(change.name)
    return JudgeChanges(tuple(sorted(files)), restore, tuple(sorted(added_tests)))


def _changes_judge(repo: GitRepo, change: RawChange, guard: Protection) -> bool:
    kind: ChangeKind = "added" if change.kind == "added" else "deleted" if change.kind == "deleted" else "modified"
    name = change.name
    executable = bool(change.new_mode & stat.S_IXUSR) and change.new_mode != _SYMLINK
    if guard.judges_changed(name, kind, executable) or is_path_hook(name):
        return True
    if kind == "added" and _shadows(top_level_module(name)):
        return True
    base_name = name.rsplit("/", 1)[-1]
    if base_name not in SECTIONED:
        return False
    if kind == "deleted":
        return True
    before = None if kind == "added" else _parse(base_name, repo.read_blob(change.old_blob))
    after = _parse(base_name, repo.read_blob(change.new_blob))
    if kind == "added":  # a new pyproject.toml with a [tool.pytest] section configures the test run
        return after is None or sections_changed(base_name, {}, after)
    return sections_changed(base_name, before, after)


def _shadows(module: str | None) -> bool:
    """Whether a module of that name is one the checks' Python would import from elsewhere: a runner's, the
    standard library's, or one installed where gitswarm runs (the best this process can know of the check's)."""
    if module is None:
        return False
    if module in SHADOW_NAMES or module in sys.stdlib_module_names:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _parse(name: str, data: bytes) -> dict | None:
    try:
        parsed = tomllib.loads(data.decode()) if name.endswith(".toml") else json.loads(data)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, json.JSONDecodeError):
        return None
    return parsed if isinstance(parsed, dict) else None


def restore(repo: GitRepo, checkout: Path, plan: dict[str, tuple[str, int] | None]) -> None:
    """Make each planned path in `checkout` what the plan says: a blob with its mode, or absent.

    Nothing outside the checkout is ever touched: a parent the patch made a symlink (to the user's own
    tree, say) or a file is removed first, as is a folder where a file goes.
    """
    root = os.path.realpath(checkout)
    for name, what in plan.items():
        target = _inside(root, name)
        _clear(target)
        if what is None:
            continue
        blob, mode = what
        os.makedirs(os.path.dirname(target), exist_ok=True)
        data = repo.read_blob(blob)
        if mode == _SYMLINK:
            os.symlink(data, target)
            continue
        with open(target, "xb") as handle:
            handle.write(data)
        os.chmod(target, 0o755 if mode & stat.S_IXUSR else 0o644)


def set_aside(checkout: Path, names: tuple[str, ...], aside: Path) -> None:
    """Move the added test files out of the checkout (into `aside`), to be put back with put_back."""
    root = os.path.realpath(checkout)
    for name in names:
        source = _inside(root, name)
        if os.path.lexists(source):
            destination = aside / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, destination)


def put_back(checkout: Path, names: tuple[str, ...], aside: Path) -> None:
    root = os.path.realpath(checkout)
    for name in names:
        source = aside / name
        if os.path.lexists(source):
            target = _inside(root, name)
            _clear(target)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.replace(source, target)


def _inside(root: str, name: str) -> str:
    """`name` under `root`, with every parent made a real folder inside it (a symlink or a file the
    patch put where a parent goes is removed: the checkout is gitswarm's, never the user's tree)."""
    parts = [p for p in name.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        raise ValueError(f"not a path inside the checkout: {name!r}")
    current = root
    for part in parts[:-1]:
        current = os.path.join(current, part)
        if os.path.islink(current) or (os.path.lexists(current) and not os.path.isdir(current)):
            os.unlink(current)
    return os.path.join(root, *parts)


def _clear(target: str) -> None:
    """Remove whatever is at `target` itself (never following a symlink)."""
    if os.path.islink(target) or os.path.isfile(target):
        os.unlink(target)
    elif os.path.isdir(target):
        shutil.rmtree(target)
    elif os.path.lexists(target):
        os.unlink(target)

