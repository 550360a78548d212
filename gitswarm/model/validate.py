"""Records from elsewhere are hostile until proven otherwise: what a pulled record must pass.

Anything a pull brings in (operations, job and task specs, artifact
records, note lines) may have been written by hand by anyone with push
access to the remote. Decoding proves only its types; these checks add
what a local submission guarantees, and more: every id well formed, every
branch a branch, every number finite and within what the index and the
reducer handle, every string of bounded length without NUL bytes, nesting
bounded. Each check raises CorruptRecord naming the record and the field.
"""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Iterable
from functools import lru_cache

import msgspec

from gitswarm.model.artifacts import MAX_REFUSED, Artifact, Check, Patch, Run, SandboxUse, Verdict
from gitswarm.model.capabilities import CAPABILITIES
from gitswarm.model.codec import FORMAT
from gitswarm.model.errors import BadInput, CorruptRecord
from gitswarm.model.ids import ARTIFACT_ID, GENERATED_ID, TASK_ID, check_branch_ref, check_task_id
from gitswarm.model.late_instructions import MAX_GUIDANCE_CHARS
from gitswarm.model.limits import MAX_LEASE_SECONDS, MAX_TIMEOUT_SECONDS, MAX_WALL_SECONDS
from gitswarm.model.ops import (
    Approved,
    ArtifactsRecorded,
    BudgetStopped,
    Cancelled,
    FollowedUp,
    Holder,
    JobCreated,
    LeaseExpired,
    LeaseRenewed,
    Op,
    Steered,
    SteeringDelivered,
    TaskClaimed,
    TaskFinished,
)
from gitswarm.model.provenance import Seal
from gitswarm.model.records import Job, TaskSpec
from gitswarm.model.spec import MAX_DECLARED_PATHS, declared_path_problem, stuck_tasks

MAX_CLOCK = 2**53 - 1  # Lamport clocks: exact in a float, far inside SQLite's 64-bit integers
MAX_INT = 2**53 - 1  # any other integer field
MAX_PID = 2**31 - 1  # a process id: the kernel's are int
MAX_FLOAT = 2.0**53  # any float field, in magnitude
MAX_TIME = 2.0**34  # wall-clock times and deadlines, seconds since the epoch (year 2514)
MAX_TEXT = 1 << 20  # characters in any one string (a prompt is the longest)
MAX_NAME = 255  # characters in a name: a model, a producer, a signer, a source file
MAX_ITEMS = 100_000  # entries in any one list or map
MAX_DEPTH = 16  # nesting of lists and maps inside a record
MAX_SIGNATURE = 16_384  # characters of an SSH signature body
_HEX = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_OWNER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_MACHINE_KEY = re.compile(r"ssh-ed25519 [A-Za-z0-9+/]{68}")  # the wire form of an Ed25519 key: 51 bytes, base64
_SIGNER = re.compile(r"[^\x00-\x20\x7f,]{1,255}")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_SESSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")  # an agent CLI's session id: it becomes an argument
MAX_ROUNDS = 5  # repair rounds of an attempt (TaskSpec.repair_rounds)
_GOOD_TASK_IDS: set[str] = set()  # task ids that passed: every op of a job names the same few


def _fail(where: str, why: str) -> CorruptRecord:
    return CorruptRecord(f"{where}: {why}")


def check_plain(record: object, where: str) -> None:
    """Bounds every record obeys, whatever its kind: finite numbers within range, strings
    without NUL and of bounded length, containers of bounded size and depth."""
    pending: list[tuple[object, int, str]] = [(msgspec.to_builtins(record), 0, where)]
    while pending:
        value, depth, at = pending.pop()
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int):
            if abs(value) > MAX_INT:
                raise _fail(at, f"integer {value} out of range")
        elif isinstance(value, float):
            if not math.isfinite(value) or abs(value) > MAX_FLOAT:
                raise _fail(at, f"number {value!r} out of range")
        elif isinstance(value, str):
            if len(value) > MAX_TEXT or "\0" in value:
                raise _fail(at, "a string too long or holding a NUL byte")
        elif isinstance(value, (list, tuple, dict)):
            if depth >= MAX_DEPTH:
                raise _fail(at, f"nested deeper than {MAX_DEPTH}")
            if len(value) > MAX_ITEMS:
                raise _fail(at, f"more than {MAX_ITEMS} entries")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str) and (len(key) > MAX_TEXT or "\0" in key):
                    raise _fail(at, "a key too long or holding a NUL byte")
                pending.append((item, depth + 1, f"{at}.{key}"))


