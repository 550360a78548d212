"""File names as text: git paths are bytes, records are UTF-8 JSON.

A name that is valid UTF-8 and has nothing git would escape is kept as it
is. Any other name (not UTF-8, or holding a control character, a double
quote or a backslash) is written in git's quoted form: in double quotes,
with C escapes (`\\t`, `\\n`, `\\"`, `\\\\`) and octal escapes for the other
bytes (`caf\\351.txt`), the way `git diff` prints it. A plain name never
contains a double quote, so the two forms cannot be confused and
`unquote_path(quote_path(name)) == name` for every name.

A path from the filesystem that is not UTF-8 (a repository in a directory
named with byte 0xFF) reaches Python as text holding lone surrogates
(os.fsdecode's surrogateescape), which neither a UTF-8 stream nor a JSON
encoder takes: where such text is printed or sent, each is shown as the byte
it stands for, `\\xff` (`bytes_shown`, `json_showing_bytes`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

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


def bytes_shown(text: str) -> str:
    """`text` with each lone surrogate as the byte it stands for: U+DC80..U+DCFF as `\\x80`..`\\xff`
    (surrogateescape), any other as `\\udXXX`. (Text without one, nearly all, is only encoded once, at C speed.)"""
    try:
        text.encode()
    except UnicodeEncodeError:
        return "".join(_surrogate(char) if "\ud800" <= char <= "\udfff" else char for char in text)
    return text


def _surrogate(char: str) -> str:
    code = ord(char)
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def bytes_shown_in(data: Any) -> Any:
    """`data` with every string in it (dict keys too) as `bytes_shown` makes it; nothing else changed."""
    if isinstance(data, str):
        return data if data.isprintable() else bytes_shown(data)
    if isinstance(data, dict):
        return {bytes_shown_in(key): bytes_shown_in(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [bytes_shown_in(item) for item in data]
    return data


def json_showing_bytes(encode: Callable[[Any], bytes], data: Any) -> bytes:
    """`encode(data)` (a JSON encoder); data holding a lone surrogate encoded with its bytes shown (`\\xff`).

    (The walk is done only when the encoder refuses: nearly every document has nothing to walk.)"""
    try:
        return encode(data)
    except UnicodeEncodeError:
        return encode(bytes_shown_in(data))
