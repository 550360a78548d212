"""The structured answer an analyze task asks an agent for, and how it is checked.

The agent is asked for one JSON object of findings and decisions (through
the CLI's schema flag where it has one, and always in the prompt). A valid
answer becomes `finding` and `decision` artifacts; anything else (prose, a
malformed object) becomes one low-confidence finding, flagged as such.
A browser task's findings also carry `evidence`: the network evidence (request
URL, status, body) each relies on, kept on the finding artifact.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Literal, TypedDict

import msgspec

from gitswarm.model.artifacts import Artifact, Decision, Finding
from gitswarm.model.verdict import last_json_object

TITLE_CHARS = 120
FALLBACK_CONFIDENCE = 0.3
Severity = Literal["info", "low", "medium", "high", "critical"]

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["findings", "decisions"],
    "properties": {
        "findings": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["title", "body", "confidence", "severity"],
                "properties": {
                    "title": {"type": "string"},
                    "body": {"type": "string"},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                    "severity": {"type": "string", "enum": ["info", "low", "medium", "high", "critical"]},
                },
            },
        },
        "decisions": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["title", "rationale"],
                "properties": {"title": {"type": "string"}, "rationale": {"type": "string"}},
            },
        },
    },
}
SCHEMA_TEXT = json.dumps(ANSWER_SCHEMA, sort_keys=True, separators=(",", ":"))

# A browser task's answer: every finding names the network evidence it relies on.
BROWSER_ANSWER_SCHEMA: dict[str, Any] = copy.deepcopy(ANSWER_SCHEMA)
_BROWSER_FINDING = BROWSER_ANSWER_SCHEMA["properties"]["findings"]["items"]
_BROWSER_FINDING["required"].append("evidence")
_BROWSER_FINDING["properties"]["evidence"] = {"type": "string"}
BROWSER_SCHEMA_TEXT = json.dumps(BROWSER_ANSWER_SCHEMA, sort_keys=True, separators=(",", ":"))
EVIDENCE_CHARS = 4000


def answer_schema(browser: bool = False) -> dict[str, Any]:
    return BROWSER_ANSWER_SCHEMA if browser else ANSWER_SCHEMA


def schema_text(browser: bool = False) -> str:
    return BROWSER_SCHEMA_TEXT if browser else SCHEMA_TEXT


class _FindingIn(msgspec.Struct, forbid_unknown_fields=True):
    title: str
    body: str = ""
    confidence: float = 0.5
    severity: Severity | None = None
    evidence: str | dict[str, Any] | list[Any] | None = None  # what it relies on (browser work: the network)

    def evidence_text(self) -> str:
        """The evidence as text: a string as given, anything structured as canonical JSON; cut at EVIDENCE_CHARS."""
        value = self.evidence
        if value is None:
            return ""
        text = value.strip() if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
        return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 3] + "..."


class _DecisionIn(msgspec.Struct, forbid_unknown_fields=True):
    title: str
    rationale: str = ""


class _Stamp(TypedDict):
    """The fields every artifact of one answer shares."""

    job: str
    task: str
    attempt: int
    created: float
    producer: str


class Answer(msgspec.Struct, forbid_unknown_fields=True):
    findings: list[_FindingIn] = []
    decisions: list[_DecisionIn] = []


def parse_answer(structured: Any, text: str) -> Answer | None:
    """The schema-checked answer, from the CLI's structured output or the last JSON object of the text."""
    for candidate in (structured, last_json_object(text)):
        if not isinstance(candidate, dict):
            continue
        try:
            answer = msgspec.convert(candidate, Answer)
        except msgspec.ValidationError:
            continue
        if all(f.title.strip() and 0.0 <= f.confidence <= 1.0 for f in answer.findings) and all(
            d.title.strip() for d in answer.decisions
        ):
            return answer
    return None


def answer_artifacts(
    answer: Answer | None, text: str, job: str, task: str, attempt: int, producer: str, now: float
) -> list[Artifact]:
    """Findings and decisions of a valid answer; else one low-confidence finding holding the prose."""
    base: _Stamp = {"job": job, "task": task, "attempt": attempt, "created": now, "producer": producer}
    if answer is None:
        if not text.strip():
            return []
        title = text.strip().splitlines()[0][:TITLE_CHARS]
        return [Finding(**base, title=title, body=text.strip(), confidence=FALLBACK_CONFIDENCE, low_confidence=True)]
    artifacts: list[Artifact] = [
        Finding(
            **base, title=f.title.strip()[:TITLE_CHARS], body=f.body, confidence=f.confidence, severity=f.severity,
            evidence=f.evidence_text() or msgspec.UNSET,
        )
        for f in answer.findings
    ]
    artifacts += [Decision(**base, title=d.title.strip()[:TITLE_CHARS], rationale=d.rationale) for d in answer.decisions]
    return artifacts
