"""Each real agent CLI driven through gitswarm against a scripted fake model.

Opt-in: GITSWARM_REAL_CLIS=1 python -m pytest tests/realclis (conftest.py).
Per CLI, in order, in one temp repository: preflight; a delegation verified
and merged; a wrong edit rejected after its repair round; an analyze task
whose findings reach the summary; the cost and tokens of every run; and the
isolation of it all (ephemeral HOME, the user's checkout untouched by analyze
tasks, nothing sent past the loopback); `run --remote` against a bare hub; and
the pilot side: `gitswarm mcp install` for the CLI, and the CLI's own command
connecting to the server (Claude Code also calling a tool through it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gitswarm.pilot.tools import TOOLS
from tests.realclis import table as suite
from tests.realclis.clis import CLI, CLIS
from tests.realclis.harness import (
    Lab,
    Result,
    close_lab,
    diff_digests,
    egress_hosts,
    git,
    make_lab,
    real_path,
    tree_digest,
    versions,
)

GOOD = "hello from fake model"
WRONG = "goodbye from fake model"
WRONG_AGAIN = "goodbye again from fake model"
TARGET = "greeting.txt"
CHECK = f"grep -qx '{GOOD}' {TARGET}"
INSTRUCTION = f"Create {TARGET} holding exactly one line: {GOOD}"
TASK_TIMEOUT = "100s"  # under the 120 s each gitswarm command gets


def findings_answer(cli: str) -> dict:
    return {
        "findings": [{"title": f"README has no usage section ({cli})", "body": "README.md only names the project.",
                      "confidence": 0.8, "severity": "low"}],
        "decisions": [{"title": f"Keep the README short ({cli})", "rationale": "It is a demo repository."}],
    }


class Cell:
    detail = ""


@contextmanager
def cell(lab: Lab, column: str) -> Iterator[Cell]:
    """Record the outcome of one column of the table: ok (detail), FAILED (why) or skipped (why)."""
    box = Cell()
    try:
        yield box
    except pytest.skip.Exception as exc:
        suite.record(lab.cli.key, column, f"skipped ({exc.msg})")
        raise
    except BaseException as exc:
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        suite.record(lab.cli.key, column, f"FAILED ({why[:220]})")
        raise
    else:
        suite.record(lab.cli.key, column, "ok" + (f" ({box.detail})" if box.detail else ""))


@pytest.fixture(scope="module", params=CLIS, ids=[c.key for c in CLIS])
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    cli: CLI = request.param
    for name in (cli.binary, *cli.needs):
        if shutil.which(name, path=real_path()) is None:
            reason = f"{name} not installed (looked in PATH={real_path()}; see /work/shared/realclis/install.sh)"
            for column in suite.COLUMNS:
                suite.record(cli.key, column, "skipped" if column != "version" else f"skipped: {reason}")
            pytest.skip(reason)
    codex_daemon = Path(f"/tmp/codex-daemon-{os.getuid()}")
    daemon_was_there = codex_daemon.exists()
    lab = make_lab(cli, tmp_path_factory.mktemp(f"realcli-{cli.key}"))
    lab.binary = shutil.which(cli.binary, path=real_path()) or cli.binary
    lab.version = versions().get(cli.key, "?")
    suite.record(cli.key, "version", lab.version)
    for text in lab.notes:
        suite.note(cli.key, text)
    try:
        yield lab
    finally:
        close_lab(lab)
        if not daemon_was_there and codex_daemon.exists():
            try:
                codex_daemon.rmdir()  # as e2e_codex.sh does: only when it is empty
                suite.note(cli.key, f"{codex_daemon} was created (outside TMPDIR); removed again")
            except OSError:
                suite.note(cli.key, f"{codex_daemon} was created (outside TMPDIR) and is left (not empty)")


def task_error(data: dict) -> str:
    return "; ".join(f"{t['id']}: {t['state']} {t.get('error') or ''}".strip() for t in data.get("tasks", []))


def result_json(result: Result) -> dict:
    try:
        return result.json()
    except ValueError:
        raise AssertionError(f"no JSON from {result.why()}") from None


def run_job(lab: Lab, name: str, body: str) -> tuple[Result, dict]:
    spec = lab.base / f"{name}.toml"
    spec.write_text(f'goal = "{name}"\n[[tasks]]\n{body}')
    result = lab.gitswarm("run", str(spec), "-j", "1", "--json")
    return result, result_json(result)


# ---------------------------------------------------------------- the columns


def test_preflight(lab: Lab) -> None:
    with cell(lab, "preflight") as box:
        result = lab.gitswarm("adapters", "check", lab.cli.adapter, "--json")
        data = result_json(result)
        entry = next((a for a in data.get("adapters", []) if a.get("name") == lab.cli.adapter), {})
        assert result.code == 0 and entry.get("ok"), f"{entry.get('reason') or result.why()}"
        box.detail = f"version {entry.get('version')!r}"
        listing = result_json(lab.gitswarm("adapters", "list", "--json"))
        mine = next((a for a in listing if a.get("name") == lab.cli.adapter), {})
        assert str(mine.get("source", "")).endswith(f".gitswarm/adapters/{lab.cli.adapter}.toml"), (
            f"the repository's extending spec is not the one used: {mine.get('source')}")


def test_implement_verified_and_merged(lab: Lab) -> None:
    with cell(lab, "implement+merge") as box:
        lab.script_model(target=TARGET, content=GOOD + "\n", final=f"Created {TARGET}.")
        main_before = git(lab.repo, "rev-parse", "main").strip()
        mark = lab.request_mark()
        result = lab.gitswarm("delegate", INSTRUCTION, "--adapter", lab.cli.adapter, "--check", CHECK, "--json")
        tools = lab.tools_since(mark)
        if lab.cli.edit_tool not in tools:
            suite.note(lab.cli.key, f"implement: the model was not offered {lab.cli.edit_tool}; it edited with {tools}")
        data = result_json(result)
        lab.collect_runs(data["id"], "implement")
        assert result.code == 0, f"delegate exit {result.code}: {task_error(data)}"
        cwds = sorted({p.cwd or "?" for p in result.procs if p.label(lab.cli.binary).endswith("(task)")})
        assert cwds and not any(c.startswith(str(lab.repo)) for c in cwds), f"the implement agent ran in {cwds}"
        patches = data["summary"]["patches"]
        assert len(patches) == 1 and patches[0]["verified"], f"patches: {patches}"
        patch = next(a for a in lab.artifacts(data["id"]) if a["kind"] == "patch")
        files = [f["path"] for f in patch["files"]]
        assert files == [TARGET], f"the patch holds {files}, not only {TARGET}"
        merged = lab.gitswarm("merge", patches[0]["id"], "--json")
        assert merged.code == 0, merged.why()
        main_after = git(lab.repo, "rev-parse", "main").strip()
        assert main_after != main_before, "main did not move"
        landed = git(lab.repo, "show", f"main:{TARGET}")
        assert landed.strip() == GOOD, f"main:{TARGET} is {landed!r}"
        box.detail = f"edit via {'+'.join(tools) or '?'}, patch {patches[0]['id'][:10]} merged, {result.seconds:.0f}s"


def test_wrong_edit_rejected(lab: Lab) -> None:
    with cell(lab, "rejected") as box:
        # A file of its own: greeting.txt is on main once the implement test merged it, and Claude Code
        # 2.1.332 with a named model (the strong tier) refuses to Write over a file it has not Read,
        # which the scripted model never does (seen with the real CLI).
        target = "farewell.txt"
        lab.script_model(target=target, content=WRONG + "\n", repair_content=WRONG_AGAIN + "\n", final=f"Created {target}.")
        main_before = git(lab.repo, "rev-parse", "main").strip()
        result, data = run_job(lab, "rejected", (
            f'id = "wrong"\nmode = "implement"\nadapter = "{lab.cli.adapter}"\n'
            f'prompt = "Create {target} holding exactly one line: {GOOD}"\n'
            f"checks = [\"grep -qx '{GOOD}' {target}\"]\nrepair_rounds = 1\nmax_attempts = 1\ntimeout = \"{TASK_TIMEOUT}\"\n"))
        runs = lab.collect_runs(data["id"], "rejected")
        task = data["tasks"][0]
        assert result.code == 1 and task["state"] == "failed", f"exit {result.code}: {task_error(data)}"
        assert "rejected" in (task["error"] or ""), f"failed, but not as rejected: {task['error']}"
        assert len(runs) == 2, f"{len(runs)} agent runs, expected 2 (the attempt and its repair round)"
        patches = data["summary"]["patches"]
        assert patches and not any(p["verified"] for p in patches), f"patches: {patches}"
        assert git(lab.repo, "rev-parse", "main").strip() == main_before, "main moved"
        refused = lab.gitswarm("merge", patches[-1]["id"], "--json")
        assert refused.code == 1, f"merge of a rejected patch: {refused.why()}"
        assert git(lab.repo, "rev-parse", "main").strip() == main_before, "main moved after a refused merge"
        box.detail = f"{len(patches)} patches rejected, merge refused"


def test_analyze_findings(lab: Lab) -> None:
    with cell(lab, "analyze findings") as box:
        answer = findings_answer(lab.cli.key)
        lab.script_model(analyze_direct=True, final=json.dumps(answer), structured=json.dumps(answer))
        before = lab.checkout()
        result, data = run_job(lab, "analyze", (
            f'id = "review"\nmode = "analyze"\nadapter = "{lab.cli.adapter}"\n'
            f'prompt = "Review README.md and report what it lacks."\nmax_attempts = 1\ntimeout = "{TASK_TIMEOUT}"\n'))
        lab.collect_runs(data["id"], "analyze")
        lab.analyze_cwds += [p.cwd or "?" for p in result.procs if p.label(lab.cli.binary).endswith("(task)")]
        changed = diff_digests(before, lab.checkout())
        lab.checkout_changes += [f"analyze: {c}" for c in changed]
        assert result.code == 0, f"exit {result.code}: {task_error(data)}"
        findings = data["summary"]["findings"]
        titles = [f["title"] for f in findings]
        want = answer["findings"][0]["title"]
        assert want in titles, f"findings in the summary: {titles}"
        assert not any(f["low_confidence"] for f in findings), "the answer was taken as prose, not as the JSON object"
        assert want in data["summary"]["text"], "the markdown summary does not list the finding"
        assert answer["decisions"][0]["title"] in [d["title"] for d in data["summary"]["decisions"]]
        box.detail = f"{len(findings)} finding, {len(data['summary']['decisions'])} decision"


def test_cost_and_tokens(lab: Lab) -> None:
    with cell(lab, "cost/tokens") as box:
        assert lab.runs, "no run artifacts (the earlier tests did not run an agent)"
        problems, costs = [], []
        for run in lab.runs:
            where = f"{run['scenario']} run (exit {run.get('exit_code')})"
            tokens = (run.get("input_tokens"), run.get("output_tokens"))
            if None in tokens or not all(tokens):
                problems.append(f"{where}: tokens {tokens[0]} in / {tokens[1]} out")
            cost = run.get("cost_usd")
            if cost is not None and cost <= 0 and any(tokens):
                problems.append(f"{where}: cost {cost} for {tokens} tokens (recorded as free)")
            costs.append(cost)
        assert not problems, "; ".join(problems)
        known = [c for c in costs if c is not None]
        estimated = any(r.get("cost_estimated") for r in lab.runs)
        usd = "cost unknown" if not known else f"${sum(known):.6f}" + (" estimated" if estimated else " reported")
        if known and len(known) < len(costs):
            usd += f" ({len(costs) - len(known)} runs unknown)"
        box.detail = (f"{len(lab.runs)} runs, {usd}, {sum(r['input_tokens'] for r in lab.runs)} in / "
                      f"{sum(r['output_tokens'] for r in lab.runs)} out")


def test_isolation_and_egress(lab: Lab) -> None:
    with cell(lab, "isolation/egress") as box:
        # An analyze task whose model tries to write (the fake calls the CLI's write tool, then answers).
        answer = findings_answer(lab.cli.key)
        lab.script_model(target="analyze-wrote-this.txt", content="written by an analyze task\n",
                         final=json.dumps(answer), structured=json.dumps(answer))
        before = lab.checkout()
        mark = lab.request_mark()
        result, data = run_job(lab, "analyze-write", (
            f'id = "sneaky"\nmode = "analyze"\nadapter = "{lab.cli.adapter}"\n'
            f'prompt = "Review README.md."\nmax_attempts = 1\ntimeout = "{TASK_TIMEOUT}"\n'))
        lab.analyze_cwds += [p.cwd or "?" for p in result.procs if p.label(lab.cli.binary).endswith("(task)")]
        changed = diff_digests(before, lab.checkout())
        lab.checkout_changes += [f"analyze that writes: {c}" for c in changed]
        outcome = f"{data['tasks'][0]['state']}" + (f": {data['tasks'][0]['error']}" if data["tasks"][0].get("error") else "")
        called = lab.tools_since(mark)
        suite.note(lab.cli.key, f"an analyze task whose model tried to write (it called {called or 'no tool: none offered'}): "
                                f"{outcome[:200]}")

        problems = []
        agents = lab.procs
        if not agents:
            problems.append(f"no {lab.cli.binary} process was seen")
        # The processes gitswarm started; an agent's own children may run with an environment it scrubbed
        # (codex runs the model's exec_command in its sandbox with no HOME, seen with the fast tier's gpt-5-mini).
        homes = sorted({p.home or "(none)" for p in agents if not p.nested})
        scratch = str(lab.tmp) + os.sep + "gitswarm-run-"
        bad_homes = [h for h in homes if not (h.startswith(scratch) and h.endswith(os.sep + "home"))]
        if bad_homes:
            odd = [(p.argv[:4], p.env_names[:8]) for p in agents if not p.nested and (p.home or "(none)") in bad_homes]
            problems.append(f"agent HOME {bad_homes} (test HOME {lab.home}): {odd[:3]}")
        leaked = sorted({p.pid for p in agents if "GITSWARM_REALCLI_CANARY" in p.env_names})
        if leaked:
            problems.append("the caller's environment reached the agent (a canary variable)")
        left = sorted(p.name for p in lab.tmp.glob("gitswarm-run-*"))
        if left:
            problems.append(f"run scratch left behind: {left}")
        home_changes = diff_digests(lab.home_before, tree_digest(lab.home))
        if home_changes:
            problems.append(f"the test's HOME changed: {home_changes[:6]}")
        if lab.checkout_changes:
            problems.append(f"the user's checkout changed: {lab.checkout_changes[:6]}")
        in_checkout = sorted({c for c in lab.analyze_cwds if c == str(lab.repo) or c.startswith(str(lab.repo) + os.sep)})
        if in_checkout:
            suite.note(lab.cli.key, f"analyze tasks ran in the user's checkout ({in_checkout[0]})")
        elsewhere = sorted({os.path.relpath(c, lab.base) for c in lab.analyze_cwds if c not in in_checkout and c != "?"})
        if elsewhere:
            suite.note(lab.cli.key, f"analyze tasks ran in {', '.join(elsewhere)} (under the lab, not the user's checkout)")
        by_run: dict[str, set[str]] = {}
        for _command, run, host in lab.egress:
            by_run.setdefault(run, set()).add(host)
        for run, run_hosts in sorted(by_run.items()):
            times = len({(c, r) for c, r, _ in lab.egress if r == run})
            suite.note(lab.cli.key, f"egress by `{run}` (during {times} gitswarm command(s)): {', '.join(sorted(run_hosts))}")
        git_changes = diff_digests(lab.git_before, lab.git_state())
        if git_changes:
            config = git(lab.repo, "config", "--local", "--list").strip().replace("\n", "; ")
            problems.append(f"the user's .git changed: {git_changes} (config now: {config})")
        hosts = egress_hosts(lab)
        unexpected = [h for h in hosts if h not in lab.cli.unsilenceable]
        if unexpected:
            by = sorted({f"{run}" for _, run, host in lab.egress if host in unexpected})
            problems.append(f"egress to {', '.join(unexpected)} (by {', '.join(by)})")
        assert not problems, "; ".join(problems)
        box.detail = f"{len(agents)} agent processes, HOME ephemeral, " + (
            f"egress only to hosts no setting stops: {', '.join(hosts)}" if hosts else "no egress")


def test_implement_in_the_endpoint_sandbox(lab: Lab) -> None:
    """`[sandbox] network = "endpoint"`: the agent runs in bwrap with a network namespace of its own and
    reaches only its model endpoint (here the fake server on loopback, through gitswarm's proxy and the
    bridge in the sandbox); whatever else it tried to reach is refused and listed on its run."""
    with cell(lab, "endpoint sandbox") as box:
        if shutil.which("bwrap") is None:
            pytest.skip("bwrap is not installed: network = endpoint needs the sandbox")
        target, good = "endpoint.txt", "made inside the endpoint sandbox"
        config = lab.repo / ".gitswarm.toml"
        assert not config.exists(), "the lab's repository has a .gitswarm.toml of its own"
        config.write_text('[sandbox]\nmode = "bwrap"\nnetwork = "endpoint"\n')
        try:
            lab.script_model(target=target, content=good + "\n", final=f"Created {target}.")
            result = lab.gitswarm("delegate", f"Create {target} holding exactly one line: {good}", "--adapter", lab.cli.adapter,
                                  "--check", f"grep -qx '{good}' {target}", "--json")
            data = result_json(result)
            runs = lab.collect_runs(data["id"], "endpoint")
        finally:
            config.unlink()
        uses = [r.get("sandbox") or {} for r in runs]
        refused = sorted({d for use in uses for d in use.get("refused", [])})
        assert {use.get("kind") for use in uses} == {"bwrap"} and {use.get("network") for use in uses} == {"endpoint"}, uses
        assert result.code == 0, f"delegate exit {result.code}: {task_error(data)}"
        box.detail = f"reached its model endpoint only; refused: {', '.join(refused) or 'nothing'}"


def test_implement_through_a_remote(lab: Lab) -> None:
    """`run --remote`: the claim and the finish are pushed to a remote before they count, and the
    patch's head travels with the finish. Last: it adds a remote to the lab's repository."""
    with cell(lab, "remote") as box:
        hub = lab.base / "hub.git"
        git(lab.base, "init", "-q", "--bare", str(hub), env=lab.env)
        git(lab.repo, "remote", "add", "origin", str(hub), env=lab.env)
        git(lab.repo, "push", "-q", "origin", "main", env=lab.env)
        lab.script_model(target="remote.txt", content=GOOD + "\n", final="Created remote.txt.")
        spec = lab.base / "remote.toml"
        spec.write_text(
            f'goal = "remote"\n[[tasks]]\nid = "greet"\nmode = "implement"\nadapter = "{lab.cli.adapter}"\n'
            f'prompt = {json.dumps(INSTRUCTION.replace(TARGET, "remote.txt"))}\n'
            f'checks = [{json.dumps(CHECK.replace(TARGET, "remote.txt"))}]\ntimeout = "{TASK_TIMEOUT}"\n'
        )
        result = lab.gitswarm("run", "--remote", "origin", str(spec), "-j", "1", "--json")
        data = result_json(result)
        assert result.code == 0, f"run --remote exit {result.code}: {task_error(data)}"
        job = data["id"]
        patch = next(a for a in lab.artifacts(job) if a["kind"] == "patch")
        head = json.loads(lab.gitswarm("artifact", patch["id"], "--json").out)["record"]["head"]
        assert git(hub, "rev-parse", f"refs/swarm/branches/{job}/greet").strip() == head
        assert git(hub, "rev-parse", f"refs/swarm/jobs/{job}").strip() == git(lab.repo, "rev-parse", f"refs/swarm/jobs/{job}").strip()
        box.detail = f"claim and finish pushed, head {head[:10]} on the remote, {result.seconds:.0f}s"


# How each CLI checks a registered MCP server (their own commands, run as a user would). Codex's `mcp list`
# shows the registration only; aider has no MCP client; omp has no command that checks a server.
MCP_CHECKS: dict[str, tuple[str, list[str], tuple[str, ...]]] = {
    "claude": ("claude-code", ["mcp", "list"], ("gitswarm", "Connected")),
    "gemini": ("gemini", ["mcp", "list"], ("gitswarm", "Connected")),
    # hermes counts the tools the server lists: every one gitswarm serves.
    "hermes": ("hermes", ["mcp", "test", "gitswarm"], ("Connected", f"Tools discovered: {len(TOOLS)}")),
    "codex": ("codex", ["mcp", "list"], ("gitswarm", "enabled")),
}
QUIET = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
         "NO_UPDATE_NOTIFIER": "1", "GEMINI_TELEMETRY_ENABLED": "false"}


def client_env(lab: Lab) -> dict[str, str]:
    """The lab's environment for the CLI run directly (not as gitswarm's adapter): quiet, proxied to the egress logger."""
    proxy = f"http://127.0.0.1:{lab.egress_port}"
    return {**lab.env, **QUIET, "HTTPS_PROXY": proxy, "HTTP_PROXY": proxy, "NO_PROXY": "127.0.0.1,localhost"}


def test_pilot_over_mcp(lab: Lab) -> None:
    """`gitswarm mcp install` registers the server in the CLI's own config; the CLI's own command connects
    to it. Claude Code also calls a tool through it, driven by the fake model. Last: it edits the lab's home."""
    with cell(lab, "pilot (mcp)") as box:
        if lab.cli.key not in MCP_CHECKS:
            pytest.skip({"aider": "aider has no MCP client"}.get(lab.cli.key, f"{lab.cli.key} has no command that checks a server"))
        client, command, expected = MCP_CHECKS[lab.cli.key]
        installed = lab.gitswarm("mcp", "install", "--client", client)
        assert installed.code == 0, installed.why()
        if lab.cli.key == "gemini":  # gemini lists servers of trusted folders only
            (lab.home / ".gemini").mkdir(exist_ok=True)
            (lab.home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(lab.repo): "TRUST_FOLDER"}))
        env = client_env(lab)
        checked = subprocess.run([lab.binary, *command], cwd=lab.repo, env=env, capture_output=True, text=True, timeout=120)
        said = checked.stdout + checked.stderr
        line = next((x.strip() for x in said.splitlines() if expected[0] in x), said.strip()[-200:])
        assert all(word in said for word in expected), f"{' '.join(command)}: {said.strip()[-300:]}"
        box.detail = f"{lab.cli.binary} {' '.join(command)}: {line[:120]}"
        if lab.cli.key == "claude":
            box.detail += "; " + claude_calls_a_tool(lab, env)


def claude_calls_a_tool(lab: Lab, env: dict[str, str]) -> str:
    """claude -p, the fake model calling mcp__gitswarm__status: the job list reaches the model as the tool's result."""
    lab.script_model(write_tool="mcp__gitswarm__status", tool_input="{}", final="FAKE_DONE")
    mark = lab.request_mark()
    env = {**env, "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{lab.port}", "ANTHROPIC_API_KEY": "dummy",
           "ENABLE_TOOL_SEARCH": "false"}  # MCP tools offered at once, not behind Claude Code's tool search
    if os.getuid() == 0:
        env["IS_SANDBOX"] = "1"  # bypassPermissions is refused as root otherwise (e2e_claude.sh)
    done = subprocess.run([lab.binary, "-p", "What jobs are there?", "--output-format", "json", "--permission-mode",
                           "bypassPermissions", "--max-turns", "4"], cwd=lab.repo, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-300:]
    results = [r for line in Path(lab.requests).read_text().splitlines()[mark:] for r in json.loads(line).get("tool_results") or []]
    jobs = [json.loads(r) for r in results if r.startswith("{")]
    assert jobs and "jobs" in jobs[0], results
    return f"claude -p called mcp__gitswarm__status and got {len(jobs[0]['jobs'])} jobs"
