"""Memory a supervisor shares with the workers it forks: anonymous shared mappings made before the fork.

`mmap.mmap(-1, size)` maps zeroed memory MAP_SHARED: a forked child writes to
the same pages its parent reads. This is what a run needs of
multiprocessing's Value and Array (an int, a byte buffer, the group-commit
slots) without importing its shared-ctypes heap, which costs a run ~2 ms of
start-up. Only processes forked after the mapping is made share it: nothing
outside the run can write to it.
"""

from __future__ import annotations

import mmap
import struct

_INT = struct.Struct("=i")
_WORD = struct.Struct("=I")
_REAL = struct.Struct("=d")


class SharedInt:
    """A C int in shared memory; `.value` reads and writes it (an aligned 4-byte store: never torn)."""

    def __init__(self, value: int = 0) -> None:
        self._map = mmap.mmap(-1, _INT.size)
        self.value = value

    @property
    def value(self) -> int:
        return int(_INT.unpack_from(self._map)[0])

    @value.setter
    def value(self, value: int) -> None:
        _INT.pack_into(self._map, 0, value)


class SharedBytes:
    """A fixed buffer of `size` bytes; `.value` is what was written up to its first NUL (as ctypes' c_char arrays)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._map = mmap.mmap(-1, size)

    def __len__(self) -> int:
        return self._size

    @property
    def value(self) -> bytes:
        data = self._map[:]
        end = data.find(b"\0")
        return data if end < 0 else data[:end]

    @value.setter
    def value(self, value: bytes) -> None:
        if len(value) > self._size:
            raise ValueError(f"{len(value)} bytes do not fit a buffer of {self._size}")
        self._map[: len(value)] = value
        if len(value) < self._size:
            self._map[len(value)] = 0


class SharedRegion:
    """Raw shared bytes for a layout of one's own (store/group_slots.py, engine/machines/crew.py): 4-byte
    unsigned words, doubles and byte ranges, by offset."""

    def __init__(self, size: int) -> None:
        self.map = mmap.mmap(-1, size)

    def word(self, offset: int) -> int:
        return int(_WORD.unpack_from(self.map, offset)[0])

    def set_word(self, offset: int, value: int) -> None:
        _WORD.pack_into(self.map, offset, value)

    def real(self, offset: int) -> float:
        return float(_REAL.unpack_from(self.map, offset)[0])

    def set_real(self, offset: int, value: float) -> None:
        _REAL.pack_into(self.map, offset, value)

    def read(self, offset: int, size: int) -> bytes:
        return self.map[offset : offset + size]

    def write(self, offset: int, data: bytes) -> None:
        self.map[offset : offset + len(data)] = data
