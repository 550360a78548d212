"""The typer commands. Each parses, calls one library function and prints through Output."""

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from gitswarm import __version__
from gitswarm.cli import help_cmd, reads, render, review_cmd, share_cmd
from gitswarm.cli.adapters_cmd import adapters_app
from gitswarm.cli.context import Context, _ctx, enter
from gitswarm.cli.groups import group
from gitswarm.cli.output import Output
from gitswarm.cli.progress import print_markdown, progress_sink
from gitswarm.model.errors import EXIT_FAILED, BadInput
from gitswarm.model.limits import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_OUTPUT_CAP,
    MAX_LEASE_SECONDS,
    MAX_OUTPUT_CAP,
    MAX_WORKERS,
    MIN_LEASE_SECONDS,
    MIN_OUTPUT_CAP,
)

if TYPE_CHECKING:
    from gitswarm.engine.supervisor import WorkOptions

# No `from __future__ import annotations` here: typer would have to eval
# every annotation string of every command at each start-up (~10 ms).
# Commands that supervise workers or run agents import their engine modules
# (multiprocessing, worktrees, ...) when they run; rich is imported only to draw: every
# other command, `status` first, must not pay for them at start-up.

app = typer.Typer(
    name="gitswarm",
    help="Run swarms of coding agents on a git repository; all durable state lives in git.",
    epilog="gitswarm help COMMAND (or gitswarm COMMAND -h) shows what a command takes; man git-swarm is the manual.",
    add_completion=False,  # `gitswarm completion SHELL` prints a script instead; nothing writes to rc files
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
index_app = group("The SQLite index beside the refs.")
app.add_typer(index_app, name="index")
worktrees_app = group("Delegation worktrees.")
app.add_typer(worktrees_app, name="worktrees")
app.add_typer(adapters_app, name="adapters")

ApproveOption = Annotated[bool, typer.Option("--approve", help="Approve tasks that act outside the repository (browser, deploy).")]


def _version(value: bool) -> None:
    if value:
        print(f"gitswarm {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def main(
    ctx: typer.Context,
    json: Annotated[bool, typer.Option("--json", help="Machine output on stdout; logs on stderr (also after the command).")] = False,
    path: Annotated[str, typer.Option("-C", metavar="PATH", show_default=False, help="Run as if started in PATH (as in git); before the command.")] = ".",
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = None,
) -> None:
    enter(path)
    ctx.obj = Context(Output(json), Path("."))
    if ctx.invoked_subcommand is None:  # run bare: what there is to run
        print(ctx.get_help())


@app.command()
def init(ctx: typer.Context) -> None:
    """Set up the index (and this clone's actor id); safe to run again."""
    c = _ctx(ctx)
    swarm = c.swarm()
    data = {"index": str(swarm.index.path), "jobs": len(swarm.index.job_ids()), "actor": swarm.actor}
    c.output.result(data, lambda d: f"gitswarm ready: index {d['index']} ({d['jobs']} jobs)")


@app.command()
def submit(ctx: typer.Context, spec: Annotated[Path, typer.Argument(help="Job spec (TOML).")], approve: ApproveOption = False) -> None:
    """Create a job from SPEC and print its id."""
    c = _ctx(ctx)
    swarm = c.swarm()
    job_id = swarm.submit_file(spec, approve=approve)
    for notice in swarm.notices:
        c.output.info(f"gitswarm: note: {notice}")
    c.output.result({"id": job_id}, lambda d: d["id"])


# status and show also run without typer, from the same code: gitswarm/cli/quick.py.


@app.command()
def status(
    ctx: typer.Context,
    job: Annotated[Optional[str], typer.Argument(metavar="JOB", help="Job id or prefix.")] = None,
    include_all: Annotated[bool, typer.Option("--all", help="Also the audit jobs the post-commit hook queues.")] = False,
) -> None:
    """List jobs, or one job's tasks."""
    reads.status(_ctx(ctx), job, include_all)


@app.command()
def show(ctx: typer.Context, job: Annotated[str, typer.Argument(help="Job id or prefix.")]) -> None:
    """The stitched summary of a finished job; before that, its tasks and artifacts."""
    reads.show(_ctx(ctx), job)


@app.command()
def output(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(metavar="JOB/TASK", help="The task.")],
    attempt: Annotated[Optional[int], typer.Option("--attempt", help="Of attempt N (counted since the task's last retry).")] = None,
    stderr: Annotated[bool, typer.Option("--stderr", help="Its stderr instead of its stdout.")] = False,
) -> None:
    """Print the output of a task's last run or check, as it was captured (raw bytes)."""
    c = _ctx(ctx)
    found = c.swarm(create=False).task_output(task, attempt, stderr)
    if c.output.json_mode:
        c.output.result({**found, "data": found["data"].decode(errors="replace")}, str)
        return
    sys.stdout.flush()
    sys.stdout.buffer.write(found["data"]) if hasattr(sys.stdout, "buffer") else sys.stdout.write(found["data"].decode(errors="replace"))
    if found["truncated"]:
        c.output.info(f"gitswarm: output cut at the capture cap: {found['truncated']} bytes not kept")


