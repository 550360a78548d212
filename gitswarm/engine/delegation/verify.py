"""Verification by gitswarm: the checks run on a fresh clean checkout of the patch's head.

Never in the worker's tree, which may hold ignored junk; never on the
agent's word. An optional auditor reviews the patch read-only in that same
checkout, with no memory of the worker. The result is always a verdict for
exactly the head SHA that was checked, also written as a note on it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import msgspec

from gitswarm.adapters.base import Adapter, BlobWriter, RunContext, Runner, execute
from gitswarm.adapters.sandbox import Decision
from gitswarm.adapters.shell import ShellAdapter
from gitswarm.engine.config import load_config
from gitswarm.engine.delegation.check_env import check_env, env_key, guard_dir, source_of, tree_reads
from gitswarm.engine.delegation.confine import Confined
from gitswarm.engine.delegation.judges import (
    NONE,
    JudgeChanges,
    judge_changes,
    protection,
    put_back,
    restore,
    set_aside,
)
from gitswarm.model.artifacts import Check, Patch, Transition, Verdict, artifact_id
from gitswarm.model.errors import BadInput
from gitswarm.model.evidence import names_every, transition, weigh
from gitswarm.model.protected import command_segments, named_paths
from gitswarm.model.records import TaskSpec
from gitswarm.model.test_counts import compare, read_counts, runner_of
from gitswarm.model.verdict import Judgement, combine, from_checks, parse_auditor
from gitswarm.store.base_checks import BaseCheck, BaseChecks, output_tail
from gitswarm.store.checkouts import Checkout, Checkouts
from gitswarm.store.diffs import binary_diff
from gitswarm.store.gitcli import git
from gitswarm.store.gitrepo import GitRepo
from gitswarm.store.verdicts import VerdictNotes

AUDIT_PROMPT = """You are reviewing a patch made by another agent. Do not edit anything.

The instruction it was given:
{instruction}
{judged}
The patch (base {base}, head {head}):
{diff}

Answer with one JSON object and nothing after it:
{{"status": "complete|incomplete|blocked", "integrity": "clean|suspect|violation",
  "contract": "aligned|unknown|needs_revision|invalid",
  "evidence": {{"status": "...", "integrity": "...", "contract": "..."}}}}
"""
JUDGES_SECTION = """
This patch changes what judges it: {files}. gitswarm ran its checks with the base's version of
these files, but the patch changes them. Answer "integrity": "suspect" unless you have read each
change below and it is needed for the task and does not weaken, skip or delete a test or check; if
you accept it, name each of these files in evidence.integrity and say why its change is right.

The changes to them:
{judges_diff}
"""
CHECKS_SECTION = """
gitswarm's checks, on the base and then on the head:
{table}
"""
MAX_AUDIT_DIFF = 200_000


@dataclass(frozen=True)
class Rules:
    """What a repository asks of verification ([verify] in .gitswarm.toml, and a task's own `require`)."""

    protect: tuple[str, ...] = ()
    require: str | None = None
    # An agent's patch is judged against its base: its judges put back, its checks run on the base too.
    # `audit REV` of a person's own commit is not: it changes tests as a matter of course.
    against_base: bool = True


AUDIT_RULES = Rules(against_base=False)


def rules_of(workdir: Path | None, spec: TaskSpec) -> Rules:
    """The rules for verifying `spec`'s patches: the repository's [verify], the task's `require` first."""
    config = load_config(workdir).verify
    require = spec.require or (None if config.require == "any" else config.require)
    return Rules(protect=tuple(config.protect), require=require)


@dataclass(frozen=True)
class Sandboxes:
    """The sandboxes of a verification (engine/delegation/confine.py): the checks' and the auditor's; None: none."""

    checks: Decision | None = None
    auditor: Decision | None = None


@dataclass(frozen=True)
class Verification:
    checks: list[Check]
    verdict: Verdict


@dataclass(frozen=True)
class _Ran:
    """The checks of one checkout: the artifacts, and what the guard saw them read of the user's tree."""

    checks: list[Check]
    outputs: list[str]
    tree_reads: list[list[str]]


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
    commands: tuple[str, ...], checkout: Path, ctx: RunContext, timeout: float, run: Runner, store: BlobWriter, now: Callable[[], float],
    root: Path | None = None, user_tree: Path | None = None, sandbox: Decision | None = None, common: Path | None = None,
) -> list[Check]:
    """The checks run in `checkout`, in the guarded environment of engine/delegation/check_env.py
    (and in `sandbox`, when given: `common` is then the repository's git common dir)."""
    boxed = (sandbox, common) if sandbox is not None and common is not None else None
    return _run_guarded(commands, checkout, ctx, timeout, run, store, now, root, user_tree, None, boxed).checks


