"""`gitswarm mcp`: the pilot's tools and resources over MCP (stdio), on the official SDK.

Only this module imports `mcp` (the optional extra `gitswarm[mcp]`); no
other command loads it. Every tool is a thin call into `pilot.actions`; an
error gitswarm raises on purpose becomes a tool error carrying its one-line
message (the CLI's), anything else the SDK's bare "Error executing tool"
(the traceback goes to the server's stderr, never into a result).
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, ParamSpec

import anyio
import anyio.to_thread
import msgspec
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import Field

from gitswarm import __version__
from gitswarm.model.errors import GitswarmError
from gitswarm.pilot import actions, watch

P = ParamSpec("P")

POLL_SECONDS = 0.1  # how often `wait` reads the job's ref tip
MAX_WAIT_SECONDS = 3600.0

Id = Annotated[str, Field(min_length=1, max_length=200, description="An id or unique prefix.")]
Target = Annotated[str, Field(min_length=1, max_length=300, description="A job (id or prefix), or a task as JOB/TASK.")]
Text = Annotated[str, Field(max_length=actions.MAX_TEXT)]
Checks = Annotated[list[Annotated[str, Field(max_length=4096)]], Field(max_length=64)]
Workers = Annotated[int, Field(ge=1, le=64, description="Worker processes to start for the job.")]

INSTRUCTIONS = """gitswarm runs coding agents on this git repository as jobs of tasks; all state is in git.
Hand off a change with `delegate` (it proposes first: confirm with the token it returns), or a
whole job with `submit_job`. Then `wait` for it instead of polling, read results with
`show`/`artifacts`/`diff` (no model calls), `verify` a patch, and `merge` it once verified."""


# A tool's result: the data as structured content, and as compact JSON text for clients that
# read only text (the spec's backward-compatible form). Built here rather than by the SDK, which
# would render the text indented and dump the data once more through its validator: for a
# 1,000-task status that was most of the call.
Structured = Annotated[CallToolResult, dict[str, Any]]


def structured(data: dict[str, Any]) -> CallToolResult:
    text = msgspec.json.encode(data).decode()  # ~25x json.dumps on a 1,000-task status
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def tool_errors(fn: Callable[P, dict[str, Any]]) -> Callable[P, CallToolResult]:
    """The tool's data as a structured result; gitswarm's own errors as tool errors with their one-line message."""

    @functools.wraps(fn)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            return structured(fn(*args, **kwargs))
        except GitswarmError as exc:
            raise ToolError(str(exc)) from None

    # The SDK reads the signature (through __wrapped__): the input schema is the tool's, the output is ours.
    wrapped.__signature__ = inspect.signature(fn, eval_str=True).replace(return_annotation=Structured)  # type: ignore[attr-defined]
    return wrapped


def build_server(repo: Path) -> MCPServer:
    """The server for the repository at `repo`."""
    server: MCPServer = MCPServer("gitswarm", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool()
    @tool_errors
    def submit_job(
        spec: Annotated[Text | None, Field(description="A job spec as TOML text (see docs/cli.md).")] = None,
        tasks: Annotated[
            list[dict[str, Any]] | None,
            Field(max_length=10_000, description="Or the tasks as objects with the spec's task fields (id, mode, adapter, prompt, checks, depends_on ...)."),
        ] = None,
        goal: Annotated[Text | None, Field(description="The job's goal, with `tasks`.")] = None,
        approve: Annotated[bool, Field(description="Approve tasks that act outside the repository (browser, deploy).")] = False,
        start: Annotated[bool, Field(description="Start workers for it now.")] = True,
        workers: Workers = 2,
        allow_overlap: Annotated[
            bool, Field(description="Submit implement tasks that may run at once and touch the same files (refused otherwise).")
        ] = False,
    ) -> dict[str, Any]:
        """Create a job (and start workers for it); returns its id."""
        return actions.submit_job(repo, spec, tasks, goal, approve, start, workers, allow_overlap)

    @server.tool()
    @tool_errors
    def delegate(
        instruction: Annotated[Text | None, Field(description="What the agent should change.")] = None,
        adapter: Annotated[str | None, Field(max_length=100, description="The agent CLI (claude-code, codex, gemini, aider, hermes, omp ...).")] = None,
        checks: Annotated[Checks, Field(description="Commands that must pass on the patch.")] = [],  # noqa: B006 - pydantic copies defaults
        base: Annotated[str | None, Field(max_length=300, description="Branch from this revision (default: the checked-out tip).")] = None,
        confirm: Annotated[str | None, Field(max_length=64, description="The token of a proposal: start it.")] = None,
    ) -> dict[str, Any]:
        """Hand one change to an agent in its own branch and worktree, in two calls: the first proposes
        (scope, adapter, similar work already under way, a one-use token that expires); the second,
        with `confirm` set to that token, starts exactly what was proposed."""
        return actions.delegate(repo, instruction, adapter, checks, base, confirm)

    @server.tool()
    @tool_errors
    def status(
        job: Annotated[str | None, Field(max_length=200, description="A job: its tasks. None: every job.")] = None,
        include_all: Annotated[bool, Field(description="Also the post-commit hook's audit jobs.")] = False,
    ) -> dict[str, Any]:
        """Jobs and their state, or one job's tasks (from the index: no model call)."""
        return actions.status(repo, job, include_all)

    @server.tool()
    @tool_errors
    def show(job: Id) -> dict[str, Any]:
        """A job's stitched summary once it has one; before that its tasks and artifacts."""
        return actions.show(repo, job)

    @server.tool()
    @tool_errors
    def artifacts(job: Id) -> dict[str, Any]:
        """A job's artifacts: runs, checks, patches, verdicts, findings, decisions, summaries."""
        return actions.artifacts(repo, job)

    @server.tool()
    @tool_errors
    def artifact(artifact_id: Id) -> dict[str, Any]:
        """One artifact record, whole."""
        return actions.artifact(repo, artifact_id)

    @server.tool()
    @tool_errors
    def diff(patch: Id) -> dict[str, Any]:
        """A patch's diff against its base (git apply takes it)."""
        return actions.diff(repo, patch)

    @server.tool()
    @tool_errors
    def log(job: Id) -> dict[str, Any]:
        """A job's event history, oldest first."""
        return actions.log(repo, job)

    @server.tool()
    async def wait(
        target: Target,
        ctx: Context,
        timeout: Annotated[float, Field(gt=0, le=MAX_WAIT_SECONDS, description="Seconds to wait at most.")] = 60.0,
        until: Annotated[Literal["change", "done"], Field(description="Return at the first change, or when it is finished.")] = "change",
    ) -> Structured:
        """Block until a job (or JOB/TASK) changes state, or is done, or `timeout` passes; progress
        notifications report each change meanwhile. Returns what changed."""
        try:
            return structured(await _wait(repo, target, timeout, until, ctx))
        except GitswarmError as exc:
            raise ToolError(str(exc)) from None

    @server.tool()
    @tool_errors
    def cancel(target: Target, reason: Annotated[str | None, Field(max_length=4096)] = None) -> dict[str, Any]:
        """Cancel a job or one task (JOB/TASK); dependents of a cancelled task are skipped."""
        return actions.cancel(repo, target, reason)

    @server.tool()
    @tool_errors
    def retry(task: Target, start: bool = True) -> dict[str, Any]:
        """Requeue a failed, cancelled or skipped task (JOB/TASK) and start a worker for it."""
        return actions.retry(repo, task, start)

    @server.tool()
    @tool_errors
    def verify(patch: Id) -> dict[str, Any]:
        """Re-run a patch's checks on a clean checkout of its head and record the verdict."""
        return actions.verify(repo, patch)

    @server.tool()
    @tool_errors
    def merge(
        patch: Id,
        into: Annotated[str | None, Field(max_length=300, description="Target branch (default: the job's).")] = None,
        mode: Literal["merge", "squash", "rebase"] = "merge",
    ) -> dict[str, Any]:
        """Merge a verified patch (its head's deciding verdict counts here and accepts it); else says why not."""
        return actions.merge(repo, patch, into, mode)

    @server.tool()
    @tool_errors
    def review(
        target: Annotated[str, Field(min_length=1, max_length=300, description="A patch id (prefix) or a commit.")],
        accept: bool,
        note: Annotated[str | None, Field(max_length=4096)] = None,
    ) -> dict[str, Any]:
        """Add a verdict (accept or reject, with a note) on a patch's head or a commit, as this clone's user."""
        return actions.review(repo, target, accept, note)

    @server.tool()
    @tool_errors
    def follow_up(
        target: Annotated[
            str, Field(min_length=1, max_length=300, description="A finished delegation: JOB/TASK, or a patch id (prefix) it made.")
        ],
        instruction: Text,
        resume_session: Annotated[
            bool, Field(description="Resume the agent's own session (claude-code, codex) instead of a fresh one.")
        ] = False,
        start: Annotated[bool, Field(description="Start a worker for it now.")] = True,
    ) -> dict[str, Any]:
        """Continue a delegation: a new attempt on its branch whose prompt carries the original contract, the
        previous patch and its verdict, and this instruction. Recorded before it runs; its new head is verified again."""
        return actions.follow_up(repo, target, instruction, resume_session, start)

    @server.tool()
    @tool_errors
    def steer(target: Target, text: Text) -> dict[str, Any]:
        """Guidance delivered at the next safe point: the task's next attempt or repair round (JOB/TASK), or the
        next task of the job to start (JOB). Delivery is recorded (see `log`); that the agent followed it is never claimed."""
        return actions.steer(repo, target, text)

    @server.resource("gitswarm://jobs/{job}/summary", mime_type="text/markdown")
    def job_summary(job: str) -> str:
        """A job's stitched summary (Markdown)."""
        try:
            data = actions.show(repo, job)
        except GitswarmError as exc:
            raise ResourceError(str(exc)) from None
        if "summary" not in data:
            raise ResourceError(f"job {data['id'][:12]} has no summary yet (it is {data['status']})")
        text: str = data["summary"]["text"]  # Swarm.show's summary view: {"id", "text", **data}
        return text

    @server.resource("gitswarm://patches/{patch}/diff", mime_type="text/x-diff")
    def patch_diff(patch: str) -> str:
        """A patch's diff."""
        try:
            diff: str = actions.diff(repo, patch)["diff"]
        except GitswarmError as exc:
            raise ResourceError(str(exc)) from None
        return diff

    return server


