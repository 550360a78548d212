"""`gitswarm mcp install|uninstall`: the server's entry in a client's configuration file.

Install adds one entry and changes nothing else the format can keep (JSON is
written back with two-space indents, as the clients write it; TOML and YAML
get whole lines appended or inserted, between marker comments). It is
idempotent, and refuses when an entry of that name exists with another
command, or the file is not one it can edit safely (JSON with comments, a
YAML `mcp_servers` written inline). Uninstall restores the file exactly: the
bytes from before the install are kept in gitswarm's state directory, and
put back when the file is still as install left it; a file changed since
loses only the entry (and its markers). Every write goes through a
temporary file, renamed over the original once it is complete.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

from gitswarm.adapters.jsonfiles import strip_comments
from gitswarm.model.errors import BadInput
from gitswarm.model.spec import toml_string
from gitswarm.pilot.clients import SERVER_NAME, Registration
from gitswarm.store.readonly import read_only
from gitswarm.store.worktrees import state_home

BEGIN = "# >>> gitswarm mcp (gitswarm mcp uninstall removes these lines)"
END = "# <<< gitswarm mcp"
_YAML_HEADER = re.compile(r"^mcp_servers:[ \t]*(#.*)?$")
_YAML_INLINE = re.compile(r"^mcp_servers:[ \t]*[^#\s]")


def state_dir() -> Path:
    """Where the bytes of a file from before an install are kept until its uninstall."""
    return state_home() / "gitswarm" / "mcp-installs"


def install(reg: Registration, states: Path, dry_run: bool = False) -> dict:
    old = _read(reg.path)
    new = _added(reg, old)
    view = {"client": reg.client, "scope": reg.scope, "path": os.fspath(reg.path)}
    if new is None:
        return {**view, "action": "already installed", "changed": False}
    if dry_run:
        return {**view, "action": "would write", "changed": False, "content": new}
    created = _missing_dirs(reg.path.parent)
    sidecar = _sidecar(states, reg.path)
    first = not sidecar.exists()
    if first:  # a second install keeps the bytes from before the first
        _write_json(sidecar, {
            "path": os.fspath(reg.path), "created_dirs": [os.fspath(d) for d in created],
            "original": None if old is None else base64.b64encode(old.encode()).decode(),
        })
    try:
        with _writing(reg):
            _replace(reg.path, new, old)
    except BaseException:
        if first:  # kept, it would be taken for the bytes from before a later install
            sidecar.unlink(missing_ok=True)
        raise
    record = json.loads(sidecar.read_text())
    record["written"] = _digest(new)
    _write_json(sidecar, record)
    return {**view, "action": "installed", "changed": True}


def uninstall(reg: Registration, states: Path, dry_run: bool = False) -> dict:
    view = {"client": reg.client, "scope": reg.scope, "path": os.fspath(reg.path)}
    current = _read(reg.path)
    sidecar = _sidecar(states, reg.path)
    record = _load_record(sidecar)
    if current is None or not _has_entry(reg, current):
        if not dry_run:
            sidecar.unlink(missing_ok=True)
        return {**view, "action": "not installed", "changed": False}
    if record is not None and record.get("written") == _digest(current):
        original = record.get("original")
        restored = None if original is None else base64.b64decode(original).decode()
        action = "restored"
    else:
        restored = _removed(reg, current)
        action = "removed"
    if dry_run:
        return {**view, "action": f"would be {action}", "changed": False, "content": restored}
    if restored is None:
        with _writing(reg):
            reg.path.unlink()
        for folder in reversed([Path(d) for d in (record or {}).get("created_dirs", [])]):
            try:
                folder.rmdir()
            except OSError:
                break  # not empty (or gone): kept
    else:
        with _writing(reg):
            _replace(reg.path, restored, current)
    sidecar.unlink(missing_ok=True)
    return {**view, "action": action, "changed": True}


# -- the formats ----------------------------------------------------------------------------------


def _added(reg: Registration, text: str | None) -> str | None:
    """The file with the entry added; None when the same entry is there already."""
    if reg.format == "json":
        return _json_added(reg, text or "")
    if reg.format == "toml":
        return _toml_added(reg, text or "")
    return _yaml_added(reg, text or "")


def _removed(reg: Registration, text: str) -> str:
    if reg.format == "json":
        data = _json_load(reg, text)
        servers = data["mcpServers"]
        del servers[SERVER_NAME]
        if not servers:
            del data["mcpServers"]
        return _json_dump(data)
    return _without_markers(reg, text)


def _has_entry(reg: Registration, text: str) -> bool:
    if reg.format == "json":
        servers = _json_load(reg, text).get("mcpServers")
        return isinstance(servers, dict) and SERVER_NAME in servers
    return BEGIN in text


def _json_load(reg: Registration, text: str) -> dict:
    if not text.strip():
        return {}
    if strip_comments(text) != text:
        raise BadInput(f"{reg.path}: holds comments, which rewriting it would lose; add the entry by hand (gitswarm mcp install --print shows it)")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BadInput(f"{reg.path}: not JSON ({exc}); nothing written") from None
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
        raise BadInput(f"{reg.path}: not a JSON object with an mcpServers object; nothing written")
    return data


def _json_dump(data: dict) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _json_added(reg: Registration, text: str) -> str | None:
    data = _json_load(reg, text)
    servers = data.setdefault("mcpServers", {})
    if SERVER_NAME in servers:
        return None if servers[SERVER_NAME] == reg.entry else _refuse_other(reg)
    servers[SERVER_NAME] = reg.entry
    return _json_dump(data)


def _refuse_other(reg: Registration) -> str:
    raise BadInput(f"{reg.path}: an MCP server named {SERVER_NAME!r} is registered with another command; remove it first (nothing written)")


def _toml_added(reg: Registration, text: str) -> str | None:
    try:
        existing = tomllib.loads(text).get("mcp_servers", {})
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{reg.path}: not TOML ({exc}); nothing written") from None
    if isinstance(existing, dict) and SERVER_NAME in existing:
        found = {k: existing[SERVER_NAME].get(k) for k in reg.entry} if isinstance(existing[SERVER_NAME], dict) else None
        return None if found == reg.entry else _refuse_other(reg)
    block = [
        BEGIN,
        f"[mcp_servers.{SERVER_NAME}]",
        f"command = {toml_string(reg.entry['command'])}",
        "args = [" + ", ".join(toml_string(a) for a in reg.entry["args"]) + "]",
        END,
    ]
    new = _with_final_newline(text) + ("\n" if text.strip() else "") + "\n".join(block) + "\n"
    try:
        tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        raise BadInput(f"{reg.path}: its mcp_servers cannot take another table (written inline?); add the entry by hand") from None
    return new


def _yaml_added(reg: Registration, text: str) -> str | None:
    if BEGIN in text:
        return None if _yaml_block(reg.entry, _block_indent(text)) in text else _refuse_other(reg)
    lines = text.splitlines(keepends=True)
    header = next((n for n, line in enumerate(lines) if _YAML_HEADER.match(line.rstrip("\r\n"))), None)
    if header is None:
        if any(_YAML_INLINE.match(line) for line in lines):
            raise BadInput(f"{reg.path}: its mcp_servers is written inline; add the entry by hand (nothing written)")
        block = "\n".join([BEGIN, "mcp_servers:", _yaml_block(reg.entry, "  ").rstrip("\n"), END]) + "\n"
        return _with_final_newline(text) + block
    indent = _child_indent(lines, header)
    if any(re.match(rf"^{indent}{SERVER_NAME}:", line) for line in lines[header + 1:]):
        _refuse_other(reg)
    entry = f"{indent}{BEGIN}\n{_yaml_block(reg.entry, indent)}{indent}{END}\n"
    return "".join(lines[: header + 1]) + ("" if lines[header].endswith("\n") else "\n") + entry + "".join(lines[header + 1:])


def _yaml_block(entry: dict, indent: str) -> str:
    """The entry in YAML flow scalars (JSON strings are YAML double-quoted strings)."""
    return (
        f"{indent}{SERVER_NAME}:\n"
        f"{indent}{indent}command: {json.dumps(entry['command'])}\n"
        f"{indent}{indent}args: {json.dumps(entry['args'])}\n"
    )


def _child_indent(lines: list[str], header: int) -> str:
    for line in lines[header + 1:]:
        if line.strip() and not line.lstrip().startswith("#"):
            spaces = line[: len(line) - len(line.lstrip(" "))]
            return spaces or "  "
    return "  "


def _block_indent(text: str) -> str:
    line = next(line for line in text.splitlines() if line.strip() == BEGIN)
    return line[: len(line) - len(line.lstrip(" "))] or "  "


def _without_markers(reg: Registration, text: str) -> str:
    lines = text.splitlines(keepends=True)
    try:
        start = next(n for n, line in enumerate(lines) if line.strip() == BEGIN)
        end = next(n for n in range(start, len(lines)) if lines[n].strip() == END)
    except StopIteration:
        raise BadInput(f"{reg.path}: gitswarm's marker lines were edited; remove the entry by hand") from None
    if start > 0 and not lines[start - 1].strip() and reg.format == "toml":
        start -= 1  # the blank line install put before its table
    return "".join(lines[:start] + lines[end + 1:])


def _with_final_newline(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


# -- files -----------------------------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read it: {exc}") from None


def _replace(path: Path, text: str, expected: str | None) -> None:
    """Write `text` over `path` if it still holds `expected` (a client may be writing it too)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if _read(path) != expected:
        raise BadInput(f"{path}: changed while gitswarm was editing it; nothing written (run it again)")
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o600
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _writing(reg: Registration) -> Iterator[None]:
    """A write of the client's file, which fails whole (a temporary file renamed over it): a folder that
    cannot be written is one line, a read-only repository's said as such (store/readonly.py)."""
    try:
        yield
    except OSError as exc:
        refused = read_only(reg.path.parent, exc) if reg.scope == "project" else None
        if refused is not None:
            raise refused from None
        raise BadInput(f"{reg.path}: cannot write it ({exc.strerror or exc}); nothing written") from None


def _missing_dirs(folder: Path) -> list[Path]:
    """The folders above a file that do not exist yet, outermost first."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    return list(reversed(missing))


def _sidecar(states: Path, path: Path) -> Path:
    return states / (hashlib.sha256(os.fsencode(os.path.abspath(path))).hexdigest()[:24] + ".json")


def _load_record(sidecar: Path) -> dict | None:
    try:
        data = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
