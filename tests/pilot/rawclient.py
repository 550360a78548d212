"""A client of `gitswarm mcp` with nothing but json and pipes: the protocol as bytes on the wire.

The SDK's client (tests/pilot/mcpclient.py) checks the server the way real
clients see it; this one sends what no well-behaved client would (broken
JSON, unknown methods, cancellations at any moment) and times the server
without a client library's own cost.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.proctools import interruptible


class RawClient:
    def __init__(
        self, repo: Path, env: dict[str, str] | None = None, version: str | None = "2025-11-25",
        argv: list[str] | None = None, lifetime: float | None = None,
    ) -> None:
        """`argv`: the server's command line (default `python -m gitswarm mcp`). `lifetime`: seconds after
        which the server is killed, so that an answer that never comes fails the test (EOFError) instead of
        hanging it."""
        self.process = subprocess.Popen(
            argv or [sys.executable, "-m", "gitswarm", "mcp"], cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env={**os.environ, **(env or {})}, preexec_fn=interruptible,
        )
        self._watchdog = threading.Timer(lifetime, self.process.kill) if lifetime is not None else None
        if self._watchdog is not None:
            self._watchdog.start()
        self.next_id = 0
        self.notifications: list[dict[str, Any]] = []  # every notification read, in order
        self.answered: list[int | str | None] = []  # the id of every answer read (answers are not kept: a bench reads 300 of 500 KB)
        if version is not None:
            self.initialized = self.request("initialize", {
                "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"},
            })
            self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        self.write(json.dumps(message).encode() + b"\n")

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def ask(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Send a request; its id (read the answer with answer_to)."""
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, **({"params": params} if params is not None else {})})
        return self.next_id

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise EOFError("the server closed stdout")
        message: dict[str, Any] = json.loads(line)
        if "method" in message:
            self.notifications.append(message)
        else:
            self.answered.append(message.get("id"))
        return message

    def answer_to(self, ident: int | str | None) -> dict[str, Any]:
        while True:
            message = self.read()
            if "method" not in message and message.get("id") == ident:
                return message

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.answer_to(self.ask(method, params))

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """tools/call's result (a JSON-RPC error raises)."""
        answer = self.request("tools/call", {"name": tool, "arguments": arguments})
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    def close(self, timeout: float = 10) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = self.process.wait(timeout)
        if self._watchdog is not None:
            self._watchdog.cancel()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return code
