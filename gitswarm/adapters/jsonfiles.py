"""Settings a spec writes into a run's JSON and YAML files (gemini's settings.json, hermes' update
stamp and config.yaml).

The patch is merged into the file's object: tables key by key, every other
value replaced; the string "{now}" becomes the current time in seconds since
the epoch. The file is the run's own: a copy of the user's when the spec
copied it in, else created. A linked file is read, then replaced by a file of
its own, never written through, and a file under a linked directory is
refused: either would change the user's real one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gitswarm.model.errors import BadInput

NOW = "{now}"


def patch_json_file(root: Path, entry: str, patch: Mapping[str, Any], now: float) -> Path:
    """Merge `patch` into the JSON object at `root/entry`; returns the file's path."""
    return _patch(root, entry, patch, now, _Json())


def patch_yaml_file(root: Path, entry: str, patch: Mapping[str, Any], now: float) -> Path:
    """Merge `patch` into the YAML mapping at `root/entry` (comments in the run's copy are not kept)."""
    return _patch(root, entry, patch, now, _Yaml())


class _Json:
    name = "JSON"

    def load(self, text: str) -> Any:
        return json.loads(strip_comments(text))

    def dump(self, value: dict[str, Any]) -> str:
        return json.dumps(value, indent=2) + "\n"


class _Yaml:
    name = "YAML"

    def load(self, text: str) -> Any:
        import yaml  # deferred: only an adapter with YAML state files (hermes) needs it, at its runs

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(" ".join(str(exc).split())) from None

    def dump(self, value: dict[str, Any]) -> str:
        import yaml  # deferred, as in load

        return str(yaml.safe_dump(value, sort_keys=False, allow_unicode=True))


def _patch(root: Path, entry: str, patch: Mapping[str, Any], now: float, kind: _Json | _Yaml) -> Path:
    path = root / entry
    for parent in Path(entry).parents:
        if parent != Path(".") and (root / parent).is_symlink():
            raise BadInput(f"{entry}: {parent} is linked to the real one: its settings cannot be changed for a run")
    current: Any = {}
    if path.is_symlink() or path.exists():
        current = _read(path, entry, kind)
        path.unlink(missing_ok=True)
    merged = _merge(current, patch, now)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(kind.dump(merged))
    return path


def _read(path: Path, entry: str, kind: _Json | _Yaml) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}  # a dangling link
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"~/{entry}: cannot read it: {exc}") from None
    if not text.strip():
        return {}
    try:
        value = kind.load(text)
    except ValueError as exc:
        raise BadInput(f"{path.name} ({entry}) is not {kind.name}: {exc}") from None
    if value is None:
        return {}  # YAML of comments only
    if not isinstance(value, dict):
        raise BadInput(f"{path.name} ({entry}) is not a {kind.name} object")
    return value


def _merge(current: Any, patch: Mapping[str, Any], now: float) -> dict[str, Any]:
    out = dict(current) if isinstance(current, dict) else {}
    for key, value in patch.items():
        if isinstance(value, Mapping):
            out[key] = _merge(out.get(key), value, now)
        else:
            out[key] = now if value == NOW else value
    return out


def strip_comments(text: str) -> str:
    """JSON with `//` and `/* */` comments (gemini's settings.json allows them) as plain JSON."""
    out: list[str] = []
    n, in_string = 0, False
    while n < len(text):
        ch = text[n]
        if in_string:
            out.append(ch)
            if ch == "\\" and n + 1 < len(text):
                out.append(text[n + 1])
                n += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            out.append(ch)
        elif text.startswith("//", n):
            end = text.find("\n", n)
            n = len(text) if end < 0 else end
            continue
        elif text.startswith("/*", n):
            end = text.find("*/", n + 2)
            n = len(text) if end < 0 else end + 2
            out.append(" ")
            continue
        else:
            out.append(ch)
        n += 1
    return "".join(out)
