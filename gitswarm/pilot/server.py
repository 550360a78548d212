"""`gitswarm mcp`: the pilot's tools and resources over MCP on stdio.

The protocol part gitswarm needs is small (the initialize handshake, tools,
resource templates, progress and cancellation), so it is served here on
msgspec rather than on the MCP SDK: the SDK took over a second to import
and serialized each result twice, which missed the start-up and `status`
targets; the SDK's own client stays in the tests as the conformance check.

Every tool call runs on a thread of its own (a `wait` may block for an
hour while other calls go on), at most MAX_RUNNING_CALLS at once. A call's
outcome is a result; an error gitswarm raises on purpose, or arguments its
schema refuses, a tool error carrying one line; anything else, a bug, a
tool error naming the log its traceback went to (for another request, a
JSON-RPC internal error saying the same). Nothing from the server's
environment goes into one.

SIGTERM or SIGHUP (a client whose server did not exit once stdin closed, a
closed terminal) stops everything the server started: each running check or
auditor has its process group killed and its call answered with a tool error
(no verdict is recorded for it), each worker it started is sent SIGTERM
(`gitswarm work` then stops its task and requeues it), the waits return; the
server exits 128 + the signal's number (143, 129) once they are done, or
after STOP_SECONDS whatever still runs. Closing stdin leaves the workers
running; Ctrl-C (SIGINT) still lets the running calls finish.
"""

from __future__ import annotations

import gc
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import msgspec

from gitswarm import __version__
from gitswarm.adapters.process import GRACE_SECONDS, stop_runs
from gitswarm.engine.results import plain
from gitswarm.engine.upkeep.errorlog import record_internal_error
from gitswarm.model.errors import GitswarmError
from gitswarm.model.paths import json_showing_bytes
from gitswarm.pilot import actions, tools, workers
from gitswarm.pilot.elicit import Elicitor, cannot_ask
from gitswarm.pilot.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    Id,
    Incoming,
    Peer,
    RpcError,
    is_id,
)

# The handshake revisions of MCP this server speaks, newest first. A client asking for another gets
# the newest, and decides itself whether it can go on; `server/discover` (the 2026 stateless era) is
# answered "method not found", which tells such a client to fall back to this handshake.
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
STRUCTURED_SINCE = "2025-06-18"  # results carry structuredContent from this revision on

INSTRUCTIONS = """gitswarm runs coding agents on this git repository as jobs of tasks; all state is in git.
Hand off a change with `delegate` (it proposes first: confirm with the token it returns), or a
whole job with `submit_job`. Then `wait` for it instead of polling, read results with
`show`/`artifacts`/`diff` (no model calls), `verify` a patch, and `merge` it once verified."""

RESOURCE_TEMPLATES = [
    {"uriTemplate": "gitswarm://jobs/{job}/summary", "name": "job_summary", "description": "A job's stitched summary (Markdown).",
     "mimeType": "text/markdown"},
    {"uriTemplate": "gitswarm://patches/{patch}/diff", "name": "patch_diff", "description": "A patch's diff.",
     "mimeType": "text/x-diff"},
]
MAX_URI = 1000  # longer than any job or patch URI: refused before an id is looked up (and quoted back)
SUMMARY_URI = re.compile(r"gitswarm://jobs/([^/]+)/summary")
DIFF_URI = re.compile(r"gitswarm://patches/([^/]+)/diff")


MAX_RUNNING_CALLS = 64  # tools/call running at once; past it a call is refused (-32000), never queued unseen
SERVER_BUSY = -32000
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
STOP_SECONDS = GRACE_SECONDS + 1.0  # after one: how long the calls and workers get to stop before the server exits anyway


class Signalled(BaseException):
    """SIGTERM or SIGHUP, raised in the main thread; a BaseException, so that no error boundary of a
    request swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class Stopped(GitswarmError):
    """The server stopped on a signal: its exit code is 128 + the signal's number, as a shell reports it."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"mcp: stopped by {signal.Signals(signum).name}: its checks and workers were stopped")
        self.exit_code = 128 + signum


