"""Plain-text views of command results, for people at a terminal."""

from __future__ import annotations

import datetime
from operator import itemgetter

from gitswarm.cli.table import columns_table, table
from gitswarm.model.provenance import count_hint

__all__ = ["table"]  # commands draw their own tables with it


def when(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {state}" for state, n in counts.items()) or "no tasks"


def plural(n: int, noun: str) -> str:
    """`1 job`, `2 jobs`."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def jobs(data: dict, hidden_audits: int = 0) -> str:
    hint = f"{plural(hidden_audits, 'audit job')} of the post-commit hook not shown (gitswarm status --all)"
    if not data["jobs"]:
        return "no jobs" + (f"; {hint}" if hidden_audits else "")
    rows = [
        (j["id"][:12], "awaiting approval" if j.get("awaiting_approval") else j["status"], counts(j["counts"]), when(j["created"]), j["goal"])
        for j in data["jobs"]
    ]
    text = table(("JOB", "STATUS", "TASKS", "CREATED", "GOAL"), rows)
    waiting = data.get("awaiting_approval") or {}
    if waiting:
        text += f"\n\n{len(waiting)} job(s) will not run here until approved (gitswarm approve JOB):"
        text += "".join(f"\n  {job[:12]}: {why}" for job, why in waiting.items())
    if hidden_audits:
        text += f"\n\n{hint}"
    return text


def job(data: dict) -> str:
    head = f"job {data['id']}  {data['status']}\ngoal: {data['goal']}\ntasks: {counts(data['counts'])}\n"
    if data.get("awaiting_approval"):
        head += f"awaiting approval: {data['awaiting_approval']} (gitswarm approve {data['id'][:12]})\n"
    tasks = data["tasks"]

    def field(name: str) -> list:
        return list(map(itemgetter(name), tasks))

    notes = [
        error or (f"skipped: {skipped} did not succeed" if skipped else "") or ("unverified: no checks judged its patch" if unverified else "")
        for error, skipped, unverified in zip(field("error"), field("skipped_because"), [t.get("unverified") for t in tasks])
    ]
    tries = list(map("{}/{}".format, field("attempts"), field("max_attempts")))
    columns = [field("id"), field("state"), tries, list(map(",".join, field("depends_on"))), field("adapter"), notes]
    names = ["TASK", "STATE", "TRIES", "NEEDS", "ADAPTER", "NOTE"]
    holders = [owner if state == "running" and owner else "" for owner, state in zip(field("owner"), field("state"))]
    if any(holders):  # which machine's worker runs what (`work --remote` names them host.clone.worker)
        columns.insert(5, holders)
        names.insert(5, "HELD BY")
    text = head + "\n" + columns_table(tuple(names), tuple(columns))
    if data.get("reviews"):
        text += "\n\nverdicts:\n" + reviews(data["reviews"])
    for op in data.get("refused", []):
        text += f"\nrefused: {op['kind']} {op['op'][:12]}" + (f" for {op['task']}" if op["task"] else "") + f": {op['why']}"
    return text


def reviews(found: dict[str, list[dict]]) -> str:
    rows = [
        (
            commit[:12], "accepted" if v["accepted"] else "rejected", v["verdict"], v["reviewer"],
            v["provenance"] if v["counted"] else f"NOT COUNTED ({v['provenance']})", v["note"] or "",
        )
        for commit, verdicts in found.items()
        for v in verdicts
    ]
    if not rows:
        return "none"
    hints = sorted({h for verdicts in found.values() for v in verdicts if not v["counted"] and (h := count_hint(v["provenance"]))})
    return table(("COMMIT", "VERDICT", "DETAIL", "REVIEWER", "PROVENANCE", "NOTE"), rows) + "".join(f"\n{h}" for h in hints)


def show(data: dict) -> str:
    text = job(data)
    if data["artifacts"]:
        text += "\n\nartifacts:\n" + artifacts(data)
    return text


def artifacts(data: dict) -> str:
    if not data["artifacts"]:
        return "no artifacts"
    rows = [(a["id"][:12], a["kind"], a["task"] or "-", a["summary"]) for a in data["artifacts"]]
    return table(("ARTIFACT", "KIND", "TASK", "SUMMARY"), rows)


def log(data: dict) -> str:
    rows = [(e["clock"], when(e["at"]), e["actor"][:10], e["op"], e["task"], e["commit"][:12]) for e in data["events"]]
    return table(("CLOCK", "TIME", "ACTOR", "OP", "TASK", "COMMIT"), rows)


def changed(data: dict) -> str:
    target = data["job"] + (f"/{data['task']}" if data["task"] else "")
    lines = [f"{target}:"] + [f"  {task}: {state}" for task, state in data["changed"].items()]
    return "\n".join(lines)


def ended(task: dict) -> str:
    """One task whose lease ended without a result: `requeued JOB/TASK: its worker w-1 (pid 812 on this host)
    died; no attempt used`, or what it is now (failed) and whether the attempt counted."""
    used = "its attempt used" if task["attempt_used"] else "no attempt used"
    verb = "requeued" if task["state"] == "queued" else task["state"] or "ended"
    return f"{verb} {task['task']}: {task['why']}; {used}"


def recovered(data: dict) -> str:
    lines = [ended(task) for task in data["tasks"]] or ["nothing to recover: no lease ran out and no holder on this host died"]
    for kept in data.get("kept", []):
        what = f"{kept['job']}/{kept['task']}" if "job" in kept else kept["file"]
        lines.append(f"kept result of {what}: {kept['outcome']}")
    return "\n".join(lines)


def doctor(data: dict) -> str:
    lines = [f"{'ok ' if c['ok'] else 'BAD'}  {c['name']}: {c['detail']}" for c in data["checks"]]
    return "\n".join(lines)


def demo_story(story: dict) -> str:
    lines = [f"demo repository: {story['repository']}"]
    merged = story.get("merged")
    if merged:
        lines.append(
            f"fix-add: its patch {merged['patch'][:12]} passed the check on a clean checkout,"
            f" so gitswarm merged it into {merged['into']} ({merged['old'][:10]} -> {merged['new'][:10]})."
        )
    rejected = story.get("rejected")
    if rejected:
        lines.append(f"game-test: {rejected['state']}: {rejected['why']}")
        lines.append(
            "  the agent weakened the test instead of fixing calc.py; gitswarm ran the check with the base's test,"
            " which still failed, and a patch that changes its own test is never accepted by its checks."
        )
    refused = story.get("refused")
    if refused:
        lines.append(f"  gitswarm merge {refused['patch'][:12]}: refused: {refused['why']}")
    lines.append(f"look around: cd {story['repository']} && gitswarm status")
    lines.append(f"the whole demo (its repository and worktrees) is in {story['scratch']}; remove it with: rm -rf {story['scratch']}")
    return "\n".join(lines)


def evidence(data: dict) -> str:
    """What verify found beyond pass or fail: each check from the base to the head, what the patch
    changes of its judges, and why a green run is not evidence."""
    lines = [f"  {how}: {command}" for command, how in data.get("transitions", {}).items()]
    if data.get("proof"):
        lines.append(f"  proof: {data['proof']}")
    if data.get("judges"):
        lines.append(f"  changes what judges it: {', '.join(data['judges'])} (a person must review it: gitswarm review PATCH --accept)")
    lines += [f"  flagged: {flag}" for flag in data.get("flags", [])]
    return "".join("\n" + line for line in lines)


def failed_checks(checks: list[dict]) -> str:
    """Each failed check in words (`pytest -q failed (exit 1)`) and the last lines it printed."""
    text = ""
    for check in checks:
        if check["passed"]:
            continue
        command = check["command"] if isinstance(check["command"], str) else " ".join(check["command"])
        how = "timed out" if check["timed_out"] else "was killed" if check["exit_code"] is None else f"failed (exit {check['exit_code']})"
        text += f"\n{command} {how}" + ("; its last lines:" if check["tail"] else ", printing nothing")
        text += "".join(f"\n    {line}" for line in check["tail"])
    return text


def gc(data: dict) -> str:
    """What `worktrees gc` removed and deleted, then what it kept, each with why."""
    branches = data["branches"]
    lines = [f"removed {r['path']} ({r['why']})" for r in data["removed"]]
    lines += [f"deleted branch {b['branch']} ({b['why']})" for b in branches["deleted"]]
    lines += [f"kept {k['path']} ({k['why']})" for k in data["kept"]]
    lines += [f"kept branch {b['branch']} ({b['why']})" for b in branches["kept"]]
    return "\n".join(lines) or "nothing to remove"


def next_steps(data: dict) -> list[str]:
    """What to do after a job ran (`show JOB`'s view; `delegate`, `follow-up`, `work`): merge each task's verified
    patch; for a task that failed or was cancelled, or whose patch stands unverified, look at what happened and
    throw the attempt away."""
    job, tasks = data["id"][:12], data["tasks"]
    latest = {p["task"]: p for p in (data.get("summary") or {}).get("patches") or []}  # each task's last patch
    steps = []
    for task in tasks:
        patch = latest.get(task["id"])
        if task["state"] == "succeeded" and patch is not None and patch["verified"]:
            whose = "the patch" if len(tasks) == 1 else f"the patch of {task['id']}"
            steps.append(f"gitswarm merge {patch['id'][:12]}    ({whose} passed its checks)")
    troubled = [
        t for t in tasks
        if t["state"] in ("failed", "cancelled") or (t["state"] == "succeeded" and t["id"] in latest and not latest[t["id"]]["verified"])
    ]
    if troubled:
        steps.append(f"gitswarm show {job}    (what happened)")
    for task in troubled:
        steps.append(f"gitswarm output {job}/{task['id']}    (what its last run or check printed)")
        if task["id"] in latest:
            steps.append(f"gitswarm diff {latest[task['id']]['id'][:12]}    (the change it made, not verified)")
        if task["mode"] == "implement":
            steps.append(f"gitswarm worktrees discard {job}/{task['id']}    (throw the attempt away)")
    steps = steps or [f"gitswarm show {job}    (its tasks and what they left)"]
    return [("next: " if n == 0 else "      ") + step for n, step in enumerate(steps)]


TRAIN_STATUS = {
    "landed": "landed", "conflicted": "conflicted", "broke_stack": "broke the stack", "held_back": "held back",
    "unverified": "not verified", "merged_before": "merged before",
}


def train(data: dict) -> str:
    """`merge JOB`: what moved, then each patch and what became of it."""
    landed = sum(p["status"] == "landed" for p in data["patches"])
    if data["new"] == data["old"]:
        head = f"nothing landed on {data['into']}; it stays at {data['old'][:12]}"
    else:
        how = "fast-forward" if data["fast_forward"] else "one merge commit"
        head = f"merged job {data['job'][:12]} into {data['into']}: {data['old'][:12]} -> {data['new'][:12]} ({how}, {landed} patch{'' if landed == 1 else 'es'})"
    rows = [
        (p["task"], p["patch"][:12], TRAIN_STATUS.get(p["status"], p["status"]), p["why"] or "") for p in data["patches"]
    ]
    return head + f"; checks ran {plural(data['check_runs'], 'time')}\n" + table(("TASK", "PATCH", "RESULT", "WHY"), rows)