def _need(condition: bool, where: str, why: str) -> None:
    if not condition:
        raise _fail(where, why)


def _time(value: float | None, where: str) -> None:
    _need(value is None or 0.0 <= value <= MAX_TIME, where, f"time {value!r} out of range")


def _task_id(task_id: str, where: str) -> None:
    if task_id in _GOOD_TASK_IDS:
        return
    try:
        check_task_id(task_id, where)
    except BadInput as exc:
        raise CorruptRecord(str(exc)) from None
    if len(_GOOD_TASK_IDS) < 4096:
        _GOOD_TASK_IDS.add(task_id)


@lru_cache(maxsize=4096)
def _generated(value: str) -> bool:
    """An id as gitswarm generates them (actor ids repeat in every op: remembered)."""
    return GENERATED_ID.fullmatch(value) is not None


def _name(value: str | None, where: str, pattern: re.Pattern[str] = TASK_ID) -> None:
    _need(value is None or pattern.fullmatch(value) is not None, where, f"invalid name {value!r}")


def check_op(op: Op, job_id: str, task_ids: Iterable[str] | None, where: str) -> None:
    """One pulled operation of job `job_id` (whose tasks are `task_ids`, once known).

    A job_created is walked whole (check_plain); every other kind of operation has
    few fields, each checked by name below (walking them costs more than the rest
    of a pull's checks together)."""
    _need(0 <= op.v <= FORMAT, where, f"format {op.v!r} out of range")
    _need(GENERATED_ID.fullmatch(op.id) is not None, where, f"invalid op id {op.id!r}")
    _need(_generated(op.actor), where, f"invalid actor {op.actor!r}")
    # The job's creation is clock 1 and every other op comes after it: nothing can sort before it.
    first = isinstance(op, JobCreated)
    _need(op.clock == 1 if first else 2 <= op.clock <= MAX_CLOCK, where, f"clock {op.clock} out of range")
    _time(op.at, f"{where}.at")
    if isinstance(op, JobCreated):
        check_plain(op, where)
        check_job(op.job, job_id, f"{where}.job")
        check_task_specs(op.tasks, op.job.task_count, f"{where}.tasks")
        return
    task = getattr(op, "task", None)
    if task is not None:
        _task_id(task, f"{where}.task")
        _need(task_ids is None or task in task_ids, where, f"names task {task!r}, which the job does not have")
    if isinstance(op, (TaskClaimed, TaskFinished, LeaseRenewed, LeaseExpired, SteeringDelivered)):
        _need(1 <= op.token <= MAX_INT, where, f"token {op.token} out of range")
    if isinstance(op, (FollowedUp, Steered, SteeringDelivered)):
        _check_guidance(op, where)
    if isinstance(op, TaskClaimed):
        _name(op.owner, f"{where}.owner", _OWNER)
        if op.holder is not None:
            _check_holder(op.holder, f"{where}.holder")
        if op.key is not None:
            _need(_MACHINE_KEY.fullmatch(op.key) is not None, f"{where}.key", "not an `ssh-ed25519 BASE64` key")
    if isinstance(op, LeaseExpired):
        _text(op.why, f"{where}.why")
    if isinstance(op, (TaskClaimed, LeaseRenewed)):
        _time(op.lease_expires, f"{where}.lease_expires")
        # A lease runs at most MAX_LEASE_SECONDS from the op that set it: a claim "until 2514" holds nothing.
        _need(op.at <= op.lease_expires <= op.at + MAX_LEASE_SECONDS, where,
              f"a lease until {op.lease_expires!r}, not within {MAX_LEASE_SECONDS:g} s after the op ({op.at!r})")
    if isinstance(op, TaskFinished):
        _need(0 <= op.cost_usd <= MAX_FLOAT and 0 <= op.tokens <= MAX_INT, where, "cost or tokens out of range")
        _text(op.error, f"{where}.error")
        _need(op.base is None or _HEX.fullmatch(op.base) is not None, f"{where}.base", "not a commit id")
        if op.skipped_because is not None:
            _task_id(op.skipped_because, f"{where}.skipped_because")
            _need(not op.ok, where, "skipped_because on a finish that succeeded")
    if isinstance(op, (Cancelled, BudgetStopped)):
        _text(op.reason, f"{where}.reason")
    if isinstance(op, Approved):
        _check_approval(op.tasks, op.by, op.how, task_ids, where)
    if isinstance(op, (TaskFinished, ArtifactsRecorded)):
        _need(len(op.artifacts) <= MAX_ITEMS, where, "too many artifacts")
        for artifact in op.artifacts:
            _need(ARTIFACT_ID.fullmatch(artifact) is not None, where, f"invalid artifact id {artifact!r}")


