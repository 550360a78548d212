"""JSON-RPC 2.0 over a pair of byte streams, one message per line: MCP's stdio transport.

The server side only: it reads requests and notifications, and writes
responses, errors and notifications. Writes come from several threads (a
tool call runs on its own), so each message is written whole under a lock.
A peer that went away is not an error here: writes to it are dropped and
`closed` says so.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import msgspec

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002  # MCP's code for resources/read of an unknown resource

Id = int | str


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

    def __init__(self, reader: BinaryIO, writer: BinaryIO) -> None:
        self._reader = reader
        self._writer = writer
        self._lock = threading.Lock()
        self._encoder = msgspec.json.Encoder()
        self.closed = False

    def messages(self) -> Iterator[Incoming]:
        """Each well-formed message until the client closes its end; malformed ones are answered here."""
        for line in iter(self._reader.readline, b""):
            if not line.strip():
                continue
            try:
                message = msgspec.json.decode(line)
            except msgspec.DecodeError as exc:
                self.fail(None, PARSE_ERROR, f"not JSON: {exc}")
                continue
            incoming = self._incoming(message)
            if incoming is not None:
                yield incoming

    def _incoming(self, message: Any) -> Incoming | None:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self.fail(None, INVALID_REQUEST, "not a JSON-RPC 2.0 message (batches are not part of MCP)")
            return None
        if "method" not in message:
            return None  # a response to a request of ours: this server sends none
        ident, method, params = message.get("id"), message["method"], message.get("params", {})
        valid_id = ident is None or (isinstance(ident, (int, str)) and not isinstance(ident, bool))
        if not isinstance(method, str) or not isinstance(params, dict) or not valid_id:
            if valid_id and ident is not None:
                self.fail(ident, INVALID_REQUEST, "method must be a string and params an object")
            return None
        return Incoming(method, params, ident)

    def respond(self, ident: Id, result: dict[str, Any]) -> None:
        self._send({"jsonrpc": "2.0", "id": ident, "result": result})

    def fail(self, ident: Id | None, code: int, message: str) -> None:
        self._send({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}})

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def _send(self, message: dict[str, Any]) -> None:
        data = self._encoder.encode(message) + b"\n"
        with self._lock:
            if self.closed:
                return
            try:
                self._writer.write(data)
                self._writer.flush()
            except (BrokenPipeError, ValueError):  # the client is gone (ValueError: its pipe was closed here)
                self.closed = True