def _work_options(jobs: int, lease: float, output_cap: int, job: str | None = None, until_idle: bool = False) -> "WorkOptions":
    from gitswarm.engine.supervisor import WorkOptions  # deferred: see the note at the imports
    from gitswarm.engine.worker import WorkerOptions

    _check_work_limits(jobs, lease, output_cap)
    return WorkOptions(workers=jobs, job=job, until_idle=until_idle, worker=WorkerOptions(lease=lease, output_cap=output_cap))


def _check_work_limits(jobs: int, lease: float, output_cap: int) -> None:
    """The bounds of -j, --lease and --output-cap (gitswarm.model.limits); checked before anything is opened."""
    if jobs < 1:
        raise BadInput("-j: must be at least 1")
    if jobs > MAX_WORKERS:
        raise BadInput(f"-j: must be at most {MAX_WORKERS}")
    if not math.isfinite(lease):
        raise BadInput(f"--lease: must be a finite number of seconds, got {lease}")
    if lease <= 0:
        raise BadInput("--lease: must be positive")
    if not MIN_LEASE_SECONDS <= lease <= MAX_LEASE_SECONDS:
        raise BadInput(f"--lease: must be between {MIN_LEASE_SECONDS:g} and {MAX_LEASE_SECONDS:g} seconds")
    if not MIN_OUTPUT_CAP <= output_cap <= MAX_OUTPUT_CAP:
        raise BadInput(f"--output-cap: must be between {MIN_OUTPUT_CAP} and {MAX_OUTPUT_CAP} bytes")


JobsOption = Annotated[int, typer.Option("-j", "--jobs", help="Worker processes to keep busy.")]
LeaseOption = Annotated[float, typer.Option("--lease", help="Lease length in seconds; renewed every third of it.")]
CapOption = Annotated[int, typer.Option("--output-cap", help="Bytes of stdout/stderr kept per run; the rest is counted.")]


@app.command()
def run(
    ctx: typer.Context,
    spec: Annotated[Path, typer.Argument(help="Job spec (TOML).")],
    jobs: JobsOption = 4,
    lease: LeaseOption = DEFAULT_LEASE_SECONDS,
    output_cap: CapOption = DEFAULT_OUTPUT_CAP,
    approve: ApproveOption = False,
) -> None:
    """Submit a job, work it to the end, print its summary; exit 0 iff every task succeeded."""
    from gitswarm.engine import run as run_engine  # deferred: see the note at the imports

    c = _ctx(ctx)
    options = _work_options(jobs, lease, output_cap)
    swarm = c.swarm()
    with progress_sink(c.output.json_mode) as sink:
        data = run_engine.run(swarm, spec, options, sink, approve=approve)
    if c.output.json_mode:
        c.output.result(data, str)
    elif "summary" in data:
        print_markdown(data["summary"]["text"])
    for name, reason in sorted(data.get("unusable", {}).items()):
        c.output.info(f"gitswarm: tasks for adapter {name} were not run: {reason}")
    if data["status"] != "succeeded":
        raise typer.Exit(EXIT_FAILED)


