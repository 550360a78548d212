"""The full command line: typer parses; click's usage errors become exit 2.

`--json` is global, and accepted after the subcommand too (`gitswarm status
--json`): each subcommand of the click tree typer builds gets a `--json` flag
of its own that switches the one output sink to JSON. `-C PATH` stays before
the subcommand, as in git.
"""

from __future__ import annotations

from typing import Any

import typer
import typer.main
from typer.core import TyperOption

from gitswarm.cli.app import app
from gitswarm.cli.output import error_line
from gitswarm.model.errors import EXIT_USAGE

JSON_HELP = "Machine output on stdout; logs on stderr."


def run(args: list[str]) -> Any:
    """Parse and run one command; what it returns (an exit code, or None for 0)."""
    try:
        return command().main(args=args, prog_name="gitswarm", standalone_mode=False)
    except typer.TyperException as exc:  # the usage errors of the click typer vendors derive from it
        error_line(exc.format_message())
        return EXIT_USAGE
    except typer.Abort:
        raise KeyboardInterrupt from None


def command() -> Any:
    """The click command tree of the typer app, every subcommand taking `--json` as well."""
    root = typer.main.get_command(app)
    for sub in _subcommands(root):
        sub.params.append(
            TyperOption(param_decls=["--json"], is_flag=True, default=False, expose_value=False, callback=_json_on, help=JSON_HELP)
        )
    return root


def _subcommands(group: Any) -> list[Any]:
    found = []
    for sub in getattr(group, "commands", {}).values():
        found.append(sub)
        found.extend(_subcommands(sub))
    return found


def _json_on(ctx: typer.Context, param: Any, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        ctx.find_root().obj.output.json_mode = True
