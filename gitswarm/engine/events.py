"""What a supervisor reports as it works: one plain dict per event, handed to a sink.

The CLI's live view, the notifier and the pilot read the same stream; each
event has a `type` (`job_started`, `task_state`, `progress`, ...) and the
fields that type carries (docs/architecture.md, "What a task goes through").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Event = dict[str, Any]
EventSink = Callable[[Event], None]
