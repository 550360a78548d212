"""`gitswarm audit` and `gitswarm review` on real repositories through the real CLI.

audit REV: the configured checks (.gitswarm.toml, [tool.gitswarm] in pyproject.toml, or
--check) run on a clean checkout of exactly REV; the verdict becomes a line of REV's
`refs/notes/swarm` note; exit 0 iff accepted. The user's tree and HEAD are never touched.

review PATCH|REV: a person's verdict (git's author identity) as a note line on a patch's
head or a commit. It shows up under "reviews" in `status`/`show` of the patch's job, and
never makes a patch that failed its checks mergeable.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Result, cli, commit_file, git, register_scripted, rev, swarm_note

CHECK = "grep -qx hello README.md"
AUTHOR = "Test Author <author@example.com>"  # GIT_AUTHOR_NAME/EMAIL of the isolated test env


# -- helpers -------------------------------------------------------------------------------


def notes_ref(repo: Path) -> str:
    return git(repo, "for-each-ref", "refs/notes")


def tree_state(repo: Path) -> dict:
    """Everything an audit must leave alone: HEAD, the index, the working tree (ignored files included)."""
    return {
        "HEAD": git(repo, "symbolic-ref", "HEAD"),
        "head": rev(repo),
        "heads": git(repo, "for-each-ref", "refs/heads"),
        "status": git(repo, "status", "--porcelain", "--untracked-files=all", "--ignored"),
        "index": git(repo, "ls-files", "--stage"),
        # the clean checkouts kept for the next check (store/checkouts.py) are gitswarm's, not the user's
        "worktrees": "\n\n".join(b for b in git(repo, "worktree", "list", "--porcelain").split("\n\n") if "/checkouts/" not in b),
        "files": {
            str(p.relative_to(repo)): p.read_bytes()
            for p in sorted(repo.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(repo).parts
        },
    }


def one_error_line(result: Result) -> str:
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    return lines[0]


def configure(repo: Path, source: str, checks: list[str]) -> list[str]:
    """Put `checks` where `source` says; the extra CLI arguments that go with it."""
    listed = json.dumps(checks)
    if source == "gitswarm.toml":
        commit_file(repo, ".gitswarm.toml", f"[audit]\nchecks = {listed}\ntimeout = \"2m\"\n", "configure checks")
        return []
    if source == "pyproject":
        commit_file(
            repo,
            "pyproject.toml",
            f'[project]\nname = "demo"\nversion = "0"\n\n[tool.gitswarm.audit]\nchecks = {listed}\n',
            "configure checks",
        )
        return []
    assert source == "cli"
    args = []
    for check in checks:
        args += ["--check", check]
    return args


def audit(repo: Path, *args: str) -> Result:
    return cli(repo, "--json", "audit", *args)


# -- audit ---------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["gitswarm.toml", "pyproject", "cli"])
def test_audit_notes_the_verdict_on_exactly_that_commit(repo: Path, source: str) -> None:
    extra = configure(repo, source, [CHECK, "test -s README.md"])
    good = rev(repo)
    bad = commit_file(repo, "README.md", "broken\n", "break the readme")
    assert swarm_note(repo, good) == [] and swarm_note(repo, bad) == []
    before = tree_state(repo)

    # the older commit, named by its SHA: its checks pass
    passed = audit(repo, good, *extra)
    assert passed.code == 0, passed.err
    out = passed.json()
    assert out["commit"] == good and out["accepted"] is True and out["reviewer"] == "checks"
    assert [(c["command"], c["passed"]) for c in out["checks"]] == [(CHECK, True), ("test -s README.md", True)]
    (line,) = swarm_note(repo, good)
    assert line["kind"] == "verdict" and line["head"] == good
    assert line["accepted"] is True and line["reviewer"] == "checks" and line["producer"] == "gitswarm"
    assert (line["status"], line["integrity"], line["contract"]) == ("complete", "clean", "aligned")
    assert line["evidence"][CHECK] == "passed"
    assert swarm_note(repo, bad) == [], "the verdict on one commit was noted on another"
    assert tree_state(repo) == before

    # HEAD (the default REV): a check fails
    failed = audit(repo, *extra)
    assert failed.code == 1, failed.err
    out = failed.json()
    assert out["commit"] == bad and out["accepted"] is False
    assert [(c["command"], c["passed"]) for c in out["checks"]] == [(CHECK, False), ("test -s README.md", True)]
    (line,) = swarm_note(repo, bad)
    assert line["head"] == bad and line["accepted"] is False and line["reviewer"] == "checks"
    assert line["status"] == "incomplete"
    assert line["evidence"][CHECK] != "passed"
    assert [n["accepted"] for n in swarm_note(repo, good)] == [True], "auditing HEAD changed the older commit's note"
    assert tree_state(repo) == before


def test_audit_human_output_and_exit_codes_without_json(repo: Path) -> None:
    head = rev(repo)
    ok = cli(repo, "audit", "--check", CHECK)
    assert ok.code == 0, ok.err
    assert ok.out.strip().startswith(head[:12]) and "accepted" in ok.out
    no = cli(repo, "audit", "--check", "false")
    assert no.code == 1
    assert "REJECTED" in no.out
    assert [n["accepted"] for n in swarm_note(repo, head)] == [True, False]


def test_the_check_option_replaces_the_configured_checks(repo: Path) -> None:
    configure(repo, "gitswarm.toml", ["false"])
    head = rev(repo)
    assert audit(repo).code == 1
    result = audit(repo, "--check", CHECK)
    assert result.code == 0, result.err
    assert [c["command"] for c in result.json()["checks"]] == [CHECK]
    assert [n["accepted"] for n in swarm_note(repo, head)] == [False, True]


def test_audit_checks_run_on_a_clean_checkout_of_the_commit(repo: Path, tmp_path: Path) -> None:
    commit_file(repo, ".gitignore", "*.log\n", "ignore logs")
    head = rev(repo)
    # what is in the user's tree but not in the commit
    (repo / "secret.log").write_text("ignored\n")
    (repo / "scratch.txt").write_text("untracked\n")
    (repo / "README.md").write_text("hello\nuncommitted line\n")
    (repo / "staged.txt").write_text("staged, not committed\n")
    git(repo, "add", "staged.txt")
    ran_in = tmp_path / "ran-in.txt"
    checks = [
        "test ! -e secret.log",
        "test ! -e scratch.txt",
        "test ! -e staged.txt",
        CHECK,  # README.md is the committed one
        "test -e .gitignore",  # and the committed files are there
        f"pwd > {ran_in}",
    ]
    before = tree_state(repo)
    args = [a for c in checks for a in ("--check", c)]
    result = audit(repo, *args)
    assert result.code == 0, result.json()["checks"]
    assert all(c["passed"] for c in result.json()["checks"])
    checkout = Path(ran_in.read_text().strip())
    assert checkout != repo.resolve()
    inside_tree = repo.resolve() in checkout.parents and ".git" not in checkout.relative_to(repo.resolve()).parts
    assert not inside_tree, f"the checks ran inside the user's working tree: {checkout}"
    # kept for the next check, detached and as clean as a fresh checkout
    assert checkout.parent.name == "checkouts" and git(checkout, "status", "--porcelain", "--ignored") == ""
    assert f"worktree {checkout}\nHEAD {head}\ndetached" in git(repo, "worktree", "list", "--porcelain")
    (line,) = swarm_note(repo, head)
    assert line["accepted"] is True
    assert tree_state(repo) == before
    assert (repo / "README.md").read_text() == "hello\nuncommitted line\n"


def test_a_check_that_needs_an_uncommitted_file_fails(repo: Path) -> None:
    """The converse: what only the working tree has, the checks do not get."""
    (repo / "NEW.md").write_text("not committed\n")
    result = audit(repo, "--check", "test -e NEW.md")
    assert result.code == 1
    assert swarm_note(repo, rev(repo))[0]["accepted"] is False
    assert (repo / "NEW.md").exists()


@pytest.mark.parametrize("bad", ["no-such-branch", "HEAD~5", "0123456789abcdef0123456789abcdef01234567"])
def test_audit_of_a_bad_rev_is_a_usage_error(repo: Path, bad: str) -> None:
    before, refs = tree_state(repo), notes_ref(repo)
    result = cli(repo, "audit", bad, "--check", "true")
    assert result.code == 2
    line = one_error_line(result)
    assert bad in line
    assert result.out == ""
    assert notes_ref(repo) == refs and tree_state(repo) == before


@pytest.mark.parametrize(
    "where, text, named",
    [
        (".gitswarm.toml", '[audit]\nchekcs = ["true"]\n', "chekcs"),
        (".gitswarm.toml", '[audit]\nchecks = ["true"]\n[hoks]\naudit_branches = []\n', "hoks"),
        (".gitswarm.toml", '[hooks]\naudit_branches = ["main"]\nverify_branches = ["*"]\n', "verify_branches"),
        (".gitswarm.toml", "[audit\nchecks = true\n", ".gitswarm.toml"),
        ("pyproject.toml", '[tool.gitswarm.audit]\nchecks = ["true"]\nauditr = "x"\n', "auditr"),
    ],
    ids=["unknown-audit-key", "unknown-section", "unknown-hooks-key", "not-toml", "pyproject-unknown-key"],
)
def test_a_malformed_configuration_is_a_usage_error(repo: Path, where: str, text: str, named: str) -> None:
    commit_file(repo, where, text, "a bad config")
    before, refs = tree_state(repo), notes_ref(repo)
    for args in ([], ["--check", "true"]):
        result = cli(repo, "audit", *args)
        assert result.code == 2, (args, result.out, result.err)
        line = one_error_line(result)
        assert named in line and where in line, line
        assert notes_ref(repo) == refs and tree_state(repo) == before


def test_no_checks_and_no_auditor_is_a_usage_error_and_records_nothing(repo: Path) -> None:
    """Nothing to check: an acceptance of nothing would let the pre-push gate pass anything."""
    before = notes_ref(repo)
    result = audit(repo)
    assert result.code == 2
    line = one_error_line(result)
    assert "nothing to check" in line and "[audit] checks" in line and "--check" in line
    assert notes_ref(repo) == before and swarm_note(repo, rev(repo)) == []


# -- review of a commit --------------------------------------------------------------------


def test_review_of_a_commit_adds_the_persons_verdict(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = rev(repo)
    head = commit_file(repo, "OTHER.md", "more\n")
    before = tree_state(repo)

    accepted = cli(repo, "--json", "review", first, "--accept", "--note", "lgtm")
    assert accepted.code == 0, accepted.err
    assert accepted.json() == {"commit": first, "reviewer": AUTHOR, "accepted": True, "note": "lgtm", "signed": False}
    (line,) = swarm_note(repo, first)
    assert line["kind"] == "verdict" and line["head"] == first
    assert line["accepted"] is True and line["reviewer"] == AUTHOR and line["producer"] == "person"
    assert line["evidence"] == {"note": "lgtm"}
    assert swarm_note(repo, head) == []

    monkeypatch.setenv("GIT_AUTHOR_NAME", "Second Reader")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "second@example.com")
    rejected = cli(repo, "--json", "review", first[:10], "--reject")
    assert rejected.code == 0, rejected.err
    assert rejected.json()["reviewer"] == "Second Reader <second@example.com>"
    lines = swarm_note(repo, first)
    assert [(n["reviewer"], n["accepted"]) for n in lines] == [(AUTHOR, True), ("Second Reader <second@example.com>", False)]
    assert lines[1]["evidence"] == {} and lines[1]["contract"] == "needs_revision"
    assert tree_state(repo) == before

    human = cli(repo, "review", "HEAD", "--accept")
    assert human.code == 0 and human.out.strip() == f"{head[:12]}: accepted by Second Reader <second@example.com>"
    assert [n["reviewer"] for n in swarm_note(repo, head)] == ["Second Reader <second@example.com>"]


@pytest.mark.parametrize("flags", [[], ["--accept", "--reject"]], ids=["neither", "both"])
def test_review_needs_exactly_one_of_accept_or_reject(repo: Path, flags: list[str]) -> None:
    refs = notes_ref(repo)
    result = cli(repo, "review", "HEAD", *flags, "--note", "hm")
    assert result.code == 2
    assert "--accept" in one_error_line(result)
    assert notes_ref(repo) == refs


def test_review_of_something_that_is_neither_a_patch_nor_a_commit(repo: Path) -> None:
    refs = notes_ref(repo)
    result = cli(repo, "review", "no-such-thing", "--accept")
    assert result.code == 2
    one_error_line(result)
    assert notes_ref(repo) == refs


# -- review of a delegated patch -----------------------------------------------------------


@pytest.fixture
def project(repo: Path) -> Path:
    return register_scripted(repo)


def delegate(repo: Path, instruction: str, *checks: str) -> tuple[Result, dict]:
    args = ["--json", "delegate", instruction, "--adapter", "scripted"]
    for check in checks:
        args += ["--check", check]
    result = cli(repo, *args)
    assert result.out, result.err
    return result, result.json()


def patches(repo: Path, job: str) -> list[tuple[str, dict]]:
    """The job's patches (id, record), in the order they were made, through the CLI."""
    listed = cli(repo, "--json", "artifacts", job)
    assert listed.code == 0, listed.err
    out = []
    for artifact in listed.json()["artifacts"]:
        if artifact["kind"] == "patch":
            shown = cli(repo, "--json", "artifact", artifact["id"])
            assert shown.code == 0, shown.err
            out.append((artifact["id"], shown.json()["record"]))
    return out


