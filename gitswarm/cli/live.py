"""The live progress view on a terminal: counts by state, running tasks, recent outcomes.

With `work --remote`, every machine's running tasks are counted and listed
(each machine fetches the others' claims): a task another machine runs
says which one, so that "3 running" beside "up to 2 workers" reads right.

Event fields (task ids, errors, reasons) are data, some of it from records
another clone wrote: they are escaped and put into `Text` as plain text, never
read as rich markup.
"""

from __future__ import annotations

import collections
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from gitswarm.cli.escape import escape
from gitswarm.model.records import TERMINAL

RECENT = 8
STATE_STYLES = {
    "succeeded": "green",
    "failed": "red",
    "cancelled": "yellow",
    "skipped": "yellow",
    "running": "cyan",
    "queued": "white",
    "blocked": "dim",
}


class LiveView:
    """Counts by state, running tasks with elapsed time, recent outcomes."""

    def __init__(self) -> None:
        self.console = Console(stderr=True)
        self.states: dict[tuple[str, str], str] = {}
        self.running: dict[tuple[str, str], float] = {}
        self.owners: dict[tuple[str, str], str] = {}  # running task -> its worker (`host.clone.worker` with --remote)
        self.machine: str | None = None  # with --remote, this machine's name (`host.clone`)
        self.recent: collections.deque[Text] = collections.deque(maxlen=RECENT)
        self.note = "starting workers"
        self.remote = ""  # what the remote did not answer, while it does not
        self.live = Live(console=self.console, refresh_per_second=8, get_renderable=self.render, transient=False)

    def __enter__(self) -> LiveView:
        self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.stop()

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind == "task":
            key = (event["job"], event["task"])
            self.states[key] = event["state"]
            if event["state"] == "running":
                self.running[key] = time.monotonic()
                self.owners[key] = event.get("owner") or ""
            else:
                self.running.pop(key, None)
                self.owners.pop(key, None)
            if event["state"] in TERMINAL or event.get("error"):
                detail = f": {escape(event['error'])}" if event.get("error") else ""
                outcome = (f"{escape(event['task'])} {escape(event['state'])}", STATE_STYLES.get(event["state"], ""))
                self.recent.append(Text.assemble(outcome, detail))
        elif kind == "worker_exit":
            used = "its attempt used" if event.get("attempt_used") else "no attempt used"
            self.recent.append(Text(f"{escape(event.get('why') or 'worker ' + event['worker'] + ' exited')}; requeued "
                                    f"{len(event['requeued'])}, {used}", "yellow"))
        elif kind == "requeued":
            self.recent.append(Text(f"{escape(event['task'])}: {escape(event['why'])}; requeued, no attempt used", "yellow"))
        elif kind == "adapter_unusable":
            self.console.print(Text.assemble((f"adapter {escape(event['adapter'])} will not be used:", "red"), " ", escape(event["reason"])))
        elif kind == "notice":
            self.console.print(Text.assemble(("note:", "yellow"), " ", escape(event["message"])))
        elif kind == "demo":
            self.console.print(Text(f"demo repository: {escape(event['repository'])}"))
        elif kind == "submitted":
            self.note = f"job {escape(event['job'])}"
        elif kind == "start":
            count = event["workers"]  # -j: at most that many run at once (engine/jobs/supervisor.py starts them as needed)
            workers = "1 worker" if count == 1 else f"up to {count} workers"
            self.note = workers + (f" on job {escape(event['job'][:12])}" if event.get("job") else "")
            self.machine = event.get("machine")
        elif kind == "remote":  # work --remote: say what the machine waits for while the remote does not answer
            if event.get("what") == "race":
                pass  # lost races are no trouble: the count is in --json, and the next claim went to another task
            elif event["reachable"]:
                self.remote = ""
            elif event.get("what") == "push":
                self.remote = f"pushes to {escape(event['remote'])} do not land, trying again: {escape(event['said'])}"
            else:
                self.remote = (
                    f"remote {escape(event['remote'])} not answering ({escape(event['said'])}); trying again in {event['retry_in']:g}s"
                )
        elif kind == "expired":
            self.recent.append(Text(f"leases expired (their machine went quiet): {escape(', '.join(event['tasks']))}", "yellow"))
        elif kind == "refused":
            self.console.print(Text.assemble((f"job {escape(event['job'])} on {escape(event['remote'])} refused here:", "red"), " ",
                                             escape(event["why"])))

    def render(self) -> Group:
        counts = collections.Counter(self.states.values())
        line = Text(self.note + "  ")
        for state, style in STATE_STYLES.items():
            if counts.get(state):
                line.append(f"{counts[state]} {state}  ", style=style)
        table = Table(show_header=False, box=None, padding=(0, 1))
        now = time.monotonic()
        for key, since in sorted(self.running.items(), key=lambda kv: kv[1])[:10]:
            table.add_row(Text("running", "cyan"), Text(escape(key[1])), f"{now - since:5.1f}s", self._elsewhere(key))
        header = [Text(self.remote, "yellow")] if self.remote else []
        return Group(line, *header, table, *self.recent)

    def _elsewhere(self, key: tuple[str, str]) -> Text:
        """Which other machine runs a task (its workers' names are `host.clone.worker`), or nothing: this one does."""
        owner = self.owners.get(key, "")
        if self.machine is None or not owner or owner.startswith(self.machine + "."):
            return Text("")
        return Text(f"on {escape(owner.rpartition('.')[0] or owner)}", "dim")
