"""The canonical encoder and the version-checking decoder."""

from __future__ import annotations

import hashlib

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitswarm.model import codec
from gitswarm.model.errors import BadInput, CorruptRecord, NewerFormat
from gitswarm.model.ops import (
    ArtifactsRecorded,
    Cancelled,
    Holder,
    JobCreated,
    LeaseExpired,
    Op,
    Retried,
    TaskClaimed,
    TaskFinished,
    subject,
    title,
)
from gitswarm.model.records import Defaults, Job, JobState, Task, TaskSpec, TaskState

# -- strategies -----------------------------------------------------------------------

ids = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True)
texts = st.text(max_size=30)
floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
small = st.integers(min_value=0, max_value=1000)
str_tuples = st.lists(ids, max_size=4).map(tuple)

task_specs = st.builds(
    TaskSpec,
    id=ids,
    seq=small,
    mode=st.sampled_from(["analyze", "implement"]),
    adapter=st.sampled_from(["shell", "agent"]),
    command=st.none() | texts | st.lists(texts, max_size=3),
    prompt=st.none() | texts,
    depends_on=str_tuples,
    dependents=str_tuples,
    checks=st.lists(texts, max_size=3).map(tuple),
    priority=ints,
    timeout=floats,
    max_attempts=small,
    cwd=st.none() | texts,
    env=st.dictionaries(texts, texts, max_size=4),
)

tasks = st.builds(
    Task,
    spec=task_specs,
    state=st.sampled_from(list(TaskState)),
    attempts=small,
    claims=small,
    owner=st.none() | texts,
    lease_expires=st.none() | floats,
    error=st.none() | texts,
    skipped_because=st.none() | ids,
    artifacts=str_tuples,
    updated=floats,
)

defaults = st.builds(Defaults, adapter=ids, timeout=floats, max_attempts=small, priority=ints)

jobs = st.builds(
    Job,
    id=ids,
    goal=texts,
    created=floats,
    actor=ids,
    defaults=defaults,
    task_count=small,
    source=st.none() | texts,
)

job_states = st.builds(
    JobState,
    clock=small,
    ops=small,
    cancelled=st.booleans(),
    counts=st.dictionaries(st.sampled_from([s.value for s in TaskState]), small),
    artifacts=str_tuples,
    updated=floats,
)


holders = st.builds(Holder, host=texts, boot=texts, pid=small, start=small)


def _op(kind: type, **fields: st.SearchStrategy) -> st.SearchStrategy:
    return st.builds(kind, id=ids, clock=small, at=floats, actor=ids, **fields)


ops = st.one_of(
    _op(JobCreated, job=jobs, tasks=st.lists(task_specs, max_size=3).map(tuple)),
    _op(TaskClaimed, task=ids, token=small, owner=texts, lease_expires=floats, holder=st.none() | holders),
    _op(
        TaskFinished,
        task=ids,
        token=small,
        ok=st.booleans(),
        error=st.none() | texts,
        artifacts=str_tuples,
        retryable=st.booleans(),
    ),
    _op(LeaseExpired, task=ids, token=small, why=st.none() | texts, attempt_used=st.booleans()),
    _op(Cancelled, task=st.none() | ids, reason=st.none() | texts),
    _op(Retried, task=ids),
    _op(ArtifactsRecorded, task=st.none() | ids, artifacts=str_tuples),
)


def sample_task(**env: str) -> Task:
    spec = TaskSpec(id="lint", seq=0, command=["ruff", "check"], depends_on=("a",), env=dict(env))
    return Task(spec=spec, state=TaskState.QUEUED, updated=12.5)


# -- encode ---------------------------------------------------------------------------


def test_encode_is_deterministic() -> None:
    assert codec.encode(sample_task()) == codec.encode(sample_task())
    task = sample_task(A="1")
    assert codec.encode(task) == codec.encode(task)


def test_encode_sorts_dict_keys_so_insertion_order_is_irrelevant() -> None:
    forward = sample_task(A="1", B="2", C="3")
    backward = sample_task(C="3", B="2", A="1")
    assert list(forward.spec.env) != list(backward.spec.env)
    assert codec.encode(forward) == codec.encode(backward)
    assert codec.digest(forward) == codec.digest(backward)
    assert codec.encode({"b": 1, "a": {"d": 1, "c": 2}}) == b'{"a":{"c":2,"d":1},"b":1}'


def test_encode_is_compact_json_in_field_declaration_order() -> None:
    data = codec.encode(JobState(clock=2, ops=3, counts={"queued": 1, "blocked": 2}, updated=1.5))
    assert data == (
        b'{"v":1,"clock":2,"ops":3,"cancelled":false,"counts":{"blocked":2,"queued":1},"artifacts":[],"updated":1.5,'
        b'"claims":0,"spent_usd":0.0,"tokens":0,"stopped":null,"steering":[],"approvals":[]}'
    )


