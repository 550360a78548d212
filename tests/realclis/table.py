"""The results table the suite fills in and prints at the end (conftest.py)."""

from __future__ import annotations

COLUMNS = ("version", "preflight", "implement+merge", "rejected", "analyze findings", "cost/tokens", "isolation/egress", "endpoint sandbox", "remote", "pilot (mcp)")
#: {cli: {column: cell}}, filled by the tests, printed at the end.
TABLE: dict[str, dict[str, str]] = {}
NOTES: dict[str, list[str]] = {}


def record(cli: str, column: str, cell: str) -> None:
    TABLE.setdefault(cli, {})[column] = cell


def note(cli: str, text: str) -> None:
    if text not in NOTES.setdefault(cli, []):
        NOTES[cli].append(text)


def render_table() -> str:
    head = ["CLI", *COLUMNS]
    rows = [[cli, *(TABLE[cli].get(c, "not run") for c in COLUMNS)] for cli in TABLE]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in row) + " |" for row in rows]
    for cli, notes in NOTES.items():
        if notes:
            lines.append("")
            lines.append(f"{cli}:")
            lines += [f"  - {n}" for n in notes]
    return "\n".join(lines) + "\n"
