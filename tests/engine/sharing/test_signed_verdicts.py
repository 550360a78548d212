"""Verdicts signed with real SSH keys, the way git signs commits (`gpg.format = ssh`).

Clone A (alice) signs its verdicts with an ed25519 key made here by
`ssh-keygen`; it delegates a change and pushes the job, the notes and the
patch's branch to a bare remote. Clone B pulls them and counts a verdict
only when its `gpg.ssh.allowedSignersFile` lists alice's key for her
principal: then a pulled job's patch merges on A's word (no approval, no
check run in B); an unknown signer, an unsigned verdict, a tampered verdict
or seal never count, and merge then wants the job approved and verified
here. A person's counted review is shown but never makes a patch mergeable,
and a clone's own verdicts count for itself with no signing set up at all.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import cli, clone_of, git, ok, rev, seeded_remote
from tests.forge import run_git

ALICE = "alice@example.com"
# A one-task delegation whose check passes: its patch gets gitswarm's own accepted verdict.
CHECKED = 'id = "fix"\nmode = "implement"\ncommand = "echo good > code.txt"\nchecks = ["grep -qx good code.txt"]\nmax_attempts = 1'
# The same change with no checks: its patch is left unverified (no verdict of gitswarm's).
UNCHECKED = 'id = "fix"\nmode = "implement"\ncommand = "echo good > code.txt"\nmax_attempts = 1'




def keygen(root: Path, name: str) -> Path:
    """A fresh passphrase-less ed25519 key pair; the private key's path (the public one is beside it, .pub)."""
    key = root / "keys" / name
    key.parent.mkdir(exist_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True, capture_output=True)
    return key


def public(key: Path) -> str:
    """`ssh-ed25519 AAAA...`: the public key as an allowed-signers line wants it (no comment)."""
    return " ".join(Path(f"{key}.pub").read_text().split()[:2])


@dataclass
class Shared:
    root: Path
    a: Path  # alice's clone
    b: Path  # her teammate's
    alice: Path  # alice's private key
    job: str
    patch: str  # the patch's artifact id
    head: str  # the patch's head commit
    base: str  # main before any merge


def shared(root: Path, sign: bool, task: str = CHECKED) -> Shared:
    """A bare remote; A delegates `task` (signing its verdicts when `sign`) and pushes the job, the notes
    and the patch's branch; B pulls the swarm state and fetches the branch. B allows no signer yet."""
    remote = seeded_remote(root)
    a, b = clone_of(root, "a", remote), clone_of(root, "b", remote)
    alice = keygen(root, "alice")
    git(a, "config", "user.email", ALICE)
    if sign:
        git(a, "config", "gpg.format", "ssh")
        git(a, "config", "user.signingkey", str(alice))
    (a / "spec.toml").write_text(f'goal = "make it good"\n[[tasks]]\n{task}\n')
    job = ok(cli(a, "--json", "submit", "spec.toml")).json()["id"]
    ok(cli(a, "--json", "work", "--until-idle", "-j", "1"))
    ok(cli(a, "push"))
    git(a, "push", "-q", "origin", "refs/heads/swarm/*:refs/heads/swarm/*")
    pulled = ok(cli(b, "--json", "pull")).json()
    assert pulled["new"] == [job] and not pulled["invalid"] and not pulled["invalid_notes"], pulled
    git(b, "fetch", "-q", "origin", "refs/heads/swarm/*:refs/heads/swarm/*")
    patch = next(x["id"] for x in ok(cli(b, "--json", "artifacts", job)).json()["artifacts"] if x["kind"] == "patch")
    head = ok(cli(b, "--json", "artifact", patch)).json()["record"]["head"]
    return Shared(root, a, b, alice, job, patch, head, rev(b, "main"))


def allow(clone: Path, root: Path, *lines: str) -> None:
    """Point the clone's gpg.ssh.allowedSignersFile at a file of these `principal key` lines."""
    path = root / f"allowed-{clone.name}"
    path.write_text("".join(line + "\n" for line in lines))
    git(clone, "config", "gpg.ssh.allowedSignersFile", str(path))


def reviews(clone: Path, job: str, head: str) -> list[dict]:
    """The verdicts `status JOB` lists on a patch head, oldest first."""
    return ok(cli(clone, "--json", "status", job)).json().get("reviews", {}).get(head, [])


