"""File names as text: git paths are bytes, records are UTF-8 JSON.

A name that is valid UTF-8 and has nothing git would escape is kept as it
is. Any other name (not UTF-8, or holding a control character, a double
quote or a backslash) is written in git's quoted form: in double quotes,
with C escapes (`\\t`, `\\n`, `\\"`, `\\\\`) and octal escapes for the other
bytes (`caf\\351.txt`), the way `git diff` prints it. A plain name never
contains a double quote, so the two forms cannot be confused and
`unquote_path(quote_path(name)) == name` for every name.
"""

from __future__ import annotations

import re

_ESCAPES = {0x07: "a", 0x08: "b", 0x09: "t", 0x0A: "n", 0x0B: "v", 0x0C: "f", 0x0D: "r", 0x22: '"', 0x5C: "\\"}
_UNESCAPES = {value: key for key, value in _ESCAPES.items()}
_NEEDS_QUOTING = re.compile(r'[\x00-\x1f\x7f"\\]')
_ESCAPE = re.compile(rb"\\([0-7]{3}|.)", re.DOTALL)


def quote_path(name: bytes) -> str:
    """The name as text: as it is when it can be, else git's quoted form."""
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        return _quoted(name, high=True)
    return _quoted(name, high=False) if _NEEDS_QUOTING.search(text) else text


def unquote_path(text: str) -> bytes:
    """The name's bytes back from `quote_path`'s text."""
    if not (len(text) >= 2 and text.startswith('"') and text.endswith('"')):
        return text.encode("utf-8")
    return _ESCAPE.sub(_unescape, text[1:-1].encode("utf-8"))


def _quoted(name: bytes, high: bool) -> str:
    """`high`: escape bytes >= 0x80 too (a name that is not UTF-8); else keep them as UTF-8 text."""
    out = bytearray(b'"')
    for byte in name:
        if byte in _ESCAPES:
            out += b"\\" + _ESCAPES[byte].encode()
        elif byte < 0x20 or byte == 0x7F or (high and byte >= 0x80):
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    out += b'"'
    return out.decode("utf-8")


def _unescape(match: re.Match[bytes]) -> bytes:
    escaped = match.group(1)
    if len(escaped) == 3:
        return bytes([int(escaped, 8)])
    code = _UNESCAPES.get(escaped.decode("latin-1"))
    return bytes([code]) if code is not None else escaped
