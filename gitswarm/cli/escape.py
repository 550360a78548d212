"""Text from records made safe for a terminal: control characters are printed as escapes, never sent.

Records may have been pulled from another clone and written by anyone: a goal,
a task's error or a reviewer's name holding ESC, CR or a bidirectional override
could recolour, rewrite or hide what the terminal shows. What is escaped: C0
controls, DEL, C1 controls, the Unicode line and paragraph separators, and the
bidirectional embeddings, overrides and isolates.
"""

from __future__ import annotations

import re
from typing import Any

_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_ANY = re.compile(f"[\t\n{_CONTROLS}]")
_BUT_LINES = re.compile(f"[{_CONTROLS}]")  # multi-line text: newlines and tabs are its layout
_NOT_IN_JSON = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")  # what JSON leaves raw
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape_one(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def escape(text: str) -> str:
    """One-line text: every control character, newlines and tabs too, as a visible escape (ESC as `\\x1b`)."""
    return _ANY.sub(_escape_one, text)


def escape_lines(text: str) -> str:
    """Multi-line text (a table, a markdown summary): as `escape`, but newlines and tabs stay."""
    return _BUT_LINES.sub(_escape_one, text)


def escape_data(data: Any) -> Any:
    """A command's result with every string in it (dict keys too) escaped as by `escape`."""
    if isinstance(data, str):
        return escape(data)
    if isinstance(data, dict):
        return {escape_data(key): escape_data(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [escape_data(item) for item in data]
    return data


def json_safe(encoded: str) -> str:
    """Encoded JSON with the characters JSON leaves raw (DEL, C1, separators, bidi) as `\\u` escapes.

    Outside strings JSON holds none of them, so this changes no value: the
    document decodes to exactly what was encoded.
    """
    return _NOT_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", encoded)
