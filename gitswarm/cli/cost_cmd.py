"""`gitswarm cost`: what agent runs spent, from stored run artifacts (no model call)."""

from typing import Annotated

import typer

from gitswarm.cli import render
from gitswarm.cli.context import _ctx

# No `from __future__ import annotations`: typer reads these annotations at start-up.

BREAKDOWNS = ("adapter", "model", "tier", "job")


def cost(
    ctx: typer.Context,
    since: Annotated[str | None, typer.Option("--since", help="Only runs since then: an age (12h, 7d) or a date (2026-11-30).")] = None,
) -> None:
    """Spending of agent runs: tokens and USD, by adapter, model, tier and job; runs of unknown cost apart."""
    from gitswarm.engine.routing.cost import spending  # deferred: see the note in app.py

    c = _ctx(ctx)
    c.output.result(spending(c.swarm(create=False), since), cost_text)


def cost_text(data: dict) -> str:
    """A table per breakdown, then the total and the runs whose cost is unknown."""
    parts = []
    for by in BREAKDOWNS:
        rows = data[f"by_{by}"]
        if not rows:
            continue
        shown = {key[:12] if by == "job" else key: value for key, value in rows.items()}
        parts.append(render.table(
            (by.upper(), "RUNS", "TOKENS IN", "TOKENS OUT", "USD", "UNKNOWN COST"),
            [(key, str(t["runs"]), f"{t['input_tokens']:,}", f"{t['output_tokens']:,}", _usd(t), _unknown(t)) for key, t in shown.items()],
        ))
    total = data["total"]
    parts.append(
        f"total: {total['runs']} runs, {total['input_tokens'] + total['output_tokens']:,} tokens, {_usd(total)}"
        + (f" ({total['estimated_usd']:.4f} of it priced here from tokens)" if total["estimated_usd"] else "")
    )
    if total["unknown_cost_runs"]:
        parts.append(f"cost unknown for {total['unknown_cost_runs']} runs ({total['unknown_cost_tokens']:,} tokens): no price for their model")
    return "\n\n".join(parts) if total["runs"] else "no agent runs" + (" since then" if data["since"] else "")


def _usd(t: dict) -> str:
    return f"${t['usd']:.4f}"


def _unknown(t: dict) -> str:
    return f"{t['unknown_cost_runs']} runs" if t["unknown_cost_runs"] else ""
