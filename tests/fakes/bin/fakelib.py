"""Shared by the fake agent CLIs in tests/fakes/bin: the scripted behaviour, no model.

A fake does what the task section of its prompt says, one directive per line:

    edit PATH: replace OLD with NEW     change a file in the working directory
    write PATH: TEXT / append PATH: TEXT
    answer: TEXT                        the final answer text (default: "done")
    findings                            answer with a valid findings JSON object
    fail: REASON                        the run fails, in the CLI's own error shape
    fail-provider: KIND [for MODEL]     the run fails for a provider reason, KIND quota (a usage or rate
                                        limit), funds (a key with no credit) or model (not found), as the
                                        CLI prints it (each fake cites where its shape comes from); with
                                        `for MODEL`, only a run on that model fails (the others succeed)
    deny-edit                           (claude) the edit is refused: permission_denials, exit 0
    hang                                never finish
    dump-env: PATH                      write {"env": ..., "home": [...], "argv": [...]} to PATH (absolute)
    tokens: IN OUT                      report these token counts
    cost: USD                           report this cost (where the CLI reports cost)
    also-model: NAME                    (claude, gemini) a second model also ran, for a tenth of the
                                        tokens, listed first in the per-model usage (a subagent, a router)

Only the task's own section of a gitswarm prompt packet is read (the job's
goal is shared by every task); a prompt without one is read whole.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

FINDINGS = {
    "findings": [
        {"title": "calc.add subtracts", "body": "add returns a - b", "confidence": 0.9, "severity": "high"},
        {"title": "no tests for div", "body": "div by zero is unchecked", "confidence": 0.6, "severity": "medium"},
    ],
    "decisions": [{"title": "fix add first", "rationale": "it breaks every caller"}],
}


@dataclass
class Script:
    edits: list[str] = field(default_factory=list)
    answer: str = "done"
    findings: bool = False
    fail: str | None = None
    deny_edit: bool = False
    hang: bool = False
    dump_env: str | None = None
    input_tokens: int = 1200
    output_tokens: int = 80
    cost: float = 0.0123
    also_model: str | None = None
    provider: str | None = None  # fail-provider: quota, funds or model
    provider_model: str | None = None  # ... only for runs on this model


def task_section(prompt: str) -> str:
    lines = prompt.splitlines()
    start = next((n for n, line in enumerate(lines) if line.startswith("# Your task")), None)
    if start is None:
        return prompt
    end = next((n for n in range(start + 1, len(lines)) if lines[n].startswith("# ")), len(lines))
    return "\n".join(lines[start + 1 : end])


def parse(prompt: str) -> Script:
    script = Script()
    for line in task_section(prompt).splitlines():
        line = line.strip()
        if line.startswith(("edit ", "write ", "append ")):
            script.edits.append(line)
        elif line.startswith("answer: "):
            script.answer = line[len("answer: "):]
        elif line == "findings":
            script.findings = True
        elif m := re.fullmatch(r"fail-provider: (quota|funds|model)(?: for (\S+))?", line):
            script.provider, script.provider_model = m[1], m[2]
        elif line.startswith("fail: "):
            script.fail = line[len("fail: "):]
        elif line == "deny-edit":
            script.deny_edit = True
        elif line == "hang":
            script.hang = True
        elif line.startswith("dump-env: "):
            script.dump_env = line[len("dump-env: "):]
        elif m := re.fullmatch(r"tokens: (\d+) (\d+)", line):
            script.input_tokens, script.output_tokens = int(m[1]), int(m[2])
        elif m := re.fullmatch(r"cost: ([0-9.]+)", line):
            script.cost = float(m[1])
        elif line.startswith("also-model: "):
            script.also_model = line[len("also-model: "):]
    return script


def provider_failure(script: Script, model: str | None) -> str | None:
    """The provider failure this run meets (quota, funds or model), or None: `fail-provider`, unless
    it names another model (compared without a `provider/` prefix)."""
    if script.provider is None:
        return None
    if script.provider_model is not None and (model or "").rpartition("/")[2] != script.provider_model.rpartition("/")[2]:
        return None
    return script.provider


def final_text(script: Script) -> str:
    return json.dumps(FINDINGS) if script.findings else script.answer


def act(script: Script, root: Path) -> list[str]:
    """Dump the environment, hang, make the edits; returns the paths edited."""
    if script.dump_env:
        home = Path(os.environ.get("HOME", "/nonexistent"))
        listing = sorted(str(p.relative_to(home)) for p in home.rglob("*")) if home.is_dir() else []
        seen = {"env": dict(os.environ), "home": listing, "home_path": str(home), "argv": sys.argv[1:]}
        Path(script.dump_env).write_text(json.dumps(seen))
    if script.hang:
        while True:
            time.sleep(1)
    edited = []
    for line in script.edits:
        if m := re.fullmatch(r"edit (?P<path>[^:]+): replace (?P<old>.+?) with (?P<new>.*)", line):
            path = root / m["path"]
            path.write_text(path.read_text().replace(m["old"], m["new"], 1))
            edited.append(m["path"])
        elif m := re.fullmatch(r"(?P<how>write|append) (?P<path>[^:]+): (?P<text>.*)", line):
            path = root / m["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a" if m["how"] == "append" else "w") as handle:
                handle.write(m["text"] + "\n")
            edited.append(m["path"])
    return edited


def add_to_dump(path: str | None, **fields: object) -> None:
    """Add what a fake saw of its own state (settings, state directory) to the dump-env file."""
    if not path:
        return
    data = json.loads(Path(path).read_text())
    data.update(fields)
    Path(path).write_text(json.dumps(data))


def describe_dir(root: Path) -> dict:
    """A directory's entries (not following links) as "link -> TARGET", "dir" or "file"."""
    entries = {}
    if root.is_dir():
        for entry in sorted(root.rglob("*")):
            if any(parent.is_symlink() for parent in entry.relative_to(root).parents if parent != Path(".")):
                continue
            name = str(entry.relative_to(root))
            entries[name] = f"link -> {os.readlink(entry)}" if entry.is_symlink() else "dir" if entry.is_dir() else "file"
    return {"path": str(root), "entries": entries}


def die(message: str, code: int) -> None:
    print(message, file=sys.stderr)
    sys.exit(code)
