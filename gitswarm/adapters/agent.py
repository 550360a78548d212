"""Drive an agent CLI from its spec: build the isolated invocation, read what it reported.

Every run is a fresh process in a scratch directory of its own: an ephemeral
home, the prompt or schema files the argument templates ask for, and the
usage file some CLIs write. The directory is removed after the outcome is
read.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import msgspec

from gitswarm.adapters.agentspec import AgentSpec, Arg
from gitswarm.adapters.base import BlobWriter, Invocation, Outcome, RunContext, captured
from gitswarm.adapters.endpoint import sandboxed
from gitswarm.adapters.isolation import build_home, linked_sources, make_scratch, remove_scratch, run_environment
from gitswarm.adapters.pricing import PriceTable, run_cost
from gitswarm.adapters.process import ProcessResult
from gitswarm.adapters.proxy import Proxy
from gitswarm.adapters.report import AgentReport, read_report
from gitswarm.adapters.sandbox import Decision, named_files
from gitswarm.adapters.sessions import keep, restore
from gitswarm.model.analyze_answer import answer_artifacts, answer_schema, parse_answer, schema_text
from gitswarm.model.artifacts import Run, SandboxUse
from gitswarm.model.browser import is_browser
from gitswarm.model.records import TaskSpec

PROMPT_FILE = "prompt.md"
SCHEMA_FILE = "answer.schema.json"
USAGE_FILE = "usage.json"


class AgentAdapter:
    def __init__(self, name: str, spec: AgentSpec, prices: PriceTable | None = None) -> None:
        self.name = name
        self.spec = spec
        self.prices = prices or PriceTable({})

    def invocation(self, task: TaskSpec, ctx: RunContext) -> Invocation:
        spec = self.spec
        prompt = ctx.prompt if ctx.prompt is not None else task.prompt or ""
        browser = is_browser(task.needs)
        scratch = make_scratch()
        proxy: Proxy | None = None
        try:
            env = run_environment(spec, ctx.base_env, task.env, scratch / "home")
            build_home(spec, scratch, ctx.base_env, env)
            values = {
                "prompt": prompt,
                "workdir": str(ctx.workdir),
                "model": self._model(task, ctx) or "",
                "schema": schema_text(browser) if task.mode == "analyze" else "",
                "schema_file": str(scratch / SCHEMA_FILE) if task.mode == "analyze" else "",
                "prompt_file": str(scratch / PROMPT_FILE),
                "usage_file": str(scratch / USAGE_FILE),
                "scratch": str(scratch),
                "budget_usd": f"{ctx.budget_usd:.4f}" if ctx.budget_usd is not None else "",
                "session": ctx.session or "",
            }
            (scratch / PROMPT_FILE).write_text(prompt)
            if task.mode == "analyze":
                (scratch / SCHEMA_FILE).write_text(json.dumps(answer_schema(browser), indent=2))
            template = spec.args_for(task.mode, browser)
            if template is None:
                argv = [spec.executable] + ([prompt] if spec.prompt == "arg" else [])
            else:
                argv = [spec.executable, *expand(template, values)]
            if ctx.session and spec.resume is not None and task.mode == "implement":
                restore(spec.resume, ctx.session, scratch / "home")
                argv += expand(spec.resume.args, values)
            box = ctx.sandbox.sandbox if ctx.sandbox is not None else None
            if box is not None:
                # Writable: the scratch directory (home, state, tmp) and the user's files the spec links in
                # (a CLI refreshes its login there, as it would without a sandbox).
                literal = [word for arg in template or () for word in ([arg] if isinstance(arg, str) else arg) if "{" not in word]
                box = box.adding(write=[scratch, *linked_sources(scratch)], read=named_files(literal))
                argv = [argv[0], *(spec.sandbox.swap_args.get(word, word) for word in argv[1:])]
                wrapped = sandboxed(box, argv, Path(ctx.workdir), env, ctx.base_env.get("HOME"), spec.sandbox.endpoint_env)
                argv, env, proxy = wrapped.argv, wrapped.env, wrapped.proxy
        except BaseException:
            if proxy is not None:
                proxy.close()
            remove_scratch(scratch)
            raise
        return Invocation(
            argv=argv,
            cwd=Path(ctx.workdir),
            env=env,
            timeout=task.timeout,
            stdin=prompt.encode() if spec.prompt == "stdin" else None,
            scratch=scratch,
            proxy=proxy,
        )

    def outcome(
        self,
        task: TaskSpec,
        ctx: RunContext,
        result: ProcessResult,
        store: BlobWriter,
        now: float,
        invocation: Invocation | None = None,
    ) -> Outcome:
        usage_path = invocation.scratch / USAGE_FILE if invocation and invocation.scratch else None
        usage = usage_path.read_bytes() if usage_path is not None and usage_path.is_file() else None
        report = read_report(self.spec.output_for(task.mode), result.stdout, result.stderr, usage)
        resume = self.spec.resume
        if resume is not None and report.session and task.mode == "implement" and invocation and invocation.scratch:
            keep(resume, report.session, invocation.scratch / "home")  # a follow-up may resume it (--resume-session)
        error = self._error(result, report)
        refused_write = error is not None and task.mode == "analyze" and bool(report.denials) and not (
            result.error or result.stopped)
        if refused_write:
            # The agent tried to change something in a read-only run: it would again.
            error = f"{self.name}: analyze is read-only and the agent tried to write ({report.reason}); not retried"
        refused = invocation.proxy.refused if invocation is not None and invocation.proxy is not None else ()
        run = self._run_record(task, ctx, result, report, store, now, error, refused)
        if error is not None:
            return Outcome(ok=False, error=error, artifacts=[run], text=report.text, retryable=not refused_write)
        if task.mode == "implement":
            return Outcome(ok=True, artifacts=[run], text=report.text)
        answer = parse_answer(report.structured, report.text)
        said = answer_artifacts(answer, report.text, ctx.job, ctx.task, ctx.attempt, self.name, now)
        return Outcome(ok=True, artifacts=[run, *said], text=report.text)

    def _model(self, task: TaskSpec, ctx: RunContext) -> str | None:
        """The model to ask for: the one routing chose (None: the CLI's default), else the task's, else the spec's."""
        if ctx.route is not None:
            return ctx.route.model
        return task.model or self.spec.model

    def _error(self, result: ProcessResult, report: AgentReport) -> str | None:
        """Why the run failed, or None. The agent's own error flag and refusals come
        before its exit code: some CLIs exit 0 after a denied edit."""
        if result.error:
            return result.error
        if result.stopped:
            return f"{self.name} {result.stopped} after {result.duration:.1f}s"
        if report.failed:
            return f"{self.name}: {report.reason or 'reported an error'}"
        if result.exit_code != 0:
            meaning = self.spec.exit_codes.get(str(result.exit_code))
            last = (result.stderr or result.stdout).decode(errors="replace").strip().splitlines()
            said = f": {last[-1]}" if last else ""
            return f"{self.name} exited {result.exit_code}" + (f" ({meaning})" if meaning else "") + said
        if not report.parsed:
            return f"{self.name}: no {self.spec.output.format} output to read"
        return None

    def _run_record(
        self,
        task: TaskSpec,
        ctx: RunContext,
        result: ProcessResult,
        report: AgentReport,
        store: BlobWriter,
        now: float,
        error: str | None,
        refused: tuple[str, ...] = (),
    ) -> Run:
        model = report.model or self._model(task, ctx)
        cost, estimated = run_cost(report.cost_usd, model, report.input_tokens, report.output_tokens, self.prices)
        stdout, stderr = captured(result, store)
        return Run(
            job=ctx.job,
            task=ctx.task,
            attempt=ctx.attempt,
            created=now,
            producer=self.name,
            adapter=self.name,
            exit_code=result.exit_code,
            duration=round(result.duration, 6),
            session_id=report.session,
            model=model,
            cost_usd=None if cost is None else round(cost, 8),
            cost_estimated=estimated,
            tier=ctx.route.tier if ctx.route is not None else None,
            routing=ctx.route.routing if ctx.route is not None else None,
            input_tokens=report.input_tokens,
            output_tokens=report.output_tokens,
            error=error,
            provider_error=report.provider_error if error is not None else None,
            stdout=stdout,
            stderr=stderr,
            skills=ctx.skills,
            sandbox=used(ctx.sandbox, refused) if ctx.sandbox is not None else msgspec.UNSET,
        )


def used(decision: Decision, refused: tuple[str, ...] = ()) -> SandboxUse:
    """What a run's record says of its sandbox."""
    if decision.sandbox is None:
        return SandboxUse(kind="none", network="open", why=decision.why or None)
    return SandboxUse(kind="bwrap", network=decision.sandbox.network, refused=refused)


def expand(template: list[Arg], values: dict[str, str]) -> list[str]:
    """Fill placeholders; an optional group (a list) is dropped when any of its placeholders is empty."""
    argv: list[str] = []
    for arg in template:
        if isinstance(arg, str):
            argv.append(arg.format_map(values))
            continue
        filled = [word.format_map(values) for word in arg]
        if all(_complete(word, values) for word in arg):
            argv.extend(filled)
    return argv


def _complete(word: str, values: dict[str, str]) -> bool:
    return all(values.get(name) for _, name, _, _ in string.Formatter().parse(word) if name)
