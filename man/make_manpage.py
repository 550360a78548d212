"""The manual page, generated from docs/cli.md: man/git-swarm.1 and man/gitswarm.1.

    python man/make_manpage.py          # write both pages
    python man/make_manpage.py --check  # exit 1 when they are not what docs/cli.md gives

docs/cli.md stays the one description of the command line; the page is that
text in roff, with a NAME and a SYNOPSIS before it and SEE ALSO after it.
`git swarm --help` runs `man git-swarm`, so the package installs both pages
under share/man/man1 (pyproject.toml, shared-data). tests/cli/test_manpage.py
runs the check and looks for every command in the page.

What docs/cli.md may hold: `#`/`##` headings, paragraphs, tables (a table
becomes one tagged paragraph per row), fenced code blocks, inline code
(single or double backticks) and links (their text is kept).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "cli.md"
PAGES = (ROOT / "man" / "git-swarm.1", ROOT / "man" / "gitswarm.1")
SUMMARY = "run swarms of coding agents on a git repository, with all durable state in git"

_CODE = re.compile(r"``(.+?)``|`([^`]+)`", re.DOTALL)
_LINK = re.compile(r"\[([^\]]+)\]\(([^)]+)\)")
_CELL = re.compile(r"(?<!\\)\|")


def version() -> str:
    text = (ROOT / "gitswarm" / "__init__.py").read_text()
    return re.search(r'__version__ = "([^"]+)"', text).group(1)


def escape(text: str) -> str:
    """Plain text for roff: backslashes as \\e, hyphens as \\- (so that options copy as typed),
    anything beyond ASCII as a \\[uXXXX] escape (a page is read without knowing its encoding)."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return text if text.isascii() else "".join(c if c.isascii() else f"\\[u{ord(c):04X}]" for c in text)


def inline(text: str) -> str:
    """Markdown text as roff: code in bold, links as their text. A code span may run over a line
    break (it is one line in roff)."""
    text = _LINK.sub(lambda m: m.group(1), text)
    out, at = [], 0
    for match in _CODE.finditer(text):
        out.append(escape(text[at : match.start()]))
        code = " ".join((match.group(1) or match.group(2)).split("\n"))
        out.append("\\fB" + escape(code) + "\\fR")
        at = match.end()
    out.append(escape(text[at:]))
    return "".join(out)


def line(text: str) -> str:
    """A roff text line: one that starts with . or ' would be read as a request."""
    return "\\&" + text if text.startswith((".", "'")) else text


def cells(row: str) -> list[str]:
    return [cell.strip().replace("\\|", "|") for cell in _CELL.split(row.strip().strip("|"))]


def table(rows: list[str]) -> list[str]:
    """A markdown table as tagged paragraphs: the first column the tag, the second the text,
    any other column a line `HEADER: value` under it."""
    header, body = cells(rows[0]), [cells(r) for r in rows[2:]]
    out = []
    for row in body:
        out += [".TP", line(inline(row[0])), line(inline(row[1]))]
        for name, value in zip(header[2:], row[2:]):
            out += [".br", line(f"{inline(name)}: {inline(value)}")]
    return out


def body(markdown: str) -> list[str]:
    """docs/cli.md after its title: the first paragraphs as DESCRIPTION, each `##` a section."""
    out = [".SH DESCRIPTION"]
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        text = lines[i]
        if text.startswith("# ") or not text.strip():
            i += 1
        elif text.startswith("## "):
            out.append(".SH " + escape(text[3:].upper()))
            i += 1
        elif text.startswith("```"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            out += [".PP", ".RS 4", ".nf", *(line(escape(code)) for code in lines[i + 1 : end]), ".fi", ".RE"]
            i = end + 1
        elif text.startswith("|"):
            end = next((j for j in range(i, len(lines)) if not lines[j].startswith("|")), len(lines))
            out += table(lines[i:end])
            i = end
        else:
            end = next((j for j in range(i, len(lines)) if not lines[j].strip() or lines[j].startswith(("#", "|", "```"))), len(lines))
            out += [".PP", *(line(t) for t in inline("\n".join(lines[i:end])).split("\n"))]
            i = end
    return out


def manpage(markdown: str, name: str) -> str:
    head = [
        f'.TH {escape(name.upper())} 1 "" "gitswarm {version()}" "gitswarm manual"',
        ".SH NAME",
        f"{escape(name)} \\- {escape(SUMMARY)}",
        ".SH SYNOPSIS",
        ".B gitswarm",
        "[\\fB\\-\\-json\\fR] [\\fB\\-C\\fR \\fIPATH\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...",
        ".br",
        ".B git swarm",
        "[\\fB\\-\\-json\\fR] [\\fB\\-C\\fR \\fIPATH\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...",
        ".br",
        ".B gitswarm help",
        "[\\fICOMMAND\\fR]...",
    ]
    tail = [
        ".SH SEE ALSO",
        ".BR git (1),",
        ".BR git\\-notes (1).",
        "In the source: README.md, docs/architecture.md, docs/format.md, docs/adapters.md, docs/sharing.md.",
    ]
    generated = ['.\\" Generated from docs/cli.md by man/make_manpage.py: edit those, not this.']
    return "\n".join(generated + head + body(markdown) + tail) + "\n"


def main() -> int:
    markdown = DOCS.read_text()
    stale = []
    for page in PAGES:
        text = manpage(markdown, page.stem)
        if "--check" in sys.argv:
            if not page.exists() or page.read_text() != text:
                stale.append(page.name)
        else:
            page.write_text(text)
    if stale:
        print(f"{', '.join(stale)} not in step with docs/cli.md: run python man/make_manpage.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
