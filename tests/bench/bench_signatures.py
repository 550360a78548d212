"""What signing every push of `work --remote` costs, and checking every pulled lease op.

    python tests/bench/bench_signatures.py [--commits N]

A machine signs each commit it offers (store/machine_key.py, in process) and
a pull verifies the signature of each pulled commit that carries lease
operations (store/pulled_jobs.py). Figures, medians per commit over N:
an unsigned commit (the baseline: what a commit cost before), a signed one,
and one verification; and the spawn this avoids, `ssh-keygen -Y sign` of the
same bytes (git's own way to sign a commit with SSH), measured in the same
run. The last row: the verification a pull of 100 jobs x 100 lease
operations adds (10,000 commits), against the 2 s that pull must stay under
(issue 28).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gitswarm.store import sshsig
from gitswarm.store.git import init_repo
from gitswarm.store.machine_key import MachineKey
from tests.bench.benchlib import isolate, print_table, scratch_dir

PULL_COMMITS = 100 * 100


def per_commit(times: list[float]) -> float:
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=2000)
    args = parser.parse_args()
    isolate()
    root = Path(scratch_dir("bench-signatures-"))
    repo = init_repo(root / "repo")
    machine = MachineKey(repo.common_dir)
    tree = repo.update_tree(None, {"state": repo.write_blob(b"{}")})
    who = ("gitswarm", "bench@gitswarm")
    unsigned, signed, verified, oids = [], [], [], []
    for n in range(args.commits):  # interleaved, so that both see the same machine
        message = f"claimed t{n}\n\n{{\"op\":\"claimed\",\"n\":{n}}}\n"
        start = time.perf_counter()
        repo.commit(tree, [], message + "u", who, 1.7e9 + n)
        unsigned.append(time.perf_counter() - start)
        start = time.perf_counter()
        oids.append(repo.commit(tree, [], message, who, 1.7e9 + n, machine.sign))
        signed.append(time.perf_counter() - start)
    for oid in oids:
        start = time.perf_counter()
        found = repo.commit_signature(oid)
        assert found is not None and sshsig.verify(*found) == machine.public
        verified.append(time.perf_counter() - start)
    rows = [
        ["unsigned commit (baseline)", f"{per_commit(unsigned):.0f} us", "baseline", ""],
        ["signed commit (in process)", f"{per_commit(signed):.0f} us", f"+{per_commit(signed) - per_commit(unsigned):.0f} us", ""],
        ["signature checked (a pulled commit)", f"{per_commit(verified):.0f} us", "", ""],
    ]
    if shutil.which("ssh-keygen"):
        key = root / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        spawned = []
        for _ in range(20):
            start = time.perf_counter()
            subprocess.run(["ssh-keygen", "-q", "-Y", "sign", "-f", str(key), "-n", "git"], input=b"commit bytes\n",
                           capture_output=True, check=True)
            spawned.append(time.perf_counter() - start)
        ratio = per_commit(spawned) / max(per_commit(signed) - per_commit(unsigned), 1.0)
        rows.append(["ssh-keygen -Y sign, one spawn (what is avoided)", f"{per_commit(spawned) / 1000:.1f} ms", f"{ratio:.0f}x the signing", ""])
    added = per_commit(verified) * PULL_COMMITS / 1e6
    rows.append(["checks a pull of 100 jobs x 100 lease ops adds", f"{added:.2f} s", "", "pull < 2 s in all"])
    print(f"medians of {args.commits} commits")
    print_table(["measure", "value", "ratio", "target"], rows)


if __name__ == "__main__":
    main()
