"""The transport: fetch and push through the git CLI (credentials, ssh config, atomic push).

`GitTransport` is the one implementation of `gitrepo.Transport`. Commands run
with gitcli's pinned environment (no prompts, no pager, no inherited GIT_DIR).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from gitswarm.store.gitcli import git, git_run, said
from gitswarm.store.gitrepo import PushResult

# No automatic gc in the middle of a fetch (git would start one once gitswarm's loose
# objects pass gc.auto): housekeeping is left to the user's own git commands.
NO_HOUSEKEEPING = ("-c", "gc.auto=0", "-c", "maintenance.auto=false")
# A clone holds a ref per job: the default negotiation offers commits of every one, round after round
# (18 rounds, 0.16-0.21 s, for 100 diverged jobs in tests/bench/bench_share.py); skipping takes 8, 0.06 s.
SKIPPING_NEGOTIATION = ("-c", "fetch.negotiationAlgorithm=skipping")
# Protocol v0: the remote advertises its refs as it answers, and the fetch follows in the same exchange. v2 (git's
# default) asks for them first, filtered by prefix: a round trip more, ~45 ms a fetch on loopback
# (tests/bench/bench_machines.py), 9 ms against 53 for one that brings nothing. Its filter saves the advertisement of
# refs outside refs/swarm/, which every push (always v0) pays anyway: a machine that pushes a claim per task and
# fetches between them pays it at most twice over.
ONE_ROUND_TRIP = ("-c", "protocol.version=0")
# `git push --porcelain` flags of a ref that moved: fast-forwarded, forced, created.
_MOVED_FLAGS = ("*", "+", " ")


class GitTransport:
    """Fetch and push for the repository whose work tree (or git dir) is `repo_dir`."""

    def __init__(self, repo_dir: Path) -> None:
        self.repo_dir = repo_dir

    def remote_names(self) -> list[str]:
        """The remotes configured here, by name (`git remote`)."""
        return git(["remote"], self.repo_dir).decode().split()

    def fetch(self, remote: str, refspecs: Sequence[str], one_round_trip: bool = False) -> None:
        """`git fetch --prune --no-tags` of `refspecs` from `remote`, writing no FETCH_HEAD and starting no gc;
        GitCommandError when it fails. `one_round_trip`: in protocol v0 (ONE_ROUND_TRIP), for a fetch that
        comes again and again between pushes (`work --remote`)."""
        args = ["fetch", "--quiet", "--no-tags", "--prune", "--no-write-fetch-head", remote, *refspecs]
        git([*NO_HOUSEKEEPING, *SKIPPING_NEGOTIATION, *(ONE_ROUND_TRIP if one_round_trip else ()), *args], self.repo_dir)

    def push(self, remote: str, refspecs: Sequence[str]) -> PushResult:
        """`git push --atomic --porcelain`, never forced: all the refs move or none does."""
        done = git_run(["push", "--atomic", "--porcelain", remote, *refspecs], self.repo_dir)
        lines = done.stdout.decode(errors="replace").splitlines()
        rejected = tuple(line for line in lines if line.startswith("!"))
        if done.returncode != 0:
            return PushResult(ok=False, pushed=(), rejected=rejected, said=said(done.stderr))
        # `<flag>\t<from>:<to>\t<summary>`: the ref pushed is <to> (<from> may be a commit id)
        pushed = tuple(line.split("\t")[1].split(":")[-1] for line in lines if line[:1] in _MOVED_FLAGS)
        return PushResult(ok=True, pushed=pushed, rejected=rejected, said="")

    def offer(self, remote: str, updates: Mapping[str, str], expect: Mapping[str, str | None] | None = None) -> PushResult:
        """Push commits by id (`updates`: remote ref -> commit) all or none, in one connection.

        A ref not in `expect` moves only as a fast-forward (the remote's
        compare-and-swap: a push built on a tip the remote no longer has is
        refused). A ref in `expect` moves only if the remote still holds the
        commit given there (None: only if it has no such ref): a compare-and-swap
        for a branch a new attempt reset. Used by `work --remote`.
        """
        # --no-verify: only refs/swarm/* are offered, which the pre-push gate never gates (engine/sharing/push_gate.py);
        # its interpreter start-up would be paid on every claim.
        if any(not ref.startswith("refs/swarm/") for ref in updates):
            raise ValueError("only refs under refs/swarm/ are offered")
        leases = [f"--force-with-lease={ref}:{old or ''}" for ref, old in sorted((expect or {}).items())]
        specs = [f"{new}:{ref}" for ref, new in updates.items()]
        done = git_run([*NO_HOUSEKEEPING, "push", "--atomic", "--porcelain", "--no-verify", *leases, remote, *specs], self.repo_dir)
        lines = done.stdout.decode(errors="replace").splitlines()
        rejected = tuple(line for line in lines if line.startswith("!"))
        if done.returncode != 0:
            return PushResult(ok=False, pushed=(), rejected=rejected, said=said(done.stderr))
        return PushResult(ok=True, pushed=tuple(updates), rejected=(), said="")
