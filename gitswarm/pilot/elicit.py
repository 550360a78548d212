"""Asking the person behind the MCP client a yes/no question (MCP elicitation, form mode).

The server sends `elicitation/create` to a client that declared the
`elicitation` capability, and the tool call that asked waits for the answer.
Used to ask a person to approve tasks that act outside the repository
(model/approval.py): a pilot's `approve` is only a request.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from gitswarm.pilot.jsonrpc import Id, Peer

ANSWER_SECONDS = 600.0  # how long a question waits for the person before the job waits for `gitswarm approve`
POLL_SECONDS = 0.1  # how often a waiting question looks whether its call was cancelled

#: True: the person said yes; False: no; None: nobody could be asked, or no answer came.
Ask = Callable[[str, threading.Event], bool | None]


def cannot_ask(question: str, cancelled: threading.Event) -> bool | None:
    """A client without elicitation: nobody to ask here."""
    return None


class Elicitor:
    """The questions sent to one client and waiting for its answers, by request id."""

    def __init__(self, peer: Peer, timeout: float = ANSWER_SECONDS) -> None:
        self.peer = peer
        self.timeout = timeout
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._waiting: dict[Id, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self._closed = False

    def ask(self, question: str, cancelled: threading.Event) -> bool | None:
        """Ask the person `question` as a yes/no form; their answer (see Ask)."""
        ident: Id = f"gitswarm-elicit-{next(self._ids)}"
        answered, box = threading.Event(), list[dict[str, Any]]()
        with self._lock:
            if self._closed:
                return None
            self._waiting[ident] = (answered, box)
        schema = {
            "type": "object",
            "properties": {"approve": {"type": "boolean", "title": "Approve", "description": "Let these tasks run."}},
            "required": ["approve"],
        }
        self.peer.request(ident, "elicitation/create", {"message": question, "requestedSchema": schema})
        waited = 0.0
        while not answered.wait(POLL_SECONDS):
            waited += POLL_SECONDS
            if cancelled.is_set() or waited >= self.timeout or self.peer.closed:
                break
        with self._lock:
            self._waiting.pop(ident, None)
        return _decision(box[0]) if box else None

    def answered(self, ident: object, message: dict[str, Any]) -> None:
        """A response from the client: the answer to one of our questions (others are ignored)."""
        with self._lock:
            found = self._waiting.get(ident) if isinstance(ident, (int, str)) else None
        if found is not None:
            event, box = found
            box.append(message)
            event.set()

    def close(self) -> None:
        """The client is gone: every question still waiting gets no answer."""
        with self._lock:
            self._closed = True
            waiting = list(self._waiting.values())
        for event, _ in waiting:
            event.set()


def _decision(message: dict[str, Any]) -> bool | None:
    """accept with approve=true: yes; accept with false, or decline: no; cancel or an error: no answer."""
    result = message.get("result")
    if not isinstance(result, dict):
        return None
    action = result.get("action")
    if action == "decline":
        return False
    if action != "accept":
        return None
    content = result.get("content")
    return isinstance(content, dict) and content.get("approve") is True
