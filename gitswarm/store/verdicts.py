"""Verdicts in the notes: sealed when this clone writes one, weighed when read.

Writing a verdict adds two lines to the note on the commit it judges, in
one notes commit: the verdict's canonical record, and a seal naming it by
id (an HMAC under this clone's key, plus an SSH signature when git is set
up to sign with SSH). Reading weighs every verdict on a commit: counted
when a seal by this clone's key or by an allowed signer vouches for it,
shown but never counted otherwise.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from gitswarm.model import codec
from gitswarm.model.artifacts import Verdict
from gitswarm.model.errors import CorruptRecord
from gitswarm.model.provenance import (
    THIS_CLONE,
    UNKNOWN_SIGNER,
    UNSIGNED,
    NoteLine,
    Seal,
    Weighed,
    deciding,
    signed_by,
)
from gitswarm.store.gitrepo import GitRepo
from gitswarm.store.notes import add_note_lines, read_note
from gitswarm.store.signing import LocalKey, SigningConfig, ssh_sign, ssh_verify

WHO = ("gitswarm", "gitswarm@localhost")


def line_id(line: bytes) -> str:
    """A note line's id: the sha256 of its bytes (for a verdict, its artifact id)."""
    return hashlib.sha256(line).hexdigest()


class VerdictNotes:
    """The verdict notes of one repository, as this clone sees them."""

    def __init__(self, repo: GitRepo, repo_dir: Path) -> None:
        self.repo = repo
        self.repo_dir = repo_dir
        self.key = LocalKey(repo.common_dir)
        self._config: SigningConfig | None = None

    @property
    def config(self) -> SigningConfig:
        if self._config is None:
            self._config = SigningConfig.read(self.repo_dir)
        return self._config

    def seal(self, line: bytes) -> Seal:
        """This clone's seal of a verdict line, signed too when git signs with SSH here."""
        verdict_id = line_id(line)
        config = self.config
        signature = ssh_sign(config.key, line) if config.key is not None else None
        return Seal(
            verdict=verdict_id,
            local=self.key.seal(verdict_id),
            signer=config.signer if signature else None,
            signature=signature,
        )

    def add(self, verdict: Verdict, now: float) -> str:
        """Note a verdict made here on the commit it judges, with its seal; returns its id."""
        line = codec.encode(verdict)
        add_note_lines(self.repo, verdict.head, [line, codec.encode(self.seal(line))], WHO, now)
        return line_id(line)

    def weigh(self, commit: str) -> list[Weighed]:
        """Every verdict noted on `commit`, oldest first, with its provenance here."""
        verdicts: dict[str, tuple[bytes, Verdict]] = {}
        seals: dict[str, list[Seal]] = {}
        for line in read_note(self.repo, commit):
            try:
                record = codec.decode(line, NoteLine, "note")
            except CorruptRecord:
                continue  # a line some other tool wrote, or garbage: never counted
            if isinstance(record, Seal):
                seals.setdefault(record.verdict, []).append(record)
            elif record.head == commit:  # a verdict noted on another commit judges nothing here
                verdicts[line_id(line)] = (line, record)
        weighed = [self._weigh(vid, line, verdict, seals.get(vid, [])) for vid, (line, verdict) in verdicts.items()]
        return sorted(weighed, key=lambda w: (w.verdict.created, w.id))

    def _weigh(self, verdict_id: str, line: bytes, verdict: Verdict, seals: list[Seal]) -> Weighed:
        if any(s.local is not None and self.key.check(verdict_id, s.local) for s in seals):
            return Weighed(verdict_id, verdict, THIS_CLONE, True)
        signed = [s for s in seals if s.signature and s.signer]
        allowed = self.config.allowed if signed else None
        for seal in signed:
            assert seal.signer is not None and seal.signature is not None
            if allowed is not None and ssh_verify(allowed, seal.signer, line, seal.signature):
                return Weighed(verdict_id, verdict, signed_by(seal.signer), True)
        return Weighed(verdict_id, verdict, UNKNOWN_SIGNER if signed else UNSIGNED, False)

    def deciding(self, commit: str) -> Weighed | None:
        """The counted verdict that decides for `commit`, if any counts."""
        return deciding(self.weigh(commit))

