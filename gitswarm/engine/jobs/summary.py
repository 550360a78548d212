"""The stitcher: a job's `summary` artifact, built from its records and artifacts alone."""

from __future__ import annotations

from collections.abc import Callable

from gitswarm.adapters.shell import tail
from gitswarm.model.artifacts import Check, Decision, Finding, Patch, Run, SandboxUse, Summary, Verdict, of_kind
from gitswarm.model.evidence import judges_line
from gitswarm.model.records import TaskState
from gitswarm.store.jobs import Snapshot

FAILURE_TAIL_LINES = 15


def build_summary(snapshot: Snapshot, read_blob: Callable[[str], bytes], now: float) -> Summary:
    job, state = snapshot.job, snapshot.state
    tasks = snapshot.tasks()
    artifacts = {a: snapshot.artifact(a) for t in tasks for a in t.artifacts}
    rows, failures, findings, decisions, patches = [], [], [], [], []
    runs = of_kind(artifacts.values(), Run)
    verdicts: dict[str, Verdict] = {}
    for artifact in artifacts.values():
        if isinstance(artifact, Verdict):
            verdicts[artifact.head] = artifact
    for task in tasks:
        checks = of_kind((artifacts[a] for a in task.artifacts), Check)
        last = checks[-1] if checks else None
        earlier = [c for c in checks[:-1] if not c.passed]
        note = task.error if task.state is not TaskState.SUCCEEDED else None
        if task.state is TaskState.SUCCEEDED and earlier:
            note = "; ".join(f"attempt {c.attempt}: {_check_outcome(c)}" for c in earlier) + "; then passed"
        rows.append(
            {
                "task": task.id,
                "state": task.state.value,
                # Every run of the task, retries included: `claims` counts each lease granted and never
                # goes down, while `attempts` counts since the last retry (what max_attempts bounds).
                "attempts": task.claims,
                "seconds": round(last.duration, 3) if last else None,
                "error": note,
            }
        )
        if task.state is TaskState.FAILED:
            output, cut = b"", 0
            if last is not None:
                ref = last.stderr or last.stdout
                output, cut = (read_blob(ref.oid), ref.truncated) if ref else (b"", 0)
            failures.append(
                {"task": task.id, "error": task.error, "tail": tail(output, FAILURE_TAIL_LINES), "truncated": cut}
            )
        for artifact_id in task.artifacts:
            artifact = artifacts[artifact_id]
            if isinstance(artifact, Finding):
                findings.append(
                    {
                        "task": task.id,
                        "title": artifact.title,
                        "body": artifact.body,
                        "confidence": artifact.confidence,
                        "low_confidence": artifact.low_confidence,
                    }
                )
            elif isinstance(artifact, Decision):
                decisions.append({"task": task.id, "title": artifact.title, "rationale": artifact.rationale})
            elif isinstance(artifact, Patch):
                verdict = verdicts.get(artifact.head)
                patches.append(
                    {
                        "task": task.id,
                        "id": artifact_id,
                        "head": artifact.head,
                        "files": len(artifact.files),
                        "verified": bool(verdict and verdict.accepted),
                        "verdict": None if verdict is None else f"{verdict.status}/{verdict.integrity}/{verdict.contract}",
                        "judges": list(verdict.judges if verdict is not None else artifact.judges),
                    }
                )
    # Stamped with the last task change, not the job state's: recording the
    # summary itself must not make the next stitch of the same outcome differ.
    ended = max(task.updated for task in tasks)
    refused = _refused(runs)
    data: dict[str, object] = {
        "goal": job.goal,
        "status": state.status(),
        "wall_seconds": round(ended - job.created, 3),
        "counts": state.counts,
        "tasks": rows,
        "failures": failures,
        "findings": findings,
        "decisions": decisions,
        "patches": patches,
        "cost": _cost(runs),
        "stopped_by": state.stopped,
    }
    if refused:  # only then: the summaries of runs without an endpoint proxy stay as they were
        data["refused"] = refused
    return Summary(job=job.id, created=ended, producer="stitcher", text=render_markdown(job.id, data), data=data)


def _cost(runs: list[Run]) -> dict:
    """Dollars and tokens over every agent run, where the adapters reported (or priced) them."""
    priced = [r.cost_usd for r in runs if r.cost_usd is not None]
    return {
        "runs": len(runs),
        "usd": round(sum(priced), 6) if priced else None,
        "estimated": any(r.cost_estimated for r in runs),
        "input_tokens": sum(r.input_tokens or 0 for r in runs),
        "output_tokens": sum(r.output_tokens or 0 for r in runs),
        "by_adapter": {
            name: round(sum(r.cost_usd or 0.0 for r in runs if r.adapter == name), 6)
            for name in sorted({r.adapter for r in runs})
        },
    }


def _refused(runs: list[Run]) -> list[dict]:
    """What the endpoint proxy of each agent run refused (docs/sandbox.md), for the runs where it refused any."""
    return [{"task": r.task, "attempt": r.attempt, "destinations": list(r.sandbox.refused)}
            for r in runs if isinstance(r.sandbox, SandboxUse) and r.sandbox.refused]


def _check_outcome(check: Check) -> str:
    return "timed out" if check.timed_out else f"exit {check.exit_code}"


def render_markdown(job_id: str, data: dict) -> str:
    counts = ", ".join(f"{n} {s}" for s, n in data["counts"].items())
    lines = [f"# {data['goal']}", "", f"Job `{job_id}`: **{data['status']}** ({counts}) in {data['wall_seconds']:.1f}s", ""]
    if data.get("stopped_by"):
        lines += [f"Stopped by its budget: {data['stopped_by']}. Nothing more was leased.", ""]
    cost = data.get("cost") or {}
    if cost.get("runs"):
        usd = "unknown" if cost["usd"] is None else f"${cost['usd']:.4f}" + (" (partly estimated from tokens)" if cost["estimated"] else "")
        lines += [f"Agent runs: {cost['runs']}, cost {usd}, tokens {cost['input_tokens']} in / {cost['output_tokens']} out.", ""]
    lines += ["| task | state | attempts | seconds | notes |", "| --- | --- | --- | --- | --- |"]
    for row in data["tasks"]:
        seconds = "" if row["seconds"] is None else f"{row['seconds']:.2f}"
        error = (row["error"] or "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {row['task']} | {row['state']} | {row['attempts']} | {seconds} | {error} |")
    for failure in data["failures"]:
        lines += ["", f"## Failed: {failure['task']}", "", failure["error"] or "", ""]
        if failure["tail"]:
            lines += ["```", failure["tail"], "```"]
        if failure["truncated"]:
            lines.append(f"(output cut at the capture cap: {failure['truncated']} bytes not kept)")
    for title, key in (("Findings", "findings"), ("Decisions", "decisions")):
        if data[key]:
            lines += ["", f"## {title}", ""]
            lines += [f"- **{item['title']}** ({item['task']})" for item in data[key]]
    if data.get("refused"):
        lines += ["", "## Network refused by the sandbox", ""]
        lines += [f"- {item['task']} (attempt {item['attempt']}): {', '.join(item['destinations'])}" for item in data["refused"]]
    if data["patches"]:
        lines += ["", "## Patches", ""]
        for patch in data["patches"]:
            state = "verified" if patch["verified"] else (patch["verdict"] or "unverified")
            judges = patch.get("judges") or []
            changed = f"; {judges_line(judges)}" if judges else ""
            lines.append(f"- `{patch['id'][:12]}` from {patch['task']}: {patch['files']} files, {state}{changed}")
    return "\n".join(lines) + "\n"
