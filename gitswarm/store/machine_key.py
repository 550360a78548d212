"""This clone's machine key: what signs the commits it pushes to a shared remote (`work --remote`).

An Ed25519 key in OpenSSH's private key format at
`<git common dir>/gitswarm/machine.key` (mode 0600, never pushed), made on
first use. Which machine wrote an operation cannot rest on its `actor` or
`owner` field, since a forger copies those: a claim names the key of the
machine that made it, and that lease's renewals, expiries and finishes
count only in commits signed by the same key (store/pulled_jobs.py).
`gitswarm machine-key` prints the public half as an allowed-signers line.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, load_ssh_private_key

from gitswarm.model.errors import BadInput
from gitswarm.store import sshsig

KEY_FILE = "machine.key"


class MachineKey:
    """This clone's machine key, loaded (or made) once."""

    def __init__(self, common_dir: Path) -> None:
        self.path = common_dir / "gitswarm" / KEY_FILE
        self._key: Ed25519PrivateKey | None = None

    @property
    def key(self) -> Ed25519PrivateKey:
        if self._key is None:
            self._key = self._load() or self._create()
        return self._key

    @property
    def public(self) -> str:
        """`ssh-ed25519 BASE64`: how claims name this machine."""
        return sshsig.public_line(self.key.public_key())

    def sign(self, data: bytes) -> str:
        """An armored SSH signature of `data` in git's namespace (a commit's `gpgsig`)."""
        return sshsig.sign(self.key, data)

    def _load(self) -> Ed25519PrivateKey | None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            key = load_ssh_private_key(data, password=None)
        except ValueError as exc:
            raise BadInput(f"{self.path}: not an unencrypted OpenSSH private key ({exc}); move it away to make a new one") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise BadInput(f"{self.path}: not an Ed25519 key; move it away to make a new one")
        return key

    def _create(self) -> Ed25519PrivateKey:
        """Write a new key whole to a file of its own, then link it into place: a process that reads the key
        meanwhile finds none or all of it, and of two processes making one, the first link wins."""
        key = Ed25519PrivateKey.generate()
        data = key.private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption())
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".machine-key-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.link(tmp, self.path)
        except FileExistsError:
            made = self._load()  # another process made it first
            assert made is not None
            return made
        finally:
            os.unlink(tmp)
        return key


PRINCIPAL = "gitswarm-machine@"  # how an allowed-signers line names a machine: gitswarm-machine@<host>


def allowed_line(public: str, host: str) -> str:
    """The allowed-signers line that lets the machine `host` with key `public` work jobs here."""
    return f'{PRINCIPAL}{host} namespaces="git" {public}'


def allowed_machines(allowed_signers: Path | None) -> frozenset[str] | None:
    """The machine keys (`ssh-ed25519 BASE64`) an allowed-signers file lists under a `gitswarm-machine@`
    principal; None when it lists none (or none is configured): then any machine's key counts. A file that is
    configured but cannot be read lists none: no machine's claim counts.

    Lines are `principals [options] keytype base64 [comment]`; principals are comma-separated."""
    if allowed_signers is None:
        return None
    try:
        text = allowed_signers.read_text(errors="replace")
    except OSError:
        return frozenset()  # configured and unreadable: no machine is listed, so none counts (closed, not open)
    keys = set()
    for line in text.splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if not any(p.startswith(PRINCIPAL) for p in words[0].split(",")):
            continue
        for n, word in enumerate(words[:-1]):
            if word == sshsig.KEY_TYPE:
                keys.add(f"{word} {words[n + 1]}")
                break
    return frozenset(keys) or None
