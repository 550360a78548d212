"""Choosing a task's skills from 500 SKILL.md files: target under 20 ms per task.

    python tests/bench/bench_skills.py [--skills N] [--runs R]

A repository gets N skills under .gitswarm/skills/<name>/SKILL.md (front
matter, then a body of 1 to 4 KB). Measured in the same run, best of R, for
each of several tasks: reading the N files raw (the baseline: what any
selection must at least touch), the whole choice with no file parsed yet (a
new process: list, read, hash, parse, rank, bound), and the choice in a
process that has read them before (files unchanged: a stat each).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gitswarm.engine.config import SkillsConfig
from gitswarm.engine.knowledge import skills as engine_skills
from gitswarm.model.records import TaskSpec
from gitswarm.model.skills import HEADER
from tests.bench.benchlib import isolate, print_table, scratch_dir

WORDS = ("react form input browser login session cache parser retry lease index merge branch worktree verdict "
         "token budget packet schema socket timeout deploy staging migration release docker kubernetes").split()
TASKS = [
    "Check the signup form on staging: fill the inputs and submit",
    "Write a reversible schema migration for the session table",
    "Find why the parser times out on a large socket payload",
    "Release notes for the docker image of the staging deploy",
]
TARGET_MS = 20.0


def build(root: Path, n: int) -> None:
    rng = random.Random(16)
    for i in range(n):
        picked = rng.sample(WORDS, 4)
        name = f"{picked[0]}-{picked[1]}-{i}"
        body = "\n".join(f"- {' '.join(rng.choices(WORDS, k=12))}." for _ in range(rng.randint(15, 60)))
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: How to {picked[0]} the {picked[1]} with {picked[2]} and {picked[3]}\n"
            f"license: MIT\n---\n\n# {name}\n\n{body}\n")


def raw_read(root: Path) -> int:
    total = 0
    for entry in os.scandir(root):
        with open(os.path.join(entry.path, "SKILL.md"), "rb") as f:
            total += len(f.read())
    return total


def timed(runs: int, fn, before=lambda: None) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        before()
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skills", type=int, default=500)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    isolate()
    repo = Path(scratch_dir("bench-skills-"))
    build(repo / ".gitswarm" / "skills", args.skills)
    config = SkillsConfig(dirs=[".gitswarm/skills"])
    specs = [TaskSpec(id=f"t{n}", seq=n, adapter="hermes", prompt=text) for n, text in enumerate(TASKS)]

    def choose(spec: TaskSpec) -> tuple[str, tuple[str, ...]]:
        return engine_skills.skills_section(repo, spec, config)

    root = repo / ".gitswarm" / "skills"
    assert raw_read(root) > 0
    raw = timed(args.runs, lambda: raw_read(root))
    cold, warm, chosen = [], [], []
    for spec in specs:
        cold.append(timed(args.runs, lambda spec=spec: choose(spec), engine_skills._parsed.clear))
        choose(spec)
        warm.append(timed(args.runs, lambda spec=spec: choose(spec)))
        section, receipts = choose(spec)
        assert (section, receipts) == choose(spec) and len(receipts) <= 3
        assert len(section) <= len(HEADER) + config.max_tokens * engine_skills.CHARS_PER_TOKEN
        chosen.append(len(receipts))
    n = f"{args.skills:,}"

    def verdict(ms: float) -> str:
        return "ok" if ms < TARGET_MS else f"OVER {TARGET_MS:.0f} ms"

    print_table(
        ["what", "skills", "best ms (max over tasks)", ""],
        [
            ["read the SKILL.md files raw (baseline)", n, f"{raw:.1f}", ""],
            ["choose, new process (read+hash+parse+rank)", n, f"{max(cold):.1f}", verdict(max(cold))],
            ["choose, files seen before (stat each)", n, f"{max(warm):.1f}", verdict(max(warm))],
        ],
    )
    print(f"{len(specs)} tasks, {statistics.mean(chosen):.1f} skills chosen on average; "
          f"target: under {TARGET_MS:.0f} ms per task", file=sys.stderr)


if __name__ == "__main__":
    main()