def test_digest_is_sha256_of_encoding() -> None:
    task = sample_task(X="y")
    assert codec.digest(task) == hashlib.sha256(codec.encode(task)).hexdigest()


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(texts, st.integers(), max_size=8), st.randoms(use_true_random=False))
def test_encode_ignores_dict_key_order(mapping: dict[str, int], rnd) -> None:
    items = list(mapping.items())
    rnd.shuffle(items)
    assert codec.encode(dict(items)) == codec.encode(mapping)


# -- decode ---------------------------------------------------------------------------


def test_decode_current_format() -> None:
    task = sample_task(A="1")
    assert codec.decode(codec.encode(task), Task, "here") == task


def test_decode_record_without_version_is_read_as_old_format() -> None:
    data = b'{"clock":1,"ops":1,"cancelled":false,"counts":{},"artifacts":[],"updated":0.0}'
    assert codec.decode(data, JobState, "here") == JobState(clock=1, ops=1)


@pytest.mark.parametrize("version", [2, 99, 2**40])
def test_decode_refuses_newer_format(version: int) -> None:
    data = codec.encode(sample_task()).replace(b'"v":1', b'"v":%d' % version)
    with pytest.raises(NewerFormat) as info:
        codec.decode(data, Task, "refs/swarm/jobs/x:tasks/ab/lint")
    message = str(info.value)
    assert message.startswith("refs/swarm/jobs/x:tasks/ab/lint: ")
    assert f"v{version}" in message
    assert "newer" in message
    assert isinstance(info.value, BadInput)


def test_decode_checks_version_before_shape() -> None:
    # A newer record may have any shape; it must be refused as newer, not as corrupt.
    with pytest.raises(NewerFormat):
        codec.decode(b'{"v":2}', Task, "here")
    with pytest.raises(NewerFormat):
        codec.decode(b'{"v":2,"op":"teleported","x":[1]}', Op, "here")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"garbage",
        b"\x00\xff\xfe",
        b"[1, 2]",
        b"null",
        b'{"v":"1"}',
        b'{"v":1.0}',
        b'{"v":1}',  # a Task needs spec and state
        b'{"v":1,"spec":{"id":"a","seq":0},"state":"exploded"}',
        b'{"v":1,"spec":{"id":"a","seq":0},"state":"queued"',
    ],
)
def test_decode_refuses_corrupt_bytes(data: bytes) -> None:
    with pytest.raises(CorruptRecord) as info:
        codec.decode(data, Task, "refs/swarm/jobs/x:state")
    assert str(info.value).startswith("refs/swarm/jobs/x:state: corrupt record (")
    assert isinstance(info.value, BadInput)


def test_decode_refuses_truncated_record() -> None:
    data = codec.encode(sample_task())
    with pytest.raises(CorruptRecord):
        codec.decode(data[:-5], Task, "here")


def test_decode_unknown_op_tag_is_corrupt() -> None:
    with pytest.raises(CorruptRecord):
        codec.decode(b'{"op":"teleported","v":1,"id":"x","clock":1,"at":0,"actor":"a"}', Op, "here")


# -- round trips ----------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(tasks)
def test_task_round_trip(task: Task) -> None:
    data = codec.encode(task)
    back = codec.decode(data, Task, "here")
    assert back == task
    assert codec.encode(back) == data


@settings(max_examples=25, deadline=None)
@given(jobs, job_states)
def test_job_and_state_round_trip(job: Job, state: JobState) -> None:
    assert codec.decode(codec.encode(job), Job, "here") == job
    assert codec.decode(codec.encode(state), JobState, "here") == state


@settings(max_examples=60, deadline=None)
@given(ops)
def test_op_round_trip_through_the_union(op: Op) -> None:
    data = codec.encode(op)
    back = codec.decode(data, Op, "here")
    assert type(back) is type(op)
    assert back == op
    assert codec.encode(back) == data
    assert title(back) == title(op)
    assert subject(back) == subject(op)


def test_op_encoding_carries_its_tag_first() -> None:
    op = Retried(id="x", clock=3, at=1.0, actor="me", task="lint")
    assert codec.encode(op) == b'{"op":"retried","v":1,"id":"x","clock":3,"at":1.0,"actor":"me","task":"lint"}'
    assert title(op) == "retried lint"
    assert title(Cancelled(id="x", clock=1, at=1.0, actor="me")) == "cancelled *"


def test_to_builtins_keeps_field_order() -> None:
    built = codec.to_builtins(Retried(id="x", clock=3, at=1.0, actor="me", task="lint"))
    assert list(built) == ["op", "v", "id", "clock", "at", "actor", "task"]
    assert msgspec.json.encode(built) == codec.encode(Retried(id="x", clock=3, at=1.0, actor="me", task="lint"))
