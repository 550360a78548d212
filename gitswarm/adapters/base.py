"""What an adapter is: a task in, a process invocation out; a process result in, an outcome out."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import msgspec

from gitswarm.adapters.process import ProcessResult
from gitswarm.adapters.sandbox import Decision
from gitswarm.model.artifacts import Artifact, BlobRef
from gitswarm.model.records import TaskSpec
from gitswarm.model.routing import Route

if TYPE_CHECKING:  # an annotation only: a run with no endpoint proxy never loads its module (sockets, threads)
    from gitswarm.adapters.proxy import Proxy

BlobWriter = Callable[[bytes, int], BlobRef]  # (data, bytes dropped) -> a stored blob


class Invocation(msgspec.Struct, frozen=True):
    argv: list[str]
    cwd: Path
    env: Mapping[str, str]
    timeout: float
    stdin: bytes | None = None
    scratch: Path | None = None  # the run's private directory, removed after its outcome is read
    proxy: Proxy | None = None  # the endpoint proxy of a sandboxed run (adapters/endpoint.py), closed when it ends


Runner = Callable[[Invocation], ProcessResult]


class RunContext(msgspec.Struct, frozen=True):
    """Where and for whom an adapter runs."""

    job: str
    task: str
    attempt: int
    workdir: Path
    base_env: Mapping[str, str]
    prompt: str | None = None  # the prompt to send, when it is not the task's own (a repair round)
    budget_usd: float | None = None  # what the job may still spend, when it has a dollar budget
    session: str | None = None  # the agent session to resume (a follow-up with --resume-session)
    skills: tuple[str, ...] = ()  # the skills the prompt carries (`NAME@SHA256`), for the run artifact
    route: Route | None = None  # the model routing chose for this run, and why (model/routing.py)
    sandbox: Decision | None = None  # the run's sandbox (adapters/sandbox.py); None: none, and none recorded


class Outcome(msgspec.Struct):
    ok: bool
    error: str | None = None
    artifacts: list[Artifact] = msgspec.field(default_factory=list)
    retryable: bool = True
    text: str = ""  # the agent's final answer, as it printed it
    base: str | None = None  # the stacked base the attempt started from, when not the job's (engine/delegation/stack.py)
    skipped_because: str | None = None  # an upstream task whose patch it could not start from: skipped, not failed


class Adapter(Protocol):
    name: str

    def invocation(self, task: TaskSpec, ctx: RunContext) -> Invocation: ...

    def outcome(
        self,
        task: TaskSpec,
        ctx: RunContext,
        result: ProcessResult,
        store: BlobWriter,
        now: float,
        invocation: Invocation | None = None,
    ) -> Outcome: ...


def captured(result: ProcessResult, store: BlobWriter) -> tuple[BlobRef | None, BlobRef | None]:
    """The run's stdout and stderr as stored blobs (None when empty and nothing was cut)."""
    out = store(result.stdout, result.stdout_dropped) if result.stdout or result.stdout_dropped else None
    err = store(result.stderr, result.stderr_dropped) if result.stderr or result.stderr_dropped else None
    return out, err


def execute(
    adapter: Adapter, task: TaskSpec, ctx: RunContext, run: Runner, store: BlobWriter, now: Callable[[], float]
) -> Outcome:
    """Invoke, run, read the outcome, and remove the run's scratch directory whatever happens. A run's
    endpoint proxy is closed as soon as its process has ended, before its outcome is read."""
    invocation = adapter.invocation(task, ctx)
    try:
        try:
            result = run(invocation)
        finally:
            if invocation.proxy is not None:
                invocation.proxy.close()
        return adapter.outcome(task, ctx, result, store, now(), invocation=invocation)
    finally:
        if invocation.scratch is not None:
            shutil.rmtree(invocation.scratch, ignore_errors=True)
