"""A child process that does not outlive its parent (workers, the remote watch)."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
REDELIVER_SECONDS = 0.01
# Loaded once, in the process that forks: each child then only makes the call (loading libc costs ~1.5 ms).
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def die_with_parent(parent: int) -> bool:
    """Ask the kernel to SIGTERM this process when its parent dies (Linux); False if it already has.

    SIGTERM, not SIGKILL: the worker must live on long enough to kill its
    adapter's process group, which runs in a session of its own and gets no
    signal. The parent may have died before the request took effect, hence
    the check after it. The signal follows the parent *thread*: fork workers
    from the thread that outlives them. Elsewhere, only the check of the
    parent pid in the worker's loop and heartbeat remains.
    """
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGTERM), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
    return os.getppid() == parent


def raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def stop_on_sigterm() -> None:
    """SIGTERM raises KeyboardInterrupt in this process, which stops it as Ctrl-C does.

    Raised while a finalizer runs (a finished Popen's __del__, called by the
    collector), the interrupt is swallowed by Python, which prints a traceback
    and goes on as if no signal came: the signal is sent again a moment
    later instead, to land outside the finalizer, and nothing is printed.
    """
    signal.signal(signal.SIGTERM, raise_interrupt)
    sys.unraisablehook = _redeliver_interrupt


def _redeliver_interrupt(unraisable: sys.UnraisableHookArgs) -> None:
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        # From a thread, a moment later: sent from here it would be handled here, inside the hook, and
        # swallowed again. Should it still land too early, this hook sends it once more.
        resend = threading.Timer(REDELIVER_SECONDS, os.kill, (os.getpid(), signal.SIGTERM))
        resend.daemon = True
        resend.start()
        return
    sys.__unraisablehook__(unraisable)