@app.command()
def work(
    ctx: typer.Context,
    job: Annotated[Optional[str], typer.Option("--job", help="Only this job; stop when it is done.")] = None,
    jobs: JobsOption = 4,
    until_idle: Annotated[bool, typer.Option("--until-idle", help="Stop when nothing is queued or running.")] = False,
    lease: LeaseOption = DEFAULT_LEASE_SECONDS,
    output_cap: CapOption = DEFAULT_OUTPUT_CAP,
    trust: Annotated[Optional[list[str]], typer.Option("--trust", help="Also run jobs pulled from this remote.")] = None,
) -> None:
    """Run workers on queued tasks (until the job is done, or with --until-idle the queue; else until Ctrl-C)."""
    from gitswarm.engine import run as run_engine  # deferred: see the note at the imports

    c = _ctx(ctx)
    _check_work_limits(jobs, lease, output_cap)
    swarm = c.swarm()
    job_id = swarm.resolve_job(job) if job else None
    options = _work_options(jobs, lease, output_cap, job_id, until_idle)
    with progress_sink(c.output.json_mode) as sink:
        data = run_engine.work(swarm, options, sink, tuple(trust or ()))
    for name, reason in sorted(data["unusable"].items()):
        c.output.info(f"gitswarm: tasks for adapter {name} were not run: {reason}")
    for job_id, why in sorted(data["skipped"].items()):
        c.output.info(f"gitswarm: skipped job {job_id}: {why} (gitswarm approve {job_id[:12]} to run it here)")
    c.output.result(
        data,
        lambda d: f"done; summaries written for {render.plural(len(d['jobs']), 'job')}"
        + (f"; {render.plural(len(d['skipped']), 'job')} skipped, awaiting approval" if d["skipped"] else ""),
    )


@app.command()
def log(ctx: typer.Context, job: Annotated[str, typer.Argument(help="Job id or prefix.")]) -> None:
    """The job's event history, oldest first."""
    c = _ctx(ctx)
    c.output.result(c.swarm(create=False).log(job), render.log)


@app.command()
def artifacts(ctx: typer.Context, job: Annotated[str, typer.Argument(help="Job id or prefix.")]) -> None:
    """List a job's artifacts."""
    c = _ctx(ctx)
    c.output.result(c.swarm(create=False).artifacts(job), render.artifacts)


@app.command()
def artifact(ctx: typer.Context, artifact_id: Annotated[str, typer.Argument(metavar="ID", help="Artifact id or prefix.")]) -> None:
    """Print one artifact record."""
    c = _ctx(ctx)
    data = c.swarm(create=False).artifact(artifact_id)
    c.output.json_mode = True
    c.output.result(data, str)


@app.command()
def cancel(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(metavar="JOB|TASK", help="A job, or a task as JOB/TASK.")],
    reason: Annotated[Optional[str], typer.Option(help="Why; recorded with the cancel.")] = None,
) -> None:
    """Cancel a job or one task; dependents of a cancelled task are skipped."""
    c = _ctx(ctx)
    c.output.result(c.swarm().cancel(target, reason), render.changed)


@app.command()
def retry(ctx: typer.Context, task: Annotated[str, typer.Argument(metavar="TASK", help="JOB/TASK.")]) -> None:
    """Requeue a failed, cancelled or skipped task and the dependents skipped because of it."""
    c = _ctx(ctx)
    c.output.result(c.swarm().retry(task), render.changed)


@app.command()
def recover(ctx: typer.Context) -> None:
    """Requeue tasks whose leases expired (or fail them past max_attempts)."""
    c = _ctx(ctx)
    data = c.swarm().recover()
    c.output.result(data, lambda d: f"requeued {len(d['expired'])} expired leases" + "".join(f"\n  {t}" for t in d["expired"]))


