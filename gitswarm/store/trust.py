"""Which jobs may run here: those this clone made, and pulled ones the user approved.

Pulled state is data, never instructions. "This clone made it" cannot rest
on any field of a record (a forger copies the actor id), so it rests on
local files that are never pushed, in `<git-common-dir>/gitswarm/`:

- `local-jobs`: one job id per line, appended before the job's ref is
  created. A crash in between leaves a line for a job that does not exist,
  never a job without its line.
- `local-ops`: the ids of the operations this clone made that carry
  instructions from a person (a steer, a follow-up), appended before the op
  is written. A pulled one that is not here (and not signed) is data: it is
  never delivered to an agent (engine/jobs/steering.py, agent_attempt.py).
- `trust.json`: where each pulled job came from (written, and synced to
  disk, before a pull moves any live ref) and which ones the user approved.

A job that is in neither (its refs fetched by hand, say) is not runnable:
the check fails closed. `work --trust REMOTE` also runs jobs pulled from
that remote, for one run.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path

import msgspec

from gitswarm.model.errors import CorruptRecord

TRUST_FILE = "trust.json"
LOCAL_JOBS_FILE = "local-jobs"
LOCAL_OPS_FILE = "local-ops"
# gitswarm replaces trust.json atomically, but a hand edit (or anything with write access to the
# git dir) may be caught half-written: a file that does not decode is read again a few times
# before it counts as corrupt.
TORN_READ_TRIES = 4
TORN_READ_PAUSE = 0.05


class TrustFile(msgspec.Struct, forbid_unknown_fields=True):
    origins: dict[str, str] = {}  # job id -> the remote it was first pulled from
    approved: list[str] = []


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


class _IdLines:
    """An append-only file of one id a line (local-jobs, local-ops), read again only when it changed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cache: tuple[object, frozenset[str]] | None = None

    def append(self, line: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, f"{line}\n".encode())  # one short O_APPEND write: never interleaved
        finally:
            os.close(fd)

    def read(self) -> frozenset[str]:
        stamp = _stamp(self.path)
        if self._cache is None or self._cache[0] != stamp:
            try:
                self._cache = (stamp, frozenset(self.path.read_text().split()))
            except FileNotFoundError:
                self._cache = (stamp, frozenset())
        return self._cache[1]


class Trust:
    def __init__(self, common_dir: Path) -> None:
        self.path = common_dir / "gitswarm" / TRUST_FILE
        self.local_path = common_dir / "gitswarm" / LOCAL_JOBS_FILE
        self._jobs = _IdLines(self.local_path)
        self._ops = _IdLines(common_dir / "gitswarm" / LOCAL_OPS_FILE)
        self._cache: tuple[object, TrustFile] | None = None

    def load(self) -> TrustFile:
        for tries_left in range(TORN_READ_TRIES - 1, -1, -1):
            try:
                return msgspec.json.decode(self.path.read_bytes(), type=TrustFile)
            except FileNotFoundError:
                return TrustFile()
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                if not tries_left:
                    raise CorruptRecord(f"{self.path}: {exc}") from None
                time.sleep(TORN_READ_PAUSE)
        raise AssertionError("unreachable")

    def local_jobs(self) -> frozenset[str]:
        """The jobs this clone made (local-jobs)."""
        return self._jobs.read()

    def _save(self, data: TrustFile) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "wb") as handle:
            handle.write(json.dumps(msgspec.to_builtins(data), sort_keys=True, indent=1).encode())
            handle.flush()
            os.fsync(handle.fileno())  # the origins must be on disk before the refs move
        tmp.replace(self.path)

    def made_here(self, job: str) -> None:
        """Record that this clone made `job`; called before its ref is created."""
        self._jobs.append(job)

    def made_op(self, op_id: str) -> None:
        """Record that this clone made the operation `op_id`; called before it is written."""
        self._ops.append(op_id)

    def ops_made_here(self) -> frozenset[str]:
        """The operations this clone made that carry a person's instructions (local-ops)."""
        return self._ops.read()

    def adopted(self, jobs: dict[str, str]) -> None:
        """Record where newly pulled jobs came from (a job keeps its first origin)."""
        data = self.load()
        for job, remote in jobs.items():
            data.origins.setdefault(job, remote)
        self._save(data)

    def approve(self, job: str) -> None:
        data = self.load()
        if job not in data.approved:
            data.approved.append(job)
            self._save(data)

    def stamp(self) -> object:
        """Changes whenever either file does."""
        return (_stamp(self.path), _stamp(self.local_path))

    def _trusted(self) -> TrustFile:
        """trust.json, read again only when it changed."""
        stamp = _stamp(self.path)
        if self._cache is None or self._cache[0] != stamp:
            self._cache = (stamp, self.load())
        return self._cache[1]

    def why_not(self, job: str, trusted_remotes: frozenset[str] = frozenset()) -> str | None:
        """Why `job` may not run here, or None when it may."""
        if job in self.local_jobs():  # a job made here needs nothing from trust.json
            return None
        data = self._trusted()
        if job in data.approved:
            return None
        origin = data.origins.get(job)
        if origin is None:
            return "not made by this clone and never approved here"
        if origin in trusted_remotes:
            return None
        return f"pulled from {origin} and not approved"

    def untrusted(self, jobs: Iterable[str], trusted_remotes: frozenset[str] = frozenset()) -> frozenset[str]:
        """Those of `jobs` that may not run here."""
        jobs = frozenset(jobs) - self.local_jobs()
        if not jobs:  # all made here: trust.json is not read
            return frozenset()
        data = self._trusted()
        approved = frozenset(data.approved)
        return frozenset(job for job in jobs if job not in approved and data.origins.get(job, "\0") not in trusted_remotes)
