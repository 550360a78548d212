"""The machinery of the real-CLI suite: a lab per CLI (temp repo, isolated HOME and XDG dirs,
fake model server, egress logger), running the real `gitswarm` CLI in it, and watching
which processes it starts (their HOME, cwd and environment) through /proc."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import isolation_env

REALCLIS = Path(os.environ.get("GITSWARM_REALCLIS_DIR", "/tmp/realclis"))
BIN_DIRS = (REALCLIS / "npm" / "node_modules" / ".bin", REALCLIS / "venv" / "bin", REALCLIS / "venv-hermes" / "bin")
HERE = Path(__file__).parent
COMMAND_TIMEOUT = 120.0  # seconds, per gitswarm command
CANARY = "GITSWARM_REALCLI_CANARY"  # set for gitswarm, must not reach an agent (its env is an allow-list)


def real_path() -> str:
    """PATH for gitswarm and the agents: the realclis installs first, then this Python's bin, then the system's."""
    system = ["/usr/local/bin", "/usr/bin", "/bin"]
    return os.pathsep.join([*(str(d) for d in BIN_DIRS), str(Path(sys.executable).parent), *system])


def versions() -> dict[str, str]:
    """The versions realclis/install.sh installed, by binary name (VERSIONS.txt)."""
    out: dict[str, str] = {}
    try:
        lines = (REALCLIS / "VERSIONS.txt").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        if line.startswith("#") or not line.strip():
            continue
        name, _, rest = line.partition(" ")
        out[name] = rest.strip().split("  ")[0].strip()
    return out


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout


def wait_for_file(path: Path, proc: subprocess.Popen, what: str, seconds: float = 10.0) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.is_file() and path.read_text().strip():
            return path.read_text().strip()
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not start (exit {proc.poll()})")


def stop(proc: subprocess.Popen | None) -> None:
    """Stop a process this suite started, by its pid."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


# ---------------------------------------------------------------- watching processes


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _ppid(pid: int) -> int:
    stat = _read(f"/proc/{pid}/stat").decode(errors="replace")
    try:
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return 0


@dataclass
class Seen:
    pid: int
    argv: list[str]
    home: str | None
    cwd: str | None
    env_names: list[str]
    first_seen: float = 0.0
    nested: bool = False  # started by another agent process (codex's sandboxed commands), not by gitswarm

    def label(self, binary: str) -> str:
        """What kind of run: `claude --version`, `codex exec --help`, or `hermes (task)`."""
        names = [os.path.basename(a) for a in self.argv]
        rest = self.argv[names.index(binary) + 1:] if binary in names else self.argv[1:]
        probe = [a for a in rest[:2] if a in ("--version", "--help", "-v", "-h") or a in ("exec", "chat")]
        return " ".join([binary, *probe]) if any(a.startswith("--") for a in probe) else f"{binary} (task)"


class ProcWatch(threading.Thread):
    """Polls /proc while a gitswarm command runs; records every descendant of it whose argv[0] or
    argv[1] is one of `names` (the agent CLI, however it is launched: native, node, bun, python)."""

    def __init__(self, root: int, names: tuple[str, ...]) -> None:
        super().__init__(daemon=True)
        self.root, self.names = root, names
        self.seen: dict[int, Seen] = {}
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.scan()
            self._done.wait(0.02)
        self.scan()

    def finish(self) -> list[Seen]:
        self._done.set()
        self.join(5)
        return list(self.seen.values())

    def _descends(self, pid: int) -> bool:
        for _ in range(64):
            if pid == self.root:
                return True
            if pid <= 1:
                return False
            pid = _ppid(pid)
        return False

    def scan(self) -> None:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            pid = int(entry)
            if pid in self.seen:
                continue
            argv = [a.decode(errors="replace") for a in _read(f"/proc/{pid}/cmdline").split(b"\0") if a]
            if not any(os.path.basename(a) in self.names for a in argv[:2]):
                continue
            if not self._descends(pid):
                continue
            env = dict(
                item.decode(errors="replace").split("=", 1)
                for item in _read(f"/proc/{pid}/environ").split(b"\0")
                if b"=" in item
            )
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                cwd = None
            if not env:
                continue  # gone, or going, before its environment could be read (an exiting process reads as empty)
            parent = [a.decode(errors="replace") for a in _read(f"/proc/{_ppid(pid)}/cmdline").split(b"\0") if a]
            # codex re-executes itself for its own helpers (`codex --codex-run-as-fs-helper`, the sandbox) with an
            # environment it scrubbed to PATH, PWD and TMPDIR: its doing, not a run gitswarm started.
            nested = any(os.path.basename(a) in self.names for a in parent[:2]) or any(
                a.startswith("--codex-run-as-") for a in argv[1:3]
            )
            self.seen[pid] = Seen(pid, argv, env.get("HOME"), cwd, sorted(env), time.time(), nested)


