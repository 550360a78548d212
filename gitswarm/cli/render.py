"""Plain-text views of command results, for people at a terminal."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def when(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {state}" for state, n in counts.items()) or "no tasks"


def jobs(data: dict) -> str:
    if not data["jobs"]:
        return "no jobs"
    rows = [
        (j["id"][:12], "awaiting approval" if j.get("awaiting_approval") else j["status"], counts(j["counts"]), when(j["created"]), j["goal"])
        for j in data["jobs"]
    ]
    text = table(("JOB", "STATUS", "TASKS", "CREATED", "GOAL"), rows)
    waiting = data.get("awaiting_approval") or {}
    if waiting:
        text += f"\n\n{len(waiting)} job(s) will not run here until approved (gitswarm approve JOB):"
        text += "".join(f"\n  {job[:12]}: {why}" for job, why in waiting.items())
    return text


def job(data: dict) -> str:
    head = f"job {data['id']}  {data['status']}\ngoal: {data['goal']}\ntasks: {counts(data['counts'])}\n"
    if data.get("awaiting_approval"):
        head += f"awaiting approval: {data['awaiting_approval']} (gitswarm approve {data['id'][:12]})\n"
    rows = []
    for t in data["tasks"]:
        note = t["error"] or (f"skipped: {t['skipped_because']} did not succeed" if t["skipped_because"] else "")
        rows.append(
            (t["id"], t["state"], f"{t['attempts']}/{t['max_attempts']}", ",".join(t["depends_on"]), t["adapter"], note)
        )
    text = head + "\n" + table(("TASK", "STATE", "TRIES", "NEEDS", "ADAPTER", "NOTE"), rows)
    if data.get("reviews"):
        text += "\n\nverdicts:\n" + reviews(data["reviews"])
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
    return table(("COMMIT", "VERDICT", "DETAIL", "REVIEWER", "PROVENANCE", "NOTE"), rows) if rows else "none"


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
        lines.append(f"break-add: {rejected['state']}: {rejected['why']}")
        lines.append("  the agent said it was done, but the check failed on its patch, so nothing of it was merged.")
    return "\n".join(lines)
