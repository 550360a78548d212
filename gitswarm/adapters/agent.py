"""Agent CLIs described by a TOML spec; the smallest spec is `executable = "name"`.

    executable = "aider"            # required: a name on PATH or a path
    args = ["--message", "{prompt}"]  # optional; default: the prompt as the last argument
    env = { KEY = "value" }         # optional additions to the environment
    timeout = "10m"                 # optional default timeout

Placeholders in `args`: {prompt}, {workdir}. The output is read as plain text.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from gitswarm.adapters.base import BlobWriter, Invocation, Outcome, RunContext
from gitswarm.adapters.process import ProcessResult
from gitswarm.model.artifacts import Finding
from gitswarm.model.errors import BadInput
from gitswarm.model.records import TaskSpec

TITLE_CHARS = 120


class AgentSpec(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    executable: str
    args: list[str] | None = None
    env: dict[str, str] = {}
    timeout: str | float | None = None


def load_spec(path: Path) -> AgentSpec:
    """Parse an adapter spec strictly; errors name the file and the key."""
    try:
        return msgspec.toml.decode(path.read_bytes(), type=AgentSpec)
    except msgspec.ValidationError as exc:
        message = str(exc).replace("Object contains unknown field", "unknown key")
        raise BadInput(f"{path}: {message}") from None
    except (msgspec.DecodeError, OSError) as exc:
        raise BadInput(f"{path}: {exc}") from None


class AgentAdapter:
    def __init__(self, name: str, spec: AgentSpec) -> None:
        self.name = name
        self.spec = spec

    def invocation(self, task: TaskSpec, ctx: RunContext) -> Invocation:
        prompt = ctx.prompt if ctx.prompt is not None else task.prompt or ""
        values = {"prompt": prompt, "workdir": str(ctx.workdir)}
        if self.spec.args is None:
            argv = [self.spec.executable, prompt]
        else:
            argv = [self.spec.executable, *(arg.format_map(values) for arg in self.spec.args)]
        return Invocation(
            argv=argv, cwd=Path(ctx.workdir), env={**ctx.base_env, **self.spec.env, **task.env}, timeout=task.timeout
        )

    def outcome(self, task: TaskSpec, ctx: RunContext, result: ProcessResult, store: BlobWriter, now: float) -> Outcome:
        if result.error:
            return Outcome(ok=False, error=result.error)
        if result.stopped:
            return Outcome(ok=False, error=f"{result.stopped} after {result.duration:.1f}s")
        text = result.stdout.decode(errors="replace").strip()
        if result.exit_code != 0:
            last = (result.stderr or result.stdout).decode(errors="replace").strip().splitlines()
            return Outcome(ok=False, error=f"{self.name} exited {result.exit_code}" + (f": {last[-1]}" if last else ""))
        if task.mode == "implement" or not text:
            return Outcome(ok=True)
        # Prose that was not asked to follow a schema: one finding, flagged as such.
        finding = Finding(
            job=ctx.job,
            task=ctx.task,
            attempt=ctx.attempt,
            created=now,
            producer=self.name,
            title=text.splitlines()[0][:TITLE_CHARS],
            body=text,
            confidence=0.3,
            low_confidence=True,
        )
        return Outcome(ok=True, artifacts=[finding])
