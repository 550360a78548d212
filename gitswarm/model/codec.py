"""The one deterministic encoder and the version-checking decoder.

A record's blob id is its identity, so every record is encoded the same way
everywhere: JSON, struct fields in declaration order, dict keys sorted, no
whitespace. Each record carries `v`, the format version; a record with a
newer `v` is refused before it can be misread.
"""

from __future__ import annotations

import hashlib
from functools import cache
from typing import Any, TypeVar, overload

import msgspec

from gitswarm.model.errors import CorruptRecord, NewerFormat

FORMAT = 1
T = TypeVar("T")

_encoder = msgspec.json.Encoder(order="deterministic")


class _Version(msgspec.Struct):
    v: int = 0


_version_decoder = msgspec.json.Decoder(_Version)


def encode(record: Any) -> bytes:
    """Canonical bytes of a record (or any msgspec-encodable value)."""
    return _encoder.encode(record)


def digest(record: Any) -> str:
    """sha256 hex of the canonical encoding: the id of a content-addressed record."""
    return hashlib.sha256(encode(record)).hexdigest()


@cache
def _decoder(kind: Any) -> msgspec.json.Decoder:
    return msgspec.json.Decoder(kind)


def prepare(*kinds: Any) -> None:
    """Build the decoders of `kinds` now (msgspec reads each type's annotations the first time, ~1 ms
    a record type): a process about to fork workers does it once for all of them."""
    for kind in kinds:
        _decoder(kind)


def check_version(version: int, where: str) -> None:
    if version > FORMAT:
        raise NewerFormat(
            f"{where}: written in format v{version} by a newer gitswarm; this one reads v{FORMAT} (upgrade gitswarm)"
        )


@overload
def decode(data: bytes, kind: type[T], where: str) -> T: ...
@overload
def decode(data: bytes, kind: object, where: str) -> Any: ...  # a union alias: the caller names its type


def decode(data: bytes, kind: Any, where: str) -> Any:
    """Decode a record of `kind`, refusing newer formats and corrupt bytes with a clear message."""
    try:
        version = _version_decoder.decode(data).v
    except msgspec.DecodeError as exc:  # ValidationError included: a `v` that is not an int
        raise CorruptRecord(f"{where}: corrupt record ({exc})") from None
    except RecursionError:  # JSON nested thousands deep: msgspec recurses per level
        raise CorruptRecord(f"{where}: corrupt record (nested too deep)") from None
    check_version(version, where)
    try:
        return _decoder(kind).decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptRecord(f"{where}: corrupt record ({exc})") from None
    except RecursionError:
        raise CorruptRecord(f"{where}: corrupt record (nested too deep)") from None


def to_builtins(record: Any) -> Any:
    """A record as plain dicts and lists, in the canonical field order."""
    return msgspec.to_builtins(record)
