"""The pilot's MCP tools: each one's arguments as a msgspec Struct, and the action it calls.

A Struct is the tool's whole contract: its docstring is the tool's
description, its fields (with their Meta constraints) the input schema the
client sees, and `msgspec.convert` checks a call's arguments against the
same definition before anything runs, so a schema and its checks cannot
drift apart. An argument the tool does not take is refused, naming it (the
schema says `additionalProperties: false`): ignored, a misspelt or invented
argument would run the tool as if it had not been given.
"""

from __future__ import annotations

import difflib
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Generic, Literal, TypeVar

import msgspec
from msgspec import Meta

from gitswarm.engine.results import Changed, MergeResult, Reviewed, SteerRecorded, TrainResult, Verified, output_schema
from gitswarm.model.errors import BadInput
from gitswarm.pilot import actions, watch
from gitswarm.pilot.elicit import Ask, cannot_ask

MAX_WAIT_SECONDS = 3600.0

Id = Annotated[str, Meta(min_length=1, max_length=200, description="An id or unique prefix.")]
Target = Annotated[str, Meta(min_length=1, max_length=300, description="A job (id or prefix), or a task as JOB/TASK.")]
Text = Annotated[str, Meta(max_length=actions.MAX_TEXT)]
Token = Annotated[str, Meta(max_length=64)]
Name = Annotated[str, Meta(max_length=100)]
JobId = Annotated[str, Meta(max_length=200)]
Revision = Annotated[str, Meta(max_length=300)]
Note = Annotated[Annotated[str, Meta(max_length=4096)] | None, Meta(description="A note kept with it.")]
Checks = Annotated[list[Annotated[str, Meta(max_length=4096)]], Meta(max_length=64, description="Commands that must pass on the patch.")]
Workers = Annotated[int, Meta(ge=1, le=64, description="Worker processes to start for the job.")]


@dataclass
class Call:
    """What a running tool may use besides its arguments: progress to report, and whether to stop (a
    `wait` returns). `unanswered`: the client cancelled the call, so its result is not sent."""

    progress: Callable[[int, str], None] = lambda done, message: None
    cancelled: threading.Event = field(default_factory=threading.Event)
    unanswered: bool = False
    ask: Ask = cannot_ask  # a yes/no question to the person behind the client (pilot/elicit.py)

    def ask_person(self, question: str) -> bool | None:
        return self.ask(question, self.cancelled)


