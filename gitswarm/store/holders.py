"""Who holds a lease: this process as a `Holder`, and whether a holder on this machine is alive.

A worker's claim records its holder (model/ops.py, `Holder`): the host name,
what a pid means something in (on Linux, the kernel's boot id and the pid
namespace, so that a container sharing the repository never judges another's
pids), the pid and the process's start time. A holder on this machine whose
process is gone, a zombie, or a different process under the same pid (its
start time differs) is dead: its lease is released at once, without waiting
for it to run out. A holder elsewhere is never judged by its pid: its lease
runs out by its deadline, as before. Where /proc is not there, the boot and
the start time are unknown: a holder is judged only when its host name is
this one's, and only a pid that no longer exists counts as dead (a reused pid
looks alive, which only means waiting for the deadline).
"""

from __future__ import annotations

import enum
import os
from functools import cache
from pathlib import Path

from gitswarm.model.ops import Holder

PROC = Path("/proc")
_GONE = ("Z", "X")  # a zombie (dead, not yet reaped) and a task being torn down
_process: tuple[int, Holder] | None = None  # (pid, its Holder): a forked worker works out its own


class Liveness(enum.Enum):
    ALIVE = "alive"
    DEAD = "dead"
    ELSEWHERE = "elsewhere"  # another machine's (or unknown): not judged here


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _boot() -> str:
    """What a pid is relative to here: the boot id and the pid namespace's inode; "" where unknown."""
    boot = _read(PROC / "sys" / "kernel" / "random" / "boot_id")
    if not boot:
        return ""
    try:
        namespace = os.readlink(PROC / "self" / "ns" / "pid")  # "pid:[4026531836]"
    except OSError:
        return ""
    return f"{boot}/{namespace.removeprefix('pid:[').removesuffix(']')}"


@cache
def this_machine() -> tuple[str, str]:
    """(host name, boot): where a pid means something."""
    return os.uname().nodename or "localhost", _boot()


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks after boot) of a process, from /proc/<pid>/stat; None when it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) may hold spaces and parentheses: the fields that follow come after the last ')'.
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[19])  # fields 3 and 22 of proc(5)


def process_holder(pid: int) -> Holder:
    """A process of this machine as a lease's holder (its start time 0 where it cannot be read)."""
    host, boot = this_machine()
    try:
        stat = _stat(pid) if boot else None
    except (OSError, ValueError, IndexError):
        stat = None
    return Holder(host=host, boot=boot, pid=pid, start=stat[1] if stat else 0)


def this_process() -> Holder:
    """This process as the holder of what it claims (worked out once per process: a fork is another)."""
    global _process
    pid = os.getpid()
    if _process is None or _process[0] != pid:
        _process = (pid, process_holder(pid))
    return _process[1]


def here(holder: Holder) -> bool:
    """Whether the holder is a process of this machine, where its pid can be judged."""
    return (holder.host, holder.boot) == this_machine()


def liveness(holder: Holder | None) -> Liveness:
    """ALIVE or DEAD for a holder on this machine; ELSEWHERE for another machine's or an unknown one."""
    if holder is None or holder.pid <= 0 or not here(holder):
        return Liveness.ELSEWHERE
    if holder.boot and holder.start:
        try:
            stat = _stat(holder.pid)
        except (OSError, ValueError, IndexError):  # unreadable: no verdict, the lease runs out instead
            return Liveness.ELSEWHERE
        if stat is not None:
            gone = stat[0] in _GONE or stat[1] != holder.start
            return Liveness.DEAD if gone else Liveness.ALIVE
        # Not in /proc: gone, unless /proc hides other users' processes (hidepid), which kill(0) does not.
    return Liveness.ALIVE if _exists(holder.pid) else Liveness.DEAD


def _exists(pid: int) -> bool:
    """Whether a process has this pid (another user's too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def describe(holder: Holder) -> str:
    """`pid 812 on this host`, or `pid 812 on host ada` for another machine's."""
    return f"pid {holder.pid} on this host" if here(holder) else f"pid {holder.pid} on host {holder.host}"


def recorded(holder: Holder) -> str:
    """`pid 812 on host ada`: how a record names the holder, for whoever reads it on any machine."""
    return f"pid {holder.pid} on host {holder.host}"
