"""The skills section of a task's prompt packet: `[skills] dirs` read, the task's skills chosen.

Off unless `.gitswarm.toml` names folders (`[skills] dirs`). Each folder is
read one level deep: `DIR/SKILL.md` and `DIR/*/SKILL.md`, nothing else (no
persona, rules or memory files, whatever they are called). A folder must be
inside the repository's working tree or the user's gitswarm folder
(`$XDG_CONFIG_HOME/gitswarm`, by default `~/.config/gitswarm`), after
symlinks are resolved: any other is refused, naming it; a SKILL.md that
leads elsewhere through a link is skipped. A folder that does not exist
gives no skills. Parsed files are kept per process by path, modification
time and size, so a worker re-reads only what changed. The choice is
model/skills.py's; the run records the skills it got (`Run.skills`).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from gitswarm.engine.config import SkillsConfig, skill_dirs, skill_roots
from gitswarm.model.records import TaskSpec
from gitswarm.model.skills import SKILL_FILE, Skill, parse_skill, section, select

CHARS_PER_TOKEN = 4  # the packet's estimate (engine/knowledge/packet.py)
MAX_SKILL_BYTES = 128 * 1024  # a bigger SKILL.md is skipped: it could never fit a packet's budget

_parsed: dict[str, tuple[int, int, Skill | None]] = {}  # path -> (mtime_ns, size, skill)


def load_skills(dirs: Sequence[Path], roots: Sequence[Path]) -> list[Skill]:
    """Every readable skill of `dirs` (resolved, inside `roots`), in folder order, then by name."""
    skills: list[Skill] = []
    for folder in dirs:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue  # missing or unreadable: no skills from it
        # (path, whether a link led there): a linked folder is inside the roots only if it resolves there
        candidates = [(os.path.join(folder, SKILL_FILE), False)]
        candidates += [(os.path.join(e.path, SKILL_FILE), e.is_symlink()) for e in entries if e.is_dir()]
        for path, linked in candidates:
            skill = _read(path, linked, roots)
            if skill is not None:
                skills.append(skill)
    return skills


def _read(path: str, linked: bool, roots: Sequence[Path]) -> Skill | None:
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            linked, info = True, os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    cached = _parsed.get(path)
    if cached is not None and cached[:2] == (info.st_mtime_ns, info.st_size):
        return cached[2]
    skill = None
    inside = not linked or any(Path(path).resolve().is_relative_to(root) for root in roots)
    if info.st_size <= MAX_SKILL_BYTES and inside:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
            skill = parse_skill(data.decode("utf-8"), hashlib.sha256(data).hexdigest())
        except (OSError, UnicodeDecodeError):
            skill = None
    _parsed[path] = (info.st_mtime_ns, info.st_size, skill)
    return skill


def task_text(spec: TaskSpec) -> str:
    """What a task's skills are matched against: its id and its prompt."""
    return f"{spec.id.replace('-', ' ')}\n{spec.prompt or ''}"


def choose_skills(workdir: Path | None, spec: TaskSpec, config: SkillsConfig) -> list[Skill]:
    """The skills for `spec` ([] when skills are off)."""
    if not config.dirs or config.max_skills == 0 or config.max_tokens == 0:
        return []
    roots = skill_roots(workdir)
    skills = load_skills(skill_dirs(workdir, config), roots)
    return select(skills, task_text(spec), config.max_skills, config.max_tokens * CHARS_PER_TOKEN)


def skills_section(workdir: Path | None, spec: TaskSpec, config: SkillsConfig) -> tuple[str, tuple[str, ...]]:
    """The packet's skills section ("" when none) and what the run records of them (`NAME@SHA256` each)."""
    chosen = choose_skills(workdir, spec, config)
    return section(chosen), tuple(skill.receipt for skill in chosen)
