"""`gitswarm mcp` fed random JSON-RPC: it never exits, and every request that has an id gets one answer.

One server runs for the whole test (a real subprocess, on a real repository);
each example writes a batch of lines in random order, with random nesting,
types and sizes: requests, notifications, responses, ids of odd types,
unknown methods, bad params, lines that are not JSON at all. Each line is
made by a rule that knows what it is owed (docs/mcp.md, The protocol): a
request with a valid id (a string or an integer) one answer carrying that
id, a message the server cannot take one error with `id: null`, a
notification or a response nothing. The answers are matched by id, in any
order (tool calls answer from threads of their own). The tools called only
read: a random call must not start workers.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import register_scripted

ANSWER_SECONDS = 5.0  # for one batch's answers: they take milliseconds (a failing example waits this long)
NULL = "null id"  # what a line the server cannot take as a request is owed: one error with id null
READ_TOOLS = ["status", "show", "artifacts", "artifact", "diff", "log", "wait"]
METHODS = ["initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/templates/list", "resources/read",
           "notifications/initialized", "notifications/cancelled", "server/discover"]


@dataclass(frozen=True)
class Line:
    data: bytes
    owed: object = None  # the id of the answer owed, NULL, or None (nothing owed)


# -- values ------------------------------------------------------------------------------------------

scalars = (
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40)
)
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=25,
)
objects = st.dictionaries(st.text(max_size=10), values, max_size=5)
not_objects = values.filter(lambda v: not isinstance(v, dict))
big_text = st.integers(min_value=10_000, max_value=200_000).map(lambda n: "é" * n)

# Valid ids; no string id starts with "cancel-", which only cancellations name (a request they named would
# rightly go unanswered).
valid_ids = st.integers(min_value=-(2**70), max_value=2**70) | st.text(max_size=30).filter(lambda t: not t.startswith("cancel-"))
odd_ids = st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False) | st.lists(scalars, max_size=3) | objects
methods = st.sampled_from(METHODS) | st.text(max_size=30)
uris = st.sampled_from(["gitswarm://jobs/{}/summary", "gitswarm://patches/{}/diff", "{}"]).flatmap(
    lambda form: st.text(max_size=40).map(form.format)
)


ids_given = st.text(max_size=40) | st.sampled_from(["0", "01", "HEAD", "a/b", "../x", "0" * 64])
RIGHT_ARGUMENTS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "status": st.fixed_dictionaries({}, optional={"job": ids_given, "include_all": st.booleans()}),
    "show": st.fixed_dictionaries({"job": ids_given}),
    "artifacts": st.fixed_dictionaries({"job": ids_given}),
    "artifact": st.fixed_dictionaries({"artifact_id": ids_given}),
    "diff": st.fixed_dictionaries({"patch": ids_given}),
    "log": st.fixed_dictionaries({"job": ids_given}),
    # No job exists: a wait answers at once; a short timeout bounds it should one match all the same.
    "wait": st.fixed_dictionaries({"target": ids_given}, optional={"timeout": st.floats(0.01, 0.2), "until": st.sampled_from(["change", "done"])}),
}


def call_params() -> st.SearchStrategy[dict[str, Any]]:
    """A reading tool's arguments, of the right shape (ids that name nothing) or random; or a tool that is none."""
    def for_tool(name: str) -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries(
            {"name": st.just(name)},
            optional={"arguments": RIGHT_ARGUMENTS[name] | values, "_meta": st.fixed_dictionaries({}, optional={"progressToken": values})},
        )
    return st.sampled_from(READ_TOOLS).flatmap(for_tool) | st.fixed_dictionaries({"name": values}, optional={"arguments": values})


def params_for(method: str) -> st.SearchStrategy[Any]:
    if method == "tools/call":
        return call_params()
    if method == "resources/read":
        return st.fixed_dictionaries({}, optional={"uri": uris | values})
    if method == "initialize":
        return st.fixed_dictionaries({}, optional={"protocolVersion": st.sampled_from(["2025-06-18", "2024-11-05"]) | values})
    return objects


def encoded(message: object) -> bytes:
    return json.dumps(message).encode() + b"\n"


# -- lines -------------------------------------------------------------------------------------------


@st.composite
def requests(draw: st.DrawFn) -> Line:
    """A request with a valid id, its params right or wrong: owed an answer with its id."""
    ident, method = draw(valid_ids), draw(methods)
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
    shape = draw(st.sampled_from(["params", "no params", "bad params", "bad method", "big"]))
    if shape == "params":
        message["params"] = draw(params_for(method))
    elif shape == "bad params":
        message["params"] = draw(not_objects)
    elif shape == "bad method":
        message["method"] = draw(not_objects.filter(lambda v: not isinstance(v, str)))
    elif shape == "big":
        message["params"] = {"name": draw(st.sampled_from(READ_TOOLS)), "arguments": {"job": draw(big_text)}, "x": draw(big_text)}
    return Line(encoded(message), ident)


