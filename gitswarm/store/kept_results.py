"""Results a worker could not write because its job's ref was gone, kept beside the repository.

A job ref deleted, or made to point at something that is not a commit,
while a task ran leaves the worker with a finished result and nowhere to
record it. It is kept here, one file per attempt
(`<git common dir>/gitswarm/kept-results/<job>.<task>.<token>.json`), and
`gitswarm recover` offers it again: once the job's ref is back, its
artifacts are recorded on the task (engine/jobs/kept.py). The worker goes on.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import msgspec

from gitswarm.model import codec
from gitswarm.model.artifacts import Artifact
from gitswarm.model.errors import CorruptRecord, NewerFormat

DIR = "kept-results"


class KeptResult(msgspec.Struct, frozen=True, kw_only=True):
    """One attempt's result, as its worker would have written it."""

    v: int = codec.FORMAT
    job: str
    task: str
    token: int
    owner: str
    at: float
    ok: bool
    error: str | None = None
    why: str  # why it could not be written
    artifacts: tuple[Artifact, ...] = ()


class KeptResults:
    """The kept results of one repository."""

    def __init__(self, common_dir: Path) -> None:
        self.dir = common_dir / "gitswarm" / DIR

    def keep(
        self, job: str, task: str, token: int, owner: str, at: float, ok: bool, error: str | None,
        artifacts: Sequence[Artifact], why: str,
    ) -> Path:
        """Write one result (atomically: a reader never sees half a file); its path."""
        record = KeptResult(job=job, task=task, token=token, owner=owner, at=at, ok=ok, error=error, why=why,
                            artifacts=tuple(artifacts))
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"{job}.{task}.{token}.json"
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_bytes(codec.encode(record))
        os.replace(partial, path)
        return path

    def all(self) -> Iterator[tuple[Path, KeptResult | None]]:
        """Every kept result, oldest file name first; None for a file that does not decode."""
        if not self.dir.is_dir():
            return
        for path in sorted(self.dir.glob("*.json")):
            try:
                yield path, codec.decode(path.read_bytes(), KeptResult, str(path))
            except (OSError, CorruptRecord, NewerFormat):
                yield path, None
