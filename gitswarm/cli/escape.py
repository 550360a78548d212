"""Text from records made safe for a terminal: control characters are printed as escapes, never sent.

Records may have been pulled from another clone and written by anyone: a goal,
a task's error or a reviewer's name holding ESC, CR or a bidirectional override
could recolour, rewrite or hide what the terminal shows. What is escaped: C0
controls, DEL, C1 controls, the Unicode line and paragraph separators, and the
bidirectional embeddings, overrides and isolates.

A path that is not UTF-8 (a directory named with byte 0xFF) holds lone
surrogates, which no UTF-8 stream takes: each is printed as the byte it stands
for (`\\xff`), in the terminal and in --json alike (model/paths.py).
"""

from __future__ import annotations

from typing import Any

import msgspec

from gitswarm.model.paths import bytes_shown

# C0 controls, DEL, C1 controls, U+2028/U+2029, the bidi embeddings and overrides, the bidi isolates.
_UNSAFE = [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
_ALL = {code: _NAMED.get(code) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}") for code in _UNSAFE}
_BUT_LINES = {code: text for code, text in _ALL.items() if code not in (0x09, 0x0A)}  # multi-line text: its layout
_NOT_IN_JSON = {code: f"\\u{code:04x}" for code in _UNSAFE if code >= 0x7F}  # what a JSON encoder leaves raw

# (str.translate with tables, not regular expressions: compiling those cost ~2 ms at every start-up.
# str.isprintable() is false for every character escaped here, so plain text skips the translation.)


def escape(text: str) -> str:
    """One-line text: every control character, newlines and tabs too, as a visible escape (ESC as `\\x1b`);
    a lone surrogate as the byte it stands for (`\\xff`)."""
    return text if text.isprintable() else bytes_shown(text.translate(_ALL))


def escape_lines(text: str) -> str:
    """Multi-line text (a table, a markdown summary): as `escape`, but newlines and tabs stay."""
    if text.replace("\n", "").replace("\t", "").isprintable():
        return text
    return bytes_shown(text.translate(_BUT_LINES))


_encode = msgspec.json.Encoder().encode
# What JSON writes for the controls below U+0020; any other escape in an encoding is `\\"` or `\\\\`.
_CONTROL_ESCAPES = (b"\\n", b"\\r", b"\\t", b"\\b", b"\\f", b"\\u")


def escape_data(data: Any) -> Any:
    """A command's result with every string in it (dict keys too) escaped as by `escape`.

    Most results hold nothing to escape: one JSON encoding (C speed) says so,
    and the result is returned as it is instead of walked (a 10,000-task job
    took ~90 ms to walk). An encoding that shows a control character, or any
    character that is not printable, means the walk.
    """
    if _nothing_to_escape(data):
        return data
    return _escape_walk(data)


def _nothing_to_escape(data: Any) -> bool:
    try:
        encoded = _encode(data)
    except (TypeError, msgspec.EncodeError, UnicodeEncodeError):  # not plain data, or a lone surrogate: walk it
        return False
    if b"\\" in encoded and any(seq in encoded for seq in _CONTROL_ESCAPES):
        return False  # a control character (or a backslash before one of these letters: walked all the same)
    if encoded.isascii():
        return b"\x7f" not in encoded  # DEL is ASCII and JSON leaves it raw
    return encoded.decode().isprintable()


def _escape_walk(data: Any) -> Any:
    if isinstance(data, str):
        return escape(data)
    if isinstance(data, dict):
        return {_escape_walk(key): _escape_walk(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [_escape_walk(item) for item in data]
    return data


def json_safe(encoded: str) -> str:
    """Encoded JSON with the characters JSON leaves raw (DEL, C1, separators, bidi) as `\\u` escapes.

    Outside strings JSON holds none of them, so this changes no value: the
    document decodes to exactly what was encoded.
    """
    if encoded.isascii() and "\x7f" not in encoded:
        return encoded
    return encoded.translate(_NOT_IN_JSON)
