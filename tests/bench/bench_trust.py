"""The trust boundary's cost: a merge on a signed verdict, and the pre-push hook.

    python tests/bench/bench_trust.py [--rounds N]

Merge: clone A signs its verdicts with an SSH key (git's gpg.format=ssh,
user.signingkey); it delegates a change whose check passes and pushes the
job, its notes and its branch. Clone B allows A's key, pulls, and times
`gitswarm merge PATCH` (a fast-forward whose counted verdict is A's signed
one: one `ssh-keygen -Y verify`, no check run), start-up included; main is
put back between rounds. Baselines: `python -c pass` and `git merge
--ff-only` of the same commit.

Pre-push: `git push` of a branch no verified pattern matches, with the
hooks installed against the same push with --no-verify (the hook's added
time), and the same for a swarm/* branch with an accepted verdict (the full
hook: the index, the notes, the seal). Medians of N rounds, interleaved.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchlib import isolate, print_table, scratch_dir

ROUNDS = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 15
GITSWARM = str(Path(sys.executable).with_name("gitswarm"))
SPEC = 'goal = "bench"\n[[tasks]]\nid = "fix"\nmode = "implement"\ncommand = "echo good > code.txt"\nchecks = ["grep -qx good code.txt"]\nmax_attempts = 1\n'


def sh(*args: str, cwd: Path | None = None, input: str | None = None) -> str:
    return subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True, input=input).stdout


def timed(*args: str, cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(args, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def signed_clones(root: Path) -> tuple[Path, Path, str]:
    """A bare remote, clone A signing as alice, clone B allowing alice; the patch id."""
    seed = root / "seed"
    sh("git", "init", "-q", "-b", "main", str(seed))
    (seed / "README.md").write_text("hello\n")
    sh("git", "add", "README.md", cwd=seed)
    sh("git", "commit", "-qm", "initial", cwd=seed)
    bare = root / "remote.git"
    sh("git", "clone", "-q", "--bare", str(seed), str(bare))
    a, b = root / "a", root / "b"
    for path in (a, b):
        sh("git", "clone", "-q", str(bare), str(path))
    key = root / "alice"
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "alice", "-f", str(key))
    for name, value in (("gpg.format", "ssh"), ("user.signingkey", str(key)), ("user.email", "alice@example.com")):
        sh("git", "config", name, value, cwd=a)
    allowed = root / "allowed_signers"
    allowed.write_text("alice@example.com " + " ".join(Path(f"{key}.pub").read_text().split()[:2]) + "\n")
    sh("git", "config", "gpg.ssh.allowedSignersFile", str(allowed), cwd=b)
    (a / "job.toml").write_text(SPEC)
    sh(GITSWARM, "run", "job.toml", "-j", "1", cwd=a)
    sh(GITSWARM, "push", cwd=a)
    sh("git", "push", "-q", "origin", "refs/heads/swarm/*:refs/heads/swarm/*", cwd=a)
    sh(GITSWARM, "pull", cwd=b)
    sh("git", "fetch", "-q", "origin", "refs/heads/swarm/*:refs/heads/swarm/*", cwd=b)
    job = sh(GITSWARM, "--json", "status", cwd=b).split('"id":"')[1].split('"')[0]
    artifacts = sh(GITSWARM, "--json", "artifacts", job, cwd=b)
    patch = artifacts.split('"kind":"patch"')[0].rsplit('"id":"', 1)[1].split('"')[0]
    return a, b, patch


def bench_merge(root: Path) -> tuple[float, float, float]:
    _, b, patch = signed_clones(root)
    main = sh("git", "rev-parse", "main", cwd=b).strip()
    sh("git", "checkout", "-q", "--detach", cwd=b)  # main moves by ref; no worktree to update
    ours, spawn, plain = [], [], []
    for _ in range(ROUNDS):
        spawn.append(timed(sys.executable, "-c", "pass", cwd=b))
        ours.append(timed(GITSWARM, "merge", patch, "--into", "main", cwd=b))
        merged = sh("git", "rev-parse", "main", cwd=b).strip()
        sh("git", "update-ref", "refs/heads/main", main, merged, cwd=b)
        sh("git", "branch", "-q", "-f", "bench-ff", main, cwd=b)
        plain.append(timed("git", "-C", str(b), "fetch", "-q", ".", f"{merged}:refs/heads/bench-ff", cwd=b))
    return statistics.median(ours), statistics.median(spawn), statistics.median(plain)


def pushing_repo(root: Path) -> Path:
    bare = root / "push-remote.git"
    sh("git", "init", "-q", "--bare", str(bare))
    repo = root / "pushing"
    sh("git", "init", "-q", "-b", "main", str(repo))
    (repo / ".gitswarm.toml").write_text('[audit]\nchecks = ["true"]\n[hooks]\naudit_branches = []\n')
    sh("git", "add", ".gitswarm.toml", cwd=repo)
    sh("git", "commit", "-qm", "initial", cwd=repo)
    sh("git", "remote", "add", "origin", str(bare), cwd=repo)
    sh(GITSWARM, "hooks", "install", cwd=repo)
    sh("git", "branch", "swarm/x", cwd=repo)
    sh(GITSWARM, "audit", "swarm/x", cwd=repo)
    return repo


def bench_pre_push(root: Path) -> dict[str, float]:
    repo = pushing_repo(root)
    found: dict[str, list[float]] = {k: [] for k in ("plain", "plain-hook", "swarm", "swarm-hook")}
    for n in range(ROUNDS):
        for branch, key in (("main", "plain"), ("swarm/x", "swarm")):
            for hooked in (False, True):
                target = f"refs/heads/bench/{key}-{n}-{int(hooked)}" if key == "plain" else f"refs/heads/swarm/b{n}{int(hooked)}"
                args = ["git", "push", "-q", "origin", f"{branch}:{target}"] + ([] if hooked else ["--no-verify"])
                found[key + ("-hook" if hooked else "")].append(timed(*args, cwd=repo))
    return {k: statistics.median(v) for k, v in found.items()}


def main() -> None:
    isolate()
    root = Path(scratch_dir("bench-trust-"))
    merge, spawn, plain = bench_merge(root / "merge")
    push = bench_pre_push(root / "push")
    added_plain = push["plain-hook"] - push["plain"]
    added_swarm = push["swarm-hook"] - push["swarm"]
    rows = [
        ("python -c pass (baseline)", f"{spawn * 1000:.0f} ms", "baseline", ""),
        ("git fast-forward of the same commit (baseline)", f"{plain * 1000:.0f} ms", "", ""),
        ("gitswarm merge on a signed, counted verdict", f"{merge * 1000:.0f} ms", f"{merge / spawn:.1f}x spawn", "< 300 ms"),
        ("git push, no verified branch, --no-verify (baseline)", f"{push['plain'] * 1000:.0f} ms", "baseline", ""),
        ("  + the pre-push hook", f"+{added_plain * 1000:.0f} ms", f"{push['plain-hook'] / push['plain']:.2f}x", "< +100 ms"),
        ("git push of swarm/*, --no-verify (baseline)", f"{push['swarm'] * 1000:.0f} ms", "baseline", ""),
        ("  + the pre-push hook (accepted verdict)", f"+{added_swarm * 1000:.0f} ms", f"{push['swarm-hook'] / push['swarm']:.2f}x", "< +300 ms"),
    ]
    print(f"medians of {ROUNDS} rounds")
    print_table(("measure", "value", "ratio", "target"), rows)


if __name__ == "__main__":
    main()
