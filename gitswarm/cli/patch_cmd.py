"""`diff`, `verify`, `merge` and `worktrees list|gc|discard`: a delegation's patch and its worktree."""

import sys
from typing import Annotated, Literal

import typer

from gitswarm.cli import render
from gitswarm.cli.context import _ctx
from gitswarm.cli.groups import group
from gitswarm.model.errors import EXIT_FAILED, BadInput

# No `from __future__ import annotations`: typer reads these annotations at start-up.
# The engine modules (worktrees, merges, checks) are imported when a command runs.

worktrees_app = group("Delegation worktrees.")
PatchArg = Annotated[str, typer.Argument(metavar="PATCH", help="Patch artifact id or prefix.")]


def diff(ctx: typer.Context, patch: PatchArg) -> None:
    """Print a patch's diff (binary-safe, applies with git apply)."""
    from gitswarm.engine.delegation import patches  # deferred: see the note at the imports

    c = _ctx(ctx)
    data = patches.patch_diff(c.swarm(create=False), patch)
    sys.stdout.flush()
    sys.stdout.buffer.write(data) if hasattr(sys.stdout, "buffer") else sys.stdout.write(data.decode(errors="replace"))


def verify(ctx: typer.Context, patch: PatchArg) -> None:
    """Re-run a patch's verification now, on a clean checkout; exit 0 iff accepted."""
    from gitswarm.engine.delegation import patches  # deferred: see the note at the imports

    c = _ctx(ctx)
    data = patches.verify_now(c.swarm(), patch)
    c.output.result(
        data,
        lambda d: f"{d['patch'][:12]} at {d['head'][:12]}: {d['verdict']} ({'accepted' if d['accepted'] else 'rejected'})"
        + render.evidence(d) + render.failed_checks(d["checks"]),
    )
    if not data.accepted:
        raise typer.Exit(EXIT_FAILED)


def merge(
    ctx: typer.Context,
    patch: Annotated[str, typer.Argument(metavar="PATCH|JOB", help="Patch artifact id or prefix, or a job: its merge train.")],
    into: Annotated[str | None, typer.Option("--into", help="Target branch (default: the branch the job started from).")] = None,
    squash: Annotated[bool, typer.Option("--squash", help="One new commit on the target.")] = False,
    rebase: Annotated[bool, typer.Option("--rebase", help="Linear history: fast-forward, else one commit on the target.")] = False,
    merge_commit: Annotated[bool, typer.Option("--merge", help="A merge commit when the target moved (the default).")] = False,
    no_recheck: Annotated[bool, typer.Option("--no-recheck", help="Do not re-run the checks on a merged tree.")] = False,
    repair: Annotated[bool, typer.Option("--repair", help="On conflicts, queue a job that redoes the change on the target.")] = False,
    approve: Annotated[
        bool, typer.Option("--approve", help="Approve its job here, verify it here when nothing that counts here did, then merge.")
    ] = False,
) -> None:
    """Merge a patch verified for its exact head, or a job's verified patches in one move (its merge train);
    exit 1 when anything did not merge."""
    if squash + rebase + merge_commit > 1:
        raise BadInput("choose one of --squash, --rebase, --merge")
    mode: Literal["merge", "squash", "rebase"] = "squash" if squash else "rebase" if rebase else "merge"
    from gitswarm.engine.delegation import merge_job, patches  # deferred: see the note at the imports
    from gitswarm.engine.sharing import approval

    c = _ctx(ctx)
    swarm = c.swarm()
    if merge_job.names_a_job(swarm, patch):
        if squash or rebase or repair or approve:
            raise BadInput("merge JOB: --squash, --rebase, --repair and --approve are for one patch; a job's patches land in one move")
        train = merge_job.merge_job(swarm, patch, into, no_recheck)
        c.output.result(train, render.train)
        if any(p.status not in ("landed", "merged_before") for p in train.patches):
            raise typer.Exit(EXIT_FAILED)
        return
    if approve:
        c.output.info(f"gitswarm: {approval.approval_summary(swarm, patch)}")
        data = approval.approve_and_merge(swarm, patch, into, mode, no_recheck, repair)
    else:
        data = patches.merge(swarm, patch, into, mode, no_recheck, repair)
    c.output.result(data, lambda d: f"merged {d['patch'][:12]} into {d['into']}: {d['old'][:12]} -> {d['new'][:12]}")


@worktrees_app.command("list")
def worktrees_list(ctx: typer.Context) -> None:
    """gitswarm's worktrees: branch, task state, clean or not."""
    from gitswarm.engine.delegation import patches  # deferred: see the note at the imports

    c = _ctx(ctx)
    c.output.result(
        patches.worktree_list(c.swarm(create=False)),
        lambda d: render.table(
            ("BRANCH", "STATE", "CLEAN", "PATH"), [(w["branch"], w["state"], "yes" if w["clean"] else "NO", w["path"]) for w in d["worktrees"]]
        ) if d["worktrees"] else "no worktrees",
    )


@worktrees_app.command("gc")
def worktrees_gc(
    ctx: typer.Context,
    force: Annotated[
        bool, typer.Option("--force", help="Also finished tasks' unmerged branches and clean worktrees (their commits are lost).")
    ] = False,
) -> None:
    """Remove clean worktrees and swarm/ branches whose work was merged (or task cancelled); say what is kept and why."""
    from gitswarm.engine.delegation import gc  # deferred: see the note at the imports

    c = _ctx(ctx)
    c.output.result(gc.worktree_gc(c.swarm(), force), render.gc)


@worktrees_app.command("discard")
def worktrees_discard(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(metavar="JOB/TASK", help="The finished task whose worktree and branch to remove.")],
    force: Annotated[bool, typer.Option("--force", help="Also when its worktree holds uncommitted work (it is lost).")] = False,
) -> None:
    """Remove a finished, unmerged task's worktree and its branch swarm/JOB/TASK (exit 2 if it may run, was merged, or is dirty)."""
    from gitswarm.engine.delegation import discard  # deferred: see the note at the imports

    c = _ctx(ctx)
    c.output.result(
        discard.discard(c.swarm(), task, force),
        lambda d: f"discarded {d['branch']}" + (f" at {d['head'][:12]}" if d["head"] else "") + (f" and {d['worktree']}" if d["worktree"] else ""),
    )