@app.command()
def delegate(
    ctx: typer.Context,
    instruction: Annotated[str, typer.Argument(help="What the agent should do.")],
    adapter: Annotated[str, typer.Option("--adapter", help="The agent to delegate to.")],
    check: Annotated[list[str], typer.Option("--check", help="A command that must pass on the patch; repeatable.")] = [],
    base: Annotated[Optional[str], typer.Option("--base", help="Branch from this commit (default: the checked-out tip).")] = None,
    lease: LeaseOption = DEFAULT_LEASE_SECONDS,
) -> None:
    """Hand one change to an agent in its own branch and worktree; exit 0 iff the patch was verified."""
    from gitswarm.engine import delegate as delegate_engine  # deferred: see the note at the imports

    c = _ctx(ctx)
    options = _work_options(1, lease, DEFAULT_OUTPUT_CAP)
    with progress_sink(c.output.json_mode) as sink:
        data = delegate_engine.delegate(c.swarm(), instruction, adapter, list(check), base, options, sink)
    if c.output.json_mode:
        c.output.result(data, str)
    else:
        print_markdown(data["summary"]["text"])
        for line in render.delegate_next(data):
            c.output.info(line)
    if data["status"] != "succeeded":
        raise typer.Exit(EXIT_FAILED)


@app.command()
def diff(ctx: typer.Context, patch: Annotated[str, typer.Argument(metavar="PATCH", help="Patch artifact id or prefix.")]) -> None:
    """Print a patch's diff (binary-safe, applies with git apply)."""
    from gitswarm.engine import patches  # deferred: see the note at the imports

    c = _ctx(ctx)
    data = patches.patch_diff(c.swarm(create=False), patch)
    sys.stdout.flush()
    sys.stdout.buffer.write(data) if hasattr(sys.stdout, "buffer") else sys.stdout.write(data.decode(errors="replace"))


@app.command()
def verify(ctx: typer.Context, patch: Annotated[str, typer.Argument(metavar="PATCH", help="Patch artifact id or prefix.")]) -> None:
    """Re-run a patch's verification now, on a clean checkout; exit 0 iff accepted."""
    from gitswarm.engine import patches  # deferred: see the note at the imports
    from gitswarm.engine.check_report import with_tails

    c = _ctx(ctx)
    swarm = c.swarm()
    data = with_tails(swarm, patches.verify_now(swarm, patch))
    c.output.result(data, lambda d: f"{d['patch'][:12]} at {d['head'][:12]}: {d['verdict']} ({'accepted' if d['accepted'] else 'rejected'})" + render.failed_checks(d["checks"]))
    if not data["accepted"]:
        raise typer.Exit(EXIT_FAILED)


@app.command()
def merge(
    ctx: typer.Context,
    patch: Annotated[str, typer.Argument(metavar="PATCH", help="Patch artifact id or prefix.")],
    into: Annotated[Optional[str], typer.Option("--into", help="Target branch (default: the branch the job started from).")] = None,
    squash: Annotated[bool, typer.Option("--squash", help="One new commit on the target.")] = False,
    rebase: Annotated[bool, typer.Option("--rebase", help="Linear history: fast-forward, else one commit on the target.")] = False,
    merge_commit: Annotated[bool, typer.Option("--merge", help="A merge commit when the target moved (the default).")] = False,
    no_recheck: Annotated[bool, typer.Option("--no-recheck", help="Do not re-run the checks on a merged tree.")] = False,
    repair: Annotated[bool, typer.Option("--repair", help="On conflicts, queue a job that redoes the change on the target.")] = False,
) -> None:
    """Merge a patch verified for its exact head; exit 1 on conflicts or failed rechecks, nothing changed."""
    if squash + rebase + merge_commit > 1:
        raise BadInput("choose one of --squash, --rebase, --merge")
    mode = "squash" if squash else "rebase" if rebase else "merge"
    from gitswarm.engine import patches  # deferred: see the note at the imports

    c = _ctx(ctx)
    data = patches.merge(c.swarm(), patch, into, mode, no_recheck, repair)
    c.output.result(data, lambda d: f"merged {d['patch'][:12]} into {d['into']}: {d['old'][:12]} -> {d['new'][:12]}")


