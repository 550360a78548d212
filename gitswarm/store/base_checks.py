"""What each check did on a base commit, kept so ten patches on one base run each base check once.

    <git common dir>/gitswarm/cache/base-checks/<sha256 of base NUL command NUL environment key>.json

A file holds one `BaseCheck`: whether the check passed on that commit and
the tail of what it printed (from which the test counts are read). It is a
cache, never pulled or pushed: a file that does not decode is a miss, and
the check runs again. Written whole under a temporary name and renamed.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import msgspec

CACHE_DIR = ("cache", "base-checks")
TAIL_BYTES = 16_384  # the end of the output, where every runner prints its summary


class BaseCheck(msgspec.Struct, frozen=True, kw_only=True):
    passed: bool
    exit_code: int | None
    output_tail: str = ""


class BaseChecks:
    def __init__(self, common_dir: Path) -> None:
        self.directory = common_dir.joinpath("gitswarm", *CACHE_DIR)

    def _path(self, base: str, command: str, env: str) -> Path:
        key = hashlib.sha256(f"{base}\0{command}\0{env}".encode(errors="surrogateescape")).hexdigest()  # a path's own bytes
        return self.directory / f"{key}.json"

    def get(self, base: str, command: str, env: str = "") -> BaseCheck | None:
        try:
            return msgspec.json.decode(self._path(base, command, env).read_bytes(), type=BaseCheck)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None

    def put(self, base: str, command: str, result: BaseCheck, env: str = "") -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(base, command, env)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(msgspec.json.encode(result))
        tmp.replace(path)


def output_tail(stdout: bytes, stderr: bytes) -> str:
    """The last TAIL_BYTES of a check's output, stdout then stderr, as text."""
    return (stdout[-TAIL_BYTES:] + b"\n" + stderr[-TAIL_BYTES:]).decode("utf-8", errors="replace")
