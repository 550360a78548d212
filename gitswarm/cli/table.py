"""Plain-text tables that fit the width they are printed in.

A cell that does not fit is cut with an ellipsis; the widest columns give way
first, each down to its header's width (or MIN_COLUMN) and no further. The
width is COLUMNS when set, else the terminal's when stdout is one, else
PIPE_WIDTH: text sent to a pipe or a file is cut as well, so that it reads
the same everywhere; `--json` is never cut (it does not come through here).
Widths count characters (a wide East Asian character counts as one).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

GAP = "  "
ELLIPSIS = "…"
MIN_COLUMN = 8
PIPE_WIDTH = 100


def output_width() -> int:
    """How wide printed text may be: COLUMNS, else the terminal's width, else PIPE_WIDTH."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        if sys.stdout.isatty():
            return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError):  # no file descriptor behind stdout (a test's buffer)
        pass
    return PIPE_WIDTH


def fit(widths: Sequence[int], floors: Sequence[int], limit: int) -> list[int]:
    """Column widths whose sum, with the gaps between columns, is at most `limit` when the floors
    allow it: every column wider than some cap is cut to that cap (never below its floor), the cap
    as high as fits."""
    room = limit - len(GAP) * (len(widths) - 1)

    def capped(cap: int) -> list[int]:
        return [min(width, max(cap, floor)) for width, floor in zip(widths, floors)]

    if sum(widths) <= room:
        return list(widths)
    low, high = 0, max(widths)  # sum(capped(high)) > room; find the highest cap that fits
    while low < high:
        middle = (low + high + 1) // 2
        if sum(capped(middle)) <= room:
            low = middle
        else:
            high = middle - 1
    return capped(low)


def cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + ELLIPSIS


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], width: int | None = None) -> str:
    """Left-aligned columns two spaces apart, fitted to `width` (default: output_width())."""
    columns = list(zip(*rows)) if rows else [() for _ in headers]
    return columns_table(headers, columns, width)


def columns_table(headers: Sequence[str], columns: Sequence[Sequence[Any]], width: int | None = None) -> str:
    """As `table`, from the columns (a job of 10,000 tasks is drawn column by column, each step a
    C loop: row by row took ~20 ms)."""
    texts = [_texts(header, column) for header, column in zip(headers, columns)]
    natural = [max(map(len, column)) for column in texts]
    floors = [min(n, max(len(h), MIN_COLUMN)) for n, h in zip(natural, headers)]
    widths = fit(natural, floors, output_width() if width is None else width)
    for i, (w, n) in enumerate(zip(widths, natural)):
        if w < n:
            texts[i] = [cut(text, w) for text in texts[i]]
    line = GAP.join([*(f"%-{w}s" for w in widths[:-1]), "%s"])  # the last column unpadded
    return "\n".join(map(str.rstrip, map(line.__mod__, zip(*texts))))


LINE_BREAK = "\\n"  # a cell's line break, shown as `\n` within its row (a multi-line review note stays whole and in its row)


def _texts(header: str, column: Sequence[Any]) -> list[str]:
    """The header and the column's cells as text (None as nothing), each on one line."""
    try:
        joined = "".join(column)  # a C loop that fails on the first cell that is not text
        cells = list(column)
    except TypeError:
        cells = ["" if c is None else str(c) for c in column]
        joined = "".join(cells)
    if "\n" in joined or "\r" in joined:
        cells = [LINE_BREAK.join(c.splitlines()) if "\n" in c or "\r" in c else c for c in cells]
    return [str(header), *cells]
