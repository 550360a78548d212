"""Repository configuration: `.gitswarm.toml`, or `[tool.gitswarm]` in pyproject.toml.

    [adapters]
    prefer = ["hermes", "claude-code"]   # routing order for tasks that name capabilities
    disabled = ["aider"]                 # never routed to

    [audit]
    checks = ["pytest -q"]               # what `gitswarm audit` runs on a clean checkout
    auditor = "claude-code"              # optional: an adapter that reviews the commit too
    timeout = "10m"

    [hooks]
    audit_branches = ["main"]            # post-commit audits commits on these (fnmatch); [] = none
    verified_branches = ["swarm/*"]      # pre-push refuses these without an accepted verdict

    [worktrees]
    root = "~/fast-disk/worktrees"       # where delegation worktrees go (relative: to the repository's top);
                                         # $GITSWARM_WORKTREE_ROOT wins; default: the per-user state directory

    [pull]
    max_record = 16777216                # bytes of one pulled record; a job holding a bigger one is refused
    max_pull = 1073741824                # bytes one pull may read in all; the jobs past it are refused

    [notify]
    command = ["notify-send", "gitswarm"]  # run per event, the event as JSON on stdin (a string: sh -c)
    events = ["job_finished", "job_failed", "approval_needed", "patch_verified", "patch_rejected"]
    timeout = "10s"                      # then the command is killed; failures go to .git/gitswarm/logs/notify.log

    [memory]
    auto = false                         # promote a task's accepted results to memory when its verdict accepts
    budget_tokens = 1000                 # what memory may take of a prompt packet; 0 = none
    max_age_days = 90                    # records older than this are left out of packets

    [routing]
    analyze = "fast"                     # the model tier ([models] of the adapter spec) analyze tasks take
    implement = "strong"                 # ... and implement tasks; "default": the spec's own model
    fallback = ["strong", "codex"]       # after a provider error (quota, funds, unknown model), the next
                                         # attempt takes the next entry: a tier, or another adapter; [] = none

    [browser]
    models = ["claude-opus-4-*"]         # the only models browser tasks may run on (names or fnmatch
                                         # patterns); a browser task on another is refused at submit; unset: any

    [sandbox]
    mode = "auto"                        # auto: agents run in bwrap where there is one; "bwrap": refuse to run
                                         # an agent without it; "off": none (docs/sandbox.md). Unset: the spec's
    network = "open"                     # "none": a network namespace of its own, loopback only; "endpoint": that,
                                         # and its model endpoint through gitswarm's proxy (needs bwrap)
    hosts = ["127.0.0.1:8000"]           # endpoint: more destinations (host, or host:port; port 443 if none)
    read = ["~/.pyenv"]                  # more paths agents may read (the home is hidden from them)
    write = []                           # more paths agents may write
    checks = true                        # the checks that verify a patch run sandboxed too; unset: only
                                         # for jobs pulled from another clone (once approved)

    [skills]
    dirs = [".gitswarm/skills"]          # folders of SKILL.md files (in the repository or the user's
                                         # gitswarm config folder); unset or []: no skills
    max_skills = 3                       # bodies put into one prompt packet
    max_tokens = 1200                    # what they may take of it in all
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Literal

import msgspec

from gitswarm.adapters.names import user_config_dir
from gitswarm.adapters.registry import DEFAULT_PREFERENCE
from gitswarm.adapters.sandbox import SandboxTable, check_table
from gitswarm.engine.config_file import CONFIG_FILE, DEFAULT_VERIFIED, raw_config
from gitswarm.model.errors import BadInput
from gitswarm.model.limits import MAX_PULL, MAX_PULLED_RECORD
from gitswarm.model.spec import parse_duration
from gitswarm.store.worktrees import default_root


class AdaptersConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    prefer: list[str] = msgspec.field(default_factory=lambda: list(DEFAULT_PREFERENCE))
    disabled: list[str] = []


class AuditConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    checks: list[str] = []
    auditor: str | None = None
    timeout: str | float = 600.0


class VerifyConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """What judges a patch (docs/verification.md): globs protected beside the defaults, and what
    acceptance requires of its checks: "any" (they pass) or "fail-to-pass" (one of them fails on the base)."""

    protect: list[Annotated[str, msgspec.Meta(min_length=1)]] = []
    require: Literal["any", "fail-to-pass"] = "any"


class HooksConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    audit_branches: list[str] = msgspec.field(default_factory=lambda: ["*"])
    verified_branches: list[str] = msgspec.field(default_factory=lambda: list(DEFAULT_VERIFIED))


Bytes = Annotated[int, msgspec.Meta(ge=1024, le=2**40)]


class PullConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    max_record: Bytes = MAX_PULLED_RECORD  # one pulled record (an op's commit, an artifact)
    max_pull: Bytes = MAX_PULL  # everything one pull reads


NotifyEvent = Literal["job_finished", "job_failed", "approval_needed", "patch_verified", "patch_rejected"]
NOTIFY_EVENTS: tuple[NotifyEvent, ...] = ("job_finished", "job_failed", "approval_needed", "patch_verified", "patch_rejected")


class NotifyConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    command: Annotated[str, msgspec.Meta(min_length=1)] | Annotated[list[str], msgspec.Meta(min_length=1)] | None = None
    events: list[NotifyEvent] = msgspec.field(default_factory=lambda: list(NOTIFY_EVENTS))
    timeout: str | float = 10.0


class MemoryConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    auto: bool = False  # promote accepted results to memory as verdicts accept them
    budget_tokens: Annotated[int, msgspec.Meta(ge=0, le=100_000)] = 1000  # of a packet, for memory
    max_age_days: Annotated[float, msgspec.Meta(gt=0, le=36_500)] = 90.0  # older records stay out of packets


class BrowserConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    models: list[Annotated[str, msgspec.Meta(min_length=1)]] | None = None  # the floor for browser work; None: none


class SkillsConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    dirs: list[Annotated[str, msgspec.Meta(min_length=1, pattern="^[^\x00]*$")]] = []  # []: skills are off
    max_skills: Annotated[int, msgspec.Meta(ge=0, le=20)] = 3  # bodies in one packet
    max_tokens: Annotated[int, msgspec.Meta(ge=0, le=20_000)] = 1200  # what they may take of it in all


ModeTier = Literal["fast", "strong", "default"]
FallbackEntry = Annotated[str, msgspec.Meta(pattern="^[a-z0-9][a-z0-9._-]{0,63}$")]


class RoutingConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    analyze: ModeTier = "fast"  # the tier an analyze task takes unless it names a model or an effort
    implement: ModeTier = "strong"  # the same for an implement task; "default": the spec's own model
    # After a run failed for a provider reason, the next attempt takes the next entry: a tier of the
    # same adapter ("fast", "strong") or another adapter's name. []: no fallback.
    fallback: list[FallbackEntry] = []


class WorktreesConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    root: Annotated[str, msgspec.Meta(min_length=1, pattern="^[^\x00]*$")] | None = None


class SandboxConfig(SandboxTable, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """`[sandbox]`: over each adapter spec's own (adapters/sandbox.py); `checks` is the checks' own switch."""

    checks: bool | None = None  # None: sandboxed for jobs pulled from another clone, not for this clone's


class Config(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    adapters: AdaptersConfig = msgspec.field(default_factory=AdaptersConfig)
    audit: AuditConfig = msgspec.field(default_factory=AuditConfig)
    verify: VerifyConfig = msgspec.field(default_factory=VerifyConfig)
    hooks: HooksConfig = msgspec.field(default_factory=HooksConfig)
    pull: PullConfig = msgspec.field(default_factory=PullConfig)
    worktrees: WorktreesConfig = msgspec.field(default_factory=WorktreesConfig)
    memory: MemoryConfig = msgspec.field(default_factory=MemoryConfig)
    notify: NotifyConfig = msgspec.field(default_factory=NotifyConfig)
    routing: RoutingConfig = msgspec.field(default_factory=RoutingConfig)
    browser: BrowserConfig = msgspec.field(default_factory=BrowserConfig)
    skills: SkillsConfig = msgspec.field(default_factory=SkillsConfig)
    sandbox: SandboxConfig = msgspec.field(default_factory=SandboxConfig)


def load_config(workdir: Path | None) -> Config:
    """The repository's configuration; defaults when it has none."""
    if workdir is None:
        return Config()
    own = workdir / CONFIG_FILE
    where = own if own.is_file() else workdir / "pyproject.toml"
    shown = where if own.is_file() else f"{where} [tool.gitswarm]"
    try:
        config = msgspec.convert(raw_config(workdir), Config)
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{where}: {exc}") from None
    except msgspec.ValidationError as exc:
        raise BadInput(f"{shown}: {str(exc).replace('Object contains unknown field', 'unknown key')}") from None
    # The durations too, here: a command that reads the configuration refuses a bad one before it writes
    # anything (a `run` once submitted its job, then stopped at the notifier's timeout).
    wrong = check_table(config.sandbox, "sandbox")
    if wrong:
        raise BadInput(f"{shown}: {wrong}")
    for name, value in (("audit.timeout", config.audit.timeout), ("notify.timeout", config.notify.timeout)):
        try:
            parse_duration(value, name)
        except BadInput as exc:
            raise BadInput(f"{shown}: {exc}") from None
    return config


