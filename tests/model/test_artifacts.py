"""Artifacts: validation of every kind, content addressing, describe() and blob_refs()."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import msgspec
import pytest

from gitswarm.model import codec
from gitswarm.model.artifacts import (
    KINDS,
    Artifact,
    BlobRef,
    Check,
    Decision,
    FileChange,
    Finding,
    Patch,
    Summary,
    Verdict,
    artifact_id,
    blob_refs,
    describe,
)
from gitswarm.model.errors import CorruptRecord

SHA1 = "a" * 40
SHA1_B = "0123456789abcdef0123456789abcdef01234567"
SHA256 = "b" * 64
BASE: dict[str, Any] = {"job": "01m8va8phpsfsebf4x0dz68g1q", "task": "lint", "attempt": 1, "created": 1.5}


def valid(kind: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "finding": {"title": "unused import", "body": "os", "confidence": 0.5},
        "decision": {"title": "use sqlite", "rationale": "simple"},
        "check": {"command": ["pytest", "-q"], "exit_code": 0, "duration": 1.25},
        "patch": {"base": SHA1, "head": SHA1_B, "diff": {"oid": SHA1, "size": 10}, "sha256": SHA256},
        "verdict": {
            "head": SHA1,
            "status": "complete",
            "integrity": "clean",
            "contract": "aligned",
            "accepted": True,
            "reviewer": "alice",
        },
        "summary": {"text": "all good\nmore"},
        "run": {"adapter": "codex", "exit_code": 0, "duration": 3.5, "cost_usd": 0.012, "input_tokens": 100,
                "output_tokens": 20, "session_id": "s-1"},
    }[kind]
    return {"kind": kind, **BASE, **body}


@pytest.mark.parametrize("kind", KINDS)
def test_valid_artifact_of_each_kind_converts_and_round_trips(kind: str) -> None:
    artifact = msgspec.convert(valid(kind), Artifact)
    assert artifact.__struct_config__.tag == kind
    data = codec.encode(artifact)
    assert codec.decode(data, Artifact, "here") == artifact


BAD = [
    ("finding", {"title": ""}, "finding.title must not be empty"),
    ("finding", {"title": "   "}, "finding.title must not be empty"),
    ("finding", {"confidence": 1.5}, "finding.confidence must be within 0..1"),
    ("finding", {"confidence": -0.1}, "finding.confidence must be within 0..1"),
    ("decision", {"title": "\n"}, "decision.title must not be empty"),
    ("check", {"command": ""}, "check.command must not be empty"),
    ("check", {"command": []}, "check.command must not be empty"),
    ("check", {"duration": -1.0}, "check.duration must be >= 0"),
    ("check", {"stdout": {"oid": "xyz", "size": 1}}, "blob oid must be a hex object id"),
    ("patch", {"base": "zz"}, "patch.base must be a commit id"),
    ("patch", {"head": SHA1.upper()}, "patch.head must be a commit id"),
    ("patch", {"head": "a" * 39}, "patch.head must be a commit id"),
    ("patch", {"sha256": SHA1}, "patch.sha256 must be 64 hex digits"),
    ("patch", {"diff": {"oid": SHA1, "size": -1}}, "blob size must be >= 0"),
    ("patch", {"diff": {"oid": SHA1, "size": 1, "truncated": -2}}, "blob size must be >= 0"),
    ("verdict", {"head": "nope"}, "verdict.head must be a commit id"),
    ("verdict", {"reviewer": ""}, "verdict.reviewer must not be empty"),
    ("verdict", {"status": "done"}, "Invalid enum value 'done'"),
    ("verdict", {"integrity": "fine"}, "Invalid enum value 'fine'"),
    ("verdict", {"contract": "yes"}, "Invalid enum value 'yes'"),
]


@pytest.mark.parametrize(("kind", "change", "message"), BAD)
def test_invalid_fields_raise_validation_error(kind: str, change: dict[str, Any], message: str) -> None:
    data = {**valid(kind), **change}
    with pytest.raises(msgspec.ValidationError, match=re.escape(message)):
        msgspec.convert(data, Artifact)


@pytest.mark.parametrize(("kind", "change", "message"), BAD)
def test_invalid_fields_in_a_stored_record_are_corrupt(kind: str, change: dict[str, Any], message: str) -> None:
    data = msgspec.json.encode({**valid(kind), **change})
    with pytest.raises(CorruptRecord) as info:
        codec.decode(data, Artifact, "refs/swarm/jobs/j:artifacts/ab/x")
    assert str(info.value).startswith("refs/swarm/jobs/j:artifacts/ab/x: corrupt record (")
    assert message in str(info.value)


def test_direct_construction_validates_too() -> None:
    with pytest.raises(ValueError, match=r"finding\.title must not be empty"):
        Finding(job="j", created=0.0, title="")
    with pytest.raises(ValueError, match=r"patch\.sha256"):
        Patch(job="j", created=0.0, base=SHA1, head=SHA1, diff=BlobRef(oid=SHA1, size=1), sha256="bad")
    with pytest.raises(ValueError, match="blob oid"):
        BlobRef(oid="g" * 40, size=1)


def test_blob_ref_accepts_sha1_and_sha256_oids() -> None:
    assert BlobRef(oid=SHA1, size=0).size == 0
    assert BlobRef(oid=SHA256, size=5, truncated=3).truncated == 3


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({**valid("finding"), "kind": "rumour"}, Artifact)
    with pytest.raises(CorruptRecord):
        codec.decode(msgspec.json.encode({**valid("finding"), "kind": "rumour"}), Artifact, "here")


def test_missing_required_field_is_refused() -> None:
    data = valid("check")
    del data["exit_code"]
    with pytest.raises(msgspec.ValidationError, match="exit_code"):
        msgspec.convert(data, Artifact)


# -- content addressing ---------------------------------------------------------------


def test_artifact_id_is_sha256_of_canonical_encoding() -> None:
    finding = Finding(job="j", created=1.0, title="t")
    assert codec.encode(finding) == (
        b'{"kind":"finding","v":1,"job":"j","task":null,"attempt":0,"created":1.0,"producer":"gitswarm",'
        b'"title":"t","body":"","confidence":1.0,"severity":null,"low_confidence":false}'
    )
    assert artifact_id(finding) == hashlib.sha256(codec.encode(finding)).hexdigest()
    # Pinned: an artifact's id must never change across versions of gitswarm, or stored ids break.
    assert artifact_id(finding) == "a1aa9dc6d57e8dbb2b7247818244fb259ed01cb9ae710076384f679fffcd1ac8"


@pytest.mark.parametrize("kind", KINDS)
def test_artifact_id_is_stable(kind: str) -> None:
    one = msgspec.convert(valid(kind), Artifact)
    two = msgspec.convert(valid(kind), Artifact)
    decoded = codec.decode(codec.encode(one), Artifact, "here")
    assert artifact_id(one) == artifact_id(two) == artifact_id(decoded)
    assert len(artifact_id(one)) == 64
    assert all(c in "0123456789abcdef" for c in artifact_id(one))


def test_artifact_id_changes_with_any_field() -> None:
    base = Finding(job="j", created=1.0, title="t")
    variants = [
        Finding(job="k", created=1.0, title="t"),
        Finding(job="j", created=1.5, title="t"),
        Finding(job="j", created=1.0, title="u"),
        Finding(job="j", created=1.0, title="t", attempt=2),
        Finding(job="j", created=1.0, title="t", confidence=0.9),
        Decision(job="j", created=1.0, title="t"),
    ]
    ids = {artifact_id(base)} | {artifact_id(v) for v in variants}
    assert len(ids) == len(variants) + 1


def test_artifact_id_ignores_dict_insertion_order() -> None:
    one = Summary(job="j", created=1.0, text="s", data={"a": 1, "b": [1, 2]})
    two = Summary(job="j", created=1.0, text="s", data={"b": [1, 2], "a": 1})
    assert artifact_id(one) == artifact_id(two)


# -- describe -------------------------------------------------------------------------


def test_describe_finding_and_decision() -> None:
    assert describe(Finding(job="j", created=0.0, title="unused import")) == "unused import"
    assert describe(Decision(job="j", created=0.0, title="use sqlite")) == "use sqlite"


def test_describe_check() -> None:
    assert describe(Check(job="j", created=0.0, command="pytest -q", exit_code=1, duration=0.1)) == "pytest -q -> exit 1"
    assert describe(Check(job="j", created=0.0, command=["ruff", "check", "."], exit_code=0, duration=0.1)) == (
        "ruff check . -> exit 0"
    )
    killed = Check(job="j", created=0.0, command="sleep 99", exit_code=None, duration=5.0, timed_out=True)
    assert describe(killed) == "sleep 99 -> exit None"


def test_describe_patch() -> None:
    patch = Patch(
        job="j",
        created=0.0,
        base=SHA1_B,
        head=SHA1,
        diff=BlobRef(oid=SHA1, size=3),
        sha256=SHA256,
        files=(FileChange(path="a.py", added=1, deleted=0), FileChange(path="b.py", added=0, deleted=2)),
    )
    assert describe(patch) == "0123456789..aaaaaaaaaa (2 files)"


def test_describe_verdict() -> None:
    verdict = Verdict(
        job="j",
        created=0.0,
        head=SHA1_B,
        status="incomplete",
        integrity="suspect",
        contract="needs_revision",
        accepted=False,
        reviewer="bob",
    )
    assert describe(verdict) == "incomplete/suspect/needs_revision on 0123456789"


def test_describe_summary() -> None:
    assert describe(Summary(job="j", created=0.0, text="first line\nsecond")) == "first line"
    assert describe(Summary(job="j", created=0.0, text="")) == "summary"


# -- blob_refs ------------------------------------------------------------------------


def test_blob_refs() -> None:
    out = BlobRef(oid=SHA1, size=100)
    err = BlobRef(oid=SHA1_B, size=5, truncated=1)
    both = Check(job="j", created=0.0, command="x", exit_code=0, duration=0.0, stdout=out, stderr=err)
    only_err = Check(job="j", created=0.0, command="x", exit_code=0, duration=0.0, stderr=err)
    neither = Check(job="j", created=0.0, command="x", exit_code=0, duration=0.0)
    patch = Patch(job="j", created=0.0, base=SHA1, head=SHA1, diff=out, sha256=SHA256)
    assert blob_refs(both) == [out, err]
    assert blob_refs(only_err) == [err]
    assert blob_refs(neither) == []
    assert blob_refs(patch) == [out]
    for kind in ("finding", "decision", "verdict", "summary"):
        assert blob_refs(msgspec.convert(valid(kind), Artifact)) == []


def test_check_passed() -> None:
    assert Check(job="j", created=0.0, command="x", exit_code=0, duration=0.0).passed
    assert not Check(job="j", created=0.0, command="x", exit_code=1, duration=0.0).passed
    assert not Check(job="j", created=0.0, command="x", exit_code=0, duration=0.0, timed_out=True).passed
    assert not Check(job="j", created=0.0, command="x", exit_code=None, duration=0.0).passed
