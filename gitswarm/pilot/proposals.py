"""The two-stage start of a delegation: a proposal, then its one-use confirmation token.

A proposal is a file `$XDG_STATE_HOME/gitswarm/pilot/<repo-key>/proposals/<token>.json`
(outside the git dir, whose files the integrity check of running tasks watches) holding
exactly what will be submitted (the job spec text) and when it expires. The
confirming call names only the token, so what starts is what was proposed.
Taking a token is one `rename` of its file: of two pilots confirming the same
token, in one server or in two, exactly one rename succeeds. A taken or
expired token is refused; expired files are swept at the next proposal.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from gitswarm.model.errors import BadInput
from gitswarm.store.worktrees import repo_key, state_home

TOKEN_TTL_SECONDS = 600.0
_TOKEN_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


@dataclass(frozen=True)
class Proposal:
    token: str
    spec: str  # the job spec text the confirmation submits
    expires: float


def pilot_dir(common_dir: Path) -> Path:
    """The pilot's files for one repository (every clone and linked worktree of it shares them)."""
    return state_home() / "gitswarm" / "pilot" / repo_key(common_dir)


def proposals_dir(common_dir: Path) -> Path:
    return pilot_dir(common_dir) / "proposals"


def propose(common_dir: Path, spec: str, now: float | None = None, ttl: float = TOKEN_TTL_SECONDS) -> Proposal:
    """Record `spec` under a new token that expires after `ttl` seconds."""
    now = time.time() if now is None else now
    folder = proposals_dir(common_dir)
    folder.mkdir(parents=True, exist_ok=True)
    _sweep(folder, now)
    proposal = Proposal(secrets.token_urlsafe(18), spec, now + ttl)
    path = folder / f"{proposal.token}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"spec": proposal.spec, "expires": proposal.expires}, handle)
    return proposal


def take(common_dir: Path, token: str, now: float | None = None) -> Proposal:
    """The proposal of `token`, which can never be taken again; BadInput when it is unknown,
    already used or expired."""
    if not token or len(token) > 64 or not _TOKEN_CHARS.issuperset(token):
        raise BadInput("confirm: not a confirmation token")
    now = time.time() if now is None else now
    folder = proposals_dir(common_dir)
    source = folder / f"{token}.json"
    taken = folder / f"{token}.taken-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        os.rename(source, taken)
    except FileNotFoundError:
        raise BadInput("confirm: unknown or already used token (propose the delegation again)") from None
    try:
        data = json.loads(taken.read_text())
    except (OSError, ValueError) as exc:
        raise BadInput(f"confirm: the proposal cannot be read: {exc}") from None
    finally:
        taken.unlink(missing_ok=True)
    if not isinstance(data, dict) or not isinstance(data.get("spec"), str) or not isinstance(data.get("expires"), (int, float)):
        raise BadInput("confirm: the proposal is not one gitswarm wrote")
    if data["expires"] <= now:
        raise BadInput("confirm: the token expired (propose the delegation again)")
    return Proposal(token, data["spec"], float(data["expires"]))


def _sweep(folder: Path, now: float) -> None:
    """Remove expired proposals; a file another process is reading or taking is left alone."""
    for entry in os.scandir(folder):
        if not entry.name.endswith(".json"):
            continue
        try:
            if json.loads(Path(entry.path).read_text()).get("expires", 0) <= now:
                os.unlink(entry.path)
        except (OSError, ValueError, AttributeError):
            continue
