"""Evidence of a change, not only a green run: what the checks did on the base and on the head.

A check that fails on the base and passes on the head is evidence of the
fix; one that passes on both says nothing about the change; one that passes
on the base and fails on the head is a regression. A verdict of gitswarm's
checks accepts a patch only when its checks pass on the head, nothing says
the run is not evidence (`flags`), what the task requires is shown
(`require = "fail-to-pass"`), and the patch leaves what judges it alone.
A patch that changes what judges it is *held*: everything else may be
fine, but only a person's counted review (or an auditor that names the
change) accepts it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gitswarm.model.artifacts import Transition, Verdict
from gitswarm.model.verdict import Judgement

FAIL_TO_PASS = "fail-to-pass"
UNPROVEN = "unproven"
REGRESSION = "regression"
JUDGES = "changes what judges it"
UNVERIFIED = "no checks: unverified (give --check, or [audit] checks in .gitswarm.toml); delegate exits 1"


def transition(base_passed: bool, head_passed: bool) -> Transition:
    return f"{'pass' if base_passed else 'fail'}->{'pass' if head_passed else 'fail'}"  # type: ignore[return-value]


def proof(transitions: Mapping[str, Transition]) -> str | None:
    """What the transitions prove about the change: a fix, a regression, nothing (unproven); None without checks."""
    values = set(transitions.values())
    if not values:
        return None
    if "pass->fail" in values:
        return REGRESSION
    if "fail->pass" in values:
        return FAIL_TO_PASS
    return UNPROVEN if values == {"pass->pass"} else None


def judges_line(files: Sequence[str]) -> str:
    return f"{JUDGES}: {', '.join(files)}"


def weigh(
    judged: Judgement,
    *,
    transitions: Mapping[str, Transition],
    flags: Sequence[str],
    require: str | None,
    judges: Sequence[str],
    reviewed: bool = False,
) -> Judgement:
    """The checks' (and auditor's) judgement, with what the evidence says on top of it.

    `reviewed`: an auditor accepted the patch and named every changed judge in its evidence.
    """
    evidence = dict(judged.evidence)
    shown = proof(transitions)
    if shown is not None:
        evidence["proof"] = shown
    if flags:
        evidence["flags"] = "; ".join(flags)
        judged = Judgement("incomplete", "suspect", "needs_revision", evidence, judged.malformed)
    elif require == FAIL_TO_PASS and judged.accepted and shown != FAIL_TO_PASS:
        evidence["require"] = "fail-to-pass: no check failed on the base and passed on the head"
        judged = Judgement("incomplete", judged.integrity, "unknown", evidence, judged.malformed)
    if judges:
        evidence["judges"] = judges_line(judges)
        if not reviewed:
            return Judgement(judged.status, "suspect", judged.contract, evidence, judged.malformed)
    return Judgement(judged.status, judged.integrity, judged.contract, evidence, judged.malformed)


def held_for_review(verdict: Verdict) -> bool:
    """gitswarm's verdict on a patch that would be accepted but for changing what judges it."""
    return (
        verdict.producer == "gitswarm"
        and bool(verdict.judges)
        and not verdict.accepted
        and not verdict.flags
        and (verdict.status, verdict.contract) == ("complete", "aligned")
    )


def names_every(text: str, files: Sequence[str]) -> bool:
    """An auditor's evidence names each changed judge (by its path)."""
    return all(path in text for path in files)


def why_rejected(verdict: Verdict) -> str:
    """A rejection in one line: the changed judges, the flags, the failed checks, the unmet requirement, or the claims."""
    parts = [judges_line(verdict.judges)] if verdict.judges else []
    failed = [command for command, said in verdict.evidence.items() if said == "failed"]
    if verdict.flags:
        parts.append("; ".join(verdict.flags))
    elif failed:
        parts.append("checks failed: " + ", ".join(failed))
    elif "require" in verdict.evidence:
        parts.append(verdict.evidence["require"])
    return "; ".join(parts) or f"{verdict.status}/{verdict.integrity}/{verdict.contract}"
