"""Verdicts: from checks, from an auditor's JSON answer (failing closed), and their combination."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitswarm.model.verdict import CONTRACTS, INTEGRITIES, STATUSES, Judgement, combine, from_checks, parse_auditor

EVIDENCE = {"status": "all 12 tests pass", "integrity": "only src/ was touched", "contract": "the API is unchanged"}
GOOD = {"status": "complete", "integrity": "clean", "contract": "aligned", "evidence": EVIDENCE}
FAIL_CLOSED = ("incomplete", "suspect", "unknown")


def claims(j: Judgement) -> tuple[str, str, str]:
    return j.status, j.integrity, j.contract


def assert_fails_closed(j: Judgement) -> None:
    assert claims(j) == FAIL_CLOSED
    assert j.malformed
    assert not j.accepted
    assert j.evidence == {}


# -- parse_auditor: well-formed answers ------------------------------------------------------


def test_a_well_formed_answer_is_accepted() -> None:
    j = parse_auditor(json.dumps(GOOD))
    assert j.malformed is None, j.malformed
    assert claims(j) == ("complete", "clean", "aligned") and j.accepted
    assert j.evidence == EVIDENCE


def test_prose_before_the_answer_is_allowed() -> None:
    text = "I read the diff and ran the tests.\nHere is my verdict:\n\n" + json.dumps(GOOD, indent=2) + "\n"
    j = parse_auditor(text)
    assert j.malformed is None, j.malformed
    assert j.accepted and j.evidence == EVIDENCE


def test_a_rejecting_answer_keeps_its_claims_and_evidence() -> None:
    answer = {
        "status": "incomplete",
        "integrity": "violation",
        "contract": "needs_revision",
        "evidence": {"status": "half done", "integrity": "tests were deleted", "contract": "signature changed"},
    }
    j = parse_auditor("```json\n" + json.dumps(answer) + "\n```")
    assert j.malformed is None, j.malformed
    assert claims(j) == ("incomplete", "violation", "needs_revision") and not j.accepted
    assert j.evidence["integrity"] == "tests were deleted"


# -- parse_auditor: failing closed -----------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Looks good to me, ship it.",
        "status: complete, integrity: clean, contract: aligned",
        '{"status": "complete", "integrity": "clean"',  # cut off
        "[1, 2, 3]",
        '"complete"',
    ],
    ids=["empty", "prose", "yaml-ish", "truncated", "array", "string"],
)
def test_no_json_object_fails_closed(text: str) -> None:
    j = parse_auditor(text)
    assert_fails_closed(j)
    assert "no JSON" in j.malformed


@pytest.mark.parametrize(
    "claim, value",
    [
        ("status", "done"),
        ("status", "COMPLETE"),
        ("integrity", "fine"),
        ("contract", "ok"),
        ("contract", None),
        ("status", 1),
        ("integrity", ["clean"]),
    ],
)
def test_a_value_outside_its_enum_fails_closed(claim: str, value: object) -> None:
    assert_fails_closed(parse_auditor(json.dumps({**GOOD, claim: value})))


@pytest.mark.parametrize("claim", ["status", "integrity", "contract"])
def test_a_missing_claim_fails_closed(claim: str) -> None:
    answer = {k: v for k, v in GOOD.items() if k != claim}
    assert_fails_closed(parse_auditor(json.dumps(answer)))


EVIDENCE_CASES = {
    "no evidence key": {k: v for k, v in GOOD.items() if k != "evidence"},
    "evidence not an object": {**GOOD, "evidence": "trust me"},
    "evidence a list": {**GOOD, "evidence": ["tests pass", "clean", "aligned"]},
    "empty evidence object": {**GOOD, "evidence": {}},
    "evidence missing for contract": {**GOOD, "evidence": {"status": "tests pass", "integrity": "clean diff"}},
    "empty string": {**GOOD, "evidence": {**EVIDENCE, "integrity": ""}},
    "blank string": {**GOOD, "evidence": {**EVIDENCE, "status": "   \n"}},
    "not a string": {**GOOD, "evidence": {**EVIDENCE, "contract": True}},
    "null": {**GOOD, "evidence": {**EVIDENCE, "status": None}},
}


@pytest.mark.parametrize("answer", EVIDENCE_CASES.values(), ids=EVIDENCE_CASES.keys())
def test_a_claim_without_evidence_fails_closed(answer: dict) -> None:
    assert_fails_closed(parse_auditor(json.dumps(answer)))


def test_the_reason_names_what_was_wrong() -> None:
    """The malformed reason is what the verdict's evidence shows the user: it must name the real fault."""
    bad_enum = parse_auditor(json.dumps({**GOOD, "contract": "ok"}))
    assert bad_enum.malformed is not None and bad_enum.malformed.startswith("contract: 'ok'"), bad_enum.malformed
    no_evidence = parse_auditor(json.dumps(EVIDENCE_CASES["evidence missing for contract"]))
    assert no_evidence.malformed is not None and "evidence" in no_evidence.malformed, no_evidence.malformed


