"""Which worker's a queued task is, and in what order a worker takes tasks (`work --remote`).

Every machine sees the others' claims only at its next fetch. So each queued
task of a job has a home worker among the workers known to work it, the one
whose hash with the task ranks highest (rendezvous hashing), and each worker
takes its own tasks first in an order of its own: workers that know each
other want different tasks however stale their views. Both are hashes every
machine computes alike (docs/many-machines.md, "Throughput").
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def home_worker(workers: Sequence[str], task: str) -> str:
    """The worker whose `task` is, of `workers` ("" when none): the one whose hash with it ranks highest
    (rendezvous hashing). Every machine that knows the same workers agrees, each worker gets about an equal
    share, and a worker joining takes tasks only from the others' shares, never moves one between them."""
    return max(workers, key=lambda worker: _order_hash(worker, task), default="")


def _order_hash(*parts: str) -> int:
    """The parts, joined by NULs, hashed into a rank every machine computes alike."""
    return int.from_bytes(hashlib.blake2b("\0".join(parts).encode(), digest_size=8).digest(), "big")


def claim_order(me: str, home: str, task: str) -> tuple[bool, int, int]:
    """Where `task` (whose home worker is `home`) comes in worker `me`'s choice, lowest first.

    Its own tasks first, in its own order (a hash of its name and the task's). Then another's, from the end of
    that worker's order, which every machine computes alike: the owner works from the front, so the two meet
    only at the owner's last task, however stale the thief's view. Of the workers it could take from, each
    thief prefers one of its own (a hash of both names), so thieves spread while several have tasks left; at a
    job's very end they want the same last tasks, and the remote decides."""
    if home == me or not home:
        return False, 0, _order_hash("turn", me, task)
    return True, -_order_hash("victim", me, home), -_order_hash("turn", home, task)
