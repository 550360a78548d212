"""JSON-RPC 2.0 over a pair of byte streams, one message per line: MCP's stdio transport.

The server side: it reads requests and notifications, and writes
responses, errors and notifications; a request of its own (an elicitation,
pilot/elicit.py) is answered through `on_response`. Writes come from several threads (a
tool call runs on its own), so each message is written whole under a lock.
A peer that went away is not an error here: writes to it are dropped and
`closed` says so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import msgspec

from gitswarm.model.paths import json_showing_bytes

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002  # MCP's code for resources/read of an unknown resource
MAX_LINE = 64 * 1024 * 1024  # one message; a job of 10,000 structured tasks is a few MB

Id = int | str


def is_id(value: object) -> bool:
    """Whether `value` is a request id or a progress token as MCP has them: a string or an integer (not a bool)."""
    return isinstance(value, (int, str)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Incoming:
    """A request (with an id) or a notification (without)."""

    method: str
    params: dict[str, Any]
    id: Id | None = None

    @property
    def is_request(self) -> bool:
        return self.id is not None


class RpcError(Exception):
    """A request answered with a JSON-RPC error instead of a result."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Peer:
    """The client at the other end of `reader` and `writer`."""

    def __init__(self, reader: BinaryIO, writer: BinaryIO, max_line: int = MAX_LINE) -> None:
        self._reader = reader
        self._max_line = max_line
        self._writer = writer
        self._lock = threading.Lock()
        self._encoder = msgspec.json.Encoder()
        self.closed = False
        self.on_response: Callable[[object, dict[str, Any]], None] = lambda ident, message: None

    def messages(self) -> Iterator[Incoming]:
        """Each well-formed message until the client closes its end; malformed ones are answered here."""
        while True:
            line = self._reader.readline(self._max_line + 1)
            if not line:
                return
            if len(line) > self._max_line and not line.endswith(b"\n"):
                self._skip_rest_of_line()
                self.fail(None, INVALID_REQUEST, f"a message longer than {self._max_line} bytes")
                continue
            if not line.strip():
                continue
            try:
                message = msgspec.json.decode(line)
            except msgspec.DecodeError as exc:
                self.fail(None, PARSE_ERROR, f"not JSON: {exc}")
                continue
            except RecursionError:  # msgspec decodes nested arrays and objects recursively
                self.fail(None, PARSE_ERROR, "not JSON this server reads: nested too deep")
                continue
            incoming = self._incoming(message)
            if incoming is not None:
                yield incoming

    def _skip_rest_of_line(self) -> None:
        while (chunk := self._reader.readline(self._max_line)) and not chunk.endswith(b"\n"):
            pass

    def _incoming(self, message: Any) -> Incoming | None:
        """The message as a request or notification; None after answering a malformed one, or for a response
        (to a request of this server's: handed to on_response)."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self.fail(None, INVALID_REQUEST, "not a JSON-RPC 2.0 message (batches are not part of MCP)")
            return None
        ident, method, params = message.get("id"), message.get("method"), message.get("params", {})
        valid_id = is_id(ident)
        if method is None and ("result" in message or "error" in message):
            self.on_response(ident, message)
            return None
        if "id" in message and not valid_id:
            self.fail(None, INVALID_REQUEST, "an id must be a string or an integer")
            return None
        if not isinstance(method, str) or not isinstance(params, dict):
            self.fail(ident if valid_id else None, INVALID_REQUEST, "a request needs a method (a string); params must be an object")
            return None
        return Incoming(method, params, ident if valid_id else None)

    def respond(self, ident: Id, result: dict[str, Any]) -> None:
        self._send({"jsonrpc": "2.0", "id": ident, "result": result})

    def fail(self, ident: Id | None, code: int, message: str) -> None:
        self._send({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}})

    def request(self, ident: Id, method: str, params: dict[str, Any]) -> None:
        """A request of the server's own to the client; its response comes to on_response."""
        self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def _send(self, message: dict[str, Any]) -> None:
        data = json_showing_bytes(self._encoder.encode, message) + b"\n"  # a path that is not UTF-8: its bytes as `\xff`
        with self._lock:
            if self.closed:
                return
            try:
                self._writer.write(data)
                self._writer.flush()
            except (BrokenPipeError, ValueError):  # the client is gone (ValueError: its pipe was closed here)
                self.closed = True