def _check_holder(holder: Holder, where: str) -> None:
    """Who holds a lease: a host and a boot as short single lines, a pid and a start time in range."""
    _need(0 < len(holder.host) <= MAX_NAME and holder.host.isprintable(), f"{where}.host", "empty, too long or not one printable line")
    _need(len(holder.boot) <= MAX_NAME and holder.boot.isprintable(), f"{where}.boot", "too long or not one printable line")
    _need(1 <= holder.pid <= MAX_PID and 0 <= holder.start <= MAX_INT, where, "pid or start time out of range")


def _check_approval(tasks: tuple[str, ...], by: str, how: str, task_ids: Iterable[str] | None, where: str) -> None:
    """An approval's fields: tasks of the job, and who and how as short single lines."""
    _need(0 < len(tasks) <= MAX_ITEMS, f"{where}.tasks", "none, or too many")
    known = None if task_ids is None else set(task_ids)
    for task in tasks:
        _task_id(task, f"{where}.tasks")
        _need(known is None or task in known, f"{where}.tasks", f"names task {task!r}, which the job does not have")
    for value, field in ((by, "by"), (how, "how")):
        _need(0 < len(value) <= MAX_NAME and value.isprintable(), f"{where}.{field}", "empty, too long or not one printable line")


def _check_guidance(op: FollowedUp | Steered | SteeringDelivered, where: str) -> None:
    """The fields of a follow-up, a steer or a delivery of steers (model/late_instructions.py)."""
    if isinstance(op, FollowedUp):
        _guidance_text(op.instruction, f"{where}.instruction")
        _need(op.patch is None or ARTIFACT_ID.fullmatch(op.patch) is not None, f"{where}.patch", "not an artifact id")
        _need(op.head is None or _HEX.fullmatch(op.head) is not None, f"{where}.head", "not a commit id")
        _need((op.patch is None) == (op.head is None), where, "a patch without its head or the reverse")
        _need(op.session is None or _SESSION.fullmatch(op.session) is not None, f"{where}.session", "not a session id")
    elif isinstance(op, Steered):
        _guidance_text(op.text, f"{where}.text")
    else:
        _need(op.task is not None, where, "names no task")
        _need(1 <= op.attempt <= MAX_INT and 0 <= op.round <= MAX_ROUNDS, where, "attempt or round out of range")
        _need(0 < len(op.steers) <= MAX_ITEMS, where, "no steers, or too many")
        _need(all(GENERATED_ID.fullmatch(s) is not None for s in op.steers), f"{where}.steers", "not op ids")


def _guidance_text(value: str, where: str) -> None:
    _need(bool(value.strip()) and len(value) <= MAX_GUIDANCE_CHARS and "\0" not in value, where, "empty, too long or holding a NUL byte")


