"""Which verdicts count, and which one decides.

A verdict is a line anyone with push access can write into the notes. It
counts only when a seal vouches for it: a seal made by this clone (an HMAC
with a key that never leaves the git common dir) or one that carries an SSH
signature by a key the repository allows (git's `gpg.ssh.allowedSignersFile`).
A seal is its own note line beside the verdict, naming the verdict by its
id (the sha256 of its line), so notes still merge as a union of lines.

Only counted verdicts are ever weighed. Among them the latest decides, by
the time inside the sealed record; on a tie a rejection wins. An unsealed
line, whatever time it declares, never overrides a counted one.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from gitswarm.model.artifacts import Verdict
from gitswarm.model.codec import FORMAT

#: What a signature is made over is the verdict's line; the namespace keeps it from
#: being replayed as a signature of anything else (git uses "git" for commits).
SIGNATURE_NAMESPACE = "gitswarm-verdict"


class Seal(msgspec.Struct, frozen=True, kw_only=True, tag="seal", tag_field="kind"):
    """A vouch for one verdict line: by this clone's key, by an SSH signature, or both."""

    v: int = FORMAT
    verdict: str  # the verdict's id: sha256 of its canonical line
    local: str | None = None  # hex HMAC-SHA256 of the id under the sealing clone's key
    signer: str | None = None  # the principal the signature is checked against
    signature: str | None = None  # base64 body of an `ssh-keygen -Y sign` signature over the verdict line


NoteLine = Verdict | Seal

THIS_CLONE = "this clone"
UNSIGNED = "unsigned"
UNKNOWN_SIGNER = "unknown signer"


@dataclass(frozen=True)
class Weighed:
    """A verdict with where it came from and whether it counts here."""

    id: str
    verdict: Verdict
    provenance: str  # "this clone", "signed by <principal>", "unsigned", "unknown signer"
    counted: bool


def signed_by(principal: str) -> str:
    return f"signed by {principal}"


def count_hint(provenance: str) -> str | None:
    """What would make a verdict of this provenance count here, in one line; None when it counts or nothing would."""
    if provenance == UNSIGNED:
        return ("unsigned verdicts count here once signed: their reviewer signs with an SSH key (git config gpg.format ssh, "
                "user.signingkey) that this clone's gpg.ssh.allowedSignersFile lists")
    if provenance == UNKNOWN_SIGNER:
        return "a signed verdict counts here once its key is in the file this clone's gpg.ssh.allowedSignersFile names"
    return None


#: The evidence key of a person's review of one artifact (a finding, a decision) rather than of the
#: commit it is noted on: such a verdict decides only for that artifact, never for the commit.
ABOUT = "artifact"


def deciding(weighed: list[Weighed], about: str | None = None) -> Weighed | None:
    """The verdict that decides: the latest counted one, a rejection winning a tie; None if none counts.
    `about`: for that artifact (its reviews), instead of for the commit itself."""
    counted = [w for w in weighed if w.counted and w.verdict.evidence.get(ABOUT) == about]
    if not counted:
        return None
    return max(counted, key=lambda w: (w.verdict.created, not w.verdict.accepted, w.id))


def accepted_by_gitswarm(weighed: list[Weighed], patch: str | None = None) -> bool:
    """Whether a counted verdict of gitswarm's own checks accepted the head (for `patch`, if given)."""
    return any(
        w.counted and w.verdict.accepted and w.verdict.producer == "gitswarm" and (patch is None or w.verdict.patch == patch)
        for w in weighed
    )


def latest_by_gitswarm(weighed: list[Weighed], patch: str) -> Verdict | None:
    """gitswarm's latest counted verdict on `patch` (whatever it said), or None."""
    own = [w.verdict for w in weighed if w.counted and w.verdict.producer == "gitswarm" and w.verdict.patch == patch]
    return max(own, key=lambda v: v.created) if own else None
