"""SSH signatures made in process: ssh-keygen and git read them, and we read ssh-keygen's."""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from gitswarm.model.errors import BadInput
from gitswarm.store import sshsig
from gitswarm.store.git import init_repo
from gitswarm.store.machine_key import MachineKey, allowed_line, allowed_machines

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
needs_ssh_keygen = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not installed")


@given(st.binary(max_size=2048), st.sampled_from(["git", "gitswarm-verdict"]))
def test_a_signature_verifies_for_its_data_and_namespace_alone(data: bytes, namespace: str) -> None:
    armored = sshsig.sign(KEY, data, namespace)
    assert sshsig.verify(armored, data, namespace) == sshsig.public_line(KEY.public_key())
    with pytest.raises(sshsig.BadSignature):
        sshsig.verify(armored, data + b"x", namespace)
    with pytest.raises(sshsig.BadSignature, match="namespace"):
        sshsig.verify(armored, data, "other")


@pytest.mark.parametrize("armored", [
    "", "not a signature", f"{sshsig.ARMOR_BEGIN}\n!!!\n{sshsig.ARMOR_END}\n", f"{sshsig.ARMOR_BEGIN}\nU1NIU0lH\n{sshsig.ARMOR_END}\n",
    f"{sshsig.ARMOR_BEGIN}\n{'A' * 5000}\n{sshsig.ARMOR_END}\n",
])
def test_what_is_not_a_signature_is_refused_never_raised_otherwise(armored: str) -> None:
    with pytest.raises(sshsig.BadSignature):
        sshsig.verify(armored, b"data")


@given(st.integers(min_value=0, max_value=400), st.integers(min_value=0, max_value=255))
def test_a_flipped_byte_anywhere_in_the_signature_is_refused(at: int, value: int) -> None:
    armored = sshsig.sign(KEY, b"payload")
    lines = armored.splitlines()
    body = bytearray("".join(lines[1:-1]).encode())
    at %= len(body)
    body[at] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[value % 64]
    changed = "\n".join([lines[0], body.decode(), lines[-1]])
    if body.decode() == "".join(lines[1:-1]):
        return  # the same byte: nothing flipped
    try:
        signer = sshsig.verify(changed, b"payload")
    except sshsig.BadSignature:
        return
    assert signer == sshsig.public_line(KEY.public_key())  # only base64 padding bits may change and still verify


@needs_ssh_keygen
def test_ssh_keygen_verifies_ours_and_we_verify_its(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    allowed.write_text(f"m@x {sshsig.public_line(KEY.public_key())}\n")
    sig = tmp_path / "data.sig"
    sig.write_text(sshsig.sign(KEY, b"hello\n"))
    done = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", "m@x", "-n", "git", "-s", str(sig)],
                          input=b"hello\n", capture_output=True)
    assert done.returncode == 0, done.stderr
    key = tmp_path / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    made = subprocess.run(["ssh-keygen", "-q", "-Y", "sign", "-f", str(key), "-n", "git"], input=b"hello\n", capture_output=True, check=True)
    public = " ".join(key.with_suffix(".pub").read_text().split()[:2])
    assert sshsig.verify(made.stdout.decode(), b"hello\n") == public


@needs_ssh_keygen
def test_a_commit_signed_by_the_machine_key_passes_git_verify_commit(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    machine = MachineKey(repo.common_dir)
    tree = repo.update_tree(None, {"f": repo.write_blob(b"x\n")})
    oid = repo.commit(tree, [], "claimed t1\n\n{}\n", ("gitswarm", "a@gitswarm"), 1_700_000_000, machine.sign)
    signature = repo.commit_signature(oid)
    assert signature is not None and sshsig.verify(*signature) == machine.public
    assert repo.commit_signature(repo.commit(tree, [], "plain\n", ("gitswarm", "a@gitswarm"), 1_700_000_000)) is None
    allowed = tmp_path / "allowed"
    allowed.write_text(allowed_line(machine.public, "vm.abc123") + "\n")
    done = subprocess.run(["git", "-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={allowed}", "verify-commit", oid],
                          cwd=tmp_path / "r", capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert 'Good "git" signature for gitswarm-machine@vm.abc123' in done.stderr


def test_the_machine_key_is_made_once_private_and_read_back(tmp_path: Path) -> None:
    first = MachineKey(tmp_path)
    public = first.public
    assert stat.S_IMODE(first.path.stat().st_mode) == 0o600
    assert MachineKey(tmp_path).public == public
    first.path.write_text("garbage")
    with pytest.raises(BadInput, match="not an unencrypted OpenSSH private key"):
        _ = MachineKey(tmp_path).public


def test_only_gitswarm_machine_principals_pin_the_machines(tmp_path: Path) -> None:
    ours = sshsig.public_line(KEY.public_key())
    allowed = tmp_path / "allowed"
    allowed.write_text(f"# people\nalice@example.com {ours}\n")
    assert allowed_machines(allowed) is None  # a file of people's keys pins no machine
    allowed.write_text(f'alice@example.com,gitswarm-machine@h namespaces="git" {ours} comment\n')
    assert allowed_machines(allowed) == frozenset({ours})
    assert allowed_machines(None) is None
    assert allowed_machines(tmp_path / "absent") == frozenset()  # configured, unreadable: closed, never open


def test_processes_making_the_machine_key_at_once_all_get_the_one_key(tmp_path: Path) -> None:
    """Workers started before any of them made the key: none reads a half-written file, all sign with one key.
    (Fresh interpreters: forking a test process that runs threads may deadlock the child.)"""
    code = "import sys; from pathlib import Path; from gitswarm.store.machine_key import MachineKey; print(MachineKey(Path(sys.argv[1])).public)"
    racing = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(12)]
    said = [process.communicate(timeout=60) for process in racing]
    assert all(process.returncode == 0 for process in racing), [err for _, err in said]
    keys = {out.strip() for out, _ in said}
    assert len(keys) == 1 and keys == {MachineKey(tmp_path).public}
    assert sorted(p.name for p in (tmp_path / "gitswarm").iterdir()) == ["machine.key"]  # no temporary file left
