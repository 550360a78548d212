"""`gitswarm adapters list|check`: which agent CLIs are here, and whether they will run."""

import os
from typing import Annotated

import typer

from gitswarm.cli import render
from gitswarm.cli.context import _ctx
from gitswarm.cli.groups import group
from gitswarm.model.errors import EXIT_FAILED

# No `from __future__ import annotations`: typer reads these annotations at start-up.

adapters_app = group("Agent adapters: list them, check them.")


@adapters_app.command("list")
def adapters_list(ctx: typer.Context) -> None:
    """Every adapter: where its spec comes from, its capabilities, whether its executable is found, its version."""
    from gitswarm.engine.routing.adapter_checks import list_adapters  # deferred: runs each CLI's --version

    c = _ctx(ctx)
    data = list_adapters(c.swarm(create=False), os.environ)
    c.output.result(
        data["adapters"],
        lambda rows: render.table(
            ("NAME", "SOURCE", "CAPABILITIES", "FOUND", "VERSION"),
            [(a["name"], a["source"], ",".join(a["capabilities"]) or "-", "yes" if a["found"] else "no", a["version"] or "-") for a in rows],
        ),
    )


@adapters_app.command("check")
def adapters_check(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(metavar="[ADAPTER]", help="One adapter; default: every adapter whose executable is found.")] = None,
) -> None:
    """Prove the executable runs and accepts every flag its spec uses; exit 1 if one does not. Warns (exit
    unchanged) about a spec that names models but passes no {model} to its CLI."""
    from gitswarm.engine.routing.adapter_checks import check_adapters  # deferred: runs each CLI

    c = _ctx(ctx)
    data = check_adapters(c.swarm(create=False), os.environ, name)
    for warning in data["warnings"]:  # on stderr, as `hooks install` warns: they fail nothing
        c.output.info(f"gitswarm: warning: {warning}")
    c.output.result(
        data,
        lambda d: render.table(
            ("NAME", "OK", "VERSION", "WHY"),
            [(r["name"], "yes" if r["ok"] else "NO", r["version"] or "-", r["reason"] or "") for r in d["adapters"]],
        ),
    )
    if not data["ok"]:
        raise typer.Exit(EXIT_FAILED)
