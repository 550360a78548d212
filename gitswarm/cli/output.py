"""The one output sink: JSON on stdout with --json, plain text otherwise; logs to stderr."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import msgspec

_json = msgspec.json.Encoder(order="deterministic")


class Output:
    def __init__(self, json_mode: bool = False) -> None:
        self.json_mode = json_mode

    def result(self, data: Any, human: Callable[[Any], str]) -> None:
        """Print a command's result: `data` as one JSON document, or `human(data)`."""
        if self.json_mode:
            sys.stdout.write(_json.encode(data).decode() + "\n")
            return
        text = human(data)
        if text:
            print(text)

    def info(self, message: str) -> None:
        print(message, file=sys.stderr)


def error_line(message: str) -> None:
    """One line on stderr, whatever the message held."""
    first = " ".join(str(message).split("\n")[0].split()) or "error"
    print(f"gitswarm: {first}", file=sys.stderr)
