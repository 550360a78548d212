"""Notifications: `[notify]` in .gitswarm.toml runs a command when something a person waits for happens.

    [notify]
    command = ["notify-send", "gitswarm"]   # or a string, run with sh -c
    events = ["job_finished", "job_failed", "approval_needed", "patch_verified", "patch_rejected"]
    timeout = "10s"

The event is one JSON object on the command's stdin. Each command runs in a
process of its own (engine/notify/runner.py) that kills it at the timeout
and writes any failure to `<git common dir>/gitswarm/logs/notify.log`: the
work that raised the event never waits for it and never fails because of it.

A run of `work` sees events in its workers' task changes (the supervisor's
event stream): a job that reached `succeeded`/`cancelled` (job_finished) or
`failed` (job_failed) during the run, a verdict recorded during the run
(patch_verified when it accepts, else patch_rejected), and a job it may not
run without approval (approval_needed). `verify` raises the verdict events too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gitswarm.engine.config import NotifyConfig, load_config
from gitswarm.engine.events import EventSink
from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Verdict
from gitswarm.model.records import FINISHED
from gitswarm.model.spec import parse_duration
from gitswarm.store.errorlogs import repo_log_dir

RUNNER = "gitswarm.engine.notify.runner"
MAX_RUNNERS = 3  # notifier processes one gitswarm process has running at once; past it, an event is logged, not sent
NOTIFIED_FILE = "notified-approvals"  # <git common dir>/gitswarm/: jobs whose approval_needed was sent, one id a line


class Notifier:
    """Sends events to the configured command; does nothing when none is configured."""

    def __init__(self, config: NotifyConfig, log: Path, repository: Path) -> None:
        self.command = ["sh", "-c", config.command] if isinstance(config.command, str) else list(config.command or [])
        self.events = frozenset(config.events)
        self.timeout = parse_duration(config.timeout, "notify.timeout")
        self.log = log
        self.repository = repository
        self.running: list[subprocess.Popen] = []

    @classmethod
    def of(cls, swarm: Swarm) -> Notifier:
        workdir = swarm.repo.workdir
        return cls(load_config(workdir).notify, repo_log_dir(swarm.common_dir) / "notify.log", workdir or swarm.common_dir)

    def send(self, event: Mapping[str, Any]) -> None:
        """Hand the event to a runner process and return at once."""
        if not self.command or event["event"] not in self.events:
            return
        self.running = [p for p in self.running if p.poll() is None]
        if len(self.running) >= MAX_RUNNERS:  # a burst of events never becomes a burst of processes
            self._note(f"{len(self.running)} notifiers still running: {event['event']} not sent")
            return
        payload = json.dumps({**event, "repository": os.fspath(self.repository), "at": time.time()}).encode()
        try:
            runner = subprocess.Popen(
                [sys.executable, "-m", RUNNER, os.fspath(self.log), repr(self.timeout), *self.command],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )
            assert runner.stdin is not None
            runner.stdin.write(payload)
            runner.stdin.close()
            self.running.append(runner)
        except OSError as exc:
            self._note(f"could not start the runner: {exc}")

    def approvals(self, swarm: Swarm, jobs: list[str]) -> None:
        """One approval_needed for those of `jobs` (unfinished, awaiting approval) not announced before
        from this clone: a pull of 150 jobs is one notification, and the next run announces none of them again."""
        if not self.command or "approval_needed" not in self.events:
            return
        path = swarm.common_dir / "gitswarm" / NOTIFIED_FILE
        try:
            told = set(path.read_text().split())
        except OSError:
            told = set()
        fresh = [job for job in jobs if job not in told]
        if not fresh:
            return
        why = swarm.ledger.why_not
        listed = [{"job": job, "why": why(job) or ""} for job in fresh]
        self.send({"event": "approval_needed", "job": fresh[0], "why": listed[0]["why"], "jobs": listed})
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a") as handle:
                handle.write("".join(f"{job}\n" for job in fresh))
        except OSError:
            pass  # announced again next time: never a reason to fail the work

    def verdict(self, verdict: Verdict, verdict_id: str) -> None:
        self.send({
            "event": "patch_verified" if verdict.accepted else "patch_rejected", "job": verdict.job,
            "task": verdict.task, "patch": verdict.patch, "head": verdict.head, "verdict": verdict_id,
            "accepted": verdict.accepted, "judged": f"{verdict.status}/{verdict.integrity}/{verdict.contract}",
        })

    def _note(self, what: str) -> None:
        try:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log, "a") as handle:
                handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} {what}\n")
        except OSError:
            pass  # a notifier never affects the work


class Watch:
    """An event sink that passes every event on and raises notifications from the task changes it sees."""

    def __init__(self, swarm: Swarm, notifier: Notifier, sink: EventSink) -> None:
        self.swarm, self.notifier, self.sink = swarm, notifier, sink
        self.started = swarm.clock()
        self.finished_before = {j["id"] for j in swarm.index.jobs() if j["status"] in FINISHED}
        self.told: set[str] = set()  # jobs whose end was sent, verdicts sent or seen

    def __call__(self, event: dict) -> None:
        self.sink(event)
        if not self.notifier.command:
            return
        if event["event"] == "untrusted":
            unfinished = {j["id"] for j in self.swarm.index.jobs() if j["status"] not in FINISHED}
            self.notifier.approvals(self.swarm, [job for job in event["jobs"] if job in unfinished])
        elif event["event"] == "task":
            self._verdicts(event["job"])
            self._ending(event["job"])

    def _ending(self, job: str) -> None:
        found = self.swarm.index.job(job)
        if found is None or found["status"] not in FINISHED or job in self.finished_before or job in self.told:
            return
        self.told.add(job)
        kind = "job_failed" if found["status"] == "failed" else "job_finished"
        self.notifier.send({"event": kind, "job": job, "goal": found["goal"], "status": found["status"], "counts": found["counts"]})

    def _verdicts(self, job: str) -> None:
        fresh = [row[0] for row in self.swarm.index.artifacts(job) if row[2] == "verdict" and row[0] not in self.told]
        if not fresh:
            return
        snapshot = self.swarm.refs.snapshot(job, self.swarm.index.job_tip(job))
        for verdict_id in fresh:
            self.told.add(verdict_id)
            verdict = snapshot.artifact(verdict_id, Verdict)
            if verdict.created >= self.started:
                self.notifier.verdict(verdict, verdict_id)
