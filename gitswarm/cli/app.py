"""The typer app: the global options, and every command module's commands put together.

Each command parses, calls one library function and prints through Output;
the commands live by group in the *_cmd modules.
"""

from pathlib import Path
from typing import Annotated

import typer

from gitswarm import __version__
from gitswarm.cli import (
    cost_cmd,
    guidance_cmd,
    help_cmd,
    jobs_cmd,
    mcp_cmd,
    memory_cmd,
    patch_cmd,
    review_cmd,
    share_cmd,
    upkeep_cmd,
    work_cmd,
)
from gitswarm.cli.adapters_cmd import adapters_app
from gitswarm.cli.context import Context, enter
from gitswarm.cli.output import Output

# No `from __future__ import annotations` here or in the command modules: typer would
# have to eval every annotation string of every command at each start-up (~10 ms).
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
        bool | None, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = None,
) -> None:
    enter(path)
    ctx.obj = Context(Output(json), Path("."))
    if ctx.invoked_subcommand is None:  # run bare: what there is to run
        print(ctx.get_help())


COMMANDS = (
    jobs_cmd.init,
    jobs_cmd.submit,
    jobs_cmd.status,
    jobs_cmd.show,
    jobs_cmd.output,
    work_cmd.run,
    work_cmd.work,
    jobs_cmd.log,
    jobs_cmd.artifacts,
    jobs_cmd.artifact,
    jobs_cmd.cancel,
    jobs_cmd.retry,
    jobs_cmd.recover,
    work_cmd.delegate,
    guidance_cmd.follow_up,
    guidance_cmd.steer,
    patch_cmd.diff,
    patch_cmd.verify,
    patch_cmd.merge,
    upkeep_cmd.doctor,
    upkeep_cmd.demo,
    share_cmd.pull,
    share_cmd.push,
    share_cmd.sync,
    share_cmd.approve,
    share_cmd.machine_key,
    review_cmd.audit,
    review_cmd.review,
    memory_cmd.remember,
    cost_cmd.cost,
    help_cmd.completion,
)
for command in COMMANDS:  # in this order in `gitswarm --help`
    app.command()(command)
app.command("help")(help_cmd.help_)
app.add_typer(upkeep_cmd.index_app, name="index")
app.add_typer(patch_cmd.worktrees_app, name="worktrees")
app.add_typer(adapters_app, name="adapters")
app.add_typer(review_cmd.hooks_app, name="hooks")
app.add_typer(mcp_cmd.mcp_app, name="mcp")
app.add_typer(memory_cmd.memory_app, name="memory")
