"""The environment checks run in: the checkout's code wins, and the user's working tree is not read.

A check runs in a clean checkout of the head, but its environment is the
user's: a virtual environment with the project installed editable points
`import pkg` at the user's working tree, and a `PATH` with a relative entry
runs whatever the patch placed under that name. So, for every check:

- `PATH` loses its relative entries and any entry inside the checkout;
- `PYTHONPATH` starts with the checkout's import roots (`src/` when it
  exists, then the checkout itself), ahead of every editable install;
- a `sitecustomize` on that path installs an audit hook that notes every
  file the check's Python processes open under the user's working tree;
  gitswarm then calls a check that read one of the project's tracked files
  from there unverifiable (docs/verification.md says what this covers).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path

GUARD_DIR = "check-guard"
READS_VAR = "GITSWARM_TREE_READS"
TREE_VAR = "GITSWARM_USER_TREE"
MAX_READS = 64

# Runs at the start of every Python process of a check (it is first on PYTHONPATH). It imports only
# what the interpreter has loaded already, and never fails the process it runs in.
SITECUSTOMIZE = '''\
"""gitswarm's check guard: notes files opened under the user's working tree (docs/verification.md)."""
import os, sys

def _install():
    tree, report = os.environ.get("GITSWARM_USER_TREE"), os.environ.get("GITSWARM_TREE_READS")
    if not tree or not report:
        return
    prefix = os.path.join(os.path.realpath(tree), "")
    skip = tuple(os.path.join(os.path.realpath(p), "") for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})
    seen = set()

    def hook(event, args):
        if event != "open" or len(seen) >= @MAX_READS@ or not args or not isinstance(args[0], (str, bytes)):
            return
        path = os.fsdecode(args[0])
        if not os.path.isabs(path):
            path = os.path.join(os.getcwd(), path)
        path = os.path.realpath(path)
        if path in seen or not path.startswith(prefix) or path.startswith(skip):
            return
        seen.add(path)
        try:
            with open(report, "a", encoding="utf-8", errors="surrogateescape") as handle:
                handle.write(path + "\\n")
        except OSError:
            pass

    sys.addaudithook(hook)


def _chain():
    """Run the sitecustomize this one hides (the project's or the environment's own), as Python would have."""
    import importlib.machinery, importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)

try:
    _install()
except Exception:
    pass
_chain()
'''.replace("@MAX_READS@", str(MAX_READS))


def guard_dir(root: Path) -> Path:
    """The directory holding the guard's sitecustomize.py, written once (outside every tree gitswarm checks)."""
    directory = root / GUARD_DIR
    target = directory / "sitecustomize.py"
    try:
        if target.read_text() == SITECUSTOMIZE:
            return directory
    except OSError:
        pass
    directory.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(SITECUSTOMIZE)
    tmp.replace(target)
    return directory


def import_roots(checkout: Path) -> list[Path]:
    """Where the checkout's Python code is imported from: `src/` when the project has one, then its root."""
    src = checkout / "src"
    return [src, checkout] if src.is_dir() else [checkout]


def check_env(base_env: Mapping[str, str], checkout: Path, user_tree: Path | None, guard: Path, reads: Path) -> dict[str, str]:
    """The environment of a check run in `checkout` (see the module's docstring)."""
    env = dict(base_env)
    inside = os.path.join(os.path.realpath(checkout), "")
    kept = []
    for entry in env.get("PATH", os.defpath).split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        if os.path.join(os.path.realpath(entry), "").startswith(inside):
            continue
        kept.append(entry)
    env["PATH"] = os.pathsep.join(kept)
    roots = [str(guard), *(str(p) for p in import_roots(checkout))]
    existing = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join([*roots, existing] if existing else roots)
    env.pop("PYTHONSAFEPATH", None)
    if user_tree is not None:
        env[TREE_VAR] = str(user_tree)
        env[READS_VAR] = str(reads)
    return env


#: Variables that differ between two runs of the same check without changing it: left out of env_key.
_VOLATILE = re.compile(
    r"^(PWD|OLDPWD|SHLVL|_|TERM.*|COLUMNS|LINES|SSH_.*|GPG_TTY|DISPLAY|WAYLAND_.*|XDG_SESSION_.*|XDG_RUNTIME_DIR|"
    r"DBUS_.*|WINDOWID|PS[1-4]|PROMPT_COMMAND|HIST.*|TMUX.*|STY|GITSWARM_.*|COLORTERM|LS_COLORS|MAIL|LOGNAME)$"
)


def env_key(env: Mapping[str, str]) -> str:
    """A digest of what in an environment can change how a check runs (PYTEST_ADDOPTS, PATH, ...)."""
    kept = sorted((k, v) for k, v in env.items() if not _VOLATILE.match(k))
    return hashlib.sha256(repr(kept).encode(errors="surrogateescape")).hexdigest()[:32]


def source_of(path: str) -> str:
    """The source file a compiled `__pycache__/mod.cpython-311.pyc` was made from (`mod.py`), else `path`."""
    head, _, name = path.rpartition("/")
    if not head.endswith("__pycache__") or not name.endswith(".pyc"):
        return path
    folder = head[: -len("__pycache__")]
    return f"{folder}{name.split('.', 1)[0]}.py"


def tree_reads(reads: Path, user_tree: Path) -> list[str]:
    """The files under `user_tree` that the check opened, relative to it, as the guard noted them."""
    try:
        lines = reads.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    except OSError:
        return []
    root = os.path.realpath(user_tree)
    out = []
    for line in lines[:MAX_READS]:
        rel = os.path.relpath(line, root)
        if not rel.startswith("..") and rel not in out:
            out.append(rel)
    return out
