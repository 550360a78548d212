"""The pilot's tools as plain functions over the engine: no MCP here.

Each takes the repository directory and plain values, opens the Swarm for
that one call (the index is shared with workers through SQLite, so every
call sees their latest writes) and returns JSON-able data. Errors are the
engine's own (BadInput, NotFound, WorkFailed ...), one line each; the
server turns them into tool errors. The rules are the CLI's: jobs pulled
from elsewhere run only once approved, side-effecting tasks need `approve`,
and only a patch whose deciding verdict counts here and accepts it merges.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any, Literal

from gitswarm.engine.config import load_config
from gitswarm.engine.delegation import merge_job as train
from gitswarm.engine.delegation import patches, similar
from gitswarm.engine.delegation.merge import mergeable
from gitswarm.engine.jobs import followup, steering
from gitswarm.engine.results import Changed, MergeResult, Reviewed, SteerRecorded, TrainResult, Verified
from gitswarm.engine.routing.adapter_checks import refuse_unusable
from gitswarm.engine.sharing import audit
from gitswarm.engine.swarm import Swarm
from gitswarm.model.approval import BY_ELICITATION, PILOT_REQUEST
from gitswarm.model.errors import BadInput, WorkFailed
from gitswarm.model.evidence import UNVERIFIED
from gitswarm.model.provenance import Weighed, count_hint, deciding
from gitswarm.model.records import TaskSpec
from gitswarm.model.spec import parse_spec, toml_string
from gitswarm.pilot import proposals
from gitswarm.pilot.workers import start_worker

MAX_TEXT = 256 * 1024  # bytes of one instruction or spec given to a tool
MAX_DIFF = 4 * 1024 * 1024  # bytes of a diff returned whole; past it the diff is cut and says so
Mode = Literal["merge", "squash", "rebase"]


def _text(value: str, what: str) -> str:
    if len(value.encode(errors="surrogatepass")) > MAX_TEXT:
        raise BadInput(f"{what}: longer than {MAX_TEXT // 1024} KiB")
    if "\x00" in value:
        raise BadInput(f"{what}: holds a NUL byte")
    return value


# -- starting work ---------------------------------------------------------------------------------


def submit_job(
    repo: Path, spec: str | None = None, tasks: list[dict[str, Any]] | None = None, goal: str | None = None,
    approve: bool = False, start: bool = True, workers: int = 2, allow_overlap: bool = False,
    ask: Callable[[str], bool | None] = lambda question: None,
) -> dict:
    """A job from TOML text (`spec`) or from structured `tasks` (with `goal`); started unless `start` is false.

    Tasks that act outside the repository need a person's approval, which the
    pilot can only ask for (`approve`; model/approval.py): `ask` puts the
    question to the person behind the client. No answer, or a client that
    cannot ask: the job is submitted and waits for `gitswarm approve`. No:
    nothing is submitted.
    """
    if (spec is None) == (tasks is None):
        raise BadInput("submit_job: give either spec (TOML text) or tasks")
    text = _text(spec, "spec") if spec is not None else spec_from_tasks(goal or "", tasks or [])
    with closing(Swarm(repo)) as swarm:
        parsed = parse_spec(text, swarm.adapter_facts(), "mcp", approve)
        side_effects = [t for t in parsed.tasks if t.approved]
        how = PILOT_REQUEST
        if side_effects:
            answer = ask(approval_question(repo, side_effects))
            if answer is False:
                raise BadInput("submit_job: the person did not approve the tasks that act outside the repository; nothing was submitted")
            if answer:
                how = BY_ELICITATION
        waits = bool(side_effects) and how == PILOT_REQUEST
        if start and not waits:  # its worker starts here: an adapter that cannot run here is said now, not left queued
            refuse_unusable(swarm, [t.adapter for t in parsed.tasks], os.environ)
        job_id = swarm.submit_text(text, "mcp", approve=approve, allow_overlap=allow_overlap, approved_how=how)
        data: dict[str, Any] = {"id": job_id, "notices": list(swarm.notices)}
        if waits:
            data["awaiting_approval"] = (
                f"tasks {', '.join(t.id for t in side_effects)} act outside the repository and wait for a person: "
                f"gitswarm approve {job_id[:12]}, then gitswarm work --job {job_id[:12]}"
            )
        elif start:
            data["worker"] = start_worker(_workdir(swarm), swarm.common_dir, job_id, workers)
        return data


def approval_question(repo: Path, tasks: list[TaskSpec]) -> str:
    """What the person is asked: which tasks, on which adapters, in which repository."""
    listed = "; ".join(f"{t.id} ({t.adapter}{': ' + ', '.join(t.needs) if t.needs else ''})" for t in tasks)
    return f"gitswarm in {repo}: a job asks to run tasks that act outside the repository: {listed}. Approve them?"


def spec_from_tasks(goal: str, tasks: list[dict[str, Any]]) -> str:
    """Structured tasks as job-spec TOML, every value quoted by type (so none can add keys of its own);
    the spec's own validation then applies as to any spec."""
    if not tasks:
        raise BadInput("tasks: give at least one task")
    lines = [f"goal = {toml_string(_text(goal, 'goal'))}"] if goal else []
    for n, task in enumerate(tasks):
        if not isinstance(task, dict):
            raise BadInput(f"tasks[{n}]: must be an object")
        lines.append("[[tasks]]")
        for key, value in task.items():
            if not isinstance(key, str) or not key.replace("_", "").isalnum():
                raise BadInput(f"tasks[{n}]: {key!r} is not a field name")
            lines.append(f"{key} = {_toml_value(value, f'tasks[{n}].{key}')}")
    return "\n".join(lines) + "\n"


