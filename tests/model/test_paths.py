"""File names as text: plain UTF-8 names as they are, any other in git's quoted form, and back."""

from __future__ import annotations

import subprocess
from pathlib import Path

import msgspec
import pytest

from gitswarm.model.artifacts import FileChange
from gitswarm.model.paths import quote_path, unquote_path

NAMES = [b"plain.txt", "src/café.py".encode(), b"caf\xe9.txt", b'a"b', b"back\\slash", b"tab\there", b"nl\n", b"\x7f\x01", b"\xff\xfe", b'"', b""]


@pytest.mark.parametrize("name", NAMES)
def test_every_name_round_trips_through_text_a_record_can_hold(name: bytes) -> None:
    text = quote_path(name)
    assert unquote_path(text) == name
    change = FileChange(path=text, added=1, deleted=0)
    assert msgspec.json.decode(msgspec.json.encode(change), type=FileChange) == change


def test_plain_names_are_kept_and_others_quoted_as_git_quotes_them(tmp_path: Path) -> None:
    assert quote_path("src/café.py".encode()) == "src/café.py"
    assert quote_path(b"caf\xe9.txt") == '"caf\\351.txt"'
    assert quote_path(b"tab\there") == '"tab\\there"'
    # git's own quoting (core.quotePath=true) of names that are not UTF-8 or need escapes is the same text
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for name in (b"caf\xe9.txt", b'a"b', b"tab\there", b"back\\slash"):
        (tmp_path / name.decode("utf-8", "surrogateescape")).write_bytes(b"x")
    listed = subprocess.run(["git", "ls-files", "--others"], cwd=tmp_path, capture_output=True, check=True).stdout
    assert sorted(listed.decode().splitlines()) == sorted(quote_path(n) for n in (b"caf\xe9.txt", b'a"b', b"tab\there", b"back\\slash"))
