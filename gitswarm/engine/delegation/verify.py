"""Verification by gitswarm: the checks run on a fresh clean checkout of the patch's head.

Never in the worker's tree, which may hold ignored junk; never on the
agent's word. An optional auditor reviews the patch read-only in that same
checkout, with no memory of the worker. The result is always a verdict for
exactly the head SHA that was checked, also written as a note on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gitswarm.adapters.base import Adapter, BlobWriter, RunContext, Runner, execute
from gitswarm.adapters.shell import ShellAdapter
from gitswarm.model.artifacts import Check, Patch, Verdict, artifact_id
from gitswarm.model.errors import BadInput
from gitswarm.model.records import TaskSpec
from gitswarm.model.verdict import Judgement, combine, from_checks, parse_auditor
from gitswarm.store.checkouts import Checkout, Checkouts
from gitswarm.store.gitrepo import GitRepo
from gitswarm.store.verdicts import VerdictNotes

AUDIT_PROMPT = """You are reviewing a patch made by another agent. Do not edit anything.

The instruction it was given:
{instruction}

The patch (base {base}, head {head}):
{diff}

Answer with one JSON object and nothing after it:
{{"status": "complete|incomplete|blocked", "integrity": "clean|suspect|violation",
  "contract": "aligned|unknown|needs_revision|invalid",
  "evidence": {{"status": "...", "integrity": "...", "contract": "..."}}}}
"""
MAX_AUDIT_DIFF = 200_000


@dataclass(frozen=True)
class Verification:
    checks: list[Check]
    verdict: Verdict


# The checkouts this process holds, by path: clean_checkout and drop_checkout pass only the path.
_held: dict[Path, tuple[Checkouts, Checkout]] = {}


def clean_checkout(repo_dir: Path, root: Path, commit: str) -> Path:
    """A clean detached checkout of `commit` (from the pool under `<root>/checkouts`, see
    store/checkouts.py: as a fresh checkout, cheaper); give it back with drop_checkout."""
    pool = Checkouts(repo_dir, root)
    checkout = pool.take(commit)
    _held[checkout.path] = (pool, checkout)
    return checkout.path


def drop_checkout(repo_dir: Path, path: Path) -> None:
    """Give a checkout of clean_checkout back to the pool (it is cleaned before its next use)."""
    pool, checkout = _held.pop(path)
    pool.give_back(checkout)


def run_checks(
    commands: tuple[str, ...], checkout: Path, ctx: RunContext, timeout: float, run: Runner, store: BlobWriter, now: Callable[[], float]
) -> list[Check]:
    shell = ShellAdapter()
    checks: list[Check] = []
    for command in commands:
        spec = TaskSpec(id=ctx.task, seq=0, command=command, timeout=timeout)
        check_ctx = RunContext(ctx.job, ctx.task, ctx.attempt, checkout, ctx.base_env)
        outcome = execute(shell, spec, check_ctx, run, store, now)
        checks.extend(a for a in outcome.artifacts if isinstance(a, Check))
    return checks


def nothing_to_check(doing: str) -> str:
    """Why a verdict cannot be had: nothing would be checked, and an acceptance of nothing is worthless."""
    return (
        f"{doing}: nothing to check: configure checks ([audit] checks in .gitswarm.toml, or --check) "
        "or an auditor ([audit] auditor, or --adapter)"
    )


def verify(
    repo: GitRepo,
    repo_dir: Path,
    root: Path,
    patch: Patch,
    spec: TaskSpec,
    ctx: RunContext,
    run: Runner,
    store: BlobWriter,
    now: Callable[[], float],
    auditor: Adapter | None = None,
) -> Verification:
    if not spec.checks and auditor is None:
        raise BadInput(nothing_to_check(f"verify {patch.head[:12]}"))
    checkout = clean_checkout(repo_dir, root, patch.head)
    try:
        checks = run_checks(spec.checks, checkout, ctx, spec.timeout, run, store, now)
        judgement = from_checks({_shown(c): c.passed for c in checks})
        reviewer = "checks"
        if auditor is not None:
            said = _audit(auditor, repo, patch, spec, ctx, checkout, run, store, now)
            # With no checks the auditor alone judges; with both, both must accept.
            judgement = combine(judgement, said) if checks else said
            reviewer = f"checks+{auditor.name}" if checks else auditor.name
    finally:
        drop_checkout(repo_dir, checkout)
    verdict = Verdict(
        job=ctx.job,
        task=ctx.task,
        attempt=ctx.attempt,
        created=now(),
        producer="gitswarm",
        head=patch.head,
        status=judgement.status,
        integrity=judgement.integrity,
        contract=judgement.contract,
        accepted=judgement.accepted and not judgement.malformed,
        reviewer=reviewer,
        evidence=judgement.evidence | ({"malformed": judgement.malformed} if judgement.malformed else {}),
        checks=tuple(artifact_id(c) for c in checks),
        patch=artifact_id(patch),
    )
    VerdictNotes(repo, repo_dir).add(verdict, now())
    return Verification(checks, verdict)


def _shown(check: Check) -> str:
    return check.command if isinstance(check.command, str) else " ".join(check.command)


def _audit(
    auditor: Adapter,
    repo: GitRepo,
    patch: Patch,
    spec: TaskSpec,
    ctx: RunContext,
    checkout: Path,
    run: Runner,
    store: BlobWriter,
    now: Callable[[], float],
) -> Judgement:
    diff = repo.read_blob(patch.diff.oid)[:MAX_AUDIT_DIFF].decode(errors="replace")
    prompt = AUDIT_PROMPT.format(instruction=spec.prompt or spec.command, base=patch.base, head=patch.head, diff=diff)
    audit_spec = TaskSpec(id=ctx.task, seq=0, mode="analyze", prompt=prompt, timeout=spec.timeout)
    audit_ctx = RunContext(ctx.job, ctx.task, ctx.attempt, checkout, ctx.base_env, prompt=prompt)
    said = execute(auditor, audit_spec, audit_ctx, run, store, now)
    if not said.ok:
        return Judgement(malformed=f"the auditor failed: {said.error}")
    return parse_auditor(said.text)
