"""Preflight: prove an adapter's executable runs and accepts every flag its spec uses.

The version is probed with the spec's `version_args`; each flag of the
argument templates must appear in the output of `help_args` (a spec lists
in `unlisted_flags` the ones its CLI accepts without documenting them).
A Python interpreter's `-m MODULE` must be importable by it: a system python3
answers `--version` and lists `-m` like the right one does. Results are
cached per spec and executable, so workers check once.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from gitswarm.adapters.agentspec import AgentSpec
from gitswarm.adapters.isolation import build_home, make_scratch, remove_scratch, run_environment
from gitswarm.adapters.process import run_process
from gitswarm.adapters.registry import Found, Registry
from gitswarm.model.errors import BadInput

PROBE_TIMEOUT = 30.0
PROBE_OUTPUT_CAP = 1 << 20


@dataclass(frozen=True)
class Preflight:
    name: str
    ok: bool
    version: str | None = None
    reason: str | None = None


def check(found: Found, parent_env: Mapping[str, str]) -> Preflight:
    spec = found.spec
    if spec is None:
        return Preflight(found.name, found.executable is not None, "builtin", None if found.executable else "no sh")
    if found.executable is None:
        return Preflight(found.name, False, None, f"executable {spec.executable!r} not found")
    scratch = make_scratch()
    try:
        env = run_environment(spec, parent_env, {}, scratch / "home")
        try:
            build_home(spec, scratch, parent_env, env)
        except BadInput as exc:  # a settings file of the user's it cannot merge into: every run would fail
            return Preflight(found.name, False, None, str(exc))

        def probe(args: list[str]) -> tuple[int | None, str]:
            result = run_process(
                [found.executable or spec.executable, *args], cwd=scratch, env=env, timeout=PROBE_TIMEOUT,
                output_cap=PROBE_OUTPUT_CAP,
            )
            said = (result.stdout + b"\n" + result.stderr).decode(errors="replace")
            return (None if result.error or result.stopped else result.exit_code), result.error or said

        if not os.access(found.executable, os.X_OK):
            return Preflight(found.name, False, None, f"{found.executable} is not executable")
        version_args = spec.version_args if spec.version_args is not None else ["--version"]
        code, said = probe(version_args)
        version = _last_line(said.strip().splitlines()[0]) if code == 0 and said.strip() else None
        if code != 0 and spec.version_args is not None:
            shown = " ".join([spec.executable, *version_args])
            return Preflight(found.name, False, None, f"`{shown}` failed: {_last_line(said) or f'exit {code}'}")
        help_text = ""
        for args in spec.help_args if spec.flags() else []:
            code, said = probe(args)
            if code != 0:
                return Preflight(found.name, False, version, f"`{' '.join([spec.executable, *args])}` exited {code}")
            help_text += said
        missing = [
            flag for flag in spec.flags()
            if flag not in spec.unlisted_flags and not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text)
        ]
        if missing:
            return Preflight(found.name, False, version, f"its --help does not list {', '.join(missing)}")
        if PYTHON.fullmatch(Path(found.executable).name):
            for module in _modules(spec):
                code, said = probe(["-c", FIND_MODULE, module])
                if code != 0:
                    return Preflight(found.name, False, version, _no_module(spec.executable, module))
        return Preflight(found.name, True, version)
    finally:
        remove_scratch(scratch)


#: A Python interpreter, by its file name: its `-m MODULE` arguments are checked importable.
PYTHON = re.compile(r"(?:python|pypy)(?:\d+(?:\.\d+)*)?")
FIND_MODULE = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 3)"


def _modules(spec: AgentSpec) -> list[str]:
    """The literal module names after `-m` in the argument templates."""
    found: list[str] = []
    for mode in ("analyze", "implement"):
        words = [w for arg in spec.args_for(mode) or () for w in ([arg] if isinstance(arg, str) else arg)]
        for flag, value in itertools.pairwise(words):
            if flag == "-m" and "{" not in value and value not in found:
                found.append(value)
    return found


def _no_module(executable: str, module: str) -> str:
    """Why a `python -m MODULE` spec cannot run: the interpreter is not the one the module is installed in
    (a system python3 after a venv install of gitswarm, say)."""
    hint = f"; gitswarm's own is {sys.executable}" if module.split(".")[0] == "gitswarm" else ""
    return f"`{executable}` cannot import {module} (its -m module): use the Python it is installed in{hint}"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


class PreflightCache:
    """Results by adapter, valid while its spec file and executable are unchanged."""

    def __init__(self, path: Path, registry: Registry, parent_env: Mapping[str, str]) -> None:
        self.path = path
        self.registry = registry
        self.parent_env = parent_env
        self._memo: dict[str, Preflight] = {}

    def get(self, name: str, fresh: bool = False) -> Preflight:
        if name in self._memo and not fresh:
            return self._memo[name]
        found = self.registry.found(name)
        key = _key(found)
        stored = {} if fresh else self._load()
        entry = stored.get(name)
        if entry is not None and entry.get("key") == key:
            result = Preflight(**entry["result"])
        else:
            result = check(found, self.parent_env)
            self._save(name, key, result)
        self._memo[name] = result
        return result

    def _load(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _save(self, name: str, key: str, result: Preflight) -> None:
        data = self._load()
        data[name] = {"key": key, "result": asdict(result)}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, sort_keys=True))
            tmp.replace(self.path)
        except OSError:
            pass  # a cache: the next worker checks again


def _key(found: Found) -> str:
    """Changes when the executable or any spec file it was made of (extends included) changes."""
    files = found.files or ((found.source,) if found.source else ())
    parts = [found.name, found.source, found.executable or ""]
    for path in (*files, found.executable):
        if path and os.path.isfile(path):
            stat = os.stat(path)
            parts.append(f"{stat.st_size}:{stat.st_mtime_ns}")
    for path in files:
        if os.path.isfile(path):
            parts.append(hashlib.sha256(Path(path).read_bytes()).hexdigest())
    return hashlib.sha256("\0".join(parts).encode(errors="surrogateescape")).hexdigest()  # a path's own bytes
