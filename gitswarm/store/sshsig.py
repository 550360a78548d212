"""SSH signatures (OpenSSH's PROTOCOL.sshsig) made and checked in process, for Ed25519 keys.

The format is the one `ssh-keygen -Y sign` writes and git puts in a commit's
`gpgsig` header when `gpg.format = ssh`: so a commit gitswarm signs this way
passes `git verify-commit` against an allowed-signers file that lists the
key, and `ssh-keygen -Y verify` reads our signatures. Doing it in process
costs tens of microseconds where a `ssh-keygen` spawn costs milliseconds:
a machine signs every push it makes (docs/many-machines.md, Signatures).

A signature covers `MAGIC, namespace, reserved, hash algorithm, H(message)`;
its blob is `MAGIC, version, public key, namespace, reserved, hash algorithm,
signature`, each string length-prefixed (uint32, big-endian), armored as
base64 between BEGIN and END lines.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

MAGIC = b"SSHSIG"
VERSION = 1
KEY_TYPE = "ssh-ed25519"
HASH = "sha512"
ARMOR_BEGIN = "-----BEGIN SSH SIGNATURE-----"
ARMOR_END = "-----END SSH SIGNATURE-----"
GIT_NAMESPACE = "git"  # what git signs commits in
MAX_ARMOR = 4096  # an Ed25519 signature's armor is ~300 bytes; anything far bigger is not one


class BadSignature(ValueError):
    """Not a valid SSH signature of the data (malformed, another namespace, another key type, or forged)."""


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def public_blob(public: Ed25519PublicKey) -> bytes:
    """The SSH wire form of an Ed25519 public key: `string "ssh-ed25519", string key`."""
    return _string(KEY_TYPE.encode()) + _string(public.public_bytes_raw())


def public_line(public: Ed25519PublicKey) -> str:
    """`ssh-ed25519 BASE64`, as an authorized-keys or allowed-signers line writes the key."""
    return f"{KEY_TYPE} {base64.b64encode(public_blob(public)).decode()}"


def _signed_data(namespace: str, message: bytes) -> bytes:
    return MAGIC + _string(namespace.encode()) + _string(b"") + _string(HASH.encode()) + _string(hashlib.sha512(message).digest())


def sign(key: Ed25519PrivateKey, message: bytes, namespace: str = GIT_NAMESPACE) -> str:
    """The armored SSH signature of `message` by `key` in `namespace`."""
    signature = key.sign(_signed_data(namespace, message))
    blob = (
        MAGIC + struct.pack(">I", VERSION) + _string(public_blob(key.public_key())) + _string(namespace.encode())
        + _string(b"") + _string(HASH.encode()) + _string(_string(KEY_TYPE.encode()) + _string(signature))
    )
    body = base64.b64encode(blob).decode()
    return "\n".join([ARMOR_BEGIN, *(body[i:i + 70] for i in range(0, len(body), 70)), ARMOR_END]) + "\n"


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise BadSignature("the signature is cut short")
        chunk = self.data[self.at:self.at + n]
        self.at += n
        return chunk

    def uint32(self) -> int:
        value: int = struct.unpack(">I", self.take(4))[0]
        return value

    def string(self) -> bytes:
        return self.take(self.uint32())


def verify(armored: str, message: bytes, namespace: str = GIT_NAMESPACE) -> str:
    """The public key line (`ssh-ed25519 BASE64`) whose holder signed `message` in `namespace`;
    BadSignature when `armored` is no such signature."""
    if len(armored) > MAX_ARMOR:
        raise BadSignature("the signature is too long to be an Ed25519 one")
    lines = [line.strip() for line in armored.strip().splitlines()]
    if len(lines) < 3 or lines[0] != ARMOR_BEGIN or lines[-1] != ARMOR_END:
        raise BadSignature("not an SSH signature (no BEGIN/END SSH SIGNATURE lines)")
    try:
        blob = base64.b64decode("".join(lines[1:-1]), validate=True)
    except (binascii.Error, ValueError):
        raise BadSignature("the signature is not base64") from None
    read = _Reader(blob)
    if read.take(len(MAGIC)) != MAGIC or read.uint32() != VERSION:
        raise BadSignature("not an SSHSIG version 1 signature")
    key_blob = read.string()
    signed_ns, _reserved, hash_name, sig_blob = read.string(), read.string(), read.string(), read.string()
    if signed_ns != namespace.encode():
        raise BadSignature(f"signed in namespace {signed_ns.decode(errors='replace')!r}, not {namespace!r}")
    if hash_name not in (b"sha512", b"sha256"):
        raise BadSignature(f"unknown hash {hash_name.decode(errors='replace')!r}")
    key = _Reader(key_blob)
    if key.string() != KEY_TYPE.encode():
        raise BadSignature("not an Ed25519 key (only ssh-ed25519 is checked here)")
    raw_key = key.string()
    sig = _Reader(sig_blob)
    if sig.string() != KEY_TYPE.encode():
        raise BadSignature("the signature is not an Ed25519 one")
    raw_sig = sig.string()
    if len(raw_key) != 32 or len(raw_sig) != 64:
        raise BadSignature("a malformed Ed25519 key or signature")
    digest = hashlib.new(hash_name.decode(), message).digest()
    data = MAGIC + _string(signed_ns) + _string(b"") + _string(hash_name) + _string(digest)
    try:
        Ed25519PublicKey.from_public_bytes(raw_key).verify(raw_sig, data)
    except InvalidSignature:
        raise BadSignature("the signature does not match the data") from None
    return f"{KEY_TYPE} {base64.b64encode(key_blob).decode()}"