def _text(value: str | None, where: str) -> None:
    _need(value is None or (len(value) <= MAX_TEXT and "\0" not in value), where, "too long or holding a NUL byte")


def check_job(job: Job, job_id: str, where: str) -> None:
    _need(job.id == job_id, where, f"names job {job.id!r}")
    _need(bool(job.goal.strip()), f"{where}.goal", "empty")
    _time(job.created, f"{where}.created")
    _need(GENERATED_ID.fullmatch(job.actor) is not None, where, f"invalid actor {job.actor!r}")
    _need(job.base is None or _HEX.fullmatch(job.base) is not None, f"{where}.base", "not a commit id")
    if job.base_ref is not None:
        try:
            check_branch_ref(job.base_ref, f"{where}.base_ref")
        except BadInput as exc:
            raise CorruptRecord(str(exc)) from None
    _need(job.source is None or (len(job.source) <= MAX_NAME and "/" not in job.source), f"{where}.source", "not a file name")
    if job.approval is not None:
        _check_approval(job.approval.tasks, job.approval.by, job.approval.how, None, f"{where}.approval")
        _time(job.approval.at, f"{where}.approval.at")
    _need(len(job.awaits_approval) <= MAX_ITEMS, f"{where}.awaits_approval", "too many")
    for task in job.awaits_approval:
        _task_id(task, f"{where}.awaits_approval")
    defaults = job.defaults
    _name(defaults.adapter, f"{where}.defaults.adapter")
    _need(0 < defaults.timeout <= MAX_TIMEOUT_SECONDS, f"{where}.defaults.timeout", "out of range")
    _need(1 <= defaults.max_attempts <= 100, f"{where}.defaults.max_attempts", "out of range")
    _need(abs(defaults.priority) <= 1_000_000, f"{where}.defaults.priority", "out of range")
    budget = job.budget
    if budget is not None:
        _need(budget.max_usd is None or 0 < budget.max_usd <= 1e6, f"{where}.budget.max_usd", "out of range")
        _need(budget.max_tokens is None or 0 < budget.max_tokens <= 10**12, f"{where}.budget.max_tokens", "out of range")
        _need(budget.max_attempts is None or 0 < budget.max_attempts <= 10**6, f"{where}.budget.max_attempts", "out of range")
        _need(budget.max_wall is None or 0 < budget.max_wall <= MAX_WALL_SECONDS, f"{where}.budget.max_wall", "out of range")


def check_task_specs(specs: tuple[TaskSpec, ...], task_count: int, where: str) -> None:
    """The tasks of a pulled job: what parse_spec guarantees of a local one."""
    _need(0 < len(specs) == task_count, where, f"{len(specs)} tasks, the job says {task_count}")
    ids = [spec.id for spec in specs]
    _need(len(set(ids)) == len(ids), where, "duplicate task ids")
    dependents: dict[str, list[str]] = {task_id: [] for task_id in ids}
    for n, spec in enumerate(specs):
        at = f"{where}[{n}]"
        _task_id(spec.id, f"{at}.id")
        _need(spec.seq == n, at, f"seq {spec.seq} is not {n}")
        _need(spec.mode in ("analyze", "implement"), f"{at}.mode", f"unknown mode {spec.mode!r}")
        _name(spec.adapter, f"{at}.adapter")
        _name(spec.auditor, f"{at}.auditor")
        _need(spec.model is None or len(spec.model) <= MAX_NAME, f"{at}.model", "too long")
        _need(isinstance(spec.command, str) or spec.command is None or bool(spec.command), f"{at}.command", "an empty argv")
        _need(0 < spec.timeout <= MAX_TIMEOUT_SECONDS, f"{at}.timeout", "out of range")
        _need(1 <= spec.max_attempts <= 100, f"{at}.max_attempts", "out of range")
        _need(1 <= spec.repair_rounds <= 5, f"{at}.repair_rounds", "out of range")
        _need(abs(spec.priority) <= 1_000_000, f"{at}.priority", "out of range")
        _need(all(need in CAPABILITIES for need in spec.needs), f"{at}.needs", "unknown capability")
        _need(all(name and "=" not in name for name in spec.env), f"{at}.env", "invalid variable name")
        _need(len(spec.paths) <= MAX_DECLARED_PATHS, f"{at}.paths", "too many")
        for path in spec.paths:
            problem = declared_path_problem(path) if isinstance(path, str) else "not a string"
            _need(problem is None, f"{at}.paths", problem or "")
        if spec.cwd is not None:
            normal = posixpath.normpath(spec.cwd)
            _need(not posixpath.isabs(spec.cwd) and normal != ".." and not normal.startswith("../"), f"{at}.cwd", "leads out of the repository")
        for dep in spec.depends_on:
            _need(dep in dependents and dep != spec.id, f"{at}.depends_on", f"unknown task {dep!r}")
            dependents[dep].append(spec.id)
        _need(len(set(spec.depends_on)) == len(spec.depends_on), f"{at}.depends_on", "a task listed twice")
    for n, spec in enumerate(specs):
        _need(list(spec.dependents) == dependents[spec.id], f"{where}[{n}].dependents", "do not match depends_on")
    _need(not stuck_tasks(specs), where, "a dependency cycle")


