"""The prompt packet: what an agent worker is told, instead of a transcript.

The job's goal and the rules of the swarm first, identical byte for byte for
every task of the job (so a provider's prompt cache can reuse it); then the
skills chosen for the task, if the repository configures any; then the
worker's own task (a browser task's with its guardrails); then what the tasks it depends on left behind (failed
checks, decisions, findings, patches), most useful first, trimmed to a token
budget; then how to answer.
"""

from __future__ import annotations

from collections.abc import Callable

from gitswarm.model.analyze_answer import schema_text
from gitswarm.model.artifacts import Artifact, Check, Decision, Finding, Patch
from gitswarm.model.browser import GUARDRAILS, is_browser
from gitswarm.model.records import TaskSpec
from gitswarm.store.jobs import Snapshot

PACKET_TOKENS = 4000  # the budget for what dependencies left behind
CHARS_PER_TOKEN = 4  # a rough, tokenizer-free estimate
ENTRY_CHARS = 1200  # no single note takes more than this
TAIL_CHARS = 600

JOB_PREFIX = """You are one worker in a gitswarm job. Several agents each do one task of a
shared goal; they never see each other's conversations, only the records
gitswarm keeps. Do your task and nothing else: other workers do the others.

# The job's goal

{goal}
"""

ANALYZE_ANSWER = """
# How to answer

Do not change any file. Answer with exactly one JSON object, and nothing after it:
{{"findings": [{{"title": "...", "body": "...", "confidence": 0.0-1.0, "severity": "info|low|medium|high|critical"}}],
 "decisions": [{{"title": "...", "rationale": "..."}}]}}
Its JSON schema: {schema}
"""

BROWSER_ANSWER = """
# How to answer

Do not change any file. Answer with exactly one JSON object, and nothing after it:
{{"findings": [{{"title": "...", "body": "...", "confidence": 0.0-1.0, "severity": "info|low|medium|high|critical",
   "evidence": "the requests this finding relies on: method, URL, status, the relevant part of the body"}}],
 "decisions": [{{"title": "...", "rationale": "..."}}]}}
Its JSON schema: {schema}
"""

IMPLEMENT_ANSWER = """
# How to work

Make the change in the current directory, which is your own git worktree on
its own branch. Do not commit, push or switch branches: gitswarm commits what
you leave, re-runs the checks on a clean checkout, and only then accepts it.
End with a short summary of what you changed.
"""

BROWSER_IMPLEMENT = """In your summary, name the network evidence (method, URL, status, body) that shows the change works.
"""


def job_prefix(goal: str) -> str:
    return JOB_PREFIX.format(goal=goal.strip())


def build_packet(
    snapshot: Snapshot, spec: TaskSpec, read_blob: Callable[[str], bytes], budget_tokens: int = PACKET_TOKENS,
    memory: str = "", skills: str = "",
) -> str:
    """`memory`: the section of remembered accepted results (engine/knowledge/memory_section.py), or "";
    `skills`: the section of skills chosen for the task (engine/knowledge/skills.py), or ""."""
    browser = is_browser(spec.needs)
    parts = [job_prefix(snapshot.job.goal), skills, f"\n# Your task: {spec.id}\n\n{(spec.prompt or '').strip()}\n"]
    if spec.checks:
        parts.append("\nThese checks must pass afterwards: " + "; ".join(f"`{c}`" for c in spec.checks) + "\n")
    if browser:
        parts.append(GUARDRAILS)
    notes = dependency_notes(snapshot, spec, read_blob)
    if notes:
        budget = budget_tokens * CHARS_PER_TOKEN
        kept, used = [], 0
        for note in notes:
            if used + len(note) > budget:
                break
            kept.append(note)
            used += len(note)
        omitted = len(notes) - len(kept)
        parts.append("\n# What the tasks you depend on left\n\n" + "\n".join(kept))
        if omitted:
            parts.append(f"\n({omitted} more left out to keep this short.)\n")
    parts.append(memory)
    if spec.mode == "analyze":
        parts.append((BROWSER_ANSWER if browser else ANALYZE_ANSWER).format(schema=schema_text(browser)))
    else:
        parts.append(IMPLEMENT_ANSWER + (BROWSER_IMPLEMENT if browser else ""))
    return "".join(parts)


def dependency_notes(snapshot: Snapshot, spec: TaskSpec, read_blob: Callable[[str], bytes]) -> list[str]:
    """One short note per artifact of the tasks `spec` depends on, most useful first."""
    ranked: list[tuple[int, float, str]] = []
    for dep in spec.depends_on:
        for artifact_id in snapshot.task(dep).artifacts:
            artifact = snapshot.artifact(artifact_id)
            note = _note(dep, artifact, read_blob)
            if note is not None:
                ranked.append((*_rank(artifact), note))
    ranked.sort(key=lambda r: (r[0], -r[1]))
    return [note for _, _, note in ranked]


def _rank(artifact: Artifact) -> tuple[int, float]:
    match artifact:
        case Check():
            return 0, 0.0
        case Decision():
            return 1, 0.0
        case Finding(confidence=confidence):
            return 2, confidence
        case _:
            return 3, 0.0


def _note(task: str, artifact: Artifact, read_blob: Callable[[str], bytes]) -> str | None:
    match artifact:
        case Check(passed=False, command=command, exit_code=code, stdout=out, stderr=err):
            shown = command if isinstance(command, str) else " ".join(command)
            output = b"".join(read_blob(ref.oid) for ref in (err, out) if ref is not None)
            tail = output.decode(errors="replace")[-TAIL_CHARS:].strip()
            return _cut(f"- [{task}] check failed: `{shown}` exit {code}\n```\n{tail}\n```")
        case Decision(title=title, rationale=rationale):
            return _cut(f"- [{task}] decision: {title}" + (f" ({rationale})" if rationale else ""))
        case Finding(title=title, body=body, confidence=confidence, low_confidence=low, evidence=evidence):
            flag = ", unstructured" if low else ""
            text = f"- [{task}] finding (confidence {confidence:.2f}{flag}): {title}"
            if body.strip() and body.strip() != title:
                text += f"\n  {body.strip()}"
            if isinstance(evidence, str) and evidence.strip():
                text += f"\n  evidence: {evidence.strip()}"
            return _cut(text)
        case Patch(base=base, head=head, files=files):
            changed = ", ".join(f"{f.path} (+{f.added}/-{f.deleted})" for f in files[:20])
            return _cut(f"- [{task}] patch {base[:10]}..{head[:10]}: {changed}")
    return None


def _cut(text: str) -> str:
    return text if len(text) <= ENTRY_CHARS else text[: ENTRY_CHARS - 3] + "..."
