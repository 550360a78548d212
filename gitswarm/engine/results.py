"""What commands and the pilot's tools return, where a result crosses a layer: one Struct each.

The CLI prints a result as JSON (`--json`) or renders it for a person; the
MCP server sends it as a tool's structuredContent and advertises its
outputSchema. Both come from the same Struct (msgspec.json.schema), so the
shape a script parses and the schema a pilot is given cannot drift apart.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec


class CheckView(msgspec.Struct, kw_only=True):
    """A check as a person needs it: the command, how it ended and, when it failed, the last lines
    it printed (stdout's, then stderr's)."""

    command: str | list[str]
    exit_code: int | None
    passed: bool
    timed_out: bool
    tail: list[str]


class Verified(msgspec.Struct, kw_only=True):
    """`verify`: gitswarm's checks run again on a clean checkout of the patch's head, and the verdict."""

    patch: str
    head: str
    accepted: bool
    verdict: str  # status/integrity/contract
    checks: list[CheckView]
    judges: list[str]  # the protected files the patch changes: a person must review them
    transitions: dict[str, str]  # check -> fail->pass, pass->pass, pass->fail or fail->fail
    flags: list[str]  # why its green run is not evidence
    proof: str | None  # fail-to-pass, regression, unproven


class Audited(msgspec.Struct, kw_only=True):
    """`audit REV`: the checks (and an auditor) run on a clean checkout of a commit, the verdict noted on it."""

    commit: str
    accepted: bool
    verdict: str  # status/integrity/contract
    reviewer: str
    checks: list[CheckView]


class Reviewed(msgspec.Struct, kw_only=True):
    """`review`: a person's verdict noted on a commit (for a finding or decision, on its job's base)."""

    commit: str
    reviewer: str
    accepted: bool
    note: str | None
    signed: bool  # this clone signs its verdicts (gpg.format ssh and a signing key)
    artifact: str | msgspec.UnsetType = msgspec.UNSET  # the finding or decision reviewed, when one was
    remembered: list[str] | msgspec.UnsetType = msgspec.UNSET  # memory records the acceptance promoted, when any


class MergeResult(msgspec.Struct, kw_only=True):
    """`merge`: the branch a verified patch moved, from which commit to which."""

    patch: str
    into: str
    old: str
    new: str
    fast_forward: bool


class TrainCar(msgspec.Struct, kw_only=True):
    """One patch of a merge train and what became of it."""

    task: str
    patch: str
    head: str
    status: Literal["landed", "conflicted", "broke_stack", "held_back", "unverified", "merged_before"]
    why: str | None = None  # for every status but landed: the files, the checks that failed, the upstream, the verdict


class TrainResult(msgspec.Struct, kw_only=True):
    """`merge JOB`: the job's verified patches stacked, checked and landed on a branch in one move (or none)."""

    job: str
    into: str
    old: str
    new: str  # old when nothing landed
    fast_forward: bool
    check_runs: int  # how many times the stacked checks ran (1 when they passed at once)
    patches: list[TrainCar]


class SteerRecorded(msgspec.Struct, kw_only=True):
    """`steer`: the guidance recorded, and the point it waits for."""

    job: str
    task: str | None  # None: job-wide, for the next task of the job to start
    op: str  # the `steered` operation's id
    delivered_at: str


class Changed(msgspec.Struct, kw_only=True):
    """`cancel` (and `retry`): the tasks the operation changed, each with its state now."""

    job: str
    task: str | None  # None: the whole job
    changed: dict[str, str]


def plain(result: Any) -> Any:
    """A result as plain data (dicts, lists, strings, numbers): what JSON and a renderer take."""
    return msgspec.to_builtins(result)


def output_schema(kind: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON Schema of a result Struct as one object schema, its nested Structs under `$defs`."""
    _, components = msgspec.json.schema_components([kind])
    schema = dict(components.pop(kind.__name__))
    if components:
        schema["$defs"] = components
    return schema
