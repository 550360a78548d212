"""Verdicts: from checks alone, or from an auditor's answer, failing closed.

An auditor must answer with one JSON object:

    {"status": "complete|incomplete|blocked",
     "integrity": "clean|suspect|violation",
     "contract": "aligned|unknown|needs_revision|invalid",
     "evidence": {"status": "...", "integrity": "...", "contract": "..."}}

Anything else, including a claim without evidence, counts as
incomplete/suspect/unknown.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

import msgspec

from gitswarm.model.artifacts import Contract, Integrity, VerdictStatus

STATUSES: tuple[VerdictStatus, ...] = ("complete", "incomplete", "blocked")
INTEGRITIES: tuple[Integrity, ...] = ("clean", "suspect", "violation")
CONTRACTS: tuple[Contract, ...] = ("aligned", "unknown", "needs_revision", "invalid")
CLAIMS = ("status", "integrity", "contract")
Claim = TypeVar("Claim", VerdictStatus, Integrity, Contract)


class Judgement(msgspec.Struct, frozen=True):
    status: VerdictStatus = "incomplete"
    integrity: Integrity = "suspect"
    contract: Contract = "unknown"
    evidence: dict[str, str] = msgspec.field(default_factory=dict)
    malformed: str | None = None

    @property
    def accepted(self) -> bool:
        return (self.status, self.integrity, self.contract) == ("complete", "clean", "aligned")


def from_checks(results: dict[str, bool]) -> Judgement:
    """The verdict of the checks alone: command -> passed."""
    if not results:  # nothing was checked: never an acceptance
        return Judgement("complete", "clean", "unknown", {"checks": "no checks ran"})
    failed = [command for command, passed in results.items() if not passed]
    evidence = {command: "passed" if passed else "failed" for command, passed in results.items()}
    if failed:
        return Judgement("incomplete", "clean", "needs_revision", evidence)
    return Judgement("complete", "clean", "aligned", evidence)


def last_json_object(text: str) -> dict[str, Any] | None:
    """The last top-level JSON object in `text` (objects nested in it do not count)."""
    decoder = json.JSONDecoder()
    found, start = None, text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            found = value
        start = text.find("{", end)
    return found


def parse_auditor(text: str) -> Judgement:
    """An auditor's answer as a Judgement; malformed answers fail closed."""
    answer = last_json_object(text)
    if answer is None:
        return Judgement(malformed="no JSON verdict in the auditor's answer")
    try:  # in the order of CLAIMS: the first bad one is named
        status = _claim(answer, "status", STATUSES)
        integrity = _claim(answer, "integrity", INTEGRITIES)
        contract = _claim(answer, "contract", CONTRACTS)
    except _Malformed as exc:
        return Judgement(malformed=str(exc))
    evidence = answer.get("evidence")
    if not isinstance(evidence, dict) or not all(isinstance(evidence.get(c), str) and evidence[c].strip() for c in CLAIMS):
        return Judgement(malformed="evidence must back each of status, integrity and contract")
    return Judgement(status, integrity, contract, {c: evidence[c] for c in CLAIMS})


class _Malformed(ValueError):
    pass


def _claim(answer: dict[str, Any], claim: str, allowed: tuple[Claim, ...]) -> Claim:
    """The answer's value of `claim`, as the one of `allowed` it equals; _Malformed if none."""
    value = answer.get(claim)
    for choice in allowed:
        if choice == value:
            return choice
    raise _Malformed(f"{claim}: {value!r} is not one of {', '.join(allowed)}")


def combine(checks: Judgement, auditor: Judgement) -> Judgement:
    """Both must accept; the worse of each claim wins."""
    def worse(order: tuple[Claim, ...], a: Claim, b: Claim) -> Claim:
        return a if order.index(a) > order.index(b) else b

    contract_order: tuple[Contract, ...] = ("aligned", "unknown", "needs_revision", "invalid")
    return Judgement(
        worse(STATUSES, checks.status, auditor.status),
        worse(INTEGRITIES, checks.integrity, auditor.integrity),
        worse(contract_order, checks.contract, auditor.contract),
        {**checks.evidence, **{f"auditor.{k}": v for k, v in auditor.evidence.items()}},
        auditor.malformed,
    )
