"""Implement tasks: the agent edits in its own worktree; gitswarm captures, verifies, repairs.

An attempt: prepare the worktree from the pinned base (a new attempt resets
it, a repair round continues on it), copy the include files, run the setup
command, run the agent, commit what it left, make the PATCH artifact, and
verify it on a clean checkout. A rejected patch goes back to the agent with
what failed, up to the task's repair rounds; each round is a new commit and
a new verdict, but for a round that only repeats a rejected change
(engine/delegation/repair.py): not checked again, and two in a row end it.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from gitswarm.adapters.base import Adapter, BlobWriter, Invocation, Outcome, RunContext, Runner, execute
from gitswarm.adapters.sandbox import Decision
from gitswarm.adapters.shell import tail
from gitswarm.engine.delegation.confine import Confined
from gitswarm.engine.delegation.integrity import Watch, describe, snapshot, violations
from gitswarm.engine.delegation.repair import Rejected, Rounds, repair_prompt, repeat_prompt, why
from gitswarm.engine.delegation.verify import Sandboxes, changed_judges, rules_of, verify
from gitswarm.model.artifacts import Artifact, Patch
from gitswarm.model.errors import GitswarmError
from gitswarm.model.late_instructions import FollowUp
from gitswarm.model.records import TaskSpec
from gitswarm.store.checkouts import Checkouts
from gitswarm.store.gitrepo import GitCommandError, GitRepo
from gitswarm.store.worktrees import Worktree, Worktrees, WorktreeViolation

SUBJECT_CHARS = 72


@dataclass
class Delegation:
    repo: GitRepo
    worktrees: Worktrees
    store: BlobWriter
    now: Callable[[], float]
    auditor: Adapter | None = None
    guidance: Callable[[int], str] | None = None  # the steering section delivered at repair round N (engine/jobs/steering.py)
    sandbox: Decision | None = None  # the agent's sandbox (engine/delegation/confine.py); None: none, none recorded
    checks_sandbox: Decision | None = None  # the checks' ([sandbox] checks); None: they run as before
    auditor_sandbox: Decision | None = None

    def run(
        self,
        adapter: Adapter,
        ctx: RunContext,
        base: str,
        spec: TaskSpec,
        run: Runner,
        lost: Callable[[], bool],
        follow_up: FollowUp | None = None,
    ) -> Outcome:
        """One attempt; a follow-up's starts from the head it continues (its patch is still taken from `base`)."""
        start = follow_up.head if follow_up is not None else None
        worktree = self.worktrees.prepare(ctx.job, ctx.task, base, reset=True, start=start)
        # The clean checkout for the checks is made while the agent runs, not after it.
        stocker = _Stocker(self.worktrees.checkouts, base) if spec.checks or self.auditor is not None else None
        # Waited for when the attempt ends, not when it is interrupted (Ctrl-C, SIGTERM): the thread is a daemon,
        # and a checkout it left half made is made again at its next use (store/checkouts.py).
        outcome = self._attempt(adapter, ctx, base, spec, run, lost, worktree, stocker, follow_up)
        if stocker is not None:
            stocker.wait()
        return outcome

    def _attempt(
        self,
        adapter: Adapter,
        ctx: RunContext,
        base: str,
        spec: TaskSpec,
        run: Runner,
        lost: Callable[[], bool],
        worktree: Worktree,
        stocker: _Stocker | None,
        follow_up: FollowUp | None,
    ) -> Outcome:
        repo_dir = self.repo.workdir or self.repo.common_dir
        included = self.worktrees.copy_includes(worktree, repo_dir)
        instruction = ctx.prompt if ctx.prompt is not None else spec.prompt
        ctx = msgspec.structs.replace(ctx, workdir=worktree.path, prompt=instruction)
        if spec.setup:
            setup = run(Invocation(["sh", "-c", spec.setup], worktree.path, dict(ctx.base_env), spec.timeout))
            if setup.exit_code != 0:
                return Outcome(ok=False, error=f"setup failed ({setup.stopped or f'exit {setup.exit_code}'}): {tail(setup.stderr, 1)}")
        artifacts: list[Artifact] = []
        rounds = Rounds()
        watch = Watch(self.repo.workdir, self.repo.common_dir, worktree.path, self.worktrees.root)
        for round_ in range(spec.repair_rounds + 1):
            steer = self.guidance(round_) if round_ and self.guidance is not None else ""
            if steer:  # delivered to this round, and kept in the instruction of the attempt's later ones
                instruction = (instruction or "") + steer
                ctx = msgspec.structs.replace(ctx, prompt=(ctx.prompt or "") + steer)
            before = snapshot(watch, self.now())
            confined = Confined(self.repo.common_dir, self.sandbox, ctx, worktree.path) if self.sandbox is not None else None
            try:
                said = execute(adapter, spec, confined.ctx if confined is not None else ctx, run, self.store, self.now)
                if lost():
                    return Outcome(ok=False, error="lease lost")
                artifacts.extend(said.artifacts)
                # Before the agent's own word: one that wrote outside and then failed is not retried.
                escaped = violations(watch, before, snapshot(watch, self.now()))
                if escaped:
                    return Outcome(ok=False, error=describe(escaped), artifacts=artifacts, retryable=False)
                if not said.ok and said.error:
                    # The agent said it failed (an error result, a refused edit): what it
                    # left in the worktree is not work to verify.
                    return Outcome(ok=False, error=said.error, artifacts=artifacts)
                message = commit_message(spec, ctx, round_, adapter.name, follow_up)
                try:
                    if confined is not None:  # what it committed in its sandbox, brought back (store/private_git.py)
                        confined.bring_back()
                    captured = self.worktrees.capture(worktree, message, leave_out=included, agent=adapter.name)
                except WorktreeViolation as exc:
                    return Outcome(ok=False, error=f"integrity: {exc}", artifacts=artifacts, retryable=False)
                except GitCommandError as exc:
                    if confined is None:
                        raise
                    error = f"integrity: the agent's commits could not be brought in from its sandbox: {exc}"
                    return Outcome(ok=False, error=error, artifacts=artifacts, retryable=False)
            finally:
                if confined is not None:
                    confined.close()
            if not captured.files:
                error = "no-op: the agent changed nothing" + (f" ({said.error})" if said.error else "")
                return Outcome(ok=False, error=error, artifacts=artifacts)
            tree = self.repo.commit_info(captured.head).tree
            repeated = rounds.seen(round_, tree)
            if repeated is not None:  # the same files as a rejected round: the same checks would say the same
                if rounds.stop:
                    return Outcome(ok=False, error=rounds.repeated_error(), artifacts=artifacts, retryable=False)
                repair = repeat_prompt(self.repo.read_blob, instruction or "", round_, captured.head, repeated)
                ctx = msgspec.structs.replace(ctx, prompt=repair)
                continue
            patch = Patch(
                job=ctx.job,
                task=ctx.task,
                attempt=ctx.attempt,
                created=self.now(),
                producer=adapter.name,
                base=base,
                head=captured.head,
                diff=self.store(captured.diff, 0),
                sha256=captured.sha256,
                files=captured.files,
            )
            if not spec.checks and self.auditor is None:
                # Nothing to check: the patch stands unverified (no verdict of nothing is recorded).
                return Outcome(ok=True, artifacts=[*artifacts, patch])
            if stocker is not None:
                stocker.wait()
            rules = rules_of(self.repo.workdir, spec)
            judged = changed_judges(self.repo, Path(repo_dir), base, captured.head, spec, rules)
            if judged.files:
                patch = msgspec.structs.replace(patch, judges=judged.files)
            verification = verify(
                self.repo, Path(repo_dir), self.worktrees.root, patch, spec, ctx, run, self.store, self.now, self.auditor, rules,
                judged, Sandboxes(self.checks_sandbox, self.auditor_sandbox),
            )
            artifacts += [patch, *verification.checks, verification.verdict]
            if verification.verdict.accepted:
                return Outcome(ok=True, artifacts=artifacts)
            if lost():
                return Outcome(ok=False, error="lease lost")
            rejected = Rejected(round_, captured.head, tree, verification.checks, verification.verdict)
            rounds.reject(rejected)
            ctx = msgspec.structs.replace(ctx, prompt=repair_prompt(self.repo.read_blob, instruction or "", rejected))
        # Round 0 is never a repeat: every attempt that gets here had one rejected.
        last = rounds.repeats[-1][1] if rounds.repeats else rejected
        again = f" (round {spec.repair_rounds} repeated round {last.round}'s change, not checked again)" if rounds.repeats else ""
        return Outcome(
            ok=False, error=f"rejected after {spec.repair_rounds} repair round(s): {why(last.verdict)}{again}",
            artifacts=artifacts, retryable=False,
        )