def _run_guarded(
    commands: tuple[str, ...], checkout: Path, ctx: RunContext, timeout: float, run: Runner, store: BlobWriter, now: Callable[[], float],
    root: Path | None, user_tree: Path | None, read_blob: Callable[[str], bytes] | None,
    boxed: tuple[Decision, Path] | None = None,
) -> _Ran:
    shell = ShellAdapter()
    ran = _Ran([], [], [])
    guard = guard_dir(root if root is not None else checkout.parent)
    for n, command in enumerate(commands):
        reads = guard / f"reads-{os.getpid()}-{threading.get_ident()}-{n}"  # the MCP server verifies in threads
        reads.unlink(missing_ok=True)
        env = check_env(ctx.base_env, checkout, user_tree, guard, reads)
        spec = TaskSpec(id=ctx.task, seq=0, command=command, timeout=timeout)
        check_ctx = RunContext(ctx.job, ctx.task, ctx.attempt, checkout, env)
        if boxed is None:
            outcome = execute(shell, spec, check_ctx, run, store, now)
        else:
            decided, common = boxed
            box = decided.sandbox.adding(write=[guard]) if decided.sandbox is not None else None
            with Confined(common, msgspec.structs.replace(decided, sandbox=box), check_ctx, checkout) as confined:
                outcome = execute(shell, spec, confined.ctx, run, store, now)
        found = [a for a in outcome.artifacts if isinstance(a, Check)]
        ran.checks.extend(found)
        ran.outputs.append(_output(found[0], read_blob) if found and read_blob is not None else "")
        ran.tree_reads.append(tree_reads(reads, user_tree) if user_tree is not None else [])
        reads.unlink(missing_ok=True)
    return ran


def nothing_to_check(doing: str) -> str:
    """Why a verdict cannot be had: nothing would be checked, and an acceptance of nothing is worthless."""
    return (
        f"{doing}: nothing to check: configure checks ([audit] checks in .gitswarm.toml, or --check) "
        "or an auditor ([audit] auditor, or --adapter)"
    )


