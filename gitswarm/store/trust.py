"""Which jobs came from another clone, and which of those the user approved to run here.

Pulled state is data, never instructions: a job adopted by `pull` keeps the
name of the remote it came from, and `work` leaves its tasks alone unless the
user trusts that remote (`--trust REMOTE`) or approves the job. This is local
knowledge, in `<git-common-dir>/gitswarm/trust.json`, never pushed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec

from gitswarm.model.errors import CorruptRecord

TRUST_FILE = "trust.json"


class TrustFile(msgspec.Struct, forbid_unknown_fields=True):
    origins: dict[str, str] = {}  # job id -> the remote it was first pulled from
    approved: list[str] = []


class Trust:
    def __init__(self, common_dir: Path) -> None:
        self.path = common_dir / "gitswarm" / TRUST_FILE

    def load(self) -> TrustFile:
        try:
            return msgspec.json.decode(self.path.read_bytes(), type=TrustFile)
        except FileNotFoundError:
            return TrustFile()
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise CorruptRecord(f"{self.path}: {exc}") from None

    def _save(self, data: TrustFile) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(json.dumps(msgspec.to_builtins(data), sort_keys=True, indent=1).encode())
        tmp.replace(self.path)

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

    def untrusted(self, trusted_remotes: frozenset[str] = frozenset()) -> frozenset[str]:
        """Pulled jobs that may not run here: neither approved nor from a trusted remote."""
        data = self.load()
        return frozenset(
            job for job, remote in data.origins.items() if job not in data.approved and remote not in trusted_remotes
        )