# ---------------------------------------------------------------- snapshots


def tree_digest(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Every file, link and directory under root (except the top-level names in `skip`) with a digest of it."""
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d not in skip]
            filenames = [f for f in filenames if f not in skip]
        for d in dirnames:
            out[os.path.normpath(os.path.join(rel_dir, d)) + "/"] = "dir"
        for name in filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if os.path.islink(path):
                out[rel] = "link:" + os.readlink(path)
            else:
                out[rel] = hashlib.sha256(_read(path)).hexdigest()[:16]
    return out


def diff_digests(before: dict[str, str], after: dict[str, str]) -> list[str]:
    changes = [f"+{p}" for p in sorted(after.keys() - before.keys())]
    changes += [f"-{p}" for p in sorted(before.keys() - after.keys())]
    changes += [f"~{p}" for p in sorted(p for p in before.keys() & after.keys() if before[p] != after[p])]
    return changes


# ---------------------------------------------------------------- a lab per CLI


@dataclass
class Result:
    args: tuple[str, ...]
    code: int | None  # None: killed at the timeout
    out: str
    err: str
    seconds: float
    procs: list[Seen]

    def json(self) -> Any:
        return json.loads(self.out)

    def why(self) -> str:
        """Its last line on stderr (first: the table shows one line), then the command and more of stderr."""
        lines = [line for line in self.err.strip().splitlines() if line.strip() and not line.startswith('{"event"')]
        last = lines[-1] if lines else "(nothing on stderr)"
        head = f"`gitswarm {self.args[0]}` exit {self.code}: {last}"
        return head + f"\n  gitswarm {' '.join(self.args)} ({self.seconds:.0f}s)\n" + "\n".join(lines[-8:])


@dataclass
class Lab:
    """One CLI's world: everything below `base`, which pytest keeps under its basetemp."""

    cli: Any  # clis.CLI
    base: Path
    repo: Path
    home: Path
    tmp: Path
    env: dict[str, str]
    script: Path
    requests: Path
    egress_log: Path
    port: int = 0
    egress_port: int = 0
    binary: str = ""
    version: str = ""
    procs: list[Seen] = field(default_factory=list)
    runs: list[dict] = field(default_factory=list)  # run artifact records of every job, with the job's scenario
    analyze_cwds: list[str] = field(default_factory=list)
    checkout_changes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    egress: list[tuple[str, str, str]] = field(default_factory=list)  # (gitswarm command, agent run, host)
    home_before: dict[str, str] = field(default_factory=dict)
    git_before: dict[str, str] = field(default_factory=dict)
    servers: list[subprocess.Popen] = field(default_factory=list)

    def script_model(self, **script: Any) -> None:
        """What the fake model does from the next request on (fakeserver.py)."""
        tmp = self.script.with_suffix(".tmp")
        tmp.write_text(json.dumps(script))
        tmp.replace(self.script)

    def gitswarm(self, *args: str, timeout: float = COMMAND_TIMEOUT) -> Result:
        """The real gitswarm CLI as a subprocess in the lab's repo, killed (its whole group) at the timeout."""
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "gitswarm", *args], cwd=self.repo, env=self.env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
        watch = ProcWatch(proc.pid, self.cli.process_names)
        watch.start()
        egress_mark = len(_lines(self.egress_log))
        try:
            out, err = proc.communicate(timeout=timeout)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)  # the group of the gitswarm this suite started
            try:
                out, err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
            code, err = None, err + f"\n(killed after {timeout:.0f}s)"
        procs = watch.finish()
        self.procs += procs
        for line in _lines(self.egress_log)[egress_mark:]:
            event = json.loads(line)
            parts = event["request"].split()
            host = parts[1] if len(parts) > 1 else event["request"]
            started = [p for p in procs if p.first_seen <= event["t"]]
            by = max(started, key=lambda p: p.first_seen).label(self.cli.binary) if started else "?"
            self.egress.append((f"gitswarm {args[0]}", by, host))
        return Result(tuple(args), code, out, err, time.monotonic() - start, procs)

    def request_mark(self) -> int:
        return len(_lines(self.requests))

    def tools_since(self, mark: int) -> list[str]:
        """The tools the fake model called (or aider's edit block) in the requests since `mark`, in order."""
        tools: list[str] = []
        for line in _lines(self.requests)[mark:]:
            reply = json.loads(line).get("reply")
            names: list[str] = []
            if isinstance(reply, dict):  # chat completions
                names = [c["function"]["name"] for c in reply.get("tool_calls", [])]
                if not names and "```" in (reply.get("content") or ""):
                    names = ["(aider edit block)"]
            elif isinstance(reply, list):  # anthropic blocks, responses items, gemini parts
                for item in reply:
                    if not isinstance(item, dict):
                        continue
                    if item.get("type") in ("tool_use", "function_call", "custom_tool_call"):
                        names.append(item.get("name"))
                    elif "functionCall" in item:
                        names.append(item["functionCall"].get("name"))
            tools += [n for n in names if n and n not in tools]
        return tools

    def artifacts(self, job: str) -> list[dict]:
        """Every artifact record of a job, with its id."""
        listing = self.gitswarm("artifacts", job, "--json")
        assert listing.code == 0, listing.why()
        records = []
        for item in listing.json()["artifacts"]:
            one = self.gitswarm("artifact", item["id"], "--json")
            assert one.code == 0, one.why()
            record = one.json()["record"]
            records.append(dict(record, id=item["id"]))
        return records

    def collect_runs(self, job: str, scenario: str) -> list[dict]:
        runs = [dict(r, scenario=scenario) for r in self.artifacts(job) if r.get("kind") == "run"]
        self.runs += runs
        return runs

    def git_state(self) -> dict[str, str]:
        """What no agent may change in the user's git dir: its config, hooks and info/ (exclude)."""
        git_dir = self.repo / ".git"
        config = git_dir / "config"
        digest = {"config": hashlib.sha256(config.read_bytes()).hexdigest()[:16] if config.is_file() else "(none)"}
        for sub in ("hooks", "info"):
            digest.update({f"{sub}/{k}": v for k, v in tree_digest(git_dir / sub).items()})
        return digest

    def checkout(self) -> dict[str, str]:
        """The user's checkout: its files (not .git) and git's view of it."""
        digest = tree_digest(self.repo, skip=(".git",))
        digest["(git status)"] = git(self.repo, "status", "--porcelain", "--ignored", "--untracked-files=all")
        digest["(HEAD)"] = git(self.repo, "rev-parse", "HEAD")
        return digest


