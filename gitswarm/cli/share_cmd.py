"""`push`, `pull`, `sync` and `approve`: sharing swarm state with other clones."""

from typing import Annotated

import typer

from gitswarm.cli.context import _ctx
from gitswarm.cli.options import JobArg
from gitswarm.engine.sharing.approval import approve as approve_job
from gitswarm.model.errors import EXIT_FAILED

# No `from __future__ import annotations`: typer reads these annotations at start-up.

RemoteArg = Annotated[str, typer.Argument(metavar="REMOTE", help="A remote name, URL or path.")]


def _pull_text(d: dict) -> str:
    lines = [f"{key}: {', '.join(d[key])}" for key in ("new", "updated", "merged") if d[key]]
    lines += [f"invalid: {job}: {why}" for job, why in sorted(d["invalid"].items())]
    lines += [f"invalid note on {commit}: {why}" for commit, why in sorted(d["invalid_notes"].items())]
    lines += [f"invalid memory: {d['invalid_memory']}"] if d.get("invalid_memory") else []
    lines += [f"warning: skipped {ref}: {why}" for ref, why in sorted(d.get("skipped", {}).items())]
    lines.append(f"unchanged: {len(d['unchanged'])} jobs; notes {d['notes']}; memory {d.get('memory', 'unchanged')}")
    return "\n".join(lines)


def pull(ctx: typer.Context, remote: RemoteArg = "origin") -> None:
    """Fetch swarm state into a shadow namespace, then adopt, fast-forward or merge each job; exit 1 if any was invalid."""
    from gitswarm.engine.sharing import share  # deferred: see the note in app.py

    c = _ctx(ctx)
    report = share.pull(c.swarm(), remote).view()
    c.output.result(report, _pull_text)
    if report["invalid"] or report["invalid_notes"] or report["invalid_memory"]:
        raise typer.Exit(EXIT_FAILED)


def push(ctx: typer.Context, remote: RemoteArg = "origin") -> None:
    """Push refs/swarm/* and the verdict notes, never forced; if the remote moved, pull, merge and retry."""
    from gitswarm.engine.sharing import share  # deferred: see the note in app.py

    c = _ctx(ctx)
    data = share.push(c.swarm(), remote)
    c.output.result(data, lambda d: f"pushed {len(d['pushed'])} refs to {d['remote']}" + (f" after {len(d['pulls'])} pull(s)" if d["pulls"] else ""))


def sync(ctx: typer.Context, remote: RemoteArg = "origin") -> None:
    """pull, then push."""
    from gitswarm.engine.sharing import share  # deferred: see the note in app.py

    c = _ctx(ctx)
    swarm = c.swarm()
    pulled = share.pull(swarm, remote).view()
    pushed = share.push(swarm, remote)
    c.output.result({"pull": pulled, "push": pushed}, lambda d: _pull_text(d["pull"]) + f"\npushed {len(d['push']['pushed'])} refs")
    if pulled["invalid"] or pulled["invalid_notes"] or pulled["invalid_memory"]:
        raise typer.Exit(EXIT_FAILED)


def approve(ctx: typer.Context, job: JobArg) -> None:
    """Let a job run here: one pulled from another clone, or one whose tasks act outside the repository."""
    c = _ctx(ctx)
    c.output.result(approve_job(c.swarm(), job), _approved_text)


def _approved_text(data: dict) -> str:
    text = f"approved {data['approved']}"
    granted = data.get("side_effects")
    if granted:
        text += (
            f": its tasks that act outside the repository ({', '.join(granted['tasks'])}) may run, approved by {granted['by']}"
            f"\nrun it: gitswarm work --job {data['approved'][:12]}"
        )
    return text


def machine_key(ctx: typer.Context) -> None:
    """Print this clone's machine key as an allowed-signers line (made on first use): add it to
    gpg.ssh.allowedSignersFile on the clones that should count this machine's claims (docs/many-machines.md)."""
    from gitswarm.engine.machines import arbiter  # deferred: see the note in app.py

    c = _ctx(ctx)
    c.output.result(arbiter.machine_identity(c.swarm()), lambda d: d["allowed_signers"])
