"""An MCP client from the official SDK talking to `gitswarm mcp`, started as a subprocess over stdio.

Tests call the server through `Session`, a synchronous wrapper: one event
loop on a thread of its own keeps the stdio connection open across calls.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client, types
from mcp.client.stdio import StdioServerParameters

#: A person behind the client, for elicitation: (the question, its schema) -> (action, content).
Person = Callable[[str, dict[str, Any]], tuple[str, dict[str, Any] | None]]


@dataclass
class Called:
    is_error: bool
    data: Any  # the structured content, else None
    text: str  # every text content joined
    progress: list[tuple[float, float | None, str | None]] = field(default_factory=list)


class Session:
    """`gitswarm mcp` in `repo`; call() a tool, read() a resource, tools() the listing."""

    def __init__(self, repo: Path, env: dict[str, str] | None = None, person: Person | None = None) -> None:
        self.repo = repo
        self.person = person  # with one, the client declares elicitation and puts each question to it
        self.asked: list[str] = []
        self.env = {**os.environ, **(env or {})}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._ready: Future[None] = Future()
        self._stop = asyncio.Event()
        self._client: Client | None = None
        self._main = asyncio.run_coroutine_threadsafe(self._hold(), self._loop)
        self._ready.result(timeout=60)

    async def _hold(self) -> None:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "gitswarm", "mcp"], cwd=str(self.repo), env=self.env,
        )
        try:
            async with Client(params, elicitation_callback=self._elicit if self.person else None) as client:
                self._client = client
                self._ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    async def _elicit(self, context: Any, params: Any) -> types.ElicitResult:
        assert self.person is not None
        self.asked.append(params.message)
        action, content = self.person(params.message, params.requested_schema)
        return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    def _run(self, coro: Coroutine[Any, Any, Any], timeout: float = 120) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=timeout)

    def tools(self) -> list[Any]:
        assert self._client is not None
        return self._run(self._client.list_tools()).tools

    def call(self, name: str, arguments: dict[str, Any] | None = None, timeout: float = 120) -> Called:
        assert self._client is not None
        progress: list[tuple[float, float | None, str | None]] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, total, message))

        result = self._run(self._client.call_tool(name, arguments or {}, progress_callback=on_progress), timeout)
        text = "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")
        data = result.structured_content
        if data is None and not result.is_error and text:
            data = json.loads(text)
        return Called(result.is_error, data, text, progress)

    def read(self, uri: str) -> str:
        assert self._client is not None
        result = self._run(self._client.read_resource(uri))
        return "".join(getattr(c, "text", "") for c in result.contents)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        try:
            self._main.result(timeout=30)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
