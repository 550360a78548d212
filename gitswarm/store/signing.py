"""Seals on verdicts: this clone's own key, and git's SSH signing.

"This clone made it" cannot rest on any field of a record, since a forger
copies those; it rests on a key that never leaves the git common dir
(`<common>/gitswarm/seal.key`, 32 random bytes, mode 0600, never pushed).
A seal by that key is an HMAC of the verdict's id.

A verdict that should count on other clones is also signed the way git
signs commits with SSH: `gpg.format = ssh` and `user.signingkey` choose the
key, `ssh-keygen -Y sign` makes the signature, and another clone checks it
with `ssh-keygen -Y verify` against its `gpg.ssh.allowedSignersFile`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gitswarm.model.errors import BadInput
from gitswarm.model.provenance import SIGNATURE_NAMESPACE
from gitswarm.store.gitcli import git_run

KEY_FILE = "seal.key"
_HMAC_PREFIX = b"gitswarm-seal-v1\0"
_ARMOR_BEGIN = "-----BEGIN SSH SIGNATURE-----"
_ARMOR_END = "-----END SSH SIGNATURE-----"
_CONFIG_KEYS = ("gpg.format", "user.signingkey", "gpg.ssh.allowedsignersfile")


class LocalKey:
    """This clone's sealing key. Reading never creates it; only sealing does."""

    def __init__(self, common_dir: Path) -> None:
        self.path = common_dir / "gitswarm" / KEY_FILE
        self._key: bytes | None = None

    def _load(self, create: bool) -> bytes | None:
        if self._key is not None:
            return self._key
        try:
            self._key = self.path.read_bytes()
        except FileNotFoundError:
            if not create:
                return None
            self._key = self._create()
        return self._key

    def _create(self) -> bytes:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        key = os.urandom(32)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            return self.path.read_bytes()  # another process made it first
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
            handle.flush()
            os.fsync(handle.fileno())
        return key

    def seal(self, verdict_id: str) -> str:
        key = self._load(create=True)
        assert key is not None
        return hmac.new(key, _HMAC_PREFIX + verdict_id.encode(), hashlib.sha256).hexdigest()

    def check(self, verdict_id: str, mac: str) -> bool:
        key = self._load(create=False)
        if key is None:
            return False
        expected = hmac.new(key, _HMAC_PREFIX + verdict_id.encode(), hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, mac)


@dataclass(frozen=True)
class SigningConfig:
    """What git's own configuration says about SSH signing here."""

    key: Path | None = None  # user.signingkey, when gpg.format is ssh
    signer: str | None = None  # the principal this clone signs as (its user.email)
    allowed: Path | None = None  # gpg.ssh.allowedSignersFile

    @classmethod
    def read(cls, repo_dir: Path) -> SigningConfig:
        done = git_run(["config", "-z", "--get-regexp", r"^(gpg\.format|user\.signingkey|user\.email|gpg\.ssh\.allowedsignersfile)$"], repo_dir)
        values: dict[str, str] = {}
        for item in done.stdout.decode(errors="replace").split("\0"):
            name, _, value = item.partition("\n")
            if name:
                values[name.lower()] = value  # the last one wins, as in git
        key = values.get("user.signingkey")
        signing = values.get("gpg.format") == "ssh" and bool(key) and not (key or "").startswith("key::")
        allowed = values.get("gpg.ssh.allowedsignersfile")
        return cls(
            key=_path(key, repo_dir) if signing and key else None,
            signer=values.get("user.email") if signing else None,
            allowed=_path(allowed, repo_dir) if allowed else None,
        )


def _path(value: str, repo_dir: Path) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else repo_dir / path


def ssh_sign(key: Path, data: bytes) -> str:
    """The base64 body of an SSH signature of `data` (the armor's lines joined)."""
    try:
        done = subprocess.run(
            ["ssh-keygen", "-q", "-Y", "sign", "-f", str(key), "-n", SIGNATURE_NAMESPACE],
            input=data, capture_output=True, env=_ssh_env(),
        )
    except OSError as exc:
        raise BadInput(f"cannot sign the verdict (user.signingkey {key}): ssh-keygen: {exc.strerror}") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise BadInput(f"cannot sign the verdict with user.signingkey {key}: {said[-1] if said else 'ssh-keygen failed'}")
    lines = done.stdout.decode().strip().splitlines()
    return "".join(line.strip() for line in lines if line.strip() not in (_ARMOR_BEGIN, _ARMOR_END))


def ssh_verify(allowed: Path, principal: str, data: bytes, body: str) -> bool:
    """Whether `body` is a signature of `data` by a key `allowed` lists for `principal`."""
    try:
        base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return False
    armored = "\n".join([_ARMOR_BEGIN, *(body[i:i + 70] for i in range(0, len(body), 70)), _ARMOR_END]) + "\n"
    with tempfile.NamedTemporaryFile("w", suffix=".sig", prefix="gitswarm-") as sig:
        sig.write(armored)
        sig.flush()
        try:
            done = subprocess.run(
                ["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", principal, "-n", SIGNATURE_NAMESPACE, "-s", sig.name],
                input=data, capture_output=True, env=_ssh_env(),
            )
        except OSError:
            return False
    return done.returncode == 0


def _ssh_env() -> dict[str, str]:
    """ssh-keygen with the caller's agent (a key held there signs) and nothing that prompts."""
    keep = ("PATH", "HOME", "SSH_AUTH_SOCK", "LANG", "LC_ALL", "TMPDIR")
    return {name: os.environ[name] for name in keep if name in os.environ}