def check_artifact(artifact: Artifact, job_id: str, task_ids: Iterable[str], where: str) -> None:
    check_plain(artifact, where)
    _need(artifact.job == job_id, where, f"belongs to job {artifact.job!r}")
    _need(artifact.task is None or artifact.task in task_ids, where, f"names task {artifact.task!r}, which the job does not have")
    _need(0 <= artifact.attempt, where, "negative attempt")
    _time(artifact.created, f"{where}.created")
    _need(len(artifact.producer) <= MAX_NAME, f"{where}.producer", "too long")
    if isinstance(artifact, (Check, Run)):
        _need(artifact.duration <= MAX_TIMEOUT_SECONDS * 2, f"{where}.duration", "out of range")
    if isinstance(artifact, Run):
        _need((artifact.input_tokens or 0) >= 0 and (artifact.output_tokens or 0) >= 0, where, "negative tokens")
        if isinstance(artifact.sandbox, SandboxUse):
            _need(len(artifact.sandbox.refused) <= MAX_REFUSED and all(len(r) <= 300 for r in artifact.sandbox.refused),
                  f"{where}.sandbox.refused", "too long")
    if isinstance(artifact, Patch):
        _need(all(f.added >= 0 and f.deleted >= 0 for f in artifact.files), f"{where}.files", "negative line counts")
    if isinstance(artifact, Verdict):
        _need(len(artifact.reviewer) <= MAX_NAME, f"{where}.reviewer", "too long")


def check_note_record(record: Verdict | Seal, commit: str, where: str) -> None:
    """A pulled note line: a verdict on exactly the commit it is noted on, or a well-formed seal."""
    check_plain(record, where)
    if isinstance(record, Verdict):
        _need(record.head == commit, where, f"judges {record.head[:12]}, not the commit it is noted on")
        _time(record.created, f"{where}.created")
        _need(len(record.reviewer) <= MAX_NAME and len(record.producer) <= MAX_NAME, where, "a name too long")
        return
    _need(ARTIFACT_ID.fullmatch(record.verdict) is not None, where, "names no verdict")
    _need(record.local is None or re.fullmatch(r"[0-9a-f]{64}", record.local) is not None, f"{where}.local", "not an HMAC")
    _need((record.signer is None) == (record.signature is None), where, "a signer without a signature or the reverse")
    if record.signer is not None and record.signature is not None:
        _need(_SIGNER.fullmatch(record.signer) is not None, f"{where}.signer", "not a principal")
        _need(len(record.signature) <= MAX_SIGNATURE and _BASE64.fullmatch(record.signature) is not None, f"{where}.signature", "not base64")