def names_any(command: str, paths: set[str]) -> bool:
    """Whether a check's command names one of `paths` as an argument: `pytest tests/test_new.py`,
    `pytest ./tests/test_new.py::test_one` (a test runner given the test file the patch adds)."""
    for words in command_segments([command]):
        for word in words:
            if word.split("::", 1)[0].removeprefix("./") in paths:
                return True
    return False


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
    rules: Rules = Rules(),
    judged: JudgeChanges | None = None,
    sandboxes: Sandboxes = Sandboxes(),
) -> Verification:
    """Judge `patch`: its checks on a clean checkout of its head with the base's judges, the same checks
    on the base (cached), and the auditor if any; the verdict is noted on the head. `judged`: what
    changed_judges() found for this very patch and these rules, when the caller has it already."""
    if not spec.checks and auditor is None:
        raise BadInput(nothing_to_check(f"verify {patch.head[:12]}"))
    against_base = rules.against_base and patch.base != patch.head
    if not against_base:
        judges = NONE
    else:
        judges = judged if judged is not None else changed_judges(repo, repo_dir, patch.base, patch.head, spec, rules)
    user_tree = repo.workdir
    # The base first: its checkout, when the cache misses, is then reused for the head's.
    boxed = (sandboxes.checks, repo.common_dir) if sandboxes.checks is not None else None
    base = _base_results(repo, repo_dir, root, patch.base, spec, ctx, run, store, now, user_tree, boxed) if spec.checks and against_base else {}
    # A check that runs a test file the patch adds has no evidence without it; every other check is
    # judged on a run with the base's tests alone, which an added test cannot change from inside.
    added = set(judges.added_tests)
    needs_added = {c for c in spec.checks if named_paths([c], added.__contains__) or names_any(c, added)}
    checkout = clean_checkout(repo_dir, root, patch.head)
    aside = Path(tempfile.mkdtemp(prefix="aside-", dir=root)) if judges.added_tests else None
    try:
        restore(repo, checkout, judges.restore)
        if aside is not None:
            set_aside(checkout, judges.added_tests, aside)
        ran = _run_guarded(spec.checks, checkout, ctx, spec.timeout, run, store, now, root, user_tree, repo.read_blob, boxed)
        if aside is not None:
            put_back(checkout, judges.added_tests, aside)
        with_added = (
            _run_guarded(spec.checks, checkout, ctx, spec.timeout, run, store, now, root, user_tree, repo.read_blob, boxed)
            if judges.added_tests else _Ran([], [], [])
        )
        if judges.restore or judges.added_tests:  # the auditor reviews the patch as it is
            git(["checkout", "-q", "-f", "HEAD", "--", "."], checkout)
        evidence = _evidence_run(ran, with_added, needs_added)
        transitions = {_shown(c): transition(base[_shown(c)].passed, c.passed) for c in evidence.checks if _shown(c) in base}
        flags = _flags(repo, patch.base, ran, base, needs_added)
        results = {_shown(c): c.passed for c in evidence.checks}
        results |= {f"{_shown(c)} (with the tests the patch adds)": c.passed for c in with_added.checks}
        judgement = from_checks(results)
        # A check that needs a test file the patch adds says nothing without it ("file not found"): that run is
        # not recorded, so no summary reports it as a failure the task recovered from.
        all_checks = [*(c for c in ran.checks if _shown(c) not in needs_added), *with_added.checks]
        reviewer, reviewed = "checks", False
        if auditor is not None:
            said = _audit(auditor, repo, repo_dir, patch, spec, ctx, checkout, run, store, now, judges.files, transitions,
                          sandboxes.auditor)
            reviewed = bool(judges.files) and said.accepted and names_every(said.evidence.get("integrity", ""), judges.files)
            # With no checks the auditor alone judges; with both, both must accept.
            judgement = combine(judgement, said) if all_checks else said
            reviewer = f"checks+{auditor.name}" if all_checks else auditor.name
    finally:
        drop_checkout(repo_dir, checkout)
        if aside is not None:  # emptied by put_back; what an interrupted run left there goes too
            shutil.rmtree(aside, ignore_errors=True)
    judgement = weigh(judgement, transitions=transitions, flags=flags, require=rules.require, judges=judges.files, reviewed=reviewed)
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
        checks=tuple(artifact_id(c) for c in all_checks),
        patch=artifact_id(patch),
        judges=judges.files,
        transitions=transitions,
        flags=tuple(flags),
    )
    VerdictNotes(repo, repo_dir).add(verdict, now())
    return Verification(all_checks, verdict)


def changed_judges(repo: GitRepo, repo_dir: Path, base: str, head: str, spec: TaskSpec, rules: Rules) -> JudgeChanges:
    """What of base..head changes what judges a patch of `spec` under `rules` (engine/delegation/judges.py)."""
    return judge_changes(repo, repo_dir, base, head, protection(repo, base, spec.checks, rules.protect))


def _evidence_run(ran: _Ran, with_added: _Ran, needs_added: set[str]) -> _Ran:
    """Each check's evidence: its run with the base's tests alone, or, for a check that runs a test
    file the patch adds, its run with that file."""
    if not needs_added:
        return ran
    picked = _Ran([], [], [])
    by_command = {_shown(c): (c, o, r) for c, o, r in zip(with_added.checks, with_added.outputs, with_added.tree_reads, strict=True)}
    for check, output, reads in zip(ran.checks, ran.outputs, ran.tree_reads, strict=True):
        chosen = by_command.get(_shown(check), (check, output, reads)) if _shown(check) in needs_added else (check, output, reads)
        picked.checks.append(chosen[0])
        picked.outputs.append(chosen[1])
        picked.tree_reads.append(chosen[2])
    return picked