@st.composite
def tool_calls(draw: st.DrawFn) -> Line:
    """tools/call of a reading tool (or of none), its arguments random: owed an answer with its id."""
    ident = draw(valid_ids)
    return Line(encoded({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": draw(call_params())}), ident)


@st.composite
def deep_requests(draw: st.DrawFn) -> Line:
    """Nested arrays in the params: read when shallow (owed an answer), a parse error past the decoder's depth."""
    ident, depth = draw(valid_ids), draw(st.integers(min_value=1, max_value=60) | st.integers(min_value=3000, max_value=50_000))
    head = encoded({"jsonrpc": "2.0", "id": ident, "method": draw(st.sampled_from(["ping", "tools/list", "no/such"]))})
    line = head[:-2] + b', "params": {"x": ' + b"[" * depth + b"]" * depth + b"}}\n"
    return Line(line, ident if depth <= 60 else NULL)


@st.composite
def notifications(draw: st.DrawFn) -> Line:
    """No id: owed nothing, unless its method or params are malformed (an error with id null)."""
    method = draw(methods)
    if method == "notifications/cancelled":  # names no request of the batch: those ids never start with "cancel-"
        params: Any = {"requestId": draw(st.text(max_size=20).map(lambda t: f"cancel-{t}") | odd_ids)}
    else:
        params = draw(params_for(method))
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if draw(st.booleans()):
        return Line(encoded(message))
    if draw(st.booleans()):
        message["params"] = draw(not_objects)
    else:
        message["method"] = draw(not_objects.filter(lambda v: not isinstance(v, str)))
    return Line(encoded(message), NULL)


@st.composite
def malformed(draw: st.DrawFn) -> Line:
    """What is no request: owed an error with id null, or nothing for a response or a blank line."""
    kind = draw(st.sampled_from(["odd id", "not 2.0", "not an object", "not JSON", "response", "blank"]))
    if kind == "odd id":
        return Line(encoded({"jsonrpc": "2.0", "id": draw(odd_ids), "method": draw(methods), "params": draw(objects)}), NULL)
    if kind == "not 2.0":
        message = {"jsonrpc": draw(values.filter(lambda v: v != "2.0")), "id": draw(valid_ids), "method": "ping"}
        if draw(st.booleans()):
            del message["jsonrpc"]
        return Line(encoded(message), NULL)
    if kind == "not an object":
        return Line(encoded(draw(not_objects)), NULL)
    if kind == "not JSON":  # a NUL first: never JSON, never blank
        return Line(b"\x00" + draw(st.binary(max_size=200)).replace(b"\n", b"") + b"\n", NULL)
    if kind == "response":
        return Line(encoded({"jsonrpc": "2.0", "id": draw(valid_ids | odd_ids), draw(st.sampled_from(["result", "error"])): draw(values)}))
    return Line(draw(st.sampled_from([b"\n", b"   \n", b"\t\r\n"])))


batches = st.lists(st.one_of(requests(), tool_calls(), tool_calls(), deep_requests(), notifications(), malformed()), min_size=1, max_size=25)


# -- the server ---------------------------------------------------------------------------------------


class Wire:
    """`gitswarm mcp` as a subprocess; its answers read on a thread into a queue (so a read can time out)."""

    def __init__(self, repo: Path, stderr: Path) -> None:
        with open(stderr, "wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "gitswarm", "mcp"], cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
            )
        self.answers: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.write(encoded({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}))
        assert self.collect(Counter({"init": 1}))["init"][0]["result"]["serverInfo"]["name"] == "gitswarm"

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            message = json.loads(line)
            if "method" not in message:  # notifications (progress) are not answers
                self.answers.put(message)
        self.answers.put(None)

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def collect(self, owed: Counter[object]) -> dict[object, list[dict[str, Any]]]:
        """The answers, by id, until each owed one came."""
        got: dict[object, list[dict[str, Any]]] = {}
        deadline = time.monotonic() + ANSWER_SECONDS
        while Counter({ident: len(answers) for ident, answers in got.items()}) != owed:
            try:
                answer = self.answers.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"answers owed and not given: {owed - Counter({i: len(a) for i, a in got.items()})}") from None
            assert answer is not None, "the server closed stdout"
            ident = NULL if answer.get("id") is None else answer["id"]
            got.setdefault(ident, []).append(answer)
            assert Counter({ident: len(answers) for ident, answers in got.items()}) - owed == Counter(), f"not owed: {answer}"
        return got

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(20)


def well_formed(answer: dict[str, Any]) -> None:
    assert answer["jsonrpc"] == "2.0" and ("result" in answer) != ("error" in answer), answer
    if "error" in answer:
        assert isinstance(answer["error"]["code"], int) and isinstance(answer["error"]["message"], str), answer
        assert answer["error"]["code"] != -32603, f"an internal error: {answer}"
    elif "content" in answer["result"]:  # a tool's result or tool error
        text = answer["result"]["content"][0]["text"]
        assert not (answer["result"]["isError"] and text.startswith("internal error")), f"an internal error: {answer}"


def test_random_json_rpc_never_ends_the_server_and_every_request_is_answered_once(repo: Path, tmp_path: Path) -> None:
    project = register_scripted(repo)
    wire = Wire(project, tmp_path / "stderr")

    # Defined here, not as a test of its own: the one server lives across every example.
    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(batch=batches)
    def exchange(batch: list[Line]) -> None:
        owed = Counter(line.owed for line in batch if line.owed is not None)
        wire.write(b"".join(line.data for line in batch))
        for answers in wire.collect(owed).values():
            for answer in answers:
                well_formed(answer)
        assert wire.process.poll() is None, "the server exited"

    try:
        exchange()
        wire.write(encoded({"jsonrpc": "2.0", "id": "last", "method": "ping"}))
        assert wire.collect(Counter({"last": 1}))["last"][0]["result"] == {}  # nothing more was owed, nothing more came
    finally:
        code = wire.close()
    assert code == 0, (tmp_path / "stderr").read_text()