@worktrees_app.command("list")
def worktrees_list(ctx: typer.Context) -> None:
    """gitswarm's worktrees: branch, task state, clean or not."""
    from gitswarm.engine import patches  # deferred: see the note at the imports

    c = _ctx(ctx)
    c.output.result(
        patches.worktree_list(c.swarm()),
        lambda d: render.table(
            ("BRANCH", "STATE", "CLEAN", "PATH"), [(w["branch"], w["state"], "yes" if w["clean"] else "NO", w["path"]) for w in d["worktrees"]]
        ) if d["worktrees"] else "no worktrees",
    )


@worktrees_app.command("gc")
def worktrees_gc(ctx: typer.Context) -> None:
    """Remove clean worktrees whose branch was merged or whose task was cancelled."""
    from gitswarm.engine import patches  # deferred: see the note at the imports

    c = _ctx(ctx)
    c.output.result(
        patches.worktree_gc(c.swarm()),
        lambda d: "\n".join([f"removed {r['path']} ({r['why']})" for r in d["removed"]] + [f"kept {k['path']} ({k['why']})" for k in d["kept"]]) or "nothing to remove",
    )


@worktrees_app.command("discard")
def worktrees_discard(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(metavar="JOB/TASK", help="The finished task whose worktree and branch to remove.")],
    force: Annotated[bool, typer.Option("--force", help="Also when its worktree holds uncommitted work (it is lost).")] = False,
) -> None:
    """Remove a finished, unmerged task's worktree and its branch swarm/JOB/TASK (exit 2 if it may run, was merged, or is dirty)."""
    from gitswarm.engine import discard  # deferred: see the note at the imports

    c = _ctx(ctx)
    c.output.result(
        discard.discard(c.swarm(), task, force),
        lambda d: f"discarded {d['branch']}" + (f" at {d['head'][:12]}" if d["head"] else "") + (f" and {d['worktree']}" if d["worktree"] else ""),
    )


@index_app.command("rebuild")
def index_rebuild(ctx: typer.Context) -> None:
    """Delete the index and rebuild it from the refs."""
    c = _ctx(ctx)
    data = c.swarm().rebuild_index()
    c.output.result(data, lambda d: f"rebuilt {d['path']}: {d['jobs']} jobs, {d['tasks']} tasks")


@app.command()
def doctor(ctx: typer.Context) -> None:
    """Check the repository, the index and every job's records."""
    from gitswarm.engine.doctor import diagnose  # deferred: see the note at the imports

    c = _ctx(ctx)
    data = diagnose(c.swarm())
    c.output.result(data, render.doctor)
    if not data["ok"]:
        raise typer.Exit(EXIT_FAILED)


@app.command()
def demo(ctx: typer.Context) -> None:
    """Run a small job of shell tasks in a throwaway repository and print its summary."""
    from gitswarm.engine import demo as demo_engine  # deferred: see the note at the imports

    c = _ctx(ctx)
    with progress_sink(c.output.json_mode) as sink:
        data = demo_engine.run_demo(sink)
    if c.output.json_mode:
        c.output.result(data, str)
    else:
        print_markdown(data["summary"]["text"])
        c.output.result(data["demo"], render.demo_story)
    if not demo_engine.demo_went_as_designed(data):
        raise typer.Exit(EXIT_FAILED)


for command in (share_cmd.pull, share_cmd.push, share_cmd.sync, share_cmd.approve, review_cmd.audit, review_cmd.review, help_cmd.completion):
    app.command()(command)
app.command("help")(help_cmd.help_)
app.add_typer(review_cmd.hooks_app, name="hooks")