def test_review_of_a_patch_notes_its_head_and_shows_in_status_and_show(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result, data = delegate(project, "edit README.md: replace hello with world", "grep -qx world README.md")
    assert result.code == 0, data
    job = data["id"]
    ((patch_id, patch),) = patches(project, job)
    head = patch["head"]
    assert [(n["reviewer"], n["accepted"]) for n in swarm_note(project, head)] == [("checks", True)]

    reviewed = cli(project, "--json", "review", patch_id[:12], "--accept", "--note", "lgtm")
    assert reviewed.code == 0, reviewed.err
    assert reviewed.json() == {"commit": head, "reviewer": AUTHOR, "accepted": True, "note": "lgtm", "signed": False}
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Skeptic")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "skeptic@example.com")
    assert cli(project, "--json", "review", patch_id, "--reject", "--note", "needs docs").code == 0

    lines = swarm_note(project, head)
    assert [(n["reviewer"], n["accepted"], n["producer"]) for n in lines] == [
        ("checks", True, "gitswarm"),
        (AUTHOR, True, "person"),
        ("Skeptic <skeptic@example.com>", False, "person"),
    ]
    # the person's verdict is tied to the patch's job and task, like gitswarm's own
    assert lines[1]["job"] == job and lines[1]["task"] == patch["task"] == lines[0]["task"]

    for command in ("status", "show"):
        shown = cli(project, "--json", command, job[:10])
        assert shown.code == 0, shown.err
        reviews = shown.json()["reviews"]
        assert list(reviews) == [head], (command, reviews)
        assert [(v["reviewer"], v["accepted"], v["producer"], v["note"]) for v in reviews[head]] == [
            ("checks", True, "gitswarm", None),
            (AUTHOR, True, "person", "lgtm"),
            ("Skeptic <skeptic@example.com>", False, "person", "needs docs"),
        ], command
        assert reviews[head][0]["verdict"] == "complete/clean/aligned"
        created = [v["created"] for v in reviews[head]]
        assert created == sorted(created)


def test_a_job_without_patches_has_no_reviews(repo: Path, tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text('goal = "shell"\n[[tasks]]\nid = "a"\ncommand = "true"\n')
    ran = cli(repo, "--json", "run", str(spec))
    assert ran.code == 0, ran.err
    job = ran.json()["id"]
    for command in ("status", "show"):
        assert "reviews" not in cli(repo, "--json", command, job).json()


def test_a_persons_accept_never_makes_a_rejected_patch_mergeable(project: Path) -> None:
    # each repair round appends another line: a new head each time, none of which passes
    result, data = delegate(project, "append notes.txt: one more line", "grep -qx never notes.txt")
    assert result.code == 1
    job = data["id"]
    made = patches(project, job)
    assert len({p["head"] for _, p in made}) == len(made) > 1, data
    patch_id, patch = made[-1]
    head = patch["head"]
    assert [n["accepted"] for n in swarm_note(project, head)] == [False]

    accepted = cli(project, "--json", "review", patch_id, "--accept", "--note", "ship it anyway")
    assert accepted.code == 0, accepted.err
    assert [(n["reviewer"], n["accepted"]) for n in swarm_note(project, head)] == [("checks", False), (AUTHOR, True)]

    before = tree_state(project)
    refused = cli(project, "--json", "merge", patch_id)
    assert refused.code == 1
    assert "no accepted verdict" in one_error_line(refused)
    assert tree_state(project) == before
    assert rev(project, "main") != head

    reviews = cli(project, "--json", "status", job).json()["reviews"]
    assert [(v["reviewer"], v["accepted"]) for v in reviews[head]] == [("checks", False), (AUTHOR, True)]
    assert set(reviews) == {p["head"] for _, p in made}
