"""Repair rounds: what the agent is told after a rejection, and a round that only repeats one.

A rejected round goes back to the agent with what failed. A round whose
tree (the commit's tree id: the files, not the history) equals one already
rejected in the same attempt is not checked again: the same files on the
same base give the same checks. The agent is told that its change was
identical, and why that change was rejected; a second identical round in a
row ends the task. A new attempt (a retry, a follow-up) checks every tree
afresh: what judged it may have changed since.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gitswarm.adapters.shell import tail
from gitswarm.model.artifacts import Check, Verdict
from gitswarm.model.evidence import held_for_review, judges_line, why_rejected

REPAIR_TAIL_LINES = 40
REPEATS_TO_STOP = 2  # identical rounds in a row that end the task
FIX_IT = "Fix it in this worktree."  # the last line of every repair prompt (tests/realclis/fakeserver.py looks for it)


@dataclass(frozen=True)
class Rejected:
    """A round whose change was checked and rejected."""

    round: int
    head: str
    tree: str
    checks: list[Check]
    verdict: Verdict


@dataclass
class Rounds:
    """The trees an attempt's rounds were rejected with, and the identical rounds since the last new one."""

    rejected: dict[str, Rejected] = field(default_factory=dict)
    repeats: list[tuple[int, Rejected]] = field(default_factory=list)  # (round, the rejected one it repeated)

    def seen(self, round_: int, tree: str) -> Rejected | None:
        """The rejected round whose tree this round's equals (counted as a repeat), else None (the run of repeats ends)."""
        earlier = self.rejected.get(tree)
        if earlier is None:
            self.repeats.clear()
        else:
            self.repeats.append((round_, earlier))
        return earlier

    def reject(self, rejected: Rejected) -> None:
        self.rejected.setdefault(rejected.tree, rejected)

    @property
    def stop(self) -> bool:
        """Enough identical rounds in a row: the agent is not getting anywhere."""
        return len(self.repeats) >= REPEATS_TO_STOP

    def repeated_error(self) -> str:
        """The task's error when identical rounds ended it: which rounds, which change they repeated, why it was rejected."""
        rounds = " and ".join(str(r) for r, _ in self.repeats)
        earlier = list({e.round: e for _, e in self.repeats}.values())
        s = "s" if len(earlier) > 1 else ""
        which = f"round{s} {' and '.join(str(e.round) for e in earlier)} (tree{s} {', '.join(e.tree[:12] for e in earlier)})"
        return (
            f"rejected: rounds {rounds} left the same files as {which}, already rejected, so they were not checked again; "
            f"{len(self.repeats)} identical rounds in a row ended the task. Round {earlier[-1].round} was rejected for: "
            + why(earlier[-1].verdict)
        )


def why(verdict: Verdict) -> str:
    """A rejection in one line, a change held for a person's review said as such."""
    return judges_line(verdict.judges) + ": a person must review it" if held_for_review(verdict) else why_rejected(verdict)


def repair_prompt(read_blob: Callable[[str], bytes], instruction: str, rejected: Rejected) -> str:
    """The next round's prompt after a rejection: the instruction, what was rejected and why, each failed check's last lines."""
    verdict = rejected.verdict
    lines = [instruction, "", f"Your change (commit {verdict.head[:12]}) was rejected: {_verdict(verdict)}."]
    return "\n".join(lines + _reasons(read_blob, rejected) + [FIX_IT])


def repeat_prompt(read_blob: Callable[[str], bytes], instruction: str, round_: int, head: str, rejected: Rejected) -> str:
    """The next round's prompt after a round identical to a rejected one: said so, and why that one was rejected."""
    lines = [
        instruction,
        "",
        f"Your last attempt (round {round_}, commit {head[:12]}) was identical to round {rejected.round}'s change "
        f"(commit {rejected.head[:12]}, the same files: tree {rejected.tree[:12]}), which was already rejected, so it "
        "was not checked again. The same change will be rejected again, and another identical round ends the task: "
        "make a different change.",
        f"Round {rejected.round}'s change was rejected: {_verdict(rejected.verdict)}.",
    ]
    return "\n".join(lines + _reasons(read_blob, rejected) + [FIX_IT])


def _verdict(verdict: Verdict) -> str:
    return f"{verdict.status}/{verdict.integrity}/{verdict.contract}"


def _reasons(read_blob: Callable[[str], bytes], rejected: Rejected) -> list[str]:
    verdict = rejected.verdict
    lines = []
    if verdict.judges:
        lines.append(
            f"It changes files that judge it ({', '.join(verdict.judges)}): the checks ran with their base version, and "
            "a change to them is never accepted by the checks. Fix the code, not the tests or the checks; put those files back."
        )
    lines += [f"- {flag}" for flag in verdict.flags]
    if "require" in verdict.evidence:
        lines.append(f"- {verdict.evidence['require']}")
    for check in rejected.checks:
        if not check.passed:
            output = b""
            for ref in (check.stderr, check.stdout):
                if ref is not None:
                    output += read_blob(ref.oid)
            lines += [f"The check `{check.command}` failed (exit {check.exit_code}):", tail(output, REPAIR_TAIL_LINES)]
    return lines