def shown(value: object, limit: int = 100) -> str:
    """A value the client sent, as an error message may quote it: cut to `limit` characters."""
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Server:
    """One client's session with the repository at `repo`."""

    def __init__(self, repo: Path, peer: Peer) -> None:
        self.repo = repo
        self.peer = peer
        self.version = PROTOCOL_VERSIONS[0]
        self._calls: dict[Id, tools.Call] = {}  # running tools/call by request id
        # Set by each call's thread once it has answered: what the way out waits on. Not Thread.join, which a
        # signal's exception interrupting it leaves saying the thread ended while it runs on (CPython 3.11).
        self._ends: list[threading.Event] = []
        self._lock = threading.Lock()
        self.signalled: int | None = None  # the stop signal, once one came
        self.elicitor = Elicitor(peer)  # questions to the person, for clients that can ask (elicitation)
        peer.on_response = self.elicitor.answered
        self.can_ask = False
        self._methods: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "initialize": self.initialize,
            "ping": lambda _: {},
            "tools/list": lambda _: {"tools": self._tool_listing()},
            "resources/list": lambda _: {"resources": []},
            "resources/templates/list": lambda _: {"resourceTemplates": RESOURCE_TEMPLATES},
            "resources/read": self.read_resource,
        }

    def run(self) -> None:
        """Answer the client until it closes stdin (or the server is interrupted); then stop the
        waits, let the other running calls finish, and answer each while the client still reads.
        On a stop signal (on_signal), stop what runs instead and raise Stopped."""
        try:
            try:
                for message in self.peer.messages():
                    if not message.is_request:
                        self.notified(message)
                    elif message.method == "tools/call":
                        self.start_call(message)
                    else:
                        self.answer(message)
            finally:
                if self.signalled is None:
                    self._finish_calls(None)
        except Signalled as signalled:  # while reading, or while the calls finish
            self.stop(signalled.signum)
            raise Stopped(signalled.signum) from None

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        """SIGTERM and SIGHUP: raise Signalled in the main thread, once (a second signal must not cut
        the way out short)."""
        if self.signalled is None:
            self.signalled = signum
            raise Signalled(signum)

    def stop(self, signum: int) -> None:
        """Stop everything this server started: the checks running in calls (their process groups killed,
        each call answered with a tool error), the workers, the waits; then wait for the calls and the
        workers, up to STOP_SECONDS."""
        deadline = time.monotonic() + STOP_SECONDS
        stop_runs(f"gitswarm mcp is stopping ({signal.Signals(signum).name})")
        stopping = workers.stop_workers()
        self._finish_calls(deadline)
        for worker in stopping:
            workers.wait_for(worker, deadline - time.monotonic())

    def _finish_calls(self, deadline: float | None) -> None:
        """Stop the waits and wait for every running call (until `deadline`, a time.monotonic())."""
        self.elicitor.close()  # a question still waiting gets no answer: its job waits for `gitswarm approve`
        with self._lock:
            for call in self._calls.values():
                call.cancelled.set()  # a wait returns now; other tools never look at it
            running = list(self._ends)
        for ended in running:
            ended.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def answer(self, message: Incoming) -> None:
        assert message.id is not None
        method = self._methods.get(message.method)
        if method is None:
            self.peer.fail(message.id, METHOD_NOT_FOUND, f"method not found: {shown(message.method)}")
            return
        try:
            self.peer.respond(message.id, method(message.params))
        except RpcError as exc:
            self.peer.fail(message.id, exc.code, str(exc))
        except Exception as exc:  # the server's error boundary, as for tools: a bug fails this request, not the session
            self.peer.fail(message.id, INTERNAL_ERROR, f"internal error in {message.method}: {self._evidence(exc, message.method)}")

    def notified(self, message: Incoming) -> None:
        if message.method == "notifications/cancelled":
            ident = message.params.get("requestId")
            with self._lock:
                call = self._calls.get(ident) if is_id(ident) else None  # type: ignore[arg-type]
            if call is not None:
                call.unanswered = True  # set before the stop, which the call's thread waits on
                call.cancelled.set()
        # notifications/initialized and anything else: nothing to do

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        self.version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        capabilities = params.get("capabilities")
        elicitation = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
        # {} is form mode (2025-06-18); from 2025-11-25 a client names its modes, and only a form asks yes or no.
        self.can_ask = isinstance(elicitation, dict) and (not elicitation or "form" in elicitation)
        return {
            "protocolVersion": self.version,
            "capabilities": {"tools": {"listChanged": False}, "resources": {"subscribe": False, "listChanged": False}},
            "serverInfo": {"name": "gitswarm", "version": __version__},
            "instructions": INSTRUCTIONS,
        }

    # -- tools -------------------------------------------------------------------------------------------

    def start_call(self, message: Incoming) -> None:
        assert message.id is not None
        name, arguments = message.params.get("name"), message.params.get("arguments", {})
        tool = tools.TOOLS.get(name) if isinstance(name, str) else None
        if tool is None:
            self.peer.fail(message.id, INVALID_PARAMS, f"unknown tool: {shown(name)}")
            return
        if not isinstance(arguments, dict):
            self.peer.fail(message.id, INVALID_PARAMS, "tools/call: arguments must be an object")
            return
        meta = message.params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        call = tools.Call(progress=self._progress(token), ask=self.elicitor.ask if self.can_ask else cannot_ask)
        # A daemon: a call still running when a stop signal's time is up does not hold the exit.
        ended = threading.Event()
        thread = threading.Thread(target=self._call, args=(message.id, tool, arguments, call, ended), name=f"mcp-{name}", daemon=True)
        with self._lock:
            if message.id in self._calls:
                self.peer.fail(message.id, INVALID_REQUEST, f"request id {shown(message.id)} is still in use by a running call")
                return
            if len(self._calls) >= MAX_RUNNING_CALLS:
                self.peer.fail(message.id, SERVER_BUSY, f"{MAX_RUNNING_CALLS} calls are running; try again when one has returned")
                return
            self._calls[message.id] = call
            self._ends = [e for e in self._ends if not e.is_set()] + [ended]
        thread.start()

    def _progress(self, token: object) -> Callable[[int, str], None]:
        if not is_id(token):
            return lambda done, message: None
        return lambda done, message: self.peer.notify(
            "notifications/progress", {"progressToken": token, "progress": done, "message": message}
        )

    def _tool_listing(self) -> list[dict[str, Any]]:
        """tools/list; outputSchema only for revisions that know structuredContent (2025-06-18 on)."""
        if self.version >= STRUCTURED_SINCE:
            return tools.listing()
        return [{k: v for k, v in tool.items() if k != "outputSchema"} for tool in tools.listing()]

    def _call(self, ident: Id, tool: tools.Tool[Any], arguments: dict[str, Any], call: tools.Call, ended: threading.Event) -> None:
        try:
            result = self.call_tool(tool, arguments, call)
            with self._lock:
                self._calls.pop(ident, None)
            if not call.unanswered:  # a request the client cancelled gets no response (MCP: cancellation)
                self.peer.respond(ident, result)
        finally:
            ended.set()

    def call_tool(self, tool: tools.Tool[Any], arguments: dict[str, Any], call: tools.Call) -> dict[str, Any]:
        """The tool's result, or a tool error (isError) carrying one line."""
        try:
            data = tool.run(self.repo, tools.parse(tool, arguments), call)
        except msgspec.ValidationError as exc:
            return self._error(f"{tool.name}: bad arguments: {exc}")
        except GitswarmError as exc:
            return self._error(str(exc))
        except Exception as exc:  # the server's error boundary (cli/boundary.py's twin): a bug fails this call, not the session
            return self._error(f"internal error in {tool.name}: {self._evidence(exc, tool.name)}")
        data = plain(data)  # a result Struct as the plain data its outputSchema describes
        text = json_showing_bytes(msgspec.json.encode, data).decode()  # the same data as text, for clients that read only text
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
        if self.version >= STRUCTURED_SINCE:
            result["structuredContent"] = data
        return result

    @staticmethod
    def _error(line: str) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": line}], "isError": True}

    @staticmethod
    def _evidence(exc: BaseException, name: str) -> str:
        print(f"gitswarm mcp: internal error in tool {name}: {type(exc).__name__}", file=sys.stderr)
        try:
            return f"the full traceback is in {record_internal_error(exc, ['mcp', name])}"
        except OSError as failed:
            return f"the traceback could not be written to a log: {failed}"

    # -- resources ---------------------------------------------------------------------------------------

    def read_resource(self, params: dict[str, Any]) -> dict[str, Any]:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, "resources/read: uri must be a string")
        if len(uri) > MAX_URI:
            raise RpcError(RESOURCE_NOT_FOUND, f"no such resource: {shown(uri, 200)}")
        try:
            if match := SUMMARY_URI.fullmatch(uri):
                return self._contents(uri, "text/markdown", self._summary(match[1]))
            if match := DIFF_URI.fullmatch(uri):
                return self._contents(uri, "text/x-diff", actions.diff(self.repo, match[1])["diff"])
        except GitswarmError as exc:
            raise RpcError(RESOURCE_NOT_FOUND, str(exc)) from None
        raise RpcError(RESOURCE_NOT_FOUND, f"no such resource: {shown(uri, 200)}")

    def _summary(self, job: str) -> str:
        data = actions.show(self.repo, job)
        if "summary" not in data:
            raise RpcError(RESOURCE_NOT_FOUND, f"job {data['id'][:12]} has no summary yet (it is {data['status']})")
        text: str = data["summary"]["text"]  # Swarm.show's summary view: {"id", "text", **data}
        return text

    @staticmethod
    def _contents(uri: str, mime: str, text: str) -> dict[str, Any]:
        return {"contents": [{"uri": uri, "mimeType": mime, "text": text}]}


def serve(repo: Path) -> None:
    """Serve the repository at `repo` over stdio until the client closes it."""
    server = Server(repo, Peer(sys.stdin.buffer, sys.stdout.buffer))
    tools.listing()  # built once, before the freeze below
    # What start-up made lives as long as the server: frozen, the collector no longer walks it at
    # every full collection, which made one `status` call in 50 take ~70 ms instead of ~7.
    gc.collect()
    gc.freeze()
    with _stop_signals(server):
        server.run()


@contextmanager
def _stop_signals(server: Server) -> Iterator[None]:
    """SIGTERM and SIGHUP handled by `server` while it runs (see Server.stop)."""
    previous = {signum: signal.signal(signum, server.on_signal) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        if server.signalled is None:  # once stopping, a second signal must not end the way out by default
            for signum, handler in previous.items():
                signal.signal(signum, handler)
