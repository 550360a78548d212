"""Before any work starts: `[sandbox] mode = "bwrap"` or `network = "endpoint"` with no bwrap is refused,
`auto` without one said once.

Read with the configuration alone (adapters/sandbox.py finds and probes bwrap), so that `run`,
`work` and `delegate` refuse before they submit or claim anything (exit 2, one line, nothing
written). Each run's own decision is engine/delegation/confine.py's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gitswarm.adapters.sandbox import find_bwrap, say_once
from gitswarm.engine.config import load_config
from gitswarm.model.errors import BadInput


def require_sandbox(workdir: Path | None, env: Mapping[str, str], agents: bool = True) -> None:
    """BadInput when `[sandbox] mode = "bwrap"` or `network = "endpoint"` (only a sandbox enforces it) and
    there is no bwrap that works; with `agents` (agents are about to run), the one line of `auto` without one."""
    table = load_config(workdir).sandbox
    mode = table.mode or "auto"
    if mode == "off":
        return  # with network = "endpoint" beside it, load_config has refused the table already
    if mode != "bwrap" and table.network != "endpoint" and not agents:
        return  # nothing to refuse, nothing to say: bwrap is not looked for (its probe starts a process)
    bwrap, why = find_bwrap(env.get("PATH"))
    if bwrap is not None:
        return
    if mode == "bwrap" or table.network == "endpoint":
        asked = 'mode = "bwrap"' if mode == "bwrap" else 'network = "endpoint" needs the sandbox'
        raise BadInput(f"[sandbox] {asked}, and {why}: no agent runs without it; nothing ran")
    if agents:
        say_once(why)
