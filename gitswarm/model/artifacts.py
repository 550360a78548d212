"""Artifacts: the typed, immutable results of work.

An artifact's id is the sha256 of its canonical encoding, so the same result
always has the same id and a stored artifact can never be altered in place.
Large outputs are not inlined: a BlobRef names a git blob kept reachable from
the job's tree.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, TypeVar, assert_never

import msgspec

from gitswarm.model.codec import FORMAT, digest
from gitswarm.model.errors import CorruptRecord
from gitswarm.model.routing import Routing

HEX40 = 40
HEX64 = 64


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _is_hex(value: str, lengths: tuple[int, ...]) -> bool:
    return len(value) in lengths and all(c in "0123456789abcdef" for c in value)


class BlobRef(msgspec.Struct, frozen=True, kw_only=True):
    """A git blob holding bytes too large or too binary to inline."""

    oid: str
    size: int
    truncated: int = 0  # bytes cut beyond the capture cap; 0 when whole

    def __post_init__(self) -> None:
        _require(_is_hex(self.oid, (HEX40, HEX64)), "blob oid must be a hex object id")
        _require(self.size >= 0 and self.truncated >= 0, "blob size must be >= 0")


class FileChange(msgspec.Struct, frozen=True, kw_only=True):
    path: str  # text; a name that is not plain UTF-8 in git's quoted form (model/paths.py)
    added: int
    deleted: int


class _Base(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    v: int = FORMAT
    job: str
    task: str | None = None
    attempt: int = 0
    created: float
    producer: str = "gitswarm"


class Finding(_Base, tag="finding", kw_only=True, frozen=True):
    title: str
    body: str = ""
    confidence: float = 1.0
    severity: str | None = None
    low_confidence: bool = False
    # What the finding relies on, as the agent gave it (browser work: request URL, status, body). Unset (and so
    # absent from the encoding, which keeps the ids of findings without it as they were) when none was given.
    evidence: str | msgspec.UnsetType = msgspec.UNSET

    def __post_init__(self) -> None:
        _require(bool(self.title.strip()), "finding.title must not be empty")
        _require(0.0 <= self.confidence <= 1.0, "finding.confidence must be within 0..1")


class Decision(_Base, tag="decision", kw_only=True, frozen=True):
    title: str
    rationale: str = ""

    def __post_init__(self) -> None:
        _require(bool(self.title.strip()), "decision.title must not be empty")


class Check(_Base, tag="check", kw_only=True, frozen=True):
    command: str | list[str]
    exit_code: int | None  # None: killed before it exited (timeout, cancel)
    duration: float
    stdout: BlobRef | None = None
    stderr: BlobRef | None = None
    timed_out: bool = False
    cwd: str | None = None

    def __post_init__(self) -> None:
        _require(bool(self.command), "check.command must not be empty")
        _require(self.duration >= 0, "check.duration must be >= 0")

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class Patch(_Base, tag="patch", kw_only=True, frozen=True):
    base: str
    head: str
    diff: BlobRef
    sha256: str
    files: tuple[FileChange, ...] = ()
    judges: tuple[str, ...] = ()  # the protected files it changes: what judges it (docs/verification.md)

    def __post_init__(self) -> None:
        _require(_is_hex(self.base, (HEX40, HEX64)), "patch.base must be a commit id")
        _require(_is_hex(self.head, (HEX40, HEX64)), "patch.head must be a commit id")
        _require(_is_hex(self.sha256, (HEX64,)), "patch.sha256 must be 64 hex digits")


VerdictStatus = Literal["complete", "incomplete", "blocked"]
Integrity = Literal["clean", "suspect", "violation"]
Contract = Literal["aligned", "unknown", "needs_revision", "invalid"]
#: A check on the base, then on the head: the evidence a change gives (docs/verification.md).
Transition = Literal["fail->pass", "pass->pass", "pass->fail", "fail->fail"]


class Verdict(_Base, tag="verdict", kw_only=True, frozen=True):
    head: str
    status: VerdictStatus
    integrity: Integrity
    contract: Contract
    accepted: bool
    reviewer: str
    evidence: dict[str, str] = {}
    checks: tuple[str, ...] = ()
    patch: str | None = None
    judges: tuple[str, ...] = ()  # protected files the patch changes; checks alone never accept it then
    transitions: dict[str, Transition] = {}  # check command -> how it went from the base to the head
    flags: tuple[str, ...] = ()  # why a green run is not evidence: fewer tests ran, the user's tree was read

    def __post_init__(self) -> None:
        _require(_is_hex(self.head, (HEX40, HEX64)), "verdict.head must be a commit id")
        _require(bool(self.reviewer), "verdict.reviewer must not be empty")


class Summary(_Base, tag="summary", kw_only=True, frozen=True):
    text: str
    data: dict[str, object] = {}


class SandboxUse(msgspec.Struct, kw_only=True, frozen=True):
    """The sandbox a run had (docs/sandbox.md): `bwrap`, or `none` and why not; its network, and what
    the endpoint proxy refused (`host:port`, at most MAX_REFUSED of them)."""

    kind: str  # "bwrap" or "none"
    network: str = "open"  # open, endpoint, none
    why: str | None = None  # kind "none": `[sandbox] mode = "off"`, no bwrap on PATH, ...
    refused: tuple[str, ...] = ()


MAX_REFUSED = 32


class Run(_Base, tag="run", kw_only=True, frozen=True):
    """One process run of an agent adapter: how it ended and what it cost."""

    adapter: str
    exit_code: int | None  # None: killed before it exited
    duration: float
    session_id: str | None = None
    model: str | None = None
    cost_usd: float | None = None
    cost_estimated: bool = False  # priced from its tokens with the local price table
    tier: str | None = None  # the model tier the run was routed to (`fast`, `strong`), when routing chose one
    routing: Routing | None = None  # why this model: the rule that decided and what it passed over (model/routing.py)
    input_tokens: int | None = None
    output_tokens: int | None = None
    error: str | None = None
    provider_error: str | None = None  # the run failed for a provider reason (quota, funds, model): what said so
    stdout: BlobRef | None = None
    stderr: BlobRef | None = None
    skills: tuple[str, ...] = ()  # the skills its prompt packet carried, `NAME@SHA256` of each SKILL.md ([skills])
    # The sandbox it ran in; unset (absent from the encoding) on runs recorded before there was one.
    sandbox: SandboxUse | msgspec.UnsetType = msgspec.UNSET

    def __post_init__(self) -> None:
        _require(bool(self.adapter), "run.adapter must not be empty")
        _require(self.duration >= 0, "run.duration must be >= 0")
        _require(self.cost_usd is None or self.cost_usd >= 0, "run.cost_usd must be >= 0")

    @property
    def tokens(self) -> int:
        return (self.input_tokens or 0) + (self.output_tokens or 0)


Artifact = Finding | Decision | Check | Patch | Verdict | Summary | Run
KINDS = ("finding", "decision", "check", "patch", "verdict", "summary", "run")
# One concrete kind of artifact, for the accessors that narrow the union to it.
ArtifactT = TypeVar("ArtifactT", Finding, Decision, Check, Patch, Verdict, Summary, Run)


def kind_of(artifact: Artifact | type[Artifact]) -> str:
    """The kind an artifact (or artifact class) is tagged with in its encoding: "patch", "check", ..."""
    return str(artifact.__struct_config__.tag)


def as_kind(artifact: Artifact, kind: type[ArtifactT], where: str = "artifact") -> ArtifactT:
    """`artifact` as the one kind its caller knows it to be (the index named its kind, say).

    The narrowing point for code that was told the kind rather than matching on it:
    a stored artifact of another kind is a corrupt record, not an AttributeError later.
    """
    if not isinstance(artifact, kind):
        raise CorruptRecord(f"{where}: a {kind_of(artifact)} artifact where a {kind_of(kind)} was expected")
    return artifact


def of_kind(artifacts: Iterable[Artifact], kind: type[ArtifactT]) -> list[ArtifactT]:
    """Those of `artifacts` that are of `kind`, in order, typed as that kind."""
    return [artifact for artifact in artifacts if isinstance(artifact, kind)]


def artifact_id(artifact: Artifact) -> str:
    """The content address of an artifact."""
    return digest(artifact)


def describe(artifact: Artifact) -> str:
    """A one-line human description of an artifact."""
    match artifact:
        case Finding(title=title) | Decision(title=title):
            return title
        case Check(command=command, exit_code=code):
            shown = command if isinstance(command, str) else " ".join(command)
            return f"{shown} -> exit {code}"
        case Patch(base=base, head=head, files=files):
            return f"{base[:10]}..{head[:10]} ({len(files)} files)"
        case Verdict(status=status, integrity=integrity, contract=contract, head=head):
            return f"{status}/{integrity}/{contract} on {head[:10]}"
        case Summary(text=text):
            return text.splitlines()[0] if text else "summary"
        case Run(adapter=adapter, exit_code=code, cost_usd=cost, error=error):
            spent = f", ${cost:.4f}" if cost is not None else ""
            return f"{adapter} -> exit {code}{spent}" + (f": {error}" if error else "")
        case _:
            assert_never(artifact)


def blob_refs(artifact: Artifact) -> list[BlobRef]:
    """Every blob an artifact points at; the store keeps each reachable from the job tree."""
    match artifact:
        case Check(stdout=out, stderr=err) | Run(stdout=out, stderr=err):
            return [ref for ref in (out, err) if ref is not None]
        case Patch(diff=diff):
            return [diff]
    return []
