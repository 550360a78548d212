"""A worker's SIGTERM (engine/child_signals.py): it stops the process even when it lands inside a finalizer."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import os, signal, time
from gitswarm.engine.child_signals import stop_on_sigterm

class Finalized:
    def __del__(self):  # as a finished Popen's __del__, run by the collector when the signal comes
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # the handler runs here, inside the finalizer

stop_on_sigterm()
try:
    Finalized()
    time.sleep(3)
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted")
"""


def test_a_sigterm_inside_a_finalizer_still_stops_the_process_and_prints_no_traceback() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "interrupted", done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
