"""`[sandbox] network = "endpoint"`: an agent reaches its model endpoint and nothing else (docs/sandbox.md).

The misbehaving agent (tests/fakes/misbehaving_agent) runs with network endpoint, its endpoint a loopback
HTTP server this test starts (named by a base-URL variable its spec lists in `endpoint_env`). It reaches
that server through the proxy variables (plain HTTP and a CONNECT tunnel) and straight at its loopback
address; a direct connection to another loopback port fails, and so does asking the proxy for it or for a
host far away, and what the proxy refused is on the run's record and in `gitswarm show`. When the run has
ended no proxy thread, socket or bridge is left. Without bwrap, endpoint refuses to run. Loopback only.
"""

from __future__ import annotations

import json
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gitswarm.model.artifacts import Run
from tests.conftest import cli, commit_file
from tests.engine.delegation.test_sandbox import AGENT, _path_without_bwrap, needs_bwrap, task_records

BODY = "hello from the model"


class ModelServer(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY.encode())

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def model_server() -> Iterator[int]:
    """A loopback HTTP server that stands for the agent's model endpoint: its port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), ModelServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def own_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A short temporary directory of this test's own, where the runs' scratch and socket directories go."""
    path = Path(tempfile.mkdtemp(prefix="gs-", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    yield path
    shutil.rmtree(path)


def register(repo: Path, sandbox: str) -> None:
    """Adapter `rogue`: the misbehaving agent, its endpoint in ROGUE_BASE_URL."""
    spec = (f'executable = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(AGENT))}, "{{prompt}}"]\n'
            f'pass_env = ["ROGUE_BASE_URL"]\n[sandbox]\n{sandbox}')
    commit_file(repo, ".gitswarm/adapters/rogue.toml", spec, "the rogue agent")


def bridges(under: Path) -> list[int]:
    """The processes whose command line names a socket under `under`: a network bridge left behind."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(under).encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@needs_bwrap
def test_an_endpoint_run_reaches_its_endpoint_and_nothing_else(repo: Path, model_server: int, own_tmp: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    register(repo, 'network = "endpoint"\nendpoint_env = ["ROGUE_BASE_URL"]\n')
    endpoint = f"http://127.0.0.1:{model_server}/v1"
    monkeypatch.setenv("ROGUE_BASE_URL", endpoint)
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen(8)
    port = other.getsockname()[1]
    try:
        prompt = f"the task\nendpoint: {endpoint}\nport: {port}"
        result = cli(repo, "--json", "delegate", prompt, "--adapter", "rogue", "--check", "test -f notes.txt")
    finally:
        other.close()
    assert result.code == 0, result.err
    job = result.json()["id"]
    outputs, records = task_records(repo, job)
    [run] = [r for r in records if isinstance(r, Run)]
    said = dict(line.split(": ", 1) for line in outputs[id(run)].splitlines() if ": " in line)
    # Its endpoint: through the proxy (plain HTTP and a CONNECT tunnel), and straight at its own address.
    for name in ("endpoint-direct", "endpoint-proxied", "endpoint-tunnel"):
        assert said[name] == f"done ({BODY})", (name, said[name])
    # Anything else: refused, straight or through the proxy.
    for name in ("connect", "connect-proxied", "connect-tunnel", "far-tunnel"):
        assert said[name].startswith("refused"), (name, said[name])
    assert "403" in said["connect-tunnel"] and "403" in said["far-tunnel"]
    # What the proxy refused is on the run's record (once each), and in `gitswarm show`.
    assert run.sandbox.kind == "bwrap" and run.sandbox.network == "endpoint"
    assert run.sandbox.refused == (f"127.0.0.1:{port}", "example.invalid:443")
    shown = cli(repo, "show", job)
    assert f"- delegate (attempt 1): 127.0.0.1:{port}, example.invalid:443" in shown.out, shown.out
    # Nothing of the proxy outlives the run: no thread, no socket directory, no bridge.
    assert [t.name for t in threading.enumerate() if t.name.startswith("gitswarm-proxy")] == []
    assert list(own_tmp.glob("gitswarm-net-*")) == [] and list(own_tmp.glob("gitswarm-run-*")) == []
    assert bridges(own_tmp) == []


@needs_bwrap
def test_the_repository_names_an_endpoint_in_its_hosts(repo: Path, model_server: int, own_tmp: Path) -> None:
    """A loopback endpoint no variable names (codex's and hermes' are in their own config): `[sandbox] hosts`."""
    register(repo, "")
    commit_file(repo, ".gitswarm.toml", f'[sandbox]\nnetwork = "endpoint"\nhosts = ["127.0.0.1:{model_server}"]\n')
    endpoint = f"http://127.0.0.1:{model_server}/"
    result = cli(repo, "--json", "delegate", f"the task\nendpoint: {endpoint}", "--adapter", "rogue",
                 "--check", "test -f notes.txt")
    assert result.code == 0, result.err
    outputs, records = task_records(repo, result.json()["id"])
    [run] = [r for r in records if isinstance(r, Run)]
    said = dict(line.split(": ", 1) for line in outputs[id(run)].splitlines() if ": " in line)
    for name in ("endpoint-direct", "endpoint-proxied", "endpoint-tunnel"):
        assert said[name] == f"done ({BODY})", (name, said[name])
    assert run.sandbox.network == "endpoint" and run.sandbox.refused == ()


@needs_bwrap
def test_a_run_killed_at_its_timeout_closes_its_proxy(repo: Path, tmp_path: Path, own_tmp: Path) -> None:
    register(repo, 'network = "endpoint"\n')
    spec = tmp_path / "spec.toml"
    spec.write_text('goal = "g"\n[[tasks]]\nid = "t"\nmode = "implement"\nadapter = "rogue"\nprompt = "linger: 600"\n'
                    'timeout = "1s"\nmax_attempts = 1\n')
    result = cli(repo, "--json", "run", str(spec))
    assert result.code == 1 and "timeout" in result.json()["tasks"][0]["error"], result.out
    assert [t.name for t in threading.enumerate() if t.name.startswith("gitswarm-proxy")] == []
    assert list(own_tmp.glob("gitswarm-net-*")) == []
    assert bridges(own_tmp) == []


def test_an_adapter_asking_for_endpoint_without_bwrap_fails_its_task_without_running(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    register(repo, 'network = "endpoint"\n')
    monkeypatch.setenv("PATH", _path_without_bwrap(tmp_path))
    monkeypatch.setattr("gitswarm.adapters.sandbox.bundled_bwrap", lambda: None)
    result = cli(repo, "--json", "delegate", "the task", "--adapter", "rogue", "--check", "test -f notes.txt")
    assert result.code == 1, result.err
    [task] = result.json()["tasks"]
    assert task["error"].startswith('[sandbox] network = "endpoint" needs the sandbox'), task
    assert result.json()["summary"]["cost"]["runs"] == 0  # the agent never ran