def _base_results(
    repo: GitRepo, repo_dir: Path, root: Path, base: str, spec: TaskSpec, ctx: RunContext, run: Runner,
    store: BlobWriter, now: Callable[[], float], user_tree: Path | None, boxed: tuple[Decision, Path] | None = None,
) -> dict[str, BaseCheck]:
    """Each check's result on the base: from the cache, or run once on a clean checkout of it and kept."""
    cache = BaseChecks(repo.common_dir)
    key = env_key(ctx.base_env)  # a base run under another environment (PYTEST_ADDOPTS, say) is another result
    found = {command: cache.get(base, command, key) for command in spec.checks}
    missing = tuple(command for command, result in found.items() if result is None)
    if missing:
        checkout = clean_checkout(repo_dir, root, base)
        try:
            ran = _run_guarded(missing, checkout, ctx, spec.timeout, run, store, now, root, user_tree, repo.read_blob, boxed)
        finally:
            drop_checkout(repo_dir, checkout)
        for command, check, output in zip(missing, ran.checks, ran.outputs, strict=True):
            found[command] = result = BaseCheck(passed=check.passed, exit_code=check.exit_code, output_tail=output)
            if not check.timed_out:  # a timeout says nothing lasting about the base
                cache.put(base, command, result, key)
    return {command: result for command, result in found.items() if result is not None}


def _output(check: Check, read_blob: Callable[[str], bytes]) -> str:
    """The end of what a check printed, where the runners put their summaries."""
    stdout = read_blob(check.stdout.oid) if check.stdout is not None else b""
    stderr = read_blob(check.stderr.oid) if check.stderr is not None else b""
    return output_tail(stdout, stderr)


def _flags(repo: GitRepo, base: str, ran: _Ran, base_results: dict[str, BaseCheck], needs_added: set[str]) -> list[str]:
    """Why the head's green run is not evidence: a known runner ran fewer tests than on the base (or
    none), skipped or deselected more; a check read the project's files from the user's working tree."""
    flags: list[str] = []
    tree = repo.commit_info(base).tree
    for check, output, reads in zip(ran.checks, ran.outputs, ran.tree_reads, strict=True):
        command = _shown(check)
        runner = runner_of(command)
        if runner is not None and command not in needs_added:
            before = base_results.get(command)
            base_counts = read_counts(runner, before.output_tail) if before is not None else None
            flags += [f"{command}: {line}" for line in compare(base_counts, read_counts(runner, output), runner)]
        tracked = [path for path in map(source_of, reads) if repo.tree_entry(tree, path) is not None]
        if tracked:
            flags.append(
                f"{command}: reads {tracked[0]} from the user's working tree, not the checkout: unverifiable"
                " (run the code of the current directory, not an installed copy; docs/verification.md)"
            )
    return flags


def _shown(check: Check) -> str:
    return check.command if isinstance(check.command, str) else " ".join(check.command)


def _audit(
    auditor: Adapter,
    repo: GitRepo,
    repo_dir: Path,
    patch: Patch,
    spec: TaskSpec,
    ctx: RunContext,
    checkout: Path,
    run: Runner,
    store: BlobWriter,
    now: Callable[[], float],
    judges: tuple[str, ...],
    transitions: Mapping[str, Transition],
    sandbox: Decision | None = None,
) -> Judgement:
    """The auditor's judgement; its prompt carries, up front, the changes to what judges the patch and
    the checks' base-to-head table."""
    diff = repo.read_blob(patch.diff.oid)[:MAX_AUDIT_DIFF].decode(errors="replace")
    judged = ""
    if judges:
        judges_diff = binary_diff(repo_dir, patch.base, patch.head, paths=judges)[:MAX_AUDIT_DIFF].decode(errors="replace")
        judged += JUDGES_SECTION.format(files=", ".join(judges), judges_diff=judges_diff)
    if transitions:
        judged += CHECKS_SECTION.format(table="\n".join(f"- `{command}`: {how}" for command, how in transitions.items()))
    prompt = AUDIT_PROMPT.format(
        instruction=spec.prompt or spec.command, judged=judged, base=patch.base, head=patch.head, diff=diff
    )
    audit_spec = TaskSpec(id=ctx.task, seq=0, mode="analyze", prompt=prompt, timeout=spec.timeout)
    audit_ctx = RunContext(ctx.job, ctx.task, ctx.attempt, checkout, ctx.base_env, prompt=prompt)
    if sandbox is None:
        said = execute(auditor, audit_spec, audit_ctx, run, store, now)
    else:
        with Confined(repo.common_dir, sandbox, audit_ctx, checkout) as confined:
            said = execute(auditor, audit_spec, confined.ctx, run, store, now)
    if not said.ok:
        return Judgement(malformed=f"the auditor failed: {said.error}")
    return parse_auditor(said.text)