class Arguments(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class SubmitJob(Arguments):
    """Create a job (and start workers for it); returns its id."""

    spec: Annotated[Text | None, Meta(description="A job spec as TOML text (see docs/cli.md).")] = None
    tasks: Annotated[
        Annotated[list[dict[str, Any]], Meta(max_length=10_000)] | None,
        Meta(description="Or the tasks as objects with the spec's task fields (id, mode, adapter, prompt, checks, depends_on ...)."),
    ] = None
    goal: Annotated[Text | None, Meta(description="The job's goal, with `tasks`.")] = None
    approve: Annotated[bool, Meta(description=(
        "Ask the person to approve tasks that act outside the repository (browser, deploy): through the client when it "
        "can ask (elicitation), else the job waits until they run `gitswarm approve`."))] = False
    start: Annotated[bool, Meta(description="Start workers for it now.")] = True
    workers: Workers = 2
    allow_overlap: Annotated[
        bool, Meta(description="Submit implement tasks that may run at once and touch the same files (refused otherwise).")
    ] = False


class Delegate(Arguments):
    """Hand one change to an agent in its own branch and worktree, in two calls: the first proposes
    (scope, adapter, similar work already under way, a one-use token that expires); the second,
    with `confirm` set to that token, starts exactly what was proposed."""

    instruction: Annotated[Text | None, Meta(description="What the agent should change.")] = None
    adapter: Annotated[Name | None, Meta(description="The agent CLI (claude-code, codex, gemini, aider, hermes, omp ...).")] = None
    checks: Checks = []
    base: Annotated[Revision | None, Meta(description="Branch from this revision (default: the checked-out tip).")] = None
    confirm: Annotated[Token | None, Meta(description="The token of a proposal: start it.")] = None


class Status(Arguments):
    """Jobs and their state, or one job's tasks (from the index: no model call)."""

    job: Annotated[JobId | None, Meta(description="A job: its tasks. None: every job.")] = None
    include_all: Annotated[bool, Meta(description="Also the post-commit hook's audit jobs.")] = False


class Show(Arguments):
    """A job's stitched summary once it has one; before that its tasks and artifacts."""

    job: Id


class Artifacts(Arguments):
    """A job's artifacts: runs, checks, patches, verdicts, findings, decisions, summaries."""

    job: Id


class Artifact(Arguments):
    """One artifact record, whole."""

    artifact_id: Id


class Diff(Arguments):
    """A patch's diff against its base (git apply takes it)."""

    patch: Id


class Log(Arguments):
    """A job's event history, oldest first."""

    job: Id


class Wait(Arguments):
    """Block until a job (or JOB/TASK) changes state, or is done, or `timeout` passes; progress
    notifications report each change meanwhile. Returns what changed."""

    target: Target
    timeout: Annotated[float, Meta(gt=0, le=MAX_WAIT_SECONDS, description="Seconds to wait at most.")] = 60.0
    until: Annotated[Literal["change", "done"], Meta(description="Return at the first change, or when it is finished.")] = "change"


class Cancel(Arguments):
    """Cancel a job or one task (JOB/TASK); dependents of a cancelled task are skipped."""

    target: Target
    reason: Annotated[Annotated[str, Meta(max_length=4096)] | None, Meta(description="Why (kept in the job's history).")] = None


class Retry(Arguments):
    """Requeue a failed, cancelled or skipped task (JOB/TASK) and start a worker for it."""

    task: Target
    start: Annotated[bool, Meta(description="Start a worker for it now.")] = True


class Verify(Arguments):
    """Re-run a patch's checks on a clean checkout of its head and record the verdict."""

    patch: Id


class Merge(Arguments):
    """Merge a verified patch (its head's deciding verdict counts here and accepts it); else says why not."""

    patch: Id
    into: Annotated[Revision | None, Meta(description="Target branch (default: the job's).")] = None
    mode: Literal["merge", "squash", "rebase"] = "merge"


class MergeJob(Arguments):
    """Merge a job's verified patches in one move (its merge train): stacked in dependency order on the target's
    tip, the checks run once on the stack (bisected to the patch that breaks it), then the target moves once; says
    per patch landed, conflicted, broke_stack, held_back, unverified or merged_before."""

    job: Id
    into: Annotated[Revision | None, Meta(description="Target branch (default: the job's).")] = None


class Review(Arguments):
    """Add a verdict (accept or reject, with a note) on a patch's head or a commit, as this clone's user."""

    target: Annotated[str, Meta(min_length=1, max_length=300, description="A patch id (prefix) or a commit.")]
    accept: bool
    note: Note = None


class FollowUp(Arguments):
    """Continue a delegation: a new attempt on its branch whose prompt carries the original contract, the
    previous patch and its verdict, and this instruction. Recorded before it runs; its new head is verified again."""

    target: Annotated[
        str, Meta(min_length=1, max_length=300, description="A finished delegation: JOB/TASK, or a patch id (prefix) it made.")
    ]
    instruction: Text
    resume_session: Annotated[
        bool, Meta(description="Resume the agent's own session (claude-code, codex) instead of a fresh one.")
    ] = False
    start: Annotated[bool, Meta(description="Start a worker for it now.")] = True


class Steer(Arguments):
    """Guidance delivered at the next safe point: the task's next attempt or repair round (JOB/TASK), or the
    next task of the job to start (JOB). Delivery is recorded (see `log`); that the agent followed it is never claimed."""

    target: Target
    text: Text


A = TypeVar("A", bound=Arguments)


@dataclass(frozen=True)
class Tool(Generic[A]):
    name: str
    arguments: type[A]
    run: Callable[[Path, A, Call], Any]  # plain data, or the result Struct `returns` names
    returns: type[msgspec.Struct] | None = None  # its outputSchema (engine/results.py): the CLI's --json is the same type


TOOLS: dict[str, Tool[Any]] = {
    tool.name: tool
    for tool in (
        Tool("submit_job", SubmitJob, lambda repo, a, call: actions.submit_job(
            repo, a.spec, a.tasks, a.goal, a.approve, a.start, a.workers, a.allow_overlap, call.ask_person)),
        Tool("delegate", Delegate, lambda repo, a, _: actions.delegate(repo, a.instruction, a.adapter, a.checks, a.base, a.confirm)),
        Tool("status", Status, lambda repo, a, _: actions.status(repo, a.job, a.include_all)),
        Tool("show", Show, lambda repo, a, _: actions.show(repo, a.job)),
        Tool("artifacts", Artifacts, lambda repo, a, _: actions.artifacts(repo, a.job)),
        Tool("artifact", Artifact, lambda repo, a, _: actions.artifact(repo, a.artifact_id)),
        Tool("diff", Diff, lambda repo, a, _: actions.diff(repo, a.patch)),
        Tool("log", Log, lambda repo, a, _: actions.log(repo, a.job)),
        Tool("wait", Wait, lambda repo, a, call: watch.wait(repo, a.target, a.timeout, a.until, call.progress, call.cancelled)),
        Tool("cancel", Cancel, lambda repo, a, _: actions.cancel(repo, a.target, a.reason), Changed),
        Tool("retry", Retry, lambda repo, a, _: actions.retry(repo, a.task, a.start)),
        Tool("verify", Verify, lambda repo, a, _: actions.verify(repo, a.patch), Verified),
        Tool("merge", Merge, lambda repo, a, _: actions.merge(repo, a.patch, a.into, a.mode), MergeResult),
        Tool("merge_job", MergeJob, lambda repo, a, _: actions.merge_job(repo, a.job, a.into), TrainResult),
        Tool("review", Review, lambda repo, a, _: actions.review(repo, a.target, a.accept, a.note), Reviewed),
        Tool("follow_up", FollowUp, lambda repo, a, _: actions.follow_up(repo, a.target, a.instruction, a.resume_session, a.start)),
        Tool("steer", Steer, lambda repo, a, _: actions.steer(repo, a.target, a.text), SteerRecorded),
    )
}


@functools.cache
def listing() -> list[dict[str, Any]]:
    """tools/list's tools: name, description (the Struct's docstring) and input schema (its fields)."""
    _, components = msgspec.json.schema_components([t.arguments for t in TOOLS.values()])
    listed = []
    for tool in TOOLS.values():
        schema = dict(components[tool.arguments.__name__])
        description = schema.pop("description")
        schema.pop("title", None)
        schema.setdefault("properties", {})
        entry = {"name": tool.name, "description": " ".join(description.split()), "inputSchema": schema}
        if tool.returns is not None:
            entry["outputSchema"] = output_schema(tool.returns)
        listed.append(entry)
    return listed


MAX_QUOTED = 200  # characters of the unknown argument names an error quotes back


def parse(tool: Tool[A], arguments: dict[str, Any]) -> A:
    """The call's arguments checked against the tool's Struct; msgspec.ValidationError says which and why,
    BadInput names the arguments the tool does not take."""
    known = tool.arguments.__struct_fields__
    unknown = [name for name in arguments if name not in known]
    if unknown:
        raise BadInput(unknown_arguments(tool, unknown))
    return msgspec.convert(arguments, tool.arguments)


def unknown_arguments(tool: Tool[Any], unknown: list[str]) -> str:
    """`status: unknown argument 'target' (it takes job, include_all)`, or `...; did you mean 'job'?`
    for a close one; each name as repr shows it, so the message stays one line."""
    known = tool.arguments.__struct_fields__
    names = ", ".join(repr(name) for name in unknown)
    if len(names) > MAX_QUOTED:
        names = names[: MAX_QUOTED - 1] + "…"
    close = difflib.get_close_matches(unknown[0], known, n=1) if len(unknown) == 1 else []
    hint = f"; did you mean {close[0]!r}?" if close else f" (it takes {', '.join(known)})"
    return f"{tool.name}: unknown argument{'s' if len(unknown) > 1 else ''} {names}{hint}"