def worktree_root(workdir: Path | None, common_dir: Path) -> Path:
    """Where this repository's delegation worktrees (and clean checkouts) go: $GITSWARM_WORKTREE_ROOT,
    else `[worktrees] root`, else the per-user state directory (store/worktrees.py)."""
    return default_root(common_dir, load_config(workdir).worktrees.root, workdir)


def skill_roots(workdir: Path | None) -> list[Path]:
    """Where skill folders may be: the repository's working tree and the user's gitswarm folder."""
    user = user_config_dir()
    return [path.resolve() for path in (workdir, user) if path is not None]


def skill_dirs(workdir: Path | None, config: SkillsConfig) -> list[Path]:
    """The configured folders, resolved; BadInput for one outside the repository and the user's folder."""
    roots = skill_roots(workdir)
    found = []
    for n, entry in enumerate(config.dirs):
        path = Path(entry).expanduser()
        if not path.is_absolute():
            if workdir is None:
                raise BadInput(f"[skills] dirs[{n}]: {entry!r} is relative, and there is no working tree")
            path = workdir / path
        resolved = path.resolve()
        if not any(resolved.is_relative_to(root) for root in roots):
            shown = " or ".join(str(root) for root in roots)
            raise BadInput(f"[skills] dirs[{n}]: {entry!r} is outside the repository and the user's gitswarm folder ({shown})")
        found.append(resolved)
    return found
