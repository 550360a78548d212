"""Job budgets stop a job at the right point: nothing more is leased, and the summary says why."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import cli

# An agent that reports a fixed cost and token count in JSON, as CLIs with --output-format json do.
COSTLY = f"""executable = {json.dumps(sys.executable)}
args = ["-c", "import json; print(json.dumps(dict(result='ok', cost=0.4, inp=300, out=50)))", "{{prompt}}"]
[output]
format = "json"
text = "result"
cost_usd = "cost"
input_tokens = "inp"
output_tokens = "out"
"""


def register(repo: Path) -> None:
    adapters = repo / ".gitswarm" / "adapters"
    adapters.mkdir(parents=True, exist_ok=True)
    (adapters / "costly.toml").write_text(COSTLY)


def run(repo: Path, budget: str, tasks: str) -> tuple[int, dict]:
    spec = repo / "job.toml"
    spec.write_text(f'goal = "spend"\n[budget]\n{budget}\n{tasks}')
    result = cli(repo, "--json", "run", str(spec), "-j", "1")
    assert result.out, result.err
    return result.code, result.json()


def agent_tasks(n: int) -> str:
    return "".join(f'[[tasks]]\nid = "t{i}"\nadapter = "costly"\nprompt = "answer: ok"\n' for i in range(n))


def shell_tasks(n: int, command: str = "true") -> str:
    return "".join(f'[[tasks]]\nid = "t{i}"\ncommand = "{command}"\n' for i in range(n))


def states(view: dict) -> list[str]:
    """Task states, succeeded first (workers pick among equal-priority tasks at random)."""
    return sorted((t["state"] for t in view["tasks"]), key=lambda s: s != "succeeded")


def test_max_usd_stops_leasing_once_spent(repo: Path) -> None:
    register(repo)
    code, view = run(repo, "max_usd = 1.0", agent_tasks(5))
    assert code == 1
    # $0.40 each: after three, $1.20 >= $1.00, so the fourth is never leased
    assert states(view) == ["succeeded"] * 3 + ["cancelled"] * 2
    summary = view["summary"]
    assert summary["stopped_by"].startswith("max_usd: spent $1.2000 of $1")
    assert summary["cost"]["usd"] == 1.2 and summary["cost"]["runs"] == 3
    assert summary["cost"]["input_tokens"] == 900 and summary["cost"]["output_tokens"] == 150
    assert "Stopped by its budget: max_usd" in summary["text"]
    cancelled = [t for t in view["tasks"] if t["state"] == "cancelled"]
    assert all(t["error"].startswith("budget: max_usd") for t in cancelled)


def test_max_tokens_stops_at_the_token_count(repo: Path) -> None:
    register(repo)
    code, view = run(repo, "max_tokens = 700", agent_tasks(4))
    assert code == 1
    assert states(view) == ["succeeded"] * 2 + ["cancelled"] * 2  # 350 tokens a run
    assert view["summary"]["stopped_by"] == "max_tokens: used 700 of 700 tokens"


def test_max_attempts_counts_every_lease_of_the_job(repo: Path) -> None:
    code, view = run(repo, "max_attempts = 2", shell_tasks(4))
    assert code == 1
    assert states(view) == ["succeeded", "succeeded", "cancelled", "cancelled"]
    assert view["summary"]["stopped_by"] == "max_attempts: made 2 of 2 attempts"


def test_max_wall_stops_after_the_time_since_submission(repo: Path) -> None:
    code, view = run(repo, 'max_wall = "1s"', shell_tasks(6, "sleep 0.4"))
    assert code == 1
    done = states(view).count("succeeded")
    assert 2 <= done <= 4 and states(view)[done:] == ["cancelled"] * (6 - done)
    assert view["summary"]["stopped_by"].startswith("max_wall:")


def test_a_job_within_its_budget_is_not_stopped(repo: Path) -> None:
    register(repo)
    code, view = run(repo, "max_usd = 5\nmax_attempts = 10", agent_tasks(3))
    assert code == 0, view
    assert view["summary"]["stopped_by"] is None and view["summary"]["cost"]["usd"] == 1.2


def test_budget_values_are_validated(repo: Path) -> None:
    spec = repo / "job.toml"
    for bad in ("max_usd = -1", "max_tokens = 0", 'max_wall = "soon"', "max_dollars = 3"):
        spec.write_text(f'goal = "g"\n[budget]\n{bad}\n' + shell_tasks(1))
        result = cli(repo, "submit", str(spec))
        assert result.code == 2 and result.err.count("\n") == 1 and "budget" in result.err, (bad, result.err)