def checks_recorded(clone: Path, job: str) -> int:
    return sum(x["kind"] == "check" for x in ok(cli(clone, "--json", "artifacts", job)).json()["artifacts"])


def note_lines(clone: Path, commit: str) -> list[str]:
    return git(clone, "notes", "--ref=swarm", "show", commit).splitlines()


def rewrite_note(clone: Path, commit: str, lines: list[str]) -> None:
    """Replace the note on `commit` by hand, with git's own notes plumbing."""
    path = clone.parent / "forged-note"
    path.write_text("".join(line + "\n" for line in lines))
    run_git(clone, "notes", "--ref=swarm", "add", "-f", "-F", str(path), commit)


def assert_merge_wants_approval(s: Shared) -> None:
    """Nothing counts in B: merge must verify the pulled patch here, which needs the job approved first."""
    before = git(s.b, "for-each-ref")
    refused = cli(s.b, "--json", "merge", s.patch, "--into", "main")
    assert refused.code == 2, (refused.code, refused.out, refused.err)
    assert "approve" in refused.err, refused.err
    assert rev(s.b, "main") == s.base
    assert git(s.b, "for-each-ref") == before
    assert not (s.b / "code.txt").exists()


# -- an allowed signer's verdict counts -----------------------------------------------------------


def test_a_verdict_signed_by_an_allowed_key_counts_and_merges_without_approval_or_checks(tmp_path: Path) -> None:
    s = shared(tmp_path, sign=True)
    allow(s.b, tmp_path, f"{ALICE} {public(s.alice)}")
    [view] = reviews(s.b, s.job, s.head)
    assert (view["producer"], view["accepted"]) == ("gitswarm", True)
    assert view["counted"] is True
    assert view["provenance"] == f"signed by {ALICE}"
    # B never approved the pulled job, and merging runs no check: A's signed acceptance is enough
    trust = json.loads((s.b / ".git" / "gitswarm" / "trust.json").read_text())
    assert trust["origins"].get(s.job) == "origin" and s.job not in trust["approved"]
    checks = checks_recorded(s.b, s.job)
    merged = ok(cli(s.b, "--json", "merge", s.patch, "--into", "main")).json()
    assert merged["fast_forward"] is True and merged["old"] == s.base and merged["new"] == s.head
    assert rev(s.b, "main") == s.head
    assert (s.b / "code.txt").read_text() == "good\n"  # the checked-out main came along
    assert checks_recorded(s.b, s.job) == checks


# -- signatures that do not count ---------------------------------------------------------------


@pytest.mark.parametrize("who", ["bob-only", "alice-with-bobs-key", "no-allowed-signers-file"])
def test_a_verdict_signed_by_a_key_not_allowed_does_not_count(tmp_path: Path, who: str) -> None:
    s = shared(tmp_path, sign=True)
    bob = keygen(tmp_path, "bob")
    if who == "bob-only":
        allow(s.b, tmp_path, f"bob@example.com {public(bob)}")
    elif who == "alice-with-bobs-key":
        allow(s.b, tmp_path, f"bob@example.com {public(bob)}", f"{ALICE} {public(bob)}")
    [view] = reviews(s.b, s.job, s.head)
    assert (view["counted"], view["provenance"]) == (False, "unknown signer")
    assert view["accepted"] is True  # shown as it claims, never weighed
    assert_merge_wants_approval(s)


def test_a_verdict_sealed_without_signing_counts_only_in_the_clone_that_made_it(tmp_path: Path) -> None:
    s = shared(tmp_path, sign=False)
    allow(s.b, tmp_path, f"{ALICE} {public(s.alice)}")  # allowing alice does not help: nothing is signed
    seal = next(json.loads(line) for line in note_lines(s.b, s.head) if json.loads(line)["kind"] == "seal")
    assert seal["local"] and seal["signer"] is None and seal["signature"] is None
    [view] = reviews(s.b, s.job, s.head)
    assert (view["counted"], view["provenance"]) == (False, "unsigned")
    assert_merge_wants_approval(s)
    [mine] = reviews(s.a, s.job, s.head)
    assert (mine["counted"], mine["provenance"]) == (True, "this clone")


