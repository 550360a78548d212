"""`memory list|show|forget` and `remember`: what accepted results taught, kept for later tasks."""

from typing import Annotated

import typer

from gitswarm.cli.context import _ctx
from gitswarm.cli.groups import group

# No `from __future__ import annotations`: typer reads these annotations at start-up.

memory_app = group("Memory: accepted findings, decisions and changes that later tasks' packets carry.")
RecordArg = Annotated[str, typer.Argument(metavar="ID", help="A memory record id (prefix).")]


def _list_text(d: dict) -> str:
    if not d["records"]:
        return "no memory records"
    lines = []
    for r in d["records"]:
        mark = "" if r["counted"] else "  (does not count here)"
        lines.append(f"{r['id'][:12]}  {r['kind']:<8}  {r['job'][:12]}/{r['task']}  {r['title']}{mark}")
    return "\n".join(lines)


def _show_text(d: dict) -> str:
    lines = [
        f"{d['id']}  {d['kind']}: {d['title']}",
        f"job {d['job']}, task {d['task']}, attempt {d['attempt']}, commit {d['commit']}",
        f"verdict {d['verdict']}; {'counts here' if d['counted'] else 'does NOT count here'}",
    ]
    if d["paths"]:
        lines.append("paths: " + ", ".join(d["paths"]))
    if d["changed_since"]:
        lines.append("changed since its commit (to HEAD): " + ", ".join(d["changed_since"]))
    if d["body"]:
        lines += ["", d["body"]]
    return "\n".join(lines)


@memory_app.command("list")
def memory_list(ctx: typer.Context) -> None:
    """Every memory record, newest first, and whether it counts here."""
    from gitswarm.engine.knowledge import memory  # deferred: see the note in app.py

    c = _ctx(ctx)
    c.output.result(memory.memory_list(c.swarm(create=False)), _list_text)


@memory_app.command("show")
def memory_show(ctx: typer.Context, record: RecordArg) -> None:
    """One record whole: its provenance, whether it counts here, its paths changed since."""
    from gitswarm.engine.knowledge import memory  # deferred: see the note in app.py

    c = _ctx(ctx)
    c.output.result(memory.memory_show(c.swarm(create=False), record), _show_text)


@memory_app.command("forget")
def memory_forget(
    ctx: typer.Context,
    record: RecordArg,
    reason: Annotated[str | None, typer.Option("--reason", help="Why (kept in the memory's history).")] = None,
) -> None:
    """Forget a record: later packets leave it out (the history keeps the forget)."""
    from gitswarm.engine.knowledge import memory  # deferred: see the note in app.py

    c = _ctx(ctx)
    data = memory.forget(c.swarm(), record, reason)
    c.output.result(data, lambda d: f"{'forgot' if d['forgotten'] else 'already forgotten:'} {d['id'][:12]}")


def remember(
    ctx: typer.Context,
    artifact: Annotated[str, typer.Argument(metavar="ARTIFACT", help="A finding, decision or patch artifact id (prefix).")],
) -> None:
    """Promote an accepted finding, decision or patch to memory; exit 1 unless a counted verdict accepted it."""
    from gitswarm.engine.knowledge import memory  # deferred: see the note in app.py

    c = _ctx(ctx)
    data = memory.remember(c.swarm(), artifact)
    c.output.result(data, lambda d: f"{'remembered' if d['remembered'] else 'already remembered'} {d['id'][:12]}: {d['record']['title']}")
