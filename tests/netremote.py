"""A real network remote on loopback: `git daemon` serving one bare repository, receive-pack on.

Used by the many-machines tests and benchmark: each "machine" is a clone with
its own home, talking to `git://127.0.0.1:PORT/swarm.git` the way a team's
clones talk to their hosting service. The daemon can be stopped and started
again on the same port (the remote down mid-run).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class GitDaemon:
    """`git daemon` on 127.0.0.1 serving `root/swarm.git` (created bare, with `seed` pushed to it)."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.env = env
        self.bare = root / "swarm.git"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(self.bare)], check=True, env=env)

    @property
    def url(self) -> str:
        return f"git://127.0.0.1:{self.port}/swarm.git"

    def start(self) -> None:
        # git-daemon itself rather than `git daemon` (which runs it as a child): the process is then the daemon,
        # and its rusage (cpu_seconds) covers every connection it reaped.
        exec_path = subprocess.run(["git", "--exec-path"], capture_output=True, text=True, check=True, env=self.env).stdout.strip()
        daemon = Path(exec_path) / "git-daemon"
        self.process = subprocess.Popen(
            [
                *([str(daemon)] if daemon.exists() else ["git", "daemon"]), "--reuseaddr", "--export-all", "--enable=receive-pack", "--informative-errors",
                f"--base-path={self.root}", "--listen=127.0.0.1", f"--port={self.port}", str(self.root),
            ],
            env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.02)
        raise RuntimeError("git daemon did not start listening")

    def cpu_seconds(self) -> float:
        """CPU time of the daemon and of every connection it served and reaped (Linux /proc; 0.0 elsewhere)."""
        try:
            fields = Path(f"/proc/{self.process.pid if self.process else 0}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime, stime, cutime, cstime

    def stop(self) -> None:
        """Stop the daemon and every connection it serves (it forks one process per connection)."""
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        self.process = None
