"""The one output sink: JSON on stdout with --json, plain text otherwise; logs to stderr.

Everything printed goes through here escaped (gitswarm.cli.escape): text from
records never reaches the terminal with its control characters live.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import msgspec

from gitswarm.cli.escape import escape, escape_data, escape_lines, json_safe
from gitswarm.engine.results import plain
from gitswarm.model.paths import json_showing_bytes

_json = msgspec.json.Encoder(order="deterministic")


class Output:
    def __init__(self, json_mode: bool = False) -> None:
        self.json_mode = json_mode

    def result(self, data: Any, human: Callable[[Any], str]) -> None:
        """Print a command's result: `data` as one JSON document, or `human(data)`.

        `human` gets the data with every string escaped, so a value cannot add
        lines or controls to its layout; what it returns is escaped again.
        """
        if isinstance(data, msgspec.Struct):  # a result type: printed and rendered as plain data
            data = plain(data)
        if self.json_mode:
            encoded = json_showing_bytes(_json.encode, data)  # a path that is not UTF-8: its bytes as `\xff`
            if encoded.isascii() and b"\x7f" not in encoded and hasattr(sys.stdout, "buffer"):
                sys.stdout.flush()  # nothing to escape: the bytes as they are (10,000 tasks are 2.4 MB)
                sys.stdout.buffer.write(encoded)
                sys.stdout.buffer.write(b"\n")
                return
            sys.stdout.write(json_safe(encoded.decode()) + "\n")
            return
        text = human(escape_data(data))
        if text:
            print(escape_lines(text))

    def info(self, message: str) -> None:
        """One line on stderr."""
        print(escape(message), file=sys.stderr)


def error_line(message: str) -> None:
    """One line on stderr, whatever the message held."""
    first = " ".join(str(message).split("\n")[0].split()) or "error"
    print(f"gitswarm: {escape(first)}", file=sys.stderr)