def test_a_rejecting_claim_without_evidence_still_fails_closed_not_open() -> None:
    """Even a harsher claim is replaced by the fail-closed triple: a bare claim carries no weight."""
    j = parse_auditor(json.dumps({"status": "blocked", "integrity": "violation", "contract": "invalid"}))
    assert_fails_closed(j)


@given(st.text(max_size=200))
def test_arbitrary_text_never_yields_acceptance_without_full_evidence(text: str) -> None:
    j = parse_auditor(text)
    if j.accepted:
        assert j.malformed is None
        assert set(j.evidence) == {"status", "integrity", "contract"}
        assert all(v.strip() for v in j.evidence.values())
    else:
        assert j.malformed is not None or claims(j) != ("complete", "clean", "aligned")


# -- from_checks -----------------------------------------------------------------------------


def test_from_checks_with_no_checks_is_never_an_acceptance() -> None:
    """Nothing checked is nothing accepted: an acceptance of nothing would let any gate pass anything."""
    j = from_checks({})
    assert not j.accepted and j.malformed is None
    assert j.evidence == {"checks": "no checks ran"}


def test_from_checks_all_passing_is_accepted() -> None:
    j = from_checks({"pytest -q": True, "ruff check": True})
    assert claims(j) == ("complete", "clean", "aligned") and j.accepted
    assert j.evidence == {"pytest -q": "passed", "ruff check": "passed"}


def test_from_checks_one_failing_needs_revision() -> None:
    j = from_checks({"pytest -q": True, "ruff check": False})
    assert claims(j) == ("incomplete", "clean", "needs_revision") and not j.accepted
    assert j.evidence == {"pytest -q": "passed", "ruff check": "failed"}
    assert j.malformed is None


# -- combine ---------------------------------------------------------------------------------

CONTRACT_ORDER = ("aligned", "unknown", "needs_revision", "invalid")


def judgements() -> st.SearchStrategy[Judgement]:
    return st.builds(
        Judgement,
        st.sampled_from(STATUSES),
        st.sampled_from(INTEGRITIES),
        st.sampled_from(CONTRACTS),
        st.dictionaries(st.sampled_from(["status", "integrity", "contract", "x"]), st.text(min_size=1, max_size=5), max_size=3),
        st.none() | st.just("bad answer"),
    )


def test_combine_takes_the_worse_of_each_claim() -> None:
    checks = Judgement("complete", "clean", "aligned", {"pytest": "passed"})
    auditor = Judgement("blocked", "suspect", "needs_revision", {"status": "s", "integrity": "i", "contract": "c"})
    both = combine(checks, auditor)
    assert claims(both) == ("blocked", "suspect", "needs_revision") and not both.accepted
    assert both.evidence == {"pytest": "passed", "auditor.status": "s", "auditor.integrity": "i", "auditor.contract": "c"}
    reverse = combine(Judgement("incomplete", "violation", "aligned"), Judgement("complete", "clean", "invalid"))
    assert claims(reverse) == ("incomplete", "violation", "invalid")


def test_combine_accepts_only_when_both_accept() -> None:
    ok = Judgement("complete", "clean", "aligned")
    assert combine(ok, ok).accepted
    assert not combine(ok, from_checks({"t": False})).accepted
    assert not combine(from_checks({"t": False}), ok).accepted


def test_combine_with_a_malformed_auditor_fails_closed() -> None:
    both = combine(from_checks({"pytest": True}), parse_auditor("no json here"))
    assert not both.accepted and both.malformed
    assert claims(both) == FAIL_CLOSED


@given(judgements(), judgements())
def test_combine_is_the_claimwise_maximum(a: Judgement, b: Judgement) -> None:
    c = combine(a, b)
    assert STATUSES.index(c.status) == max(STATUSES.index(a.status), STATUSES.index(b.status))
    assert INTEGRITIES.index(c.integrity) == max(INTEGRITIES.index(a.integrity), INTEGRITIES.index(b.integrity))
    assert CONTRACT_ORDER.index(c.contract) == max(CONTRACT_ORDER.index(a.contract), CONTRACT_ORDER.index(b.contract))
    assert claims(combine(b, a)) == claims(c)
    assert c.malformed == b.malformed
    if c.accepted:
        assert a.accepted and b.accepted
