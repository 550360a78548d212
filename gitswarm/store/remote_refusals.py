"""The jobs whose history on a remote this clone refused, shared by every process of the clone.

`<git common dir>/gitswarm/refused/<remote key>.json`: {job id: why}. Written
by whichever process syncs with the remote (the command at its start, the
remote watch, a worker whose push was refused), read before every claim
through that remote: since a task's claims go to its own ref on the remote
(`refs/swarm/claims/`), a push no longer finds out by itself that the job's
history there was forged or rewound, so no worker claims a task of a job any
process here refused. A job leaves the file once a sync takes its history.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Collection, Mapping
from pathlib import Path

from gitswarm.model.errors import GitswarmError
from gitswarm.store.locks import held

REFUSED_DIR = "refused"  # under <git common dir>/gitswarm/


class RemoteRefusals:
    """The refused jobs of one remote, on disk."""

    def __init__(self, common_dir: Path, key: str) -> None:
        self.path = common_dir / "gitswarm" / REFUSED_DIR / f"{key}.json"
        self._seen: tuple[int, int, int] | None = None  # (inode, mtime_ns, size) of what _cache holds
        self._cache: dict[str, str] = {}

    def read(self) -> dict[str, str]:
        """{job: why}; a stat when nothing changed since the last read."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._seen, self._cache = None, {}
            return {}
        if self._seen != (stat.st_ino, stat.st_mtime_ns, stat.st_size):
            try:
                data = json.loads(self.path.read_text())
            except (OSError, ValueError):
                data = {}
            self._cache = {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
            self._seen = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        return dict(self._cache)

    def update(self, refused: Mapping[str, str], taken: Collection[str]) -> dict[str, str]:
        """Add the jobs `refused` now, drop those whose history a sync just `taken`; what is refused after.
        Under a lock: two processes syncing at once never drop each other's refusals."""
        if not refused and not taken:
            return self.read()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with held(self.path.with_suffix(".lock")):
            self._seen = None  # read it again under the lock, whatever its stamp
            before = self.read()
            after = {job: why for job, why in before.items() if job not in taken} | dict(refused)
            if after != before:
                self._write(after)
        return after

    def _write(self, refused: Mapping[str, str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".refused-")
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(dict(sorted(refused.items())), handle)
            os.replace(tmp, self.path)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise GitswarmError(f"cannot record the jobs refused from the remote in {self.path}: {exc.strerror}") from None
