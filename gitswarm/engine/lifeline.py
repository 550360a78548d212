"""A child process that does not outlive its parent (workers, the remote watch)."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent: int) -> bool:
    """Ask the kernel to SIGTERM this process when its parent dies (Linux); False if it already has.

    SIGTERM, not SIGKILL: the worker must live on long enough to kill its
    adapter's process group, which runs in a session of its own and gets no
    signal. The parent may have died before the request took effect, hence
    the check after it. The signal follows the parent *thread*: fork workers
    from the thread that outlives them. Elsewhere, only the check of the
    parent pid in the worker's loop and heartbeat remains.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGTERM), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
    return os.getppid() == parent


def raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
