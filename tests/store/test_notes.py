"""Review notes under refs/notes/swarm: git reads them, lines stay sorted and unique, CAS loses nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from gitswarm.store.git import PygitRepo
from gitswarm.store.layout import NOTES_REF
from gitswarm.store.notes import add_note_line, read_note
from tests.conftest import git

WHO = ("gitswarm", "gitswarm@localhost")


def head(path: Path) -> str:
    return git(path, "rev-parse", "HEAD").strip()


def show(path: Path, commit: str) -> str:
    return git(path, "notes", "--ref=swarm", "show", commit)


def test_a_note_line_is_what_git_notes_show_prints(repo: Path) -> None:
    commit = head(repo)
    add_note_line(PygitRepo(repo), commit, b'{"kind":"verdict","accepted":true}', WHO, 1_700_000_000.0)
    assert show(repo, commit) == '{"kind":"verdict","accepted":true}\n'
    tip = git(repo, "rev-parse", NOTES_REF).strip()
    assert git(repo, "log", "-1", "--format=%an <%ae> %at", tip).strip() == "gitswarm <gitswarm@localhost> 1700000000"
    assert read_note(PygitRepo(repo), commit) == [b'{"kind":"verdict","accepted":true}']


def test_git_log_with_notes_shows_the_record(repo: Path) -> None:
    commit = head(repo)
    add_note_line(PygitRepo(repo), commit, b"verdict: complete/clean/aligned", WHO, 1.0)
    out = git(repo, "log", "-1", "--notes=swarm", commit)
    assert "Notes (swarm):\n    verdict: complete/clean/aligned" in out


def test_lines_stay_sorted_and_unique_and_each_note_is_one_commit(repo: Path) -> None:
    repo_ = PygitRepo(repo)
    commit = head(repo)
    for n, line in enumerate([b"c", b"a", b"b", b"a", b"c"]):
        add_note_line(repo_, commit, line, WHO, float(n))
    assert show(repo, commit) == "a\nb\nc\n"
    assert read_note(repo_, commit) == [b"a", b"b", b"c"]
    assert int(git(repo, "rev-list", "--count", NOTES_REF)) == 3  # one commit per new line; a duplicate writes nothing


def test_notes_on_two_commits_are_kept_apart(repo: Path) -> None:
    repo_ = PygitRepo(repo)
    first = head(repo)
    git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    second = head(repo)
    add_note_line(repo_, first, b"one", WHO, 1.0)
    add_note_line(repo_, second, b"two", WHO, 2.0)
    assert show(repo, first) == "one\n" and show(repo, second) == "two\n"
    assert read_note(repo_, "0" * 40) == []


def test_a_line_with_a_newline_is_refused(repo: Path) -> None:
    with pytest.raises(ValueError):
        add_note_line(PygitRepo(repo), head(repo), b"two\nlines", WHO, 1.0)
    assert git(repo, "for-each-ref", "refs/notes") == ""


def test_an_existing_note_written_by_git_is_extended_not_replaced(repo: Path) -> None:
    commit = head(repo)
    git(repo, "notes", "--ref=swarm", "add", "-m", "zz from git", commit)
    add_note_line(PygitRepo(repo), commit, b"aa from gitswarm", WHO, 1.0)
    assert show(repo, commit) == "aa from gitswarm\nzz from git\n"


def test_a_fanned_out_notes_tree_is_respected(repo: Path) -> None:
    """When the notes tree already stores `ab/cdef...` (git fans out large note sets), the line goes there."""
    commit = head(repo)
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=b"from git\n", capture_output=True, check=True).stdout.decode().strip()
    inner = subprocess.run(
        ["git", "mktree"], cwd=repo, input=f"100644 blob {blob}\t{commit[2:]}\n".encode(), capture_output=True, check=True
    ).stdout.decode().strip()
    outer = subprocess.run(
        ["git", "mktree"], cwd=repo, input=f"040000 tree {inner}\t{commit[:2]}\n".encode(), capture_output=True, check=True
    ).stdout.decode().strip()
    tip = git(repo, "commit-tree", outer, "-m", "fanned notes").strip()
    git(repo, "update-ref", NOTES_REF, tip)
    assert show(repo, commit) == "from git\n"

    repo_ = PygitRepo(repo)
    assert read_note(repo_, commit) == [b"from git"]
    add_note_line(repo_, commit, b"added", WHO, 1.0)
    assert show(repo, commit) == "added\nfrom git\n"
    tree = git(repo, "ls-tree", "-r", "--name-only", NOTES_REF).split()
    assert tree == [f"{commit[:2]}/{commit[2:]}"]  # not a second, flat copy beside it


def test_concurrent_threads_never_lose_a_line(repo: Path) -> None:
    commit = head(repo)
    threads, per = 6, 8
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads)

    def writer(n: int) -> None:
        own = PygitRepo(repo)  # each writer its own repository handle, as separate workers have
        barrier.wait()
        try:
            for i in range(per):
                add_note_line(own, commit, f"writer {n} line {i}".encode(), WHO, float(i))
        except BaseException as exc:  # reported below
            errors.append(exc)

    pool = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert errors == []
    expected = sorted(f"writer {n} line {i}" for n in range(threads) for i in range(per))
    assert show(repo, commit).splitlines() == expected


WRITER = textwrap.dedent(
    """
    import sys
    from gitswarm.model.errors import InternalError
    from gitswarm.store.git import PygitRepo
    from gitswarm.store.notes import add_note_line

    path, commit, n, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    repo = PygitRepo(path)
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(count):
        line = f"process {n} line {i}"
        try:
            add_note_line(repo, commit, line.encode(), ("gitswarm", "gitswarm@localhost"), float(i))
        except InternalError:  # gave up after its CAS retries: the caller was told
            print("gave up", line, flush=True)
        else:
            print("written", line, flush=True)
    """
)


def test_concurrent_processes_never_lose_an_acknowledged_line(repo: Path) -> None:
    """Every write that returned is in the note, once; nothing else is (CAS: no lost updates)."""
    commit = head(repo)
    # a second commit gets notes at the same time: a different path in the same notes tree
    git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    other = head(repo)
    writers, per = 4, 10
    targets = [commit if n % 2 == 0 else other for n in range(writers)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(repo), targets[n], str(n), str(per)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(writers)
    ]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    for p in procs:  # release them together
        p.stdin.write("go\n")
        p.stdin.flush()
    written: dict[str, list[str]] = {commit: [], other: []}
    gave_up = 0
    for n, p in enumerate(procs):
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        for line in out.splitlines():
            verb, _, text = line.partition(" ")
            if verb == "written":
                written[targets[n]].append(text)
            else:
                assert verb == "gave", line
                gave_up += 1
    assert show(repo, commit).splitlines() == sorted(written[commit])
    assert show(repo, other).splitlines() == sorted(written[other])
    assert int(git(repo, "rev-list", "--count", NOTES_REF)) == writers * per - gave_up
    assert gave_up <= writers * per // 4, f"{gave_up} of {writers * per} writes gave up"
    git(repo, "fsck", "--no-progress")