def test_a_clones_own_verdict_counts_for_itself_with_no_signing_set_up(tmp_path: Path) -> None:
    s = shared(tmp_path, sign=False)
    for key in ("gpg.format", "user.signingkey", "gpg.ssh.allowedSignersFile"):
        assert subprocess.run(["git", "config", key], cwd=s.a, capture_output=True).returncode == 1, key
    [view] = reviews(s.a, s.job, s.head)
    assert (view["producer"], view["accepted"], view["counted"], view["provenance"]) == ("gitswarm", True, True, "this clone")
    # and it is enough to merge here, by a fast-forward with no check run again
    checks = checks_recorded(s.a, s.job)
    merged = ok(cli(s.a, "--json", "merge", s.patch, "--into", "main")).json()
    assert merged["fast_forward"] is True and rev(s.a, "main") == s.head
    assert checks_recorded(s.a, s.job) == checks


# -- tampering ------------------------------------------------------------------------------------


def _tamper_verdict(record: dict, how: str) -> None:
    if how == "reviewer":
        record["reviewer"] = "mallory"
    elif how == "created":
        record["created"] = record["created"] + 86_400 * 365
    elif how == "accepted":
        record["accepted"] = False


@pytest.mark.parametrize("how", ["reviewer", "created", "accepted", "reseal", "signature"])
def test_a_tampered_verdict_or_seal_does_not_count(tmp_path: Path, how: str) -> None:
    """In B, the note on the patch head is rewritten by hand: the verdict changed under its seal
    (or with the seal pointed at the changed verdict, its signature kept), or the signature's body
    changed by one character. Alice stays allowed; none of it counts."""
    s = shared(tmp_path, sign=True)
    allow(s.b, tmp_path, f"{ALICE} {public(s.alice)}")
    assert [v["counted"] for v in reviews(s.b, s.job, s.head)] == [True]  # before: it counts
    records = [json.loads(line) for line in note_lines(s.b, s.head)]
    [verdict] = [r for r in records if r["kind"] == "verdict"]
    [seal] = [r for r in records if r["kind"] == "seal"]
    compact = lambda r: json.dumps(r, separators=(",", ":"))  # noqa: E731
    if how == "signature":
        body = seal["signature"]
        at = len(body) // 2  # inside the signature blob, away from the padding
        seal["signature"] = body[:at] + ("B" if body[at] != "B" else "C") + body[at + 1:]
        expected = "unknown signer"
    else:
        _tamper_verdict(verdict, "created" if how == "reseal" else how)
        if how == "reseal":  # the seal now names the changed verdict; the signature is still alice's of the old line
            import hashlib

            seal["verdict"] = hashlib.sha256(compact(verdict).encode()).hexdigest()
            expected = "unknown signer"
        else:
            expected = "unsigned"  # no seal names the changed verdict
    rewrite_note(s.b, s.head, [compact(verdict), compact(seal)])
    [view] = reviews(s.b, s.job, s.head)
    assert (view["counted"], view["provenance"]) == (False, expected), view
    assert_merge_wants_approval(s)


# -- a person's review -----------------------------------------------------------------------------


def test_a_persons_signed_review_counts_elsewhere_but_never_makes_a_patch_mergeable(tmp_path: Path) -> None:
    s = shared(tmp_path, sign=True, task=UNCHECKED)
    assert reviews(s.a, s.job, s.head) == []  # no checks: gitswarm left the patch unverified
    reviewed = ok(cli(s.a, "--json", "review", s.patch, "--accept", "--note", "looks right")).json()
    assert reviewed["signed"] is True and reviewed["commit"] == s.head
    ok(cli(s.a, "push"))
    allow(s.b, tmp_path, f"{ALICE} {public(s.alice)}")
    assert ok(cli(s.b, "--json", "pull")).json()["notes"] == "updated"
    [view] = reviews(s.b, s.job, s.head)
    assert (view["producer"], view["accepted"], view["note"]) == ("person", True, "looks right")
    assert (view["counted"], view["provenance"]) == (True, f"signed by {ALICE}")
    # the deciding verdict accepts, but it is a person's, not gitswarm's checks: no merge, in B or in A
    for clone in (s.b, s.a):
        main = rev(clone, "main")
        refused = cli(clone, "--json", "merge", s.patch, "--into", "main")
        assert refused.code == 1, (clone.name, refused.code, refused.err)
        assert "no accepted verdict" in refused.err and "counts here" in refused.err
        assert rev(clone, "main") == main
