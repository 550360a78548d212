"""The quick path: `status`, `show`, `run` and `mcp` (serving) parsed and run without typer.

typer and the click tree it builds cost ~45 ms at every start, a third of
what `status` costs. The forms people type most, `status [JOB] [--all]`,
`show JOB` and `run SPEC [-j N]` with `--json` and `-C PATH`, need no CLI
framework to parse; they run the same code as the typer commands
(gitswarm.cli.reads, gitswarm.cli.run_job). Anything else,
or anything unusual in these (help, an unknown option, `--`, `-C` twice, an
argument that starts with `-`), goes to the full command line, so that the
quick path never answers differently from it (tests/cli/test_first_day.py runs
both on the same arguments).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from gitswarm.cli import run_job
from gitswarm.cli.context import Context, enter
from gitswarm.cli.output import Output


def plan(args: list[str]) -> Callable[[], int | None] | None:
    """The command to run for `args` when the quick path can parse them, else None."""
    json_mode, path, i = False, None, 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] == "--json":
            json_mode = True
        elif args[i] == "-C" and path is None and i + 1 < len(args) and not args[i + 1].startswith("-"):
            path = args[i + 1]
            i += 1
        else:
            return None
        i += 1
    if i == len(args):
        return None
    name, rest = args[i], args[i + 1 :]
    if name == "run":
        return _run_plan(rest, json_mode, path)
    flags = {"--json", "--all"} if name == "status" else {"--json"}
    words = [a for a in rest if a not in flags]
    if any(w.startswith("-") for w in words):
        return None
    json_mode = json_mode or "--json" in rest
    run: Callable[[Context], None]
    if name == "status" and len(words) <= 1:
        job, include_all = (words[0] if words else None), "--all" in rest
        run = lambda c: _reads().status(c, job, include_all)  # noqa: E731
    elif name == "show" and len(words) == 1:
        run = lambda c: _reads().show(c, words[0])  # noqa: E731
    elif name == "mcp" and not rest:
        run = lambda c: _mcp_serve().serve(c.path)  # noqa: E731
    else:
        return None

    def call() -> None:
        if path is not None:
            enter(path)
        run(Context(Output(json_mode), Path(".")))

    return call


def _reads() -> ModuleType:
    from gitswarm.cli import reads  # deferred: `run` needs none of what the reads print with

    return reads


def _mcp_serve() -> ModuleType:
    from gitswarm.cli import mcp_serve  # deferred, as reads

    return mcp_serve


def _run_plan(rest: list[str], json_mode: bool, path: str | None) -> Callable[[], int] | None:
    """`run SPEC` with `-j N` / `--jobs N` and `--json` in any order; None for anything else."""
    spec, workers, i = None, run_job.DEFAULT_WORKERS, 0
    while i < len(rest):
        word = rest[i]
        if word == "--json":
            json_mode = True
        elif word in ("-j", "--jobs") and i + 1 < len(rest) and rest[i + 1].isascii() and rest[i + 1].isdigit():
            workers = int(rest[i + 1])
            i += 1
        elif word.startswith("-") or spec is not None:
            return None
        else:
            spec = word
        i += 1
    if spec is None:
        return None
    chosen = spec

    def call() -> int:
        if path is not None:
            enter(path)
        return run_job.run_job(Context(Output(json_mode), Path(".")), Path(chosen), workers)

    return call
