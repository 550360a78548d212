"""The prompt packet: the job prefix, the task, what its dependencies left (most useful first), how to answer."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from gitswarm.engine.knowledge.packet import (
    ENTRY_CHARS,
    IMPLEMENT_ANSWER,
    TAIL_CHARS,
    build_packet,
    dependency_notes,
    job_prefix,
)
from gitswarm.engine.swarm import Swarm
from gitswarm.model.analyze_answer import SCHEMA_TEXT
from gitswarm.model.artifacts import (
    BlobRef,
    Check,
    Decision,
    FileChange,
    Finding,
    Patch,
    Run,
)
from gitswarm.store.jobs import Snapshot
from tests.conftest import spec_text

GOAL = "Make the config parser robust"
B_PROMPT = "Review the parser for unchecked input.\nList every place it trusts the file."
C_PROMPT = "Fix the crash on an empty config file."

# The failed check's output: a long head the packet must drop, and a tail it must keep.
CHECK_STDOUT = b"collected 40 items\n" + b"." * 2000 + b"\nFAILED tests/test_parser.py::test_empty - KeyError\nEND-OF-STDOUT\n"
CHECK_STDERR = b"STDERR-HEAD warning: deprecated option\n"


@dataclass
class Job:
    swarm: Swarm
    job: str
    snapshot: Snapshot

    def packet(self, task: str, **kw: object) -> str:
        spec = self.snapshot.task(task).spec
        return build_packet(self.snapshot, spec, self.swarm.repo.read_blob, **kw)

    def notes(self, task: str) -> list[str]:
        return dependency_notes(self.snapshot, self.snapshot.task(task).spec, self.swarm.repo.read_blob)


def blob(swarm: Swarm, data: bytes) -> BlobRef:
    return BlobRef(oid=swarm.repo.write_blob(data), size=len(data))


@pytest.fixture
def job(swarm: Swarm) -> Job:
    job_id = swarm.submit_text(spec_text(
        'id = "a"\ncommand = "true"',
        f'id = "b"\ncommand = "true"\ndepends_on = ["a"]\nprompt = """{B_PROMPT}"""',
        f'id = "c"\nmode = "implement"\ncommand = "true"\ndepends_on = ["a"]\nprompt = "{C_PROMPT}"\n'
        'checks = ["pytest -q", "ruff check ."]',
        goal=GOAL,
    ))
    now = time.time()
    lease = swarm.ledger.claim("w", 60, now, job_id=job_id)
    assert lease is not None and lease.task == "a"  # b and c wait for a

    def base(**kw: object) -> dict:
        return dict(job=job_id, task="a", attempt=lease.attempt, created=now, **kw)

    artifacts = [
        Finding(**base(title="Low: comments are parsed twice", body="Minor.", confidence=0.35)),
        Run(**base(adapter="shell", exit_code=1, duration=2.0)),
        Finding(**base(title="High: empty file raises KeyError", body="parse() indexes lines[0] unguarded.",
                       confidence=0.9, severity="high")),
        Patch(**base(base="a" * 40, head="b" * 40, diff=blob(swarm, b"diff --git a/x b/x\n"), sha256="c" * 64,
                     files=(FileChange(path="parser.py", added=3, deleted=1),))),
        Decision(**base(title="Keep the INI format", rationale="users depend on it")),
        Check(**base(command="true", exit_code=0, duration=0.1)),  # passed: nothing to tell
        Check(**base(command=["pytest", "-q"], exit_code=1, duration=3.5,
                     stdout=blob(swarm, CHECK_STDOUT), stderr=blob(swarm, CHECK_STDERR))),
    ]
    task = swarm.ledger.finish(lease, False, now + 1, error="check failed", artifacts=artifacts, retryable=False)
    assert set(task.artifacts) and len(task.artifacts) == len(artifacts)
    return Job(swarm, job_id, swarm.refs.snapshot(job_id))


def test_both_packets_start_with_the_byte_identical_job_prefix(job: Job) -> None:
    prefix = job_prefix(GOAL)
    assert GOAL in prefix
    b, c = job.packet("b"), job.packet("c")
    assert b.startswith(prefix) and c.startswith(prefix)
    assert b.encode()[: len(prefix.encode())] == c.encode()[: len(prefix.encode())]
    assert job_prefix(f"  {GOAL}\n\n") == prefix  # the goal's surrounding whitespace does not matter


def test_the_packet_has_the_tasks_own_prompt_after_its_heading(job: Job) -> None:
    b = job.packet("b")
    heading = "# Your task: b\n"
    assert heading in b
    assert b.index(heading) > len(job_prefix(GOAL)) - 1
    assert b[b.index(heading) + len(heading):].lstrip("\n").startswith(B_PROMPT)
    assert C_PROMPT not in b and "# Your task: c" not in b


def test_dependency_notes_come_most_useful_first(job: Job) -> None:
    b = job.packet("b")
    section = "# What the tasks you depend on left"
    assert section in b
    order = [
        "- [a] check failed: `pytest -q` exit 1",
        "- [a] decision: Keep the INI format (users depend on it)",
        "- [a] finding (confidence 0.90): High: empty file raises KeyError",
        "- [a] finding (confidence 0.35): Low: comments are parsed twice",
        "- [a] patch aaaaaaaaaa..bbbbbbbbbb: parser.py (+3/-1)",
    ]
    positions = [b.index(line) for line in order]
    assert positions == sorted(positions)
    assert b.index(section) < positions[0]
    assert "parse() indexes lines[0] unguarded." in b  # a finding's body follows its title
    assert "`true`" not in b  # the passing check says nothing
    assert len(job.notes("b")) == 5  # nor the run: five notes of seven artifacts


def test_the_failed_check_shows_the_tail_of_its_output(job: Job) -> None:
    note = job.notes("b")[0]
    assert note.startswith("- [a] check failed: `pytest -q` exit 1\n```\n")
    assert note.endswith("\n```")
    assert "END-OF-STDOUT" in note and "FAILED tests/test_parser.py::test_empty - KeyError" in note
    assert "collected 40 items" not in note  # the head of a long output is cut
    assert "STDERR-HEAD" not in note  # stderr comes first, so the tail is stdout's end
    shown = note.split("```\n", 1)[1].rsplit("\n```", 1)[0]
    assert len(shown) <= TAIL_CHARS
    assert len(note) <= ENTRY_CHARS


def test_analyze_answer_instructions_carry_the_schema(job: Job) -> None:
    b = job.packet("b")
    assert "# How to answer" in b
    assert b.rstrip().endswith(f"Its JSON schema: {SCHEMA_TEXT}")
    assert b.index("# How to answer") > b.index("# What the tasks you depend on left")
    assert "# How to work" not in b


def test_an_implement_task_gets_how_to_work_instead(job: Job) -> None:
    c = job.packet("c")
    assert "# Your task: c" in c and C_PROMPT in c
    assert c.endswith(IMPLEMENT_ANSWER)
    assert "# How to work" in c
    assert "# How to answer" not in c and SCHEMA_TEXT not in c
    assert "These checks must pass afterwards: `pytest -q`; `ruff check .`" in c
    assert c.index("These checks") < c.index("# What the tasks you depend on left") < c.index("# How to work")
    # c sees the same notes as b, in the same order.
    assert job.notes("c") == job.notes("b")


def test_a_task_without_dependencies_has_no_notes_section(job: Job) -> None:
    a = job.packet("a")
    assert "# Your task: a" in a
    assert "# What the tasks you depend on left" not in a
    assert "left out" not in a


def test_a_tiny_budget_leaves_every_note_out_and_says_how_many(job: Job) -> None:
    b = job.packet("b", budget_tokens=1)
    assert "(5 more left out to keep this short.)" in b
    assert "check failed" not in b and "decision:" not in b and "finding (" not in b
    assert b.startswith(job_prefix(GOAL)) and f"Its JSON schema: {SCHEMA_TEXT}" in b


def test_a_budget_for_the_first_notes_keeps_them_and_counts_the_rest(job: Job) -> None:
    notes = job.notes("b")
    chars = len(notes[0]) + len(notes[1])
    b = job.packet("b", budget_tokens=-(-chars // 4))  # room for exactly the first two (chars/token = 4)
    assert notes[0] in b and notes[1] in b
    assert notes[2] not in b and notes[3] not in b
    assert "(3 more left out to keep this short.)" in b


def test_the_default_budget_keeps_everything(job: Job) -> None:
    b = job.packet("b")
    assert "left out" not in b
    assert all(note in b for note in job.notes("b"))


def test_a_long_note_is_cut(swarm: Swarm) -> None:
    job_id = swarm.submit_text(spec_text('id = "a"\ncommand = "true"',
                                         'id = "b"\ncommand = "true"\ndepends_on = ["a"]\nprompt = "p"'))
    now = time.time()
    lease = swarm.ledger.claim("w", 60, now, job_id=job_id)
    long = Finding(job=job_id, task="a", created=now, title="T", body="x" * 5000, confidence=0.5, low_confidence=True)
    swarm.ledger.finish(lease, True, now + 1, artifacts=[long])
    snapshot = swarm.refs.snapshot(job_id)
    [note] = dependency_notes(snapshot, snapshot.task("b").spec, swarm.repo.read_blob)
    assert note.startswith("- [a] finding (confidence 0.50, unstructured): T\n  xxx")
    assert len(note) == ENTRY_CHARS and note.endswith("...")
