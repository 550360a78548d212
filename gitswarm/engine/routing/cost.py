"""`gitswarm cost`: what agent runs spent, from the stored run artifacts alone (no model call).

It reads the index's runs table (store/index: one row per run artifact,
filled as runs are recorded and when a job is indexed from its ref), so it
reads no record from git.

Every `run` artifact of an agent adapter (not `shell`) counts once: its
tokens, and its cost in USD when known — reported by the CLI, or priced from
its tokens at the run (`cost_estimated`). A run whose cost is unknown (no
price for its model, no tokens reported) is counted apart, never as free.
Totals are given overall and by adapter, model, tier and job.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import BadInput
from gitswarm.store.index.queries import RunRow

NO_MODEL = "shell"  # the adapter that runs commands, not models
_AGO = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$", re.ASCII)  # ASCII digits: "٣d" is no age
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass
class Tally:
    runs: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0  # over the runs whose cost is known
    estimated_usd: float = 0.0  # the part of `usd` priced from tokens here
    unknown: int = 0  # runs whose cost is unknown
    unknown_tokens: int = 0  # the tokens those runs spent

    def add(self, run: RunRow) -> None:
        self.runs += 1
        self.input_tokens += run.input_tokens or 0
        self.output_tokens += run.output_tokens or 0
        if run.cost_usd is None:
            self.unknown += 1
            self.unknown_tokens += (run.input_tokens or 0) + (run.output_tokens or 0)
            return
        self.usd += run.cost_usd
        if run.cost_estimated:
            self.estimated_usd += run.cost_usd

    def view(self) -> dict:
        return {
            "runs": self.runs, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
            "usd": round(self.usd, 6), "estimated_usd": round(self.estimated_usd, 6),
            "unknown_cost_runs": self.unknown, "unknown_cost_tokens": self.unknown_tokens,
        }


@dataclass
class Spending:
    total: Tally = field(default_factory=Tally)
    by: dict[str, dict[str, Tally]] = field(default_factory=lambda: {k: {} for k in ("adapter", "model", "tier", "job")})

    def add(self, run: RunRow) -> None:
        self.total.add(run)
        keys = {"adapter": run.adapter, "model": run.model or "(unknown)", "tier": run.tier or "(none)", "job": run.job}
        for by, key in keys.items():
            self.by[by].setdefault(key, Tally()).add(run)

    def view(self, since: float | None) -> dict:
        return {
            "since": since,
            "total": self.total.view(),
            **{f"by_{by}": {key: t.view() for key, t in sorted(found.items())} for by, found in self.by.items()},
        }


def parse_since(text: str, now: float) -> float:
    """`--since`: an age (`30m`, `12h`, `7d`, `2w`) or a date (`2026-11-30`, ISO 8601, UTC unless it says)."""
    if not text.isascii():  # int() reads other scripts' digits too; neither form has them
        raise BadInput(f"--since: {text!r} is neither an age (30m, 12h, 7d, 2w) nor a date (2026-11-30)")
    ago = _AGO.match(text.strip())
    if ago:
        return now - float(ago.group(1)) * _UNIT[ago.group(2)]
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInput(f"--since: {text!r} is neither an age (30m, 12h, 7d, 2w) nor a date (2026-11-30)") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def agent_runs(swarm: Swarm, since: float | None = None) -> Iterable[RunRow]:
    """Every stored run of an agent adapter, oldest first; those made before `since` left out."""
    return (run for run in swarm.index.runs(since) if run.adapter != NO_MODEL)


def spending(swarm: Swarm, since: str | None = None) -> dict:
    """What agent runs spent, overall and by adapter, model, tier and job."""
    cutoff = None if since is None else parse_since(since, time.time())
    found = Spending()
    for run in agent_runs(swarm, cutoff):
        found.add(run)
    return found.view(cutoff)
