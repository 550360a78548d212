"""Skills: opt-in, chosen by shared words (ties by name), at most `max_skills` bodies within
`max_tokens`, after the job prefix, recorded on the run; only SKILL.md files, only in allowed folders."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from gitswarm.engine.config import SkillsConfig, skill_dirs
from gitswarm.engine.knowledge.packet import build_packet, job_prefix
from gitswarm.engine.knowledge.skills import CHARS_PER_TOKEN, choose_skills, skills_section
from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Run
from gitswarm.model.errors import BadInput
from gitswarm.model.records import TaskSpec
from gitswarm.model.skills import parse_skill, select
from tests.conftest import cli, commit_file, dumps_dir, spec_text


def skill_text(name: str, description: str, body: str = "") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n{body or f'How to do {name}.'}\n"


def write_skill(root: Path, name: str, description: str, body: str = "") -> Path:
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(skill_text(name, description, body))
    return path


def task(prompt: str, task_id: str = "t") -> TaskSpec:
    return TaskSpec(id=task_id, seq=0, adapter="hermes", prompt=prompt)


ON = SkillsConfig(dirs=[".gitswarm/skills"])


@pytest.fixture
def skills(repo: Path) -> Path:
    root = repo / ".gitswarm" / "skills"
    write_skill(root, "react-forms", "Fill React controlled form inputs and submit forms")
    write_skill(root, "sql-migrations", "Write reversible SQL schema migrations")
    write_skill(root, "release-notes", "Write release notes from the changelog")
    write_skill(root, "form-validation", "Check form validation messages")
    return root


# -- parsing -----------------------------------------------------------------------------------


def test_front_matter_gives_name_and_description_and_nothing_else() -> None:
    text = ('---\nname: "pdf-tools"\nlicense: MIT\nallowed-tools:\n  - Bash\ndescription: >\n  Extract text\n'
            "  from PDF files\nmetadata: {a: 1}\n---\n# PDF\nUse pdftotext.\n")
    skill = parse_skill(text, "0" * 64)
    assert skill is not None
    assert (skill.name, skill.description, skill.body) == ("pdf-tools", "Extract text from PDF files", "# PDF\nUse pdftotext.")
    assert {"pdf", "tools", "extract", "text"} <= skill.words and "bash" not in skill.words and "mit" not in skill.words
    assert skill.receipt == "pdf-tools@" + "0" * 64


@pytest.mark.parametrize("text", [
    "no front matter\n",
    "---\nname: x\n---\nbody\n",  # no description
    "---\ndescription: d\n---\nbody\n",  # no name
    "---\nname: x\ndescription: d\nbody without an end\n",
    "---\nname: x\ndescription: d\n---\n\n",  # no body
    "---\nname: " + "n" * 65 + "\ndescription: d\n---\nbody\n",
])
def test_a_file_without_a_usable_front_matter_is_no_skill(text: str) -> None:
    assert parse_skill(text, "0" * 64) is None


# -- selection ---------------------------------------------------------------------------------


def test_selection_ranks_by_shared_words_then_name(repo: Path, skills: Path) -> None:
    chosen = choose_skills(repo, task("Check that the signup form submits: fill the inputs, check the validation"), ON)
    # react-forms shares fill, form(s)... ; form-validation shares form, validation, check; sql and release share nothing
    assert [s.name for s in chosen] == ["form-validation", "react-forms"]
    assert choose_skills(repo, task("Tune the database indexes"), ON) == []  # shares nothing: none
    # equal overlap: by name
    assert [s.name for s in choose_skills(repo, task("write"), ON)] == ["release-notes", "sql-migrations"]


def test_selection_is_deterministic_whatever_the_order_on_disk(repo: Path, skills: Path) -> None:
    spec = task("write the form release notes and the sql migrations for the form")
    first = choose_skills(repo, spec, ON)
    shuffled = list(reversed([parse_skill(p.read_text(), "0" * 64) for p in sorted(skills.glob("*/SKILL.md"))]))
    again = select([s for s in shuffled if s is not None], "t\nwrite the form release notes and the sql migrations for the form", 3, 4800)
    assert [s.name for s in first] == [s.name for s in again]
    assert skills_section(repo, spec, ON) == skills_section(repo, spec, ON)


def test_selection_is_bounded_by_count_and_tokens(repo: Path) -> None:
    root = repo / ".gitswarm" / "skills"
    for n in range(8):
        write_skill(root, f"deploy-{n}", "Deploy the service to staging", "step " * 200)  # ~1,000 chars each
    spec = task("deploy the service to staging")
    assert len(choose_skills(repo, spec, ON)) == 3  # max_skills 3 by default
    assert len(choose_skills(repo, spec, SkillsConfig(dirs=ON.dirs, max_skills=5))) == 4  # 1,200 tokens hold four
    small = SkillsConfig(dirs=ON.dirs, max_skills=10, max_tokens=600)
    chosen = choose_skills(repo, spec, small)
    assert len(chosen) == 2 and sum(len(s.entry()) for s in chosen) <= 600 * CHARS_PER_TOKEN
    section, receipts = skills_section(repo, spec, small)
    assert len(receipts) == 2 and section.count("## Skill: ") == 2
    # a skill too big for the budget is passed over, the next that fits is taken
    write_skill(root, "deploy-big", "Deploy the service to staging", "word " * 5000)
    assert "deploy-big" not in [s.name for s in choose_skills(repo, spec, SkillsConfig(dirs=ON.dirs, max_skills=10))]


def test_off_unless_configured(repo: Path, skills: Path) -> None:
    spec = task("fill the react form inputs")
    assert skills_section(repo, spec, SkillsConfig()) == ("", ())
    assert skills_section(repo, spec, SkillsConfig(dirs=ON.dirs, max_skills=0)) == ("", ())
    assert skills_section(repo, spec, SkillsConfig(dirs=ON.dirs, max_tokens=0)) == ("", ())
    assert skills_section(repo, spec, SkillsConfig(dirs=["no-such-folder"])) == ("", ())


def test_only_skill_md_files_are_read(repo: Path) -> None:
    root = repo / ".gitswarm" / "skills"
    for name in ("persona.md", "RULES.md", "CLAUDE.md", "AGENTS.md", "memory.md", "skill.md"):
        (root / "agent").mkdir(parents=True, exist_ok=True)
        (root / "agent" / name).write_text(skill_text("agent-" + name.lower(), "fill the react form inputs"))
    (root / "persona.md").write_text(skill_text("persona", "fill the react form inputs"))
    (root / "deep" / "nested").mkdir(parents=True)
    (root / "deep" / "nested" / "SKILL.md").write_text(skill_text("too-deep", "fill the react form inputs"))
    assert choose_skills(repo, task("fill the react form inputs"), ON) == []
    write_skill(root, "react-forms", "fill the react form inputs")
    assert [s.name for s in choose_skills(repo, task("fill the react form inputs"), ON)] == ["react-forms"]


def test_folders_outside_the_repository_and_the_users_folder_are_refused(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "elsewhere"
    write_skill(outside, "react-forms", "fill the react form inputs")
    with pytest.raises(BadInput, match=r"^\[skills\] dirs\[0\]: .* is outside the repository"):
        skill_dirs(repo, SkillsConfig(dirs=[str(outside)]))
    with pytest.raises(BadInput, match="outside the repository"):
        skill_dirs(repo, SkillsConfig(dirs=["../elsewhere"]))
    (repo / "link").symlink_to(outside)
    with pytest.raises(BadInput, match="outside the repository"):
        skill_dirs(repo, SkillsConfig(dirs=["link"]))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    user = tmp_path / "config" / "gitswarm" / "skills"
    write_skill(user, "react-forms", "fill the react form inputs")
    assert [s.name for s in choose_skills(repo, task("fill the react form"), SkillsConfig(dirs=[str(user)]))] == ["react-forms"]
    # a SKILL.md linked in from outside is skipped
    inside = repo / ".gitswarm" / "skills" / "linked"
    inside.mkdir(parents=True)
    (inside / "SKILL.md").symlink_to(outside / "react-forms" / "SKILL.md")
    assert choose_skills(repo, task("fill the react form"), ON) == []


def test_a_bad_skills_folder_is_refused_at_submit(repo: Path, tmp_path: Path) -> None:
    (repo / ".gitswarm.toml").write_text(f'[skills]\ndirs = ["{tmp_path}"]\n')
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text('id = "a"\ncommand = "true"'))
    refused = cli(repo, "submit", str(spec))
    assert refused.code == 2 and refused.err.count("\n") == 1 and "[skills] dirs[0]" in refused.err


# -- the packet and the run ---------------------------------------------------------------------


def test_skills_go_after_the_job_prefix_and_the_run_names_them(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    path = write_skill(repo / ".gitswarm" / "skills", "react-forms", "Fill React form inputs",
                       "Use the native value setter, then fire input and change events.")
    commit_file(repo, ".gitswarm.toml", '[skills]\ndirs = [".gitswarm/skills"]\n')
    dump = dumps_dir(repo, tmp_path) / "dump.json"
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(f'id = "qa"\nadapter = "hermes"\nprompt = """Fill the react form inputs\ndump-env: {dump}\nfindings"""',
                              'id = "other"\nadapter = "hermes"\nprompt = "findings"', goal="g"))
    data = cli(repo, "--json", "run", str(spec), "-j", "1").json()
    assert data["status"] == "succeeded", data
    argv = json.loads(dump.read_text())["argv"]
    prompt = argv[argv.index("-z") + 1]
    assert prompt.startswith(job_prefix("g") + "\n# Skills for this task\n")
    assert prompt.index("## Skill: react-forms\n\nUse the native value setter") < prompt.index("# Your task: qa")
    swarm = Swarm(repo)
    try:
        snapshot = swarm.refs.snapshot(data["id"], swarm.index.job_tip(data["id"]))
        runs = {t: [a for a in map(snapshot.artifact, snapshot.task(t).artifacts) if isinstance(a, Run)] for t in ("qa", "other")}
    finally:
        swarm.close()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert [r.skills for r in runs["qa"]] == [(f"react-forms@{digest}",)]
    assert [r.skills for r in runs["other"]] == [()]


def test_the_packet_without_skills_is_as_before(swarm: Swarm) -> None:
    job = swarm.submit_text(spec_text('id = "a"\ncommand = "true"\nprompt = "p"'))
    snapshot = swarm.refs.snapshot(job, swarm.index.job_tip(job))
    spec = snapshot.task("a").spec
    plain = build_packet(snapshot, spec, swarm.repo.read_blob)
    assert build_packet(snapshot, spec, swarm.repo.read_blob, skills="") == plain
    assert build_packet(snapshot, spec, swarm.repo.read_blob, skills="\n# S\n").startswith(job_prefix("test goal") + "\n# S\n")