def _toml_value(value: object, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise BadInput(f"{where}: must be a finite number")
        return repr(value)
    if isinstance(value, str):
        return toml_string(_text(value, where))
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v, where) for v in value) + "]"
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise BadInput(f"{where}: keys must be strings")
            items.append(f"{toml_string(key)} = {_toml_value(item, where)}")
        return "{" + ", ".join(items) + "}"
    raise BadInput(f"{where}: {type(value).__name__} is not a spec value")


def delegate(
    repo: Path, instruction: str | None = None, adapter: str | None = None, checks: list[str] | None = None,
    base: str | None = None, confirm: str | None = None, workers: int = 1,
) -> dict:
    """Stage one (no `confirm`): the proposal, the work already under way that looks like it, and a
    one-use token. Stage two (`confirm` = that token): submit exactly what was proposed and start it."""
    with closing(Swarm(repo)) as swarm:
        if confirm is not None:
            proposal = proposals.take(swarm.common_dir, confirm, swarm.clock())
            refuse_unusable(swarm, [t.adapter for t in parse_spec(proposal.spec, swarm.adapter_facts(), "delegate").tasks], os.environ)
            job_id = swarm.submit_text(proposal.spec, "delegate")
            return {
                "stage": "started", "job": job_id, "task": "delegate", "notices": list(swarm.notices),
                "worker": start_worker(_workdir(swarm), swarm.common_dir, job_id, workers),
            }
        if not instruction or not instruction.strip():
            raise BadInput("delegate: give an instruction (or confirm a proposal's token)")
        if not adapter:
            raise BadInput(f"delegate: give an adapter (one of {', '.join(swarm.known_adapters())})")
        _text(instruction, "instruction")
        check_list = [_text(c, "checks") for c in checks or []] or list(load_config(swarm.repo.workdir).audit.checks)
        if not check_list:  # said before it starts: the patch will stand unverified
            swarm.notices.append(UNVERIFIED)
        pinned, _ = swarm.pin_base(base, True)
        spec = patches.delegation_spec(instruction, adapter, check_list, pinned)
        routed = parse_spec(spec, swarm.adapter_facts(), "delegate").tasks[0].adapter  # refused now, not at confirmation
        proposal = proposals.propose(swarm.common_dir, spec, swarm.clock())
        return {
            "stage": "proposed",
            "token": proposal.token,
            "expires_in": round(proposal.expires - swarm.clock()),
            "proposal": {
                "instruction": instruction, "adapter": routed, "checks": check_list, "base": pinned,
                "scope": sorted(similar.paths_named(instruction)),
            },
            "similar": similar.looks_alike(instruction, pinned, similar.active_implement_tasks(swarm)),
            "notices": list(swarm.notices),
            "next": "call delegate again with confirm set to this token to start it",
        }


def _workdir(swarm: Swarm) -> Path:
    return swarm.repo.workdir or swarm.common_dir


# -- reads: stored state, no model call ------------------------------------------------------------


def status(repo: Path, job: str | None = None, include_all: bool = False) -> dict:
    with closing(Swarm(repo, create=False)) as swarm:
        swarm.release_dead()  # a task held by a worker that died here shows queued, its error saying so
        data = swarm.status(job)
        if job is None and not include_all:
            data["jobs"] = [j for j in data["jobs"] if not j["audit"]]
        return data


def show(repo: Path, job: str) -> dict:
    with closing(Swarm(repo, create=False)) as swarm:
        swarm.release_dead()
        return swarm.show(job)