def start_egress_logger(lab: Lab) -> subprocess.Popen:
    port_file = lab.base / "egress.port"
    proc = subprocess.Popen(
        [sys.executable, str(REALCLIS / "egress_logger.py"), "--port-file", str(port_file), "--log", str(lab.egress_log)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    lab.servers.append(proc)
    lab.egress_port = int(wait_for_file(port_file, proc, "egress_logger.py"))
    return proc


def start_fake(lab: Lab) -> subprocess.Popen:
    port_file = lab.base / "fake.port"
    argv = [sys.executable, str(HERE / "fakeserver.py"), str(REALCLIS / lab.cli.fake), str(lab.script),
            "--port-file", str(port_file), "--log", str(lab.requests), *lab.cli.fake_args]
    with open(lab.base / "fake.err", "w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
    lab.servers.append(proc)
    lab.port = int(wait_for_file(port_file, proc, lab.cli.fake))
    return proc


def _lines(path: Path) -> list[str]:
    try:
        return [line for line in path.read_text().splitlines() if line.strip()]
    except OSError:
        return []


def egress_hosts(lab: Lab) -> list[str]:
    """Where anything tried to go past the loopback: the targets the egress logger saw."""
    hosts = set()
    for line in _lines(lab.egress_log):
        request = json.loads(line)["request"].split()
        hosts.add(request[1] if len(request) > 1 else " ".join(request))
    return sorted(hosts)


def make_lab(cli: Any, base: Path) -> Lab:
    """Directories, environment, servers and the repository (with the CLI's extending spec committed)."""
    home, tmp, repo = base / "home", base / "tmp", base / "repo"
    for d in (home, tmp, repo, base / "xdg"):
        d.mkdir(parents=True)
    env = isolation_env(home)
    env.update(
        PATH=real_path(),
        LANG="C.UTF-8",
        TMPDIR=str(tmp),
        XDG_CONFIG_HOME=str(base / "xdg" / "config"),
        XDG_STATE_HOME=str(base / "xdg" / "state"),
        XDG_CACHE_HOME=str(base / "xdg" / "cache"),
        XDG_DATA_HOME=str(base / "xdg" / "data"),
        NO_COLOR="1",
    )
    env[CANARY] = "must-not-reach-an-agent"
    if os.environ.get("PYTHONPATH"):  # the gitswarm under test, when it is not the installed one
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    lab = Lab(cli=cli, base=base, repo=repo, home=home, tmp=tmp, env=env, script=base / "script.json",
              requests=base / "requests.jsonl", egress_log=base / "egress.jsonl")
    lab.egress_log.touch()
    lab.script_model()
    try:
        _set_up(lab)
    except BaseException:
        close_lab(lab)
        raise
    return lab


def _set_up(lab: Lab) -> None:
    cli, env, repo, home, base = lab.cli, lab.env, lab.repo, lab.home, lab.base
    start_egress_logger(lab)
    start_fake(lab)
    cli.prepare(lab)  # user-level config the CLI needs (hermes' config.yaml, aider's model metadata)

    git(repo, "init", "-q", env=env)
    (repo / "README.md").write_text("# demo\n\nA small repository the real-CLI suite works on.\n")
    git(repo, "add", "README.md", env=env)
    git(repo, "commit", "-qm", "initial", env=env)
    spec = repo / ".gitswarm" / "adapters" / f"{cli.adapter}.toml"
    spec.parent.mkdir(parents=True)
    spec.write_text(cli.spec(lab))
    git(repo, "add", ".gitswarm", env=env)
    git(repo, "commit", "-qm", f"{cli.adapter}: pointed at the fake model server", env=env)

    # Where would delegation worktrees go? Under .git/ Claude Code refuses every edit.
    probe = subprocess.run(
        [sys.executable, "-c", "import sys; from pathlib import Path; from gitswarm.store.worktrees import default_root;"
         " print(default_root(Path(sys.argv[1])))", str(repo / ".git")],
        env=env, capture_output=True, text=True, check=True,
    )
    root = Path(probe.stdout.strip())
    if (repo / ".git") in root.parents or root == repo / ".git":
        env["GITSWARM_WORKTREE_ROOT"] = str(base / "worktrees")
        lab.notes.append(f"worktrees default to {root} (inside .git/): GITSWARM_WORKTREE_ROOT set to {base / 'worktrees'}")
    lab.home_before = tree_digest(home)
    lab.git_before = lab.git_state()


def close_lab(lab: Lab) -> None:
    for proc in reversed(lab.servers):
        stop(proc)
