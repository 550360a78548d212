"""The docs against the code: every stored record's fields are in docs/format.md (a reimplementation
from the doc must write the same blob ids), and docs/architecture.md names every module."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import msgspec
import pytest

import gitswarm
from gitswarm.model import artifacts, memory, ops, provenance, records, routing
from gitswarm.model.late_instructions import FollowUp, Guidance

ROOT = Path(__file__).resolve().parents[1]
FORMAT_DOC = (ROOT / "docs" / "format.md").read_text()
ARCHITECTURE_DOC = (ROOT / "docs" / "architecture.md").read_text()


def passage(marker: str) -> str:
    """The paragraph, or the table row, of docs/format.md that holds MARKER (the first one)."""
    at = FORMAT_DOC.find(marker)
    assert at >= 0, f"docs/format.md has no {marker!r}"
    if marker.startswith("| "):
        return FORMAT_DOC[at : FORMAT_DOC.index("\n", at)]
    start = FORMAT_DOC.rfind("\n\n", 0, at)
    end = FORMAT_DOC.find("\n\n", at)
    return FORMAT_DOC[start : end if end >= 0 else len(FORMAT_DOC)]


def fields(struct: type[msgspec.Struct]) -> tuple[str, ...]:
    return struct.__struct_fields__


def tag(struct: type[msgspec.Struct]) -> str:
    return str(struct.__struct_config__.tag)


def members(union: object) -> tuple[type[msgspec.Struct], ...]:
    return typing.get_args(union)


COMMON_ARTIFACT = passage("Tagged by `\"kind\"`")
COMMON_OP = passage("Common fields, in order:")
MEMORY_OPS = passage("Operations (common fields as a job's")

#: (what, where it is described, the fields a stored record of it has)
CASES: list[tuple[str, str, tuple[str, ...]]] = [
    ("Job", passage("`Job` —"), fields(records.Job)),
    ("Defaults", passage("`Job` —"), fields(records.Defaults)),
    ("Budget", passage("`Job` —"), fields(records.Budget)),
    ("JobState", passage("`JobState` —"), fields(records.JobState)),
    ("TaskSpec", passage("`TaskSpec` —"), fields(records.TaskSpec)),
    ("Task", passage("`Task` —"), fields(records.Task)),
    ("Guidance", passage("`Guidance` —"), fields(Guidance)),
    ("FollowUp", passage("`FollowUp` —"), fields(FollowUp)),
    ("BlobRef", passage("BlobRefs {"), fields(artifacts.BlobRef)),
    ("FileChange", passage("| `patch` |"), fields(artifacts.FileChange)),
    ("Routing", passage("A run's `routing` is the receipt"), fields(routing.Routing)),
    ("Option", passage("A run's `routing` is the receipt"), fields(routing.Option)),
    ("Seal", passage("a **seal**"), fields(provenance.Seal)),
    ("MemoryRecord", passage("`MemoryRecord` (every field"), fields(memory.MemoryRecord)),
    ("MemoryState", passage("MemoryState: v,"), fields(memory.MemoryState)),
]
CASES += [
    (f"artifact {tag(kind)}", COMMON_ARTIFACT + passage(f"| `{tag(kind)}` |"), fields(kind))
    for kind in members(artifacts.Artifact)
]
CASES += [(f"op {tag(op)}", COMMON_OP + passage(f"| `{tag(op)}` |"), fields(op)) for op in members(ops.Op)]
CASES += [
    (f"memory op {tag(op)}", COMMON_OP + passage(f"| `{tag(op)}` |"), fields(op)) for op in members(memory.MemoryOp)
]


@pytest.mark.parametrize(("what", "text", "names"), CASES, ids=[case[0] for case in CASES])
def test_every_field_of_a_stored_record_is_in_the_format_doc_in_its_order(what: str, text: str, names: tuple[str, ...]) -> None:
    """Fields are encoded in their Struct's order (docs/format.md, Canonical encoding): the doc names
    them in that order too, as a subsequence of the names its passage mentions."""
    pattern = r"\b([a-z_][a-z0-9_]*)\b" if what == "MemoryState" else r"`([a-z_][a-z0-9_]*)`|\"([a-z_][a-z0-9_]*)\":"
    said = [next(g for g in m.groups() if g) for m in re.finditer(pattern, text)]
    missing = [name for name in names if name not in said]
    assert missing == [], f"{what}: docs/format.md does not describe {missing}"
    at = 0
    for name in names:
        assert name in said[at:], f"{what}: docs/format.md names {name!r} out of the order it is encoded in"
        at = said.index(name, at) + 1


def test_the_architecture_map_names_every_module() -> None:
    package = Path(gitswarm.__file__).parent
    modules = sorted(str(p.relative_to(package)) for p in package.rglob("*.py") if p.name != "__init__.py")
    missing = [m for m in modules if f"`{m}`" not in ARCHITECTURE_DOC]
    assert missing == []


def test_the_architecture_map_names_no_module_that_is_gone() -> None:
    package = Path(gitswarm.__file__).parent
    named = set(re.findall(r"`((?:model|store|adapters|engine|pilot|cli)/[\w/]+\.py)`", ARCHITECTURE_DOC))
    assert sorted(n for n in named if not (package / n).exists()) == []
