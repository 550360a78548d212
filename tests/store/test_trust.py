"""The trust files: a job made here needs nothing from trust.json, and a half-written
trust.json is read again before it counts as corrupt."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gitswarm.model.errors import CorruptRecord
from gitswarm.store.trust import TORN_READ_PAUSE, Trust


def test_a_job_made_here_is_trusted_whatever_trust_json_holds(tmp_path: Path) -> None:
    trust = Trust(tmp_path)
    trust.made_here("01aaaaaaaaaaaaaaaaaaaaaaaa")
    trust.path.write_text("{not json")
    assert trust.why_not("01aaaaaaaaaaaaaaaaaaaaaaaa") is None
    assert trust.untrusted(["01aaaaaaaaaaaaaaaaaaaaaaaa"]) == frozenset()
    with pytest.raises(CorruptRecord, match=r"trust\.json"):  # a pulled job still needs it
        trust.why_not("01bbbbbbbbbbbbbbbbbbbbbbbb")


def test_a_trust_json_caught_half_written_is_read_again(tmp_path: Path) -> None:
    trust = Trust(tmp_path)
    trust.path.parent.mkdir(parents=True)
    trust.path.write_text('{"approved": ["01bbbb')  # what `echo ... > trust.json` leaves for a moment
    finisher = threading.Timer(TORN_READ_PAUSE / 2, lambda: trust.path.write_text('{"approved": ["01bbbbbbbbbbbbbbbbbbbbbbbb"]}'))
    finisher.start()
    try:
        assert trust.why_not("01bbbbbbbbbbbbbbbbbbbbbbbb") is None
    finally:
        finisher.join()


def test_a_trust_json_that_stays_corrupt_is_refused(tmp_path: Path) -> None:
    trust = Trust(tmp_path)
    trust.path.parent.mkdir(parents=True)
    trust.path.write_text('{"approved": 3}')
    with pytest.raises(CorruptRecord, match=r"trust\.json"):
        trust.load()