def artifacts(repo: Path, job: str) -> dict:
    with closing(Swarm(repo, create=False)) as swarm:
        return swarm.artifacts(job)


def artifact(repo: Path, artifact_id: str) -> dict:
    with closing(Swarm(repo, create=False)) as swarm:
        return swarm.artifact(artifact_id)


def diff(repo: Path, patch: str, max_bytes: int = MAX_DIFF) -> dict:
    with closing(Swarm(repo, create=False)) as swarm:
        data = patches.patch_diff(swarm, patch)
    cut = len(data) > max_bytes
    return {"patch": patch, "diff": data[:max_bytes].decode(errors="replace"), "bytes": len(data), "truncated": cut}


def log(repo: Path, job: str) -> dict:
    with closing(Swarm(repo, create=False)) as swarm:
        return swarm.log(job)


# -- acting on work ----------------------------------------------------------------------------------


def cancel(repo: Path, target: str, reason: str | None = None) -> Changed:
    with closing(Swarm(repo)) as swarm:
        return swarm.cancel(target, _text(reason, "reason") if reason else None)


def retry(repo: Path, task: str, start: bool = True, workers: int = 1) -> dict:
    with closing(Swarm(repo)) as swarm:
        data = swarm.retry(task)
        if start:
            data["worker"] = start_worker(_workdir(swarm), swarm.common_dir, data["job"], workers)
        return data


def verify(repo: Path, patch: str) -> Verified:
    with closing(Swarm(repo)) as swarm:
        return patches.verify_now(swarm, patch)


def merge(repo: Path, patch: str, into: str | None = None, mode: Mode = "merge") -> MergeResult:
    """Merge a patch whose head has a deciding, accepted verdict that counts here; else say why not.
    Unlike `gitswarm merge` it never verifies on the way: a pilot calls `verify` for that."""
    if mode not in ("merge", "squash", "rebase"):
        raise BadInput("mode: one of merge, squash, rebase")
    with closing(Swarm(repo)) as swarm:
        patch_id, found, _ = patches.find_patch(swarm, patch)
        weighed = swarm.verdict_notes().weigh(found.head)
        if not mergeable(weighed, patch_id):
            raise WorkFailed(why_not_mergeable(weighed, patch_id, found.head))
        return patches.merge(swarm, patch_id, into, mode, no_recheck=False)


def merge_job(repo: Path, job: str, into: str | None = None) -> TrainResult:
    """`gitswarm merge JOB`: the job's verified patches (deciding verdicts that count here and accept them) stacked,
    checked once and landed in one move; a tool error, nothing merged, when none is verified."""
    with closing(Swarm(repo)) as swarm:
        return train.merge_job(swarm, job, into)


def why_not_mergeable(weighed: list[Weighed], patch_id: str, head: str) -> str:
    """Why `mergeable` said no, in the words a pilot acts on."""
    where = f"patch {patch_id[:12]} (head {head[:12]})"
    decider = deciding(weighed)
    if not weighed:
        return f"{where} has no verdict: call verify first; nothing merged"
    if decider is None:
        found = sorted({hint for w in weighed if (hint := count_hint(w.provenance))})
        hints = "".join(f" ({hint})" for hint in found)
        return f"{where} has only verdicts that do not count here{hints}: call verify; nothing merged"
    if not decider.verdict.accepted:
        who = decider.verdict.reviewer or decider.verdict.producer
        return f"{where} was rejected by its deciding verdict ({who}, {decider.provenance}); nothing merged"
    return f"{where} has no accepted verdict of gitswarm's own checks for this patch: call verify; nothing merged"


def follow_up(repo: Path, target: str, instruction: str, resume_session: bool = False, start: bool = True) -> dict:
    """Continue a finished delegation (JOB/TASK or a patch it made) with a new instruction: recorded as an
    operation first, then a worker runs the new attempt (a new head, verified again)."""
    with closing(Swarm(repo)) as swarm:
        data = followup.follow_up(swarm, target, _text(instruction, "instruction"), resume_session)
        if start:
            data["worker"] = start_worker(_workdir(swarm), swarm.common_dir, data["job"], 1)
        return data


def steer(repo: Path, target: str, text: str) -> SteerRecorded:
    """Guidance for the next attempt or repair round of a task (JOB/TASK), or the next task of a job to start."""
    with closing(Swarm(repo)) as swarm:
        return steering.steer(swarm, target, _text(text, "text"))


def review(repo: Path, target: str, accept: bool, note: str | None = None) -> Reviewed:
    with closing(Swarm(repo)) as swarm:
        return audit.review(swarm, target, accept, _text(note, "note") if note else None)
