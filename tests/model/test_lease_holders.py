"""Who holds a lease, in the records: the claim's `holder`, and an expiry's `why` and `attempt_used`.

Both are optional fields with defaults, so a record written before them decodes
and replays as it did; a pulled record that carries them is bounded like any
other (model/validate.py)."""

from __future__ import annotations

import pytest

from gitswarm.model import codec
from gitswarm.model.errors import CorruptRecord
from gitswarm.model.ops import Holder, LeaseExpired, Op, TaskClaimed
from gitswarm.model.validate import check_op

JOB = "01m8w4megz8werfv48thq922ek"
ACTOR = "01m8w4megz8werfv48thq922ea"
OP_ID = "01m8w4megz8werfv48thq922eb"
HOLDER = Holder(host="ada", boot="0b5e1c3a-1b1c-4b7e-9a53-6f7f5d0e2a11/4026531836", pid=812, start=123456)


def claim(**fields: object) -> TaskClaimed:
    return TaskClaimed(id=OP_ID, clock=2, at=10.0, actor=ACTOR, task="a", token=1, owner="w-1", lease_expires=40.0, **fields)


def expiry(**fields: object) -> LeaseExpired:
    return LeaseExpired(id=OP_ID, clock=3, at=11.0, actor=ACTOR, task="a", token=1, **fields)


def test_a_claim_and_an_expiry_written_before_the_fields_decode_with_their_defaults() -> None:
    old_claim = (
        b'{"op":"claimed","v":1,"id":"' + OP_ID.encode() + b'","clock":2,"at":10.0,"actor":"' + ACTOR.encode()
        + b'","task":"a","token":1,"owner":"w-1","lease_expires":40.0}'
    )
    decoded = codec.decode(old_claim, Op, "old claim")
    assert isinstance(decoded, TaskClaimed) and decoded.holder is None
    old_expiry = b'{"op":"expired","v":1,"id":"' + OP_ID.encode() + b'","clock":3,"at":11.0,"actor":"' + ACTOR.encode() + b'","task":"a","token":1}'
    decoded = codec.decode(old_expiry, Op, "old expiry")
    assert isinstance(decoded, LeaseExpired) and (decoded.why, decoded.attempt_used) == (None, True)


def test_the_holder_and_the_why_round_trip_in_canonical_order() -> None:
    op = claim(holder=HOLDER)
    data = codec.encode(op)
    assert data.endswith(b',"holder":{"host":"ada","boot":"' + HOLDER.boot.encode() + b'","pid":812,"start":123456},"key":null}')
    assert codec.decode(data, Op, "claim") == op
    ended = expiry(why="its worker w-1 (pid 812 on host ada) died", attempt_used=False)
    assert codec.decode(codec.encode(ended), Op, "expiry") == ended


def test_pulled_holders_and_whys_are_checked() -> None:
    check_op(claim(holder=HOLDER), JOB, ["a"], "op")
    check_op(claim(holder=Holder(host="mac", pid=1)), JOB, ["a"], "op")
    check_op(expiry(why="its lease ran out", attempt_used=False), JOB, ["a"], "op")
    bad = [
        claim(holder=Holder(host="", pid=812)),
        claim(holder=Holder(host="a\nb", pid=812)),
        claim(holder=Holder(host="ada", pid=0)),
        claim(holder=Holder(host="ada", pid=2**40)),
        claim(holder=Holder(host="ada", pid=812, start=-1)),
        claim(holder=Holder(host="ada", boot="x" * 300, pid=812)),
        expiry(why="a\0b"),
    ]
    for op in bad:
        with pytest.raises(CorruptRecord):
            check_op(op, JOB, ["a"], "op")
