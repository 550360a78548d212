"""Forging swarm state the way an attacker with push access would: git plumbing only.

Records are written with `git hash-object -w`, trees with `git mktree`,
commits with `git commit-tree`, refs with `git update-ref`, and the result
pushed with `git push`. gitswarm's model code is used only to compute the
bytes a well-formed record would have (the reducer's state, the canonical
encoding), so that a forgery differs from a valid history exactly where a
test says, never through gitswarm's store.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from gitswarm.model import codec
from gitswarm.model.errors import GitswarmError
from gitswarm.model.ids import new_id
from gitswarm.model.ops import Op
from gitswarm.model.records import JobState, Task
from gitswarm.model.reducer import apply
from gitswarm.model.replay import replay
from gitswarm.store import layout


def run_git(repo: Path, *args: str, input: bytes | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True, check=True)
    return done.stdout.decode().strip()


def hash_object(repo: Path, data: bytes) -> str:
    return run_git(repo, "hash-object", "-w", "--stdin", input=data)


def write_tree(repo: Path, files: Mapping[str, str]) -> str:
    """A tree holding blob `oid` at each `path` (nested paths make subtrees), by `git mktree`."""
    children: dict[str, dict[str, str]] = {}
    lines = []
    for path, oid in sorted(files.items()):
        head, sep, rest = path.partition("/")
        if sep:
            children.setdefault(head, {})[rest] = oid
        else:
            lines.append(f"100644 blob {oid}\t{head}")
    for name, below in sorted(children.items()):
        lines.append(f"040000 tree {write_tree(repo, below)}\t{name}")
    return run_git(repo, "mktree", "-z", input=("\0".join(lines) + "\0").encode() if lines else b"")


def commit_tree(repo: Path, tree: str, message: str, *parents: str) -> str:
    args = ["commit-tree", tree]
    for parent in parents:
        args += ["-p", parent]
    return run_git(repo, *args, input=message.encode())


def tree_files(repo: Path, commit: str) -> dict[str, str]:
    """Every blob path of a commit's tree and its oid (`git ls-tree -r`)."""
    out = run_git(repo, "ls-tree", "-r", "-z", commit)
    files = {}
    for entry in out.split("\0"):
        if entry:
            meta, path = entry.split("\t", 1)
            files[path] = meta.split()[2]
    return files


def op_line(op: Mapping[str, Any]) -> str:
    """An operation's line as a forger writes it: compact JSON, keys in the order given."""
    return json.dumps(op, separators=(",", ":"))


def op_message(*ops: Mapping[str, Any]) -> str:
    titles = "; ".join(f"{op['op']} {op.get('task') or '*'}" for op in ops)
    return f"{titles}\n\n" + "".join(op_line(op) + "\n" for op in ops)


def history_ops(repo: Path, tip: str) -> list[list[dict]]:
    """The operations of a job's (linear) history, one list per commit, oldest first, as dicts."""
    commits = run_git(repo, "rev-list", "--reverse", tip).split()
    out = []
    for commit in commits:
        body = run_git(repo, "log", "-1", "--format=%B", commit).partition("\n\n")[2]
        out.append([json.loads(line) for line in body.splitlines() if line.strip()])
    return out


def forge_history(
    repo: Path, commits: list[list[Mapping[str, Any]]], extra: Mapping[str, str] = {}, onto: str | None = None
) -> str:
    """A job history of one commit per list of ops, each tree the state a valid history would
    record after it (as far as the ops decode at all: a forgery the reducer cannot read keeps
    the tree before it). `extra` files join the last tree. With `onto` (an existing tip whose
    history holds the first `len(history_ops(onto))` lists), only the rest become new commits
    on top of it. Returns the tip."""
    applied: list[Mapping[str, Any]] = []
    files: dict[str, str] = {}
    tip: str | None = onto
    skip = len(history_ops(repo, onto)) if onto is not None else 0
    if onto is not None:
        files = tree_files(repo, onto)
    for n, ops in enumerate(commits):
        if n < skip:
            applied.extend(ops)
            continue
        applied.extend(ops)
        try:
            files = {**{p: o for p, o in files.items() if not p.startswith(layout.TASKS_FANS)}, **job_files(repo, applied)}
        except (msgspec.ValidationError, KeyError, ValueError, TypeError, GitswarmError):  # ops that do not apply
            pass
        if n == len(commits) - 1:
            files = {**files, **extra}
        tree = write_tree(repo, files)
        tip = commit_tree(repo, tree, op_message(*ops), *([tip] if tip else []))
    assert tip is not None
    return tip


def materialize(ops: list[Mapping[str, Any]]) -> tuple[JobState, dict[str, Task]]:
    """The state and task records a valid history of `ops` (applied in order) records."""
    state, tasks = JobState(), {}
    for raw in ops:
        op = msgspec.convert(dict(raw), Op)
        change = apply(op, state, lambda t: tasks[t], lambda: list(tasks))
        state = change.state
        tasks.update(change.tasks)
    return state, tasks


def job_files(repo: Path, ops: list[Mapping[str, Any]]) -> dict[str, str]:
    """The tree files (path -> blob) of a job whose history is `ops`, as gitswarm lays them out."""
    state, tasks = materialize(ops)
    created = msgspec.convert(dict(ops[0]), Op)
    files = {layout.JOB_PATH: hash_object(repo, codec.encode(created.job))}  # type: ignore[union-attr]
    files[layout.STATE_PATH] = hash_object(repo, codec.encode(state))
    for task in tasks.values():
        files[layout.task_path(task.id)] = hash_object(repo, codec.encode(task))
    return files


def push(repo: Path, *refspecs: str, remote: str = "origin") -> None:
    run_git(repo, "push", "-q", "--force", remote, *refspecs)


def forge_replayed(repo: Path, ref: str, ops: list[Mapping[str, Any]], remote: str = "origin") -> str:
    """Append one commit per op (ids and Lamport clocks filled in) onto the tip of `ref` on `remote`, each
    tree the canonical replay of every op of the history so far (a skipped op is allowed, as a replay skips
    it), and force-push it there; the new tip."""
    run_git(repo, "fetch", "-q", remote, f"+{ref}:{ref}")
    tip = run_git(repo, "rev-parse", ref)
    history: list[Mapping[str, Any]] = []
    for commit in run_git(repo, "rev-list", "--reverse", "--no-merges", tip).split():
        body = run_git(repo, "log", "-1", "--format=%B", commit).partition("\n\n")[2]
        history += [json.loads(line) for line in body.splitlines() if line.strip()]
    clock = max(op["clock"] for op in history)
    files = tree_files(repo, tip)
    for raw in ops:
        clock += 1
        op = {"v": 1, "id": new_id(), "clock": clock, **raw}
        history.append(op)
        result = replay([msgspec.convert(dict(o), Op) for o in history], ref)
        files = {p: o for p, o in files.items() if not p.startswith(layout.TASKS_FANS) and p != layout.STATE_PATH}
        files[layout.STATE_PATH] = hash_object(repo, codec.encode(result.state))
        files.update((layout.task_path(t.id), hash_object(repo, codec.encode(t))) for t in result.tasks.values())
        tip = commit_tree(repo, write_tree(repo, files), op_message(op), tip)
    push(repo, f"{tip}:{ref}", remote=remote)
    return tip
