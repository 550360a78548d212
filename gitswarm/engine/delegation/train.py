"""The merge train of `gitswarm merge JOB`: a job's verified patches stacked on the target, checked once,
bisected when the checks fail.

As a merge queue batches (GitHub's merge queue, bors, Zuul's gate): the
patches, in dependency order, are stacked on the target's tip one by one in
memory (engine/delegation/stack.py: a head that contains the stack replaces
it, one that diverges is merged into a commit). A patch that conflicts with
the stack is left out (`conflicted`), and so is every patch that contains a
patch left out (`held_back`: it was stacked on it). The checks of the
stacked patches' tasks (and of the job's patches the target
already holds; each command once) run once, on the stack's head.
When they fail, the stack is bisected: the checks of a prefix run on that
prefix's head, until the first patch whose prefix fails is found; that patch
`broke_stack` and is left out, the patches below it stand, and those above it
are stacked again on them and checked again. Nothing moves here: the caller
moves the target once (engine/delegation/merge_job.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gitswarm.engine.delegation.stack import stack_on
from gitswarm.store.gitrepo import GitRepo

LANDED = "landed"
CONFLICTED = "conflicted"
BROKE_STACK = "broke_stack"
HELD_BACK = "held_back"

#: The checks run on a stack: (its head, the commands, the car on top) → the commands that failed ([]: green).
CheckRun = Callable[[str, tuple[str, ...], "Car"], list[str]]


@dataclass(frozen=True)
class Car:
    """One verified patch in the train."""

    task: str
    patch: str  # its artifact id
    head: str
    checks: tuple[str, ...]


@dataclass
class Ride:
    """What the train did: the patches that land (in order), the head of their stack, the ones left out and why."""

    onto: str
    stack: str
    landed: list[Car] = field(default_factory=list)
    left_out: dict[str, tuple[str, str]] = field(default_factory=dict)  # patch id → (status, why)
    runs: int = 0  # how many times the checks ran
    merged_checks: tuple[str, ...] = ()  # the checks of the job's patches merged before: every stack passes them too
    _left_heads: dict[str, str] = field(default_factory=dict)  # head → task, of the patches left out

    def leave_out(self, car: Car, status: str, why: str) -> None:
        self.left_out[car.patch] = (status, why)
        self._left_heads[car.head] = car.task


def ride(repo: GitRepo, onto: str, cars: Sequence[Car], check: CheckRun, job: str, merged_checks: Sequence[str] = ()) -> Ride:
    """Run the train of `cars` (in dependency order) on `onto`; see the module's docstring. `merged_checks`: the
    checks of the job's patches `onto` already holds, which every stack must still pass."""
    train = Ride(onto=onto, stack=onto, merged_checks=tuple(merged_checks))
    pending = list(cars)
    while pending:
        steps = _stack(repo, train, pending, job)
        if not steps:
            break
        failed = _check(train, steps, len(steps) - 1, check)
        if not failed:
            _land(train, steps)
            break
        low, high, high_failed = 0, len(steps) - 1, failed
        while low < high:  # the first step whose stack fails: steps[high] fails, the stack below steps[low] passes
            middle = (low + high) // 2
            failed = _check(train, steps, middle, check)
            if failed:
                high, high_failed = middle, failed
            else:
                low = middle + 1
        culprit = steps[low][0]
        _land(train, steps[:low])
        train.leave_out(culprit, BROKE_STACK, "the checks failed once it was stacked: " + ", ".join(high_failed))
        pending = [car for car, _ in steps[low + 1 :]]
    return train


def _stack(repo: GitRepo, train: Ride, pending: list[Car], job: str) -> list[tuple[Car, str]]:
    """`pending` stacked on the train's stack, each with the stack's head once it is on; the ones that cannot be
    are left out."""
    steps: list[tuple[Car, str]] = []
    current = train.stack
    parts = [train.onto, *(car.head for car in train.landed)]  # what the stack is made of
    for car in pending:
        below = next((task for head, task in train._left_heads.items() if repo.is_ancestor(head, car.head)), None)
        if below is not None:
            train.leave_out(car, HELD_BACK, f"it is stacked on {below}'s patch, which did not land")
            continue
        message = (
            f"gitswarm: merge train of job {job}: stack {car.task}\n\n"
            f"Patch {car.patch} (head {car.head}) stacked for the merge train.\n\nGitswarm-Job: {job}\nGitswarm-Task: {car.task}\n"
        )
        step = stack_on(repo, current, car.head, message, parts)
        if step.commit is None:
            files = ", ".join(step.conflicts)
            train.leave_out(car, CONFLICTED, f"conflicts with the stack in {len(step.conflicts)} file(s): {files}")
            continue
        current = step.commit
        parts.append(car.head)
        steps.append((car, current))
    return steps


def _check(train: Ride, steps: list[tuple[Car, str]], top: int, check: CheckRun) -> list[str]:
    """The checks of every patch up to steps[top] (the landed ones included), run on that stack's head."""
    commands = dict.fromkeys(train.merged_checks)
    for car in [*train.landed, *(car for car, _ in steps[: top + 1])]:
        commands.update(dict.fromkeys(car.checks))
    if not commands:
        return []
    train.runs += 1
    return check(steps[top][1], tuple(commands), steps[top][0])


def _land(train: Ride, steps: list[tuple[Car, str]]) -> None:
    if steps:
        train.landed.extend(car for car, _ in steps)
        train.stack = steps[-1][1]
