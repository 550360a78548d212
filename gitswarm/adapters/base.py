"""What an adapter is: a task in, a process invocation out; a process result in, an outcome out."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from gitswarm.adapters.process import ProcessResult
from gitswarm.model.artifacts import Artifact, BlobRef
from gitswarm.model.records import TaskSpec

BlobWriter = Callable[[bytes, int], BlobRef]  # (data, bytes dropped) -> a stored blob


@dataclass(frozen=True)
class Invocation:
    argv: list[str]
    cwd: Path
    env: Mapping[str, str]
    timeout: float
    stdin: bytes | None = None


@dataclass(frozen=True)
class RunContext:
    """Where and for whom an adapter runs."""

    job: str
    task: str
    attempt: int
    workdir: Path
    base_env: Mapping[str, str]
    prompt: str | None = None  # the prompt to send, when it is not the task's own (a repair round)


@dataclass
class Outcome:
    ok: bool
    error: str | None = None
    artifacts: list[Artifact] = field(default_factory=list)
    retryable: bool = True


class Adapter(Protocol):
    name: str

    def invocation(self, task: TaskSpec, ctx: RunContext) -> Invocation: ...

    def outcome(self, task: TaskSpec, ctx: RunContext, result: ProcessResult, store: BlobWriter, now: float) -> Outcome: ...
