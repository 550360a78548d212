"""The live progress view on a terminal: counts by state, running tasks, recent outcomes."""

from __future__ import annotations

import collections
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

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
        self.recent: collections.deque[str] = collections.deque(maxlen=RECENT)
        self.note = "starting workers"
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
            else:
                self.running.pop(key, None)
            if event["state"] in ("succeeded", "failed", "cancelled", "skipped") or event.get("error"):
                detail = f": {event['error']}" if event.get("error") else ""
                self.recent.append(f"[{STATE_STYLES.get(event['state'], '')}]{event['task']} {event['state']}[/]{detail}")
        elif kind == "worker_exit":
            self.recent.append(f"[yellow]worker {event['worker']} exited ({event['code']}); requeued {len(event['requeued'])}[/]")
        elif kind == "adapter_unusable":
            self.console.print(f"[red]adapter {event['adapter']} will not be used:[/] {event['reason']}")
        elif kind == "notice":
            self.console.print(f"[yellow]note:[/] {event['message']}")
        elif kind == "demo":
            self.console.print(f"demo repository: {event['repository']}")
        elif kind == "submitted":
            self.note = f"job {event['job']}"
        elif kind == "start":
            self.note = f"{event['workers']} workers" + (f" on job {event['job']}" if event.get("job") else "")

    def render(self) -> Group:
        counts = collections.Counter(self.states.values())
        line = Text(self.note + "  ")
        for state, style in STATE_STYLES.items():
            if counts.get(state):
                line.append(f"{counts[state]} {state}  ", style=style)
        table = Table(show_header=False, box=None, padding=(0, 1))
        now = time.monotonic()
        for (job, task), since in sorted(self.running.items(), key=lambda kv: kv[1])[:10]:
            table.add_row("[cyan]running[/]", task, f"{now - since:5.1f}s")
        recent = [Text.from_markup(r) for r in self.recent]
        return Group(line, table, *recent)
