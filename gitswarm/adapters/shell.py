"""The shell adapter: run a command; its result is a `check` artifact."""

from __future__ import annotations

import os
from pathlib import Path

from gitswarm.adapters.base import BlobWriter, Invocation, Outcome, RunContext, captured
from gitswarm.adapters.process import ProcessResult
from gitswarm.model.artifacts import Check
from gitswarm.model.errors import BadInput
from gitswarm.model.records import TaskSpec

TAIL_LINES = 20
SANDBOX_HOME = "/tmp/home"  # a sandboxed check's home: in its private /tmp


class ShellAdapter:
    """`command` as a string runs under `sh -c`; as a list it is the argv itself."""

    name = "shell"

    def invocation(self, task: TaskSpec, ctx: RunContext) -> Invocation:
        command = task.command
        if not command:
            raise BadInput(f"task {task.id}: the shell adapter needs a command")
        argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
        cwd = ctx.workdir / task.cwd if task.cwd else ctx.workdir
        # The spec's check of `cwd` is lexical (no `..`); a committed symlink can still lead out: resolved here.
        root = os.path.join(os.path.realpath(ctx.workdir), "")
        if task.cwd and not os.path.join(os.path.realpath(cwd), "").startswith(root):
            raise BadInput(f"task {task.id}: cwd {task.cwd!r} leads outside the repository (through a symlink); nothing ran")
        env = {**ctx.base_env, **task.env}
        box = ctx.sandbox.sandbox if ctx.sandbox is not None else None
        if box is None:
            return Invocation(argv=argv, cwd=Path(cwd), env=env, timeout=task.timeout)
        # A check in its sandbox ([sandbox] checks, docs/sandbox.md); with network endpoint, behind its proxy.
        from gitswarm.adapters.endpoint import sandboxed  # deferred: an unsandboxed run never loads the proxy (~1 ms)

        wrapped = sandboxed(box, argv, Path(cwd), env, ctx.base_env.get("HOME"))
        argv, env = wrapped.argv, wrapped.env
        env["HOME"] = SANDBOX_HOME  # the real one is hidden and read-only: a home in the run's own /tmp
        argv[argv.index("--chdir"):argv.index("--chdir")] = ["--dir", SANDBOX_HOME]
        return Invocation(argv=argv, cwd=Path(cwd), env=env, timeout=task.timeout, proxy=wrapped.proxy)

    def outcome(
        self,
        task: TaskSpec,
        ctx: RunContext,
        result: ProcessResult,
        store: BlobWriter,
        now: float,
        invocation: Invocation | None = None,
    ) -> Outcome:
        stdout, stderr = captured(result, store)
        check = Check(
            job=ctx.job,
            task=ctx.task,
            attempt=ctx.attempt,
            created=now,
            producer="shell",
            command=task.command or "",
            exit_code=result.exit_code,
            duration=round(result.duration, 6),
            stdout=stdout,
            stderr=stderr,
            timed_out=result.timed_out,
            cwd=task.cwd,
        )
        if result.error:
            return Outcome(ok=False, error=result.error, artifacts=[check])
        if result.stopped:
            return Outcome(ok=False, error=f"{result.stopped} after {result.duration:.1f}s", artifacts=[check])
        if result.exit_code != 0:
            last_line = tail(result.stderr or result.stdout, 1)
            error = f"exit {result.exit_code}: {last_line}" if last_line else f"exit {result.exit_code}"
            return Outcome(ok=False, error=error, artifacts=[check])
        return Outcome(ok=True, artifacts=[check])


def tail(data: bytes, lines: int = TAIL_LINES) -> str:
    """The last `lines` lines of output, decoded leniently."""
    text = data.decode("utf-8", errors="replace").rstrip("\n")
    return "\n".join(text.splitlines()[-lines:])