async def _wait(repo: Path, target: str, timeout: float, until: str, ctx: Context) -> dict[str, Any]:
    job, task, common = await anyio.to_thread.run_sync(watch.resolve, repo, target)
    first = await anyio.to_thread.run_sync(watch.look, repo, job, task)
    start = time.monotonic()
    seen, moved = first, 0
    while not seen.done:  # a finished job or task changes no more (until a retry: wait again then)
        if time.monotonic() - start >= timeout:
            break
        await anyio.sleep(POLL_SECONDS)
        tip = watch.tip(common, job)
        if tip is not None and tip == seen.tip:
            continue
        now = await anyio.to_thread.run_sync(watch.look, repo, job, task)
        step = watch.changes(seen, now)
        seen = now
        if not step["tasks"] and "job" not in step:
            continue
        moved += 1
        await ctx.report_progress(moved, None, _progress_line(step))
        if until == "change":
            break
    return {
        "job": job, "task": task, "status": seen.status, "states": seen.states, "done": seen.done,
        "timed_out": not (seen.done or (until == "change" and moved)), "changed": watch.changes(first, seen),
        "waited": round(time.monotonic() - start, 3),
    }


def _progress_line(step: dict) -> str:
    parts = [f"{t}: {c['from']} -> {c['to']}" for t, c in step["tasks"].items()]
    if "job" in step:
        parts.append(f"job: {step['job']['from']} -> {step['job']['to']}")
    return "; ".join(parts)


def serve(repo: Path) -> None:
    """Serve the repository at `repo` over stdio until the client closes it."""
    build_server(repo).run("stdio")
