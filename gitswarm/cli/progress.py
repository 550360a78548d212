"""Progress of `run` and `work`: JSON lines on stderr, or a live view on a terminal.

rich costs ~60 ms to import, so it is imported only when it draws: the live
view (gitswarm.cli.live) on a terminal, and markdown for a terminal. With
--json or a pipe, `run` never pays for it.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import msgspec

from gitswarm.cli.escape import escape_lines, json_safe
from gitswarm.model.paths import json_showing_bytes

if TYPE_CHECKING:
    from gitswarm.cli.live import LiveView

_json = msgspec.json.Encoder()  # keeps "event" first, as written


class JsonEvents:
    """One JSON object per line on stderr."""

    def __enter__(self) -> JsonEvents:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def __call__(self, event: dict[str, Any]) -> None:
        sys.stderr.write(json_safe(json_showing_bytes(_json.encode, {**event, "t": round(time.time(), 3)}).decode()) + "\n")
        sys.stderr.flush()


def progress_sink(json_mode: bool) -> JsonEvents | LiveView:
    if json_mode or not sys.stderr.isatty():
        return JsonEvents()
    from gitswarm.cli.live import LiveView  # rich: only on a terminal

    return LiveView()


def print_markdown(text: str) -> None:
    """Markdown, rendered on a terminal; the text itself otherwise. Control characters escaped either way."""
    text = escape_lines(text)
    if not sys.stdout.isatty():
        sys.stdout.write(text)
        return
    from rich.console import Console  # rich: only on a terminal
    from rich.markdown import Markdown

    Console().print(Markdown(text))
