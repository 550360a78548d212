"""Shared memory for forked workers: what a child writes, its parent reads."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitswarm.store.shared_memory import SharedBytes, SharedInt, SharedRegion


def in_child(write: object) -> None:
    """Fork, call `write()` in the child, wait for it to exit 0."""
    pid = os.fork()
    if pid == 0:
        try:
            write()  # type: ignore[operator]
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_what_a_forked_child_writes_its_parent_reads() -> None:
    number, text, region = SharedInt(), SharedBytes(64), SharedRegion(24)

    def write() -> None:
        number.value = -4242
        text.value = b"disk full under /x"
        region.set_word(0, 7)
        region.set_word(4, 0xFFFFFFFF)
        region.write(8, b"abc")
        region.set_real(16, 1234.5625)

    in_child(write)
    assert number.value == -4242
    assert text.value == b"disk full under /x"
    assert (region.word(0), region.word(4), region.read(8, 3), region.real(16)) == (7, 0xFFFFFFFF, b"abc", 1234.5625)


@given(st.lists(st.binary(max_size=32).map(lambda b: b.replace(b"\0", b"")), min_size=1, max_size=5))
def test_shared_bytes_read_back_the_last_write_up_to_its_nul(values: list[bytes]) -> None:
    text = SharedBytes(32)
    for value in values:
        text.value = value
    assert text.value == values[-1]
    assert len(text) == 32


def test_a_value_longer_than_the_buffer_is_refused_and_nothing_changes() -> None:
    text = SharedBytes(4)
    text.value = b"ok"
    with pytest.raises(ValueError):
        text.value = b"too long"
    assert text.value == b"ok"
