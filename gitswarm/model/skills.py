"""Skills: a few reference notes chosen for a task, opt-in and bounded.

A skill is a `SKILL.md` file whose front matter names it and says what it is
for (`name:` and `description:` between `---` lines, first thing in the file;
no other key is read, and no YAML library is needed). For a task, the skills
whose name and description share the most words with the task's prompt are
chosen — a skill sharing none never is — ties broken by name, and taken in
that order while there is room: at most `max_skills` of them, their entries
within a budget of characters (a skill that does not fit is passed over for
the next). The same skills and task give the same choice, byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gitswarm.model.memory import words

SKILL_FILE = "SKILL.md"
NAME_CHARS = 64
DESCRIPTION_CHARS = 1024
_FENCE = "---"
_END = re.compile(r"^[ \t]*---[ \t]*(?:\n|$)", re.MULTILINE)
_KEY = re.compile(r"^(name|description)\s*:\s*(.*)$")


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    body: str
    sha256: str  # of the file's bytes: what the run artifact records
    words: frozenset[str]  # of its name and description: what a task is matched against

    @property
    def receipt(self) -> str:
        """How a run artifact names it: `NAME@SHA256`."""
        return f"{self.name}@{self.sha256}"

    def entry(self) -> str:
        """The skill as the prompt packet shows it."""
        return f"## Skill: {self.name}\n\n{self.body.strip()}\n"


def parse_skill(text: str, sha256: str) -> Skill | None:
    """A skill from the text of a SKILL.md; None when its front matter lacks a usable name or description."""
    text = text.lstrip("\ufeff")
    first, _, rest = text.partition("\n")
    if first.strip() != _FENCE:
        return None
    fence = _END.search(rest)
    if fence is None:
        return None
    found: dict[str, str] = {}
    key: str | None = None
    for line in rest[: fence.start()].splitlines():
        match = _KEY.match(line)
        if match:
            key = match[1]
            found[key] = _unquote(match[2])
        elif key is not None and line[:1] in (" ", "\t") and line.strip():
            found[key] = f"{found[key]} {line.strip()}".strip()  # a folded continuation (`description: >` and on)
        elif not line.startswith("#"):
            key = None  # another key: not read
    name = found.get("name", "").strip()
    description = " ".join(found.get("description", "").split())[:DESCRIPTION_CHARS]
    if not name or len(name) > NAME_CHARS or any(c < " " or c == "\x7f" for c in name) or not description:
        return None
    body = rest[fence.end() :].strip()
    if not body:
        return None
    return Skill(name, description, body, sha256, frozenset(words(f"{name.replace('-', ' ')} {description}")))


def _unquote(value: str) -> str:
    value = value.strip()
    if value in (">", "|", ">-", "|-", ">+", "|+"):
        return ""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def select(skills: Iterable[Skill], task_text: str, max_skills: int, max_chars: int) -> list[Skill]:
    """The skills for a task: most words shared with `task_text` first, then by name; at most
    `max_skills`, their entries within `max_chars` in all. Skills of one name count once (the first)."""
    if max_skills <= 0 or max_chars <= 0:
        return []
    wanted = words(task_text)
    scored: list[tuple[int, str, Skill]] = []
    seen: set[str] = set()
    for skill in skills:
        if skill.name in seen:
            continue
        seen.add(skill.name)
        shared = len(wanted & skill.words)
        if shared:
            scored.append((-shared, skill.name, skill))
    scored.sort(key=lambda s: (s[0], s[1]))
    chosen: list[Skill] = []
    used = 0
    for _, _, skill in scored:
        size = len(skill.entry())
        if used + size > max_chars:
            continue
        chosen.append(skill)
        used += size
        if len(chosen) == max_skills:
            break
    return chosen


HEADER = """
# Skills for this task

Reference notes this repository keeps for work like yours, chosen by gitswarm. Use what applies.

"""


def section(chosen: Sequence[Skill]) -> str:
    """The packet's skills section, or "" when none was chosen."""
    return HEADER + "\n".join(skill.entry() for skill in chosen) if chosen else ""
