"""The memory section of a task's prompt packet: the most relevant records that count here.

Chosen by model/recall.py (paths the task touches or names, then shared
words, newest first, by id; within `[memory] budget_tokens`; older than
`max_age_days` left out), each with its provenance. A record whose paths
differ between its commit and the task's base is marked possibly stale.
Everything is a function of the repository's content, the task and `now`:
the same inputs give the same bytes.
"""

from __future__ import annotations

from gitswarm.engine.config import MemoryConfig
from gitswarm.engine.knowledge.memory import Believer, changed_paths, memory_log, notes_of
from gitswarm.model.errors import CorruptRecord
from gitswarm.model.memory import MemoryRecord, named_paths, words
from gitswarm.model.recall import DAY, Query, Ranked, rank, select
from gitswarm.model.records import Job, TaskSpec
from gitswarm.store.gitrepo import GitRepo
from gitswarm.store.jobs import JobRefs

CHARS_PER_TOKEN = 4
BODY_SHOWN = 400
HEADER = """
# What earlier accepted work established (memory)

Each entry is a result that a verdict counted here accepted, with where it came from.
Check an entry marked possibly stale against the code before relying on it.

"""


def task_query(repo: GitRepo, job: Job, spec: TaskSpec, base: str | None) -> Query:
    """What a task is about: the paths its spec declares or its prompt names (that exist at the
    base, when there is one), and the words of its prompt and the job's goal."""
    text = "\n".join(part for part in (spec.prompt or "", spec.command if isinstance(spec.command, str) else "") if part)
    tree = repo.commit_info(base).tree if base is not None and repo.has_object(base) else None
    exists = (lambda p: repo.tree_entry(tree, p) is not None) if tree is not None else (lambda p: "/" in p or "." in p)
    declared = spec.paths
    return Query(frozenset([*declared, *named_paths(text, exists)]), frozenset(words(f"{text}\n{job.goal}")))


def render(repo: GitRepo, entry: Ranked, base: str | None) -> str:
    record: MemoryRecord = entry.record
    where = f"job {record.job[:12]}, task {record.task}, commit {record.commit[:10]}"
    if record.paths:
        where += "; about " + ", ".join(record.paths[:8]) + (f" and {len(record.paths) - 8} more" if len(record.paths) > 8 else "")
    text = f"- [{record.kind}] {record.title} ({where})"
    if base is not None:
        changed = changed_paths(repo, record, base) if repo.has_object(base) else []
        if changed:
            text += f"\n  possibly stale: {', '.join(changed[:8])} changed between {record.commit[:10]} and the base {base[:10]}"
    body = record.body.strip()
    if body and body != record.title:
        shown = body if len(body) <= BODY_SHOWN else body[: BODY_SHOWN - 1] + "…"
        text += "\n  " + shown.replace("\n", "\n  ")
    return text


def memory_section(
    repo: GitRepo, refs: JobRefs, job: Job, spec: TaskSpec, base: str | None, config: MemoryConfig, now: float
) -> str:
    """The packet's memory section, or "" when nothing relevant counts (or memory is off)."""
    if config.budget_tokens == 0:
        return ""
    try:
        memory = memory_log(repo, refs).read()
    except CorruptRecord:
        return ""  # a memory ref this clone cannot read gives no memory, never a failed task
    if not memory.records:
        return ""
    ranked = rank(memory.records.values(), task_query(repo, job, spec, base), now, config.max_age_days * DAY)
    believer = Believer(repo, refs, notes_of(repo))
    budget = config.budget_tokens * CHARS_PER_TOKEN - len(HEADER)
    kept = select(ranked, lambda entry: render(repo, entry, base), budget, believer.counts)
    return HEADER + "\n".join(kept) + "\n" if kept else ""