class _Stocker:
    """Stocks the pool of clean checkouts (store/checkouts.py) in a thread while the agent runs: best
    effort, as verification makes its own checkout when the pool has none."""

    def __init__(self, checkouts: Checkouts, commit: str) -> None:
        self.thread = threading.Thread(target=self._stock, args=(checkouts, commit), name="gitswarm-stock", daemon=True)
        self.thread.start()

    @staticmethod
    def _stock(checkouts: Checkouts, commit: str) -> None:
        try:
            checkouts.stock(commit)
        except (GitswarmError, OSError):
            pass  # the checks' own checkout is then made when they need it, and fails there if it must

    def wait(self) -> None:
        self.thread.join()


def commit_message(spec: TaskSpec, ctx: RunContext, round_: int, agent: str, follow_up: FollowUp | None = None) -> str:
    """The message of the commit gitswarm makes of an agent's work.

    The subject is the instruction's first line, or as much of it as fits
    in 72 characters cut after a whole word, with `…` (a repair round says
    which; a follow-up's instruction is its own); the body the whole
    instruction when the subject is not all of it, a line naming the task, and the trailers
    `Gitswarm-Job`, `Gitswarm-Task`, `Gitswarm-Attempt`, `Gitswarm-Round`
    and, for a follow-up, `Gitswarm-Follow-Up` (its op id). The patch and
    verdict ids cannot be in it: the patch (whose id hashes its head) and
    its verdict are made from this commit.
    """
    given = follow_up.instruction if follow_up is not None else spec.prompt
    instruction = (given or _command_text(spec.command)).strip()
    first = next((line.strip() for line in instruction.splitlines() if line.strip()), "")
    suffix = f" (repair round {round_})" if round_ else ""
    subject = shorten(first, SUBJECT_CHARS - len(suffix)) if first else f"gitswarm: {ctx.job}/{ctx.task}"
    paragraphs = [subject + suffix]
    if instruction and instruction != subject:
        paragraphs.append(instruction)
    continued = f", following up on {follow_up.head[:12]}" if follow_up is not None and follow_up.head else ""
    paragraphs.append(
        f"Made by {agent} through gitswarm: task {ctx.task} of job {ctx.job}, attempt {ctx.attempt}, round {round_}{continued}."
    )
    trailers = f"Gitswarm-Job: {ctx.job}\nGitswarm-Task: {ctx.task}\nGitswarm-Attempt: {ctx.attempt}\nGitswarm-Round: {round_}"
    if follow_up is not None:
        trailers += f"\nGitswarm-Follow-Up: {follow_up.op}"
    paragraphs.append(trailers)
    return "\n\n".join(paragraphs) + "\n"


def shorten(line: str, room: int) -> str:
    """`line` when it fits in `room` characters; else cut at its last word boundary that leaves room for
    `…`, never inside a word (only a first word longer than the room is cut), trailing punctuation dropped."""
    if len(line) <= room:
        return line
    spaces = [n for n, char in enumerate(line[:room]) if char.isspace()]  # line[n] follows a whole word
    kept = line[: spaces[-1]].rstrip().rstrip(",;:-") if spaces else ""
    return (kept or line[: room - 1]).rstrip() + "…"


def _command_text(command: str | list[str] | tuple[str, ...] | None) -> str:
    if command is None:
        return ""
    return command if isinstance(command, str) else shlex.join(command)
