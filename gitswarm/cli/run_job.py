"""`gitswarm run` without typer: the bounds of the work options, and the command's body.

Both command lines call it: the typer command (gitswarm.cli.work_cmd) and the
quick path (gitswarm.cli.quick), which parses the plain form `run SPEC [-j N]`
itself, since typer and its click tree are a sixth of what a short run costs.
The engine modules a run needs (multiprocessing, the supervisor) are imported
when it runs: every other command must not pay for them at start-up.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from gitswarm.cli.context import Context
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
    from gitswarm.engine.jobs.supervisor import WorkOptions

DEFAULT_WORKERS = 4
DEFAULT_SKEW = 5.0  # engine/remote_ledger.DEFAULT_CLOCK_SKEW_SECONDS, not imported: see the module's note
MAX_SKEW = 3600.0


def work_options(
    jobs: int, lease: float, output_cap: int, job: str | None = None, until_idle: bool = False,
    remote: str | None = None, clock_skew: float = DEFAULT_SKEW,
) -> WorkOptions:
    """The options of a run, checked against their bounds first (BadInput)."""
    from gitswarm.engine.jobs.supervisor import WorkOptions  # deferred: see the module's note
    from gitswarm.engine.jobs.worker import WorkerOptions

    check_work_limits(jobs, lease, output_cap, clock_skew)
    return WorkOptions(
        workers=jobs, job=job, until_idle=until_idle, worker=WorkerOptions(lease=lease, output_cap=output_cap),
        remote=remote, clock_skew=clock_skew,
    )


def check_work_limits(jobs: int, lease: float, output_cap: int, clock_skew: float = DEFAULT_SKEW) -> None:
    """The bounds of -j, --lease, --output-cap and --clock-skew (gitswarm.model.limits); checked before anything is opened."""
    if not (math.isfinite(clock_skew) and 0 <= clock_skew <= MAX_SKEW):
        raise BadInput(f"--clock-skew: must be between 0 and {MAX_SKEW:g} seconds")
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


def run_job(
    c: Context, spec: Path, jobs: int = DEFAULT_WORKERS, lease: float = DEFAULT_LEASE_SECONDS,
    output_cap: int = DEFAULT_OUTPUT_CAP, approve: bool = False, allow_overlap: bool = False,
    remote: str | None = None, clock_skew: float = DEFAULT_SKEW,
) -> int:
    """Submit a job, work it to the end, print its summary; EXIT_FAILED unless every task succeeded."""
    from gitswarm.engine.jobs import run as run_engine  # deferred: see the module's note

    options = work_options(jobs, lease, output_cap, remote=remote, clock_skew=clock_skew)
    swarm = c.swarm()
    if remote is not None:
        run_engine.check_remote(swarm, remote, fetch=False)
    with progress_sink(c.output.json_mode) as sink:
        data = run_engine.run(swarm, spec, options, sink, approve=approve, allow_overlap=allow_overlap)
    if c.output.json_mode:
        c.output.result(data, str)
    elif "summary" in data:
        print_markdown(data["summary"]["text"])
    for name, reason in sorted(data.get("unusable", {}).items()):
        c.output.info(f"gitswarm: tasks for adapter {name} were not run: {reason}")
    return 0 if data["status"] == "succeeded" else EXIT_FAILED
